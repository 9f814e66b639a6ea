"""The instruction table: each supported PTX opcode compiled to a vectorised closure.

``compile_instruction(inst, ctx)`` turns one decoded :class:`~hardware.simt.parser.Instruction`
into an :class:`Op` whose ``fn(ix, ex)`` executes it for the threads ``ix`` (an index
array into the register file, or ``slice(None)`` for all of them) of the warps described
by ``ex``. Every register holds raw bits (see :mod:`hardware.simt.types`); an operand is
*viewed* as the instruction type. Anything outside this table is an
:class:`~hardware.simt.errors.UnsupportedPtxError` at load time.

Supported (PTX ISA 9.0, chapter 9.7; section numbers in each function):

- integer (.s/.u/.b 8-64 bits): add, sub (.sat.s32), mul (.lo/.hi/.wide), mad (.lo/.hi/
  .wide), extended precision (add.cc, addc, sub.cc, subc, mad.cc, madc), div, rem, abs,
  neg, min, max, sad, popc, clz, brev, bfe, bfi, bfind, and, or, xor, not, cnot, lop3,
  shl, shr, shf, prmt (default mode), dp4a, dp2a;
- device functions: ``.func`` definitions and ``call``, by inlining (:mod:`.inline`);
- comparison and selection: setp (all integer and float comparisons, .and/.or/.xor with
  a predicate, two destinations), selp, testp;
- float32/float64: add, sub, mul, fma, mad.rnd, div (.rn/.rz/.rm/.rp, .approx, .full),
  sqrt, rcp (IEEE modes and .approx), rsqrt/ex2/lg2/sin/cos/tanh .approx, min, max, abs,
  neg, copysign, with .ftz and .sat;
- float16/bfloat16 (scalar and .x2): add, sub, mul, fma.rn, neg, abs, min, max, setp;
- cvt: every integer/float pair with .rn/.rz/.rm/.rp/.rni/.rzi/.rmi/.rpi, .sat, .ftz;
  to and from f16/bf16, to f16x2/bf16x2; the packed FP8/FP6/FP4/UE8M0 forms
  (e4m3x2, e5m2x2, e2m3x2, e3m2x2, e2m1x2, ue8m0x2) in :mod:`.lowprec`;
- data movement: mov (incl. special registers, variable addresses, vector pack/unpack),
  ld/ldu/st on .param/.global/.shared/.local/.const and generic addresses, .v2/.v4,
  cp.async global -> shared with its commit/wait groups (:mod:`.async_copy`),
  cache operators accepted; cvta (to/from .global/.shared/.local/.const); isspacep;
- atomics: atom and red on .global/.shared/generic: add, min, max, exch, cas, and, or,
  xor, inc, dec (integer; add/min/max/exch on f32/f64; add.noftz on f16/bf16 and
  their .x2 pairs);
- warp level: shfl.sync (up/down/bfly/idx, clamp and segment), vote.sync (all/any/uni/
  ballot), activemask, redux.sync (integer), match.sync (any/all), bar.warp.sync;
- warp matrix (:mod:`.matrix`): mma.sync (m8n8k4 f16; m16n8k8/k16 f16, bf16; m16n8k4/k8
  tf32; m16n8k32 e4m3/e5m2; m16n8k16/k32 s8/u8), ldmatrix/stmatrix .m8n8.b16,
  movmatrix, wmma.load/store/mma (m16n16k16, m32n8k16, m8n32k16, m16n16k8);
- control: bra (.uni), ret, exit, bar.sync / barrier.sync (id, thread count),
  membar/fence (no effect: execution is sequentially consistent).

Integer arithmetic wraps modulo 2**n; integer division by zero is refused (the PTX ISA
calls its result unspecified). Floating-point results are IEEE 754 correctly rounded in
the instruction's mode (:mod:`hardware.simt.rounding`), and a NaN result of f32
arithmetic is the canonical NaN 0x7FFFFFFF (f64 NaNs keep NumPy's propagation);
``.approx`` instructions return
the correctly rounded result of the exact function computed with float64 polynomials,
which is within the documented hardware error (see :data:`APPROX_ERROR`), not the
hardware's bits; ``div.approx.f32`` is ``a * (1/b)`` as the PTX ISA defines it, with the
reciprocal rounded and flushed to zero when subnormal (so it gives the documented 0 for
divisors beyond 2**126).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from refimpl import elementary
from refimpl.eft import round_to_odd, two_sum
from refimpl.rounding_modes import PTX_MODIFIERS

from . import rounding
from .errors import PtxError, UnsupportedPtxError
from .parser import Addr, FImm, Imm, Instruction, Pair, Reg, Sink, Sym, Vec
from .types import TYPES, UINT_OF_WIDTH, PtxType

__all__ = ["Op", "compile_instruction", "APPROX_ERROR", "SUPPORTED_OPCODES"]

#: maximum error of the hardware's .approx instructions (PTX ISA 9.7.3), for tolerances
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

_AR32 = np.arange(32, dtype=np.int64)


class Op:
    """One compiled instruction. ``kind``: "alu", "bra", "exit", "bar"."""

    __slots__ = ("inst", "kind", "fn", "guard", "guard_neg", "target", "uniform")

    def __init__(self, inst: Instruction, kind: str, fn: Callable | None = None) -> None:
        self.inst = inst
        self.kind = kind
        self.fn = fn
        self.guard: np.ndarray | None = None
        self.guard_neg = False
        self.target = -1
        self.uniform = False


def _unsupported(inst: Instruction, why: str) -> UnsupportedPtxError:
    return UnsupportedPtxError(f"line {inst.line}: {inst.text!r}: {why}")


# ----------------------------------------------------------------------- operand access


def _types_in(inst: Instruction) -> list[PtxType]:
    return [TYPES[p] for p in inst.parts[1:] if p in TYPES]


def _one_type(inst: Instruction) -> PtxType:
    ts = _types_in(inst)
    if not ts:
        raise _unsupported(inst, "no operand type given")
    return ts[-1]


def _nops(inst: Instruction, n: int) -> None:
    if len(inst.operands) != n:
        raise _unsupported(inst, f"expected {n} operands, got {len(inst.operands)}")


def _scalar(value: int | float, t: PtxType) -> Any:
    if t.kind == "f":
        if t.bits not in (32, 64):
            raise ValueError("float immediates of 16 bits are not supported")
        return t.dtype.type(value)
    mask = (1 << t.bits) - 1
    return np.array(int(value) & mask, dtype=UINT_OF_WIDTH[t.bits]).view(t.dtype)[()]


def getter(op: Any, t: PtxType, ctx: Any, inst: Instruction) -> Callable:
    """A function ``f(ix)`` returning the operand's values as ``t.dtype`` (array or scalar)."""
    if isinstance(op, Reg):
        arr = ctx.register(op.name, inst)
        if t.kind == "pred" or arr.dtype == np.bool_:
            if arr.dtype != np.bool_ or t.kind != "pred":
                raise _unsupported(inst, f"{op.name} used as .{t.name} but is "
                                         f"{'a predicate' if arr.dtype == np.bool_ else 'not a predicate'}")
            if op.neg:
                return lambda ix: ~arr[ix]
            return lambda ix: arr[ix]
        if op.neg:
            raise _unsupported(inst, f"'!' on non-predicate {op.name}")
        rbits = arr.dtype.itemsize * 8
        if rbits == t.bits:
            view = arr.view(t.dtype)
            return lambda ix: view[ix]
        if rbits > t.bits:
            narrow = UINT_OF_WIDTH[t.bits]
            dt = t.dtype
            return lambda ix: arr[ix].astype(narrow).view(dt)
        raise _unsupported(inst, f"register {op.name} ({rbits} bits) is narrower than "
                                 f".{t.name}")
    if isinstance(op, Imm):
        if t.kind == "pred":
            v = bool(op.value)
            return lambda ix: v
        if t.kind != "f" and not -(1 << (t.bits - 1)) <= op.value < (1 << t.bits):
            raise _unsupported(inst, f"immediate {op.value} does not fit a {t.bits}-bit "
                                     "operand")
        s = _scalar(op.value, t)
        return lambda ix: s
    if isinstance(op, FImm):
        if t.kind == "f" and t.bits in (32, 64):
            f = np.array(op.bits, dtype=UINT_OF_WIDTH[op.width]).view(
                np.float32 if op.width == 32 else np.float64)[()]
            s = t.dtype.type(f)
        elif t.bits == op.width:
            s = _scalar(op.bits, t)
        else:
            raise _unsupported(inst, f"float literal of {op.width} bits for .{t.name}")
        return lambda ix: s
    if isinstance(op, Sym):
        space, addr = ctx.symbol(op.name, inst)
        if space in ("global", "const"):
            # a module variable: its address is known only at launch
            name = op.name
            return lambda ix: _scalar(ctx.module_symbol(name), t)
        s = _scalar(addr, t)
        return lambda ix: s
    raise _unsupported(inst, f"operand {op!r} cannot be read as .{t.name}")


def setter(op: Any, t: PtxType, ctx: Any, inst: Instruction) -> Callable:
    """A function ``f(ix, values)`` storing ``values`` (of ``t``) into the operand."""
    if isinstance(op, Sink):
        return lambda ix, v: None
    if not isinstance(op, Reg) or op.neg:
        raise _unsupported(inst, f"destination {op!r} is not a register")
    arr = ctx.register(op.name, inst, write=True)
    if t.kind == "pred" or arr.dtype == np.bool_:
        if arr.dtype != np.bool_ or t.kind != "pred":
            raise _unsupported(inst, f"predicate/non-predicate mismatch for {op.name}")

        def put_pred(ix: Any, v: Any) -> None:
            arr[ix] = v
        return put_pred
    rbits = arr.dtype.itemsize * 8
    if rbits == t.bits:
        view = arr.view(t.dtype)
        dt = t.dtype

        def put(ix: Any, v: Any) -> None:
            view[ix] = np.asarray(v).astype(dt, copy=False)
        return put
    if rbits > t.bits:
        # PTX ISA 9.7.9.8 (ld) / 9.7.9.21 (cvt): a narrower value is sign-extended
        # for signed types and zero-extended otherwise
        wide = np.dtype(f"int{rbits}") if t.signed else arr.dtype
        dt = t.dtype

        def put_ext(ix: Any, v: Any) -> None:
            arr[ix] = np.asarray(v).astype(dt, copy=False).astype(wide).view(arr.dtype) \
                if t.signed else np.asarray(v).astype(dt, copy=False).astype(arr.dtype)
        return put_ext
    raise _unsupported(inst, f"register {op.name} ({rbits} bits) is narrower than .{t.name}")


