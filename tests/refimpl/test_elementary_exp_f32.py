"""``exp_f32``: e^x correctly rounded to binary32 (times 2^shift), against an
independent reference: e^x from ``decimal`` (``Decimal.exp`` is correctly rounded to the
context precision, so the exact value lies within one unit of its last digit), the
interval of that error bound rounded to binary32 by the IEEE 754 definition written out
in ``tests/oracles.py`` (round to nearest, ties to even; subnormal quantum 2^-149;
overflow to +inf from 2^128 - 2^103 on), and the precision raised until both ends of
the interval agree."""
from __future__ import annotations

import decimal
import math
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from oracles import assert_same_bits, round_rational
from refimpl import elementary
from refimpl.elementary import exp_f32

TWO = Fraction(2)
#: the smallest value that rounds to +inf in binary32 (halfway from the largest finite
#: value 2^128 - 2^104 to 2^128, rounded to the even side, 2^128)
OVERFLOW_EDGE = TWO**128 - TWO**103


def rn32_ref(v: Fraction) -> np.float32:
    """A non-negative rational rounded to binary32 (roundTiesToEven)."""
    assert v >= 0
    return round_rational(v, np.float32)


def same_bits(got: np.ndarray, want: np.ndarray) -> None:
    """Equal as binary32 bit patterns (+0 differs from -0), every NaN counted equal."""
    assert_same_bits(got, want, np.float32)


def exp32_ref(x: float, shift: int = 0) -> np.float32:
    """RN32(2^shift e^x) from decimal arithmetic (independent of the code under test)."""
    if math.isnan(x):
        return np.float32(np.nan)
    if x == -math.inf or x < -200.0:  # 2^8 e^-200 < 2^-280: rounds to +0
        return np.float32(0.0)
    if x == math.inf or x > 200.0:  # 2^-64 e^200 > 2^224: +inf
        return np.float32(np.inf)
    scale = TWO**shift
    prec = 60
    while True:
        with decimal.localcontext() as ctx:
            ctx.prec = prec
            ctx.Emax, ctx.Emin = 10**6, -10**6
            ctx.traps[decimal.Inexact] = False
            v = Decimal(x).exp()  # exact conversion of x; exp correctly rounded
        unit = Fraction(10) ** (v.adjusted() - prec + 1)  # one unit of the last digit
        lo, hi = rn32_ref((Fraction(v) - unit) * scale), rn32_ref((Fraction(v) + unit) * scale)
        if lo.tobytes() == hi.tobytes():
            return lo
        prec *= 2  # e^x (x != 0) is never a midpoint, so this ends


def ref_array(x: np.ndarray, shift: int = 0) -> np.ndarray:
    flat = np.asarray(x, dtype=np.float64).reshape(-1)
    return np.array([exp32_ref(float(t), shift) for t in flat],
                    dtype=np.float32).reshape(np.shape(x))



# ------------------------------------------------------------------ the reference itself
def test_reference_rounding_by_hand():
    """The test's own rounding on values whose binary32 rounding is known by hand."""
    assert rn32_ref(Fraction(1)) == 1.0
    # 1 + 2^-24 is the midpoint of 1 and 1 + 2^-23: ties to even (1.0); just above: up
    assert rn32_ref(1 + TWO**-24) == 1.0
    assert rn32_ref(1 + TWO**-24 + TWO**-90) == np.float32(1 + 2.0**-23)
    assert rn32_ref(1 + 3 * TWO**-24) == np.float32(1 + 2.0**-22)  # tie: to the even 1+2^-22
    # subnormals: quantum 2^-149; 2^-150 is a tie between 0 and 2^-149 (even: 0)
    assert rn32_ref(TWO**-150).tobytes() == np.float32(0.0).tobytes()
    assert rn32_ref(TWO**-150 + TWO**-300) == np.float32(2.0**-149)
    assert rn32_ref(3 * TWO**-150) == np.float32(2.0**-148)  # tie 1.5 q: to 2 q
    assert rn32_ref(TWO**-126 - TWO**-151) == np.float32(2.0**-126)  # into the normals
    # overflow: the largest finite value and the edge
    big = TWO**128 - TWO**104
    assert rn32_ref(big) == np.float32(float(big))
    assert rn32_ref(OVERFLOW_EDGE - TWO**-10) == np.float32(float(big))
    assert rn32_ref(OVERFLOW_EDGE) == np.inf
    # exp of a few values known to binary32
    assert exp32_ref(0.0) == 1.0 and exp32_ref(-0.0) == 1.0
    assert exp32_ref(math.log(2.0) * 0, 5) == 32.0
    assert exp32_ref(1.0).tobytes() == np.uint32(0x402DF854).tobytes()  # e in binary32


