"""Edge cases of ordinary CUDA C, each against an independent reference: Python integers
for C integer semantics (C99 6.5.5 division, wrap-around), the PTX ISA ``cvt`` rules for
float-to-integer conversion, the CUDA C Programming Guide's warp functions and error
bounds (checked in 60-digit decimal arithmetic), and sequential sums in thread order
for atomics.

Kernels: ``hardware/simt/gallery/edge_cases.cu`` (nvcc 13.0, sm_90)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from simt_reference import c_div, float_to_int

from hardware.simt import DeadlockError, GlobalMemory, gallery

def _mod():
    return gallery.load("edge_cases")


def _run(kernel, grid, block, ins, outs, scalars=(), **kw):
    mem = GlobalMemory()
    ptrs = [mem.to_device(np.ascontiguousarray(a)) for a in ins]
    optr = [mem.calloc(np.dtype(dt).itemsize * n) for dt, n in outs]  # zeroed: atomics add
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
        ei += [float_to_int(v, m, 32, True) for m in ("rz", "rn", "rm", "rp")]
        ei.append(float_to_int(w, "rz", 32, True))
        eu += [float_to_int(v, "rz", 32, False), float_to_int(w, "rz", 32, False)]
        el.append(float_to_int(v, "rz", 64, True))
        eul.append(float_to_int(v, "rz", 64, False))
    _bits_equal(oi, np.array(ei, np.int64).astype(np.int32))
    _bits_equal(ou, np.array(eu, np.uint64).astype(np.uint32))
    _bits_equal(ol, np.array(el, dtype=np.int64))
    _bits_equal(oul, np.array(eul, dtype=np.uint64))


# ------------------------------------------------ narrow loads, C division of negatives


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
        e += [int(a[j]), int(b[j]), int(a[j]) & 0xFF, *c_div(int(p[i]), int(q[i]), 32),
              (int(p[i]) & 0xFFFFFFFF) // (int(q[i]) & 0xFFFFFFFF)]
        el += list(c_div(int(r[i]), int(s[i]), 64))
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
