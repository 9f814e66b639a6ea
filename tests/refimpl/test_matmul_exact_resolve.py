"""``_fsum_fp32`` (the math.fsum certificate) and ``resolve_fp32`` (the resolution of
flagged outputs) against exact rational arithmetic: the dot product summed as
``fractions.Fraction`` and rounded to binary32 by the IEEE definition in ``tests/oracles.py``
(round to nearest, ties to even, quantum 2^-149 below the normal range); the sign of an
exact zero by the IEEE rule (-0 only when every product is -0)."""
from __future__ import annotations

import importlib
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from oracles import floor_log2, round_rational
from refimpl.matmul.screening import (_fsum_fp32, exact_col_norms, exact_product_fp32,
                                  exact_row_bounds, resolve_fp32, screen_fp32,
                                  screen_width)

exact_mod = importlib.import_module("refimpl.matmul.screening")

TWO = Fraction(2)


def quantum32(v: Fraction) -> Fraction:
    """The spacing of binary32 numbers at |v| (v != 0): 2^(e - 23), e = max(floor(log2
    |v|), -126)."""
    return TWO ** (max(floor_log2(abs(v)), -126) - 23)


def rn32_ref(v: Fraction) -> float:
    """RN32 (ties to even) of a rational; +-inf from 2^128 - 2^103 on."""
    return float(round_rational(v, np.float32))


def is_midpoint32(v: Fraction) -> bool:
    """v lies exactly halfway between two neighbouring binary32 numbers."""
    if v == 0:
        return False
    s = abs(v) / (quantum32(v) / 2)
    return s.denominator == 1 and s.numerator % 2 == 1


def dot_ref(a: np.ndarray, b: np.ndarray) -> float:
    """RN32 of the exact dot product of two float32 vectors (finite)."""
    if a.size and all(x * y == 0 and math.copysign(1, x) * math.copysign(1, y) < 0
                      for x, y in zip(a.tolist(), b.tolist())):
        return -0.0
    return rn32_ref(sum((Fraction(x) * Fraction(y) for x, y in zip(a.tolist(), b.tolist())),
                        Fraction(0)))


def bits(x) -> int:
    return int(np.float32(x).view(np.uint32))


# ------------------------------------------------------------------ the reference itself
def test_reference_by_hand():
    assert rn32_ref(1 + TWO**-24) == 1.0  # tie: to the even 1.0
    assert rn32_ref(1 + 3 * TWO**-24) == 1 + 2.0**-22  # tie: to the even neighbour
    assert rn32_ref(-(1 + TWO**-24 + TWO**-80)) == -(1 + 2.0**-23)
    assert rn32_ref(TWO**-150) == 0.0 and rn32_ref(TWO**-150 + TWO**-200) == 2.0**-149
    assert is_midpoint32(1 + TWO**-24) and is_midpoint32(-(TWO**-150))
    assert is_midpoint32(TWO**24 + 1) and not is_midpoint32(TWO**24 + 2)
    assert not is_midpoint32(Fraction(1)) and not is_midpoint32(1 + TWO**-24 + TWO**-80)


# ------------------------------------------------------------------ _fsum_fp32
MIDPOINT_SUMS = [
    # the exact sum is a binary32 midpoint plus a term double rounding loses: fsum's
    # binary64 value is the midpoint itself
    [1.0, 2.0**-24, 2.0**-80],
    [2.0**-80, 1.0, 2.0**-24],
    [1.0, 2.0**-24, -2.0**-80],  # just below the midpoint
    [-1.0, -(2.0**-24), -(2.0**-80)],
    [2.0**30, 2.0**6, 2.0**-30, -(2.0**-31)],  # 2^30 + 2^6 is the midpoint (ulp 2^7)
    [1.5, 2.0**-24, 2.0**-70, 2.0**-75],
    [2.0**-150, 2.0**-300],  # the midpoint of 0 and 2^-149
    [-(2.0**-150), 2.0**-400],
    [3.0 * 2.0**-150, -(2.0**-300)],  # midpoint of 2^-149 and 2^-148
    [1.0, 2.0**-24],  # the midpoint exactly (also left to the exact resolution)
    [16777216.0, 1.0],  # 2^24 + 1
    [1e30, -1e30, 1.0, 2.0**-24, 2.0**-90],  # cancellation first
]


