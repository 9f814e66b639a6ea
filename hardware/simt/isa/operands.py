"""Operand access and helpers shared by the instruction compilers: the compiled
:class:`Op`, register/immediate getters and setters, rounding-mode and
saturation helpers (PTX ISA 9.0, 9.7 preamble and 5.5 operand types).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from refimpl.rounding_modes import PTX_INTEGER_MODIFIERS, PTX_MODIFIERS

from .. import rounding
from ..errors import PtxSyntaxError, UnsupportedPtxError
from ..parser import FImm, Imm, Instruction, Reg, Sink, Sym
from ..types import PtxType, TYPES, UINT_OF_WIDTH


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


def per_thread(ctx: Any, ix: Any, getters: list) -> tuple[np.ndarray, list]:
    """The executing threads and, per (getter, dtype), one value for each of them (None
    for a None getter: an operand the instruction form does not have)."""
    th = ctx._thread_ids(ix)
    return th, [None if g is None else np.broadcast_to(np.asarray(g(ix)).astype(dt), th.shape)
                for g, dt in getters]


def _unsupported(inst: Instruction, why: str) -> UnsupportedPtxError:
    return UnsupportedPtxError(f"line {inst.line}: {inst.text!r}: {why}")


def _malformed(inst: Instruction, why: str) -> PtxSyntaxError:
    return PtxSyntaxError(f"line {inst.line}: {inst.text!r}: {why}")


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


def literal_value(op: Imm | FImm, t: PtxType, inst: Instruction) -> Any:
    """The value of a literal operand read as type ``t`` (PTX ISA 4.5, as ptxas
    checks it). An integer literal is 64-bit and converted to the operand's size at
    its use (taken modulo 2^bits); it is not a floating-point operand (``mov.f32 %f1,
    1`` is refused: write ``1.0``). A floating-point literal (0f: .f32; 0d or decimal:
    .f64) is a .f32/.f64 operand, converted to it (rounded to nearest even), or a
    bit-size operand of its own width (its bits); never an integer operand."""
    if isinstance(op, Imm):
        if t.kind == "pred":
            return bool(op.value)
        if t.kind == "f":
            raise _malformed(inst, f"integer literal {op.value} used as a .{t.name} "
                                   "operand (a floating-point operand takes a "
                                   "floating-point literal such as 1.0 or 0f3F800000)")
        return _scalar(op.value, t)
    if t.kind == "f" and t.bits in (32, 64):
        f = np.array(op.bits, dtype=UINT_OF_WIDTH[op.width]).view(
            np.float32 if op.width == 32 else np.float64)[()]
        with np.errstate(over="ignore"):
            return t.dtype.type(f)
    if t.kind == "b" and t.bits == op.width:
        return _scalar(op.bits, t)
    form = "0f (.f32)" if op.width == 32 else "0d or decimal (.f64)"
    raise _malformed(inst, f"floating-point literal of the {form} form used as a "
                           f".{t.name} operand (it is a .f32/.f64 operand or the bits of a "
                           f".b{op.width} one)")


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
    if isinstance(op, (Imm, FImm)):
        s = literal_value(op, t, inst)
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


def _mode(inst: Instruction, default: str = "nearest_even") -> str:
    """The rounding mode of the instruction's floating-point modifier ``.rn/.rz/.rm/.rp``
    (PTX ISA 9.7.3) by its canonical name (:data:`refimpl.rounding_modes.PTX_MODIFIERS`),
    ``default`` when it has none: the one place a PTX modifier becomes a mode name."""
    for m in ("rn", "rz", "rm", "rp"):
        if m in inst.parts[1:]:
            return PTX_MODIFIERS[m].value
    return default


def _int_mode(inst: Instruction) -> str | None:
    """The canonical rounding mode of an integer rounding modifier ``.rni/.rzi/.rmi/.rpi``
    (PTX ISA 9.7.9.21), None when the instruction has none."""
    for m in ("rni", "rzi", "rmi", "rpi"):
        if m in inst.parts[1:]:
            return PTX_INTEGER_MODIFIERS[m].value
    return None


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


def float_min_max(a: np.ndarray, b: np.ndarray, is_min: bool, nan_mode: bool,
                  canon: Any) -> np.ndarray:
    """Two-input float min/max, PTX ISA 9.7.3.11-12: IEEE 754-2019 minimumNumber /
    maximumNumber (a NaN operand is ignored, -0 orders below +0); ``canon`` (the canonical
    NaN of the type) when both are NaN, or with ``.NaN`` (``nan_mode``) when either is."""
    # order -0 below +0 by comparing (value, signbit)
    if is_min:
        pick_a = (a < b) | ((a == b) & np.signbit(a))
    else:
        pick_a = (a > b) | ((a == b) & ~np.signbit(a))
    r = np.where(pick_a, a, b)
    r = np.where(np.isnan(a), b, np.where(np.isnan(b), a, r))
    either = (np.isnan(a) | np.isnan(b)) if nan_mode else (np.isnan(a) & np.isnan(b))
    return np.where(either, canon, r)


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
        if mode == "nearest_even" and op != "div":
            fast = {"add": np.add, "sub": np.subtract, "mul": np.multiply}[op]
            return _finish_float(inst, t, lambda a, b: fast(a, b, dtype=np.float32))
        return _finish_float(inst, t, lambda a, b: f32(a, b, mode))
    if t.bits == 64:
        if mode == "nearest_even":
            fast = {"add": np.add, "sub": np.subtract, "mul": np.multiply,
                    "div": np.divide}[op]
            return _finish_float(inst, t, lambda a, b: fast(a, b, dtype=np.float64))
        return _finish_float(inst, t, lambda a, b: rounding.fraction_op_f64(op, [a, b], mode))
    raise _unsupported(inst, f".{t.name} arithmetic is not supported")


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


def _rowvals(g: Callable, ix: Any, ex: Any, dt: type) -> np.ndarray:
    """Values of an operand as (G, 32) rows for the executing lanes (0 elsewhere)."""
    v = g(ix)
    if np.ndim(v) == 0:
        return np.full(ex.rows.shape, v, dtype=dt)
    shape = ex.rows.shape
    if v.size == shape[0] * shape[1]:
        # every lane executes: the values in lane order are the rows
        return v.astype(dt).reshape(shape)
    out = np.zeros(shape, dtype=dt)
    out[ex.mask] = v
    return out