# ------------------------------------------------------------------ drawn arguments
def _ln2_multiple(k: int, shift: int) -> float:
    """float64 nearest to (k - shift) ln 2: where 2^shift e^x crosses 2^k."""
    with decimal.localcontext() as ctx:
        ctx.prec = 60
        return float(Decimal(2).ln() * (k - shift))


def _ln_of(v: Fraction, shift: int) -> float:
    with decimal.localcontext() as ctx:
        ctx.prec = 60
        return float((Decimal(v.numerator) / Decimal(v.denominator)).ln()
                     - Decimal(2).ln() * shift)


@pytest.mark.slow
@settings(max_examples=150)
@given(st.lists(st.floats(-120.0, 100.0), min_size=1, max_size=12),
       st.integers(-64, 8))
@example([0.0, -0.0], 0)
@example([-87.3365, -103.2789, -103.9721, -104.0], 0)
@example([-110.5, -104.0, -103.9721, -109.5], 8)
@example([88.7228391, 88.72283905, 88.722839, 88.7228392], 0)
@example([66.0, 66.5, 70.0, 80.0, 88.0, 89.0, 90.0], 0)
@example([66.0000001, 75.25, 89.9], -64)
@example([99.9, 100.0, -120.0], -64)
def test_exp_f32_matches_decimal_reference(xs, shift):
    x = np.array(xs, dtype=np.float64)
    same_bits(exp_f32(x, shift=shift), ref_array(x, shift))


def _threshold_points() -> list[tuple[float, int]]:
    """Arguments at and around every rounding edge of the binary32 range, for several
    shifts: 2^shift e^x near 2^-150 (rounds to 0 or to 2^-149), 2^-149, 2^-126 (the
    smallest normal), and the overflow edge 2^128 - 2^103 and 2^128."""
    pts = []
    for shift in (-64, -1, 0, 1, 8):
        edges = [_ln2_multiple(k, shift) for k in (-150, -149, -126, 128)]
        edges.append(_ln_of(OVERFLOW_EDGE, shift))
        edges.append(_ln_of(TWO**128 - TWO**104, shift))  # the largest finite value
        for c in edges:
            for t in (c, np.nextafter(c, -np.inf), np.nextafter(c, np.inf),
                      c - 2.0**-40, c + 2.0**-40, c - 1e-6, c + 1e-6):
                pts.append((float(t), shift))
    return pts


@pytest.mark.parametrize("shift", [0, 8, -64, 3])
def test_exp_f32_threshold_regions(shift):
    pts = [x for x, s in _threshold_points() if s == shift] if shift != 3 else \
        [x for x, _ in _threshold_points()]
    x = np.array(pts)
    want = ref_array(x, shift)
    same_bits(exp_f32(x, shift=shift), want)
    # elementwise too: a lone argument takes the same path decisions on its own
    for i in range(0, x.size, 5):
        same_bits(exp_f32(x[i:i + 1], shift=shift), want[i:i + 1])


@pytest.mark.parametrize("shift", [-64, -3, 0, 8])
def test_exp_f32_special_values(shift):
    x = np.array([0.0, -0.0, -np.inf, np.inf, np.nan, 1e300, -1e300, 5e-324, -5e-324,
                  1e-8, -1e-8, 709.8, -746.0, 1e10, -1e10])
    got = exp_f32(x, shift=shift)
    want = ref_array(x, shift)
    same_bits(got, want)
    p = np.float32(2.0**shift)
    # the hand-known values, to be sure the reference itself says what it should
    assert got[0] == p and got[1] == p
    assert got[2].tobytes() == np.float32(0).tobytes()
    assert got[3] == np.inf and np.isnan(got[4])
    assert got[5] == np.inf and got[6].tobytes() == np.float32(0).tobytes()
    assert got[7] == p and got[8] == p
    assert got[13] == np.inf and got[14].tobytes() == np.float32(0).tobytes()


def test_exp_f32_slow_range_beyond_table():
    """x in (66, 90]: the arguments beyond the module's table, many of them."""
    rng = np.random.default_rng(20261129)
    x = np.concatenate([rng.uniform(66.0, 90.0, 300), np.nextafter(66.0, [np.inf, -np.inf]),
                        rng.uniform(66.0, 90.0, 40) - 44.0])
    for shift in (0, -64, -20, 8):
        same_bits(exp_f32(x, shift=shift), ref_array(x, shift))


