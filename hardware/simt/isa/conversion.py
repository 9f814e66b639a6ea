"""Conversion (PTX ISA 9.0, 9.7.9.21 cvt and 9.7.9.20 cvta).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from refimpl import formats

from .. import rounding
from ..lowprec import PACKED, X4, compile_cvt
from ..parser import Instruction
from ..types import TYPES
from .operands import (Op, _ftz32, _int_mode, _mode, _nops, _one_type, _sat, _u,
                       _unsupported, getter, setter)


def c_cvta(inst: Instruction, ctx: Any) -> Op:
    """cvta[.to].space.size (9.7.9.18): between a space's addresses and generic ones."""
    t = _one_type(inst)
    _nops(inst, 2)
    to = "to" in inst.parts
    space = next((p for p in inst.parts if p in ("global", "shared", "local", "const",
                                                 "param")), None)
    if space == "param" and not to:
        # cvta.param (PTX ISA 9.7.9.18, sm_70+): the generic address of a kernel
        # parameter is its .param address (its offset in the parameter buffer, below
        # every global allocation): tensor-map operands take it
        # (hardware.simt.tma); a generic ld/st of it is a fault
        space, base = "param", 0
    elif space not in ("global", "shared", "local", "const"):
        raise _unsupported(inst, f"cvta{'.to' if to else ''} for .{space} is not supported")
    else:
        base = ctx.window(space)
    u = _u(t)
    src_t = TYPES[f"u{t.bits}"]
    get = getter(inst.operands[1], src_t, ctx, inst)
    put = setter(inst.operands[0], src_t, ctx, inst)
    if base == 0:
        return Op(inst, "alu", lambda ix, ex: put(ix, get(ix)))
    b = u.type(base % (1 << t.bits))
    if to:
        return Op(inst, "alu", lambda ix, ex: put(ix, np.subtract(get(ix), b, dtype=u)))
    return Op(inst, "alu", lambda ix, ex: put(ix, np.add(get(ix), b, dtype=u)))


_LOWP = {"f16": "fp16", "bf16": "bf16"}
#: the modifiers of a scalar cvt (PTX ISA 9.7.9.21): .frnd, .irnd, .ftz, .sat, .satfinite
#: and .relu; the packed and .tf32 forms have their own in :mod:`..lowprec`
_SCALAR_CVT_MODIFIERS = frozenset({"rn", "rz", "rm", "rp", "rni", "rzi", "rmi", "rpi", "ftz",
                                   "sat", "satfinite", "relu"})


def _encode(x: np.ndarray, fmt: str, mode: str, sat: bool) -> np.ndarray:
    # ``mode``: a canonical name of refimpl.rounding_modes (the compilers map the PTX
    # modifier once); NVIDIA's canonical NaN codes: 0x7FFF for f16/bf16, 0x7F for both
    # FP8 formats
    nan = 0x7FFF if fmt in ("fp16", "bf16") else 0x7F
    return formats.encode(np.asarray(x), fmt, rounding=mode, saturate=sat, nan=nan)


def _decode(codes: np.ndarray, fmt: str) -> np.ndarray:
    return formats.decode(np.asarray(codes), fmt)