@pytest.mark.parametrize("p", MIDPOINT_SUMS)
def test_fsum_fp32_leaves_binary64_midpoints_uncertified(p):
    exact = sum(map(Fraction, p), Fraction(0))
    # the premise, from the exact sum: its binary64 rounding is a binary32 midpoint
    # (float(Fraction) rounds correctly)
    assert is_midpoint32(Fraction(float(exact)))
    ok, _ = _fsum_fp32(np.array(p))
    assert ok is False or ok == np.False_


def test_fsum_fp32_midpoint_is_where_double_rounding_errs():
    """The first case really is one where rounding twice gives the wrong binary32."""
    p = [1.0, 2.0**-24, 2.0**-80]
    exact = sum(map(Fraction, p), Fraction(0))
    assert rn32_ref(exact) == 1 + 2.0**-23
    assert np.float32(math.fsum(p)) == 1.0  # what the binary64 value rounds to


@pytest.mark.parametrize("p", [[0.0], [1.0, -1.0], [-0.0, -0.0], [2.0**127],
                               [2.0**127, 2.0**126], [-(2.0**128)], []])
def test_fsum_fp32_zero_and_overflow_uncertified(p):
    ok, _ = _fsum_fp32(np.array(p, dtype=np.float64))
    assert not ok


ORDINARY_SUMS = [
    [1.0, 2.0**-24, 2.0**-52],  # binary64 holds the sum exactly: above the midpoint
    [1.0, 2.0**-24, -(2.0**-52)],
    [3.0, 2.0**-30],
    [0.1, 0.2, 0.3],
    [-2.5, 1e-10, 7.0],
    [2.0**-149],
    [2.0**-150, 2.0**-160],  # above the midpoint of 0 and 2^-149 in binary64 too
    [2.0**127 - 2.0**100],
    [1e20, 1.0, -1e20, 2.0**-20],
]


@pytest.mark.parametrize("p", ORDINARY_SUMS)
def test_fsum_fp32_ordinary_sums_certified(p):
    exact = sum(map(Fraction, p), Fraction(0))
    ok, v = _fsum_fp32(np.array(p))
    assert ok
    assert isinstance(v, np.float32)
    assert bits(v) == bits(rn32_ref(exact))


# products of float32 values (exact in float64), of widely spread magnitudes
f32 = st.floats(-(2.0**50), 2.0**50, width=32, allow_subnormal=True)


@pytest.mark.slow
@settings(max_examples=150)
@given(st.lists(st.tuples(f32, f32), min_size=1, max_size=12), st.integers(-40, 40))
@example([(1.0, 1.0), (2.0**-12, 2.0**-12), (2.0**-40, 2.0**-40)], 0)
@example([(2.0**12, 2.0**12), (1.0, 1.0)], 0)
def test_fsum_fp32_drawn_products(pairs, e):
    scale = 2.0**e
    p = np.array([np.float64(np.float32(a * scale)) * np.float64(np.float32(b))
                  for a, b in pairs])
    exact = sum((Fraction(x) for x in p.tolist()), Fraction(0))
    assert exact == sum((Fraction(float(np.float32(a * scale))) * Fraction(float(np.float32(b)))
                         for a, b in pairs), Fraction(0))  # the products are exact
    ok, v = _fsum_fp32(p)
    v64 = float(exact) if abs(exact) < TWO**1024 else math.inf
    if ok:
        assert bits(v) == bits(rn32_ref(exact))
    # everything that is not a zero, an overflow candidate or a midpoint is certified
    if exact != 0 and abs(v64) < 2.0**127 and not is_midpoint32(Fraction(v64)):
        assert ok


