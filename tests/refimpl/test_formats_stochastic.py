"""Stochastic rounding (IEEE P3109): with N random bits R and dropped fraction v, the
magnitude rounds away from zero when floor(v * 2^N) + R >= 2^N. Averaged over all 2^N
patterns the result is lo + q * floor(v * 2^N) / 2^N exactly, which is the input itself
when v has at most N bits."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refimpl import formats as F

FORMATS = ["e4m3", "e5m2", "e2m1", "e2m3", "e3m2", "bf16", "fp16", "e4m3fnuz", "e8m0"]


def _grid(fmt: F.Format, c: int) -> tuple[Fraction, Fraction]:
    """(value of magnitude code c, quantum above it)."""
    lo = fmt.code_magnitude_value(c)
    hi = fmt.code_magnitude_value(c + 1)
    return lo, hi - lo


@pytest.mark.parametrize("name", FORMATS)
@settings(max_examples=25)
@given(data=st.data())
def test_mean_over_all_bit_patterns_is_exact(name: str, data: st.DataObject) -> None:
    fmt = F.get(name)
    n = data.draw(st.integers(1, 8), label="N")
    c = data.draw(st.integers(0, fmt.max_code_magnitude - 1), label="code")
    lo, q = _grid(fmt, c)
    k = data.draw(st.integers(0, 2**n - 1), label="k")
    x = lo + q * Fraction(k, 2**n)  # fraction v = k / 2^N has N bits
    negative = fmt.signed and data.draw(st.booleans(), label="negative")
    xf = -float(x) if negative else float(x)
    assert Fraction(abs(xf)) == x
    r = np.arange(2**n, dtype=np.uint64)
    codes = F.encode(np.full(2**n, xf), fmt, rounding="stochastic", random_bits=(r, n))
    vals = F.decode(codes, fmt).astype(np.float64)
    mean = sum(Fraction(v) for v in vals.tolist()) / 2**n
    assert mean == Fraction(xf)
    # exactly k of the 2^N patterns round away (the largest R values)
    away = np.abs(vals) > float(lo)
    assert away.sum() == k and (k == 0 or away[-k:].all())


@pytest.mark.parametrize("name", ["e4m3", "e2m1", "bf16"])
@settings(max_examples=25)
@given(data=st.data())
def test_mean_truncates_fraction_to_n_bits(name: str, data: st.DataObject) -> None:
    fmt = F.get(name)
    n = data.draw(st.integers(1, 6))
    c = data.draw(st.integers(1, fmt.max_code_magnitude - 1))
    lo, q = _grid(fmt, c)
    v = Fraction(data.draw(st.integers(0, 2**20 - 1)), 2**20)
    x = lo + q * v
    r = np.arange(2**n, dtype=np.uint64)
    codes = F.encode(np.full(2**n, float(x)), fmt, rounding="stochastic", random_bits=(r, n))
    mean = sum(Fraction(v) for v in F.decode(codes, fmt).astype(np.float64).tolist()) / 2**n
    assert mean == lo + q * Fraction(int(v * 2**n), 2**n)


def test_reproducible_and_bit_width_from_dtype() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(1000).astype(np.float32)
    r8 = rng.integers(0, 256, 1000).astype(np.uint8)
    a = F.encode(x, "e4m3", rounding="stochastic", random_bits=r8)
    b = F.encode(x, "e4m3", rounding="stochastic", random_bits=(r8.astype(np.int64), 8))
    assert np.array_equal(a, b)
    assert np.array_equal(a, F.encode(x, "e4m3", rounding="stochastic", random_bits=r8))
    # R = 0 never rounds away (toward zero); R = 2^N - 1 rounds away exactly when the
    # dropped fraction v has floor(v * 2^N) >= 1
    tz = F.encode(x, "e4m3", rounding="toward_zero")
    z = F.encode(x, "e4m3", rounding="stochastic", random_bits=np.zeros(1, np.uint8))
    assert np.array_equal(z, tz)
    top = F.encode(x, "e4m3", rounding="stochastic", random_bits=np.full(1, 255, np.uint8))
    for xi, c, t in zip(x.tolist(), tz.tolist(), top.tolist()):
        lo, q = _grid(F.E4M3, c & 0x7F)
        v = (abs(Fraction(xi)) - lo) / q
        assert t == (c + 1 if v * 256 >= 1 else c), (xi, c, t)


def test_broadcast_and_errors() -> None:
    x = np.ones((3, 4), dtype=np.float32) * 1.1
    F.encode(x, "e4m3", rounding="stochastic", random_bits=np.arange(4, dtype=np.uint8))
    with pytest.raises(ValueError, match="broadcast"):
        F.encode(x, "e4m3", rounding="stochastic", random_bits=np.arange(3, dtype=np.uint8))
    with pytest.raises(ValueError, match="needs random_bits"):
        F.encode(x, "e4m3", rounding="stochastic")
    with pytest.raises(ValueError, match="only used"):
        F.encode(x, "e4m3", random_bits=np.arange(4, dtype=np.uint8))
    with pytest.raises(ValueError, match="does not fit"):
        F.encode(x, "e4m3", rounding="stochastic", random_bits=(np.array([16]), 4))
    with pytest.raises(ValueError, match="uint8/uint16/uint32"):
        F.encode(x, "e4m3", rounding="stochastic", random_bits=np.array([1]))
