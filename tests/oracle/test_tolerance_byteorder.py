"""Every tolerance kind compares values, not byte orders: a big-endian result with the
right values passes wherever the little-endian one does, and a wrong value fails the
same way in either order (the expected side may be big-endian too).

Expected verdicts are written by hand: float32 neighbours are one ulp apart (0x3FC00000
is 1.5, 0x3FC00001 the next float32), binary16 codes 0x7E00 and 0x7C01 are both NaN,
intervals and absolute errors are small decimal sums checked on paper."""
from __future__ import annotations

import numpy as np
import pytest

from oracle import tolerance as T

ORDERS = ["<", ">"]

F32_BITS = np.array([0x3FC00000, 0x80000000, 0x7FC00001, 0x7F800000], np.uint32)
F32 = F32_BITS.view(np.float32)                  # 1.5, -0.0, a NaN payload, +inf


def _in(a: np.ndarray, order: str) -> np.ndarray:
    """The same values stored in byte order ``order``."""
    return a.astype(a.dtype.newbyteorder(order))


def _bits_changed(a: np.ndarray, index: int, delta: int) -> np.ndarray:
    bits = a.view(f"u{a.dtype.itemsize}").copy()
    bits[index] += delta
    return bits.view(a.dtype)


#: kind -> (tolerance, expected, right answer, wrong answer, fmt, failures of the wrong)
def _cases():
    codes = np.array([0x3C00, 0x7E00, 0x8000], np.uint16)          # fp16 1.0, NaN, -0
    nan_other = np.array([0x3C00, 0x7C01, 0x8000], np.uint16)      # another NaN code
    elems = np.array([[1, 2, 3, 4], [5, 6, 7, 8]], np.uint16)
    scales = np.array([[1.0, np.nan], [2.0, 4.0]], np.float32)     # block 2: NaN scale
    inside = elems.copy()
    inside[0, 3] = 0x7777                     # under the NaN scale: don't care
    outside = elems.copy()
    outside[1, 0] = 0x0006                    # under a finite scale: a mismatch
    x = np.array([1.0, 2.0, 0.5], np.float32)
    lo = np.array([0.75, 1.5, 0.25])
    hi = np.array([1.25, 2.5, 0.75])
    naive = np.array([1.25, 2.0, 0.5], np.float32)   # naive max error 0.25
    return {
        "exact": (T.exact(), F32, F32.copy(), _bits_changed(F32, 0, 1), None, 1),
        "exact codes": (T.exact(), codes, codes.copy(), nan_other, "fp16", 1),
        "exact_nan_class": (T.exact_nan_class(), codes, nan_other,
                            np.array([0x3C00, 0x7C01, 0x0000], np.uint16), "fp16", 1),
        "exact_unless_nan_scale": (T.exact_unless_nan_scale(scales, block_size=2),
                                   elems, inside, outside, None, 1),
        "ulp": (T.ulp(1, "fp32"), F32, _bits_changed(F32, 0, 1),
                _bits_changed(F32, 0, 2), None, 1),
        "interval": (T.interval(lo, hi), x, np.float32([1.25, 1.5, 0.3]),
                     np.float32([1.3, 2.0, 0.2]), None, 2),
        "allclose": (T.allclose(0.0, 0.125, order="sequential"), x,
                     np.float32([1.125, 1.875, 0.5]), np.float32([1.25, 2.0, 0.5]), None, 1),
        "relative_to_naive": (T.relative_to_naive(2.0, naive), x,
                              np.float32([1.5, 2.0, 0.5]), np.float32([1.5, 2.75, 0.5]),
                              None, 1),
    }


CASES = _cases()


def test_every_kind_is_covered() -> None:
    assert {k.split()[0] for k in CASES} == set(T.KINDS)


@pytest.mark.parametrize("kind", sorted(CASES))
@pytest.mark.parametrize("got_order", ORDERS)
@pytest.mark.parametrize("want_order", ORDERS)
def test_values_decide_whatever_the_byte_order(kind: str, got_order: str,
                                               want_order: str) -> None:
    tol, expected, right, wrong, fmt, failures = CASES[kind]
    e = _in(expected, want_order)
    ok = tol.compare(_in(right, got_order), e, fmt=fmt)
    assert ok.ok, ok.summary()
    bad = tol.compare(_in(wrong, got_order), e, fmt=fmt)
    assert not bad.ok and bad.failures == failures, bad.summary()
    native = tol.compare(wrong, expected, fmt=fmt)
    assert np.array_equal(bad.mismatch, native.mismatch)


@pytest.mark.parametrize("order", ORDERS)
def test_assert_matches_shows_the_values_of_a_big_endian_result(order: str) -> None:
    T.assert_matches(_in(F32, order), F32, T.exact())
    with pytest.raises(AssertionError) as info:
        T.assert_matches(_in(_bits_changed(F32, 0, 1), order), F32, T.exact())
    assert "0x3FC00001" in str(info.value) and "0x3FC00000" in str(info.value)


def test_other_dtypes_still_fail_exact() -> None:
    c = T.exact().compare(F32.astype(">f8"), F32)
    assert not c.ok and "dtype float64 differs" in c.summary()
