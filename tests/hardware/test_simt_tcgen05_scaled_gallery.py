"""The gallery's sm_100a MXFP8 block-scaled GEMM (hardware/simt/gallery/tcgen05_mxfp8_gemm.cu,
nvcc's PTX): E4M3 tiles and E8M0 scale tiles staged in shared memory, the scales copied
into Tensor Memory with tcgen05.cp.32x128b.warpx4, four tcgen05.mma
kind::mxf8f6f4.block_scale per k128 chunk selecting their scales by the descriptor's
scale factor IDs. Inputs are refimpl.scaling MXArrays; checked bit for bit against
refimpl.matmul.mma_block_scaled, exactly against float64 on small integers and powers of
two, and within the truncation bound of the k32 steps against float64 on random data."""
from __future__ import annotations

import numpy as np

from hardware.simt import GlobalMemory, gallery
from refimpl import formats
from refimpl.matmul import mma_block_scaled
from refimpl.scaling import MXArray


def _run(a: MXArray, b: MXArray) -> np.ndarray:
    m, k = a.codes.shape
    n = b.codes.shape[1]
    mem = GlobalMemory()
    ptrs = [mem.to_device(np.ascontiguousarray(x)) for x in (a.codes, a.scales, b.codes,
                                                              b.scales)]
    pc = mem.calloc(m * n * 4)
    gallery.load("tcgen05_mxfp8_gemm").launch("tcgen05_gemm_mxfp8", (n // 64, m // 128), 128,
                                              ptrs + [pc, m, n, k], mem, gpu="B200")
    return mem.from_device(pc, np.float32, (m, n))


def _values(q: MXArray, axis: int) -> np.ndarray:
    """The dequantised operand in float64, independently of refimpl's dequantise."""
    scale = np.ldexp(1.0, q.scales.astype(np.int64) - 127)
    return formats.decode(q.codes, "e4m3").astype(np.float64) * np.repeat(scale, 32, axis=axis)


def test_mxfp8_gemm_matches_mma_block_scaled_and_float64():
    m, n, k = 128, 128, 256
    rng = np.random.default_rng(0)
    a = MXArray(formats.encode(rng.standard_normal((m, k)) * 8, "e4m3").astype(np.uint8),
                rng.integers(115, 140, (m, k // 32)).astype(np.uint8), "e4m3", 32, 1)
    b = MXArray(formats.encode(rng.standard_normal((k, n)), "e4m3").astype(np.uint8),
                rng.integers(115, 140, (k // 32, n)).astype(np.uint8), "e4m3", 32, 0)
    got = _run(a, b)
    assert np.array_equal(got, mma_block_scaled(a, b))
    va, vb = _values(a, 1), _values(b, 0)
    exact = va @ vb
    # each k32 step truncates once to FP32 (RZ) and aligns its products within 25 bits
    bound = (k // 32) * 2 ** -22 * (np.abs(va) @ np.abs(vb))
    assert (np.abs(got - exact) <= bound).all()


def test_mxfp8_gemm_small_integers_and_powers_of_two_exact():
    m, n, k = 128, 64, 128
    rng = np.random.default_rng(1)
    ia, ib = rng.integers(-4, 5, (m, k)), rng.integers(-4, 5, (k, n))
    ea, eb = rng.integers(-3, 4, (m, k // 32)), rng.integers(-3, 4, (k // 32, n))
    a = MXArray(formats.encode(ia.astype(np.float64), "e4m3").astype(np.uint8),
                (127 + ea).astype(np.uint8), "e4m3", 32, 1)
    b = MXArray(formats.encode(ib.astype(np.float64), "e4m3").astype(np.uint8),
                (127 + eb).astype(np.uint8), "e4m3", 32, 0)
    exact = (ia * np.repeat(np.ldexp(1.0, ea), 32, axis=1)) @ \
        (ib * np.repeat(np.ldexp(1.0, eb), 32, axis=0))
    assert np.array_equal(_run(a, b), exact)
