"""refimpl.matmul "exact": correctly rounded products, checked against Fraction sums.

The oracle here is independent of the code under test: the exact sum is a
``fractions.Fraction``; it is rounded to FP32 (or FP16, BF16) by the IEEE 754 definition
in ``tests/oracles.py`` (integer arithmetic, ties to the even code).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from oracles import (BFLOAT16, SHARP_FP32_PRODUCTS, round_binary, round_rational, same_bits,
                     with_examples)
from refimpl.matmul import exact_matmul64, matmul
from refimpl.matmul.rounding import FP32, target

def oracle_round(x: Fraction, dtype=np.float32) -> float:
    """RN-even of an exact rational to float32/float16 (IEEE 754, ``tests/oracles.py``)."""
    return float(round_rational(x, dtype))


def oracle_dot(a_row, b_col, dtype=np.float32) -> float:
    """IEEE semantics for specials; exact Fraction sum otherwise."""
    pairs = list(zip((float(v) for v in a_row), (float(v) for v in b_col)))
    signs = set()
    for x, y in pairs:
        if np.isnan(x) or np.isnan(y):
            return float("nan")
        if np.isinf(x) or np.isinf(y):
            if x == 0 or y == 0:
                return float("nan")
            signs.add(np.sign(x) * np.sign(y))
    if len(signs) == 2:
        return float("nan")
    if signs:
        return float(signs.pop() * np.inf)
    total = sum((Fraction(x) * Fraction(y) for x, y in pairs), Fraction(0))
    if total == 0:
        neg = [np.signbit(x) != np.signbit(y) for x, y in pairs]
        return -0.0 if pairs and all(neg) else 0.0
    return oracle_round(total, dtype)


def oracle_matmul(a, b, dtype=np.float32) -> np.ndarray:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return np.array([[oracle_dot(a[i], b[:, j], dtype) for j in range(b.shape[1])]
                     for i in range(a.shape[0])], dtype=dtype).reshape(a.shape[0], b.shape[1])


# ------------------------------------------------------------------ strategies
wide = st.floats(width=32, allow_nan=False, allow_infinity=False)
moderate = st.builds(lambda m, e: float(np.float32(m * 2.0**e)),
                     st.floats(-2, 2, width=32), st.integers(-30, 30))
special = st.sampled_from([0.0, -0.0, 1.0, -1.0, 2.0**-24, 2.0**-149, 3.4028235e38,
                           -3.4028235e38, 2.0**127, 1.5, 2.0**-126])
element = st.one_of(wide, moderate, special)


@st.composite
def matrices(draw, elements=element, max_dim=5, max_k=10):
    m = draw(st.integers(1, max_dim))
    k = draw(st.integers(0, max_k))
    n = draw(st.integers(1, max_dim))
    a = np.array(draw(st.lists(elements, min_size=m * k, max_size=m * k)), np.float32)
    b = np.array(draw(st.lists(elements, min_size=k * n, max_size=k * n)), np.float32)
    return a.reshape(m, k), b.reshape(k, n)


@st.composite
def cancelling(draw):
    """Rows x_1..x_j, -x_1..-x_j, plus a small residue: the exact sum is the residue."""
    xs = draw(st.lists(wide, min_size=1, max_size=6))
    residue = draw(st.lists(st.one_of(moderate, special), min_size=0, max_size=3))
    row = xs + [-x for x in xs] + residue
    perm = draw(st.permutations(range(len(row))))
    a = np.array([row[p] for p in perm], np.float32)[None, :]
    b = np.ones((a.shape[1], 2), np.float32)
    b[:, 1] = draw(st.sampled_from([1.0, -1.0, 2.0**-60, 2.0**60]))
    return a, b


def check(a, b):
    got = matmul(a, b)
    assert got.dtype == np.float32
    want = oracle_matmul(a, b)
    assert same_bits(got, want), (a, b, got, want)
    slow, _ = exact_matmul64(a, b, recompute_all=True)
    with np.errstate(over="ignore"):
        assert same_bits(slow.astype(np.float32), want)


# ------------------------------------------------------------------ tests
@settings(max_examples=60)
@given(matrices())
@with_examples(SHARP_FP32_PRODUCTS)
def test_exact_equals_fraction(ab):
    check(*ab)


@settings(max_examples=40)
@given(cancelling())
def test_exact_cancellation(ab):
    check(*ab)


@settings(max_examples=30)
@given(matrices(elements=st.one_of(moderate, st.sampled_from([0.0, -0.0, np.inf, -np.inf,
                                                                np.nan, 1.0, -2.0]))))
def test_exact_special_values(ab):
    check(*ab)


@pytest.mark.parametrize("a, b, want", [
    ([[np.inf, -np.inf]], [[1.0], [1.0]], np.nan),      # inf - inf
    ([[np.inf, 0.0]], [[0.0], [1.0]], np.nan),          # 0 * inf
    ([[np.inf, 3e38]], [[1.0], [3e38]], np.inf),        # inf + huge finite
    ([[-np.inf, 1.0]], [[2.0], [5.0]], -np.inf),
    ([[np.nan, 0.0]], [[0.0], [0.0]], np.nan),
    ([[-0.0, -0.0]], [[1.0], [1.0]], -0.0),             # all products -0
    ([[-0.0, 0.0]], [[1.0], [1.0]], 0.0),
    ([[-0.0, -0.0]], [[1.0], [-1.0]], 0.0),
    ([[1.0, -1.0]], [[1.0], [1.0]], 0.0),               # x + (-x) = +0
    ([[3e38, 3e38]], [[2.0], [-2.0]], 0.0),             # no intermediate overflow
    ([[3e38, 3e38, -3e38]], [[2.0], [2.0], [2.0]], np.inf),  # exact 6e38 overflows once
])
def test_exact_sharp_cases(a, b, want):
    got = matmul(np.array(a, np.float32), np.array(b, np.float32))[0, 0]
    want = np.float32(want)
    assert same_bits(np.array([got]), np.array([want], np.float32))


def test_exact_near_overflow_and_subnormal_rounding():
    big = np.float32(3.4028235e38)
    # max + exactly half an ulp (2^103) is a tie: rounds to even -> Inf
    ones = np.ones((2, 1), np.float32)
    assert matmul(np.array([[big, 2.0**103]], np.float32), ones)[0, 0] == np.inf
    # just below the tie stays at max
    got = matmul(np.array([[big, 2.0**103, -2.0**-20]], np.float32), np.ones((3, 1), np.float32))
    assert got[0, 0] == big
    # subnormal tie: 2^-150 = half of the smallest subnormal rounds to +0 (even)
    got = matmul(np.array([[2.0**-149]], np.float32), np.array([[0.5]], np.float32))
    assert same_bits(got, np.zeros((1, 1), np.float32))
    got = matmul(np.array([[2.0**-149, 2.0**-149]], np.float32),
                 np.array([[0.75], [2.0**-60]], np.float32))
    assert got[0, 0] == np.float32(2.0**-149)


def test_exact_random_large_against_fraction_sample():
    rng = np.random.default_rng(7)
    a = (rng.standard_normal((64, 96)) * 2.0 ** rng.integers(-40, 40, (64, 96))).astype(np.float32)
    b = (rng.standard_normal((96, 48)) * 2.0 ** rng.integers(-40, 40, (96, 48))).astype(np.float32)
    got = matmul(a, b)
    for i, j in zip(rng.integers(0, 64, 60), rng.integers(0, 48, 60)):
        assert same_bits(got[i:i + 1, j], np.array([oracle_dot(a[i], b[:, j])], np.float32))
    slow, _ = exact_matmul64(a, b, recompute_all=True)
    assert same_bits(got, slow.astype(np.float32))


def test_exact_integer_like_data_is_exact_without_recomputation():
    h = np.array([[1.0]])
    while h.shape[0] < 256:
        h = np.block([[h, h], [h, -h]])
    h = h.astype(np.float32)
    got, stats = exact_matmul64(h, h.T)
    assert np.array_equal(got, 256 * np.eye(256))
    assert not np.signbit(got).any()  # exact zeros of cancellation are +0
    assert stats.recomputed == 0


@settings(max_examples=25)
@given(matrices(elements=st.one_of(moderate, st.sampled_from([0.0, -0.0, 65504.0, 2.0**-24]))))
def test_exact_fp16_output(ab):
    a, b = ab
    got = matmul(a, b, out_format="fp16")
    want = oracle_matmul(a, b, np.float16).astype(np.float32)
    assert same_bits(got, want)


def test_exact_batched_broadcast():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((2, 1, 4, 5)).astype(np.float32)
    b = rng.standard_normal((3, 5, 6)).astype(np.float32)
    got = matmul(a, b)
    assert got.shape == (2, 3, 4, 6)
    for i in range(2):
        for j in range(3):
            assert same_bits(got[i, j], oracle_matmul(a[i, 0], b[j]))


def test_in_format_rounds_inputs_first():
    a = np.array([[1.0 + 2.0**-9, 3.0]])  # not a bf16 value: rounds to 1.0 (tie to even)
    b = np.array([[1.0], [1.0]])
    assert matmul(a, b, in_format="bf16")[0, 0] == 4.0
    with pytest.raises(ValueError, match=r"a\[0, 0\].*not a float32 value"):
        matmul(np.array([[0.1]]), np.array([[1.0]]))


@pytest.mark.parametrize("a_shape, b_shape, msg", [
    ((2, 3), (4, 2), "inner dimensions differ"),
    ((3,), (3, 2), "at least 2 dimensions"),
    ((2, 2, 3), (3, 3, 2), "batch dimensions"),
])
def test_bad_shapes(a_shape, b_shape, msg):
    with pytest.raises(ValueError, match=msg):
        matmul(np.ones(a_shape, np.float32), np.ones(b_shape, np.float32))


def test_bad_names():
    a = np.ones((2, 2), np.float32)
    with pytest.raises(ValueError, match="accumulate"):
        matmul(a, a, accumulate="kahan")
    with pytest.raises(ValueError):
        matmul(a, a, out_format="fp64")
    assert target("fp32") == FP32


_CHILD = r"""
import sys, numpy as np
from refimpl.matmul import matmul
rng = np.random.default_rng(11)
a = (rng.standard_normal((96, 200)) * 2.0 ** rng.integers(-8, 8, (96, 200))).astype(np.float32)
b = (rng.standard_normal((200, 80)) * 2.0 ** rng.integers(-8, 8, (200, 80))).astype(np.float32)
a[:, :100] = a[:, 100:] * -1  # heavy cancellation
a[:, 0] += np.float32(1e-3)
sys.stdout.write(matmul(a, b).tobytes().hex())
"""


@pytest.mark.slow
def test_bytes_identical_across_blas_thread_counts():
    """The golden answer must not depend on OPENBLAS_NUM_THREADS (OPENBLAS_CORETYPE is
    left as the machine has it). The design makes the kernel irrelevant: see
    refimpl.matmul.exact's docstring."""
    outs = []
    for threads in ("1", "2", "4"):
        env = dict(os.environ, OPENBLAS_NUM_THREADS=threads, OMP_NUM_THREADS=threads,
                   MKL_NUM_THREADS=threads)
        res = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True,
                             text=True, timeout=120, check=True)
        outs.append(res.stdout)
    assert outs[0] and outs[0] == outs[1] == outs[2]
    got = np.frombuffer(bytes.fromhex(outs[0]), dtype=np.float32)
    assert got.size == 96 * 80 and json.dumps(len(outs)) == "3"


