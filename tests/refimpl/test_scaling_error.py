"""Quantisation error metrics: hand-computed values, special cases, and the
platform-independent logarithm against math.log10."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refimpl.scaling import mx_quantize, quantization_error
from refimpl.scaling.error import _log10


def test_hand_computed():
    e = quantization_error(np.array([1.0, 2.0, 3.0, 4.0]), np.array([1.0, 2.0, 3.0, 5.0]))
    assert e.rmse == 0.5  # sqrt(1 / 4)
    assert e.max_abs == 1.0
    assert e.sqnr_db == pytest.approx(10 * math.log10(30.0), rel=1e-15)


def test_special_cases():
    x = np.array([1.0, -2.0], np.float32)
    assert quantization_error(x, x) == (0.0, 0.0, math.inf)
    z = quantization_error(np.zeros(2), np.array([0.0, 1.0]))
    assert z.sqnr_db == -math.inf and z.max_abs == 1.0
    assert all(math.isnan(v) for v in quantization_error(x, np.array([np.nan, 1.0])))
    inf = quantization_error(x, np.array([np.inf, 1.0]))
    assert inf == (math.inf, math.inf, -math.inf)
    with pytest.raises(ValueError, match="shape"):
        quantization_error(x, np.zeros(3))


def test_accepts_quantized_objects():
    x = np.linspace(-3, 3, 64, dtype=np.float32)
    q = mx_quantize(x, "e4m3")
    assert quantization_error(x, q) == quantization_error(x, q.dequantize())
    assert quantization_error(x, q).sqnr_db > 25  # 3 mantissa bits: about 6 dB per bit


@settings(max_examples=200)
@given(r=st.floats(min_value=5e-324, max_value=1.7e308, allow_nan=False, allow_infinity=False))
def test_log10_close_to_libm(r):
    assert _log10(r) == pytest.approx(math.log10(r), rel=1e-15, abs=1e-15)  # a few ulps


def test_sum_is_order_independent():
    rng = np.random.default_rng(0)
    x = rng.standard_normal(10000) * 10.0 ** rng.integers(-8, 8, 10000)
    q = x + rng.standard_normal(10000) * 1e-3
    perm = rng.permutation(10000)
    assert quantization_error(x, q) == quantization_error(x[perm], q[perm])
