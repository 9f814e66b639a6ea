"""refimpl.elementary and refimpl.summation against independent oracles: 40-digit
``decimal`` arithmetic (software, correctly rounded) and ``fractions.Fraction``."""
from __future__ import annotations

import decimal
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import example, given, settings, target
from hypothesis import strategies as st

from refimpl import elementary as E
from refimpl.summation import fold_sum

CTX = decimal.Context(prec=40)


def ulp_err(got: float, exact: decimal.Decimal) -> float:
    ref = float(exact)
    if ref == 0.0:
        return 0.0 if got == 0.0 else float("inf")
    return float(abs(Fraction(got) - Fraction(exact)) / Fraction(float(np.spacing(abs(ref)))))


def d_exp(x: float) -> decimal.Decimal:
    return CTX.exp(decimal.Decimal(x))


finite = st.floats(-746.0, 709.782712893384, allow_nan=False)
# the whole range, plus the subnormal-result and near-overflow regions on their own
exp_args = st.one_of(finite, st.floats(-745.2, -708.3), st.floats(709.0, 709.782712893384))

#: the documented bounds (refimpl/elementary.py module docstring)
EXP_ULP = 0.52
EXP_SUBNORMAL = Fraction(77, 100) * Fraction(2) ** -1074
EXPM1_ULP = 0.7
LOG_ULP = 1.0
TANH_ULP = 3.0


@pytest.mark.slow
@settings(max_examples=300)
@given(exp_args)
@example(0.0)
@example(-0.0)
@example(1.0)
@example(-708.4)  # subnormal boundary of the result
@example(-708.3964185322641)  # e^x just above 2^-1022
@example(-745.1332191019411)  # e^x near 2^-1075: rounds to 0 or 2^-1074
@example(-744.44007192138126)  # e^x near 2^-1074
@example(709.78)  # near overflow
@example(709.782712893384)  # the largest x with a finite e^x
@example(0.34657359027997264)  # ln2/2
@example(0.0027076061740622863)  # ln2/256: table reduction boundary
@example(1e-300)
@example(513.2802483300213)  # 1.106 ulp off with the former Cody-Waite/Taylor exp
@example(-543.7150991736899)  # 1.086 ulp off with the former exp
@example(-708.5785122056192)  # worst subnormal result found (0.750 * 2^-1074)
@example(-0.8313357331846891)  # worst normal result found (0.512 ulp)
def test_exp_error_bound(x):
    got = float(E.exp(np.array([x]))[0])
    ref = d_exp(x)
    if float(ref) < 2.0**-1022:  # subnormal (or zero) result: a second rounding
        assert abs(Fraction(got) - Fraction(ref)) <= EXP_SUBNORMAL
        return
    err = ulp_err(got, ref)
    target(err, label="exp ulp error")
    assert err <= EXP_ULP


@pytest.mark.slow
@settings(max_examples=300)
@given(st.floats(min_value=5e-324, max_value=1.7976931348623157e308, allow_nan=False))
@example(1.0)
@example(2.0)
@example(0.7071067811865476)
@example(0.7071067811865475)
@example(1.4142135623730951)
@example(5e-324)
@example(1.7976931348623157e308)
@example(1.2832427769476629)  # 2.53 ulp off with the former log
@example(0.7054019204115471)  # worst found by hill-climbing (0.83 ulp)
@example(1.3980330228282958)
@example(0.7001522648463226)
def test_log_error_bound(x):
    got = float(E.log(np.array([x]))[0])
    ref = CTX.ln(decimal.Decimal(x))
    err = ulp_err(got, ref)
    target(err, label="log ulp error")
    assert err <= LOG_ULP


def d_tanh(x: float) -> decimal.Decimal:
    d = decimal.Decimal(x)
    if abs(x) < 1e-6:  # series: e^(2x) - 1 would cancel
        return CTX.plus(d - d**3 / 3 + 2 * d**5 / 15)
    e = CTX.exp(2 * d)
    return CTX.divide(e - 1, e + 1)


