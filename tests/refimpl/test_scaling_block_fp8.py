"""Tile-wise FP8 (DeepSeek-V3 style) against a per-tile float32-scalar reference."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oracles import ELEMENT_LAYOUTS, code_value, element_table, nearest_magnitude
from refimpl.scaling import BlockFP8Array, block_fp8_quantize, tile_amax

F32 = np.float32
TABLES = {name: element_table(*ELEMENT_LAYOUTS[name]) for name in ("e4m3", "e5m2")}


def rne_sat(a: float, name: str) -> int:
    """The FP8 code nearest to ``a`` (ties to even, saturating; +-inf saturates too)."""
    tab = TABLES[name]
    mag = nearest_magnitude(abs(Fraction(a)) if math.isfinite(a) else tab[-1][0], tab)
    return mag | (0x80 if math.copysign(1.0, a) < 0 else 0)


def value(code: int, name: str) -> float:
    """The value of an FP8 code, from its layout."""
    return float(code_value(code, *ELEMENT_LAYOUTS[name][:3]))


def ref_tile(vals, name, power_of_two):
    fmax = 448 if name == "e4m3" else 57344
    amax = max(F32(max(abs(F32(v)) for v in vals)), F32(1e-4))
    if power_of_two:
        k = -200
        while Fraction(float(amax)) > fmax * Fraction(2) ** k:
            k += 1
        s = F32(2.0 ** k)
    else:
        s = F32(amax / F32(fmax))
    return s, [rne_sat(float(F32(F32(v) / s)), name) for v in vals]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["e4m3", "e5m2"])
@pytest.mark.parametrize("power_of_two", [False, True])
@settings(max_examples=15)
@given(data=st.data())
def test_matches_reference(name, power_of_two, data):
    r, c = data.draw(st.sampled_from([(1, 8), (2, 4), (3, 5)]))
    rows, cols = data.draw(st.integers(1, 7)), data.draw(st.integers(1, 13))
    k = data.draw(st.integers(-30, 30))
    vals = data.draw(st.lists(st.floats(-4, 4, width=32), min_size=rows * cols,
                              max_size=rows * cols))
    x = (np.array(vals, np.float64).reshape(rows, cols) * 2.0 ** k).astype(F32)
    q = block_fp8_quantize(x, block=(r, c), fmt=name, power_of_two=power_of_two)
    assert q.scales.shape == (-(-rows // r), -(-cols // c))
    dq = q.dequantize()
    assert dq.dtype == F32 and dq.shape == x.shape
    for ti in range(q.scales.shape[0]):
        for tj in range(q.scales.shape[1]):
            tile = x[r * ti:r * (ti + 1), c * tj:c * (tj + 1)]
            s, codes = ref_tile([float(v) for v in tile.ravel()], name, power_of_two)
            assert q.scales[ti, tj] == s
            assert q.codes[r * ti:r * (ti + 1), c * tj:c * (tj + 1)].ravel().tolist() == codes
            # dequantised values: decode(code) * s, one float32 rounding (the float64
            # product of an FP8 value and a float32 is exact)
            got = dq[r * ti:r * (ti + 1), c * tj:c * (tj + 1)].ravel().tolist()
            assert got == [float(F32(value(code, name) * float(s))) for code in codes]


def test_pinned_values():
    x = np.zeros((1, 128), F32)
    q = block_fp8_quantize(x)
    assert q.scales[0, 0] == F32(F32(1e-4) / F32(448))  # amax floored at 1e-4
    assert not q.codes.any()
    x[0, 0], x[0, 1] = 448.0, -1.0
    q = block_fp8_quantize(x)
    assert q.scales[0, 0] == 1.0 and q.codes[0, 0] == 0x7E and q.codes[0, 1] == 0xB8
    p2 = block_fp8_quantize(np.full((1, 128), 449.0, F32), power_of_two=True)
    assert p2.scales[0, 0] == 2.0  # 449 / 448 > 1: next power of two
    assert (p2.dequantize() == 448.0).all()  # 224.5 -> 224 (ties to even) * 2


def test_round_trip_bound_and_exact():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, 300)).astype(F32)
    q = block_fp8_quantize(x, block=(1, 128))
    err = np.abs(q.dequantize().astype(np.float64) - x)
    # half an E4M3 step at its top binade (32) in units of s, plus float32 roundings
    s = np.repeat(q.scales, 128, axis=1)[:, :300].astype(np.float64)
    assert (err <= 16 * s * (1 + 2.0 ** -18)).all()
    codes = rng.integers(0, 0x7E, size=(4, 256)).astype(np.uint8)
    exact = BlockFP8Array(codes, np.full((1, 2), 1.0, F32).repeat(4, 0), "e4m3", (1, 128))
    xv = exact.dequantize()
    assert np.array_equal(block_fp8_quantize(xv, power_of_two=True).dequantize(), xv)


def test_nan_tile_and_amax():
    x = np.ones((2, 256), F32)
    x[0, 3] = np.nan
    assert np.isnan(tile_amax(x)[0, 0]) and tile_amax(x)[1, 1] == 1.0
    q = block_fp8_quantize(x)
    assert np.isnan(q.scales[0, 0]) and (q.codes[0, :128] & 0x7F == 0x7F).all()
    assert (q.dequantize()[0, 128:] == 1.0).all()


def test_bad_inputs():
    with pytest.raises(ValueError, match="2 dimensions"):
        block_fp8_quantize(np.ones(128, F32))
    with pytest.raises(ValueError, match="e4m3"):
        block_fp8_quantize(np.ones((1, 128), F32), fmt="e2m1")
    with pytest.raises(ValueError, match="not a float32"):
        block_fp8_quantize(np.full((1, 4), 0.1))
    with pytest.raises(ValueError, match="block"):
        block_fp8_quantize(np.ones((1, 4), F32), block=(0, 4))


def test_power_of_two_flag_is_checked():
    with pytest.raises(TypeError, match="power_of_two"):
        block_fp8_quantize(np.ones((1, 128), np.float32), power_of_two="no")


@pytest.mark.parametrize("name", ["e4m3", "e5m2"])
@pytest.mark.parametrize("power_of_two", [False, True])
@pytest.mark.parametrize("block", [(1, 128), (2, 4)])
def test_all_zero_tiles_without_a_floor_dequantize_to_zeros(name, power_of_two, block):
    """amax_floor=0 is allowed: a tile of zeros gets scale 1 (0 / 0 made it NaN); its
    codes are the zeros of each element's sign, 0x00 and 0x80 in every FP8 layout."""
    x = np.zeros((4, 256), F32)
    x[1, 5] = -0.0
    x[3, 7] = 3.0  # a tile with a value keeps the usual scale
    q = block_fp8_quantize(x, block=block, fmt=name, power_of_two=power_of_two,
                           amax_floor=0.0)
    r, c = block
    zero_tiles = np.ones(q.scales.shape, bool)
    zero_tiles[3 // r, 7 // c] = False
    assert (q.scales[zero_tiles] == 1.0).all()
    want = 3.0 / TABLES[name][-1][0]  # 3 / fmt.max, or the power of two above it
    s = q.scales[3 // r, 7 // c]
    assert (s == 2.0 ** math.ceil(math.log2(want))) if power_of_two else s == F32(want)
    codes = q.codes.copy()
    codes[3, 7] = 0
    assert codes[1, 5] == 0x80 and codes.sum() == 0x80  # only the -0 has its sign bit
    d = q.dequantize()
    assert not np.isnan(d).any()
    assert np.signbit(d[1, 5]) and (np.delete(d.ravel(), [256 + 5, 3 * 256 + 7]) == 0).all()
    assert d[3, 7] == 3.0 or abs(d[3, 7] - 3.0) <= 3.0 * 2.0**-3


@pytest.mark.parametrize("bad", ["0", None, [0.0]])
def test_amax_floor_is_a_real_number(bad):
    with pytest.raises(TypeError, match="amax_floor must be a real number"):
        block_fp8_quantize(np.zeros((1, 4), F32), amax_floor=bad)
