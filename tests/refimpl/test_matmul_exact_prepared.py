"""refimpl.matmul.exact.exact_product_fp32: the lean FP32 entry for prepared operands.

Oracle: the exact sum of the products as a ``fractions.Fraction``, rounded to float32 by
picking, among the float32 neighbours of float(x), the one nearest in exact arithmetic
(ties to the even code); the sign of an exact zero by the IEEE rule (-0 only when every
product is -0). Independent of the code under test.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oracles import SHARP_FP32_PRODUCTS, round_rational, same_bits, with_examples
from refimpl.matmul.screening import (
    ExactStats, exact_col_norms, exact_product_fp32, exact_row_bounds, flagged, resolve_flagged,
)


def oracle_product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    out = np.empty((a.shape[0], b.shape[1]), dtype=np.float32)
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            pairs = list(zip(a[i].tolist(), b[:, j].tolist()))
            total = sum((Fraction(x) * Fraction(y) for x, y in pairs), Fraction(0))
            if total == 0:
                neg = pairs and all(np.signbit(x) != np.signbit(y) for x, y in pairs)
                out[i, j] = -0.0 if neg else 0.0
            else:
                out[i, j] = round_rational(total, np.float32)
    return out


def lean(a: np.ndarray, b: np.ndarray, stats: ExactStats | None = None) -> np.ndarray:
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    with np.errstate(over="ignore"):
        return exact_product_fp32(a64, b64, exact_row_bounds(a64), exact_col_norms(b64),
                                  stats)


finite32 = st.floats(width=32, allow_nan=False, allow_infinity=False)
moderate = st.builds(lambda m, e: float(np.float32(m * 2.0**e)),
                     st.floats(-2, 2, width=32), st.integers(-30, 30))
sharp = st.sampled_from([0.0, -0.0, 1.0, -1.0, 2.0**-24, 2.0**-25, 2.0**-149, 2.0**-126,
                         3.4028235e38, -3.4028235e38, 2.0**103, 1.5, 1.0 + 2.0**-23])
element = st.one_of(finite32, moderate, sharp)


@st.composite
def matrices(draw, max_dim=4, max_k=9):
    m, k, n = (draw(st.integers(lo, hi)) for lo, hi in ((1, max_dim), (0, max_k),
                                                        (1, max_dim)))
    a = np.array(draw(st.lists(element, min_size=m * k, max_size=m * k)), np.float32)
    b = np.array(draw(st.lists(element, min_size=k * n, max_size=k * n)), np.float32)
    return a.reshape(m, k), b.reshape(k, n)


@pytest.mark.slow
@settings(max_examples=60)
@given(matrices())
@with_examples(SHARP_FP32_PRODUCTS)
def test_prepared_product_equals_fraction(ab):
    a, b = ab
    assert same_bits(lean(a, b), oracle_product(a, b))


@pytest.mark.parametrize("seed", range(4))
def test_near_ties_and_cancellation(seed):
    """Rows whose exact sums sit on or next to float32 midpoints, or cancel to zero or to
    a tiny residue: the outputs the screen must not certify."""
    rng = np.random.default_rng(seed)
    k = 16
    x = rng.standard_normal((6, k // 2)).astype(np.float32)
    a = np.concatenate([x, -x], axis=1)
    a[0, 0] = 1.0
    a[1, :2] = (1.0, 2.0**-24)          # a tie: 1 + 2^-24
    a[2, :3] = (1.0, 2.0**-24, 2.0**-70)  # just above the tie
    a[3, :3] = (1.0, 2.0**-24, -2.0**-70)  # just below
    b = np.ones((k, 5), np.float32)
    b[:, 1] = rng.permutation(np.where(np.arange(k) < k // 2, 1.0, 1.0))
    b[:, 2] = 2.0**-60
    b[:, 3] = -1.0
    b[:, 4] = rng.standard_normal(k).astype(np.float32)
    assert same_bits(lean(a, b), oracle_product(a, b))


def test_batched_and_transposed_views_match_oracle():
    """Leading dimensions and a transposed (non-contiguous) right operand, as the
    attention schedules pass them; norms computed once on a larger tensor and sliced."""
    rng = np.random.default_rng(7)
    q = rng.standard_normal((2, 3, 9, 8)).astype(np.float32)
    k = (rng.standard_normal((2, 3, 20, 8)) * 2.0 ** rng.integers(-5, 5, (2, 3, 20, 8))
         ).astype(np.float32)
    q64, k64 = q.astype(np.float64), k.astype(np.float64)
    rq = exact_row_bounds(q64)
    ck = exact_col_norms(np.swapaxes(k64, -1, -2))
    got = exact_product_fp32(q64[:, :, 2:7], np.swapaxes(k64[:, :, 5:17], -1, -2),
                             rq[:, :, 2:7], ck[:, :, 5:17])
    for bi in range(2):
        for h in range(3):
            want = oracle_product(q[bi, h, 2:7], k[bi, h, 5:17].T)
            assert same_bits(got[bi, h], want)


def test_integer_like_data_takes_the_exact_blas_certificate():
    """A large Hadamard product: every output is an exact integer sum; the bulk
    certificate resolves them without the split sum (stats.refined == 0)."""
    h = np.array([[1.0]])
    for _ in range(9):
        h = np.block([[h, h], [h, -h]])
    a, b = h.astype(np.float32), (0.5 * h.T).astype(np.float32)
    st_ = ExactStats()
    got = lean(a, b, st_)
    assert same_bits(got, (0.5 * h @ h.T).astype(np.float32))  # small integers: exact
    assert st_.outputs == 512 * 512 and st_.refined == 0


@pytest.mark.parametrize("order", ["reverse", "pairwise"])
def test_bytes_do_not_depend_on_the_float64_summation_order(monkeypatch, order):
    import refimpl.matmul.screening as exact_module

    rng = np.random.default_rng(3)
    a = (rng.standard_normal((10, 30)) * 2.0 ** rng.integers(-20, 20, (10, 30))
         ).astype(np.float32)
    b = rng.standard_normal((30, 7)).astype(np.float32)
    a[:, 15:] = -a[:, :15]
    a[:4, 20] *= np.float32(1 + 2.0**-20)
    base = lean(a, b)

    def product(a64, b64):
        terms = a64[..., :, None, :] * np.swapaxes(b64, -1, -2)[..., None, :, :]
        if order == "pairwise":
            return np.sum(terms, axis=-1)
        return np.cumsum(terms[..., ::-1], axis=-1)[..., -1]

    monkeypatch.setattr(exact_module, "_float64_product", product)
    assert lean(a, b).tobytes() == base.tobytes()
    assert same_bits(base, oracle_product(a, b))


@settings(max_examples=60)
@given(st.lists(st.lists(element, min_size=0, max_size=12), min_size=1, max_size=4),
       st.sampled_from([1.0, -1.0, 2.0**-24, 1.0 + 2.0**-23]))
def test_fold_certificate_only_certifies_the_correct_rounding(rows, scale):
    """The second-level certificate (fold sum, log2 k error bound): every value it
    certifies is the Fraction oracle's rounding; near-ties and zeros are left out."""
    from refimpl.matmul.screening import _fold_certified

    k = max(len(r) for r in rows)
    a = np.zeros((len(rows), k), np.float32)
    for i, r in enumerate(rows):
        a[i, :len(r)] = r
    b = np.full((1, k), scale, np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        p = a.astype(np.float64) * b.astype(np.float64)
        ok, vals = _fold_certified(p)
    for i in range(len(rows)):
        if ok[i]:
            want = oracle_product(a[i:i + 1], b.T)[0, 0]
            assert np.float32(vals[i]).tobytes() == np.float32(want).tobytes()
            assert vals[i] != 0


def test_fold_certificate_leaves_ties_to_the_refinement():
    p = np.array([[1.0, 2.0**-24, 0.0], [1.0, 2.0**-24, 2.0**-40], [1.0, -1.0, 0.0],
                  [1.0, 2.0**-24, 2.0**-70]])
    ok, vals = _fold(p)
    assert not ok[0] and not ok[2] and not ok[3]  # a tie, a zero, within the bound of a tie
    assert ok[1] and vals[1] == np.float32(1.0 + 2.0**-23)


def _fold(p):
    from refimpl.matmul.screening import _fold_certified

    return _fold_certified(p)


@settings(max_examples=150)
@given(st.integers(0, 3), st.integers(0, 200), st.floats(0.0, 1.0), st.integers(0, 2**32 - 1))
def test_flagged_is_flatnonzero(rows, cols, density, seed):
    """Any length (multiples of 8 take the word scan, others the plain one), few or many
    set, C-contiguous or a transposed view, a non-bool array: the indices of
    numpy.flatnonzero, in its order."""
    rng = np.random.default_rng(seed)
    flag = rng.random((rows, cols)) < density * density * density
    for f in (flag, flag.T, flag[:, ::2], flag.astype(np.int8)):
        got = flagged(f)
        want = np.flatnonzero(f)
        assert got.dtype.kind == "i" and np.array_equal(got, want)


def test_flagged_word_scan_by_hand():
    """Set bytes in the first and last byte of a word, in adjacent words and in the
    last word: each index found once, in order."""
    flag = np.zeros(8 * 1000, dtype=bool)
    idx = [0, 7, 8, 15, 16, 4001, 7999]
    flag[idx] = True
    assert flagged(flag).tolist() == idx
    assert flagged(flag.reshape(10, 800)).tolist() == idx
    assert flagged(np.zeros(64, dtype=bool)).size == 0


def test_resolve_flagged_at_an_offset_block():
    """The flagged outputs of a block that starts at row 3 and column 2 of the product
    get the exact rational answer; the others are left as they were."""
    rng = np.random.default_rng(7)
    a = rng.standard_normal((1, 7, 9)).astype(np.float32).astype(np.float64)
    b = rng.standard_normal((1, 9, 6)).astype(np.float32).astype(np.float64)
    s3 = np.matmul(a, b)
    want = oracle_product(a[0], b[0])[3:, 2:]
    y = np.full((1, 4, 4), 7.0, dtype=np.float32)
    flag = np.zeros(y.shape, dtype=bool)
    flag[0, [0, 1, 3], [2, 0, 3]] = True
    resolve_flagged(flag, y, a, b, s3, row0=3, col0=2)
    assert np.array_equal(y[flag], want[flag[0]])
    assert (y[~flag] == 7.0).all()
    resolve_flagged(np.zeros(y.shape, dtype=bool), y, a, b, s3, 3, 2)  # none: nothing
    assert np.array_equal(y[flag], want[flag[0]]) and (y[~flag] == 7.0).all()