@pytest.mark.slow
@settings(max_examples=300)
@given(st.floats(-30, 30, allow_nan=False))
@example(1e-10)
@example(-0.17328679513998632)  # expm1 branch boundary for -2|x|
@example(0.5)
@example(5.171257782061723)  # worst found by hill-climbing (2.48 ulp)
@example(0.5487789678778261)
@example(-7.728994565387793)  # 2.50 ulp
def test_tanh_error_bound(x):
    got = float(E.tanh(np.array([x]))[0])
    err = ulp_err(got, d_tanh(x))
    target(err, label="tanh ulp error")
    assert err <= TANH_ULP


@pytest.mark.slow
@settings(max_examples=300)
@given(st.floats(-60, 60, allow_nan=False).filter(lambda x: x == 0 or abs(x) > 1e-30))
@example(1e-12)
@example(0.17328679513998632)  # ln2/4: branch boundary
@example(-0.17328679513998632)
@example(0.34657359027997264)
@example(0.3975679469322352)  # 4.02 ulp off with the former exp(x) - 1
@example(0.1723257583279731)  # worst found by hill-climbing (0.64 ulp)
@example(-0.1332865781324298)
@example(-0.13167834083605637)  # 0.644 ulp
@example(-37.5)  # rounds to -1
def test_expm1_error_bound(x):
    got = float(E.expm1(np.array([x]))[0])
    exact = decimal.Context(prec=80).exp(decimal.Decimal(x)) - 1
    err = ulp_err(got, exact)
    target(err, label="expm1 ulp error")
    assert err <= EXPM1_ULP


def test_special_values():
    inf, nan = np.inf, np.nan
    assert np.array_equal(E.exp([-inf, inf, 0.0, 710.0, -746.0]), [0.0, inf, 1.0, inf, 0.0])
    assert np.isnan(E.exp([nan]))[0]
    got = E.log([0.0, -1.0, inf, 1.0])
    assert got[0] == -inf and np.isnan(got[1]) and got[2] == inf and got[3] == 0.0
    assert np.array_equal(E.tanh([inf, -inf, 0.0]), [1.0, -1.0, 0.0])
    got = E.expm1([-inf, inf, 710.0, -0.0, nan, 709.5])
    assert got[0] == -1.0 and got[1] == inf and got[2] == inf and np.signbit(got[3])
    assert np.isnan(got[4]) and np.isfinite(got[5])
    assert np.array_equal(E.exp([nan, 1.0, -inf])[1:], [E.exp(1.0), 0.0])  # mixed chunk
    assert np.signbit(E.tanh([-0.0])[0])
    assert E.exp(np.float64(0.5)).shape == ()


def test_constants_exact():
    ln2 = CTX.ln(decimal.Decimal(2))
    assert E.LN2 == float(ln2)
    # LN2_HI has at most 32 significant bits, so k * LN2_HI is exact for |k| < 2^21
    assert Fraction(E.LN2_HI).denominator.bit_length() - 1 <= 32
    # LN2_LO (53 bits below 2^-33) is rounded at 2^-86
    assert abs(Fraction(E.LN2_HI) + Fraction(E.LN2_LO) - Fraction(ln2)) <= Fraction(1, 2**85)


def test_results_do_not_depend_on_layout():
    x = np.random.default_rng(1).uniform(-50, 50, (64, 33))
    whole = E.exp(x)
    parts = np.concatenate([E.exp(x[:, j:j + 1]) for j in range(33)], axis=1)
    assert np.array_equal(whole, parts)
    assert np.array_equal(E.exp(x.T.copy()).T, whole)
    assert np.array_equal(E.log(np.abs(x)), E.log(np.abs(x)[::-1])[::-1])
    big = np.random.default_rng(2).uniform(-700, 700, 3 * E._CHUNK + 17)  # chunked path
    pieces = np.concatenate([E.exp(big[i:i + 999]) for i in range(0, big.size, 999)])
    assert np.array_equal(E.exp(big), pieces)
    assert np.array_equal(E.exp(big.reshape(-1, 1)[::2]).ravel(), pieces[::2])


