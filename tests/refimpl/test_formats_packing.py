"""FP4/FP6 packing: the documented layouts, derived by hand, and round trips."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from refimpl import formats as F


def test_fp4_low_first_default() -> None:
    codes = F.encode([1.0, -6.0], "e2m1")
    assert codes.tolist() == [0x2, 0xF]
    assert F.pack(codes, "e2m1").tolist() == [0xF2]
    assert F.pack(codes, "e2m1", order="high_first").tolist() == [0x2F]


def test_fp4_odd_count_pads_with_zero_code() -> None:
    assert F.pack([0x1, 0x2, 0x3], "e2m1").tolist() == [0x21, 0x03]
    assert F.unpack([0x21, 0x03], "e2m1", 3).tolist() == [1, 2, 3]
    assert F.unpack([0x21, 0x03], "e2m1", 3, order="high_first").tolist() == [2, 1, 0]


def test_fp6_one_per_byte_and_dense_layouts() -> None:
    c = [0b000001, 0b000010, 0b000011, 0b111111]
    assert F.pack(c, "e2m3").tolist() == c
    # low_first: w = c0 | c1<<6 | c2<<12 | c3<<18, little-endian bytes
    w = 1 | (2 << 6) | (3 << 12) | (63 << 18)
    assert F.pack(c, "e2m3", dense=True).tolist() == [w & 0xFF, (w >> 8) & 0xFF, w >> 16]
    # high_first: MSB-first bit stream 000001 000010 000011 111111
    stream = "000001" "000010" "000011" "111111"
    want = [int(stream[i:i + 8], 2) for i in range(0, 24, 8)]
    assert F.pack(c, "e3m2", order="high_first", dense=True).tolist() == want


@pytest.mark.slow
@pytest.mark.parametrize("name", ["e2m1", "e2m3", "e3m2"])
@pytest.mark.parametrize("order", ["low_first", "high_first"])
@pytest.mark.parametrize("dense", [False, True])
@given(data=st.data())
def test_round_trip(name: str, order: str, dense: bool, data: st.DataObject) -> None:
    fmt = F.get(name)
    if fmt.bits == 4 and dense:
        return
    codes = data.draw(st.lists(st.integers(0, (1 << fmt.bits) - 1), max_size=50))
    packed = F.pack(np.array(codes, dtype=np.uint8), fmt, order, dense=dense)
    assert packed.dtype == np.uint8
    n = len(codes)
    # FP4: two per byte; FP6: one per byte, or whole groups of four in three bytes
    want = (n + 1) // 2 if fmt.bits == 4 else 3 * ((n + 3) // 4) if dense else n
    assert packed.size == want
    back = F.unpack(packed, fmt, len(codes), order, dense=dense)
    assert back.tolist() == codes and back.dtype == np.uint8


@pytest.mark.parametrize("name,bad", [("e2m1", 0x10), ("e2m3", 0x40), ("e3m2", 0xFF)])
def test_stray_high_bits_rejected(name: str, bad: int) -> None:
    with pytest.raises(ValueError, match=r"codes\[2\]"):
        F.pack(np.array([0, 1, bad], dtype=np.uint8), name)
    if name != "e2m1":
        with pytest.raises(ValueError, match="packed"):
            F.unpack(np.array([1, bad], dtype=np.uint8), name, 2)


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="4-bit"):
        F.pack([1], "e4m3")
    with pytest.raises(ValueError, match="order"):
        F.pack([1], "e2m1", order="middle")
    with pytest.raises(ValueError, match="need"):
        F.unpack([0x21], "e2m1", 3)
    with pytest.raises(ValueError, match="integer"):
        F.pack([1.0], "e2m1")
