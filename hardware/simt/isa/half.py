"""Half precision floating point (PTX ISA 9.0, 9.7.4): f16/bf16 scalar and .x2
arithmetic, computed exactly and rounded once.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from refimpl.eft import round_to_odd, two_sum

from ..parser import Instruction, Pair
from ..types import TYPES
from .control import _compare
from .conversion import _decode, _encode
from .operands import Op, _mode, _nops, _unsupported, getter, setter


_HALF_FORMATS = {"f16": "fp16", "f16x2": "fp16", "bf16": "bf16", "bf16x2": "bf16"}


_HALF_OPS = ("add", "sub", "mul", "fma", "neg", "abs", "min", "max", "setp")


def _half_arith(op: str, fmt: str, mode: str, codes: list[np.ndarray], ftz: bool,
                sat: bool) -> np.ndarray:
    """add/sub/mul/fma of binary16 or bfloat16 codes, computed exactly and rounded once in
    ``mode``, a canonical name of :mod:`refimpl.rounding_modes`."""
    vals = [_decode(np.atleast_1d(c).astype(np.uint16), fmt).astype(np.float64) for c in codes]
    tiny = 2.0**-14 if fmt == "fp16" else 2.0**-126
    if ftz:
        vals = [np.where(np.abs(v) < tiny, np.copysign(0.0, v), v) for v in vals]
    with np.errstate(invalid="ignore"):
        if op == "mul":
            s, e = vals[0] * vals[1], np.zeros(1)          # exact: <= 22 significand bits
        else:
            if op == "fma":
                x, y = vals[0] * vals[1], vals[2]          # the product is exact
            else:
                x, y = vals[0], (-vals[1] if op == "sub" else vals[1])
            s, e = two_sum(x, y)                           # x + y = s + e exactly
            e = np.where(np.isfinite(s), e, 0.0)
            if mode == "toward_negative":                  # IEEE 754 6.3: exact zero sums
                same = (x == 0) & (y == 0) & (np.signbit(x) == np.signbit(y))
                s = np.where((s == 0) & (e == 0) & ~same, -0.0, s)
    # round to odd at 53 bits, then once to the format: one correct rounding of the
    # exact result (Boldo and Melquiond, IEEE TC 57(4), 2008, Theorem 1)
    s = round_to_odd(s, e)
    if sat:
        s = np.where(np.isnan(s), 0.0, np.clip(s, 0.0, 1.0))
    out = _encode(s, fmt, mode, False).astype(np.uint16)
    if ftz:
        mag = out & np.uint16(0x7FFF)
        sub_max = np.uint16(0x03FF if fmt == "fp16" else 0x007F)
        out = np.where((mag != 0) & (mag <= sub_max), out & np.uint16(0x8000), out)
    return out


def c_half(inst: Instruction, ctx: Any) -> Op:
    """add/sub/mul/fma/neg/abs/min/max/setp on .f16, .bf16 and the packed .f16x2/.bf16x2
    (PTX ISA 9.7.4, half precision): each 16-bit lane computed exactly in float64 and
    rounded once (round-to-odd, then the format codec); NaN results are the canonical
    NaN 0x7FFF. Packed forms act on the low and high halves independently."""
    op = inst.parts[0]
    tname = next(p for p in inst.parts[1:] if p in _HALF_FORMATS)
    fmt = _HALF_FORMATS[tname]
    packed = tname.endswith("x2")
    if op not in _HALF_OPS:
        raise _unsupported(inst, f"{op}.{tname} is not supported")
    mode = _mode(inst, "nearest_even")
    ftz = "ftz" in inst.parts
    sat = "sat" in inst.parts
    nan_mode = "NaN" in inst.parts and op in ("min", "max")
    if any(p in inst.parts for p in ("xorsign", "relu", "approx", "oob")) or (
            "NaN" in inst.parts and not nan_mode):
        raise _unsupported(inst, "modifier not supported for 16-bit floats")
    reg_t = TYPES["b32"] if packed else TYPES["b16"]
    halves = (0, 16) if packed else (0,)
    u16 = np.uint16

    def split(v: Any, h: int) -> np.ndarray:
        v = np.atleast_1d(np.asarray(v))
        return ((v.astype(np.uint32) >> np.uint32(h)) & np.uint32(0xFFFF)).astype(u16)

    def join(parts: list[np.ndarray]) -> np.ndarray:
        if not packed:
            return parts[0]
        return parts[0].astype(np.uint32) | (parts[1].astype(np.uint32) << np.uint32(16))

    canon = u16(0x7FFF)

    def lane_op(args: list[np.ndarray]) -> np.ndarray:
        if op in ("add", "sub", "mul", "fma"):
            return _half_arith(op, fmt, mode, args, ftz, sat)
        a = args[0]
        if op == "neg":
            return a ^ u16(0x8000)
        if op == "abs":
            return a & u16(0x7FFF)
        b = args[1]
        if ftz:  # min/max.ftz: subnormal inputs (and so results) become signed zeros
            sub_max = u16(0x03FF if fmt == "fp16" else 0x007F)
            a = np.where((a & u16(0x7FFF)) <= sub_max, a & u16(0x8000), a).astype(u16)
            b = np.where((b & u16(0x7FFF)) <= sub_max, b & u16(0x8000), b).astype(u16)
        x = _decode(a, fmt).astype(np.float64)
        y = _decode(b, fmt).astype(np.float64)
        is_min = op == "min"
        pick_a = ((x < y) | ((x == y) & np.signbit(x))) if is_min else \
            ((x > y) | ((x == y) & ~np.signbit(x)))
        r = np.where(pick_a, a, b)
        r = np.where(np.isnan(x), b, np.where(np.isnan(y), a, r))
        # .NaN (PTX ISA min/max): the canonical NaN when either input is NaN
        both = (np.isnan(x) | np.isnan(y)) if nan_mode else (np.isnan(x) & np.isnan(y))
        return np.where(both, canon, r).astype(u16)

    if op == "setp":
        if packed:
            raise _unsupported(inst, "setp on packed halves is not supported")
        cmp = inst.parts[1]
        boolop = inst.parts[2] if inst.parts[2] in ("and", "or", "xor") else None
        f = _compare(inst, cmp, TYPES["f64"])
        ops = inst.operands
        if len(ops) != (4 if boolop else 3):
            raise _unsupported(inst, "wrong number of operands for setp")
        d = ops[0]
        pp = setter(d.first if isinstance(d, Pair) else d, TYPES["pred"], ctx, inst)
        pq = setter(d.second, TYPES["pred"], ctx, inst) if isinstance(d, Pair) else None
        ga, gb = getter(ops[1], reg_t, ctx, inst), getter(ops[2], reg_t, ctx, inst)
        gc = getter(ops[3], TYPES["pred"], ctx, inst) if boolop else None
        comb = {"and": np.logical_and, "or": np.logical_or,
                "xor": np.logical_xor}.get(boolop or "")

        def setp_fn(ix: Any, ex: Any) -> None:
            x = _decode(split(ga(ix), 0), fmt).astype(np.float64)
            y = _decode(split(gb(ix), 0), fmt).astype(np.float64)
            r = f(x, y)
            p, q = r, np.logical_not(r)
            if comb is not None:
                c = gc(ix)
                p, q = comb(r, c), comb(np.logical_not(r), c)
            pp(ix, p)
            if pq is not None:
                pq(ix, q)
        return Op(inst, "alu", setp_fn)

    nsrc = {"add": 2, "sub": 2, "mul": 2, "fma": 3, "neg": 1, "abs": 1, "min": 2, "max": 2}[op]
    if op == "fma" and _mode(inst, "") == "":
        raise _unsupported(inst, "fma needs a rounding modifier")
    _nops(inst, nsrc + 1)
    gets = [getter(o, reg_t, ctx, inst) for o in inst.operands[1:]]
    put = setter(inst.operands[0], reg_t, ctx, inst)

    def fn(ix: Any, ex: Any) -> None:
        vals = [g(ix) for g in gets]
        put(ix, join([lane_op([split(v, h) for v in vals]) for h in halves]))
    return Op(inst, "alu", fn)
