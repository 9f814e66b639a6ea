"""refimpl.softmax against 40-digit decimal arithmetic and the definitions."""
from __future__ import annotations

import decimal
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import example, given, settings, target
from hypothesis import strategies as st

from oracles import round_rational
from refimpl.softmax import (
    SoftmaxState, logsumexp, merge, online_softmax, online_state, softmax,
)

CTX = decimal.Context(prec=40)
U32 = 2.0**-24


def d_softmax(row):
    vals = [decimal.Decimal(float(x)) for x in row if x != -np.inf]
    if not vals:
        return [0.0] * len(row), -np.inf
    m = max(vals)
    es = [CTX.exp(v - m) for v in vals]
    z = sum(es)
    out, it = [], iter(es)
    for x in row:
        out.append(0.0 if x == -np.inf else float(next(it) / z))
    return out, float(m + CTX.ln(z))


rows = st.lists(
    st.one_of(st.floats(-100, 100, width=32), st.just(-np.inf)), min_size=0, max_size=24)


@pytest.mark.slow
@settings(max_examples=100)
@given(rows, st.sampled_from([0.0, 1e4, -1e4]))
@example([-np.inf, -np.inf], 0.0)
@example([], 0.0)
@example([1e4, 1e4 - 1.0], 0.0)
def test_softmax_and_lse_vs_decimal(row, offset):
    x = (np.array(row, dtype=np.float32) + np.float32(offset)).astype(np.float32)
    ref, ref_lse = d_softmax(x)
    got = softmax(x)
    assert got.dtype == np.float32
    assert not np.isnan(got).any()
    # computed in float64 and rounded once: within one float32 ulp of the true value
    err = np.abs(got.astype(np.float64) - ref)
    assert np.all(err <= np.spacing(np.abs(np.array(ref, dtype=np.float32))) + 1e-45)
    lse = float(logsumexp(x))
    if ref_lse == -np.inf:
        assert lse == -np.inf
    else:
        # one float32 rounding, plus ln(d) near d = 1 carrying float64 rounding of d
        bound = float(np.spacing(np.float32(abs(ref_lse)))) + 2.0**-50 * (1 + abs(lse))
        target(abs(lse - ref_lse) / bound, label="lse error / bound")
        assert abs(lse - ref_lse) <= bound


@pytest.mark.slow
@settings(max_examples=60)
@given(rows, st.integers(1, 7))
def test_online_equals_definition(row, block):
    x = np.array(row, dtype=np.float64)
    ref, ref_lse = d_softmax(x)
    got = online_softmax(x, block=block)
    assert got.dtype == np.float64
    assert np.allclose(got, ref, rtol=1e-13, atol=1e-300)
    st_ = online_state(x, block=block)
    if ref_lse == -np.inf:
        assert st_.m == -np.inf and st_.d == 0 and st_.lse == -np.inf
    else:
        assert abs(float(st_.lse) - ref_lse) <= 1e-13 * max(1.0, abs(ref_lse))


def test_online_recurrence_block_one_matches_hand_computation():
    # x = [1, 3, 2]: m = 1, 3, 3; d = 1, e^-2 + 1, (e^-2 + 1) + e^-1
    st_ = online_state(np.array([1.0, 3.0, 2.0]), block=1)
    assert st_.m == 3.0
    expect = float(CTX.exp(decimal.Decimal(-2)) + 1 + CTX.exp(decimal.Decimal(-1)))
    assert abs(float(st_.d) - expect) <= 4 * 2.0**-52 * expect


def test_fully_masked_rows_are_zero_not_nan():
    x = np.array([[-np.inf, -np.inf, -np.inf], [0.0, -np.inf, 0.0]], dtype=np.float32)
    y = softmax(x, axis=-1)
    assert np.array_equal(y[0], [0, 0, 0])
    assert np.array_equal(y[1], [0.5, 0, 0.5])
    assert np.array_equal(online_softmax(x, block=2)[0], [0, 0, 0])
    lse = logsumexp(x)
    assert lse[0] == -np.inf
    assert np.array_equal(softmax(np.zeros((2, 0), np.float32)), np.zeros((2, 0)))


def test_nan_and_posinf_propagate():
    assert np.isnan(softmax(np.array([0.0, np.nan]))).all()
    assert np.isnan(softmax(np.array([0.0, np.inf]))).all()


def test_merge_laws():
    rng = np.random.default_rng(0)
    a = SoftmaxState.of(rng.normal(size=(4, 5)) * 10)
    b = SoftmaxState.of(rng.normal(size=(4, 3)) * 10)
    c = SoftmaxState.of(rng.normal(size=(4, 6)) * 10)
    ident = SoftmaxState.identity((4,))
    ab = merge(a, b)
    ba = merge(b, a)
    assert np.array_equal(ab.m, ba.m) and np.array_equal(ab.d, ba.d)  # exactly commutative
    left, right = merge(merge(a, b), c), merge(a, merge(b, c))
    assert np.array_equal(left.m, right.m)
    assert np.allclose(left.d, right.d, rtol=4e-16)
    ai = merge(a, ident)
    assert np.array_equal(ai.m, a.m) and np.array_equal(ai.d, a.d)
    ii = merge(ident, ident)
    assert np.all(ii.m == -np.inf) and np.all(ii.d == 0) and not np.isnan(ii.d).any()


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_axis(axis):
    x = np.random.default_rng(2).normal(size=(3, 4, 5)).astype(np.float32)
    got = softmax(x, axis=axis)
    assert np.allclose(got.sum(axis=axis), 1.0, atol=4e-7)
    assert np.array_equal(online_softmax(x, axis=axis, block=2), got) or np.allclose(
        online_softmax(x, axis=axis, block=2), got, atol=2 * U32)


def test_bad_block():
    with pytest.raises(ValueError, match="block"):
        online_state(np.zeros(3), block=0)


def _rn32_nearest(value: decimal.Decimal) -> float:
    """RN32 of a positive decimal (:func:`oracles.round_rational`: subnormals, and +inf
    from the overflow threshold on); a 40-digit value is never within 10^-30 of a
    rounding boundary in these cases (checked: both ends of that margin round alike)."""
    v = Fraction(value)
    want = round_rational(v, np.float32)
    margin = v / 10**30
    assert round_rational(v - margin, np.float32) == want == round_rational(v + margin,
                                                                            np.float32)
    return float(want)


@settings(max_examples=60)
@given(st.floats(-60, 60, width=32), st.floats(-60, 60, width=32), st.integers(0, 8))
@example(1.0, 1.0, 0)
@example(-3.5, 2.25, 8)
@example(50.0, -39.0, 0)  # e^89 overflows binary32: +inf
@example(-60.0, 60.0, 8)  # 2^8 e^-120 is below 2^-150: +0
@example(-44.0, 44.0, 0)  # e^-88, a binary32 subnormal
def test_exp_diff_f32_is_the_rounded_exponential_of_the_difference(a, b, shift):
    from refimpl.softmax import exp_diff_f32

    d = decimal.Decimal(float(np.float64(a) - np.float64(b)))  # fl64(a - b), as defined
    want = _rn32_nearest(CTX.exp(d) * 2**shift)
    got = exp_diff_f32(np.float32(a), np.float32(b), shift=shift)
    assert got.dtype == np.float32 and float(got) == want


def test_exp_diff_f32_empty_terms_weigh_zero():
    from refimpl.softmax import exp_diff_f32

    got = exp_diff_f32(np.array([-np.inf, -np.inf, 0.0]), np.array([-np.inf, 0.0, 0.0]))
    assert got.tolist() == [0.0, 0.0, 1.0] and not np.signbit(got).any()