# ------------------------------------------------------------------ resolve_fp32
def _near_tie_operands(rng):
    """(a3, b3) float64 holding float32 values: row i of a and column j of b give
    products whose exact sum is a binary32 midpoint plus or minus a tiny term, an exact
    tie, an exact zero of either sign, or ordinary values."""
    k = 9
    m, n = 8, 7
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    # row 0 / col 0: 1 + 2^-24 + 2^-80 (RN32 = 1 + 2^-23); col 1: - 2^-80 (RN32 = 1)
    a[0] = 0
    a[0, :3] = (1.0, 2.0**-24, 2.0**-40)
    b[:, 0] = 0
    b[:3, 0] = (1.0, 1.0, 2.0**-40)
    b[:, 1] = 0
    b[:3, 1] = (1.0, 1.0, -(2.0**-40))
    # row 1: scaled midpoint with cancellation: 3*2^20 - 3*2^20 + 2^30 + 2^6 + 2^-30
    a[1] = 0
    a[1, :5] = (3 * 2.0**10, -3 * 2.0**10, 2.0**15, 2.0**3, 2.0**-15)
    b[:5, 2] = (2.0**10, 2.0**10, 2.0**15, 2.0**3, 2.0**-15)
    b[5:, 2] = 0
    # row 2: exact ties 2^24 + 1 (to 2^24) and 2^24 + 3 (to 2^24 + 4)
    a[2] = 0
    a[2, :2] = (2.0**12, 1.0)
    b[:2, 3] = (2.0**12, 1.0)
    b[2:, 3] = 0
    b[:2, 4] = (2.0**12, 3.0)
    b[2:, 4] = 0
    # row 3: exact zeros: x - x (+0) and all products -0 (-0) against col 5
    a[3] = 0
    a[3, :2] = (1.5, -1.5)
    b[:, 5] = 0
    b[:2, 5] = (2.0, 2.0)
    a[4] = -0.0
    # row 5 / col 6: at the bottom of the subnormals: 2^-150 (the midpoint of 0 and
    # 2^-149) + 2^-160, so RN32 = 2^-149, while binary64 keeps the sum exactly
    a[5] = 0
    a[5, :3] = (2.0**-75, 0.0, 2.0**-100)
    b[:, 6] = 0
    b[:3, 6] = (2.0**-75, 0.0, 2.0**-60)
    return a.astype(np.float64)[None], b.astype(np.float64)[None]


@pytest.mark.parametrize("path", ["few", "chunks", "bulk"])
def test_resolve_fp32_matches_fraction(monkeypatch, path):
    rng = np.random.default_rng(31)
    a3, b3 = _near_tie_operands(rng)
    if path in ("chunks", "bulk"):
        monkeypatch.setattr(exact_mod, "_FEW_ELEMS", 0)
    if path == "bulk":
        monkeypatch.setattr(exact_mod, "_BULK_ELEMS", 0)
    s3 = np.matmul(a3, b3)
    m, n = s3.shape[1:]
    # every output, in a scrambled order with a repeat
    ii, jj = np.divmod(rng.permutation(m * n), n)
    ii, jj = np.append(ii, ii[0]), np.append(jj, jj[0])
    bt = np.zeros_like(ii)
    got = resolve_fp32(a3, b3, s3.copy(), bt, ii, jj)
    assert got.dtype == np.float32 and got.shape == ii.shape
    a32, b32 = a3[0].astype(np.float32), b3[0].astype(np.float32)
    want = np.array([dot_ref(a32[i], b32[:, j]) for i, j in zip(ii, jj)], np.float32)
    assert got.view(np.uint32).tolist() == want.view(np.uint32).tolist()
    # the hand-known values among them
    at = {(int(i), int(j)): g for i, j, g in zip(ii, jj, got)}
    assert at[0, 0] == np.float32(1 + 2.0**-23) and at[0, 1] == np.float32(1.0)
    assert at[1, 2] == np.float32(2.0**30 + 2.0**7)  # the midpoint plus 2^-30: up
    assert at[2, 3] == np.float32(2.0**24) and at[2, 4] == np.float32(2.0**24 + 4)
    assert bits(at[3, 5]) == bits(0.0) and bits(at[4, 5]) == bits(-0.0)
    assert at[5, 6] == np.float32(2.0**-149)  # 2^-150 + 2^-160: above the midpoint


