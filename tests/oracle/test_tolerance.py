"""Typed tolerances: each kind on hand-derived cases, JSON round trips, reports."""
from __future__ import annotations

import numpy as np
import pytest

from oracle import tolerance as T


def f32(*v: float) -> np.ndarray:
    return np.array(v, dtype=np.float32)


def test_exact_is_bitwise() -> None:
    assert T.exact().compare(f32(1.0, -0.0), f32(1.0, -0.0)).ok
    c = T.exact().compare(f32(1.0, 0.0), f32(1.0, -0.0))      # +0 vs -0 differ
    assert not c.ok and c.mismatch.tolist() == [False, True]
    nan_a = np.array([0x7FC00000], np.uint32).view(np.float32)
    nan_b = np.array([0x7FC00001], np.uint32).view(np.float32)
    assert not T.exact().compare(nan_a, nan_b).ok             # payloads count
    assert not T.exact().compare(f32(1.0), np.float64([1.0])).ok   # dtype counts
    assert "shape" in T.exact().compare(f32(1, 2), f32(1)).summary()


def test_exact_nan_class() -> None:
    nan_a = np.array([0x7FC00000, 0x3F800000], np.uint32).view(np.float32)
    nan_b = np.array([0xFFC00123, 0x3F800000], np.uint32).view(np.float32)
    assert T.exact_nan_class().compare(nan_a, nan_b).ok
    assert not T.exact_nan_class().compare(f32(0.0), f32(-0.0)).ok
    assert not T.exact_nan_class().compare(nan_a, f32(1.0, 1.0)).ok


def test_ulp_float64_hand_derived() -> None:
    one = np.float64([1.0])
    up = np.nextafter(one, 2)
    assert T.ulp(1, "fp64").compare(up, one).ok
    assert not T.ulp(0, "fp64").compare(up, one).ok
    # below 1.0 the ulp halves: two steps down is 1 ulp of the binade of 1.0 ... but the
    # ulp is taken at the expected value, so 2 steps below 1.0 is 1.0 - 2^-52 = 1 ulp(1)
    down2 = np.float64([1.0 - 2.0 ** -52])
    c = T.ulp(1, "fp64").compare(down2, one)
    assert c.ok and c.error[0] == 1.0
    assert T.ulp_of(np.float64([0.0, 5e-324, 3.0, np.inf]), "fp64")[:3].tolist() == [
        5e-324, 5e-324, 2.0 ** -51]
    inf = np.float64([np.inf, np.nan])
    assert T.ulp(4, "fp64").compare(inf, inf).ok
    assert not T.ulp(4, "fp64").compare(np.float64([1e308, 0.0]), inf).ok


def test_interval() -> None:
    tol = T.interval(f32(0.0, 1.0, np.nan), f32(1.0, 1.0, np.nan))
    assert tol.compare(f32(0.0, 1.0, np.nan), f32(0, 0, 0)).ok
    c = tol.compare(f32(1.5, 0.75, 2.0), f32(0, 0, 0))
    assert c.mismatch.tolist() == [True, True, True]
    assert c.error[:2].tolist() == [0.5, 0.25]


def test_integers_float64_cannot_hold_never_match() -> None:
    """2^53 + 1 and 2^53 are one apart; as float64 both would be 2^53 and 'match'."""
    big = np.array([2**53 + 1], dtype=np.int64)
    near = np.array([2**53], dtype=np.int64)
    for tol in (T.ulp(0, "fp32"), T.allclose(0.0, 0.0, order="any"),
                T.interval(near, near)):
        c = tol.compare(big, near)
        assert not c.ok and "9007199254740993" in c.problem
    assert T.ulp(0, "fp32").compare(near, near).ok          # exact integers still compare
    for bad in ("1", None, True):
        with pytest.raises(TypeError):
            T.ulp(bad)
        with pytest.raises(TypeError):
            T.allclose(bad, 0.0, order="any")


def test_allclose_requires_order() -> None:
    with pytest.raises(ValueError, match="order"):
        T.AllClose(1e-3, 0.0, "")
    tol = T.allclose(1e-3, 1e-6, order="sequential k ascending")
    assert tol.compare(f32(1.0009), f32(1.0)).ok
    assert not tol.compare(f32(1.002), f32(1.0)).ok
    assert tol.compare(f32(np.inf, np.nan), f32(np.inf, np.nan)).ok
    assert not tol.compare(f32(-np.inf), f32(np.inf)).ok


