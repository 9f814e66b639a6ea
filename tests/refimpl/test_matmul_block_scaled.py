"""Blackwell block-scaled MMA presets (B200-MXF8F6F4, B200-MXF4, B200-NVF4): hand-derived
probes of the published model (MMA-Sim, arXiv:2511.10909: ST-FDPA with F = 25,
GST-FDPA with F = 35 and group exponents from the scales alone), the MX/NVFP4 adapters
and the argument checks."""
from __future__ import annotations

import numpy as np
import pytest

from refimpl import formats as F
from refimpl.matmul import block_scaled_matmul, mma_block_scaled
from refimpl.scaling import mx_matmul, mx_quantize, nvfp4_quantize


def one(preset, a, sa, b, sb, c, fmt, k):
    a = np.array(list(a) + [0.0] * (k - len(a)))[None, :]
    b = np.array(list(b) + [0.0] * (k - len(b)))[:, None]
    return float(block_scaled_matmul(a, np.array([sa]), b, np.array(sb)[:, None],
                                     np.array([[c]], np.float32), accumulate=preset,
                                     in_format=fmt)[0, 0])


def test_mxf8f6f4_alignment_includes_the_scale_exponents():
    # product 1 * 1 * 2^10 * 1: exponent 0 + 0 + 10 + 0 = 10, grid 2^(10 - 25) = 2^-15.
    # c = -2^-15 is one unit: 1024 - 2^-15, truncated into FP32 (spacing 2^-14 below
    # 1024): 1024 - 2^-14. c = -2^-16 is half a unit: dropped, 1024. (Aligned without
    # the scale exponent the grid would be 2^-25 and both would be kept.)
    s = [2.0**10]
    assert one("B200-MXF8F6F4", [1.0], s, [1.0], [1.0], -(2.0**-15), "e4m3", 32) \
        == 1024 - 2.0**-14
    assert one("B200-MXF8F6F4", [1.0], s, [1.0], [1.0], -(2.0**-16), "e4m3", 32) == 1024.0


@pytest.mark.parametrize("preset,scale", [("B200-MXF4", 1.0), ("B200-NVF4", 1.0),
                                          ("B200-NVF4", 1.5)])
def test_mxf4nvf4_group_exponent_comes_from_the_scales(preset, scale):
    # 16 products 1 * 1 form one group: sum 16, exponent e(sa) + e(sb) = 0 (the group sum
    # is not normalised), term 16 * sig(sa) * sig(sb) = 16 * scale. Grid 2^(0 - 35):
    # c = -2^-35 is one unit: 16 s - 2^-35, truncated into FP32 (spacing 2^-20 below 16,
    # 2^-19 below 24): 16 - 2^-20 or 24 - 2^-19; c = -2^-36 is dropped: 16 s. A
    # normalised group exponent (4) would give the grid 2^-31 and drop both.
    k = 64
    nb = k // (32 if preset == "B200-MXF4" else 16)
    sa = [scale] + [1.0] * (nb - 1)
    keep = one(preset, [1.0] * 16, sa, [1.0] * 16, [1.0] * nb, -(2.0**-35), "e2m1", k)
    drop = one(preset, [1.0] * 16, sa, [1.0] * 16, [1.0] * nb, -(2.0**-36), "e2m1", k)
    want = 16 - 2.0**-20 if scale == 1.0 else 24 - 2.0**-19
    assert (keep, drop) == (want, 16.0 * scale)


def test_nan_scale_gives_nan():
    a = np.ones((1, 32))
    got = block_scaled_matmul(a, np.array([[np.nan]]), a.T, np.ones((1, 1)),
                              accumulate="B200-MXF8F6F4", in_format="e4m3")
    assert np.isnan(got[0, 0])


def test_adapters_agree_with_decoded_values_and_stay_near_the_exact_product():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((8, 64)).astype(np.float32)
    w = rng.standard_normal((64, 4)).astype(np.float32)
    for elem in ("e4m3", "e5m2", "e2m1"):
        qa, qb = mx_quantize(x, elem, axis=1), mx_quantize(w, elem, axis=0)
        got = mma_block_scaled(qa, qb)
        va, vb = F.decode(qa.codes, elem), F.decode(qb.codes, elem)
        sa = np.ldexp(1.0, qa.scales.astype(np.int64) - 127)
        sb = np.ldexp(1.0, qb.scales.astype(np.int64) - 127)
        preset = "B200-MXF4" if elem == "e2m1" else "B200-MXF8F6F4"
        assert np.array_equal(got, block_scaled_matmul(va, sa, vb, sb, accumulate=preset,
                                                       in_format=elem))
        exact = mx_matmul(qa, qb, out_dtype=np.float64)
        # truncation at 2^(eta - F) per term and one truncation into FP32: a few ulps
        assert np.all(np.abs(got - exact) <= 4 * np.spacing(np.abs(exact).astype(np.float32))
                      + 2.0**-20)
    na, nb = nvfp4_quantize(x, axis=1), nvfp4_quantize(w, axis=0)
    got = mma_block_scaled(na, nb)
    deq = na.dequantize(np.float64) @ nb.dequantize(np.float64)
    # the MMA sees q * sf: the dequantised product times both per-tensor scales
    scaled = deq * float(na.global_scale) * float(nb.global_scale)
    assert np.allclose(got, scaled, rtol=1e-5)


def test_bad_arguments():
    a = np.ones((2, 32))
    with pytest.raises(ValueError, match="in_format is required"):
        block_scaled_matmul(a, np.ones((2, 1)), a.T, np.ones((1, 2)))
    with pytest.raises(ValueError, match="scales"):
        block_scaled_matmul(a, np.ones((2, 2)), a.T, np.ones((1, 2)), in_format="e4m3")
    with pytest.raises(ValueError, match=r"a\[0, 0\].*e4m3"):
        block_scaled_matmul(a * 1.1, np.ones((2, 1)), a.T, np.ones((1, 2)), in_format="e4m3")
    with pytest.raises(ValueError, match="a_scales.*e8m0"):
        block_scaled_matmul(a, np.full((2, 1), 3.0), a.T, np.ones((1, 2)), in_format="e4m3")
    with pytest.raises(ValueError, match="not supported"):
        block_scaled_matmul(a, np.ones((2, 2)), a.T, np.ones((2, 2)), accumulate="B200-NVF4",
                            in_format="e4m3")
    with pytest.raises(ValueError, match="not a block-scaled preset"):
        block_scaled_matmul(a, np.ones((2, 1)), a.T, np.ones((1, 2)), accumulate="H100-E4M3")
    with pytest.raises(TypeError, match="MXArray"):
        mma_block_scaled(a, a.T)
