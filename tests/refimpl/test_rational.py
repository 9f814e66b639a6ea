"""refimpl.rational: floor_log2 and round_rational against the definition.

The oracle lists a small grid explicitly (every value, in order, as Fractions), picks
the neighbours of x by comparison and applies each rounding rule as IEEE 754-2019 4.3
and 7.4 words it; NumPy's float32 and float16 casts (correctly rounded, ties to even)
check the IEEE formats, and hand-derived sharp cases pin ties, the subnormal boundary,
the overflow threshold and signed zeros.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st

from refimpl.rational import OVERFLOWS, floor_log2, round_rational

F = Fraction
MODES = ("nearest_even", "nearest_away", "toward_zero", "toward_positive",
         "toward_negative")
MAX32 = float(np.finfo(np.float32).max)


def _grid(p: int, emin: int, top: int, subnormals: bool) -> list[Fraction]:
    """Every value of the grid of precision p up to binade ``top``, in order."""
    q = F(2) ** (emin - p + 1)
    g = [k * q for k in range(1 << (p - 1))] if subnormals else []
    for e in range(emin, top + 1):
        g += [n * F(2) ** (e - p + 1) for n in range(1 << (p - 1), 1 << p)]
    return g


def _expected(x: Fraction, p, emin, emax, mode, overflow, subnormals) -> float:
    neg, a = x < 0, abs(x)
    # unbounded exponent range: the grid goes past every tested magnitude
    g = _grid(p, emin, emin + 24, subnormals)  # |x| < 2^(emin + 21) below
    if a < g[0]:  # no zero in the grid: the smallest element
        pick = g[0]
    else:
        i = max(k for k, v in enumerate(g) if v <= a)
        lo, hi = g[i], g[i + 1]
        if a == lo:
            pick = lo
        elif mode in ("nearest_even", "nearest_away"):
            if a - lo != hi - a:
                pick = lo if a - lo < hi - a else hi
            elif mode == "nearest_away":
                pick = hi
            else:  # the even index in the grid
                pick = lo if i % 2 == 0 else hi
        else:
            away = {"toward_zero": False, "toward_positive": not neg,
                    "toward_negative": neg}[mode]
            pick = hi if away else lo
    if emax is not None:
        largest = (2 - F(2) ** (1 - p)) * F(2) ** emax
        if pick > largest:
            away = mode in ("nearest_even", "nearest_away") or (
                mode == "toward_positive" and not neg) or (mode == "toward_negative" and neg)
            if overflow == "inf" or (overflow == "ieee" and away):
                return -math.inf if neg else math.inf
            pick = largest
    return -float(pick) if neg else float(pick)


def _same(got: float, want: float) -> bool:
    return got == want and math.copysign(1, got) == math.copysign(1, want)


@given(st.integers(1, 1 << 40), st.integers(1, 1 << 40))
@example(1, 1)
@example(3, 4)
@example((1 << 40) - 1, 1 << 40)
def test_floor_log2(n, d):
    e = floor_log2(F(n, d))
    assert F(2) ** e <= F(n, d) < F(2) ** (e + 1)


def test_floor_log2_refuses_non_positive():
    for bad in (F(0), F(-1, 3)):
        with pytest.raises(ValueError, match="positive"):
            floor_log2(bad)


@given(p=st.integers(1, 4), emin=st.sampled_from([-4, -1, 2]),
       bounded=st.booleans(), subnormals=st.booleans(), mode=st.sampled_from(MODES),
       overflow=st.sampled_from(OVERFLOWS), num=st.integers(-4000, 4000),
       den=st.integers(1, 300), shift=st.integers(-9, 9))
@settings(max_examples=200)
@example(p=2, emin=-1, bounded=False, subnormals=True, mode="nearest_even",
         overflow="ieee", num=5, den=4, shift=1)  # a tie between 1 and 1.5: 1
@example(p=1, emin=-1, bounded=False, subnormals=False, mode="nearest_even",
         overflow="ieee", num=3, den=1, shift=1)  # a tie between 2 and 4: 2
@example(p=1, emin=-1, bounded=False, subnormals=True, mode="nearest_even",
         overflow="ieee", num=3, den=1, shift=1)  # with the zero first: 4
@example(p=3, emin=2, bounded=True, subnormals=True, mode="nearest_even",
         overflow="ieee", num=15, den=1, shift=4)  # far past the largest value: Inf
@example(p=3, emin=-4, bounded=True, subnormals=True, mode="toward_negative",
         overflow="ieee", num=-1, den=3, shift=-5)  # tiny negative: -smallest subnormal
def test_round_rational_matches_the_listed_grid(p, emin, bounded, subnormals, mode,
                                                 overflow, num, den, shift):
    x = F(num, den) * F(2) ** (emin + shift)
    emax = emin + 3 if bounded else None
    got = round_rational(x, p, emin, emax, mode, overflow=overflow, subnormals=subnormals)
    if x == 0:
        assert _same(got, 0.0)
        return
    assert _same(got, _expected(x, p, emin, emax, mode, overflow, subnormals))


@given(st.floats(allow_nan=False, allow_infinity=False))
@example(1.0 + 2.0**-24)
@example(2.0**-150)
@example(-(2.0**-150))
@example(MAX32 + 2.0**103)  # the overflow threshold: a tie rounds to 2^128, Inf
def test_round_rational_is_the_float32_and_float16_cast(x):
    with np.errstate(over="ignore"):
        assert _same(round_rational(x, 24, -126, 127), float(np.float32(x)))
        assert _same(round_rational(x, 11, -14, 15), float(np.float16(x)))


@pytest.mark.parametrize("x, kwargs, want", [
    # ties go to the even significand
    (1 + F(1, 2**24), {}, 1.0),
    (1 + F(3, 2**24), {}, 1 + 2.0**-22),
    (1 + F(1, 2**24), {"rounding": "nearest_away"}, 1 + 2.0**-23),
    # the subnormal boundary: half the smallest subnormal ties to +0 (index 0, even)
    (F(1, 2**150), {}, 0.0),
    (-F(1, 2**150), {}, -0.0),
    (F(3, 2**151), {}, 2.0**-149),
    (-F(1, 2**151), {"rounding": "toward_negative"}, -(2.0**-149)),
    (-F(1, 2**151), {"rounding": "toward_zero"}, -0.0),
    # between the largest subnormal (odd) and the smallest normal (even)
    (F(2) ** -126 - F(2) ** -150, {}, 2.0**-126),
    # the overflow threshold 2^128 - 2^103 and just below it
    (F(2**128 - 2**103), {"emax": 127}, math.inf),
    (F(2**128 - 2**103 - 1), {"emax": 127}, MAX32),
    (F(2**128 - 2**103), {}, 2.0**128),  # no exponent limit
    (F(2**200), {"emax": 127, "rounding": "toward_zero"}, MAX32),
    (F(2**200), {"emax": 127, "rounding": "toward_zero", "overflow": "inf"}, math.inf),
    (F(2**200), {"emax": 127, "overflow": "saturate"}, MAX32),
    (-F(2**200), {"emax": 127, "rounding": "toward_negative"}, -math.inf),
    (-F(2**200), {"emax": 127, "rounding": "toward_positive"}, -MAX32),
    (F(10**400), {}, math.inf),
    # signed zeros
    (0, {}, 0.0),
    (-0.0, {}, -0.0),
    (F(0), {"rounding": "toward_negative"}, 0.0),
])
def test_round_rational_sharp_cases_fp32(x, kwargs, want):
    kwargs = {"emax": None, **kwargs}
    emax = kwargs.pop("emax")
    assert _same(round_rational(x, 24, -126, emax, **kwargs), want)


def test_ties_in_a_one_bit_grid_follow_the_grid_index():
    # E8M0 (p = 1, no subnormals): 3 lies between 2 (field 128, even) and 4 (odd)
    assert round_rational(3, 1, -127, 127, subnormals=False) == 2.0
    assert round_rational(3, 1, -127, 127, "nearest_away", subnormals=False) == 4.0
    # below 2^emin without subnormals: the smallest element, in every mode
    assert round_rational(F(1, 2**140), 1, -127, 127, "toward_zero", subnormals=False) \
        == 2.0**-127


def test_stochastic_rounding():
    x = 1 + F(1, 2**25)  # a quarter of an ulp of 1 (p = 24)
    assert round_rational(x, 24, -126, rounding="stochastic", random_bits=3, nbits=2) \
        == 1 + 2.0**-23  # floor(1/4 * 4) + 3 >= 4
    assert round_rational(x, 24, -126, rounding="stochastic", random_bits=2, nbits=2) == 1.0
    assert round_rational(F(3, 2), 24, -126, rounding="stochastic") == 1.5  # exact
    with pytest.raises(ValueError, match="random_bits"):
        round_rational(x, 24, -126, rounding="stochastic", random_bits=4, nbits=2)


@pytest.mark.parametrize("args, kwargs, match", [
    ((math.inf, 24, -126), {}, "finite"),
    ((math.nan, 24, -126), {}, "finite"),
    ((1, 54, -126), {}, "float64"),
    ((1, 24, -1060), {}, "float64"),
    ((1, 24, -126), {"rounding": "up"}, "rounding"),
    ((1, 24, -126), {"overflow": "wrap"}, "overflow"),
])
def test_round_rational_refuses(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        round_rational(*args, **kwargs)
