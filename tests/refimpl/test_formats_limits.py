"""Size limits of the format codecs: a huge (broadcast) input is refused at once, with
the argument and the limit named, before any allocation."""
import time

import numpy as np
import pytest

from refimpl import formats
from refimpl.scaling import hadamard_transform, mx_quantize, nvfp4_quantize

WIDE = np.finfo(np.longdouble).nmant > 52

#: (label, call, argument named in the error) for every codec entry point
CALLS = [
    ("encode", lambda x: formats.encode(x, "e4m3"), "x"),
    ("round_to", lambda x: formats.round_to(x, "bf16"), "x"),
    ("decode", lambda x: formats.decode(x, "e4m3"), "codes"),
    ("pack", lambda x: formats.pack(x, "e2m1"), "codes"),
    ("unpack", lambda x: formats.unpack(x, "e2m1", 4), "packed"),
    ("mx_quantize", lambda x: mx_quantize(x, "e4m3"), "x"),
    ("nvfp4_quantize", lambda x: nvfp4_quantize(x), "x"),
    ("hadamard_transform", lambda x: hadamard_transform(x), "x"),
]


def _huge(label: str) -> np.ndarray:
    dtype = np.uint8 if label in ("decode", "pack", "unpack") else np.float32
    return np.broadcast_to(dtype(0), (2**20, 2**20))  # 2^40 elements, no memory


@pytest.mark.parametrize("label, call, arg", CALLS, ids=[c[0] for c in CALLS])
def test_broadcast_inputs_beyond_the_limit_are_refused_in_milliseconds(label, call, arg):
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=rf"^{arg}: the working copies of an array of shape "
                                         r"\(1048576, 1048576\) would take 1099511627776 "
                                         r"elements x 8 bytes.*over the limit of 4294967296 "
                                         r"bytes \(refimpl.validation.MAX_ARRAY_BYTES\)"):
        call(_huge(label))
    assert time.perf_counter() - t0 < 0.5


def test_encode_of_2_31_broadcast_elements_is_refused_at_once():
    x = np.broadcast_to(np.float32(1), (2**31,))
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match="x: .*2147483648 elements x 8 bytes"):
        formats.encode(x, "e4m3")
    with pytest.raises(ValueError, match="x: .*2147483648 elements"):
        formats.round_to(np.broadcast_to(np.int8(1), (2**31,)), "e4m3")  # ints too
    assert time.perf_counter() - t0 < 0.5


def test_inputs_at_the_limit_are_not_refused_by_size():
    # 2^29 elements is exactly 4 GiB of float64: the size check passes (the dtype check
    # after it fails, so nothing is allocated)
    at = np.broadcast_to(np.bool_(0), (2**29,))
    with pytest.raises(ValueError, match="has dtype bool"):
        formats.encode(at, "e4m3")
    with pytest.raises(ValueError, match="working copies"):
        formats.encode(np.broadcast_to(np.bool_(0), (2**29 + 1,)), "e4m3")


@pytest.mark.skipif(not WIDE, reason="longdouble is float64 on this platform")
def test_encode_takes_longdouble_only_when_exact():
    exact = np.array([1.5, -0.25], np.longdouble)
    assert np.array_equal(formats.encode(exact, "e4m3"),
                          formats.encode(np.array([1.5, -0.25]), "e4m3"))
    with pytest.raises(ValueError, match=r"x holds a value that is not a float64 value at "
                                         r"index \(1,\)"):
        formats.encode(np.array([1, 1 + np.longdouble(2) ** -60], np.longdouble), "e4m3")


@pytest.mark.parametrize("bad", [np.ones(4, np.complex64), np.ones(4, bool),
                                 np.full(4, "1"), np.array([1.0, "x"], object)])
def test_encode_refuses_what_is_not_real_numbers(bad):
    with pytest.raises(ValueError, match="x"):
        formats.encode(bad, "e4m3")