# ------------------------------------------------------------------ the screening step
def _rounds_same(s: float, bound: float, dtype) -> bool:
    lo = oracle_round(Fraction(s) - Fraction(bound), dtype)
    hi = oracle_round(Fraction(s) + Fraction(bound), dtype)
    mid = oracle_round(Fraction(s), dtype)
    # an interval reaching zero could hold an exact zero, whose sign is not RN's business
    if Fraction(s) - Fraction(bound) <= 0 <= Fraction(s) + Fraction(bound):
        return False
    arr = np.array([lo, mid, hi], dtype=dtype)
    return same_bits(arr[:1], arr[1:2]) and same_bits(arr[1:2], arr[2:])


near_edges = st.builds(
    lambda base, e, off, sgn: sgn * (base * 2.0**e + off * 2.0 ** (e - 30)),
    st.sampled_from([1.0, 1.0 + 2.0**-24, 1.0 + 2.0**-23, 2.0 - 2.0**-24, 1.5 + 2.0**-24,
                     1.0 + 3 * 2.0**-24, 1.75]),
    st.integers(-130, 127), st.integers(-64, 64), st.sampled_from([1.0, -1.0]))
bounds = st.builds(lambda m, e: m * 2.0**e, st.floats(0, 1), st.integers(-180, 130))


