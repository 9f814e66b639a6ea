"""Random-sign Hadamard transform: orthogonality of the stored matrix, the transform
against exact Fraction sums, and the inverse."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oracles import round_rational
from refimpl.scaling import (
    TE_WGRAD_SIGNS,
    hadamard_matrix,
    hadamard_transform,
    random_signs,
    sylvester_hadamard,
)


def recursive_hadamard(n):
    h = np.array([[1]], dtype=np.int64)
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return h


@pytest.mark.parametrize("n", [1, 2, 4, 16, 64])
def test_sylvester_matches_recursive_construction(n):
    h = sylvester_hadamard(n).astype(np.int64)
    assert np.array_equal(h, recursive_hadamard(n))
    assert np.array_equal(h @ h.T, n * np.eye(n, dtype=np.int64))


def test_stored_rht_matrix_is_exactly_orthogonal():
    m = hadamard_matrix(16)
    assert set(np.abs(m).ravel().tolist()) == {0.25}
    assert np.array_equal(m @ m.T, np.eye(16))  # entries +-1/4: every sum is exact
    d = np.diag(np.array(TE_WGRAD_SIGNS, dtype=np.float64))
    assert np.array_equal(m * 4, d @ recursive_hadamard(16))
    m64 = hadamard_matrix(64, signs=random_signs(64, 1))
    assert np.array_equal(m64 @ m64.T, np.eye(64))  # 1/8: still exact


WIDE = st.one_of(st.floats(-1e6, 1e6, width=32),
                 st.floats(width=32, allow_nan=False, allow_infinity=False))


@pytest.mark.slow
@settings(max_examples=30)
@given(rows=st.lists(st.lists(WIDE, min_size=32, max_size=32), min_size=1, max_size=3),
       inverse=st.booleans())
def test_transform_is_correctly_rounded_exact_product(rows, inverse):
    x = np.array(rows, dtype=np.float32)
    y = hadamard_transform(x, inverse=inverse)
    mat = hadamard_matrix(16)
    m = [[Fraction(float(v)) for v in row] for row in (mat.T if inverse else mat)]
    for r in range(x.shape[0]):
        for g in range(2):
            xs = [Fraction(float(v)) for v in x[r, 16 * g:16 * (g + 1)]]
            for j in range(16):
                exact = sum(xs[i] * m[i][j] for i in range(16))
                assert y[r, 16 * g + j] == round_rational(exact), (r, g, j)


def test_pinned_wide_group_is_correctly_rounded():
    # 999999.4375 and 2**-52 in one group: the float64 butterfly alone would round twice
    x = np.zeros(16, np.float32)
    x[13], x[14], x[15] = 48577.0, 999999.4375, np.float32(2.0 ** -52)
    y = hadamard_transform(x)
    m = hadamard_matrix(16)
    for j in range(16):
        exact = sum(Fraction(float(x[i])) * Fraction(float(m[i, j])) for i in range(16))
        assert y[j] == round_rational(exact)


@settings(max_examples=30)
@given(rows=st.lists(st.lists(st.floats(-1e6, 1e6, width=32), min_size=16, max_size=16),
                     min_size=1, max_size=4))
def test_inverse_recovers_input(rows):
    x = np.array(rows, dtype=np.float32)
    back = hadamard_transform(hadamard_transform(x), inverse=True)
    # two float32 roundings of length-16 orthogonal transforms: a few ulps of the group max
    tol = np.abs(x).max(axis=1, keepdims=True) * 2.0 ** -21
    assert (np.abs(back.astype(np.float64) - x) <= tol).all()
    x64 = x.astype(np.float64)
    back64 = hadamard_transform(hadamard_transform(x64), inverse=True)
    assert (np.abs(back64 - x64) <= np.abs(x64).max(axis=1, keepdims=True) * 2.0 ** -48).all()


def test_inverse_uses_transpose_and_axis():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 3))
    m = hadamard_matrix(16)
    y = hadamard_transform(x, axis=0)
    assert np.allclose(y, m.T @ x, rtol=0, atol=1e-14)
    assert np.allclose(hadamard_transform(x, axis=0, inverse=True), m @ x, rtol=0, atol=1e-14)


def test_random_signs_reproducible():
    # SplitMix64 from state 0: 0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F
    assert random_signs(3, 0).tolist() == [-1, 1, 1]
    assert np.array_equal(random_signs(100, 7), random_signs(100, 7))
    assert not np.array_equal(random_signs(100, 7), random_signs(100, 8))
    assert set(random_signs(100, 7).tolist()) == {-1, 1}


def test_bad_inputs():
    with pytest.raises(ValueError, match="power of two"):
        hadamard_transform(np.ones(12), size=12)
    with pytest.raises(ValueError, match="multiple"):
        hadamard_transform(np.ones(20))
    with pytest.raises(ValueError, match="signs"):
        hadamard_transform(np.ones(16), signs=[1] * 15)
    with pytest.raises(ValueError, match="floating"):
        hadamard_transform(np.ones(16, dtype=np.int32))


def to_f16(F: Fraction) -> np.float16:
    """Nearest float16 to F, ties to the even code (checked among the float16 neighbours
    of a first guess; independent of the code under test)."""
    guess = np.float16(float(F))
    cands = [np.nextafter(guess, np.float16(-np.inf)), guess,
             np.nextafter(guess, np.float16(np.inf))]
    cands = [c for c in cands if np.isfinite(c)]
    return min(cands, key=lambda c: (abs(Fraction(float(c)) - F), int(c.view(np.uint16)) & 1))


@pytest.mark.parametrize("inverse", [False, True])
def test_float16_wide_groups_are_correctly_rounded(inverse):
    # nonzero magnitudes spanning more than 2**25 inside a group take the exact integer
    # path, which must work for float16 input too (it once failed with a KeyError)
    rng = np.random.default_rng(16)
    rows = rng.choice([-1, 1], (6, 16)) * 2.0 ** rng.integers(-24, 5, (6, 16))
    rows = (rows * rng.integers(1, 2048, (6, 16))).astype(np.float16)
    rows[:, 0] = np.float16(60000)
    rows[:, 1] = np.float16(2.0 ** -24)
    rows = rows.astype(np.float16)
    got = hadamard_transform(rows, inverse=inverse)
    assert got.dtype == np.float16
    h = recursive_hadamard(16)
    d = np.array(TE_WGRAD_SIGNS)
    for r in range(rows.shape[0]):
        xs = [Fraction(float(v)) for v in rows[r]]
        for j in range(16):
            if inverse:
                exact = sum(xs[i] * int(h[i, j]) for i in range(16)) * int(d[j]) / 4
            else:
                exact = sum(xs[i] * int(d[i]) * int(h[i, j]) for i in range(16)) / 4
            assert got[r, j] == to_f16(exact), (r, j)


@pytest.mark.parametrize("dtype", [">f4", ">f8"])
def test_byte_swapped_wide_group_matches_exact_sums(dtype):
    # a group spanning more than 2**25 takes the integer path for float32; byte-swapped
    # input once failed there with a KeyError (and float64 would have taken it wrongly)
    x = np.zeros(16, dtype)
    x[:3] = [4.0, 2.0 ** -30, 0.1]
    got = hadamard_transform(x)
    xs = [Fraction(float(v)) for v in x]
    h = recursive_hadamard(16)
    d = TE_WGRAD_SIGNS
    for j in range(16):
        exact = sum(xs[i] * d[i] * int(h[i, j]) for i in range(16)) / 4
        if dtype == ">f4":
            assert got[j] == round_rational(exact)
        else:  # float64: the butterfly in float64; here every sum is within 2**-52 of exact
            assert abs(Fraction(float(got[j])) - exact) <= abs(exact) * Fraction(1, 2 ** 52)


def test_option_values_are_checked():
    x = np.ones(16, np.float32)
    with pytest.raises(ValueError, match="signs"):
        hadamard_transform(x, signs="random")  # once silently meant the default signs
    with pytest.raises(TypeError, match="inverse"):
        hadamard_transform(x, inverse="no")
    with pytest.raises(TypeError, match="size"):
        hadamard_transform(x, size=True)
    with pytest.raises(ValueError, match="floating-point"):
        hadamard_transform(np.ones(16, np.longdouble))
