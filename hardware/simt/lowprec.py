"""``cvt`` to and from the packed low-precision forms: FP8, FP6, FP4 and UE8M0 pairs.

PTX ISA 9.0, section 9.7.9.21 (``cvt``), the forms nvcc emits for ``cuda_fp8.h``,
``cuda_fp6.h`` and ``cuda_fp4.h`` on sm_89 and later::

    cvt.rn.satfinite{.relu}.f8x2type.f32      d, a, b;   // e4m3x2, e5m2x2       (sm_89)
    cvt.rn.satfinite{.relu}.f8x2type.f16x2    d, a;      //                      (sm_89)
    cvt.rn.satfinite{.relu}.f8x2type.bf16x2   d, a;      //                      (sm_100)
    cvt.rn{.relu}.f16x2.f8x2type              d, a;      // float(__nv_fp8_e4m3) (sm_89)
    cvt.rn{.relu}.bf16x2.{f8x2,f6x2,f4x2}type d, a;      // PTX ISA 9.2, unscaled
    cvt.rn.satfinite{.relu}.f6x2type.f32      d, a, b;   // e2m3x2, e3m2x2       (sm_100)
    cvt.rn{.relu}.f16x2.f6x2type              d, a;
    cvt.rn.satfinite{.relu}.e2m1x2.f32        d, a, b;   // d is .b8             (sm_100)
    cvt.rn{.relu}.f16x2.e2m1x2                d, a;      // a is .b8
    cvt.{rz,rp}{.satfinite}.ue8m0x2.f32       d, a, b;   //                      (sm_100)
    cvt.{rz,rp}{.satfinite}.ue8m0x2.bf16x2    d, a;
    cvt.rn.bf16x2.ue8m0x2                     d, a;
    cvt.rna{.satfinite}.tf32.f32              d, a;      // wmma::__float_to_tf32 (sm_80)
    cvt.{rn,rz}{.satfinite}{.relu}.tf32.f32   d, a;      //                      (sm_90)

Packing (the ISA's semantics block): from two sources, ``a`` goes to the HIGH element and
``b`` to the low one; from a packed source, the high element converts into the high half
of ``d``. FP6 elements sit in the low 6 bits of each byte (the top 2 bits zero).

Special values (checked against NVIDIA's host emulation in ``cuda_fp8.hpp``,
``cuda_fp6.hpp`` and ``cuda_fp4.hpp``):

- every narrowing conversion rounds once, from the exact source value, to nearest even
  (``.rn``) through :func:`refimpl.formats.encode`;
- ``.satfinite`` (mandatory for FP8/FP6/FP4 destinations): a finite value beyond the
  format's largest one, and +-Inf, become +-MAX_NORM; NaN becomes the canonical FP8 NaN
  0x7F, and +MAX_NORM for FP6/FP4 (those formats have no NaN);
- ``.relu``: a negative value becomes +0 (NaN is kept, as above);
- widening to f16/bf16 is exact; an FP8 NaN becomes the canonical 0x7FFF;
- UE8M0 takes the magnitude (the sign is ignored): ``.rz`` the largest power of two not
  above it, ``.rp`` the smallest not below it, both clamped below at 2**-127 (code 0, also
  for zero); NaN gives 0xFF; a result beyond 2**127 (and +-Inf) gives 0xFF, or 0xFE with
  ``.satfinite``. 0xFF widens to the bf16 NaN 0x7FFF, 0x00 to 2**-127 (0x0040).

TF32 results are .b32 registers holding the f32 bits of the rounded value (the low 13
bits zero); ``.rna`` rounds to nearest with ties away from zero; without ``.satfinite``
an overflow gives +-Inf, with it +-MAX_NORM; NaN gives the canonical 0x7FFFFFFF.

The stochastic-rounding ``.rs`` x4 forms are refused.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from refimpl import formats
from refimpl.rounding_modes import PTX_MODIFIERS

from .errors import UnsupportedPtxError
from .isa.operands import Op, getter, setter
from .parser import Instruction
from .types import TYPES

__all__ = ["PACKED", "X4", "compile_cvt"]

#: packed PTX type -> (refimpl format, element bits in the container, container bits)
PACKED = {
    "e4m3x2": ("e4m3", 8, 16), "e5m2x2": ("e5m2", 8, 16),
    "e2m3x2": ("e2m3", 8, 16), "e3m2x2": ("e3m2", 8, 16),
    "e2m1x2": ("e2m1", 4, 8), "ue8m0x2": ("e8m0", 8, 16),
}
X4 = ("e4m3x4", "e5m2x4", "e2m3x4", "e3m2x4", "e2m1x4")
_HALF2 = {"f16x2": "fp16", "bf16x2": "bf16"}
#: the value a NaN becomes (.satfinite): the canonical FP8 NaN, +MAX_NORM without NaN
_NAN_CODE = {"e4m3": 0x7F, "e5m2": 0x7F, "e2m3": 0x1F, "e3m2": 0x1F, "e2m1": 0x7}


def _unsupported(inst: Instruction, why: str) -> UnsupportedPtxError:
    return UnsupportedPtxError(f"line {inst.line}: {inst.text!r}: {why}")


def _encode(x: np.ndarray, fmt: str, rounding: str, sat: bool, nan: int) -> np.ndarray:
    return formats.encode(np.asarray(x, np.float64), fmt, rounding=rounding, saturate=sat,
                          nan=nan).astype(np.uint32)


def _decode(codes: np.ndarray, fmt: str) -> np.ndarray:
    return formats.decode(np.asarray(codes), fmt).astype(np.float64)


def _modifier(inst: Instruction) -> str:
    """The PTX rounding modifier (``rn``, ``rna``, ...) of the instruction: the PTX text
    this module validates; the kernels get its canonical name (``PTX_MODIFIERS``)."""
    modes = [p for p in inst.parts[1:] if p in PTX_MODIFIERS]
    if len(modes) != 1:
        raise _unsupported(inst, "cvt to or from a packed low-precision type needs one "
                                 "rounding modifier")
    return modes[0]


def compile_cvt(inst: Instruction, ctx: Any) -> Op:
    """Compile a ``cvt`` whose destination or source is a packed low-precision type."""
    parts = inst.parts[1:]
    if "tf32" in parts:
        return _to_tf32(inst, ctx)
    if any(p in X4 for p in parts):
        raise _unsupported(inst, "the .rs x4 conversions with random bits are not supported")
    names = [p for p in parts if p in PACKED or p in _HALF2 or p == "f32"]
    if len(names) != 2:
        raise _unsupported(inst, "cvt needs a destination and a source type")
    dname, sname = names
    mode = _modifier(inst)
    relu = "relu" in parts
    sat = "satfinite" in parts
    known = {"rn", "rz", "rp", "relu", "satfinite", dname, sname}
    extra = [p for p in parts if p not in known]
    if extra:
        raise _unsupported(inst, f"modifier .{extra[0]} is not supported here")
    if dname in PACKED:
        fmt, _, cbits = PACKED[dname]
        if fmt == "e8m0":
            if mode not in ("rz", "rp") or relu:
                raise _unsupported(inst, "cvt to .ue8m0x2 takes .rz or .rp (and no .relu)")
        elif mode != "rn" or not sat:
            raise _unsupported(inst, f"cvt to .{dname} needs .rn.satfinite")
        rounding = PTX_MODIFIERS[mode].value  # the modifier's mode, mapped once here
        if sname == "f32":
            return _narrow_pair(inst, ctx, fmt, cbits, rounding, sat, relu)
        if sname in _HALF2 and (fmt in ("e4m3", "e5m2") or (fmt == "e8m0" and sname == "bf16x2")):
            return _narrow_packed(inst, ctx, _HALF2[sname], fmt, cbits, rounding, sat, relu)
        raise _unsupported(inst, f"cvt from .{sname} to .{dname} does not exist")
    if sname in PACKED:
        fmt, _, cbits = PACKED[sname]
        if mode != "rn" or sat:
            raise _unsupported(inst, f"cvt from .{sname} takes .rn (and no .satfinite)")
        # FP8/FP6/FP4 pairs widen to .f16x2, and since PTX ISA 9.2 to .bf16x2 (the
        # .scaled::n2::ue8m0 form is refused: no modifier outside `known` passes)
        want = ("bf16x2",) if fmt == "e8m0" else ("f16x2", "bf16x2")
        if dname not in want or (relu and fmt == "e8m0"):
            raise _unsupported(inst, f".{sname} converts to .{' or .'.join(want)} only")
        return _widen(inst, ctx, fmt, cbits, _HALF2[dname], relu)
    raise _unsupported(inst, "not a packed low-precision conversion")


def _to_tf32(inst: Instruction, ctx: Any) -> Op:
    parts = inst.parts[1:]
    mode = _modifier(inst)
    extra = [p for p in parts if p not in ("rna", "rn", "rz", "satfinite", "relu", "tf32",
                                           "f32")]
    if extra or parts[-2:] != ("tf32", "f32") or mode not in ("rna", "rn", "rz") or \
            (mode == "rna" and "relu" in parts) or len(inst.operands) != 2:
        raise _unsupported(inst, "cvt to .tf32 is cvt.rna{.satfinite}.tf32.f32 or "
                                 "cvt.{rn,rz}{.satfinite}{.relu}.tf32.f32 d, a")
    rounding = PTX_MODIFIERS[mode].value
    sat = "satfinite" in parts
    relu = "relu" in parts
    ga = getter(inst.operands[1], TYPES["f32"], ctx, inst)
    put = setter(inst.operands[0], TYPES["b32"], ctx, inst)

    def fn(ix: Any, ex: Any) -> None:
        x = np.atleast_1d(np.asarray(ga(ix), np.float32)).astype(np.float64)
        if relu:
            x = np.where(x < 0, 0.0, x)
        v = formats.decode(formats.encode(x, "tf32", rounding=rounding, saturate=sat),
                           "tf32").astype(np.float32)
        bits = v.view(np.uint32).copy()
        bits[v != v] = np.uint32(0x7FFFFFFF)
        put(ix, bits)
    return Op(inst, "alu", fn)


def _finish(codes: np.ndarray, x: np.ndarray, relu: bool) -> np.ndarray:
    if relu:  # a negative result is +0; the NaN code stays
        codes = np.where(x < 0, np.uint32(0), codes)
    return codes


def _to_codes(x: np.ndarray, fmt: str, mode: str, sat: bool, relu: bool) -> np.ndarray:
    """Codes of float64 values ``x`` in ``fmt`` under the rules of the module docstring;
    ``mode`` is a canonical name of :mod:`refimpl.rounding_modes`."""
    if fmt == "e8m0":
        return _encode(np.abs(x), "e8m0", mode, sat, 0xFF)
    codes = _encode(x, fmt, "nearest_even", True, _NAN_CODE[fmt])
    return _finish(codes, x, relu)


def _narrow_pair(inst: Instruction, ctx: Any, fmt: str, cbits: int, mode: str, sat: bool,
                 relu: bool) -> Op:
    if len(inst.operands) != 3:
        raise _unsupported(inst, "cvt from two .f32 sources takes d, a, b")
    ga = getter(inst.operands[1], TYPES["f32"], ctx, inst)
    gb = getter(inst.operands[2], TYPES["f32"], ctx, inst)
    put = setter(inst.operands[0], TYPES[f"b{cbits}"], ctx, inst)
    half = np.uint32(cbits // 2)

    def fn(ix: Any, ex: Any) -> None:
        a = np.atleast_1d(np.asarray(ga(ix), np.float32)).astype(np.float64)
        b = np.atleast_1d(np.asarray(gb(ix), np.float32)).astype(np.float64)
        hi = _to_codes(a, fmt, mode, sat, relu)
        lo = _to_codes(b, fmt, mode, sat, relu)
        put(ix, ((hi << half) | lo).astype(np.uint32))
    return Op(inst, "alu", fn)


def _narrow_packed(inst: Instruction, ctx: Any, src_fmt: str, fmt: str, cbits: int,
                   mode: str, sat: bool, relu: bool) -> Op:
    if len(inst.operands) != 2:
        raise _unsupported(inst, "cvt from a packed pair takes d, a")
    ga = getter(inst.operands[1], TYPES["b32"], ctx, inst)
    put = setter(inst.operands[0], TYPES[f"b{cbits}"], ctx, inst)
    half = np.uint32(cbits // 2)

    def fn(ix: Any, ex: Any) -> None:
        v = np.atleast_1d(np.asarray(ga(ix))).astype(np.uint32)
        lo = _decode((v & np.uint32(0xFFFF)).astype(np.uint16), src_fmt)
        hi = _decode((v >> np.uint32(16)).astype(np.uint16), src_fmt)
        out = (_to_codes(hi, fmt, mode, sat, relu) << half) | _to_codes(lo, fmt, mode, sat, relu)
        put(ix, out.astype(np.uint32))
    return Op(inst, "alu", fn)


def _widen(inst: Instruction, ctx: Any, fmt: str, cbits: int, dst_fmt: str,
           relu: bool) -> Op:
    if len(inst.operands) != 2:
        raise _unsupported(inst, "cvt to a packed pair takes d, a")
    ga = getter(inst.operands[1], TYPES[f"b{cbits}"], ctx, inst)
    put = setter(inst.operands[0], TYPES["b32"], ctx, inst)
    width = cbits // 2
    emask = np.uint32((1 << width) - 1)
    used = np.uint32((1 << {"e2m3": 6, "e3m2": 6}.get(fmt, width)) - 1)
    canonical = 0x7FFF

    def element(c: np.ndarray) -> np.ndarray:
        x = _decode(c.astype(np.uint8), fmt)
        if relu:
            x = np.where(x < 0, 0.0, x)
        return formats.encode(x, dst_fmt, nan=canonical).astype(np.uint32)

    def fn(ix: Any, ex: Any) -> None:
        v = np.atleast_1d(np.asarray(ga(ix))).astype(np.uint32)
        lo = v & emask
        hi = (v >> np.uint32(width)) & emask
        if ((lo & ~used) | (hi & ~used)).any():
            ctx.fault_here(inst, f"a .{fmt} element has non-zero padding bits (the PTX "
                                 "ISA requires the top 2 bits of each byte to be zero)")
        put(ix, element(lo) | (element(hi) << np.uint32(16)))
    return Op(inst, "alu", fn)
