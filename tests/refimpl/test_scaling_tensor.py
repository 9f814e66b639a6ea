"""Per-tensor FP8 scaling: current-scaling formula against exact division, delayed
scaling's history rules."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oracles import round_rational
from refimpl import formats
from refimpl.scaling import DelayedScaling, tensor_quantize, tensor_scale

F32 = np.float32
FLT_MAX = float(np.finfo(np.float32).max)


@settings(max_examples=50)
@given(amax=st.floats(2.0 ** -100, 2.0 ** 100, width=32), margin=st.integers(0, 4),
       fmt=st.sampled_from(["e4m3", "e5m2"]))
def test_scale_is_rounded_quotient(amax, margin, fmt):
    fmax = 448 if fmt == "e4m3" else 57344
    expected = float(round_rational(Fraction(fmax) / Fraction(amax))) / 2 ** margin  # exact halving
    assert float(tensor_scale(amax, fmt, margin)) == expected


def test_pinned_scales():
    assert tensor_scale(2.0) == 224.0
    assert tensor_scale(0.0) == 1.0 and tensor_scale(np.nan) == 1.0 and tensor_scale(np.inf) == 1.0
    assert tensor_scale(2.0**-149) == FLT_MAX  # 448 / 2**-149 overflows float32
    assert tensor_scale(3.0, power_of_two=True) == 128.0  # 149.33 rounded down
    assert tensor_scale(57344.0, "e5m2") == 1.0
    with pytest.raises(ValueError, match="amax"):
        tensor_scale(-1.0)
    with pytest.raises(ValueError, match="margin"):
        tensor_scale(1.0, margin=-1)


def test_quantize_and_dequantize():
    x = np.array([1.0, -3.0, 500.0, 1e-9], F32)
    q = tensor_quantize(x, 2.0)
    # x * 2 = [2, -6, 1000 -> saturates to 448, tiny -> 0]
    assert q.codes.tolist() == [0x40, 0xCC, 0x7E, 0x00]
    assert q.dequantize().tolist() == [1.0, -3.0, 224.0, 0.0]
    q3 = tensor_quantize(np.array([1.0], F32), 3.0)  # scale_inv = fl32(1/3)
    assert q3.dequantize()[0] == F32(F32(3.0) * F32(F32(1.0) / F32(3.0)))
    assert int(formats.encode(F32(3.0), "e4m3")) == int(q3.codes[0])
    with pytest.raises(ValueError, match="scale"):
        tensor_quantize(x, 0.0)


def test_delayed_scaling_history():
    d = DelayedScaling(amax_history_len=3)
    assert d.scale == 1.0 and d.reduced_amax() == 0.0
    assert d.update(4.0) == 112.0
    assert d.update(2.0) == 112.0  # max of [4, 2]
    d.update(1.0)
    assert d.update(1.0) == 224.0  # 4 has left the window: max of [2, 1, 1]
    assert d.amax_history.tolist() == [2.0, 1.0, 1.0] and d.reduced_amax() == 2.0
    assert d.update(0.0) == 448.0  # 2 has left too: max of [1, 1, 0]
    r = DelayedScaling(amax_history_len=3, amax_compute_algo="most_recent", margin=1)
    r.update(4.0)
    assert r.scale == 56.0
    r.update(1.0)
    assert r.reduced_amax() == 1.0 and r.scale == 224.0  # the latest only
    r.update(4.0)
    assert r.update(0.0) == 56.0  # zero amax keeps the previous scale
    assert r.update(np.nan) == 56.0
    before_scale, before_hist = r.scale, r.amax_history
    with pytest.raises(ValueError, match="amax"):
        r.update(-2.0)
    assert r.scale == before_scale  # a rejected update changes nothing
    assert np.array_equal(r.amax_history, before_hist, equal_nan=True)


def test_delayed_quantize_uses_previous_scale():
    d = DelayedScaling()
    x = np.array([100.0, -8.0], F32)
    q1 = d.quantize(x)  # scale 1 at first
    assert q1.scale == 1.0 and q1.dequantize().tolist() == [96.0, -8.0]
    assert d.scale == F32(448.0) / F32(100.0)
    q2 = d.quantize(x)
    assert q2.scale == d.scale
    with pytest.raises(ValueError, match="amax_compute_algo"):
        DelayedScaling(amax_compute_algo="mean")
    with pytest.raises(ValueError, match="amax_history_len"):
        DelayedScaling(amax_history_len=0)


@pytest.mark.parametrize("margin", [127, 128, 140])
def test_large_margin_scale_is_exact(margin):
    # 448 / 2**margin is a float32 (normal or subnormal); margin 128 once gave 0 because
    # float32(2**128) is Inf
    assert Fraction(float(tensor_scale(1.0, "e4m3", margin))) == Fraction(448, 2 ** margin)


def test_margin_that_underflows_the_scale_is_refused_and_state_kept():
    with pytest.raises(ValueError, match="margin"):
        tensor_scale(1.0, "e4m3", margin=200)
    d = DelayedScaling(margin=200)
    with pytest.raises(ValueError, match="margin"):
        d.update(1.0)
    assert float(d.scale) == 1.0 and d.amax_history.size == 0


def test_power_of_two_flag_is_checked():
    with pytest.raises(TypeError, match="power_of_two"):
        tensor_scale(1.0, power_of_two="no")


@pytest.mark.parametrize("amax", [0.1, 1e300, 1e-50, np.float64(3.3),
                                  np.longdouble(2) ** -150, np.longdouble(1) / 3])
def test_amaxes_float32_cannot_hold_are_refused(amax):
    # rounding to float32 would give a nearby scale (0.1), Inf and so scale 1 (1e300) or
    # 0 and so scale 1 (1e-50): each is refused, naming the argument
    with pytest.raises(ValueError, match="amax.*not a float32 value"):
        tensor_scale(amax)
    d = DelayedScaling()
    d.update(np.float32(2.0))
    with pytest.raises(ValueError, match="amax.*not a float32 value"):
        d.update(amax)
    # a rejected update changes nothing
    assert d.scale == tensor_scale(2.0) and d.amax_history.tolist() == [2.0]
    with pytest.raises(ValueError, match="scale.*not a float32 value"):
        tensor_quantize(np.ones(2, F32), amax)


def test_float32_values_in_wider_types_are_accepted():
    # the same value as a float32, a Python float, a float64 and a longdouble
    a = np.float32(0.1)
    want = F32(F32(448.0) / a)
    for v in (a, float(a), np.float64(a), np.longdouble(a)):
        assert tensor_scale(v) == want
