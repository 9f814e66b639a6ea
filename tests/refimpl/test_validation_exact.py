"""Exact conversions and size limits of refimpl.validation: wide floats, float32-only
entry points, counts, and the allocation limit checked before any work."""
import time

import numpy as np
import pytest

from refimpl.validation import (MAX_ARRAY_BYTES, as_float32, as_float_array,
                                check_array_bytes, check_count, check_elements,
                                exact_astype)

WIDE = np.finfo(np.longdouble).nmant > 52  # x86-64: 80-bit extended
needs_wide = pytest.mark.skipif(not WIDE, reason="longdouble is float64 on this platform")


def test_exact_astype_keeps_specials_and_refuses_the_first_changed_value():
    x = np.array([0.5, -0.0, np.inf, -np.inf, np.nan, 2.0**-149])
    out = exact_astype(x, np.float32, "x")
    assert out.dtype == np.float32
    assert np.signbit(out[1]) and np.isnan(out[4]) and out[5] == np.float32(2.0**-149)
    with pytest.raises(ValueError, match=r"x holds a value that is not a float32 value "
                                         r"at index \(1,\)"):
        exact_astype(np.array([1.0, 0.1, 0.2]), np.float32, "x")
    with pytest.raises(ValueError, match="not a float32"):  # overflows to Inf: changed
        exact_astype(np.array([1e39]), np.float32, "x")


@needs_wide
def test_longdouble_is_taken_only_when_exact():
    exact = np.array([1.5, -2.0**-60], np.longdouble)
    out = as_float_array(exact, "x")
    assert out.dtype == np.float64 and out.tolist() == [1.5, -2.0**-60]
    inexact = np.longdouble(1) + np.longdouble(2) ** -60  # 1 + 2^-60: not a float64
    with pytest.raises(ValueError, match=r"y holds a value that is not a float64 value "
                                         r"at index \(0, 1\)"):
        as_float_array(np.array([[1, inexact]], np.longdouble), "y")
    with pytest.raises(ValueError, match=r"z\[1\].*not a float64 value"):
        as_float_array(np.array([1.0, inexact], dtype=object), "z")


@needs_wide
def test_as_float32_refuses_wide_values_float32_cannot_hold():
    assert as_float32(np.array([3.0], np.longdouble)).dtype == np.float32
    with pytest.raises(ValueError, match="not a float32 value"):
        as_float32(np.array([1 + 2.0**-30], np.longdouble), "s")


@pytest.mark.parametrize("bad, err", [
    (np.array([1 + 1j]), "complex"), (np.array([True]), "bool"), (np.array(["1"]), "<U1"),
    (np.array([2**24 + 1]), "cannot represent exactly"),
    (np.array([2**24 + 1], dtype=object), "cannot represent exactly"),
    (np.array([0.1]), "not a float32"),
])
def test_as_float32_refuses_what_float32_cannot_hold(bad, err):
    with pytest.raises(ValueError, match=err):
        as_float32(bad, "a")


def test_as_float32_takes_exact_integers():
    assert as_float32(np.array([2**24, -3], np.int64)).tolist() == [2.0**24, -3.0]


@pytest.mark.parametrize("value", [0.5, 1.0, True, "3", None])
def test_counts_are_ints(value):
    with pytest.raises(TypeError, match="n must be an int"):
        check_count("n", value)


def test_counts_are_non_negative():
    assert check_count("n", np.int8(0)) == 0
    with pytest.raises(ValueError, match="n must be a non-negative int"):
        check_count("n", -1)


def test_allocation_limit_is_exact_and_named():
    assert MAX_ARRAY_BYTES == 2**32
    assert check_array_bytes("a", 2**29, 8) == 2**29  # exactly at the limit
    with pytest.raises(ValueError, match=r"a: the result would take 536870913 elements x "
                                         r"8 bytes = 4294967304 bytes, over the limit of "
                                         r"4294967296 bytes"):
        check_array_bytes("a", 2**29 + 1, 8)


def test_broadcast_inputs_are_refused_before_any_work():
    huge = np.broadcast_to(np.float32(1), (2**20, 2**20))
    t0 = time.perf_counter()
    for fn in (lambda: check_elements("x", huge), lambda: as_float_array(huge, "x"),
               lambda: as_float32(huge, "x")):
        with pytest.raises(ValueError, match=r"x: the working copies of an array of shape "
                                             r"\(1048576, 1048576\).*MAX_ARRAY_BYTES"):
            fn()
    assert time.perf_counter() - t0 < 0.5