def _mode(inst: Instruction, default: str = "rn") -> str:
    for m in ("rn", "rz", "rm", "rp"):
        if m in inst.parts[1:]:
            return m
    return default


def _int_mode(inst: Instruction) -> str | None:
    for m in ("rni", "rzi", "rmi", "rpi"):
        if m in inst.parts[1:]:
            return m[:2]
    return None


# ------------------------------------------------------------------ float helpers


def _ftz32(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, np.float32)
    tiny = np.abs(x) < np.float32(2.0**-126)
    return np.where(tiny, np.copysign(np.float32(0.0), x), x).astype(np.float32)


def _ftz64(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, np.float64)
    return np.where(np.abs(x) < 2.0**-1022, np.copysign(0.0, x), x)


def _sat(x: np.ndarray, dt: np.dtype) -> np.ndarray:
    # PTX .sat: clamp to [0.0, 1.0], NaN -> +0.0
    x = np.asarray(x)
    return np.where(np.isnan(x), dt.type(0.0), np.clip(x, dt.type(0.0), dt.type(1.0))
                    ).astype(dt)


_CANONICAL_NAN32 = np.array(0x7FFFFFFF, dtype=np.uint32).view(np.float32)[()]


def _canonical_nan32(r: Any) -> Any:
    # NVIDIA GPUs return the canonical NaN 0x7FFFFFFF from f32 arithmetic instead of
    # propagating an input NaN's payload (CUDA C Programming Guide, floating-point
    # standard notes); NumPy would propagate the payload
    r = np.asarray(r)
    if r.dtype == np.float32:
        nan = r != r
        if nan.any():
            return np.where(nan, _CANONICAL_NAN32, r)
    return r


def _finish_float(inst: Instruction, t: PtxType, fn: Callable) -> Callable:
    """Wrap a float computation with the .ftz and .sat modifiers (inputs and output)
    and, for f32, the canonical NaN."""
    ftz = "ftz" in inst.parts and t.bits == 32
    sat = "sat" in inst.parts
    if not ftz and not sat:
        if t.bits != 32:
            return fn
        return lambda *args: _canonical_nan32(fn(*args))

    def wrapped(*args: Any) -> Any:
        if ftz:
            args = tuple(_ftz32(a) for a in args)
        r = fn(*args)
        if ftz:
            r = _ftz32(r)
        if sat:
            r = _sat(r, t.dtype)
        return _canonical_nan32(r)
    return wrapped


def _float_binary(inst: Instruction, t: PtxType, op: str) -> Callable:
    mode = _mode(inst)
    if t.bits == 32:
        f32 = {"add": rounding.add_f32, "mul": rounding.mul_f32,
               "sub": lambda a, b, m: rounding.add_f32(a, -np.asarray(b, np.float32), m),
               "div": rounding.div_f32}[op]
        if mode == "rn" and op != "div":
            fast = {"add": np.add, "sub": np.subtract, "mul": np.multiply}[op]
            return _finish_float(inst, t, lambda a, b: fast(a, b, dtype=np.float32))
        return _finish_float(inst, t, lambda a, b: f32(a, b, mode))
    if t.bits == 64:
        if mode == "rn":
            fast = {"add": np.add, "sub": np.subtract, "mul": np.multiply,
                    "div": np.divide}[op]
            return _finish_float(inst, t, lambda a, b: fast(a, b, dtype=np.float64))
        return _finish_float(inst, t, lambda a, b: rounding.fraction_op_f64(op, [a, b], mode))
    raise _unsupported(inst, f".{t.name} arithmetic is not supported")


# ----------------------------------------------------------------------- integer helpers


def _u(t: PtxType) -> np.dtype:
    return UINT_OF_WIDTH[t.bits]


def _ubits(x: Any, t: PtxType) -> np.ndarray:
    """Values of type ``t`` as unsigned bits of the same width (at least 1-D)."""
    return np.atleast_1d(np.asarray(x).astype(t.dtype, copy=False)).view(_u(t))


def _mul_hi(a: Any, b: Any, t: PtxType) -> np.ndarray:
    """High half of the 2n-bit product (PTX ISA 9.7.1.3)."""
    if t.bits <= 32:
        wide = np.int64 if t.signed else np.uint64
        p = np.asarray(a).astype(wide) * np.asarray(b).astype(wide)
        return (p >> t.bits).astype(t.dtype)
    # 64 bits: schoolbook product of the magnitudes' 32-bit halves, then the sign
    ua, ub = np.broadcast_arrays(_ubits(a, t), _ubits(b, t))
    one = np.uint64(1)
    if t.signed:
        na = (ua >> np.uint64(63)) == one
        nb = (ub >> np.uint64(63)) == one
        ua = np.where(na, ~ua + one, ua)
        ub = np.where(nb, ~ub + one, ub)
    m32 = np.uint64(0xFFFFFFFF)
    s32 = np.uint64(32)
    a0, a1 = ua & m32, ua >> s32
    b0, b1 = ub & m32, ub >> s32
    p00, p01, p10, p11 = a0 * b0, a0 * b1, a1 * b0, a1 * b1
    mid = (p00 >> s32) + (p01 & m32) + (p10 & m32)
    hi = p11 + (p01 >> s32) + (p10 >> s32) + (mid >> s32)
    if t.signed:
        lo = (mid << s32) | (p00 & m32)
        nlo = ~lo + one                       # two's complement of the 128-bit (hi, lo)
        hi = np.where(na ^ nb, ~hi + (nlo == 0).astype(np.uint64), hi)
    return hi.astype(np.uint64).view(t.dtype)