# ------------------------------------------------------------------ double rounding
def _find_double_rounding(count: int, seed: int) -> list[float]:
    """Arguments x whose float64 exp, rounded again to binary32, is not RN32(e^x).

    e^x lands within a float64 ulp of a binary32 midpoint M when x = fl(ln M) for
    |x| < 1: the float64 result is then often M itself, which rounds to the even
    neighbour, while e^x lies on one side of M (half the time the odd one)."""
    rng = np.random.default_rng(seed)
    found = []
    for _ in range(4000):
        # a binary32 midpoint in [1.05, 2): an odd multiple of 2^-24
        m = Fraction(int(rng.integers(int(1.05 * 2**23), 2**24)) * 2 + 1, 2**24)
        x = _ln_of(m, 0)
        if np.float32(elementary.exp(np.array([x]))[0]).tobytes() != exp32_ref(x).tobytes():
            found.append(x)
            if len(found) == count:
                break
    return found


#: arguments found (with the search above, run with decimal only) where RN32(e^x) is not
#: RN32(RN64(e^x)): e^x lies just above/below the binary32 midpoint that RN64 gives.
#: By hand: x = 2^-24 - 2^-49 + 2^-72 has e^x = 1 + 2^-24 + 2^-72 - 2^-73 + ~2^-74.6
#: (> the midpoint 1 + 2^-24, so RN32 is 1 + 2^-23), while RN64(e^x) = 1 + 2^-24,
#: whose binary32 rounding is the even 1.0.
PINNED_DOUBLE_ROUNDING = [
    2.0**-24 - 2.0**-49 + 2.0**-72,
]


#: (x, bits of RN32(e^x)) found by the search above with decimal (the test's own code)
#: where the float64 exp rounded again to binary32 gives the neighbouring value
PINNED_DOUBLE_ROUNDING_HEX = [
    ("0x1.5550541c29163p-1", 0x3FF94CE9),
    ("0x1.fcf6d9e678df5p-2", 0x3FD2695F),
    ("0x1.0fac4335ae177p-1", 0x3FD998A5),
    ("0x1.2935139476100p-1", 0x3FE4B92F),
    ("-0x1.28acb26da0597p-1", 0x3F0F69F5),
    ("-0x1.38042004e951bp-3", 0x3F5BD2DD),
    ("-0x1.119ea7863a4a5p-2", 0x3F43F8C7),
]


@pytest.mark.parametrize("xhex, bits", PINNED_DOUBLE_ROUNDING_HEX)
def test_pinned_double_rounding_cases(xhex, bits):
    x = float.fromhex(xhex)
    want = np.uint32(bits).view(np.float32)
    assert exp32_ref(x).tobytes() == want.tobytes()
    assert np.float32(elementary.exp(np.array([x]))[0]) != want  # rounding twice errs here
    same_bits(exp_f32(np.array([x])), np.array([want]))
    # inside an array of ordinary arguments, and scaled (exact before the one rounding)
    arr = np.array([0.5, x, -3.0, 70.0])
    same_bits(exp_f32(arr)[1:2], np.array([want]))
    same_bits(exp_f32(np.array([x]), shift=-64),
              np.array([np.float32(float(want) * 2.0**-64)]))


def test_double_rounding_case_by_hand():
    x = PINNED_DOUBLE_ROUNDING[0]
    with decimal.localcontext() as ctx:
        ctx.prec = 80
        v = Fraction(Decimal(x).exp())
    assert 1 + TWO**-24 < v < 1 + TWO**-24 + TWO**-60  # RN64 gives the midpoint
    assert exp32_ref(x) == np.float32(1 + 2.0**-23)
    assert exp_f32(np.array([x]))[0] == np.float32(1 + 2.0**-23)
    assert exp_f32(np.array([x]), shift=-5)[0] == np.float32((1 + 2.0**-23) / 32)


def test_exp_f32_is_not_float64_exp_rounded_again():
    xs = _find_double_rounding(3, seed=7)
    assert xs, "the search should find arguments where double rounding errs"
    x = np.array(xs + PINNED_DOUBLE_ROUNDING)
    want = ref_array(x)
    twice = elementary.exp(x).astype(np.float32)
    assert np.all(twice != want)  # the cases really are double-rounding cases
    same_bits(exp_f32(x), want)
    for shift in (-64, 8):
        same_bits(exp_f32(x, shift=shift), ref_array(x, shift))