def test_relative_to_naive() -> None:
    expected = f32(1.0, 2.0, 3.0)
    naive = f32(1.0, 2.25, 3.0)                  # naive error 0.25
    tol = T.relative_to_naive(2.0, naive)
    assert tol.compare(f32(1.5, 2.0, 2.5), expected).ok          # 0.5 <= 2 * 0.25
    c = tol.compare(f32(1.0, 2.0, 3.5001), expected)
    assert c.mismatch.tolist() == [False, False, True]
    assert "bound 0.5" in c.summary()


@pytest.mark.parametrize("t", [
    T.exact(), T.exact_nan_class(), T.ulp(2, "bf16"), T.interval("lo", "hi"),
    T.allclose(1e-2, 1e-5, order="pairwise"), T.relative_to_naive(2, "naive", 1e-5),
])
def test_json_round_trip(t: T.Tolerance) -> None:
    assert T.from_json(t.to_json()) == t


@pytest.mark.parametrize("obj, msg", [
    ({"kind": "rtol"}, "unknown tolerance kind"),
    ({"kind": "ulp", "n": 1}, "missing"),
    ({"kind": "ulp", "n": "1", "format": "bf16"}, "finite number"),
    ({"kind": "ulp", "n": 1, "format": "bf16", "x": 2}, "unexpected"),
    ({"kind": "interval", "lo": [1], "hi": "hi"}, "must name an output"),
    ([1], "must be an object"),
])
def test_json_errors(obj, msg: str) -> None:
    with pytest.raises(ValueError, match=msg):
        T.from_json(obj)


def test_unresolved_reference_is_reported_not_raised() -> None:
    c = T.interval("lo", "hi").compare(f32(1.0), f32(1.0))
    assert not c.ok and "resolve" in c.summary()
    with pytest.raises(ValueError, match="lo"):
        T.interval("lo", "hi").resolve({"hi": f32(1.0)})


def test_assert_matches_reports_a_table() -> None:
    T.assert_matches(f32(1.0, 2.0), f32(1.0, 2.0), T.exact())
    with pytest.raises(AssertionError) as info:
        T.assert_matches(f32(1.0, 2.5), f32(1.0, 2.0), T.exact(),
                         inputs={"x": f32(7.0, 8.0)})
    text = str(info.value)
    assert "1 of 2 elements" in text and "[1]" in text and "x=8" in text
    assert "0x40200000" in text and "0x40000000" in text     # bits of 2.5 and 2.0


def test_ulp_of_a_narrow_format_on_values_and_codes() -> None:
    # BF16 has 7 stored mantissa bits: its ulp at 1.0 is 2^-7, at 3.0 is 2^-6
    one_up = f32(1.0 + 2 ** -7, 3.0 + 2 ** -6)
    assert T.ulp(1, "bf16").compare(one_up, f32(1.0, 3.0)).ok
    c = T.ulp(1, "bf16").compare(f32(1.0 + 2 ** -6), f32(1.0))
    assert not c.ok and c.error[0] == 2.0
    # codes: E4M3 0x38 is 1.0, 0x39 1.125 (one ulp), 0x3A 1.25
    codes = np.array([0x39, 0x3A], np.uint8)
    c = T.ulp(1, "e4m3").compare(codes, np.array([0x38, 0x38], np.uint8), fmt="e4m3")
    assert c.mismatch.tolist() == [False, True]
    # the subnormal spacing: E4M3's smallest subnormal 2^-9 is one ulp away from 0
    assert T.ulp_of(np.float64([0.0, 2.0 ** -9, 448.0]), "e4m3").tolist() == [
        2.0 ** -9, 2.0 ** -9, 32.0]


def test_exact_nan_class_on_codes() -> None:
    # E5M2 NaNs: 0x7D, 0x7E, 0x7F (and negative) are one class; Inf 0x7C is not a NaN
    t = T.exact_nan_class()
    assert t.compare(np.uint8([0x7D, 0xFF]), np.uint8([0x7F, 0x7E]), fmt="e5m2").ok
    assert not t.compare(np.uint8([0x7C]), np.uint8([0x7D]), fmt="e5m2").ok
    c = t.compare(np.uint8([0x3C]), np.uint8([0x3D]), fmt="e5m2")
    assert not c.ok and c.error[0] == 1.0                        # one code apart
