"""Triton's tl.dot_scaled for sm_100 (tests/hardware/data/triton_sm100/dot_scaled_e4m3.ptx,
made by generate.py there; no test needs Triton) run on gpu="B200": Triton stores the
E8M0 scales of A and B into Tensor Memory with tcgen05.st.32x32b.x4 (columns 128-131 and
132-135, each warp its lane quarter, the same tile in all four), then one thread issues
four tcgen05.mma.kind::mxf8f6f4.block_scale.block32 (K = 32 each, scale factor IDs 0-3
selecting the byte of each cell) into the accumulator that tcgen05.st zeroed, commits
them to an mbarrier and every warp loads D with tcgen05.ld. Inputs are built as
refimpl.scaling MXArrays (E4M3 elements, E8M0 scales per 32 along K); the result is
checked bit for bit against refimpl.matmul.mma_block_scaled and, on small integers and
powers of two, against the exact product in float64."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hardware.simt import GlobalMemory, load_ptx
from refimpl import formats
from refimpl.matmul import mma_block_scaled
from refimpl.scaling import MXArray

DATA = Path(__file__).parent / "data" / "triton_sm100"
META = json.loads((DATA / "metadata.json").read_text())["dot_scaled_e4m3"]
M = N = K = 128


def launch(a: np.ndarray, sa: np.ndarray, b: np.ndarray, sb: np.ndarray) -> np.ndarray:
    """a (M, K) and b (K, N) E4M3 codes, sa (M, K/32) and sb (N, K/32) E8M0 codes (the
    kernel's pointer layouts)."""
    mem = GlobalMemory()
    ptrs = [mem.to_device(np.ascontiguousarray(x)) for x in (a, sa, b, sb)]
    pc = mem.calloc(M * N * 4)
    load_ptx((DATA / "dot_scaled_e4m3.ptx").read_text()).launch(
        META["kernel"], 1, 32 * META["num_warps"], ptrs + [pc, 0, 0], mem,
        dynamic_shared=META["shared"], gpu="B200")
    return mem.from_device(pc, np.float32, (M, N))


@pytest.mark.parametrize("seed", [0, 1])
def test_triton_dot_scaled_matches_mma_block_scaled(seed):
    rng = np.random.default_rng(seed)
    a = formats.encode(rng.standard_normal((M, K)) * 4, "e4m3").astype(np.uint8)
    b = formats.encode(rng.standard_normal((K, N)), "e4m3").astype(np.uint8)
    sa = rng.integers(112, 142, (M, K // 32)).astype(np.uint8)
    sb = rng.integers(112, 142, (N, K // 32)).astype(np.uint8)
    got = launch(a, sa, b, sb)
    ref = mma_block_scaled(MXArray(a, sa, "e4m3", 32, 1), MXArray(b, sb.T.copy(), "e4m3", 32, 0))
    assert np.array_equal(got, ref)


def test_triton_dot_scaled_exact_on_small_integers():
    rng = np.random.default_rng(5)
    va = rng.integers(-4, 5, (M, K)).astype(np.float64)
    vb = rng.integers(-4, 5, (K, N)).astype(np.float64)
    ea, eb = rng.integers(-3, 4, (M, K // 32)), rng.integers(-3, 4, (N, K // 32))
    a, b = (formats.encode(x, "e4m3").astype(np.uint8) for x in (va, vb))
    got = launch(a, (127 + ea).astype(np.uint8), b, (127 + eb).astype(np.uint8))
    exact = (va * np.repeat(np.ldexp(1.0, ea), 32, axis=1)) @ \
        (vb * np.repeat(np.ldexp(1.0, eb), 32, axis=1).T)
    assert np.array_equal(got, exact)
