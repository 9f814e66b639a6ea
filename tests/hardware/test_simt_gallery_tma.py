"""The gallery's TMA kernels for sm_90a (nvcc's PTX of hardware/simt/gallery/
tma_wgmma_gemm.cu and cluster_multicast.cu), run by the interpreter with every sanitizer
tool on. References: exact products of small integers (every sum is exact in FP32, so
any accumulation order gives the same bits), float64 matrix products; the FP16 GEMM on
general inputs against refimpl.matmul's H100-FP16 model chained over the kernel's k16
steps, and the preset's plain rational model on a few elements."""
from __future__ import annotations

import numpy as np
import pytest

from hardware.simt import GlobalMemory, gallery
from hardware.simt.tensormap import encode_tiled
from refimpl import matmul as mm
from refimpl.matmul import presets


def gemm(a: np.ndarray, b: np.ndarray, swizzle: str = "128B", gpu: str = "H100"):
    m, k = a.shape
    n = b.shape[1]
    mem = GlobalMemory()
    pa, pb, pc = mem.to_device(a), mem.to_device(b), mem.calloc(m * n * 4)
    ma = encode_tiled("float16", 2, pa, [k, m], [k * 2], [64, 64], [1, 1], swizzle=swizzle)
    mb = encode_tiled("float16", 2, pb, [n, k], [n * 2], [64, 64], [1, 1], swizzle=swizzle)
    st = gallery.load("tma_wgmma_gemm").launch("tma_wgmma_gemm_f16", (n // 64, m // 64),
                                               160, [ma, mb, pc, m, n, k], mem, gpu=gpu)
    return mem.from_device(pc, np.float32, (m, n)), st


@pytest.mark.parametrize("m, n, k", [(64, 64, 64), (128, 64, 128), (64, 128, 320)])
def test_tma_wgmma_gemm_exact_integers(m, n, k):
    """K / 64 k-blocks through the two stages: one block (a stage never reused), two, and
    five (the ring wraps twice: the producer waits on each empty barrier's phases)."""
    rng = np.random.default_rng(m + n + k)
    a = rng.integers(-8, 9, (m, k)).astype(np.float16)
    b = rng.integers(-8, 9, (k, n)).astype(np.float16)
    got, st = gemm(a, b)
    assert np.array_equal(got, a.astype(np.float64) @ b.astype(np.float64))
    blocks, kb = (m // 64) * (n // 64), k // 64
    assert st.wgmma_instructions == blocks * kb * 4
    assert st.wgmma_flops == 2 * m * n * k
    # per block and k-block one 64 x 64 fp16 box through each map (.param addresses 0
    # and 128: the two 128-byte, 64-byte aligned maps come first)
    assert st.tma_load_bytes == {0: blocks * kb * 8192, 128: blocks * kb * 8192}
    # consumers: 128 threads wait once per k-block; the producer once per reused stage;
    # a wait that would fail is suspended until its phase completes, so all complete
    waits = blocks * (128 * kb + max(0, kb - 2))
    assert st.mbarrier_waits == st.mbarrier_waits_completed == waits
    assert not st.warnings


def test_tma_wgmma_gemm_needs_the_swizzle():
    """The descriptors say 128-byte swizzle: tiles the maps place unswizzled are read
    with their 16-byte chunks permuted (rows 1..7 of each 8), a different product."""
    rng = np.random.default_rng(5)
    a = rng.integers(-8, 9, (64, 64)).astype(np.float16)
    b = rng.integers(-8, 9, (64, 64)).astype(np.float16)
    got, _ = gemm(a, b, swizzle="none")
    assert not np.array_equal(got, a.astype(np.float64) @ b.astype(np.float64))


@pytest.mark.parametrize("gpu", ["H100", "H200"])
def test_tma_wgmma_gemm_fp16_model(gpu):
    m, n, k = 64, 64, 192
    rng = np.random.default_rng(7)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    got, _ = gemm(a, b, gpu=gpu)
    acc = np.zeros((m, n), np.float32)
    for k0 in range(0, k, 16):      # the kernel's order: stages of 64, four k16 each
        acc = np.asarray(mm.matmul(a[:, k0:k0 + 16].astype(np.float32),
                                   b[k0:k0 + 16].astype(np.float32), acc,
                                   accumulate="H100-FP16", out_format="fp32"), np.float32)
    assert np.array_equal(got.view(np.uint32), acc.view(np.uint32))
    model = presets.preset("H100-FP16")
    for i, j in ((0, 0), (63, 63), (17, 40), (40, 3)):
        ref = 0.0
        for k0 in range(0, k, 16):
            ref = model.dot_reference(a[i, k0:k0 + 16], b[k0:k0 + 16, j], ref)
        assert got[i, j] == np.float32(ref)
    exact = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    assert not np.array_equal(got, exact)   # the model is not one rounding of the sum


def matvec(x: np.ndarray, w: np.ndarray):
    tiles = x.shape[0] // 64
    mem = GlobalMemory()
    px, pw, py = mem.to_device(x), mem.to_device(w), mem.calloc(4 * x.shape[0])
    mx = encode_tiled("float32", 2, px, [64, x.shape[0]], [256], [64, 16], [1, 1])
    st = gallery.load("cluster_multicast").launch("cluster_multicast_matvec", 4 * tiles,
                                                  64, [mx, pw, py], mem)
    return mem.from_device(py, np.float32, x.shape[0]), st


@pytest.mark.parametrize("tiles", [1, 3])
def test_cluster_multicast_matvec(tiles):
    rng = np.random.default_rng(tiles)
    x = rng.integers(-8, 9, (64 * tiles, 64)).astype(np.float32)
    w = rng.integers(-8, 9, 64).astype(np.float32)
    got, st = matvec(x, w)
    assert np.array_equal(got, x.astype(np.float64) @ w.astype(np.float64))
    # each CTA issues one multicast box of 16 x 64 floats (counted once, four CTAs
    # written); every thread of every CTA waits once
    assert st.tma_load_bytes == {0: 4 * tiles * 16 * 64 * 4}
    assert st.mbarrier_waits == st.mbarrier_waits_completed == 4 * tiles * 64
    assert not st.warnings


def test_cluster_multicast_fills_every_cta():
    """A tile whose quarters differ in scale: a CTA missing a multicast quarter (or
    reading its own part for another CTA's) would miss 16 rows' products of it."""
    x = np.zeros((64, 64), np.float32)
    for q in range(4):
        x[16 * q:16 * q + 16] = 10.0 ** q
    w = np.arange(64, dtype=np.float32)
    got, _ = matvec(x, w)
    assert np.array_equal(got, x.astype(np.float64) @ w.astype(np.float64))