@pytest.mark.parametrize("name", ["log", "sin", "cos", "tanh", "expm1"])
def test_pipelines_with_temporaries_do_not_depend_on_chunks(name, monkeypatch):
    """log, sin, cos, tanh and expm1 run in chunks of _TEMP_CHUNK elements (their
    temporaries stay small): the same bytes in chunks of 5, in one piece, element by
    element, in a transposed layout, and beyond _TEMP_CHUNK elements (several chunks,
    a ragged end, the special values at the chunk edges)."""
    f = getattr(E, name)
    rng = np.random.default_rng(3)
    x = rng.standard_normal(2 * E._TEMP_CHUNK + 77) * 40.0
    if name == "log":
        x = np.abs(x)
    edges = [E._TEMP_CHUNK - 1, E._TEMP_CHUNK, 2 * E._TEMP_CHUNK, x.size - 1]
    x[edges] = [0.0, -0.0, np.inf, np.nan]
    x[:4] = [-np.inf, 5e-324, 1e22, -1.0]
    whole = f(x)
    sample = np.r_[0:8, edges, rng.integers(0, x.size, 30)]
    one = np.array([f(x[i:i + 1])[0] for i in sample])
    assert one.tobytes() == whole[sample].tobytes()
    monkeypatch.setattr(E, "_TEMP_CHUNK", 5)
    assert f(x).tobytes() == whole.tobytes()
    assert np.asarray(f(x[:3000].reshape(60, 50).T)).T.tobytes() == whole[:3000].tobytes()
    monkeypatch.setattr(E, "_TEMP_CHUNK", 1 << 30)
    assert f(x).tobytes() == whole.tobytes()


@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), max_size=40))
def test_fold_sum_error_bound(xs):
    got = float(fold_sum(np.array(xs, dtype=np.float64)))
    exact = sum((Fraction(x) for x in xs), Fraction(0))
    n = max(1, len(xs))
    bound = Fraction(int(np.ceil(np.log2(n))) + 1, 2**53) * sum(
        (abs(Fraction(x)) for x in xs), Fraction(0))
    assert abs(Fraction(got) - exact) <= bound


def test_fold_sum_order_is_the_documented_tree():
    # n = 5: level 1 -> [x0+x3, x1+x4, x2]; level 2 -> [(x0+x3)+x2, x1+x4]; then sum
    x = np.array([1.0, 2.0**-53, 2.0**-53, -1.0, 2.0**-53])
    expected = ((1.0 + -1.0) + 2.0**-53) + (2.0**-53 + 2.0**-53)
    assert float(fold_sum(x)) == expected
    assert float(fold_sum(np.zeros(0))) == 0.0
    assert fold_sum(np.ones((3, 4)), axis=0, keepdims=True).shape == (1, 4)


@pytest.mark.parametrize("n", [1, 2, 3, 7, 8, 129])
def test_fold_sum_axis(n):
    x = np.arange(2 * n * 3, dtype=np.float64).reshape(2, n, 3)
    assert np.array_equal(fold_sum(x, axis=1), x.sum(axis=1))  # integers: exact


def test_exp_reduction_constants_exact():
    # k * L_HI is exact for |k| < 2^18 (L_HI has at most 35 significant bits)
    m = Fraction(E._L_HI)
    assert m.denominator.bit_length() - 1 - (m.numerator.bit_length() - 1) < 35 + 8
    assert m.numerator.bit_length() <= 35
    ln2_n = CTX.ln(decimal.Decimal(2)) / E._N
    assert abs(Fraction(E._L_HI) + Fraction(E._L_LO) - Fraction(ln2_n)) <= Fraction(1, 2**95)
    ctx = decimal.Context(prec=45)
    for j in range(E._N):
        t = ctx.power(decimal.Decimal(2), decimal.Decimal(j) / E._N)
        assert 1.0 <= E._T_HI[j] < 2.0
        assert abs(Fraction(float(E._T_HI[j])) + Fraction(float(E._T_LO[j])) - Fraction(t)) \
            <= Fraction(1, 2**106)


# sin/cos against decimal arithmetic: pi by the series of the decimal module's
# documentation (not Machin's formula, as the code uses), the reduction x - k 2pi and
# the Taylor series of sin and cos, all with at least 60 digits beyond the argument's
PI_DIGITS = 420


