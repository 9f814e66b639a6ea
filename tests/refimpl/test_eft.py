"""refimpl.eft: each error-free transformation against exact rational arithmetic."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import example, given, strategies as st

from refimpl.eft import add_round_to_odd, round_to_odd, split, two_product, two_sum

F = Fraction
finite = st.floats(allow_nan=False, allow_infinity=False)
#: operands whose sums cannot overflow
moderate = st.floats(min_value=-2.0**1020, max_value=2.0**1020, allow_nan=False)


def _bits(x: float) -> int:
    """Significant bits of a float64 value (0 for zero): the odd part of its integer
    significand, from the exact rational."""
    n = abs(F(x)).numerator
    return 0 if n == 0 else (n // (n & -n)).bit_length()


def _neighbours(x: Fraction) -> tuple[float, float]:
    """The float64 values lo <= x < hi next to a rational x inside the range."""
    f = float(x)  # correctly rounded
    lo = float(np.nextafter(f, -np.inf)) if F(f) > x else f
    return lo, float(np.nextafter(lo, np.inf))


@given(moderate, moderate)
@example(1.0, 2.0**-53)  # a tie: s = 1, e = 2^-53
@example(1.0, -1.0)
@example(5e-324, -5e-324)
@example(2.0**1020, 2.0**-1074)
def test_two_sum_is_exact(a, b):
    s, e = two_sum(np.float64(a), np.float64(b))
    assert float(s) == a + b
    assert F(float(s)) + F(float(e)) == F(a) + F(b)


@given(st.floats(min_value=-2.0**995, max_value=2.0**995, allow_nan=False))
@example(1.0 + 2.0**-52)
@example(-(2.0**53 - 1))
@example(5e-324)
def test_split_halves(a):
    hi, lo = split(np.float64(a))
    assert F(float(hi)) + F(float(lo)) == F(a)
    # two halves of at most 26 significant bits: their products are exact in float64
    assert _bits(float(hi)) <= 26 and _bits(float(lo)) <= 26


@given(st.floats(min_value=2.0**-450, max_value=2.0**450), st.booleans(),
       st.floats(min_value=2.0**-450, max_value=2.0**450), st.booleans())
@example(1.0 + 2.0**-52, False, 1.0 + 2.0**-52, False)  # e = 2^-104
@example(2.0**27 + 1, False, 2.0**27 - 1, True)
def test_two_product_is_exact(a, na, b, nb):
    a, b = (-a if na else a), (-b if nb else b)
    p, e = two_product(np.float64(a), np.float64(b))
    assert float(p) == a * b
    assert F(float(p)) + F(float(e)) == F(a) * F(b)


@given(moderate, moderate)
@example(1.0, 2.0**-60)        # inexact, 1.0 even: goes up to the odd neighbour
@example(1.0 + 2.0**-52, 2.0**-60)  # inexact, already odd: stays
@example(1.0, -(2.0**-60))     # below: the odd neighbour under 1
@example(3.0, 2.0**-51)        # exact
@example(0.0, -0.0)
def test_add_round_to_odd_against_fraction(a, b):
    x = F(a) + F(b)
    ro = float(add_round_to_odd(np.float64(a), np.float64(b)))
    if F(float(x)) == x:
        assert ro == a + b
        if x == 0:  # IEEE: the sign of an exact zero sum
            assert math.copysign(1, ro) == math.copysign(1, a + b)
        return
    lo, hi = _neighbours(x)
    assert ro in (lo, hi)
    assert np.float64(ro).view(np.int64) & 1 == 1
    # Boldo and Melquiond: one more rounding to binary32 is the correct rounding of x
    with np.errstate(over="ignore"):
        r32 = np.float32(ro)
    if np.isfinite(r32):
        for other in (np.nextafter(r32, np.float32(-np.inf)),
                      np.nextafter(r32, np.float32(np.inf))):
            if np.isfinite(other):
                d, do = abs(x - F(float(r32))), abs(x - F(float(other)))
                assert d < do or (d == do and np.float32(r32).view(np.uint32) % 2 == 0)


def test_round_to_odd_keeps_special_values_and_shapes():
    s = np.array([np.inf, -np.inf, np.nan, 2.0, 2.0])
    e = np.array([1.0, -1.0, 0.0, 2.0**-60, -(2.0**-60)])
    got = round_to_odd(s, e)
    assert got.shape == s.shape
    assert got[0] == np.inf and got[1] == -np.inf and np.isnan(got[2])
    assert got[3] == np.nextafter(2.0, 3.0) and got[4] == np.nextafter(2.0, 1.0)
    with np.errstate(invalid="raise", over="raise"):
        out = add_round_to_odd(np.array([np.inf, 1.0]), np.array([-np.inf, 2.0**-60]))
    assert np.isnan(out[0]) and out[1] == np.nextafter(1.0, 2.0)


@pytest.mark.parametrize("fn", [two_sum, two_product])
def test_elementwise_on_arrays(fn):
    a = np.array([[1.0, 3.0], [2.0**-30, -7.0]])
    b = np.array([2.0**-60, 1.0 / 3.0])
    s, e = fn(a, b)
    assert s.shape == e.shape == (2, 2)
    for i in np.ndindex(a.shape):
        exact = F(a[i]) + F(b[i[1]]) if fn is two_sum else F(a[i]) * F(b[i[1]])
        assert F(float(s[i])) + F(float(e[i])) == exact