def _idiv(a: Any, b: Any, t: PtxType, rem: bool, fault: Callable) -> np.ndarray:
    """div / rem with C semantics: the quotient truncated toward zero, the remainder
    with the dividend's sign; computed on magnitudes in unsigned arithmetic so that
    ``INT_MIN / -1`` wraps (to INT_MIN) instead of trapping."""
    a = np.atleast_1d(np.asarray(a, dtype=t.dtype))
    b = np.atleast_1d(np.asarray(b, dtype=t.dtype))
    if (b == 0).any():
        fault("integer division by zero (result unspecified in the PTX ISA)")
    if not t.signed:
        return (a % b if rem else a // b).astype(t.dtype)
    u = _u(t)
    one = u.type(1)
    ua, ub = _ubits(a, t), _ubits(b, t)
    ma = np.where(a < 0, ~ua + one, ua)
    mb = np.where(b < 0, ~ub + one, ub)
    if rem:
        r = ma % mb
        return np.where(a < 0, ~r + one, r).astype(u).view(t.dtype)
    q = ma // mb
    return np.where((a < 0) ^ (b < 0), ~q + one, q).astype(u).view(t.dtype)


def _as_array(v: Any, dt: np.dtype) -> np.ndarray:
    return np.asarray(v).astype(dt, copy=False)


# ------------------------------------------------------------------------ compilers
# Each compiler returns an Op; ctx is the launch (see executor.Wave).


def _alu(inst: Instruction, ctx: Any, t: PtxType, fn: Callable, nsrc: int,
         src_types: list[PtxType] | None = None, dst_type: PtxType | None = None) -> Op:
    _nops(inst, nsrc + 1)
    srcs = [getter(o, (src_types or [t] * nsrc)[i], ctx, inst)
            for i, o in enumerate(inst.operands[1:])]
    put = setter(inst.operands[0], dst_type or t, ctx, inst)
    if nsrc == 1:
        g0 = srcs[0]
        return Op(inst, "alu", lambda ix, ex: put(ix, fn(g0(ix))))
    if nsrc == 2:
        g0, g1 = srcs
        return Op(inst, "alu", lambda ix, ex: put(ix, fn(g0(ix), g1(ix))))
    g0, g1, g2 = srcs
    return Op(inst, "alu", lambda ix, ex: put(ix, fn(g0(ix), g1(ix), g2(ix))))


def c_add_sub(inst: Instruction, ctx: Any) -> Op:
    """add / sub (9.7.1.1-2, 9.7.3.1-2): integers wrap (.sat clamps s32); floats round."""
    t = _one_type(inst)
    op = inst.parts[0]
    if "cc" in inst.parts:
        return c_carry(inst, ctx)
    if t.kind == "f":
        return _alu(inst, ctx, t, _float_binary(inst, t, op), 2)
    if "sat" in inst.parts:
        if t.name != "s32":
            raise _unsupported(inst, ".sat needs .s32")

        def sat(a: Any, b: Any) -> Any:
            a64 = np.asarray(a).astype(np.int64)
            r = a64 + b if op == "add" else a64 - np.int64(b) if np.ndim(b) == 0 else a64 - b.astype(np.int64)
            return np.clip(r, -2**31, 2**31 - 1).astype(np.int32)
        return _alu(inst, ctx, t, sat, 2)
    u = TYPES[f"u{t.bits}"]
    f = np.add if op == "add" else np.subtract
    return _alu(inst, ctx, u, lambda a, b: f(a, b, dtype=u.dtype), 2)


def c_mul(inst: Instruction, ctx: Any) -> Op:
    """mul (9.7.1.3, 9.7.3.3): .lo/.hi/.wide for integers; IEEE product for floats."""
    t = _one_type(inst)
    if t.kind == "f":
        return _alu(inst, ctx, t, _float_binary(inst, t, "mul"), 2)
    if "wide" in inst.parts:
        if t.bits > 32:
            raise _unsupported(inst, ".wide needs a 16- or 32-bit type")
        w = TYPES[f"{t.kind if t.kind != 'b' else 'u'}{2 * t.bits}"]
        return _alu(inst, ctx, t, lambda a, b: _as_array(a, w.dtype) * _as_array(b, w.dtype),
                    2, dst_type=w)
    if "hi" in inst.parts:
        return _alu(inst, ctx, t, lambda a, b: _mul_hi(a, b, t), 2)
    u = TYPES[f"u{t.bits}"]
    return _alu(inst, ctx, u, lambda a, b: np.multiply(a, b, dtype=u.dtype), 2)


def c_mad(inst: Instruction, ctx: Any) -> Op:
    """mad (9.7.1.4): a*b + c with .lo/.hi/.wide; mad.rnd.f32 is fma (9.7.3.5)."""
    t = _one_type(inst)
    if t.kind == "f":
        if _mode(inst, "") == "":
            raise _unsupported(inst, "mad.f32 without a rounding modifier")
        return c_fma(inst, ctx)
    if "cc" in inst.parts:
        return c_carry(inst, ctx)
    if "sat" in inst.parts:
        raise _unsupported(inst, "mad with .sat is not supported")
    if "wide" in inst.parts:
        if t.bits > 32:
            raise _unsupported(inst, ".wide needs a 16- or 32-bit type")
        w = TYPES[f"{t.kind if t.kind != 'b' else 'u'}{2 * t.bits}"]
        uw = TYPES[f"u{w.bits}"]
        return _alu(inst, ctx, t, lambda a, b, c: np.add(
            _ubits(_as_array(a, w.dtype) * _as_array(b, w.dtype), w), c, dtype=uw.dtype),
            3, src_types=[t, t, uw], dst_type=uw)
    u = TYPES[f"u{t.bits}"]
    if "hi" in inst.parts:
        return _alu(inst, ctx, t, lambda a, b, c: np.add(
            _ubits(_mul_hi(a, b, t), t), _ubits(c, t), dtype=u.dtype), 3, dst_type=u)
    return _alu(inst, ctx, u, lambda a, b, c: np.add(np.multiply(a, b, dtype=u.dtype), c,
                                                     dtype=u.dtype), 3)


#: the per-thread carry flag CC.CF of the extended-precision instructions
CARRY_REGISTER = "%cc.cf"


def c_carry(inst: Instruction, ctx: Any) -> Op:
    """Extended-precision integer arithmetic (PTX ISA 9.7.2): add.cc, addc{.cc}, sub.cc,
    subc{.cc}, mad{.lo,.hi}.cc, madc{.lo,.hi}{.cc} on .u32/.s32/.u64/.s64. ``addc``
    adds CC.CF; ``subc`` computes a - (b + CC.CF), so CC.CF is a borrow there; ``.cc``
    writes the carry-out (borrow-out for sub) to CC.CF."""
    opc = inst.parts[0]
    t = _one_type(inst)
    if t.kind == "f" or t.bits not in (32, 64):
        raise _unsupported(inst, "carry arithmetic needs .u32/.s32/.u64/.s64")
    base = opc[:-1] if opc in ("addc", "subc", "madc") else opc
    cin = opc in ("addc", "subc", "madc")
    cout = "cc" in inst.parts
    if base == "mad" and "hi" not in inst.parts and "lo" not in inst.parts:
        raise _unsupported(inst, "mad with carry needs .lo or .hi")
    nsrc = 3 if base == "mad" else 2
    _nops(inst, nsrc + 1)
    u = TYPES[f"u{t.bits}"]
    ud = u.dtype
    srcs = [getter(o, u, ctx, inst) for o in inst.operands[1:]]
    put = setter(inst.operands[0], u, ctx, inst)
    cf = ctx.register(CARRY_REGISTER, inst, write=True)
    hi = "hi" in inst.parts

    def fn(ix: Any, ex: Any) -> None:
        c = cf[ix].astype(ud) & ud.type(1)
        n = c.size
        if not cin:
            c = np.zeros(n, ud)
        vals = [np.broadcast_to(np.asarray(g(ix)).astype(ud), (n,)) for g in srcs]
        if base == "sub":
            a, b = vals
            d1 = np.subtract(a, b, dtype=ud)
            d = np.subtract(d1, c, dtype=ud)
            out = (a < b) | (d1 < c)                    # borrow-out
        else:
            if base == "mad":
                a, b, x = vals
                if hi:
                    p = _ubits(_mul_hi(a.view(u.dtype), b.view(u.dtype), u), u)
                else:
                    p = np.multiply(a, b, dtype=ud)
            else:
                p, x = vals
            d1 = np.add(p, x, dtype=ud)
            d = np.add(d1, c, dtype=ud)
            out = (d1 < p) | (d < d1)                   # carry-out
        put(ix, d)
        if cout:
            cf[ix] = out.astype(cf.dtype)
    return Op(inst, "alu", fn)


def c_dot(inst: Instruction, ctx: Any) -> Op:
    """dp4a.atype.btype d, a, b, c and dp2a{.lo,.hi}.atype.btype d, a, b, c (PTX ISA
    9.7.1.23-24): c plus the products of a's bytes (dp4a) or 16-bit halves (dp2a) with
    b's bytes (dp2a: bytes 0-1 for .lo, 2-3 for .hi), each element sign-extended for
    .s32 and zero-extended for .u32; d is .s32 when either type is signed, and the sum
    wraps modulo 2**32."""
    opc = inst.parts[0]
    kinds = [p for p in inst.parts[1:] if p in ("s32", "u32")]
    if len(kinds) != 2:
        raise _unsupported(inst, f"{opc} needs two types (.s32/.u32)")
    _nops(inst, 4)
    a_signed, b_signed = kinds[0] == "s32", kinds[1] == "s32"
    dt = TYPES["s32" if (a_signed or b_signed) else "u32"]
    ga, gb, gc = (getter(o, TYPES["u32"], ctx, inst) for o in inst.operands[1:])
    put = setter(inst.operands[0], TYPES["u32"], ctx, inst)
    if opc == "dp4a":
        a_width, pairs = 8, [(k, k) for k in range(4)]
    else:
        if "lo" not in inst.parts and "hi" not in inst.parts:
            raise _unsupported(inst, "dp2a needs .lo or .hi")
        base = 0 if "lo" in inst.parts else 2
        a_width, pairs = 16, [(0, base), (1, base + 1)]

    def element(x: np.ndarray, k: int, width: int, signed: bool) -> np.ndarray:
        v = (x >> np.int64(k * width)) & np.int64((1 << width) - 1)
        return np.where(v >= (1 << (width - 1)), v - (1 << width), v) if signed else v

    def fn(ix: Any, ex: Any) -> None:
        a, b, c = (np.atleast_1d(np.asarray(g(ix), np.uint32)).astype(np.int64)
                   for g in (ga, gb, gc))
        if dt.signed:
            c = np.where(c >= 2**31, c - 2**32, c)
        acc = c
        for ka, kb in pairs:
            acc = acc + element(a, ka, a_width, a_signed) * element(b, kb, 8, b_signed)
        put(ix, (acc & 0xFFFFFFFF).astype(np.uint32))
    return Op(inst, "alu", fn)


def c_fma(inst: Instruction, ctx: Any) -> Op:
    """fma.rnd.{f32,f64} (9.7.3.6): exact a*b + c, rounded once."""
    t = _one_type(inst)
    mode = _mode(inst, "")
    if mode == "":
        raise _unsupported(inst, "fma needs a rounding modifier (.rn/.rz/.rm/.rp)")
    if t.bits == 32:
        return _alu(inst, ctx, t, _finish_float(
            inst, t, lambda a, b, c: rounding.fma_f32(a, b, c, mode)), 3)
    if t.bits == 64:
        if mode == "rn":
            return _alu(inst, ctx, t, lambda a, b, c: rounding.fma_f64_rn(a, b, c), 3)
        return _alu(inst, ctx, t, lambda a, b, c: rounding.fraction_op_f64(
            "fma", [a, b, c], mode), 3)
    raise _unsupported(inst, f"fma on .{t.name} is not supported")


def c_div(inst: Instruction, ctx: Any) -> Op:
    """div (9.7.1.6, 9.7.3.8): integer truncating division; IEEE or .approx/.full float."""
    t = _one_type(inst)
    if t.kind == "f":
        if "approx" in inst.parts or "full" in inst.parts:
            if t.bits != 32:
                raise _unsupported(inst, "div.approx/.full need .f32")
            if "approx" in inst.parts:
                # PTX ISA 9.7.3.8: div.approx.f32 is computed as d = a * (1/b): max 2 ulp
                # for |b| in [2**-126, 2**126]; for 2**126 < |b| < 2**128 it returns 0
                # (NaN when a is infinite), as the reciprocal is then flushed to zero.
                # Modelled as rn(a * ftz(rn(1/b))) (within 1.5 ulp in the documented range)
                return _alu(inst, ctx, t, _finish_float(inst, t, _div_approx_f32), 2)
            # div.full: max 2 ulp over the full range; modelled by the correctly rounded
            # quotient
            return _alu(inst, ctx, t, _finish_float(
                inst, t, lambda a, b: rounding.div_f32(a, b, "rn")), 2)
        if _mode(inst, "") == "":
            raise _unsupported(inst, "div.f32/.f64 needs .rn/.rz/.rm/.rp, .approx or .full")
        return _alu(inst, ctx, t, _float_binary(inst, t, "div"), 2)
    return _int_div(inst, ctx, t, rem=False)


def _div_approx_f32(a: Any, b: Any) -> np.ndarray:
    a = np.asarray(a, np.float32)
    b = np.asarray(b, np.float32)
    with np.errstate(all="ignore"):
        r = _ftz32(np.divide(np.float32(1.0), b, dtype=np.float32))
        return np.multiply(a, r, dtype=np.float32)


def _int_div(inst: Instruction, ctx: Any, t: PtxType, rem: bool) -> Op:
    def fault(msg: str) -> None:
        ctx.fault_here(inst, msg)
    return _alu(inst, ctx, t, lambda a, b: _idiv(a, b, t, rem, fault), 2)


def c_rem(inst: Instruction, ctx: Any) -> Op:
    """rem (9.7.1.7): remainder with the sign of the dividend."""
    t = _one_type(inst)
    if t.kind == "f":
        raise _unsupported(inst, "rem is integer-only")
    return _int_div(inst, ctx, t, rem=True)


def c_abs_neg(inst: Instruction, ctx: Any) -> Op:
    """abs / neg (9.7.1.8-9, 9.7.3.9-10): float versions act on the sign bit only."""
    t = _one_type(inst)
    neg = inst.parts[0] == "neg"
    if t.kind == "f":
        if t.bits not in (32, 64):
            raise _unsupported(inst, f"{inst.parts[0]}.{t.name} is not supported")
        u = _u(t)
        sign = u.type(1 << (t.bits - 1))
        ftz = "ftz" in inst.parts

        def fsign(a: Any) -> Any:
            x = _ftz32(a) if ftz else a
            bits = _ubits(x, t)
            r = (bits ^ sign) if neg else (bits & ~sign)
            return r.view(t.dtype)
        return _alu(inst, ctx, t, fsign, 1)
    if neg:
        u = TYPES[f"u{t.bits}"]
        return _alu(inst, ctx, u, lambda a: np.subtract(u.dtype.type(0), a, dtype=u.dtype), 1)
    if not t.signed:
        raise _unsupported(inst, "abs needs a signed type")
    return _alu(inst, ctx, t, lambda a: np.where(a < 0, (-np.asarray(a)), a).astype(t.dtype), 1)


def c_min_max(inst: Instruction, ctx: Any) -> Op:
    """min / max (9.7.1.10-11, 9.7.3.11-12). Floats: IEEE 754-2019 minimumNumber /
    maximumNumber (a NaN operand is ignored, -0 < +0); two NaNs give the canonical NaN."""
    t = _one_type(inst)
    is_min = inst.parts[0] == "min"
    if t.kind == "f":
        if t.bits not in (32, 64) or any(p in inst.parts for p in ("xorsign", "abs")):
            raise _unsupported(inst, f"{inst.opcode} is not supported")
        nan_mode = "NaN" in inst.parts
        canon = np.array(0x7FFFFFFF if t.bits == 32 else 0x7FFFFFFFFFFFFFFF,
                         dtype=_u(t)).view(t.dtype)[()]

        def fminmax(a: Any, b: Any) -> Any:
            a = np.asarray(a, t.dtype)
            b = np.asarray(b, t.dtype)
            # order -0 below +0 by comparing (value, signbit)
            if is_min:
                pick_a = (a < b) | ((a == b) & np.signbit(a))
            else:
                pick_a = (a > b) | ((a == b) & ~np.signbit(a))
            r = np.where(pick_a, a, b)
            r = np.where(np.isnan(a), b, np.where(np.isnan(b), a, r))
            # .NaN: the canonical NaN when either input is NaN, else when both are
            either = (np.isnan(a) | np.isnan(b)) if nan_mode else (np.isnan(a) & np.isnan(b))
            r = np.where(either, canon, r)
            return r.astype(t.dtype)
        return _alu(inst, ctx, t, _finish_float(inst, t, fminmax), 2)
    f = np.minimum if is_min else np.maximum
    if "relu" in inst.parts:
        # max.relu / min.relu.s32 (PTX ISA 9.7.1.10-11): a negative result becomes 0
        if t.name != "s32":
            raise _unsupported(inst, ".relu needs .s32")
        return _alu(inst, ctx, t, lambda a, b: np.maximum(f(a, b), 0).astype(t.dtype), 2)
    if len(inst.parts) > 2:
        raise _unsupported(inst, f"{inst.opcode}: modifier not supported")
    return _alu(inst, ctx, t, lambda a, b: f(a, b).astype(t.dtype), 2)


def c_bitwise(inst: Instruction, ctx: Any) -> Op:
    """and / or / xor / not / cnot (9.7.8): on .b types and on predicates."""
    t = _one_type(inst)
    op = inst.parts[0]
    if t.kind == "pred":
        f = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}.get(op)
        if op == "not":
            return _alu(inst, ctx, t, np.logical_not, 1)
        if f is None:
            raise _unsupported(inst, f"{op}.pred")
        return _alu(inst, ctx, t, lambda a, b: f(a, b), 2)
    u = TYPES[f"u{t.bits}"]
    if op == "not":
        return _alu(inst, ctx, u, lambda a: np.invert(a), 1)
    if op == "cnot":
        return _alu(inst, ctx, u, lambda a: (np.asarray(a) == 0).astype(u.dtype), 1)
    f = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[op]
    return _alu(inst, ctx, u, lambda a, b: f(a, b, dtype=u.dtype), 2)


