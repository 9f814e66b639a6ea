"""The gallery's sm_90a warpgroup GEMMs (hardware/simt/gallery/wgmma_gemm.cu, nvcc's PTX):
operand tiles placed by the kernel's own swizzle code, descriptors built by the kernel,
accumulators in .f32/.b32 registers as nvcc allocates them; checked against refimpl.matmul
chained over k16 steps with gpu's preset (spot-checked against the preset's plain
rational model) and against exact integer products."""
from __future__ import annotations

import numpy as np
import pytest

from hardware.simt import GlobalMemory, gallery
from refimpl import matmul as mm
from refimpl.matmul import presets


@pytest.mark.parametrize("gpu", ["H100", "H200"])
def test_wgmma_gemm_f16(gpu):
    m, n, k = 64, 128, 128
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    mem = GlobalMemory()
    pa, pb, pc = mem.to_device(a), mem.to_device(b), mem.calloc(m * n * 4)
    st = gallery.load("wgmma_gemm").launch("wgmma_gemm_f16", (n // 64, m // 64), 128,
                                           [pa, pb, pc, m, n, k], mem, gpu=gpu)
    got = mem.from_device(pc, np.float32, (m, n))
    acc = np.zeros((m, n), np.float32)
    for k0 in range(0, k, 16):      # the kernel's order: k blocks of 64, four k16 each
        acc = np.asarray(mm.matmul(a[:, k0:k0 + 16].astype(np.float32),
                                   b[k0:k0 + 16].astype(np.float32), acc,
                                   accumulate="H100-FP16", out_format="fp32"), np.float32)
    assert np.array_equal(got.view(np.uint32), acc.view(np.uint32))
    model = presets.preset("H100-FP16")
    for i, j in ((0, 0), (63, 127), (17, 70), (40, 3)):
        ref = 0.0
        for k0 in range(0, k, 16):
            ref = model.dot_reference(a[i, k0:k0 + 16], b[k0:k0 + 16, j], ref)
        assert got[i, j] == np.float32(ref)
    assert st.wgmma_instructions == 2 * (k // 16)
    assert st.wgmma_flops == 2 * (2 * 64 * 64 * k)


def test_wgmma_gemm_s8_a_from_registers():
    m, n, k = 64, 128, 256
    rng = np.random.default_rng(1)
    a = rng.integers(-128, 128, (m, k)).astype(np.int8)
    bt = rng.integers(-128, 128, (n, k)).astype(np.int8)
    mem = GlobalMemory()
    pa, pb, pc = mem.to_device(a), mem.to_device(bt), mem.calloc(m * n * 4)
    gallery.load("wgmma_gemm").launch("wgmma_gemm_s8", (n // 64, m // 64), 128,
                                      [pa, pb, pc, m, n, k], mem, gpu="H100")
    got = mem.from_device(pc, np.int32, (m, n))
    assert np.array_equal(got, a.astype(np.int64) @ bt.astype(np.int64).T)
