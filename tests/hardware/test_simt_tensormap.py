"""Tensor maps (hardware.simt.tensormap): encode_tiled validates as the driver's
cuTensorMapEncodeTiled documents, and decode reads back what it wrote."""
from __future__ import annotations

import numpy as np
import pytest

from hardware.simt.tensormap import SIZE, TensorMapError, decode, encode_tiled

GOOD = dict(dtype="bfloat16", rank=3, global_address=1 << 32, global_dim=[64, 10, 3],
            global_strides=[128, 1280], box_dim=[64, 4, 1], element_strides=[1, 1, 1],
            swizzle="128B", l2_promotion="128B")


def test_round_trip():
    raw = encode_tiled(**GOOD)
    assert raw.dtype == np.uint8 and raw.shape == (SIZE,)
    tm = decode(raw)
    assert (tm.address, tm.rank, tm.dtype, tm.swizzle) == (1 << 32, 3, "bfloat16", "128B")
    assert tm.dims == (64, 10, 3) and tm.strides == (128, 1280) and tm.box == (64, 4, 1)
    assert tm.box_bytes == 64 * 4 * 2 and tm.l2_promotion == "128B"
    big = decode(encode_tiled("uint8", 1, 1 << 32, [1 << 32], [], [256], [8]))
    assert big.dims == (1 << 32,) and big.box == (256,) and big.box_counts == (32,)


@pytest.mark.parametrize("change, match", [
    (dict(rank=6), "rank must be 1 to 5"),
    (dict(dtype="float8"), "dtype must be one of"),
    (dict(global_address=(1 << 32) + 8), "16-byte aligned"),
    (dict(global_dim=[64, 0, 3]), r"global_dim\[1\] = 0"),
    (dict(global_strides=[120, 1280]), r"global_strides\[0\] = 120 must be a multiple "
                                       r"of 16 \(0 included\)"),
    (dict(global_strides=[128, -16]), r"global_strides\[1\] = -16 must be a multiple"),
    (dict(global_strides=[128, 1 << 40]), "below 2\\^40"),
    (dict(box_dim=[64, 257, 1]), r"box_dim\[1\] = 257 outside 1..256"),
    (dict(box_dim=[4, 4, 1]), "8 bytes is not a multiple of 16"),
    (dict(box_dim=[128, 4, 1]), "256 bytes exceeds the 128B swizzle span"),
    (dict(element_strides=[1, 9, 1]), r"element_strides\[1\] = 9 outside 1..8"),
    (dict(interleave="32B"), "interleave 32B needs swizzle 32B"),
    (dict(rank=2, global_dim=[64, 10], global_strides=[128], box_dim=[64, 4],
          element_strides=[1, 1], interleave="16B"), "at least 3 with interleave"),
    (dict(swizzle="256B"), "swizzle must be one of"),
    (dict(global_strides=[128]), "global_strides must be a sequence of 2"),
])
def test_driver_rules(change, match):
    with pytest.raises(TensorMapError, match=match):
        encode_tiled(**{**GOOD, **change})


def test_decode_refuses_other_bytes():
    with pytest.raises(TensorMapError, match="not a tensor map"):
        decode(np.zeros(SIZE, np.uint8))
    with pytest.raises(TensorMapError, match="128 bytes"):
        decode(b"\0" * 64)
