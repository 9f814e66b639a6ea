"""The shared test oracles against NumPy's IEEE casts and against each other.

NumPy's float64 -> float32 and float64 -> float16 conversions are correctly rounded
(roundTiesToEven, IEEE 754-2019 section 5.4.2), so every float64 is a test point for
:func:`oracles.round_rational`; the directed modes must bracket the value with two
neighbours; the E5M2 table must be the upper byte of binary16 (same layout, OCP MX v1.0
section 5.3).
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from oracles import (
    BFLOAT16,
    ELEMENT_LAYOUTS,
    code_value,
    element_table,
    nearest_magnitude,
    round_binary,
    round_rational,
    same_bits,
)

finite64 = st.floats(allow_nan=False, allow_infinity=False)


@settings(max_examples=200)
@given(x=finite64, dtype=st.sampled_from([np.float16, np.float32]))
@example(x=2.0**128 - 2.0**103, dtype=np.float32)             # the overflow tie: +inf
@example(x=np.nextafter(2.0**128 - 2.0**103, 0), dtype=np.float32)
@example(x=65520.0, dtype=np.float16)
@example(x=-2.0**-150, dtype=np.float32)                       # tie to -0
@example(x=3 * 2.0**-150, dtype=np.float32)                     # tie to 2^-148
@example(x=1 + 2.0**-24, dtype=np.float32)
@example(x=2.0**-25, dtype=np.float16)
def test_nearest_matches_numpy_cast(x, dtype):
    with np.errstate(over="ignore"):
        want = np.array(x, np.float64).astype(dtype)
    if x == 0:
        want = abs(want)  # a Fraction has no signed zero: the caller decides the sign
    got = round_rational(Fraction(x), dtype)
    assert isinstance(got, dtype)
    assert same_bits(np.array(got), want), (x, got, want)


@settings(max_examples=200)
@given(x=finite64, dtype=st.sampled_from([np.float16, np.float32]))
def test_directed_modes_bracket_the_value(x, dtype):
    f = Fraction(x)
    down = round_rational(f, dtype, "toward_negative")
    up = round_rational(f, dtype, "toward_positive")
    zero = round_rational(f, dtype, "toward_zero")
    assert Fraction(float(down)) <= f if np.isfinite(down) else down < 0
    assert Fraction(float(up)) >= f if np.isfinite(up) else up > 0
    if down == up:
        assert Fraction(float(down)) == f
    else:
        with np.errstate(over="ignore"):
            assert np.nextafter(down, dtype(np.inf)) == up
    assert zero == (down if x >= 0 else up)
    nearest = round_rational(f, dtype, "nearest_away")
    assert nearest in (down, up)


def test_bfloat16_grid_is_binary32_truncated():
    # bfloat16 keeps binary32's exponents with 8 significant bits
    # ulp(1) = 2^-7: a quarter ulp rounds down, three quarters up
    assert round_binary(Fraction(1) + Fraction(1, 512), *BFLOAT16) == 1
    assert round_binary(Fraction(1) + Fraction(3, 512), *BFLOAT16) == Fraction(129, 128)
    assert round_binary(Fraction(2) ** -133, *BFLOAT16) == Fraction(2) ** -133  # subnormal
    assert round_binary(Fraction(2) ** -134, *BFLOAT16) == 0                    # tie to 0
    assert round_binary(Fraction(2) ** 128, *BFLOAT16) == float("inf")


def test_e5m2_table_is_the_upper_byte_of_binary16():
    tab = element_table(*ELEMENT_LAYOUTS["e5m2"])
    f16 = (np.arange(0x7C, dtype=np.uint16) << 8).view(np.float16)
    assert [v for v, _ in tab] == [Fraction(float(v)) for v in f16]
    assert [c for _, c in tab] == list(range(0x7C))


@pytest.mark.parametrize("name", list(ELEMENT_LAYOUTS))
def test_nearest_magnitude_on_midpoints(name):
    tab = element_table(*ELEMENT_LAYOUTS[name])
    for (lo, clo), (hi, chi) in zip(tab, tab[1:]):
        mid = (lo + hi) / 2
        even = clo if clo % 2 == 0 else chi
        assert nearest_magnitude(mid, tab) == even
        assert nearest_magnitude(mid, tab, "nearest_away") == chi
        assert nearest_magnitude(mid, tab, "toward_zero") == clo
        assert nearest_magnitude(mid, tab, "toward_negative", negative=True) == chi
        assert nearest_magnitude(lo + (hi - lo) / 4, tab) == clo
        assert nearest_magnitude(hi, tab) == chi
        # stochastic: frac = 1/2 with 8 random bits rounds away for r >= 128
        assert nearest_magnitude(mid, tab, "stochastic", random=127) == clo
        assert nearest_magnitude(mid, tab, "stochastic", random=128) == chi
    assert nearest_magnitude(tab[-1][0] * 4, tab) == tab[-1][1]   # saturates


def test_code_value_by_hand():
    assert code_value(0x7E, 4, 3, 7) == 448           # E4M3 largest finite
    assert code_value(0x01, 4, 3, 7) == Fraction(1, 512)
    assert code_value(0xB8, 4, 3, 7) == -1
    assert code_value(0b0111, 2, 1, 1) == 6            # E2M1
    assert code_value(0b1001, 2, 1, 1) == Fraction(-1, 2)


def test_same_bits_distinguishes_signed_zero_and_equates_nans():
    assert same_bits(np.float32([0.0, np.nan]), np.float32([0.0, -np.nan]))
    assert not same_bits(np.float32([0.0]), np.float32([-0.0]))
    assert not same_bits(np.float32([1.0]), np.float32([1.0, 1.0]))
