"""refimpl.attention.scores, step by step, against exact ``fractions.Fraction``
arithmetic rounded to float32 by integer arithmetic written here (an oracle that uses no
floating-point rounding at all)."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from oracles import round_rational
from refimpl.attention.problem import prepare
from refimpl.attention.scores import scores

BELOW_ONE = float(np.nextafter(np.float32(1), np.float32(0)))  # 1 - 2^-24


def rn32(x: Fraction) -> float:
    """``x`` rounded to the nearest float32 (ties to even; subnormals; +-inf beyond)."""
    return float(round_rational(x, np.float32))


def tile_scores(q_row: np.ndarray, sk: int, slopes, **options) -> np.ndarray:
    """Scores of a single query row against ``sk`` keys all equal to 1 (D = 1,
    scale 1): before ALiBi every score is the query value itself."""
    q = np.asarray(q_row, np.float32).reshape(1, 1, 1, 1)
    k = np.ones((1, 1, sk, 1), np.float32)
    prob = prepare(q, k, k, scale=1.0, alibi_slopes=slopes, **options)
    s, _, _ = scores(prob, prob.q, prob.k, np.arange(1), np.arange(sk))
    return s[0, 0, 0]


def test_alibi_double_rounding_counterexample():
    # key 0 is at distance 65 (bottom-right, Sq = 1, Sk = 66): 1 - 65 * 16519105 * 2^-55
    # = 1 - 2^-25 - 2^-55, just below the midpoint 1 - 2^-25 of 1 - 2^-24 and 1.
    # fl64 of the sum is 1 - 2^-25 (a tie in float32, rounding to 1.0); one rounding
    # gives 1 - 2^-24.
    slope = 16519105 * 2.0**-55
    assert float(np.float32(slope)) == slope
    for slopes in (np.array([slope], np.float32), np.array([slope])):
        s = tile_scores([1.0], 66, slopes)
        assert float(s[0]) == BELOW_ONE
        assert rn32(1 - 65 * Fraction(slope)) == BELOW_ONE


f32 = st.floats(-1e6, 1e6, width=32, allow_subnormal=True)


@pytest.mark.slow
@settings(max_examples=200)
@given(f32, st.integers(1, 300), st.floats(2.0**-40, 64.0, width=32),
       st.booleans(), st.sampled_from(["bottom_right", "top_left"]))
@example(1.0, 66, 16519105 * 2.0**-55, False, "bottom_right")
@example(3.0e-8, 5, 2.0**-23 + 2.0**-46, True, "bottom_right")
def test_alibi_correctly_rounded(q, sk, slope, f64_slope, alignment):
    """fl32(s - slope * d) with one rounding, for float32 slopes and for float64 slopes
    with more than 24 bits (the Veltkamp path)."""
    sl = float(slope) + (float(slope) * 2.0**-40 if f64_slope else 0.0)
    slopes = np.array([sl]) if f64_slope else np.array([sl], np.float32)
    s = tile_scores([q], sk, slopes, causal_alignment=alignment)
    off = sk - 1 if alignment == "bottom_right" else 0
    for j in range(sk):
        exact = Fraction(float(np.float32(q))) - Fraction(sl) * abs(off - j)
        assert float(s[j]) == rn32(exact), j


def test_alibi_keeps_masks_and_is_tiling_independent():
    rng = np.random.default_rng(3)
    q = rng.standard_normal((1, 2, 7, 4)).astype(np.float32)
    k = rng.standard_normal((1, 2, 9, 4)).astype(np.float32)
    for slopes in (np.array([0.3, 0.7], np.float32), np.array([0.3, 0.7])):
        prob = prepare(q, k, k, causal=True, alibi_slopes=slopes)
        whole, vis, _ = scores(prob, prob.q, prob.k, np.arange(7), np.arange(9))
        assert np.array_equal(np.isneginf(whole), ~np.broadcast_to(vis[:, None], whole.shape))
        parts = np.concatenate([scores(prob, prob.q, prob.k[:, :, j:j + 3], np.arange(7),
                                       np.arange(j, j + 3))[0] for j in (0, 3, 6)], axis=-1)
        assert np.array_equal(whole, parts)


@pytest.mark.parametrize("q, expected", [
    (1e6, 1e6),  # distances 0: the score itself
])
def test_alibi_zero_distance_is_the_score(q, expected):
    assert float(tile_scores([q], 1, np.array([0.1]))[0]) == expected


@given(st.floats(-2.0**100, 2.0**100, width=32), st.floats(-2.0**100, 2.0**100, width=32))
def test_scale_multiply_is_one_binary32_rounding(x, scale):
    """Step 2: fl32(S * fl32(scale)), one rounding of the exact product."""
    q = np.array([[[[x]]]], np.float32)
    k = np.ones((1, 1, 1, 1), np.float32)
    prob = prepare(q, k, k, scale=scale)
    s, _, _ = scores(prob, prob.q, prob.k, np.arange(1), np.arange(1))
    assert float(s[0, 0, 0, 0]) == rn32(Fraction(float(x)) * Fraction(float(np.float32(scale))))