def c_lop3(inst: Instruction, ctx: Any) -> Op:
    """lop3.b32 d, a, b, c, immLut (9.7.8.6): any 3-input function by its truth table."""
    _nops(inst, 5)
    if not isinstance(inst.operands[4], Imm):
        raise _unsupported(inst, "lop3 needs an immediate truth table")
    lut = inst.operands[4].value & 0xFF
    t = TYPES["u32"]
    ga, gb, gc = (getter(o, t, ctx, inst) for o in inst.operands[1:4])
    put = setter(inst.operands[0], t, ctx, inst)

    def fn(ix: Any, ex: Any) -> None:
        a, b, c = (np.asarray(g(ix), np.uint32) for g in (ga, gb, gc))
        r = np.zeros(np.broadcast(a, b, c).shape, np.uint32)
        for k in range(8):
            if lut >> k & 1:
                r |= ((a if k & 4 else ~a) & (b if k & 2 else ~b) & (c if k & 1 else ~c))
        put(ix, r)
    return Op(inst, "alu", fn)


def c_shift(inst: Instruction, ctx: Any) -> Op:
    """shl / shr (9.7.8.7-8): shift amounts of the width or more give 0 (shr.s: the
    sign fill); the amount is read as .u32."""
    t = _one_type(inst)
    _nops(inst, 3)
    ga = getter(inst.operands[1], t, ctx, inst)
    gb = getter(inst.operands[2], TYPES["u32"], ctx, inst)
    put = setter(inst.operands[0], t, ctx, inst)
    n = t.bits
    u = _u(t)
    if inst.parts[0] == "shl":
        def shl(ix: Any, ex: Any) -> None:
            b = np.asarray(gb(ix), np.uint32)
            r = np.left_shift(_ubits(ga(ix), t), np.minimum(b, n - 1).astype(u))
            if (b >= n).any():
                r = np.where(b >= n, u.type(0), r)
            put(ix, r.view(t.dtype))
        return Op(inst, "alu", shl)
    if t.signed:
        def sar(ix: Any, ex: Any) -> None:
            b = np.minimum(np.asarray(gb(ix), np.uint32), n - 1).astype(t.dtype)
            put(ix, np.right_shift(np.asarray(ga(ix), t.dtype), b))
        return Op(inst, "alu", sar)

    def shr(ix: Any, ex: Any) -> None:
        b = np.asarray(gb(ix), np.uint32)
        r = np.right_shift(_ubits(ga(ix), t), np.minimum(b, n - 1).astype(u))
        if (b >= n).any():
            r = np.where(b >= n, u.type(0), r)
        put(ix, r.view(t.dtype))
    return Op(inst, "alu", shr)


def _popcount(x: np.ndarray, bits: int) -> np.ndarray:
    x = np.asarray(x).astype(np.uint64)
    c = np.zeros(x.shape, np.uint32)
    for k in range(0, bits, 8):
        c += _POP8[((x >> np.uint64(k)) & np.uint64(0xFF)).astype(np.intp)]
    return c


_POP8 = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint32)


def c_bitcount(inst: Instruction, ctx: Any) -> Op:
    """popc / clz / brev (9.7.1.13-15)."""
    t = _one_type(inst)
    u = _u(t)
    op = inst.parts[0]
    if op == "popc":
        return _alu(inst, ctx, t, lambda a: _popcount(_ubits(a, t), t.bits), 1,
                    dst_type=TYPES["u32"])
    if op == "clz":
        def clz(a: Any) -> Any:
            x = np.atleast_1d(np.asarray(a).astype(t.dtype)).view(u).astype(np.uint64)
            n = np.zeros(x.shape, np.uint32)
            for s in (32, 16, 8, 4, 2, 1):
                if s >= t.bits:
                    continue
                top = x >> np.uint64(t.bits - s)
                none = top == 0
                n += np.where(none, s, 0).astype(np.uint32)
                x = np.where(none, (x << np.uint64(s)) & np.uint64((1 << t.bits) - 1), x)
            n += ((x >> np.uint64(t.bits - 1)) == 0).astype(np.uint32)
            return n
        return _alu(inst, ctx, t, clz, 1, dst_type=TYPES["u32"])
    if op == "brev":
        def brev(a: Any) -> Any:
            x = np.atleast_1d(np.asarray(a).astype(t.dtype)).view(u).astype(np.uint64)
            r = np.zeros(x.shape, np.uint64)
            for k in range(t.bits):
                r |= ((x >> np.uint64(k)) & np.uint64(1)) << np.uint64(t.bits - 1 - k)
            return r.astype(u).view(t.dtype)
        return _alu(inst, ctx, t, brev, 1)
    raise _unsupported(inst, op)


def c_bfe(inst: Instruction, ctx: Any) -> Op:
    """bfe.{u,s}{32,64} d, a, pos, len (9.7.1.16): pos and len clamp at 255; a signed
    field is sign-extended from its top bit (or from bit msb of a if pos+len > width)."""
    t = _one_type(inst)
    _nops(inst, 4)
    n = t.bits
    ga = getter(inst.operands[1], t, ctx, inst)
    gp = getter(inst.operands[2], TYPES["u32"], ctx, inst)
    gl = getter(inst.operands[3], TYPES["u32"], ctx, inst)
    put = setter(inst.operands[0], t, ctx, inst)

    def fn(ix: Any, ex: Any) -> None:
        a = np.atleast_1d(np.asarray(ga(ix), t.dtype)).view(_u(t)).astype(np.uint64)
        pos = (np.asarray(gp(ix), np.uint32) & 0xFF).astype(np.int64)
        ln = (np.asarray(gl(ix), np.uint32) & 0xFF).astype(np.int64)
        pos, ln, a = np.broadcast_arrays(pos, ln, a)
        msb = np.minimum(pos + ln - 1, n - 1)
        sbit_pos = np.where(ln == 0, 0, msb)
        sbit = (a >> sbit_pos.astype(np.uint64)) & np.uint64(1) if t.signed else np.zeros(a.shape, np.uint64)
        sbit = np.where(ln == 0, np.uint64(0), sbit)
        r = np.zeros(a.shape, np.uint64)
        for i in range(n):
            src = pos + i
            inside = (i < ln) & (src < n)
            bit = (a >> np.minimum(src, n - 1).astype(np.uint64)) & np.uint64(1)
            bit = np.where(inside, bit, sbit)
            r |= bit << np.uint64(i)
        put(ix, r.astype(_u(t)).view(t.dtype))
    return Op(inst, "alu", fn)


def c_bfi(inst: Instruction, ctx: Any) -> Op:
    """bfi.b{32,64} f, a, b, pos, len (9.7.1.17): insert the low len bits of a into b."""
    t = _one_type(inst)
    _nops(inst, 5)
    n = t.bits
    u = _u(t)
    ga = getter(inst.operands[1], t, ctx, inst)
    gb = getter(inst.operands[2], t, ctx, inst)
    gp = getter(inst.operands[3], TYPES["u32"], ctx, inst)
    gl = getter(inst.operands[4], TYPES["u32"], ctx, inst)
    put = setter(inst.operands[0], t, ctx, inst)

    def fn(ix: Any, ex: Any) -> None:
        a = np.atleast_1d(np.asarray(ga(ix), t.dtype)).view(u).astype(np.uint64)
        b = np.atleast_1d(np.asarray(gb(ix), t.dtype)).view(u).astype(np.uint64)
        pos = (np.asarray(gp(ix), np.uint32) & 0xFF).astype(np.int64)
        ln = (np.asarray(gl(ix), np.uint32) & 0xFF).astype(np.int64)
        a, b, pos, ln = np.broadcast_arrays(a, b, pos, ln)
        r = b.copy()
        for i in range(n):
            dst = pos + i
            inside = (i < ln) & (dst < n)
            bit = (a >> np.uint64(i)) & np.uint64(1)
            d = np.minimum(dst, n - 1).astype(np.uint64)
            cleared = r & ~(np.uint64(1) << d)
            r = np.where(inside, cleared | (bit << d), r)
        put(ix, r.astype(u).view(t.dtype))
    return Op(inst, "alu", fn)


