"""refimpl.matmul ordered models: sequential (with and without FMA), pairwise, chunked.

Oracles: NumPy float32/float16 scalar arithmetic (IEEE correctly rounded + and *), and
Fraction arithmetic rounded by nearest-neighbour search for the fused multiply-add.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from oracles import round_rational, same_bits
from refimpl.matmul import Chunked, Pairwise, Sequential, matmul


def rn(x: Fraction, dtype=np.float32):
    """Round an exact rational to dtype, nearest-even (IEEE 754, ``tests/oracles.py``)."""
    return round_rational(x, dtype)


def seq_oracle(a_row, b_col, dtype, fma):
    """Inputs are float32 values; a product is exact in float64 and rounded once."""
    terms = list(zip(a_row.astype(np.float64), b_col.astype(np.float64)))
    if not terms:
        return dtype(0.0)
    with np.errstate(all="ignore"):
        c = dtype(terms[0][0] * terms[0][1])  # one rounding, fused or not
        for x, y in terms[1:]:
            if fma:
                if not (np.isfinite(c) and np.isfinite(x) and np.isfinite(y)):
                    c = dtype(float(c) + float(x) * float(y))  # specials: IEEE rules
                    continue
                exact = Fraction(float(c)) + Fraction(float(x)) * Fraction(float(y))
                if exact == 0:
                    p_neg_zero = (x == 0 or y == 0) and np.signbit(x) != np.signbit(y)
                    c = dtype(-0.0 if (c == 0 and np.signbit(c) and p_neg_zero) else 0.0)
                else:
                    c = rn(exact, dtype)
            else:
                c = dtype(c + dtype(x * y))  # fp16 + via float32: 24 >= 2*11 + 2, no harm
    return c


def pairwise_oracle(a_row, b_col, dtype):
    with np.errstate(all="ignore"):
        level = [dtype(x * y) for x, y in zip(a_row.astype(np.float64), b_col.astype(np.float64))]
        if not level:
            return dtype(0.0)
        while len(level) > 1:
            nxt = [dtype(level[i] + level[i + 1]) for i in range(0, len(level) - 1, 2)]
            if len(level) % 2:
                nxt.append(level[-1])
            level = nxt
    return level[0]


f16_values = st.builds(  # every finite float16 code, by construction
    lambda code, neg: float(np.array(code | (0x8000 if neg else 0), np.uint16).view(np.float16)),
    st.integers(0, 0x7BFF), st.booleans())
f32_values = st.one_of(
    st.builds(lambda m, e: float(np.float32(m * 2.0**e)), st.floats(-2, 2, width=32),
              st.integers(-40, 40)),
    st.sampled_from([0.0, -0.0, 1.0, -1.0, 2.0**-24, 3e38, -3e38]))


@st.composite
def mats(draw, values, max_k=12):
    m, k, n = draw(st.integers(1, 3)), draw(st.integers(1, max_k)), draw(st.integers(1, 3))
    a = np.array(draw(st.lists(values, min_size=m * k, max_size=m * k))).reshape(m, k)
    b = np.array(draw(st.lists(values, min_size=k * n, max_size=k * n))).reshape(k, n)
    return a, b


def expect(a, b, fn):
    return np.array([[fn(a[i], b[:, j]) for j in range(b.shape[1])]
                     for i in range(a.shape[0])])


@settings(max_examples=40)
@given(mats(f32_values), st.booleans())
@example((np.array([[1.0, 2.0**-24, 2.0**-24]]), np.ones((3, 1))), False)
@example((np.array([[-0.0, -0.0]]), np.ones((2, 1))), False)
@example((np.array([[3e38, 3e38, -3e38]]), np.ones((3, 1))), False)  # overflows on the way
def test_sequential_fp32(ab, fma):
    a, b = (x.astype(np.float32) for x in ab)
    got = matmul(a, b, accumulate=Sequential(fma=fma))
    want = expect(a, b, lambda r, c: seq_oracle(r, c, np.float32, fma)).astype(np.float32)
    assert same_bits(got, want)


@settings(max_examples=40)
@given(mats(f16_values), st.booleans())
@example((np.array([[2048.0, 1.0, 1.0]]), np.ones((3, 1))), False)  # 2048 + 1 = 2048 in fp16
def test_sequential_fp16(ab, fma):
    a, b = ab
    got = matmul(a, b, accumulate=Sequential(fma=fma), out_format="fp16")
    want = expect(a, b, lambda r, c: seq_oracle(r, c, np.float16, fma)).astype(np.float32)
    assert same_bits(got, want)


def test_sequential_fma_differs_where_the_product_is_inexact():
    # (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24; minus (1 + 2^-11): FMA keeps 2^-24, plain gives 0
    x = np.float32(1 + 2.0**-12)
    a = np.array([[-(1 + 2.0**-11), x]], np.float32)
    b = np.array([[1.0], [x]], np.float32)
    assert matmul(a, b, accumulate="sequential_fma")[0, 0] == np.float32(2.0**-24)
    assert matmul(a, b, accumulate="sequential")[0, 0] == 0.0
    assert matmul(a, b, accumulate="exact")[0, 0] == np.float32(2.0**-24)


@pytest.mark.slow
@settings(max_examples=40)
@given(mats(f32_values, max_k=17))
@example((np.array([[1.0, 2.0**-24, 2.0**-24, 1.0, 2.0**-24]]), np.ones((5, 1))))
def test_pairwise_tree(ab):
    a, b = (x.astype(np.float32) for x in ab)
    got = matmul(a, b, accumulate=Pairwise())
    want = expect(a, b, lambda r, c: pairwise_oracle(r, c, np.float32)).astype(np.float32)
    assert same_bits(got, want)


def test_pairwise_hand_derived():
    # leaves 1, u, u, u (u = 2^-24): (1 + u) -> 1 (tie, even), (u + u) = 2u, 1 + 2u exact
    a = np.array([[1.0, 2.0**-24, 2.0**-24, 2.0**-24]], np.float32)
    got = matmul(a, np.ones((4, 1), np.float32), accumulate="pairwise")[0, 0]
    assert got == np.float32(1 + 2.0**-23)
    # sequential: 1 + u -> 1, three times
    assert matmul(a, np.ones((4, 1), np.float32), accumulate="sequential")[0, 0] == 1.0


@pytest.mark.slow
@settings(max_examples=30)
@given(mats(f32_values, max_k=20), st.integers(1, 6), st.sampled_from(["exact", "sequential"]))
def test_chunked_composes_inner_and_outer(ab, size, inner):
    a, b = (x.astype(np.float32) for x in ab)
    got = matmul(a, b, accumulate=Chunked(size=size, inner=inner, inner_format="fp16"))

    def oracle(r, c):
        acc = None
        for s0 in range(0, len(r), size):
            rr, cc = r[s0:s0 + size], c[s0:s0 + size]
            if inner == "exact":
                prods = [Fraction(float(x)) * Fraction(float(y)) for x, y in zip(rr, cc)
                         if np.isfinite(x) and np.isfinite(y)]
                part = rn(sum(prods, Fraction(0)), np.float16)
                if sum(prods, Fraction(0)) == 0:
                    neg = all(np.signbit(x) != np.signbit(y) and (x == 0 or y == 0)
                              for x, y in zip(rr, cc))
                    part = np.float16(-0.0 if neg else 0.0)
            else:
                part = seq_oracle(rr, cc, np.float16, False)
            with np.errstate(all="ignore"):
                acc = np.float32(part) if acc is None else np.float32(acc + np.float32(part))
        return acc

    want = expect(a, b, oracle).astype(np.float32)
    assert same_bits(got, want), (a.tolist(), b.tolist(), got, want)


def test_chunked_deepseek_default_is_128():
    assert Chunked().size == 128
    # 256 products of 2^-24 after a 1: sequential fp32 loses all of them; chunks of 128
    # sum them exactly (2^-17) before promotion, so the chunked sum keeps them
    a = np.concatenate([[1.0], np.full(255, 2.0**-24)]).astype(np.float32)[None, :]
    b = np.ones((256, 1), np.float32)
    assert matmul(a, b, accumulate="sequential")[0, 0] == 1.0
    got = matmul(a, b, accumulate=Chunked(128, inner="sequential"))[0, 0]
    # chunk 1: 1 + 127 u -> 1 (each step ties to even); chunk 2: 128 u = 2^-17 exactly
    assert got == np.float32(1 + 2.0**-17)


def test_bad_model_options():
    with pytest.raises(ValueError, match="size"):
        Chunked(size=0)
    with pytest.raises(TypeError, match="Chunked.size must be an int"):
        Chunked(size=2.0)
    with pytest.raises(ValueError, match="Chunked"):
        Chunked(inner=Chunked())


@pytest.mark.parametrize("model", ["exact", "sequential", "sequential_fma", "pairwise",
                                   "chunked", "H100-FP16", Chunked(2, inner="A100-TF32")])
def test_batched_broadcast_equals_per_matrix(model):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 1, 3, 5)).astype(np.float32)
    b = rng.standard_normal((4, 5, 2)).astype(np.float32)
    c = matmul(a, b, accumulate=model)
    assert c.shape == (2, 4, 3, 2) and c.dtype == np.float32
    for i in range(2):
        for j in range(4):
            assert c[i, j].tobytes() == matmul(a[i, 0], b[j], accumulate=model).tobytes()