def test_resolve_fp32_on_screen_flags_batched():
    """Outputs flagged by the screen of a batched product (the near-tie rows above in
    each batch entry, scaled by different powers of two), resolved and compared."""
    rng = np.random.default_rng(32)
    parts = [_near_tie_operands(rng) for _ in range(3)]
    a3 = np.concatenate([p[0] * 2.0**e for p, e in zip(parts, (0, -20, 10))])
    b3 = np.concatenate([p[1] for p in parts])
    s3 = np.matmul(a3, b3)
    w, tiny = screen_width(exact_row_bounds(a3), exact_col_norms(b3))
    y = np.empty(s3.shape, np.float32)
    hi = np.empty(s3.shape, np.float32)
    flag = screen_fp32(s3, w, y, hi, tiny)
    bt, ii, jj = np.nonzero(flag)
    assert (0, 0, 0) in set(zip(bt.tolist(), ii.tolist(), jj.tolist()))  # the near tie
    assert bt.size >= 6
    got = resolve_fp32(a3, b3, s3.copy(), bt, ii, jj)
    a32, b32 = a3.astype(np.float32), b3.astype(np.float32)
    want = [dot_ref(a32[t, i], b32[t, :, j]) for t, i, j in zip(bt, ii, jj)]
    assert got.view(np.uint32).tolist() == [bits(x) for x in want]
    # the whole product through the public prepared entry agrees as well
    full = exact_product_fp32(a3, b3, exact_row_bounds(a3), exact_col_norms(b3))
    want_all = np.array([[[dot_ref(a32[t, i], b32[t, :, j]) for j in range(b3.shape[2])]
                          for i in range(a3.shape[1])] for t in range(a3.shape[0])],
                        np.float32)
    assert full.view(np.uint32).tolist() == want_all.view(np.uint32).tolist()


@settings(max_examples=40)
@given(st.integers(0, 2**32 - 1), st.integers(1, 40), st.sampled_from(["few", "chunks", "bulk"]))
def test_resolve_fp32_drawn_integer_like(seed, k, path):
    """Integer-like data (many exact ties and zeros) resolved on every output."""
    rng = np.random.default_rng(seed)
    a = (rng.integers(-4, 5, (2, 3, k)) * 2.0 ** rng.integers(-3, 12, (2, 3, 1)))
    b = (rng.integers(-4, 5, (2, k, 4)) * 2.0 ** rng.integers(-3, 12, (2, 1, 4)))
    a[0, 0] = -0.0
    a = a.astype(np.float32).astype(np.float64)
    b = b.astype(np.float32).astype(np.float64)
    mp = pytest.MonkeyPatch()
    try:
        if path in ("chunks", "bulk"):
            mp.setattr(exact_mod, "_FEW_ELEMS", 0)
        if path == "bulk":
            mp.setattr(exact_mod, "_BULK_ELEMS", 0)
        s3 = np.matmul(a, b)
        bt, ii, jj = (x.reshape(-1) for x in np.indices(s3.shape))
        got = resolve_fp32(a, b, s3.copy(), bt, ii, jj)
    finally:
        mp.undo()
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    want = [dot_ref(a32[t, i], b32[t, :, j]) for t, i, j in zip(bt, ii, jj)]
    assert got.view(np.uint32).tolist() == [bits(x) for x in want]