def c_prmt(inst: Instruction, ctx: Any) -> Op:
    """prmt.b32 d, a, b, c (9.7.8.9, default mode): pick 4 bytes of {b, a} by the
    selector nibbles of c; bit 3 of a nibble replicates the byte's sign bit."""
    if len(inst.parts) != 2:
        raise _unsupported(inst, "only the default prmt mode is supported")
    _nops(inst, 4)
    t = TYPES["u32"]
    ga, gb, gc = (getter(o, t, ctx, inst) for o in inst.operands[1:])
    put = setter(inst.operands[0], t, ctx, inst)

    def fn(ix: Any, ex: Any) -> None:
        a, b, c = (np.atleast_1d(np.asarray(g(ix), np.uint32)).astype(np.uint64)
                   for g in (ga, gb, gc))
        a, b, c = np.broadcast_arrays(a, b, c)
        src = a | (b << np.uint64(32))
        r = np.zeros(a.shape, np.uint64)
        for k in range(4):
            sel = (c >> np.uint64(4 * k)) & np.uint64(0xF)
            byte = (src >> ((sel & np.uint64(7)) * np.uint64(8))) & np.uint64(0xFF)
            sign = np.where((byte >> np.uint64(7)) & np.uint64(1) == 1, np.uint64(0xFF), np.uint64(0))
            byte = np.where(sel & np.uint64(8) != 0, sign, byte)
            r |= byte << np.uint64(8 * k)
        put(ix, r.astype(np.uint32))
    return Op(inst, "alu", fn)


_CMP = {
    "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
    "gt": np.greater, "ge": np.greater_equal,
    "lo": np.less, "ls": np.less_equal, "hi": np.greater, "hs": np.greater_equal,
}


def _compare(inst: Instruction, cmp: str, t: PtxType) -> Callable:
    if t.kind == "f":
        if cmp in ("num", "nan"):
            return (lambda a, b: ~(np.isnan(a) | np.isnan(b))) if cmp == "num" else \
                (lambda a, b: np.isnan(a) | np.isnan(b))
        unordered = cmp.endswith("u") and cmp[:-1] in ("eq", "ne", "lt", "le", "gt", "ge")
        base = cmp[:-1] if unordered else cmp
        if base not in ("eq", "ne", "lt", "le", "gt", "ge"):
            raise _unsupported(inst, f"comparison .{cmp} on floats")
        f = _CMP[base]
        if unordered:
            return lambda a, b: f(a, b) | np.isnan(a) | np.isnan(b)
        if base == "ne":  # ordered: false when either is NaN
            return lambda a, b: (a != b) & ~(np.isnan(a) | np.isnan(b))
        return f
    if cmp not in _CMP:
        raise _unsupported(inst, f"comparison .{cmp} on integers")
    return _CMP[cmp]


def c_setp(inst: Instruction, ctx: Any) -> Op:
    """setp.CmpOp[.BoolOp].type p[|q], a, b[, {!}c] (9.7.2.5 / 9.7.3.x)."""
    t = _one_type(inst)
    cmp = inst.parts[1]
    boolop = inst.parts[2] if inst.parts[2] in ("and", "or", "xor") else None
    if cmp in ("lo", "ls", "hi", "hs") and t.kind == "s":
        t = TYPES[f"u{t.bits}"]
    if t.kind == "b" and cmp in ("eq", "ne"):
        t = TYPES[f"u{t.bits}"]
    f = _compare(inst, cmp, t)
    ops = inst.operands
    if len(ops) != (4 if boolop else 3):
        raise _unsupported(inst, "wrong number of operands for setp")
    d = ops[0]
    if isinstance(d, Pair):
        pp = setter(d.first, TYPES["pred"], ctx, inst)
        pq = setter(d.second, TYPES["pred"], ctx, inst)
    else:
        pp = setter(d, TYPES["pred"], ctx, inst)
        pq = None
    ga = getter(ops[1], t, ctx, inst)
    gb = getter(ops[2], t, ctx, inst)
    gc = getter(ops[3], TYPES["pred"], ctx, inst) if boolop else None
    comb = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}.get(boolop or "")
    if "ftz" in inst.parts and t.kind == "f" and t.bits == 32:
        fc = f
        f = lambda a, b: fc(_ftz32(a), _ftz32(b))  # noqa: E731 - subnormal inputs as zero

    def fn(ix: Any, ex: Any) -> None:
        r = f(ga(ix), gb(ix))
        if comb is not None:
            c = gc(ix)
            p = comb(r, c)
            q = comb(np.logical_not(r), c)
        else:
            p = r
            q = np.logical_not(r)
        pp(ix, p)
        if pq is not None:
            pq(ix, q)
    return Op(inst, "alu", fn)


def c_selp(inst: Instruction, ctx: Any) -> Op:
    """selp.type d, a, b, c (9.7.2.6): d = c ? a : b."""
    t = _one_type(inst)
    _nops(inst, 4)
    ga = getter(inst.operands[1], t, ctx, inst)
    gb = getter(inst.operands[2], t, ctx, inst)
    gc = getter(inst.operands[3], TYPES["pred"], ctx, inst)
    put = setter(inst.operands[0], t, ctx, inst)
    return Op(inst, "alu", lambda ix, ex: put(ix, np.where(gc(ix), ga(ix), gb(ix)).astype(t.dtype)))


def c_mov(inst: Instruction, ctx: Any) -> Op:
    """mov (9.7.9.1-2): registers, immediates, special registers, variable addresses, and
    the packing forms ``mov.b32 %r, {%h0, %h1}`` / unpacking ``mov.b64 {%r0, %r1}, %rd``
    (element 0 in the low bits)."""
    t = _one_type(inst)
    _nops(inst, 2)
    d, s = inst.operands
    if isinstance(s, Vec) or isinstance(d, Vec):
        vec, packed, pack = (s, d, True) if isinstance(s, Vec) else (d, s, False)
        n = len(vec.items)
        part = t.bits // n
        pt = TYPES[f"b{part}"]
        wt = TYPES[f"b{t.bits}"]
        wu = _u(wt)
        if pack:
            gets = [getter(x, pt, ctx, inst) for x in vec.items]
            put = setter(packed, wt, ctx, inst)

            def packfn(ix: Any, ex: Any) -> None:
                r = None
                for k, g in enumerate(gets):
                    v = np.asarray(g(ix)).astype(wu) << wu.type(k * part)
                    r = v if r is None else (r | v)
                put(ix, r)
            return Op(inst, "alu", packfn)
        get = getter(packed, wt, ctx, inst)
        puts = [setter(x, pt, ctx, inst) for x in vec.items]
        pu = _u(pt)

        def unpack(ix: Any, ex: Any) -> None:
            v = np.asarray(get(ix)).astype(wu)
            for k, p in enumerate(puts):
                p(ix, ((v >> wu.type(k * part)) & wu.type((1 << part) - 1)).astype(pu))
        return Op(inst, "alu", unpack)
    if t.kind == "pred":
        return _alu(inst, ctx, t, lambda a: a, 1)
    return _alu(inst, ctx, t, lambda a: a, 1)


def c_cvta(inst: Instruction, ctx: Any) -> Op:
    """cvta[.to].space.size (9.7.9.18): between a space's addresses and generic ones."""
    t = _one_type(inst)
    _nops(inst, 2)
    to = "to" in inst.parts
    space = next((p for p in inst.parts if p in ("global", "shared", "local", "const",
                                                 "param")), None)
    if space not in ("global", "shared", "local", "const"):
        raise _unsupported(inst, f"cvta for .{space} is not supported")
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


# ------------------------------------------------------------------------ conversion


_LOWP = {"f16": "fp16", "bf16": "bf16"}


def _encode(x: np.ndarray, fmt: str, mode: str, sat: bool) -> np.ndarray:
    from refimpl import formats  # the format codec (IEEE binary16, bfloat16, OCP OFP8)
    rnd = PTX_MODIFIERS[mode].value  # the PTX modifier's IEEE 754 rounding mode
    # NVIDIA's canonical NaN codes: 0x7FFF for f16/bf16, 0x7F for both FP8 formats
    nan = 0x7FFF if fmt in ("fp16", "bf16") else 0x7F
    return formats.encode(np.asarray(x), fmt, rounding=rnd, saturate=sat, nan=nan)


def _decode(codes: np.ndarray, fmt: str) -> np.ndarray:
    from refimpl import formats
    return formats.decode(np.asarray(codes), fmt)


def c_cvt(inst: Instruction, ctx: Any) -> Op:
    """cvt.frnd/irnd{.ftz}{.sat}.dtype.atype (9.7.9.21), incl. f16/bf16 and f16x2/bf16x2
    from two .f32; the packed FP8/FP6/FP4/UE8M0 forms are in :mod:`.lowprec`."""
    parts = inst.parts[1:]
    from .lowprec import PACKED, X4, compile_cvt
    if any(p in PACKED or p in X4 or p == "tf32" for p in parts):
        return compile_cvt(inst, ctx)
    names = [p for p in parts if p in TYPES or p in _LOWP]
    if len(names) != 2:
        raise _unsupported(inst, "cvt needs a destination and a source type")
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
            mode = fmode or "rn"

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
                rnd = {"rn": np.rint, "rz": np.trunc, "rm": np.floor, "rp": np.ceil}[imode]

                def round_int(ix: Any, ex: Any) -> None:
                    x = rnd(src_float(ix))
                    if sat:
                        x = np.where(np.isnan(x), 0.0, np.clip(x, 0.0, 1.0))
                    put(ix, x.astype(d.dtype))
                return Op(inst, "alu", round_int)
            return Op(inst, "alu", widen)
        mode = fmode or "rn"

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
        mode = fmode or "rn"
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
        hi = _encode(a, fmt, "rn", satf).astype(u)
        lo = _encode(b, fmt, "rn", satf).astype(u)
        put(ix, (hi << shift) | lo)
    return Op(inst, "alu", fn)


