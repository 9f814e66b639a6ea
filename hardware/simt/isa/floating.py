"""Single and double precision floating point (PTX ISA 9.0, 9.7.3): fma,
sqrt/rcp in IEEE modes, the .approx transcendental instructions, copysign,
testp; :data:`APPROX_ERROR` lists the hardware's documented errors.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from refimpl import elementary

from .. import rounding
from ..parser import Instruction, Reg
from ..types import TYPES
from .operands import (Op, _alu, _finish_float, _ftz32, _ftz64, _mode, _one_type, _u,
                       _ubits, _unsupported, getter)


#: maximum error of the hardware's .approx instructions (PTX ISA 9.7.3), for tolerances;
#: the interpreter's own sin/cos are refimpl.elementary.sin/cos (absolute error below
#: 2**-53 |x| + 2**-45 before the float32 rounding), far inside these
APPROX_ERROR = {
    "rcp.approx.f32": "max 1 ulp (full range)",
    "sqrt.approx.f32": "max relative error 2**-23",
    "rsqrt.approx.f32": "max relative error 2**-22.9",
    "ex2.approx.f32": "max 2 ulp over the full range",
    "lg2.approx.f32": "max absolute error 2**-22 in [0.5, 2], relative 2**-22 elsewhere",
    "sin.approx.f32": "max absolute error 2**-20.5 in [-100*pi, 100*pi]",
    "cos.approx.f32": "max absolute error 2**-20.5 in [-100*pi, 100*pi]",
    "tanh.approx.f32": "max relative error 2**-11",
    "div.approx.f32": "max 2 ulp for |divisor| in [2**-126, 2**126]; 0 (NaN for an infinite "
                      "dividend) for 2**126 < |divisor| < 2**128",
    "div.full.f32": "max 2 ulp over the full range",
    "rcp.approx.ftz.f64": "a reciprocal seed for Newton iterations (low-order bits inexact)",
    "rsqrt.approx.f64": "a reciprocal square root seed for Newton iterations",
}


def c_fma(inst: Instruction, ctx: Any) -> Op:
    """fma.rnd.{f32,f64} (9.7.3.6): exact a*b + c, rounded once."""
    t = _one_type(inst)
    mode = _mode(inst, "")
    if mode == "":
        raise _unsupported(inst, "fma needs a rounding modifier (.rn/.rz/.rm/.rp)")
    if t.bits == 32:
        op = _alu(inst, ctx, t, _finish_float(
            inst, t, lambda a, b, c: rounding.fma_f32(a, b, c, mode)), 3)
        if mode == "nearest_even" and "ftz" not in inst.parts and "sat" not in inst.parts:
            return _fma_rn_f32(inst, ctx, op)
        return op
    if t.bits == 64:
        if mode == "nearest_even":
            return _alu(inst, ctx, t, lambda a, b, c: rounding.fma_f64_rn(a, b, c), 3)
        return _alu(inst, ctx, t, lambda a, b, c: rounding.fraction_op_f64(
            "fma", [a, b, c], mode), 3)
    raise _unsupported(inst, f"fma on .{t.name} is not supported")


_F64, _U64 = np.dtype(np.float64), np.dtype(np.uint64)
_LOW29, _HALF29 = np.uint64((1 << 29) - 1), np.uint64(1 << 28)
_EXP64, _TINY32 = np.uint64(0x7FF << 52), np.uint64((1023 - 126) << 52)
_SPAN = _EXP64 - _TINY32  # (exponent field - _TINY32) wraps below it, equals it at 0x7FF
_nz = np.count_nonzero  # (a bool array's count: cheaper than .any())


def _fma_rn_f32(inst: Instruction, ctx: Any, general: Op) -> Op:
    """``fma.rn.f32`` on 32-bit registers in one closure: the float64 ``a*b`` is exact
    and ``rn32(rn64(a*b + c))`` is ``rn32(a*b + c)`` unless the float64 sum is a float32
    midpoint or lies in float32's subnormal range (:func:`rounding.fma_f32`, whose fast
    path this is). Midpoint lanes are rounded by :func:`rounding.fma_f32` on their own;
    a subnormal, zero, infinite or NaN sum (the canonical NaN) sends the whole
    instruction to ``general`` (the compiled instruction of :func:`c_fma`, which gives
    these same bits on the other lanes)."""
    gets = [getter(o, TYPES["f32"], ctx, inst) for o in inst.operands[1:]]
    dst = inst.operands[0]
    if not any(isinstance(o, Reg) for o in inst.operands[1:]) or not isinstance(dst, Reg):
        return general
    d = ctx.register(dst.name, inst, write=True)
    if d.dtype.itemsize != 4:
        return general
    dview = d.view(np.float32)
    ga, gb, gc = gets
    slow = general.fn

    def fn(ix: Any, ex: Any) -> None:
        s = np.multiply(ga(ix), gb(ix), dtype=_F64)   # exact: 24 + 24 bits
        if s.ndim == 0:
            return slow(ix, ex)
        np.add(s, gc(ix), out=s)
        sv = s.view(_U64)
        # the exponent field below float32's normal range, or all ones (an infinite or
        # NaN sum: the general path gives the canonical NaN), as one unsigned compare
        if _nz(np.subtract(sv & _EXP64, _TINY32) >= _SPAN):
            return slow(ix, ex)
        mid = (sv & _LOW29) == _HALF29
        r = s.astype(np.float32)
        if _nz(mid):
            # float32 midpoints (finite, normal): those lanes rounded once from the exact
            # sum (rounding.fma_f32 is elementwise)
            k = np.flatnonzero(mid)
            a, b, c = (v[k] if np.ndim(v) else v for v in (ga(ix), gb(ix), gc(ix)))
            r[k] = rounding.fma_f32(a, b, c, "nearest_even")
        dview[ix] = r
    return Op(inst, "alu", fn)


def _div_approx_f32(a: Any, b: Any) -> np.ndarray:
    a = np.asarray(a, np.float32)
    b = np.asarray(b, np.float32)
    with np.errstate(all="ignore"):
        r = _ftz32(np.divide(np.float32(1.0), b, dtype=np.float32))
        return np.multiply(a, r, dtype=np.float32)


# The transcendental .approx instructions are modelled by the bit-reproducible float64
# functions of refimpl.elementary (within a few float64 ulp) rounded to float32: well
# inside the error bounds of APPROX_ERROR.


def _exp2_f64(x: np.ndarray) -> np.ndarray:
    # 2**x = 2**n * e**(f ln 2), n = rint(x), f = x - n in [-0.5, 0.5] (exact)
    x = np.asarray(x, np.float64)
    big = np.clip(x, -1100.0, 1100.0)
    n = np.rint(big)
    return np.ldexp(elementary.exp((big - n) * elementary.LN2), n.astype(np.int64))


def _log2_f64(x: np.ndarray) -> np.ndarray:
    # log2(m * 2**e) = e + log(m) / ln 2, m in [sqrt(1/2), sqrt(2)): exact for powers of 2
    x = np.asarray(x, np.float64)
    m, e = np.frexp(np.where(x > 0, x, 1.0))
    small = m < 0.7071067811865476
    m = np.where(small, m * 2.0, m)
    e = np.where(small, e - 1, e)
    r = e + elementary.log(m) / elementary.LN2
    r = np.where(x == 0, -np.inf, r)
    r = np.where(x < 0, np.nan, r)
    r = np.where(np.isinf(x) & (x > 0), np.inf, r)
    return np.where(np.isnan(x), np.nan, r)


def c_unary_float(inst: Instruction, ctx: Any) -> Op:
    """sqrt (.rn exact, .approx), rcp, rsqrt, ex2, lg2, sin, cos, tanh (9.7.3.x)."""
    t = _one_type(inst)
    op = inst.parts[0]
    approx = "approx" in inst.parts
    if t.bits == 64 and op in ("sqrt", "rcp") and not approx:
        mode = _mode(inst, "")
        if mode == "nearest_even":
            f = (lambda a: np.sqrt(a)) if op == "sqrt" else (lambda a: np.divide(1.0, a))
        else:
            f = (lambda a: rounding.fraction_op_f64("sqrt", [a], mode)) if op == "sqrt" else \
                (lambda a: rounding.fraction_op_f64("div", [np.ones_like(a), a], mode))
        return _alu(inst, ctx, t, f, 1)
    if t.bits == 64 and approx and op in ("rcp", "rsqrt"):
        # rcp.approx.ftz.f64 / rsqrt.approx{.ftz}.f64 (9.7.3.x): seeds that nvcc's double
        # division, tanh, cbrt, ... refine by Newton iterations; modelled by the
        # correctly rounded value (see APPROX_ERROR), subnormals flushed with .ftz
        ftz = "ftz" in inst.parts

        def approx64(a: Any) -> Any:
            a = np.asarray(a, np.float64)
            if ftz:
                a = _ftz64(a)
            with np.errstate(all="ignore"):
                r = np.divide(1.0, a) if op == "rcp" else np.divide(1.0, np.sqrt(a))
            return _ftz64(r) if ftz else r
        return _alu(inst, ctx, t, approx64, 1)
    if t.bits != 32:
        raise _unsupported(inst, f"{inst.opcode} is not supported")
    if op in ("sqrt", "rcp") and not approx:
        mode = _mode(inst, "")
        if not mode:
            raise _unsupported(inst, f"{op}.f32 needs .approx or a rounding modifier")
        f = (lambda a: rounding.sqrt_f32(a, mode)) if op == "sqrt" else \
            (lambda a: rounding.div_f32(np.ones_like(a, dtype=np.float32), a, mode))
        return _alu(inst, ctx, t, _finish_float(inst, t, f), 1)
    if not approx:
        raise _unsupported(inst, f"{inst.opcode}: only the .approx form exists")
    with np.errstate(all="ignore"):
        table = {
            "sqrt": lambda a: np.sqrt(np.asarray(a, np.float64)),
            "rcp": lambda a: 1.0 / np.asarray(a, np.float64),
            "rsqrt": lambda a: 1.0 / np.sqrt(np.asarray(a, np.float64)),
            "ex2": _exp2_f64,
            "lg2": _log2_f64,
            "sin": elementary.sin,
            "cos": elementary.cos,
            "tanh": lambda a: _tanh_f64(a),
        }
    if op not in table:
        raise _unsupported(inst, f"{inst.opcode} is not supported")
    g = table[op]

    def f(a: Any) -> Any:
        with np.errstate(all="ignore"):
            return np.asarray(g(a)).astype(np.float32)
    return _alu(inst, ctx, t, _finish_float(inst, t, f), 1)


def _tanh_f64(x: np.ndarray) -> np.ndarray:
    return elementary.tanh(x)


def c_copysign(inst: Instruction, ctx: Any) -> Op:
    """copysign.{f32,f64} d, a, b (9.7.3.x): the magnitude of b with the sign of a."""
    t = _one_type(inst)
    if t.bits not in (32, 64):
        raise _unsupported(inst, f"copysign.{t.name}")
    u = _u(t)
    sign = u.type(1 << (t.bits - 1))
    return _alu(inst, ctx, t, lambda a, b: ((_ubits(a, t) & sign) | (_ubits(b, t) & ~sign))
                .view(t.dtype), 2)


def c_testp(inst: Instruction, ctx: Any) -> Op:
    """testp.op.{f32,f64} p, a (9.7.3.x): finite, infinite, number, notanumber, normal,
    subnormal."""
    t = _one_type(inst)
    op = inst.parts[1]
    tiny = np.finfo(t.dtype).tiny
    f = {"finite": np.isfinite, "infinite": np.isinf, "number": lambda a: ~np.isnan(a),
         "notanumber": np.isnan,
         "normal": lambda a: np.isfinite(a) & (np.abs(a) >= tiny),
         "subnormal": lambda a: (np.abs(a) < tiny) & (a != 0)}.get(op)
    if f is None:
        raise _unsupported(inst, f"testp.{op}")
    return _alu(inst, ctx, t, f, 1, dst_type=TYPES["pred"])