# ------------------------------------------------------------------ interface
@pytest.mark.parametrize("bad", [9, -65, 100])
def test_exp_f32_bad_shift(bad):
    with pytest.raises(ValueError, match="shift"):
        exp_f32(np.zeros(3), shift=bad)


@pytest.mark.parametrize("bad", [True, False, 1.0, "0", None, np.float64(2)])
def test_exp_f32_shift_of_wrong_type(bad):
    with pytest.raises(TypeError, match="shift"):
        exp_f32(np.zeros(3), shift=bad)


def test_exp_f32_numpy_integer_shift_ok():
    x = np.array([0.5, -90.0, 70.0])
    same_bits(exp_f32(x, shift=np.int64(-7)), ref_array(x, -7))
    same_bits(exp_f32(x, shift=np.int8(8)), ref_array(x, 8))


@pytest.mark.parametrize("out", [np.zeros(4, np.float64), np.zeros(4, np.float32),
                                 np.zeros((3, 1), np.float32), np.zeros(3, np.float16),
                                 np.zeros(3, np.int64), np.zeros(3, np.complex128)])
def test_exp_f32_bad_out(out):
    before = out.copy()
    with pytest.raises(ValueError, match="out"):
        exp_f32(np.zeros(3), out)
    assert np.array_equal(out, before)


def test_exp_f32_out_filled_and_returned():
    rng = np.random.default_rng(3)
    x = rng.uniform(-110, 95, (4, 9))
    x[0, :3] = (np.nan, -np.inf, np.inf)
    want = ref_array(x, -2)
    buf = np.full((4, 9), 7.0, np.float32)
    got = exp_f32(x, buf, shift=-2)
    assert got is buf
    same_bits(buf, want)
    # a non-contiguous out (a strided view) is filled as well
    big = np.full((4, 18), 7.0, np.float32)
    view = big[:, ::2]
    got = exp_f32(x, view, shift=-2)
    assert got is view
    same_bits(np.ascontiguousarray(big[:, ::2]), want)
    assert np.all(big[:, 1::2] == 7.0)  # the rest untouched


def test_exp_f32_empty_and_scalar_shapes():
    for shape in [(0,), (3, 0), (0, 5, 2)]:
        got = exp_f32(np.empty(shape))
        assert got.dtype == np.float32 and got.shape == shape
        buf = np.empty(shape, np.float32)
        assert exp_f32(np.empty(shape), buf) is buf
    got = exp_f32(1.0)
    assert got.shape == () and got.dtype == np.float32
    assert got == exp32_ref(1.0)
    same_bits(exp_f32([[0.25, -3.0]]), ref_array(np.array([[0.25, -3.0]])))


def test_exp_f32_key_major_layout_same_bytes():
    rng = np.random.default_rng(4)
    c = rng.uniform(-115, 95, (3, 40, 33))
    c.reshape(-1)[:5] = (np.nan, -np.inf, np.inf, 70.0, -104.0)
    t = np.swapaxes(c, 1, 2)  # key-major: C-contiguous with the last two axes swapped
    assert not t.flags.c_contiguous
    for shift in (0, 5, -30):
        want = exp_f32(np.ascontiguousarray(t), shift=shift)
        got = exp_f32(t, shift=shift)
        assert got.shape == t.shape
        assert np.ascontiguousarray(got).tobytes() == want.tobytes()
        # and with a key-major out, which is filled in place
        out = np.swapaxes(np.empty((3, 40, 33), np.float32), 1, 2)
        assert exp_f32(t, out, shift=shift) is out
        assert np.ascontiguousarray(out).tobytes() == want.tobytes()
        # the values themselves against the reference on a sample
        idx = (slice(None), slice(0, 33, 8), slice(0, 40, 9))
        same_bits(np.ascontiguousarray(got[idx]), ref_array(t[idx], shift))