def _cvt_half2(inst: Instruction, ctx: Any, dname: str, sname: str) -> Op:
    """cvt.rn{.relu}{.satfinite}.{f16x2,bf16x2}.f32 d, a, b: a -> upper half, b -> lower."""
    mode = _mode(inst, "")
    if sname != "f32" or mode != "rn" or len(inst.operands) != 3:
        raise _unsupported(inst, f"{dname} conversion needs .rn and two .f32 sources")
    fmt = "fp16" if dname == "f16x2" else "bf16"
    return _cvt_pack2(inst, ctx, fmt, "satfinite" in inst.parts, 32)


# --------------------------------------------------------------------- approx / sqrt


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


def _arctan_inv(n: int, scale: int) -> int:
    # arctan(1/n) * scale by its Taylor series in integer arithmetic (truncation errors
    # of a few units of 1/scale)
    total, term, k, sign = 0, scale // n, 1, 1
    while term:
        total += sign * (term // k)
        term //= n * n
        k += 2
        sign = -sign
    return total


#: 2*pi in fixed point with _TWO_PI_BITS fraction bits (Machin's formula), exact enough
#: to reduce any float32 or float64 argument
_TWO_PI_BITS = 1200
_TWO_PI_FIXED = (8 * (4 * _arctan_inv(5, 1 << (_TWO_PI_BITS + 16))
                      - _arctan_inv(239, 1 << (_TWO_PI_BITS + 16)))) >> 16


def _reduce_two_pi_exact(x: float) -> float:
    """x - k*2*pi with k = round(x / 2pi), computed with 1200 fraction bits of 2*pi and
    rounded once to float64 (for arguments too large for the float64 reduction)."""
    from fractions import Fraction
    num, den = float(x).as_integer_ratio()      # den is a power of two
    shift = den.bit_length() - 1
    big = num << (_TWO_PI_BITS - shift)        # x * 2**_TWO_PI_BITS, exact
    k = (2 * big + _TWO_PI_FIXED) // (2 * _TWO_PI_FIXED)
    return float(Fraction(big - k * _TWO_PI_FIXED, 1 << _TWO_PI_BITS))


def _sincos_f64(x: np.ndarray, cos: bool) -> np.ndarray:
    x = np.asarray(x, np.float64)
    two_pi = 6.283185307179586
    k = np.rint(x / two_pi)
    r = (x - k * two_pi) - k * 2.4492935982947064e-16  # two-part 2*pi
    # beyond 2**20 the float64 reduction loses accuracy (and overflows for huge
    # arguments): reduce those exactly, element by element
    large = np.isfinite(x) & (np.abs(x) >= 2.0**20)
    if large.any():
        r = np.array(r, dtype=np.float64, copy=True).reshape(x.shape)
        r[large] = [_reduce_two_pi_exact(v) for v in np.atleast_1d(x[large]).tolist()]
    if cos:
        r = r + 1.5707963267948966
        r = np.where(r > 3.141592653589793, r - two_pi, r)
    r2 = r * r
    term = r.copy()
    acc = r.copy()
    for k2 in range(1, 14):
        term = -term * r2 / ((2 * k2) * (2 * k2 + 1))
        acc = acc + term
    if not cos:  # PTX ISA sin: sin(-0.0) = -0.0 (the reduction above loses the sign)
        acc = np.where(x == 0, x, acc)
    return np.where(np.isfinite(x), acc, np.nan)


def c_unary_float(inst: Instruction, ctx: Any) -> Op:
    """sqrt (.rn exact, .approx), rcp, rsqrt, ex2, lg2, sin, cos, tanh (9.7.3.x)."""
    t = _one_type(inst)
    op = inst.parts[0]
    approx = "approx" in inst.parts
    if t.bits == 64 and op in ("sqrt", "rcp") and not approx:
        mode = _mode(inst, "")
        if mode == "rn":
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
            "sin": lambda a: _sincos_f64(a, False),
            "cos": lambda a: _sincos_f64(a, True),
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


# -------------------------------------------------------------------- memory and sync


def _space(inst: Instruction) -> str:
    for p in inst.parts[1:]:
        base = p.split("::")[0]
        if base in ("global", "shared", "local", "param", "const"):
            return base
    return "generic"


def _address(op: Any, ctx: Any, inst: Instruction, space: str) -> Callable:
    """``f(ix)`` -> int64 addresses of an ``[base+offset]`` operand in ``space``."""
    if not isinstance(op, Addr):
        raise _unsupported(inst, f"expected an address operand, got {op!r}")
    off = np.int64(op.offset)
    if op.base is None:
        return lambda ix: off
    if isinstance(op.base, Sym):
        sp, a = ctx.symbol(op.base.name, inst)
        if sp != space and not (space == "generic"):
            raise _unsupported(inst, f"symbol {op.base.name} is in .{sp}, not .{space}")
        if sp in ("global", "const"):
            name = op.base.name
            return lambda ix: np.int64(ctx.module_symbol(name)) + off
        if space == "generic":
            a = a + ctx.window(sp)
        v = np.int64(a) + off
        return lambda ix: v
    arr = ctx.register(op.base.name, inst)
    if arr.dtype == np.uint64:
        view = arr.view(np.int64)
        return lambda ix: view[ix] + off
    if arr.dtype == np.uint32:
        return lambda ix: arr[ix].astype(np.int64) + off
    raise _unsupported(inst, f"address register {op.base.name} must be 32 or 64 bits")


def _vec_width(inst: Instruction) -> int:
    for p in inst.parts:
        if p in ("v2", "v4", "v8"):
            return int(p[1])
    return 1


def c_ld(inst: Instruction, ctx: Any) -> Op:
    """ld{.ss}{.cop}{.nc}{.vN}.type d, [a] (9.7.9.8-9); cache operators are accepted
    and have no effect on values."""
    t = _one_type(inst)
    _nops(inst, 2)
    space = _space(inst)
    n = _vec_width(inst)
    # .volatile/.acquire (ordering) need nothing: this interpreter is sequentially consistent
    dst = inst.operands[0]
    items = list(dst.items) if isinstance(dst, Vec) else [dst]
    if len(items) != n:
        raise _unsupported(inst, f"destination has {len(items)} elements, .v{n} expected")
    if t.kind == "pred":
        raise _unsupported(inst, "ld of .pred")
    puts = [setter(x, t, ctx, inst) for x in items]
    if space == "param":
        read = ctx.param_reader(inst.operands[1], t, n, inst)

        def ld_param(ix: Any, ex: Any) -> None:
            for p, v in zip(puts, read()):
                p(ix, v)
        return Op(inst, "alu", ld_param)
    addr = _address(inst.operands[1], ctx, inst, space)
    elem = t.storage if t.bits >= 8 else np.dtype(np.uint8)

    def fn(ix: Any, ex: Any) -> None:
        v = ctx.load(space, ix, ex, addr(ix), elem, n, inst)
        for k, p in enumerate(puts):
            p(ix, v[:, k].view(t.dtype) if t.bits >= 8 else v[:, k])
    return Op(inst, "alu", fn)


def c_st(inst: Instruction, ctx: Any) -> Op:
    """st{.ss}{.cop}{.vN}.type [a], b (9.7.9.10)."""
    t = _one_type(inst)
    _nops(inst, 2)
    space = _space(inst)
    if space in ("param", "const"):
        raise _unsupported(inst, f"st to .{space} (read-only)")
    n = _vec_width(inst)
    src = inst.operands[1]
    items = list(src.items) if isinstance(src, Vec) else [src]
    if len(items) != n:
        raise _unsupported(inst, f"source has {len(items)} elements, .v{n} expected")
    gets = [getter(x, t, ctx, inst) for x in items]
    addr = _address(inst.operands[0], ctx, inst, space)
    elem = t.storage

    def fn(ix: Any, ex: Any) -> None:
        cnt = ctx.count(ix)
        vals = np.empty((cnt, n), dtype=elem)
        for k, g in enumerate(gets):
            vals[:, k] = _ubits(g(ix), t)  # raw bits; a scalar broadcasts
        ctx.store(space, ix, ex, addr(ix), vals, inst)
    return Op(inst, "alu", fn)


_ATOM_OPS = ("add", "min", "max", "exch", "cas", "and", "or", "xor", "inc", "dec")


def c_atom(inst: Instruction, ctx: Any) -> Op:
    """atom / red .{global,shared}.op.type (9.7.13.4-5): applied lane by lane in thread
    order (a defined, deterministic order; hardware leaves it unspecified)."""
    t = _one_type(inst)
    is_red = inst.parts[0] == "red"
    space = _space(inst)
    if space not in ("global", "shared", "generic"):
        raise _unsupported(inst, f"atomics on .{space}")
    op = next((p for p in inst.parts[1:] if p in _ATOM_OPS), None)
    if op is None:
        raise _unsupported(inst, "unsupported atomic operation")
    if t.kind == "f" and op not in ("add", "exch", "min", "max"):
        raise _unsupported(inst, f"atomic {op} on floats")
    half = {"f16": ("fp16", 1), "bf16": ("bf16", 1), "f16x2": ("fp16", 2),
            "bf16x2": ("bf16", 2)}.get(t.name)
    if half is not None:
        # atom/red.add.noftz.{f16,f16x2,bf16,bf16x2} (9.7.13.4): round to nearest even,
        # subnormals kept; each 16-bit half of a packed pair is added on its own
        if op != "add" or "noftz" not in inst.parts:
            raise _unsupported(inst, f"atomic {op} on .{t.name} (only add.noftz)")
        fmt, lanes = half

        def hadd(cur: Any, x: Any) -> Any:
            c, v = int(cur), int(x)
            out = 0
            for k in range(lanes):
                a = np.array([(c >> (16 * k)) & 0xFFFF], np.uint16)
                b = np.array([(v >> (16 * k)) & 0xFFFF], np.uint16)
                out |= int(_half_arith("add", fmt, "rn", [a, b], False, False)[0]) << (16 * k)
            return out
        t = TYPES[f"b{16 * lanes}"]
        op = ("hadd", hadd)  # the executor applies the function lane by lane
    elif t.kind == "f" and t.bits == 16:
        raise _unsupported(inst, "16-bit float atomics")
    if any(p.startswith("v") and p[1:].isdigit() for p in inst.parts):
        raise _unsupported(inst, "vector atomics")
    if t.kind == "b" and op in ("add", "min", "max", "inc", "dec"):
        t = TYPES[f"u{t.bits}"]
    ops = inst.operands
    nsrc = 2 if op == "cas" else 1
    if len(ops) != (1 if is_red else 2) + nsrc:
        raise _unsupported(inst, "wrong number of operands")
    k = 0 if is_red else 1
    addr = _address(ops[k], ctx, inst, space)
    gets = [getter(o, t, ctx, inst) for o in ops[k + 1:]]
    put = None if is_red else setter(ops[0], t, ctx, inst)

    def fn(ix: Any, ex: Any) -> None:
        cnt = ctx.count(ix)
        srcs = [np.broadcast_to(np.asarray(g(ix)).astype(t.dtype), (cnt,)) for g in gets]
        old = ctx.atomic(space, ix, ex, np.broadcast_to(addr(ix), cnt), op, t, srcs, inst)
        if put is not None:
            put(ix, old)
    return Op(inst, "alu", fn)


def c_bar(inst: Instruction, ctx: Any) -> Op:
    """bar.sync / barrier.sync{.aligned} a{, b} (9.7.13.1); bar.warp.sync is a no-op here
    (warps run in lockstep)."""
    if inst.parts[1] == "warp":
        return Op(inst, "alu", lambda ix, ex: None)
    if "arrive" in inst.parts or "red" in inst.parts:
        raise _unsupported(inst, "barrier arrive/red variants are not supported")
    if inst.parts[1] not in ("sync", "cta") and inst.opcode not in ("bar.sync", "barrier.sync",
                                                                    "barrier.sync.aligned",
                                                                    "bar.cta.sync",
                                                                    "barrier.cta.sync.aligned",
                                                                    "barrier.cta.sync"):
        raise _unsupported(inst, "unsupported barrier form")
    if not inst.operands or not isinstance(inst.operands[0], Imm):
        raise _unsupported(inst, "barrier id must be an immediate")
    if len(inst.operands) > 2:
        raise _unsupported(inst, "a barrier takes an id and an optional thread count")
    op = Op(inst, "bar")
    op.target = inst.operands[0].value
    if not 0 <= op.target <= 15:
        raise _unsupported(inst, f"barrier id {op.target} outside 0..15 (a CTA has 16 "
                                 "barriers)")
    if len(inst.operands) > 1:
        if not isinstance(inst.operands[1], Imm):
            raise _unsupported(inst, "barrier thread count must be an immediate")
        count = inst.operands[1].value
        if count <= 0 or count % 32 or count > 1024:
            raise _unsupported(inst, f"barrier thread count {count} is not a positive "
                                     "multiple of the warp size up to 1024")
        op.uniform = True
        op.fn = count  # thread count
    return op


def c_noop(inst: Instruction, ctx: Any) -> Op:
    """membar / fence / nanosleep-free ordering: no effect in a sequentially
    consistent interpreter."""
    return Op(inst, "alu", lambda ix, ex: None)


def c_bra(inst: Instruction, ctx: Any) -> Op:
    """bra{.uni} target (9.7.12.1)."""
    if len(inst.operands) != 1 or not isinstance(inst.operands[0], Sym):
        raise _unsupported(inst, "bra needs a label (indirect branches are not supported)")
    target = ctx.label(inst.operands[0].name, inst)
    op = Op(inst, "bra")
    op.target = target
    op.uniform = "uni" in inst.parts
    return op


def c_exit(inst: Instruction, ctx: Any) -> Op:
    """ret / exit (9.7.12.4-5): in a kernel, ret ends the thread like exit."""
    if inst.operands:
        raise _unsupported(inst, f"{inst.parts[0]} takes no operands")
    return Op(inst, "exit")


def c_shfl(inst: Instruction, ctx: Any) -> Op:
    """shfl.sync.mode.b32 d[|p], a, b, c, membermask (9.7.9.6)."""
    if "sync" not in inst.parts:
        raise _unsupported(inst, "shfl without .sync (removed for sm_70+)")
    mode = next((p for p in inst.parts if p in ("up", "down", "bfly", "idx")), None)
    if mode is None or len(inst.operands) != 5:
        raise _unsupported(inst, "malformed shfl.sync")
    d = inst.operands[0]
    if isinstance(d, Pair):
        put = setter(d.first, TYPES["b32"], ctx, inst)
        putp = setter(d.second, TYPES["pred"], ctx, inst)
    else:
        put, putp = setter(d, TYPES["b32"], ctx, inst), None
    src = ctx.register_or_const(inst.operands[1], TYPES["b32"], inst)
    gb = getter(inst.operands[2], TYPES["u32"], ctx, inst)
    gc = getter(inst.operands[3], TYPES["u32"], ctx, inst)
    gm = getter(inst.operands[4], TYPES["u32"], ctx, inst)

    def fn(ix: Any, ex: Any) -> None:
        rows = ex.rows            # (G, 32) thread indices of the warps
        act = ex.mask             # (G, 32) executing lanes
        lane = np.broadcast_to(_AR32, rows.shape)
        # PTX ISA 9.7.9.6 (shfl.sync semantics): bval = b[4:0], cval = c[4:0],
        # segmask = c[12:8]; a lane offset of 32 or more wraps to its low 5 bits
        b = _rowvals(gb, ix, ex, np.uint32).astype(np.int64) & 0x1F
        c = _rowvals(gc, ix, ex, np.uint32).astype(np.int64)
        segmask = (c >> 8) & 0x1F
        maxlane = (lane & segmask) | (c & 0x1F & ~segmask)
        minlane = lane & segmask
        if mode == "up":
            j = lane - b
            valid = j >= maxlane
        elif mode == "down":
            j = lane + b
            valid = j <= maxlane
        elif mode == "bfly":
            j = lane ^ b
            valid = j <= maxlane
        else:
            j = minlane | (b & ~segmask)
            valid = j <= maxlane
        j = np.where(valid, j, lane)
        jc = np.clip(j, 0, 31)
        srcact = np.take_along_axis(ex.lane_active, jc, axis=1)
        memb = _rowvals(gm, ix, ex, np.uint32).astype(np.int64)
        bad = act & (~srcact | ((memb >> jc) & 1 == 0)) & valid
        if bad.any():
            ctx.warn_collective(inst, ex, bad, "reads an inactive or non-member lane "
                                               "(undefined in the PTX ISA)")
        vals = src[np.take_along_axis(rows, jc, axis=1)]
        put(ix, vals[act])
        if putp is not None:
            putp(ix, valid[act])
    return Op(inst, "alu", fn)


def _rowvals(g: Callable, ix: Any, ex: Any, dt: type) -> np.ndarray:
    """Values of an operand as (G, 32) rows for the executing lanes (0 elsewhere)."""
    v = g(ix)
    if np.ndim(v) == 0:
        return np.full(ex.rows.shape, v, dtype=dt)
    out = np.zeros(ex.rows.shape, dtype=dt)
    out[ex.mask] = v
    return out


def c_vote(inst: Instruction, ctx: Any) -> Op:
    """vote.sync.{all,any,uni}.pred / vote.sync.ballot.b32 (9.7.13.7): over the
    executing lanes (the member mask must name them)."""
    if "sync" not in inst.parts:
        raise _unsupported(inst, "vote without .sync")
    mode = next((p for p in inst.parts if p in ("all", "any", "uni", "ballot")), None)
    if mode is None or len(inst.operands) != 3:
        raise _unsupported(inst, "malformed vote.sync")
    gp = getter(inst.operands[1], TYPES["pred"], ctx, inst)
    getter(inst.operands[2], TYPES["u32"], ctx, inst)  # the member mask: its form checked
    if mode == "ballot":
        put = setter(inst.operands[0], TYPES["b32"], ctx, inst)
    else:
        put = setter(inst.operands[0], TYPES["pred"], ctx, inst)
    weights = (np.uint64(1) << _AR32.astype(np.uint64))

    def fn(ix: Any, ex: Any) -> None:
        p = np.zeros(ex.rows.shape, bool)
        p[ex.mask] = gp(ix)
        p &= ex.mask
        if mode == "ballot":
            word = (p.astype(np.uint64) * weights).sum(axis=1).astype(np.uint32)
            r = np.broadcast_to(word[:, None], ex.rows.shape)[ex.mask]
        elif mode == "all":
            r = np.broadcast_to((p | ~ex.mask).all(axis=1)[:, None], ex.rows.shape)[ex.mask]
        elif mode == "any":
            r = np.broadcast_to(p.any(axis=1)[:, None], ex.rows.shape)[ex.mask]
        else:
            allv = (p | ~ex.mask).all(axis=1)
            nonev = ~p.any(axis=1)
            r = np.broadcast_to((allv | nonev)[:, None], ex.rows.shape)[ex.mask]
        put(ix, r)
    return Op(inst, "alu", fn)


def c_activemask(inst: Instruction, ctx: Any) -> Op:
    """activemask.b32 d (9.7.13.8): the lanes executing this instruction."""
    _nops(inst, 1)
    put = setter(inst.operands[0], TYPES["b32"], ctx, inst)
    weights = (np.uint64(1) << _AR32.astype(np.uint64))

    def fn(ix: Any, ex: Any) -> None:
        word = (ex.mask.astype(np.uint64) * weights).sum(axis=1).astype(np.uint32)
        put(ix, np.broadcast_to(word[:, None], ex.rows.shape)[ex.mask])
    return Op(inst, "alu", fn)


def c_redux(inst: Instruction, ctx: Any) -> Op:
    """redux.sync.op.type d, a, membermask (9.7.13.10, sm_80): integer warp reduction."""
    t = _one_type(inst)
    op = next((p for p in inst.parts if p in ("add", "min", "max", "and", "or", "xor")), None)
    if op is None or len(inst.operands) != 3 or t.kind == "f":
        raise _unsupported(inst, "malformed or unsupported redux.sync")
    ga = getter(inst.operands[1], t, ctx, inst)
    put = setter(inst.operands[0], t, ctx, inst)

    def fn(ix: Any, ex: Any) -> None:
        v = _rowvals(ga, ix, ex, t.dtype)
        if op == "add":
            r = np.where(ex.mask, v.astype(_u(t)), 0).astype(_u(t)).sum(axis=1, dtype=_u(t)).view(t.dtype)
        elif op in ("min", "max"):
            fill = np.iinfo(t.dtype).max if op == "min" else np.iinfo(t.dtype).min
            f = np.min if op == "min" else np.max
            r = f(np.where(ex.mask, v, fill), axis=1)
        else:
            f = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[op]
            fill = ~t.dtype.type(0) if op == "and" else t.dtype.type(0)
            r = f.reduce(np.where(ex.mask, v, fill), axis=1)
        put(ix, np.broadcast_to(np.asarray(r).astype(t.dtype)[:, None], ex.rows.shape)[ex.mask])
    return Op(inst, "alu", fn)


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


def c_shf(inst: Instruction, ctx: Any) -> Op:
    """shf.{l,r}.{wrap,clamp}.b32 d, a, b, c (9.7.8.x): funnel shift of the 64-bit
    {b:a} (b high) by c (wrap: c & 31, clamp: min(c, 32)); shf.l keeps the high word,
    shf.r the low word."""
    _nops(inst, 4)
    left = "l" in inst.parts
    clamp = "clamp" in inst.parts
    t = TYPES["u32"]
    ga, gb, gc = (getter(o, t, ctx, inst) for o in inst.operands[1:])
    put = setter(inst.operands[0], TYPES["b32"], ctx, inst)

    def fn(ix: Any, ex: Any) -> None:
        a = np.atleast_1d(np.asarray(ga(ix), np.uint32)).astype(np.uint64)
        b = np.atleast_1d(np.asarray(gb(ix), np.uint32)).astype(np.uint64)
        c = np.atleast_1d(np.asarray(gc(ix), np.uint32)).astype(np.uint64)
        n = np.minimum(c, np.uint64(32)) if clamp else c & np.uint64(31)
        v = (b << np.uint64(32)) | a
        if left:
            r = np.where(n == 32, a, ((v << n) >> np.uint64(32)) & np.uint64(0xFFFFFFFF))
        else:
            r = np.where(n == 32, b, (v >> n) & np.uint64(0xFFFFFFFF))
        put(ix, r.astype(np.uint32))
    return Op(inst, "alu", fn)


def c_bfind(inst: Instruction, ctx: Any) -> Op:
    """bfind{.shiftamt}.{u,s}{32,64} d, a (9.7.1.x): bit position of the most significant
    non-sign bit, 0xFFFFFFFF if there is none; .shiftamt gives width-1-position."""
    t = _one_type(inst)
    shiftamt = "shiftamt" in inst.parts

    def fn(a: Any) -> Any:
        x = _ubits(a, t).astype(np.uint64)
        if t.signed:  # negative: look for the most significant 0
            neg = (x >> np.uint64(t.bits - 1)) == 1
            x = np.where(neg, ~x & np.uint64((1 << t.bits) - 1), x)
        pos = np.full(x.shape, -1, np.int64)
        for k in range(t.bits):
            pos = np.where((x >> np.uint64(k)) & np.uint64(1) == 1, k, pos)
        if shiftamt:
            pos = np.where(pos >= 0, t.bits - 1 - pos, pos)
        return (pos & 0xFFFFFFFF).astype(np.uint32)
    return _alu(inst, ctx, t, fn, 1, dst_type=TYPES["u32"])


def c_sad(inst: Instruction, ctx: Any) -> Op:
    """sad.type d, a, b, c (9.7.1.x): c + |a - b|."""
    t = _one_type(inst)
    u = TYPES[f"u{t.bits}"]

    def fn(a: Any, b: Any, c: Any) -> Any:
        a = np.atleast_1d(np.asarray(a, t.dtype))
        b = np.atleast_1d(np.asarray(b, t.dtype))
        diff = np.where(a >= b, np.subtract(_ubits(a, t), _ubits(b, t), dtype=u.dtype),
                        np.subtract(_ubits(b, t), _ubits(a, t), dtype=u.dtype))
        return np.add(diff, _ubits(c, t), dtype=u.dtype)
    return _alu(inst, ctx, t, fn, 3, dst_type=u)


def c_match(inst: Instruction, ctx: Any) -> Op:
    """match.{any,all}.sync.{b32,b64} d[|p], a, membermask (9.7.13.x): lanes of the
    executing set holding the same value."""
    t = _one_type(inst)
    mode = "any" if "any" in inst.parts else "all"
    if len(inst.operands) != 3:
        raise _unsupported(inst, "malformed match.sync")
    d = inst.operands[0]
    if isinstance(d, Pair):
        put, putp = setter(d.first, TYPES["b32"], ctx, inst), setter(d.second, TYPES["pred"], ctx, inst)
    else:
        put, putp = setter(d, TYPES["b32"], ctx, inst), None
    ga = getter(inst.operands[1], t, ctx, inst)
    weights = (np.uint64(1) << _AR32.astype(np.uint64))

    def fn(ix: Any, ex: Any) -> None:
        v = _rowvals(ga, ix, ex, t.dtype)
        same = (v[:, :, None] == v[:, None, :]) & ex.mask[:, None, :]   # (G, lane, other)
        masks = (same.astype(np.uint64) * weights).sum(axis=2).astype(np.uint32)
        active = (ex.mask.astype(np.uint64) * weights).sum(axis=1).astype(np.uint32)
        if mode == "any":
            put(ix, masks[ex.mask])
            return
        allsame = masks == active[:, None]
        put(ix, np.where(allsame, active[:, None], np.uint32(0))[ex.mask])
        if putp is not None:
            putp(ix, allsame[ex.mask])
    return Op(inst, "alu", fn)


def c_isspacep(inst: Instruction, ctx: Any) -> Op:
    """isspacep.{global,shared,local,const} p, a (9.7.9.x): whether a generic address
    lies in the space's window (see :mod:`hardware.simt.memory`)."""
    from .memory import LOCAL_WINDOW, SHARED_WINDOW, WINDOW_SIZE
    space = next((p for p in inst.parts[1:] if p.split("::")[0] in
                  ("global", "shared", "local", "const")), None)
    if space is None or len(inst.operands) != 2:
        raise _unsupported(inst, "malformed isspacep")
    space = space.split("::")[0]
    ga = getter(inst.operands[1], TYPES["u64"], ctx, inst)
    put = setter(inst.operands[0], TYPES["pred"], ctx, inst)
    lo = {"shared": SHARED_WINDOW, "local": LOCAL_WINDOW}.get(space, 0)

    def fn(ix: Any, ex: Any) -> None:
        a = np.asarray(ga(ix), np.uint64)
        in_sh = (a >= np.uint64(SHARED_WINDOW)) & (a < np.uint64(SHARED_WINDOW + WINDOW_SIZE))
        in_lo = (a >= np.uint64(LOCAL_WINDOW)) & (a < np.uint64(LOCAL_WINDOW + WINDOW_SIZE))
        if space in ("global", "const"):
            r = ~(in_sh | in_lo)
        else:
            r = (a >= np.uint64(lo)) & (a < np.uint64(lo + WINDOW_SIZE))
        put(ix, r)
    return Op(inst, "alu", fn)


# ------------------------------------------------------------ 16-bit floating point

_HALF_FORMATS = {"f16": "fp16", "f16x2": "fp16", "bf16": "bf16", "bf16x2": "bf16"}
_HALF_OPS = ("add", "sub", "mul", "fma", "neg", "abs", "min", "max", "setp")


def _half_arith(op: str, fmt: str, mode: str, codes: list[np.ndarray], ftz: bool,
                sat: bool) -> np.ndarray:
    """add/sub/mul/fma of binary16 or bfloat16 codes, computed exactly and rounded once."""
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
            if mode == "rm":                               # IEEE 754 6.3: exact zero sums
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
    mode = _mode(inst, "rn")
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


from .device_runtime import c_call, c_trap  # noqa: E402 (they use Op, defined above)

_TABLE: dict[str, Callable[[Instruction, Any], Op]] = {
    "add": c_add_sub, "sub": c_add_sub, "mul": c_mul, "mad": c_mad, "fma": c_fma,
    "addc": c_carry, "subc": c_carry, "madc": c_carry, "dp4a": c_dot, "dp2a": c_dot,
    "div": c_div, "rem": c_rem, "abs": c_abs_neg, "neg": c_abs_neg,
    "min": c_min_max, "max": c_min_max,
    "and": c_bitwise, "or": c_bitwise, "xor": c_bitwise, "not": c_bitwise,
    "cnot": c_bitwise, "lop3": c_lop3, "shl": c_shift, "shr": c_shift,
    "popc": c_bitcount, "clz": c_bitcount, "brev": c_bitcount, "bfe": c_bfe, "bfi": c_bfi,
    "prmt": c_prmt, "setp": c_setp, "selp": c_selp, "mov": c_mov, "cvta": c_cvta,
    "cvt": c_cvt, "sqrt": c_unary_float, "rcp": c_unary_float, "rsqrt": c_unary_float,
    "ex2": c_unary_float, "lg2": c_unary_float, "sin": c_unary_float, "cos": c_unary_float,
    "tanh": c_unary_float,
    "ld": c_ld, "ldu": c_ld, "st": c_st, "atom": c_atom, "red": c_atom,
    "bar": c_bar, "barrier": c_bar, "membar": c_noop, "fence": c_noop, "nanosleep": c_noop,
    "bra": c_bra, "ret": c_exit, "exit": c_exit,
    "shfl": c_shfl, "vote": c_vote, "activemask": c_activemask, "redux": c_redux,
    "copysign": c_copysign, "testp": c_testp, "shf": c_shf, "bfind": c_bfind, "sad": c_sad,
    "match": c_match, "isspacep": c_isspacep,
    "call": c_call, "trap": c_trap,
}


def _register_extensions() -> None:
    """The warp-matrix instructions and cp.async live in their own modules."""
    from . import async_copy, matrix
    _TABLE.update(matrix.COMPILERS)
    _TABLE["cp"] = async_copy.c_cp


_register_extensions()

#: the opcodes this interpreter implements (see each compiler's docstring for forms)
SUPPORTED_OPCODES = tuple(sorted(_TABLE))


def compile_instruction(inst: Instruction, ctx: Any) -> Op:
    """Compile ``inst`` for the launch ``ctx``; unsupported forms raise at once."""
    c = _TABLE.get(inst.parts[0])
    if c is None:
        raise _unsupported(inst, f"opcode {inst.parts[0]!r} is not supported")
    if inst.parts[0] not in ("cvt", "mov", "ld", "st", "ldu", "selp", "atom", "red", "mma",
                             "wmma") and any(
            p in _HALF_FORMATS for p in inst.parts[1:]):
        c = c_half
    try:
        op = c(inst, ctx)
    except PtxError:
        raise
    except (KeyError, IndexError, ValueError, AttributeError, TypeError) as e:
        raise _unsupported(inst, f"cannot decode ({type(e).__name__}: {e})") from None
    if inst.guard is not None:
        g = ctx.register(inst.guard.name, inst)
        if g.dtype != np.bool_:
            raise _unsupported(inst, f"guard {inst.guard.name} is not a predicate")
        op.guard = g
        op.guard_neg = inst.guard.neg
    return op
