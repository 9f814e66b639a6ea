"""matmul(a, b, c): the accumulator input C, broadcast like the output, and where each
model lets it enter. Expected values are derived by hand or from Fraction arithmetic."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refimpl.matmul import PRESETS, BlockFMA, matmul


def test_c_placement_probe_inside_versus_after():
    # a = 0.75 * 2^-6 (an E4M3 subnormal), b = 2^-9: one product p = 0.75 * 2^-15, c = 256.
    # Inside the block (F = 25): eta = 8 (c's exponent), grid 2^-17, p = 6 units is kept,
    # but 256 + p rounds toward zero in FP32 (ulp 2^-15 at 256): 256.
    # After the block: the product alone is p (exact), then RN(256 + p): p is 0.75 ulp,
    # above half an ulp, so 256 + 2^-15.
    a = np.array([[0.75 * 2.0**-6]], np.float32)
    b = np.array([[2.0**-9]], np.float32)
    c = np.array([[256.0]], np.float32)
    assert matmul(a, b, c, accumulate="B200-E4M3")[0, 0] == np.float32(256 + 2.0**-15)
    assert matmul(a, b, c, accumulate="B200-E4M3-TCGEN05")[0, 0] == np.float32(256.0)
    assert matmul(a, b, c, accumulate="B200-FP8")[0, 0] == np.float32(256 + 2.0**-15)
    assert BlockFMA.preset("B200-E4M3").c_placement == "after"


def test_c_inside_is_truncated_with_the_products():
    # H100-E4M3: F = 13 and a 13-bit accumulator. A = B = 0 and c = 1 + 2^-20 (FP32):
    # the block's only term is c; truncated to 13 fraction bits it is 1 (what the
    # FP22-accumulator measurements of Hopper/Ada report: C loses its low 10 bits)
    a = np.zeros((1, 32), np.float32)
    b = np.zeros((32, 1), np.float32)
    c = np.array([[1 + 2.0**-20]], np.float32)
    assert matmul(a, b, c, accumulate="H100-E4M3")[0, 0] == np.float32(1.0)
    assert matmul(a, b, c, accumulate="L40S-E4M3")[0, 0] == np.float32(1.0)
    assert matmul(a, b, c, accumulate="B200-E4M3-TCGEN05")[0, 0] == c[0, 0]
    assert matmul(a, b, c, accumulate="A100-FP16")[0, 0] == c[0, 0]


@pytest.mark.parametrize("name", sorted(n for n, p in PRESETS.items() if not p.block_scaled))
def test_c_zero_is_no_c(name):
    rng = np.random.default_rng(1)
    a = rng.integers(-8, 9, (3, 40)).astype(np.float32) / 8
    b = rng.integers(-8, 9, (40, 2)).astype(np.float32) / 4
    want = matmul(a, b, accumulate=name)
    got = matmul(a, b, np.zeros((3, 2), np.float32), accumulate=name)
    assert got.tobytes() == want.tobytes()


def test_c_broadcasts_like_the_output_and_batches():
    rng = np.random.default_rng(2)
    a = rng.integers(-4, 5, (2, 3, 16)).astype(np.float32)
    b = rng.integers(-4, 5, (16, 5)).astype(np.float32)
    c = rng.integers(-4, 5, (5,)).astype(np.float32) / 8           # one row, broadcast
    want = np.einsum("bmk,kn->bmn", a.astype(np.float64), b.astype(np.float64)) + c
    for acc in ("exact", "sequential", "A100-FP16", "B200-E4M3", "H100-E4M3"):
        got = matmul(a, b, c, accumulate=acc)
        assert got.shape == (2, 3, 5)
        # small integers and eighths: every model is exact here
        assert np.array_equal(got, want.astype(np.float32)), acc


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(-2**11, 2**11), st.integers(-2**11, 2**11)),
                min_size=1, max_size=12),
       st.integers(-2**24, 2**24), st.integers(-40, 10))
def test_exact_with_c_is_one_rounding(pairs, cm, ce):
    # FP16-representable integers as operands, c = cm * 2^ce (an FP32 value): the exact
    # a . b + c rounded once to FP32 (Fraction, then float() is nearest-even in float64,
    # and a value with at most 53 bits is exact there: round the Fraction to 24 bits)
    a = np.array([[p[0] for p in pairs]], np.float32)
    b = np.array([[p[1]] for p in pairs], np.float32)
    c = np.float32(cm * 2.0**ce)
    exact = sum(Fraction(x) * Fraction(y) for x, y in pairs) + Fraction(float(c))
    got = matmul(a, b, np.array([[c]]), accumulate="exact")[0, 0]
    want = np.float32(float(exact)) if exact == Fraction(float(exact)) else None
    if want is not None:
        assert got == want
    assert abs(Fraction(float(got)) - exact) <= abs(exact) * Fraction(1, 2**24)


def test_sequential_starts_from_c():
    # sequential: c_1 = fl(c + p_1), ... ; c = 1, products 2^-24, 2^-24: each addition
    # is a tie 1 + 2^-24 -> 1 (even), so the loop gives 1; exact gives 1 + 2^-23
    a = np.array([[2.0**-12, 2.0**-12]], np.float32)
    b = np.array([[2.0**-12], [2.0**-12]], np.float32)
    c = np.array([[1.0]], np.float32)
    assert matmul(a, b, c, accumulate="sequential")[0, 0] == np.float32(1.0)
    assert matmul(a, b, c, accumulate="exact")[0, 0] == np.float32(1 + 2.0**-23)


def test_bad_c():
    a, b = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    with pytest.raises(ValueError, match="broadcast"):
        matmul(a, b, np.ones((3, 4)))
    with pytest.raises(ValueError, match=r"c\[0, 1\].*fp16"):
        matmul(a, b, np.array([[0.0, 0.1, 0, 0]] * 2), out_format="fp16")
    with pytest.raises(ValueError, match="fp32"):
        matmul(a, b, np.full((2, 4), 0.1))
    with pytest.raises(TypeError, match="c must be"):
        matmul(a, b, np.array([["x"] * 4] * 2))
    with pytest.raises(TypeError, match="accumulate"):
        matmul(a, b, accumulate=3)
