"""Integer arithmetic and logic (PTX ISA 9.0, 9.7.1 integer arithmetic, 9.7.2
extended precision, 9.7.8 logic and shift); add/sub/mul/mad/div/min/max/abs/neg
also accept float types and hand them to :mod:`.floating`.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .. import rounding
from ..parser import FImm, Imm, Instruction
from ..types import PtxType, TYPES
from .floating import _div_approx_f32, c_fma
from .operands import (Op, _alu, _as_array, _finish_float, _float_binary, _ftz32, _idiv,
                       _mode, _mul_hi, _nops, _one_type, _u, _ubits, _unsupported,
                       float_min_max, getter, setter)


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
                inst, t, lambda a, b: rounding.div_f32(a, b, "nearest_even")), 2)
        if _mode(inst, "") == "":
            raise _unsupported(inst, "div.f32/.f64 needs .rn/.rz/.rm/.rp, .approx or .full")
        return _alu(inst, ctx, t, _float_binary(inst, t, "div"), 2)
    return _int_div(inst, ctx, t, rem=False)


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
            r = float_min_max(np.asarray(a, t.dtype), np.asarray(b, t.dtype), is_min,
                              nan_mode, canon)
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

    def logical(shift: Callable[[Any, Any], Any]) -> Callable[[Any, Any], None]:
        # shl, and shr of unsigned types: a shift by n or more bits gives 0
        def run(ix: Any, ex: Any) -> None:
            b = np.asarray(gb(ix), np.uint32)
            r = shift(_ubits(ga(ix), t), np.minimum(b, n - 1).astype(u))
            if (b >= n).any():
                r = np.where(b >= n, u.type(0), r)
            put(ix, r.view(t.dtype))
        return run

    amount = inst.operands[2]
    if isinstance(amount, Imm) and not isinstance(inst.operands[1], (Imm, FImm)):
        # a literal amount (the usual form): the clamp and the test of run() at compile time
        b = int(np.asarray(gb(slice(None)), np.uint32))
        shift = np.left_shift if inst.parts[0] == "shl" else np.right_shift
        if inst.parts[0] == "shr" and t.signed:
            k = np.asarray(min(b, n - 1)).astype(t.dtype)[()]
            return Op(inst, "alu", lambda ix, ex: put(ix, np.right_shift(
                np.asarray(ga(ix), t.dtype), k)))
        if b >= n:
            zero = u.type(0)
            return Op(inst, "alu", lambda ix, ex: put(ix, np.where(
                True, zero, shift(_ubits(ga(ix), t), u.type(n - 1))).view(t.dtype)))
        k = u.type(b)
        return Op(inst, "alu", lambda ix, ex: put(ix, shift(_ubits(ga(ix), t), k).view(t.dtype)))
    if inst.parts[0] == "shl":
        return Op(inst, "alu", logical(np.left_shift))
    if t.signed:
        def sar(ix: Any, ex: Any) -> None:
            b = np.minimum(np.asarray(gb(ix), np.uint32), n - 1).astype(t.dtype)
            put(ix, np.right_shift(np.asarray(ga(ix), t.dtype), b))
        return Op(inst, "alu", sar)
    return Op(inst, "alu", logical(np.right_shift))


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
