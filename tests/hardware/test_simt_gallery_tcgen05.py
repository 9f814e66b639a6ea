"""The gallery's sm_100a FP16 GEMM (hardware/simt/gallery/tcgen05_gemm.cu, nvcc's PTX):
one thread's tcgen05.mma per k16 slice into Tensor Memory, committed to an mbarrier,
D read back with tcgen05.ld; checked against refimpl.matmul chained over the k16 steps
with B200's preset, against exact products of small integers and against float64."""
from __future__ import annotations

import numpy as np

from hardware.simt import GlobalMemory, gallery
from test_simt_triton_sm90 import chained


def _run(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    m, k = a.shape
    n = b.shape[1]
    mem = GlobalMemory()
    pa, pb, pc = mem.to_device(a), mem.to_device(b), mem.calloc(m * n * 4)
    gallery.load("tcgen05_gemm").launch("tcgen05_gemm_f16", (n // 64, m // 128), 128,
                                        [pa, pb, pc, m, n, k], mem, gpu="B200")
    return mem.from_device(pc, np.float32, (m, n))


def test_tcgen05_gemm_f16_matches_the_preset_chained_over_k16():
    m, n, k = 128, 128, 48
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    got = _run(a, b)
    acc = chained(a, b, 16, "B200-FP16")   # the kernel's order: k16 steps
    assert np.array_equal(got, acc)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    bound = 3 * 2 ** -22 * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)))
    assert (np.abs(got - exact) <= bound).all()


def test_tcgen05_gemm_f16_small_integers_exact():
    rng = np.random.default_rng(1)
    a = rng.integers(-3, 4, (128, 32)).astype(np.float16)
    b = rng.integers(-3, 4, (32, 64)).astype(np.float16)
    assert np.array_equal(_run(a, b), (a.astype(np.int64) @ b.astype(np.int64)).astype(np.float32))