@pytest.mark.slow
@settings(max_examples=200)
@given(near_edges, bounds)
@example(1.0 + 2.0**-40, 2.0**-26)   # reaches below 1: the grid is finer there
@example(1.0 + 2.0**-40, 1.5 * 2.0**-25)  # ... and crosses the midpoint 1 - 2^-25
@example(1.0 + 2.0**-40, 2.0**-40)
@example(2.0**-140, 2.0**-139)        # reaches zero
def test_screen_certifies_only_safe_intervals(s, bound):
    """An output the screen lets through must round the same anywhere in s +- bound."""
    from refimpl.matmul.screening import _flag_fp32, _needs_recompute

    sa, ba = np.array([s]), np.array([bound])
    for flagged in (_flag_fp32(sa, ba)[0], _needs_recompute(sa, ba, FP32)[0] or bound == 0):
        if not flagged and bound > 0:
            assert _rounds_same(s, bound, np.float32), (s, bound)
    if bound > 0 and abs(s) < 65504 and not _needs_recompute(sa, ba, target("fp16"))[0]:
        assert _rounds_same(s, bound, np.float16), (s, bound)


@pytest.mark.slow
@settings(max_examples=40)
@given(matrices())
def test_plain_reference_agrees_with_fast_path_and_oracle(ab):
    """exact_dot_reference (the plain, definition-like version) against both."""
    from refimpl.matmul import exact_dot_reference

    a, b = ab
    with np.errstate(over="ignore"):
        plain = np.array([[exact_dot_reference(a[i], b[:, j]) for j in range(b.shape[1])]
                          for i in range(a.shape[0])]).astype(np.float32)
    assert same_bits(plain.reshape(a.shape[0], b.shape[1]), matmul(a, b))
    assert same_bits(plain.reshape(a.shape[0], b.shape[1]), oracle_matmul(a, b))