def test_exp_f32_chunked_size_agrees_elementwise():
    """More than 2^16 elements (several chunks): a sample agrees with the reference and
    with the same arguments one at a time."""
    rng = np.random.default_rng(5)
    n = (1 << 16) * 2 + 4321
    x = rng.uniform(-112, 92, n)
    x[[5, 70000, n - 1]] = (np.nan, 80.0, -np.inf)
    for k in range(1, 3):  # arguments that need the slow path at the chunk edges
        x[(1 << 16) * k - 1: (1 << 16) * k + 1] = (75.0, 68.5)
    got = exp_f32(x, shift=-1)
    sample = np.unique(np.concatenate([
        rng.integers(0, n, 40), [0, 5, 70000, n - 1, n - 2],
        [(1 << 16) * k + d for k in (1, 2) for d in (-2, -1, 0, 1)],
        [n // 3, n // 3 + 1, 2 * n // 3]]))
    same_bits(got[sample], ref_array(x[sample], -1))
    one = np.array([exp_f32(x[i:i + 1], shift=-1)[0] for i in sample], np.float32)
    assert one.tobytes() == got[sample].tobytes()


# ------------------------------------------------------------------ float64 exp with out=
def test_exp_out_same_bytes_and_in_place():
    rng = np.random.default_rng(6)
    x = rng.uniform(-750, 712, (5, 70))
    x[0, :4] = (np.nan, -np.inf, np.inf, -0.0)
    want = elementary.exp(x)
    # the values themselves against decimal on a sample (exp: within 0.52 ulp)
    for v, w in zip(x[1, :20], want[1, :20]):
        with decimal.localcontext() as ctx:
            ctx.prec = 40
            ctx.Emax, ctx.Emin = 10**6, -10**6
            exact = Decimal(float(v)).exp()
        if float(exact) == 0.0 or not math.isfinite(float(exact)):
            continue
        assert abs(Fraction(float(w)) - Fraction(exact)) <= Fraction(
            0.52) * Fraction(math.ulp(float(exact))) + Fraction(2.0**-1074)
    buf = np.full(x.shape, 3.0)
    assert elementary.exp(x, out=buf) is buf
    assert buf.tobytes() == want.tobytes()
    xt = np.swapaxes(np.ascontiguousarray(x.T), 0, 1)  # key-major copy of x
    bt = np.swapaxes(np.empty(x.T.shape), 0, 1)
    assert elementary.exp(xt, out=bt) is bt
    assert np.ascontiguousarray(bt).tobytes() == want.tobytes()
    y = x.copy()
    assert elementary.exp(y, out=y) is y  # in place
    assert y.tobytes() == want.tobytes()
    big = rng.uniform(-30, 30, (1 << 16) + 77)
    wb = elementary.exp(big)
    yb = big.copy()
    elementary.exp(yb, out=yb)
    assert yb.tobytes() == wb.tobytes()
    with pytest.raises(ValueError, match="out"):
        elementary.exp(x, out=np.empty(x.shape, np.float32))


def test_exp_returns_key_major_out_itself():
    x = np.swapaxes(np.ascontiguousarray(np.linspace(-3, 3, 12).reshape(4, 3)), 0, 1)
    out = np.swapaxes(np.empty((4, 3)), 0, 1)
    assert elementary.exp(x, out=out) is out


# ------------------------------------------------------------------ float64 out, bit screen
def test_exp_f32_float64_out_holds_the_binary32_values():
    """A float64 ``out`` receives the binary32 results exactly, also in place (out is x),
    for arguments inside the window of the bit screen and beyond it."""
    rng = np.random.default_rng(11)
    for lo, hi in [(-87.0, 88.0), (-20.0, 0.0), (-115.0, 95.0)]:
        x = rng.uniform(lo, hi, 3000)
        x[:4] = (0.0, -0.0, lo, hi)
        if lo < -100:
            x[4:7] = (np.nan, -np.inf, np.inf)
        for shift in (0, -64, 8):
            want = exp_f32(x, shift=shift)
            out = np.full(x.shape, 7.0)
            assert exp_f32(x, out, shift=shift) is out
            same_bits(out.astype(np.float32), want)
            assert np.all(out[~np.isnan(out)] == want[~np.isnan(want)].astype(np.float64))
            y = x.copy()
            exp_f32(y, y, shift=shift)
            same_bits(y.astype(np.float32), want)
    same_bits(want[:50], ref_array(x[:50], 8))
    # key-major (transposed) float64 out, filled in place
    c = rng.uniform(-30.0, 10.0, (2, 17, 9))
    t = np.swapaxes(c, 1, 2)
    out = np.swapaxes(np.zeros((2, 17, 9)), 1, 2)
    exp_f32(t, out)
    same_bits(np.ascontiguousarray(out).astype(np.float32), exp_f32(np.ascontiguousarray(t)))


def _near_midpoints(count: int, seed: int) -> list[float]:
    """Arguments whose e^x lies a chosen relative distance (2^-52 .. 2^-40) from a
    binary32 midpoint, on either side, over the binades of the bit screen (the fast
    evaluation errs most at its ends, about 2^-52 |x|): around the edge of the bit
    screen (2^9 ulp of binary64, about 2^-43.5 relative) and inside the error of the fast
    evaluation (2^-44.6), where a screen too narrow would round to the wrong side."""
    rng = np.random.default_rng(seed)
    xs = []
    for _ in range(count):
        e = int(rng.integers(-125, 126))
        m = Fraction(int(rng.integers(2**23, 2**24)) * 2 + 1, 2**24) * TWO**e
        for d in (-40, -42, -43, -44, -45, -46, -48, -52):
            for sign in (1, -1):
                xs.append(_ln_of(m * (1 + sign * TWO**d), 0))
    return xs


@pytest.mark.parametrize("seed", [1, 2])
def test_exp_f32_near_midpoints_both_screens(seed):
    """The same bits from the bit screen (every argument in its window) and from the
    rounding screen (one argument beyond it in the same call) as from decimal."""
    x = np.array(_near_midpoints(12, seed))
    want = ref_array(x)
    assert np.all((x >= -87.0) & (x <= 88.0))
    same_bits(exp_f32(x), want)
    wide = np.concatenate([x, [70.0]])
    same_bits(exp_f32(wide)[:-1], want)
    out = np.empty(x.shape)
    exp_f32(x, out)
    same_bits(out.astype(np.float32), want)


@pytest.mark.parametrize("shift", [-64, -1, 0, 8])
def test_exp_f32_edges_of_the_bit_screen_window(shift):
    """Arguments at and just beyond the ends of the window (x + shift ln 2 in [-87, 88]),
    alone and together with ordinary ones."""
    lift = shift * float(Decimal(2).ln())
    pts = []
    for edge in (-87.0 - lift, 88.0 - lift):
        pts += [edge, np.nextafter(edge, -np.inf), np.nextafter(edge, np.inf),
                edge - 1e-9, edge + 1e-9]
    x = np.array([p for p in pts if p <= 100.0])
    want = ref_array(x, shift)
    same_bits(exp_f32(x, shift=shift), want)
    for i in range(x.size):
        same_bits(exp_f32(x[i:i + 1], shift=shift), want[i:i + 1])
        same_bits(exp_f32(np.array([x[i], 0.5]), shift=shift)[:1], want[i:i + 1])


@pytest.mark.parametrize("seed", [3, 4])
def test_exp_f32_nonpositive_near_midpoints_and_edges(seed):
    """The softmax entry (arguments <= 0 or NaN, the largest not looked for): the
    decimal bits near binary32 midpoints (the bit screen and the element mask it builds
    only when some element is near), at the lower end of the bit screen's window, in
    the subnormal range, at 0, -inf and NaN, with out as a float64 array and in place."""
    near = [x for x in _near_midpoints(12, seed) if x <= 0.0]
    # midpoints between binary32 subnormals, (2 j + 1) 2^-150 (the rounding screen)
    rng = np.random.default_rng(seed)
    near += [_ln_of(Fraction(2 * int(j) + 1) * TWO**-150 * (1 + sign * TWO**d), 0)
             for j in rng.integers(1, 2**23, 4) for d in (-40, -44, -46, -52)
             for sign in (1, -1)]
    edge = [-87.0, np.nextafter(-87.0, -np.inf), -87.0 + 1e-9, -88.0, -95.5, -103.9,
            -104.5, -110.0, -745.0, -0.0, 0.0, -1e-300, -np.inf]
    for xs in (near, near[:1], edge, [-1.0, -2.5, -0.25], [-1.0, np.nan, -3.0]):
        x = np.array(xs, dtype=np.float64)
        want = ref_array(x)
        same_bits(elementary._exp_f32_nonpositive(x), want)
        out = np.empty(x.shape)
        elementary._exp_f32_nonpositive(x, out)
        same_bits(out.astype(np.float32), want)
        y = x.copy()
        elementary._exp_f32_nonpositive(y, out=y)
        same_bits(y.astype(np.float32), want)
        same_bits(exp_f32(x), want)


@settings(max_examples=200)
@given(st.lists(st.floats(max_value=0.0) | st.just(float("nan")), min_size=1, max_size=40))
def test_exp_f32_nonpositive_is_exp_f32(xs):
    x = np.array(xs, dtype=np.float64)
    same_bits(elementary._exp_f32_nonpositive(x), exp_f32(x))