def _decimal_pi() -> decimal.Decimal:
    ctx = decimal.Context(prec=PI_DIGITS + 2)
    three = decimal.Decimal(3)
    lasts, t, s, n, na, d, da = 0, three, three, 1, 0, 0, 24
    while s != lasts:
        lasts = s
        n, na = n + na, na + 8
        d, da = d + da, da + 32
        t = ctx.divide(ctx.multiply(t, n), d)
        s = ctx.add(s, t)
    return s


D_PI = _decimal_pi()


def d_sin_cos(x: float, cos: bool) -> Fraction:
    """sin(x) or cos(x) to far better than 2^-100 absolute, as an exact Fraction."""
    digits = 70 + max(0, math.frexp(x)[1]) // 3      # |x| < 10^(that / 3)
    ctx = decimal.Context(prec=digits)
    dx = decimal.Decimal(x)                        # exact
    two_pi = ctx.multiply(2, D_PI)
    k = ctx.divide(dx, two_pi).to_integral_value(decimal.ROUND_HALF_EVEN)
    r = ctx.subtract(dx, ctx.multiply(k, two_pi))  # |r| <= pi
    term = decimal.Decimal(1) if cos else r
    total, n = term, 1 if cos else 2
    r2 = ctx.multiply(r, r)
    while abs(term) > decimal.Decimal("1e-60"):
        term = ctx.divide(ctx.multiply(-term, r2), n * (n + 1))
        total = ctx.add(total, term)
        n += 2
    return Fraction(total)


def sin_cos_bound(x: float) -> Fraction:
    """The documented absolute error bound (refimpl/elementary.py module docstring)."""
    tail = Fraction(2) ** -45
    return tail if abs(x) >= 2.0**20 else Fraction(abs(x)) * Fraction(2) ** -53 + tail


def f32(x: float) -> float:
    return float(np.float32(x))


#: float32 arguments (what the SIMT interpreter's sin/cos.approx.f32 pass), arguments
#: near multiples of pi/2 (where sin or cos is near 0), and any float64
sin_cos_args = st.one_of(
    st.floats(width=32, allow_nan=False, allow_infinity=False),
    st.floats(-2.0**20, 2.0**20, width=32),
    st.integers(-2**21, 2**21).map(lambda k: f32(k * np.pi / 2)),
    st.floats(allow_nan=False, allow_infinity=False),
)


@settings(max_examples=300)
@given(sin_cos_args, st.booleans())
@example(1009695.3125, False)                      # sin = 6.85e-6, off by 69 float32 ulps
@example(f32(np.pi / 2), True)
@example(2.0**20 - 0.0625, False)                  # the largest float64-reduced float32
@example(2.0**20, True)                            # the smallest exactly reduced one
@example(f32(3.4e38), False)
@example(1e300, True)
@example(5e-324, False)
def test_sin_cos_absolute_error_bound(x, cos):
    got = float((E.cos if cos else E.sin)(np.float64(x)))
    err = abs(Fraction(got) - d_sin_cos(x, cos))
    target(float(err / sin_cos_bound(x)))
    assert err <= sin_cos_bound(x), (x, cos, float(err))


def test_sin_cos_special_values():
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan])
    s, c = E.sin(x), E.cos(x)
    assert s[0] == 0 and not np.signbit(s[0]) and s[1] == 0 and np.signbit(s[1])
    # cos(0) is sin(fl(pi/2)) through the series: 1 + 2^-52 in float64 (within the
    # absolute bound), 1 once rounded to float32 as the interpreter does
    assert (np.abs(c[:2] - 1.0) <= 2.0**-45).all()
    assert (c[:2].astype(np.float32) == 1.0).all()
    assert np.isnan(s[2:]).all() and np.isnan(c[2:]).all()
    # a tiny argument: sin(x) = x - x^3/6 rounds to x, cos(x) = 1 - x^2/2 to 1
    assert E.sin(np.array([1e-200, -5e-324])).tolist() == [1e-200, -5e-324]
    assert np.float32(E.cos(np.array([1e-200]))[0]) == 1.0