def oracle_round_bf16(x: Fraction) -> float:
    """RN-even to bfloat16 (binary32's exponent range, 8 significant bits)."""
    r = round_binary(x, *BFLOAT16)
    return -0.0 if x < 0 and r == 0 else float(r)


@settings(max_examples=25)
@given(matrices(elements=st.one_of(moderate, st.sampled_from([0.0, 1.0, 2.0**-8, 3e38]))))
def test_exact_bf16_output(ab):
    a, b = ab
    got = matmul(a, b, out_format="bf16")
    want = np.zeros(got.shape, np.float32)
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            total = sum((Fraction(float(x)) * Fraction(float(y)) for x, y in zip(a[i], b[:, j])),
                        Fraction(0))
            want[i, j] = oracle_round_bf16(total) if total != 0 else oracle_dot(a[i], b[:, j])
    assert same_bits(got, want)


def test_exact_long_k_crosses_limb_slices():
    """k above the limb-accumulation slice (2^14): carries between slices."""
    rng = np.random.default_rng(5)
    k = (1 << 14) + 777
    a = (rng.standard_normal(k) * 2.0 ** rng.integers(-60, 60, k)).astype(np.float32)[None, :]
    b = (rng.standard_normal(k) * 2.0 ** rng.integers(-60, 60, k)).astype(np.float32)[:, None]
    a[0, k // 2:] = -a[0, :k - k // 2][: k - k // 2] * 1  # long cancellation
    b[k // 2:, 0] = b[:k - k // 2, 0]
    slow, stats = exact_matmul64(a, b, recompute_all=True)
    assert stats.recomputed == 1
    assert same_bits(slow.astype(np.float32), np.array([[oracle_dot(a[0], b[:, 0])]], np.float32))
    assert same_bits(matmul(a, b), slow.astype(np.float32))


def _ordered_product(order: str, seed: int):
    """A stand-in BLAS: float64 sums of the exact products in another order."""
    rng = np.random.default_rng(seed)

    def product(a64, b64):
        k = a64.shape[-1]
        perm = rng.permutation(k) if order != "reverse" else np.arange(k)[::-1]
        terms = a64[..., :, perm][..., :, None, :] * np.swapaxes(b64[..., perm, :], -1, -2)[
            ..., None, :, :]
        if order == "pairwise":
            return np.sum(terms, axis=-1)
        if k == 0:
            return np.zeros(terms.shape[:-1])
        return np.cumsum(terms, axis=-1)[..., -1]  # strictly left to right

    return product


@pytest.mark.parametrize("order, seed", [("reverse", 0), ("random", 1), ("random", 2),
                                         ("pairwise", 3)])
def test_result_independent_of_the_float64_summation_order(monkeypatch, order, seed):
    """Any order a kernel might use gives the same bytes (the design, checked directly)."""
    import refimpl.matmul.screening as exact_module

    rng = np.random.default_rng(42)
    a = (rng.standard_normal((12, 40)) * 2.0 ** rng.integers(-30, 30, (12, 40))).astype(np.float32)
    b = (rng.standard_normal((40, 9)) * 2.0 ** rng.integers(-30, 30, (40, 9))).astype(np.float32)
    a[:, 20:] = -a[:, :20]  # cancellation makes the order matter for the float64 sums
    a[:3, 25] *= np.float32(1 + 2.0**-20)
    a[4] = 0.0
    a[5:, 0], a[5:, 1], b[0], b[1] = 2.0**40, -(2.0**40), 1.0, 1.0  # absorbs the rest
    a[5:, 2:] = rng.standard_normal((7, 38)).astype(np.float32)
    b[2:, 4:] = rng.standard_normal((38, 5)).astype(np.float32)
    base = matmul(a, b)
    naive = [_ordered_product(o, s)(a.astype(float), b.astype(float)).astype(np.float32)
             for o, s in (("reverse", 0), ("random", 1))]
    assert naive[0].tobytes() != naive[1].tobytes()  # the order does matter for RN(s^)
    monkeypatch.setattr(exact_module, "_float64_product", _ordered_product(order, seed))
    assert matmul(a, b).tobytes() == base.tobytes()
    assert same_bits(base, oracle_matmul(a, b))
