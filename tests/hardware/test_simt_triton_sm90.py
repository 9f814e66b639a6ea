"""PTX that Triton emits for sm_90 (tests/hardware/data/triton_sm90, made by generate.py
there; no test needs Triton) run by the interpreter on gpu="H100", bit for bit against
NumPy references built from refimpl.matmul with the same preset, chained over K in the
order the kernels issue their wgmma.mma_async (k16 steps for FP16, k32 for FP8)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hardware.simt import GlobalMemory, load_ptx
from refimpl import formats
from refimpl import matmul as mm

DATA = Path(__file__).parent / "data" / "triton_sm90"
META = json.loads((DATA / "metadata.json").read_text())


def chained(a: np.ndarray, b: np.ndarray, step: int, preset: str,
            c: np.ndarray | None = None) -> np.ndarray:
    """A B through ``preset`` one k-step at a time, the accumulator carried in FP32."""
    acc = c
    for k0 in range(0, a.shape[1], step):
        acc = np.asarray(mm.matmul(a[:, k0:k0 + step].astype(np.float32),
                                   b[k0:k0 + step].astype(np.float32), acc,
                                   accumulate=preset, out_format="fp32"), np.float32)
    return acc


def launch(name: str, grid: tuple, args: list, mem: GlobalMemory) -> None:
    meta = META[name]
    mod = load_ptx((DATA / f"{name}.ptx").read_text())
    mod.launch(meta["kernel"], grid, 32 * meta["num_warps"], args + [0, 0], mem,
               dynamic_shared=meta["shared"], gpu="H100")


def test_matmul_fp16():
    m, n, k = 128, 64, 96
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    mem = GlobalMemory()
    pa, pb = mem.to_device(a), mem.to_device(b)
    pc = mem.calloc(m * n * 2)
    launch("matmul_fp16", (m // 64, n // 64), [pa, pb, pc, m, n, k, k, n, n], mem)
    got = mem.from_device(pc, np.float16, (m, n))
    acc = chained(a, b, 16, "H100-FP16", np.zeros((m, n), np.float32))
    assert np.array_equal(got.view(np.uint16), acc.astype(np.float16).view(np.uint16))
    # the preset is not the exact product rounded once (so the check could fail)
    exact = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    assert not np.array_equal(acc, exact)


def test_matmul_e4m3():
    m, n, k = 64, 128, 128
    rng = np.random.default_rng(1)
    ca = formats.encode(rng.standard_normal((m, k)).astype(np.float32), "e4m3")
    cb = formats.encode(rng.standard_normal((k, n)).astype(np.float32), "e4m3")
    a = formats.decode(ca, "e4m3").astype(np.float32)
    b = formats.decode(cb, "e4m3").astype(np.float32)
    mem = GlobalMemory()
    pa = mem.to_device(np.asarray(ca, np.uint8))
    pb = mem.to_device(np.asarray(cb, np.uint8))
    pc = mem.calloc(m * n * 4)
    launch("matmul_e4m3", (m // 64, n // 64), [pa, pb, pc, m, n, k, k, n, n], mem)
    got = mem.from_device(pc, np.float32, (m, n))
    acc = chained(a, b, 32, "H100-E4M3", np.zeros((m, n), np.float32))
    assert np.array_equal(got.view(np.uint32), acc.view(np.uint32))


def test_attention_step_p_from_registers():
    rng = np.random.default_rng(2)
    # small integers: S = Q K^T is exact and exp2(S - rowmax) a power of two, so every
    # step but the P V product is exact; that one goes through the preset
    q = rng.integers(-2, 3, (64, 64)).astype(np.float16)
    kk = rng.integers(-2, 3, (64, 64)).astype(np.float16)
    v = rng.standard_normal((64, 64)).astype(np.float16)
    mem = GlobalMemory()
    ptrs = [mem.to_device(x) for x in (q, kk, v)]
    po = mem.calloc(64 * 64 * 4)
    launch("attention_step_fp16", (1,), ptrs + [po], mem)
    got = mem.from_device(po, np.float32, (64, 64))
    s = q.astype(np.float64) @ kk.astype(np.float64).T
    p = np.exp2(s - s.max(axis=1, keepdims=True)).astype(np.float16)
    o = chained(p, v, 16, "H100-FP16")
    assert np.array_equal(got.view(np.uint32), o.view(np.uint32))
    assert (p < 1).any() and (p == 1).any()
