"""Edge cases of ordinary CUDA C and of single PTX instructions, each against an
independent reference: Python integers for C integer semantics, the PTX ISA pseudocode
(shfl.sync, cvt saturation), and sequential float32 sums for atomics.

Kernels: ``hardware/simt/gallery/edge_cases.cu`` (nvcc 13.0, sm_90)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hardware.simt import DeadlockError, GlobalMemory, gallery, load_ptx

_U64 = (1 << 64) - 1


def _mod():
    return gallery.load("edge_cases")


def _run(kernel, grid, block, ins, outs, scalars=(), **kw):
    mem = GlobalMemory()
    ptrs = [mem.to_device(np.ascontiguousarray(a)) for a in ins]
    optr = [mem.alloc(np.dtype(dt).itemsize * n) for dt, n in outs]
    _mod().launch(kernel, grid, block, ptrs + optr + list(scalars), mem, **kw)
    return [mem.from_device(p, dt, n) for p, (dt, n) in zip(optr, outs)]


def _bits_equal(got, exp) -> None:
    got = np.asarray(got)
    exp = np.asarray(exp, dtype=got.dtype)
    u = f"u{got.itemsize}"
    bad = np.flatnonzero(got.view(u) != exp.view(u))
    assert bad.size == 0, (f"first mismatches at {bad[:6]}: got {got[bad[:6]]}, "
                           f"expected {exp[bad[:6]]}")


# ------------------------------------------------------- float -> integer conversion


def _cvt(v: float, rnd: str, lo: int, hi: int) -> int:
    """PTX ISA 9.7.9.21 (cvt): float-to-integer conversions saturate to the destination
    range and NaN converts to 0; C's (int) cast is cvt.rzi."""
    if math.isnan(v):
        return 0
    if math.isinf(v):
        return lo if v < 0 else hi
    r = {"rz": math.trunc, "rn": round, "rm": math.floor, "rp": math.ceil}[rnd](v)
    return min(max(int(r), lo), hi)


_S32, _U32, _S64, _U64R = (-2**31, 2**31 - 1), (0, 2**32 - 1), (-2**63, 2**63 - 1), (0, _U64)
_EDGES = [math.nan, -math.nan, math.inf, -math.inf, -0.0, 0.0, -0.5, 0.5, 1.5, 2.5, -1.5,
          -2.5, -0.99, 3e9, -3e9, 2.0**31, -2.0**31, 2.0**31 - 128, 4.3e9, 1e19, -1e19,
          9.3e18, 2.0**63, 2.0**64, 1.8e19, 65535.7, -40000.2, 1e-45, -3.7, 7.5, -7.5, 8.5]


def test_float_to_int_edges():
    x = np.array(_EDGES, np.float32)
    y = np.array(_EDGES, np.float64)
    y[[20, 21, 22]] = [2**31 - 0.5, 4294967295.9, -0.9]
    oi, ou, ol, oul = _run("float_to_int_edges", 1, 32, [x, y],
                           [(np.int32, 160), (np.uint32, 64), (np.int64, 32), (np.uint64, 32)])
    ei, eu, el, eul = [], [], [], []
    for v, w in zip(x.tolist(), y.tolist()):
        ei += [_cvt(v, m, *_S32) for m in ("rz", "rn", "rm", "rp")] + [_cvt(w, "rz", *_S32)]
        eu += [_cvt(v, "rz", *_U32), _cvt(w, "rz", *_U32)]
        el.append(_cvt(v, "rz", *_S64))
        eul.append(_cvt(v, "rz", *_U64R))
    _bits_equal(oi, np.array(ei, np.int64).astype(np.int32))
    _bits_equal(ou, np.array(eu, np.uint64).astype(np.uint32))
    _bits_equal(ol, np.array(el, dtype=np.int64))
    _bits_equal(oul, np.array(eul, dtype=np.uint64))


# ------------------------------------------------ narrow loads, C division of negatives