def c_cvt(inst: Instruction, ctx: Any) -> Op:
    """cvt.frnd/irnd{.ftz}{.sat}.dtype.atype (9.7.9.21), incl. f16/bf16 and f16x2/bf16x2
    from two .f32; the packed FP8/FP6/FP4/UE8M0 forms are in :mod:`.lowprec`."""
    parts = inst.parts[1:]
    if any(p in PACKED or p in X4 or p == "tf32" for p in parts):
        return compile_cvt(inst, ctx)
    names = [p for p in parts if p in TYPES or p in _LOWP]
    if len(names) != 2:
        raise _unsupported(inst, "cvt needs a destination and a source type")
    unknown = [p for p in parts if p not in TYPES and p not in _LOWP
               and p not in _SCALAR_CVT_MODIFIERS]
    if unknown:  # e.g. .rna, which PTX defines for the .tf32 destination only
        raise _unsupported(inst, "cvt modifier " + ", ".join(f".{p}" for p in unknown)
                           + " is not defined for this conversion (PTX ISA 9.7.9.21)")
    dname, sname = names
    if dname in ("f16x2", "bf16x2"):
        return _cvt_half2(inst, ctx, dname, sname)
    if sname in ("f16x2", "bf16x2"):
        raise _unsupported(inst, f"cvt from .{sname}")
    d, s = TYPES[dname], TYPES[sname]
    _nops(inst, 2)
    sat = "sat" in parts
    satfinite = "satfinite" in parts
    ftz = "ftz" in parts
    relu = "relu" in parts
    if relu and not (s.kind == "f" and dname in ("f16", "bf16")):
        raise _unsupported(inst, ".relu is supported for conversions to .f16/.bf16 only")
    fmode = _mode(inst, "")
    imode = _int_mode(inst)
    get = getter(inst.operands[1], s, ctx, inst)
    put = setter(inst.operands[0], d, ctx, inst)
    lowp = {"f16": "fp16", "bf16": "bf16"}

    def src_float(ix: Any) -> np.ndarray:
        v = np.asarray(get(ix))
        if sname in lowp:
            return _decode(np.atleast_1d(v).astype(np.uint16), lowp[sname]).astype(np.float64)
        x = v.astype(np.float64)
        if ftz and s.bits == 32:
            x = np.where(np.abs(x) < 2.0**-126, np.copysign(0.0, x), x)
        return x

    if s.kind == "f" and d.kind == "f":
        if dname in lowp:
            mode = fmode or "nearest_even"

            def to_lowp(ix: Any, ex: Any) -> None:
                x = src_float(ix)
                if relu:  # PTX ISA cvt .relu: negative results clamp to +0, NaN stays NaN
                    x = np.where(x < 0, 0.0, x)
                if sat:
                    x = np.where(np.isnan(x), 0.0, np.clip(x, 0.0, 1.0))
                put(ix, _encode(np.atleast_1d(x) if s.bits == 64 else
                                np.atleast_1d(x).astype(np.float32), lowp[dname], mode,
                                satfinite).astype(np.uint16))
            return Op(inst, "alu", to_lowp)
        if d.bits >= s.bits or sname in lowp:
            # widening: exact (PTX: .rnd not allowed; ignored when given)
            def widen(ix: Any, ex: Any) -> None:
                x = src_float(ix)
                if sat:
                    x = np.where(np.isnan(x), 0.0, np.clip(x, 0.0, 1.0))
                if ftz and d.bits == 32:
                    x = np.where(np.abs(x) < 2.0**-126, np.copysign(0.0, x), x)
                put(ix, x.astype(d.dtype))
            if imode and d.bits == s.bits:
                rnd = rounding.INT_ROUND[imode]

                def round_int(ix: Any, ex: Any) -> None:
                    x = rnd(src_float(ix))
                    if sat:
                        x = np.where(np.isnan(x), 0.0, np.clip(x, 0.0, 1.0))
                    put(ix, x.astype(d.dtype))
                return Op(inst, "alu", round_int)
            return Op(inst, "alu", widen)
        mode = fmode or "nearest_even"

        def narrow(ix: Any, ex: Any) -> None:
            x = src_float(ix)
            r = rounding.round64_to32(x, 0, mode)
            if ftz:
                r = _ftz32(r)
            if sat:
                r = _sat(r, np.dtype(np.float32))
            put(ix, r)
        return Op(inst, "alu", narrow)
    if s.kind == "f":   # float -> integer
        mode = imode or fmode
        if not mode:
            raise _unsupported(inst, "float-to-integer cvt needs .rni/.rzi/.rmi/.rpi")
        kind = "s" if d.signed else "u"

        def f2i(ix: Any, ex: Any) -> None:
            r = rounding.float_to_int(src_float(ix), kind, d.bits, mode)
            put(ix, np.asarray(r).astype(d.dtype))
        return Op(inst, "alu", f2i)
    if d.kind == "f":   # integer -> float
        mode = fmode or "nearest_even"
        if dname in lowp:
            def i2lowp(ix: Any, ex: Any) -> None:
                # round to odd at 53 bits, then once to the 16-bit format (no double
                # rounding for 64-bit integers)
                x = rounding.int_to_float(np.atleast_1d(get(ix)), s.signed, 64, "odd")
                put(ix, _encode(x, lowp[dname], mode, satfinite).astype(np.uint16))
            return Op(inst, "alu", i2lowp)

        def i2f(ix: Any, ex: Any) -> None:
            r = rounding.int_to_float(np.atleast_1d(get(ix)), s.signed, d.bits, mode)
            if sat:
                r = _sat(r, d.dtype)
            put(ix, r)
        return Op(inst, "alu", i2f)
    # integer -> integer: truncate or extend; .sat clamps to the destination range
    if sat:
        lo = -(1 << (d.bits - 1)) if d.signed else 0
        hi = (1 << (d.bits - 1)) - 1 if d.signed else (1 << d.bits) - 1

        def i2i_sat(ix: Any, ex: Any) -> None:
            v = np.atleast_1d(get(ix))
            if v.dtype == np.uint64:
                r = np.minimum(v, np.uint64(hi)) if hi < 2**64 else v
                put(ix, r.astype(_u(d)).view(d.dtype))
                return
            w = v.astype(np.int64)
            if s.kind == "u" and s.bits == 64:
                w = v
            r = np.clip(w, lo, min(hi, 2**63 - 1))
            put(ix, r.astype(np.int64).astype(d.dtype))
        return Op(inst, "alu", i2i_sat)
    wide = np.dtype("int64") if s.signed else np.dtype("uint64")

    def i2i(ix: Any, ex: Any) -> None:
        # sign- or zero-extend the source to 64 bits, then keep the low bits
        v = np.atleast_1d(np.asarray(get(ix)).astype(wide))
        put(ix, v.astype(_u(d)).view(d.dtype))
    return Op(inst, "alu", i2i)


def _cvt_pack2(inst: Instruction, ctx: Any, fmt: str, satf: bool, width: int) -> Op:
    """d = encode(a) in the upper half of the ``width``-bit d, encode(b) in the lower,
    both rounded to nearest even from .f32 (after .relu when given)."""
    relu = "relu" in inst.parts
    ga = getter(inst.operands[1], TYPES["f32"], ctx, inst)
    gb = getter(inst.operands[2], TYPES["f32"], ctx, inst)
    put = setter(inst.operands[0], TYPES[f"b{width}"], ctx, inst)
    u = np.uint16 if width == 16 else np.uint32
    shift = u(width // 2)

    def fn(ix: Any, ex: Any) -> None:
        a = np.atleast_1d(np.asarray(ga(ix), np.float32))
        b = np.atleast_1d(np.asarray(gb(ix), np.float32))
        if relu:  # PTX: negative results clamp to +0; NaN stays NaN
            a = np.where(a < 0, np.float32(0), a)
            b = np.where(b < 0, np.float32(0), b)
        hi = _encode(a, fmt, "nearest_even", satf).astype(u)
        lo = _encode(b, fmt, "nearest_even", satf).astype(u)
        put(ix, (hi << shift) | lo)
    return Op(inst, "alu", fn)


def _cvt_half2(inst: Instruction, ctx: Any, dname: str, sname: str) -> Op:
    """cvt.rn{.relu}{.satfinite}.{f16x2,bf16x2}.f32 d, a, b: a -> upper half, b -> lower."""
    mode = _mode(inst, "")
    if sname != "f32" or mode != "nearest_even" or len(inst.operands) != 3:
        raise _unsupported(inst, f"{dname} conversion needs .rn and two .f32 sources")
    fmt = "fp16" if dname == "f16x2" else "bf16"
    return _cvt_pack2(inst, ctx, fmt, "satfinite" in inst.parts, 32)