def _cdiv(x: int, y: int, bits: int) -> tuple[int, int]:
    """C99 6.5.5: the quotient truncates toward zero and a == (a/b)*b + a%b; results
    wrap to ``bits`` (INT_MIN / -1 wraps on the GPU)."""
    q = abs(x) // abs(y)
    q = q if (x < 0) == (y < 0) else -q
    r = x - q * y
    m = 1 << bits
    return ((q + m // 2) % m) - m // 2, ((r + m // 2) % m) - m // 2


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_narrow_loads_and_division(seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(-128, 128, 64).astype(np.int8)
    b = rng.integers(-32768, 32768, 64).astype(np.int16)
    p = rng.integers(-2**31, 2**31, 32).astype(np.int32)
    q = rng.integers(-100, 100, 32).astype(np.int32)
    r = rng.integers(-2**63, 2**63 - 1, 32, dtype=np.int64)
    s = rng.integers(-2**40, 2**40, 32, dtype=np.int64)
    p[:6] = [-7, 7, -7, -2**31, -2**31, -1]
    q[:6] = [2, -2, -2, -1, 1, 3]
    r[:3] = [-7, -2**63, 2**63 - 1]
    s[:3] = [2, -1, -1]
    q[q == 0] = 3
    s[s == 0] = 5
    base = 40
    o, ol = _run("narrow_divmod", 1, 32, [a, b, p, q, r, s], [(np.int32, 192), (np.int64, 64)],
                 [base])
    e, el = [], []
    for i in range(32):
        j = base - i
        e += [int(a[j]), int(b[j]), int(a[j]) & 0xFF, *_cdiv(int(p[i]), int(q[i]), 32),
              (int(p[i]) & 0xFFFFFFFF) // (int(q[i]) & 0xFFFFFFFF)]
        el += list(_cdiv(int(r[i]), int(s[i]), 64))
    _bits_equal(o, np.array(e, np.int64).astype(np.int32))
    _bits_equal(ol, np.array(el, dtype=np.int64))


# ------------------------------------------------------------------ warp collectives


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_sub_warp_shuffles(seed):
    """CUDA C Programming Guide, warp shuffle functions: with ``width`` < 32 each
    segment of ``width`` lanes shuffles on its own; a source outside the segment
    (up/down) gives the lane's own value; __shfl_sync's srcLane is taken modulo width."""
    x = np.random.default_rng(seed).integers(-1000, 1000, 32).astype(np.int32)
    (o,) = _run("sub_warp_shuffles", 1, 32, [x], [(np.int32, 160)])
    e = []
    for i in range(32):
        s8, s16 = (i // 8) * 8, (i // 16) * 16
        e += [x[s8:s8 + 8].sum(), x[s16:s16 + 16].sum(),
              x[i - 3] if i - 3 >= s8 else x[i],
              x[i + 5] if i + 5 < s16 + 16 else x[i],
              x[(i // 4) * 4 + (i + 5) % 4]]
    _bits_equal(o, np.array(e, np.int64).astype(np.int32))


@settings(max_examples=20, deadline=None)
@given(vals=st.lists(st.integers(-5, 30), min_size=32, max_size=32))
def test_ballot_under_divergence(vals):
    """__ballot_sync / __any_sync / __all_sync / __activemask see only the lanes of
    their side of the branch."""
    x = np.array(vals, np.int32)
    (o,) = _run("divergent_ballot", 1, 32, [x], [(np.uint32, 32)])
    odd = [(v & 1) == 1 for v in vals]
    even_mask = sum(1 << k for k in range(32) if not odd[k])
    e = []
    for i in range(32):
        if odd[i]:
            b = sum(1 << k for k in range(32) if odd[k] and vals[k] > 10)
            anyv = any(odd[k] and vals[k] > 20 for k in range(32))
            allv = all(vals[k] > 0 for k in range(32) if odd[k])
            e.append((b + 1000 * bin(b).count("1") + 7 * anyv + 11 * allv) & 0xFFFFFFFF)
        else:
            e.append(even_mask ^ sum(1 << k for k in range(32) if not odd[k] and vals[k] < 5))
    _bits_equal(o, np.array(e, np.uint32))


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_continue_break_in_divergent_loop(seed):
    x = np.random.default_rng(seed).integers(-5, 200, 64).astype(np.int32)
    (o,) = _run("continue_break", 1, 64, [x], [(np.int32, 64)])
    e = []
    for i in range(64):
        n, acc = int(x[i]), 0
        for k in range(40):
            if (k + i) % 3 == 0:
                continue
            if i & 1:
                acc += k * 3
                if acc > n:
                    break
            else:
                acc ^= k
                if k > n:
                    acc += 100
                    break
        e.append(acc)
    _bits_equal(o, np.array(e, np.int32))


# --------------------------------------------------------------------------- atomics


def test_cas_loops_and_inc_dec_wraparound():
    """A float max and a double sum built from atomicCAS loops (integer-valued inputs,
    so the double sum is exact in any order); atomicInc/atomicDec (PTX ISA atom: inc
    gives old >= b ? 0 : old+1, dec gives (old == 0 || old > b) ? b : old-1)."""
    n = 74
    x = np.random.default_rng(4).integers(-1000, 1000, n).astype(np.float32)
    mem = GlobalMemory()
    px = mem.to_device(x)
    pm = mem.to_device(np.array([-np.inf], np.float32))
    ps = mem.to_device(np.zeros(1))
    pc = mem.to_device(np.array([0, 10], np.uint32))
    _mod().launch("cas_loops", 2, 37, [px, pm, ps, pc], mem)
    _bits_equal(mem.from_device(pm, np.float32, 1), [x.max()])
    _bits_equal(mem.from_device(ps, np.float64, 1), [sum(int(v) for v in x)])
    c = [0, 10]
    for _ in range(n):
        c[0] = 0 if c[0] >= 5 else c[0] + 1
        c[1] = 3 if (c[1] == 0 or c[1] > 3) else c[1] - 1
    _bits_equal(mem.from_device(pc, np.uint32, 2), np.array(c, np.uint32))


def _ftz(v: np.float32) -> np.float32:
    return np.float32(np.copysign(0.0, v)) if abs(v) < 2.0**-126 else v


def test_float_atomic_add_flushes_subnormals_on_global_only():
    """PTX ISA 9.7.13.4 (atom): atom.add.f32 without .noftz flushes subnormal inputs and
    results to sign-preserving zero on global memory, and keeps them on shared memory."""
    x = np.full(64, 1e-40, np.float32)
    x[::7] = np.float32(-3e-39)
    g, s = _run("float_atomic_add", 1, 64, [x], [(np.float32, 1), (np.float32, 1)])
    eg, es = np.float32(0), np.float32(0)
    for v in x:            # atomics apply in thread order
        eg = _ftz(np.float32(_ftz(eg) + _ftz(v)))
        es = np.float32(es + v)
    _bits_equal(g, [eg])
    _bits_equal(s, [es])
    assert g[0] == 0 and s[0] != 0


# -------------------------------------------------------------------------- barriers


def test_early_return_before_syncthreads():
    """``if (t >= n) return; ... __syncthreads();``: refused in the default strict mode
    with a message that names the remedy; barrier_mode='warp' counts exited threads as
    arrived and gives the C result."""
    x = np.random.default_rng(7).standard_normal(128).astype(np.float32)
    (o,) = _run("early_return_sync", 1, 128, [x], [(np.float32, 128)], [128])
    _bits_equal(o, x[(np.arange(128) + 1) % 128] + x)
    with pytest.raises(DeadlockError, match="barrier_mode='warp'"):
        _run("early_return_sync", 1, 128, [x], [(np.float32, 128)], [100])
    for n in (100, 37, 5):
        (o,) = _run("early_return_sync", 1, 128, [x], [(np.float32, 128)], [n],
                    barrier_mode="warp")
        _bits_equal(o[:n], x[:n][(np.arange(n) + 1) % n] + x[:n])


# ---------------------------------------------------------- single-instruction PTX

_UNARY_PTX = """
.version 9.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 p0, .param .u64 p1)
{
    .reg .f32 %f<4>;
    .reg .b32 %r<4>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [p0];
    ld.param.u64 %rd2, [p1];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.f32 %f1, [%rd4];
    OPCODE %f2, %f1;
    add.s64 %rd5, %rd2, %rd3;
    st.global.f32 [%rd5], %f2;
    ret;
}
"""


def _unary(opcode: str, x: np.ndarray) -> np.ndarray:
    mem = GlobalMemory()
    px, po = mem.to_device(x), mem.alloc(4 * len(x))
    load_ptx(_UNARY_PTX.replace("OPCODE", opcode)).launch("k", 1, len(x), [px, po], mem)
    return mem.from_device(po, np.float32, len(x))


_LARGE = [1e3, -1e5, 1e7, 2.0**24 + 2, 1e10, -1e12, 1e15, 1e17, 1e20, -1e25, 3e38,
          -3.4028235e38, 1e30, 2.0**100, 314.0, 7e8]


@pytest.mark.parametrize("op,ref", [("sin", math.sin), ("cos", math.cos)])
def test_sin_cos_approx_large_arguments(op, ref):
    """sin/cos.approx.f32 of any finite argument is a finite value within the documented
    absolute error 2**-20.5 of the exact function (PTX ISA 9.7.3.18-19 bound the error
    on [-100pi, 100pi]; the model reduces every argument exactly, so it holds beyond).
    The reference is the platform's double-precision libm, accurate to about 1e-16."""
    x = np.array(_LARGE, np.float32)
    got = _unary(f"{op}.approx.f32", x).astype(np.float64)
    exp = np.array([ref(float(v)) for v in x])
    assert np.all(np.isfinite(got))
    assert np.max(np.abs(got - exp)) <= 2.0**-20.5


def test_sin_approx_keeps_the_sign_of_zero():
    """PTX ISA 9.7.3.18 (sin), special values: sin(-0.0) = -0.0, sin(+0.0) = +0.0."""
    got = _unary("sin.approx.f32", np.array([-0.0, 0.0], np.float32))
    assert got.view(np.uint32).tolist() == [0x80000000, 0]


_BINARY_PTX = _UNARY_PTX.replace(".param .u64 p1)", ".param .u64 p1, .param .u64 p2)").replace(
    "    OPCODE %f2, %f1;\n",
    "    ld.param.u64 %rd6, [p2];\n    add.s64 %rd7, %rd6, %rd3;\n    ld.global.f32 %f3, [%rd7];\n"
    "    OPCODE %f2, %f1, %f3;\n")


def _binary(opcode: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    mem = GlobalMemory()
    px, po, py = mem.to_device(x), mem.alloc(4 * len(x)), mem.to_device(y)
    load_ptx(_BINARY_PTX.replace("OPCODE", opcode)).launch("k", 1, len(x), [px, po, py], mem)
    return mem.from_device(po, np.float32, len(x))


def test_div_approx_large_divisors():
    """PTX ISA 9.7.3.8 (div): div.approx.f32 computes a * (1/b); for 2**126 < |b| < 2**128
    it returns 0, or NaN when a is infinite (also documented for __fdividef); in
    [2**-126, 2**126] the error is at most 2 ulp."""
    big = np.float32(2.0**127)
    x = np.array([1e38, -3.0, np.inf, 1.0, 7.0, -1e-30, 3e38, 1.0], np.float32)
    y = np.array([big, big * 1.5, big, -big, 3.0, 7e-20, 5.0, 3.4e38], np.float32)
    got = _binary("div.approx.f32", x, y)
    assert got[0] == 0 and got[1] == 0 and np.isnan(got[2]) and got[3] == 0 and got[7] == 0
    exact = x[4:7].astype(np.float64) / y[4:7].astype(np.float64)
    ulp = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    assert np.all(np.abs(got[4:7] - exact) <= 2 * ulp)
    full = _binary("div.full.f32", x[:2], y[:2])
    assert full[0] != 0       # div.full keeps its accuracy over the full range


def _ulps(got: float, exact) -> float:
    from decimal import Decimal
    return float(abs(Decimal(got) - exact) / Decimal(math.ulp(got))) if got else float(abs(exact))


def test_double_tanh_rsqrt_reciprocal():
    """nvcc's tanh(double) and rsqrt(double) refine rcp.approx.ftz.f64 and rsqrt.approx.f64
    seeds; the results stay within the CUDA C Programming Guide's bounds (tanh 1 ulp,
    rsqrt 1 ulp) of the exact values (decimal, 60 digits), and 1.0/a (rcp.rn.f64) is
    correctly rounded."""
    from decimal import Decimal, getcontext
    getcontext().prec = 60
    x = np.random.default_rng(14).standard_normal(32) * 4
    x[:6] = [1e-310, 1e300, -1e-300, 2.0, -8.0, 0.5]
    (o,) = _run("double_math", 1, 32, [x], [(np.float64, 96)])
    o = o.reshape(32, 3)
    for i, v in enumerate(x.tolist()):
        d = Decimal(v)
        if abs(d) < Decimal("1e-10"):   # (e2 - 1) would cancel: the series is exact enough
            th = d - d**3 / 3
        elif abs(d) > 20:
            th = (1 - 2 * (-2 * abs(d)).exp()).copy_sign(d)
        else:
            e2 = (2 * d).exp()
            th = (e2 - 1) / (e2 + 1)
        assert _ulps(float(o[i, 0]), th) <= 1.0, (v, o[i, 0])
        assert _ulps(float(o[i, 1]), 1 / abs(d).sqrt()) <= 1.0, (v, o[i, 1])
        if abs(1 / d) > Decimal(np.finfo(np.float64).max):
            assert o[i, 2] == math.copysign(math.inf, v)
        else:
            assert _ulps(float(o[i, 2]), 1 / d) <= 0.5, (v, o[i, 2])


def test_call_sequence_is_refused_with_a_clear_message():
    """nvcc's call sequence (as for double sin/cos/pow slow paths) opens with a scoped
    .param declaration; a call to a function the module only declares is refused with
    a message naming it."""
    from hardware.simt import UnsupportedPtxError
    ptx = """
.version 9.0
.target sm_90
.address_size 64
.func (.param .b64 func_retval0) helper(.param .b64 helper_param_0);
.visible .entry k(.param .u64 p0)
{
    .reg .f64 %fd<3>;
    mov.f64 %fd1, 0d3FF0000000000000;
    { // callseq 0, 0
    .param .b64 param0;
    st.param.f64 [param0+0], %fd1;
    .param .b64 retval0;
    call.uni (retval0), helper, (param0);
    ld.param.f64 %fd2, [retval0+0];
    } // callseq 0
    ret;
}
"""
    with pytest.raises(UnsupportedPtxError, match="call to helper, which this module "
                       "declares but does not define"):
        load_ptx(ptx)


_HALF_ATOM_PTX = """
.version 9.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 p0, .param .u64 p1, .param .u64 p2, .param .u64 p3)
{
    .reg .b16 %rs<4>;
    .reg .b32 %r<6>;
    .reg .b64 %rd<12>;
    ld.param.u64 %rd1, [p0];
    ld.param.u64 %rd2, [p1];
    ld.param.u64 %rd3, [p2];
    ld.param.u64 %rd4, [p3];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd5, %r1, 4;
    add.s64 %rd6, %rd4, %rd5;
    ld.global.u32 %r2, [%rd6];
    mov.b32 {%rs1, %rs2}, %r2;
    atom.global.add.noftz.f16 %rs3, [%rd1], %rs1;
    atom.global.add.noftz.bf16 %rs3, [%rd2], %rs2;
    atom.global.add.noftz.f16x2 %r3, [%rd3], %r2;
    ret;
}
"""


def _round_bf16(v: float) -> float:
    """Round a float64 to bfloat16 (8 significant bits, nearest even; normal range)."""
    if v == 0 or not math.isfinite(v):
        return v
    m, e = math.frexp(v)
    return math.ldexp(round(m * 256), e - 8)


def test_half_precision_atomic_add():
    """atomicAdd on __half, __half2 and __nv_bfloat16 (atom.add.noftz.{f16,f16x2,bf16},
    PTX ISA 9.7.13.4): round to nearest even, subnormals kept, each half of a pair added
    on its own; lanes apply in thread order."""
    rng = np.random.default_rng(21)
    lo = (rng.standard_normal(32) * 300).astype(np.float16)
    lo[:3] = [np.float16(6e-8), np.float16(6e-8), np.float16(-1.5e-7)]  # subnormals
    hi_f = (rng.standard_normal(32) * 8).astype(np.float32)
    hi_bits = (hi_f.view(np.uint32) >> 16).astype(np.uint16)        # bf16 by truncation
    packed = lo.view(np.uint16).astype(np.uint32) | (hi_bits.astype(np.uint32) << 16)
    mem = GlobalMemory()
    p_h = mem.to_device(np.zeros(1, np.uint16))
    p_b = mem.to_device(np.zeros(1, np.uint16))
    p_2 = mem.to_device(np.zeros(2, np.uint16))
    p_x = mem.to_device(packed)
    load_ptx(_HALF_ATOM_PTX).launch("k", 1, 32, [p_h, p_b, p_2, p_x], mem)
    h = np.float16(0.0)
    for v in lo:  # float64 sums of two binary16 values are exact; one rounding to f16
        h = np.float16(np.float64(h) + np.float64(v))
    b = 0.0
    for bits in hi_bits:
        b = _round_bf16(b + float(np.uint32(int(bits) << 16).view(np.float32)))
    h_lo = np.float16(0.0)
    h_hi = 0.0
    for v, bits in zip(lo, hi_bits):
        h_lo = np.float16(np.float64(h_lo) + np.float64(v))
        h_hi = float(np.float16(h_hi + float(np.uint16(bits).view(np.float16))))
    assert mem.from_device(p_h, np.uint16, 1)[0] == h.view(np.uint16)
    got_b = np.uint32(int(mem.from_device(p_b, np.uint16, 1)[0]) << 16).view(np.float32)
    assert float(got_b) == b
    assert mem.from_device(p_2, np.uint16, 2).tolist() == [
        int(h_lo.view(np.uint16)), int(np.float16(h_hi).view(np.uint16))]


# ------------------------------------------------------- device functions, carry chains


def _decimal_pi(digits: int):
    """pi by Machin's formula in decimal arithmetic (independent of the interpreter)."""
    from decimal import Decimal, getcontext
    getcontext().prec = digits + 20

    def atan_inv(n: int):
        x = Decimal(1) / n
        x2, total, term, k, sign = x * x, Decimal(0), x, 1, 1
        eps = Decimal(10) ** -(digits + 10)
        while term > eps:
            total += sign * term / k
            term *= x2
            k += 2
            sign = -sign
        return total
    return 4 * (4 * atan_inv(5) - atan_inv(239))


def _decimal_sin(x: float, pi, shift: bool):
    """sin(x) (cos(x) with shift) exactly enough: reduction with ~900 digits of pi."""
    from decimal import Decimal, getcontext
    getcontext().prec = 900
    d = Decimal(x) + (pi / 2 if shift else 0)
    r = d - (d / (2 * pi)).to_integral_value() * 2 * pi
    total, term, i = Decimal(0), r, 1
    while term != 0 and abs(term) > abs(r) * Decimal(10) ** -60:
        total += term
        term = -term * r * r / ((i + 1) * (i + 2))
        i += 2
    return total


def test_device_function_calls():
    """Calls to .func device functions run by inlining (PTX ISA 9.7.12.2): nvcc's double
    sin/cos call their argument-reduction slow path (carry-chain multiplication, a local
    array) for large arguments; results within the CUDA C Programming Guide's 2 ulp of
    the exact values. A __noinline__ Collatz step counter gives the Python count."""
    from decimal import Decimal
    x = np.array([1e22, 1e300, -1e200, 2.0**1000, 1e6, 5e15, 710.5, -3e9, 1.0, -0.0,
                  3.141592653589793, 1e17, 123456789.0, -2.5e8, 6e20, 0.5] * 2)
    v = np.arange(1, 33, dtype=np.int32) * 7
    o, steps = _run("device_calls", 1, 32, [x, v], [(np.float64, 64), (np.int32, 32)])
    pi = _decimal_pi(880)
    for i, xv in enumerate(x[:16].tolist()):
        for k in (0, 1):
            exact = _decimal_sin(xv, pi, shift=bool(k))
            got = float(o[2 * i + k])
            if exact == 0:
                assert got == 0
                continue
            assert float(abs(Decimal(got) - exact) / Decimal(math.ulp(got))) <= 2.0, (xv, k)
    exp = []
    for n in v.tolist():
        s = 0
        while n != 1 and s < 1000:
            n = 3 * n + 1 if n & 1 else n >> 1
            s += 1
        exp.append(s)
    assert steps.tolist() == exp


_CARRY_PTX = """
.version 9.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 p0, .param .u64 p1, .param .u64 p2)
{
    .reg .b32 %r<20>;
    .reg .b64 %rd<20>;
    ld.param.u64 %rd1, [p0];
    ld.param.u64 %rd2, [p1];
    ld.param.u64 %rd3, [p2];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd4, %r1, 16;
    add.s64 %rd5, %rd1, %rd4;
    add.s64 %rd6, %rd2, %rd4;
    ld.global.v4.u32 {%r2, %r3, %r4, %r5}, [%rd5];
    ld.global.v4.u32 {%r6, %r7, %r8, %r9}, [%rd6];
    add.cc.u32 %r10, %r2, %r6;
    addc.cc.u32 %r11, %r3, %r7;
    addc.cc.u32 %r12, %r4, %r8;
    addc.u32 %r13, %r5, %r9;
    sub.cc.u32 %r14, %r2, %r6;
    subc.cc.u32 %r15, %r3, %r7;
    subc.cc.u32 %r16, %r4, %r8;
    subc.u32 %r17, %r5, %r9;
    mul.wide.u32 %rd7, %r1, 64;
    add.s64 %rd8, %rd3, %rd7;
    st.global.v4.u32 [%rd8], {%r10, %r11, %r12, %r13};
    st.global.v4.u32 [%rd8+16], {%r14, %r15, %r16, %r17};
    ld.global.v2.u64 {%rd10, %rd11}, [%rd5];
    ld.global.v2.u64 {%rd12, %rd13}, [%rd6];
    mad.lo.cc.u64 %rd14, %rd10, %rd12, %rd11;
    madc.hi.cc.u64 %rd15, %rd10, %rd12, %rd13;
    addc.u64 %rd16, 0, 0;
    st.global.v2.u64 [%rd8+32], {%rd14, %rd15};
    st.global.u64 [%rd8+48], %rd16;
    ret;
}
"""


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_carry_chains(seed):
    """add.cc/addc and sub.cc/subc (PTX ISA 9.7.2: subc computes a - (b + CC.CF)) as
    128-bit addition and subtraction of 32-bit limbs; mad.lo.cc/madc.hi.cc/addc on
    64-bit operands: lo(a*b) + c, then hi(a*b) + d + carry, then the final carry."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 2**32, (32, 4), dtype=np.uint64).astype(np.uint32)
    b = rng.integers(0, 2**32, (32, 4), dtype=np.uint64).astype(np.uint32)
    a[0], b[0] = [0xFFFFFFFF] * 4, [1, 0, 0, 0]           # carry through every limb
    a[1], b[1] = [0, 0, 0, 0], [1, 0, 0, 0]               # borrow through every limb
    a[2], b[2] = [0xFFFFFFFF] * 4, [0xFFFFFFFF] * 4
    mem = GlobalMemory()
    pa, pb, po = mem.to_device(a), mem.to_device(b), mem.alloc(64 * 32)
    load_ptx(_CARRY_PTX).launch("k", 1, 32, [pa, pb, po], mem)
    out = mem.from_device(po, np.uint32, 16 * 32).reshape(32, 16)
    m128 = (1 << 128) - 1
    m64 = (1 << 64) - 1
    for i in range(32):
        x = sum(int(a[i, k]) << (32 * k) for k in range(4))
        y = sum(int(b[i, k]) << (32 * k) for k in range(4))
        limbs = lambda v: [(v >> (32 * k)) & 0xFFFFFFFF for k in range(4)]  # noqa: E731
        assert out[i, 0:4].tolist() == limbs((x + y) & m128)
        assert out[i, 4:8].tolist() == limbs((x - y) & m128)
        a0, a1, b0, b1 = x & m64, x >> 64, y & m64, y >> 64
        lo = ((a0 * b0) & m64) + a1
        hi = ((a0 * b0) >> 64) + b1 + (lo >> 64)
        got = [int(v) for v in out[i, 8:14].view(np.uint64)]
        assert got == [lo & m64, hi & m64, hi >> 64]


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_call_forms(seed):
    """Early return from a loop inside a function, a struct return value, a void
    function with an atomic, nested calls, a function without arguments, calls under
    divergence: every result equals the Python evaluation of the C source."""
    v = np.random.default_rng(seed).integers(-3, 30, (32, 8)).astype(np.int32)
    o, ol, of, cnt = _run("call_forms", 1, 32, [v], [(np.int32, 64), (np.int64, 32),
                                                    (np.float32, 32), (np.int32, 1)])

    def first_negative(row):
        return next((k for k, x in enumerate(row) if x < 0), -1)
    count, e0, e1 = 0, [], []
    for i in range(32):
        row = v[i].tolist()
        e0.append(first_negative(row))
        if i & 1:
            r = first_negative(row)
            count += 100 if r < 0 else r
            e1.append(r * 2 + first_negative(row[1:]))
        else:
            e1.append(first_negative(row[2:]))
    assert o[0::2].tolist() == e0 and o[1::2].tolist() == e1
    assert int(cnt[0]) == count
    assert ol.tolist() == [(i << 33) + 3 * i for i in range(32)]
    _bits_equal(of, np.array(e0, np.float32) * np.float32(0.5) + np.float32(2.5))


def _func_module(body: str) -> str:
    return """
.version 9.0
.target sm_90
.address_size 64
.func (.param .b32 func_retval0) f(.param .b32 f_param_0)
{
    .reg .b32 %r<3>;
    ld.param.b32 %r1, [f_param_0];
""" + body + """
    st.param.b32 [func_retval0+0], %r2;
    ret;
}
.visible .entry k(.param .u64 p0)
{
    .reg .b32 %r<3>;
    mov.u32 %r1, 1;
    {
    .param .b32 param0;
    st.param.b32 [param0+0], %r1;
    .param .b32 retval0;
    call.uni (retval0), f, (param0);
    ld.param.b32 %r2, [retval0+0];
    }
    ret;
}
"""


def test_recursive_and_undefined_calls_are_refused():
    from hardware.simt import UnsupportedPtxError
    recursive = _func_module("""
    {
    .param .b32 param0;
    st.param.b32 [param0+0], %r1;
    .param .b32 retval0;
    call.uni (retval0), f, (param0);
    ld.param.b32 %r2, [retval0+0];
    }""")
    with pytest.raises(UnsupportedPtxError, match="recursive call to f"):
        load_ptx(recursive)
    undefined = _func_module("""
    {
    .param .b32 param0;
    st.param.b32 [param0+0], %r1;
    .param .b32 retval0;
    call.uni (retval0), g, (param0);
    ld.param.b32 %r2, [retval0+0];
    }""")
    with pytest.raises(UnsupportedPtxError, match="call to g"):
        load_ptx(undefined)
    assert load_ptx(_func_module("    add.s32 %r2, %r1, 1;")) is not None


def test_inlining_keeps_source_line_numbers():
    """An error after an inlined call (and inside a function body) names the line of
    the source text, not of the rewritten text."""
    from hardware.simt import UnsupportedPtxError
    text = _func_module("    add.s32 %r2, %r1, 1;").replace(
        "    ld.param.b32 %r2, [retval0+0];\n    }\n    ret;",
        "    ld.param.b32 %r2, [retval0+0];\n    }\n"
        "    vabsdiff4.u32.u32.u32 %r1, %r1, %r2, %r1;\n    ret;")
    line = text.splitlines().index("    vabsdiff4.u32.u32.u32 %r1, %r1, %r2, %r1;") + 1
    with pytest.raises(UnsupportedPtxError, match=rf"line {line}:"):
        load_ptx(text)


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_int8_dot_products(seed):
    """__dp4a and __dp2a_lo/_hi (PTX ISA dp4a, dp2a): c + sum of products of bytes
    (dp4a) or of 16-bit halves of a with bytes 0-1 (.lo) or 2-3 (.hi) of b, elements
    sign-extended for signed types; the sum wraps modulo 2**32."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 2**32, 32, dtype=np.uint64).astype(np.uint32)
    b = rng.integers(0, 2**32, 32, dtype=np.uint64).astype(np.uint32)
    a[:2], b[:2] = [0xFFFFFFFF, 0x7F807F80], [0xFFFFFFFF, 0x80808080]
    o, ou = _run("int8_dot", 1, 32, [a.view(np.int32), b.view(np.int32)],
                 [(np.int32, 96), (np.uint32, 32)])

    def part(x: int, k: int, width: int, signed: bool) -> int:
        v = (x >> (k * width)) & ((1 << width) - 1)
        return v - (1 << width) if signed and v >> (width - 1) else v
    e, eu = [], []
    for i in range(32):
        x, y = int(a[i]), int(b[i])
        e += [i * 1000 - 5000 + sum(part(x, k, 8, True) * part(y, k, 8, True) for k in range(4)),
              -i + sum(part(x, k, 16, True) * part(y, k, 8, True) for k in range(2)),
              i + sum(part(x, k, 16, False) * part(y, k + 2, 8, False) for k in range(2))]
        eu.append(i + sum(part(x, k, 8, False) * part(y, k, 8, False) for k in range(4)))
    _bits_equal(o, np.array([v & 0xFFFFFFFF for v in e], np.uint32).view(np.int32))
    _bits_equal(ou, np.array([v & 0xFFFFFFFF for v in eu], np.uint32))


def test_min_max_nan_modifier_and_relu():
    """PTX ISA min/max: with .NaN the result is the canonical NaN when either input is
    NaN (f32, f16x2); without it a NaN input is ignored; max.relu.s32 clamps a negative
    result to 0; min.ftz.f16 flushes subnormal inputs to signed zeros."""
    nan = np.float32(np.nan)
    x = np.array([nan, 1.0, -2.0, nan, -0.0], np.float32)
    y = np.array([3.0, nan, 5.0, nan, 0.0], np.float32)
    got = _binary("max.NaN.f32", x, y).view(np.uint32)
    assert got.tolist() == [0x7FFFFFFF, 0x7FFFFFFF, np.float32(5.0).view(np.uint32), 0x7FFFFFFF, 0]
    got = _binary("min.f32", x, y).view(np.uint32)
    assert got.tolist()[:3] == [np.float32(v).view(np.uint32) for v in (3.0, 1.0, -2.0)]
    # integer relu and packed halves through raw bits
    ptx = _BINARY_PTX.replace(".reg .f32 %f<4>;", ".reg .b32 %f<4>;").replace(
        "ld.global.f32", "ld.global.b32").replace("st.global.f32", "st.global.b32")
    mem = GlobalMemory()
    a = np.array([-5, 7, -1, 3], np.int32)
    b = np.array([-9, 2, -3, -8], np.int32)
    pa, po, pb = mem.to_device(a), mem.alloc(16), mem.to_device(b)
    load_ptx(ptx.replace("OPCODE", "max.relu.s32")).launch("k", 1, 4, [pa, po, pb], mem)
    assert mem.from_device(po, np.int32, 4).tolist() == [0, 7, 0, 3]
    h = lambda *v: np.array(v, np.float16).view(np.uint16).astype(np.uint32)  # noqa: E731
    pa2 = mem.to_device(h(np.nan, 1.0, 6e-8, 2.0) | (h(1.0, np.nan, -6e-8, -0.0) << 16))
    pb2 = mem.to_device(h(1.0, 4.0, 1e-7, -3.0) | (h(-1.0, 0.5, 0.0, 0.0) << 16))
    po2 = mem.alloc(16)
    load_ptx(ptx.replace("OPCODE", "max.NaN.f16x2")).launch("k", 1, 4, [pa2, po2, pb2], mem)
    got = mem.from_device(po2, np.uint32, 4)
    assert [int(v) & 0xFFFF for v in got] == [0x7FFF, int(h(4.0)[0]), int(h(1e-7)[0]),
                                              int(h(2.0)[0])]
    assert [int(v) >> 16 for v in got] == [int(h(1.0)[0]), 0x7FFF, 0, 0]
    load_ptx(ptx.replace("OPCODE", "min.ftz.f16")).launch("k", 1, 4, [pa2, po2, pb2], mem)
    got = mem.from_device(po2, np.uint32, 4) & 0xFFFF
    assert int(got[2]) == 0  # both halves subnormal: flushed to +0 (min.f16 gives 6e-8)


def test_register_declaration_without_space():
    """cuda_fp16's h2sqrt inline asm declares ``.reg.b16 hl, hu;`` (no space)."""
    ptx = _BINARY_PTX.replace(".reg .f32 %f<4>;", ".reg .b32 %f<4>;").replace(
        "ld.global.f32", "ld.global.b32").replace("st.global.f32", "st.global.b32").replace(
        "OPCODE %f2, %f1, %f3;",
        "{.reg.b16 hl, hu;\n .reg.b32 t;\n mov.b32 {hl, hu}, %f1;\n mov.b32 t, {hu, hl};\n"
        " xor.b32 %f2, t, %f3;}")
    mem = GlobalMemory()
    x = np.array([0x12345678, 0xFFFF0000], np.uint32)
    y = np.array([0, 1], np.uint32)
    px, po, py = mem.to_device(x), mem.alloc(8), mem.to_device(y)
    load_ptx(ptx).launch("k", 1, 2, [px, po, py], mem)
    assert mem.from_device(po, np.uint32, 2).tolist() == [0x56781234, 0x0000FFFF ^ 1]


def test_cvt_relu_to_half():
    """cvt.rn.relu.{f16,bf16}.f32 (PTX ISA cvt): negative values become +0, NaN stays
    the canonical NaN; it used to be ignored."""
    x = np.array([-1.5, 2.0, np.nan, -1e-9], np.float32)
    for fmt, two in (("f16", np.float16(2.0).view(np.uint16)), ("bf16", 0x4000)):
        ptx = _UNARY_PTX.replace(".reg .f32 %f<4>;", ".reg .f32 %f<4>; .reg .b16 %h;").replace(
            "OPCODE %f2, %f1;", f"cvt.rn.relu.{fmt}.f32 %h, %f1;\n    cvt.u32.u16 %r2, %h;\n"
            "    mov.b32 %f2, %r2;")
        mem = GlobalMemory()
        px, po = mem.to_device(x), mem.alloc(16)
        load_ptx(ptx).launch("k", 1, 4, [px, po], mem)
        got = mem.from_device(po, np.uint32, 4).tolist()
        assert got == [0, int(two), 0x7FFF, 0], fmt


_CP_ASYNC_PTX = """
.version 9.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 p0, .param .u64 p1)
{
    .shared .align 16 .b8 buf[1024];
    .reg .b32 %r<12>;
    .reg .b64 %rd<12>;
    ld.param.u64 %rd1, [p0];
    ld.param.u64 %rd2, [p1];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 16;
    add.s64 %rd4, %rd1, %rd3;
    shl.b32 %r2, %r1, 4;
    mov.u32 %r3, buf;
    add.s32 %r4, %r3, %r2;
    cp.async.cg.shared.global [%r4], [%rd4], 16, 8;
    add.s32 %r5, %r4, 512;
    cp.async.ca.shared.global [%r5], [%rd4+12], 4;
    cp.async.commit_group;
    cp.async.wait_group 0;
    bar.sync 0;
    ld.shared.v4.u32 {%r6, %r7, %r8, %r9}, [%r4];
    ld.shared.u32 %r10, [%r5];
    add.s64 %rd5, %rd2, %rd3;
    st.global.v4.u32 [%rd5], {%r6, %r7, %r8, %r10};
    ret;
}
"""


def test_cp_async_copies_with_zero_fill():
    """cp.async (PTX ISA 9.7.9.25): cp-size bytes from global to shared, the bytes past
    src-size zero-filled; commit_group / wait_group complete it."""
    x = np.arange(32 * 4, dtype=np.uint32).reshape(32, 4) + 1000
    mem = GlobalMemory()
    px, po = mem.to_device(x), mem.alloc(16 * 32)
    load_ptx(_CP_ASYNC_PTX).launch("k", 1, 32, [px, po], mem)
    got = mem.from_device(po, np.uint32, 128).reshape(32, 4)
    exp = np.stack([x[:, 0], x[:, 1], np.zeros(32, np.uint32), x[:, 3]], axis=1)
    np.testing.assert_array_equal(got, exp)
