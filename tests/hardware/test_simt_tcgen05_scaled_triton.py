"""Triton's tl.dot_scaled for sm_100 (tests/hardware/data/triton_sm100/dot_scaled_*.ptx,
made by generate.py there; no test needs Triton) run on gpu="B200". Triton stores the
scales of A and B into Tensor Memory with tcgen05.st.32x32b.x4 (each warp its lane
quarter, the same tile in all four), then one thread issues the block-scaled
tcgen05.mma of the formats (kind::mxf8f6f4.block32 for FP8 and FP8 x FP4, four k32 steps
with scale factor IDs 0-3; kind::mxf4.block32 for FP4 x FP4 and kind::mxf4nvf4.block16 for
NVFP4, two k64 steps) into the accumulator that tcgen05.st zeroed, commits them to an
mbarrier and every warp loads D with tcgen05.ld. Inputs are built as refimpl.scaling
MXArrays (E8M0 scales per 32 along K) or NVFP4Arrays (E4M3 scales per 16); the result is
checked bit for bit against refimpl.matmul.mma_block_scaled and, on small integers and
powers of two, against the exact product in float64. The TMA-fed kernels of Triton's
block-scaled tutorial (dot_scaled_tma_*: MXFP8, MXFP4 and NVFP4; tensor descriptors for
the element tiles and the preshuffled 5-D scales, tcgen05.cp.warpx4.32x128b of the scales
into Tensor Memory, whose scale-factor IDs then pick bytes or half-words, a two-stage
pipeline over K) run on 1 x 2 and 2 x 2 grids the same way."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hardware.simt import GlobalMemory, load_ptx
from hardware.simt.tensormap import encode_tiled
from refimpl import formats
from refimpl.matmul import mma_block_scaled
from refimpl.scaling import MXArray, NVFP4Array

DATA = Path(__file__).parent / "data" / "triton_sm100"
META = json.loads((DATA / "metadata.json").read_text())
NAMES = sorted(n for n in META if n.startswith("dot_scaled_")
               and not n.startswith("dot_scaled_tma_"))
M = N = K = 128
_TYPES = {"*fp8e4nv": "e4m3", "*fp8e5": "e5m2"}


def _formats(name: str) -> tuple[str, str, int]:
    """A's and B's element formats and the scale block of kernel ``name``."""
    meta = META[name]
    if name == "dot_scaled_nvfp4":
        return "e2m1", "e2m1", 16
    c = meta["constexprs"]
    sig = meta["signature"]
    return (_TYPES.get(sig["a_ptr"], c.get("A_FMT")), _TYPES.get(sig["b_ptr"], c.get("B_FMT")),
            32)


def _pack(codes: np.ndarray, fmt: str, axis: int) -> np.ndarray:
    """E2M1 codes two to a byte along K (axis), the first in the low bits (Triton's
    packing); other formats one to a byte."""
    if fmt != "e2m1":
        return codes
    lo, hi = (codes[:, 0::2], codes[:, 1::2]) if axis == 1 else (codes[0::2], codes[1::2])
    return lo | (hi << 4)


def launch(name: str, a: np.ndarray, sa: np.ndarray, b: np.ndarray,
           sb: np.ndarray) -> np.ndarray:
    """a (M, K) and b (K, N) element codes, sa (M, K/bs) and sb (N, K/bs) scale codes
    (the kernels' pointer layouts)."""
    fa, fb, _ = _formats(name)
    meta = META[name]
    mem = GlobalMemory()
    ptrs = [mem.to_device(np.ascontiguousarray(x))
            for x in (_pack(a, fa, 1), sa, _pack(b, fb, 0), sb)]
    pc = mem.calloc(M * N * 4)
    load_ptx((DATA / f"{name}.ptx").read_text()).launch(
        meta["kernel"], 1, 32 * meta["num_warps"], ptrs + [pc, 0, 0], mem,
        dynamic_shared=meta["shared"], gpu="B200")
    return mem.from_device(pc, np.float32, (M, N))


def test_every_dot_scaled_kind_is_covered():
    kinds = set()
    for name in NAMES:
        text = (DATA / f"{name}.ptx").read_text()
        kinds |= {line.split("tcgen05.mma.")[1].split()[0] for line in text.splitlines()
                  if "tcgen05.mma." in line}
    assert kinds == {"cta_group::1.kind::mxf8f6f4.block_scale.block32",
                     "cta_group::1.kind::mxf4.block_scale.block32",
                     "cta_group::1.kind::mxf4nvf4.block_scale.block16"}


@pytest.mark.parametrize("name", NAMES)
def test_triton_dot_scaled_matches_mma_block_scaled(name):
    fa, fb, bs = _formats(name)
    rng = np.random.default_rng(len(name))
    a = formats.encode(rng.standard_normal((M, K)) * 4, fa).astype(np.uint8)
    b = formats.encode(rng.standard_normal((K, N)), fb).astype(np.uint8)
    if bs == 16:
        sa, sb = (formats.encode(rng.uniform(0.01, 50, s), "e4m3").astype(np.uint8)
                  for s in ((M, K // 16), (N, K // 16)))
        ref = mma_block_scaled(NVFP4Array(a, sa, 1.0, axis=1),
                               NVFP4Array(b, sb.T.copy(), 1.0, axis=0))
    else:
        sa = rng.integers(112, 142, (M, K // 32)).astype(np.uint8)
        sb = rng.integers(112, 142, (N, K // 32)).astype(np.uint8)
        ref = mma_block_scaled(MXArray(a, sa, fa, 32, 1), MXArray(b, sb.T.copy(), fb, 32, 0))
    assert np.array_equal(launch(name, a, sa, b, sb), ref)


@pytest.mark.parametrize("name", NAMES)
def test_triton_dot_scaled_exact_on_small_values(name):
    fa, fb, bs = _formats(name)
    rng = np.random.default_rng(5)
    # values every format holds exactly (E2M1: 0, 0.5, 1, 1.5, 2, 3, 4, 6)
    va = rng.choice([-3.0, -1.5, -0.5, 0.0, 1.0, 2.0, 4.0], (M, K))
    vb = rng.choice([-2.0, -1.0, 0.0, 0.5, 1.5, 3.0, 6.0], (K, N))
    a, b = formats.encode(va, fa).astype(np.uint8), formats.encode(vb, fb).astype(np.uint8)
    if bs == 16:
        fsa, fsb = (rng.choice([0.25, 0.75, 1.0, 1.5, 3.0, 8.0], s)
                    for s in ((M, K // 16), (N, K // 16)))
        sa, sb = (formats.encode(x, "e4m3").astype(np.uint8) for x in (fsa, fsb))
    else:
        ea, eb = rng.integers(-3, 4, (M, K // 32)), rng.integers(-3, 4, (N, K // 32))
        fsa, fsb = np.ldexp(1.0, ea), np.ldexp(1.0, eb)
        sa, sb = (127 + ea).astype(np.uint8), (127 + eb).astype(np.uint8)
    exact = (va * np.repeat(fsa, bs, axis=1)) @ (vb * np.repeat(fsb, bs, axis=1).T)
    assert np.array_equal(launch(name, a, sa, b, sb), exact)


TMA = sorted(n for n in META if n.startswith("dot_scaled_tma_"))


def _preshuffle(sf: np.ndarray) -> np.ndarray:
    """(R, K/vec) scale codes -> the tutorial's (1, R/128, K/vec/4, 2, 256) layout: per
    128 rows and 4 K-blocks, row r holds rows 32 c + r's four K-blocks (c, then the
    block)."""
    r, kb = sf.shape
    t = sf.reshape(r // 128, 4, 32, kb // 4, 4).transpose(0, 3, 2, 1, 4)
    return np.ascontiguousarray(t).reshape(1, r // 128, kb // 4, 2, 256)


def launch_tma(name: str, a: np.ndarray, sa: np.ndarray, bt: np.ndarray,
               sb: np.ndarray) -> np.ndarray:
    """a (M, K) and bt (N, K) element codes, sa (M, K/vec) and sb (N, K/vec) scale
    codes."""
    meta = META[name]
    c = meta["constexprs"]
    vec, bk, fmt = int(c["VEC_SIZE"]), int(c["BLOCK_K"]), c["FMT"]
    (m, k), n = a.shape, bt.shape[0]
    kbytes = k // 2 if fmt == "e2m1" else k
    mem = GlobalMemory()
    pa, pb = (mem.to_device(np.ascontiguousarray(_pack(x, fmt, 1))) for x in (a, bt))
    psa, psb = mem.to_device(_preshuffle(sa)), mem.to_device(_preshuffle(sb))
    pc = mem.calloc(m * n * 4)

    def tile(p: int, rows: int) -> list:   # the 128-byte map, then shape and strides
        return [encode_tiled("uint8", 2, p, [kbytes, rows], [kbytes], [128, 128], [1, 1],
                             swizzle="128B"), rows, kbytes, kbytes, 1]

    def scales(p: int, rows: int) -> list:
        kb = k // vec // 4
        dims = [256, 2, kb, rows // 128, 1]
        strides = [256, 512, 512 * kb, 512 * kb * (rows // 128)]
        box = [256, 2, bk // vec // 4, 1, 1]
        return [encode_tiled("uint8", 5, p, dims, strides, box, [1] * 5), *dims[::-1],
                *([0] * 5)]
    args = tile(pa, m) + scales(psa, m) + tile(pb, n) + scales(psb, n) + [pc, m, n, k, 0, 0]
    assert len(args) == meta["params"]
    load_ptx((DATA / f"{name}.ptx").read_text()).launch(
        meta["kernel"], (m // 128, n // 128), 32 * meta["num_warps"], args, mem,
        dynamic_shared=meta["shared"], gpu="B200")
    return mem.from_device(pc, np.float32, (m, n))


def _tma_kind(name: str) -> tuple[str, int]:
    c = META[name]["constexprs"]
    return c["FMT"], int(c["VEC_SIZE"])


def _operands(q_a, q_b, fmt: str, vec: int):
    """mma_block_scaled's operands of A (M x K) and B^T (N x K) codes and scales."""
    a, sa = q_a
    bt, sb = q_b
    if vec == 16:
        return (NVFP4Array(a, sa, 1.0, axis=1), NVFP4Array(bt.T.copy(), sb.T.copy(), 1.0, axis=0))
    return (MXArray(a, sa, fmt, 32, 1), MXArray(bt.T.copy(), sb.T.copy(), fmt, 32, 0))


@pytest.mark.parametrize("name", TMA)
def test_triton_tma_block_scaled_matmul_matches_mma_block_scaled(name):
    fmt, vec = _tma_kind(name)
    m, n, k = 256, 256, 512
    rng = np.random.default_rng(11)
    a = formats.encode(rng.standard_normal((m, k)) * 4, fmt).astype(np.uint8)
    bt = formats.encode(rng.standard_normal((n, k)), fmt).astype(np.uint8)
    if vec == 16:
        sa, sb = (formats.encode(rng.uniform(0.01, 50, (r, k // 16)), "e4m3").astype(np.uint8)
                  for r in (m, n))
    else:
        sa, sb = (rng.integers(112, 142, (r, k // 32)).astype(np.uint8) for r in (m, n))
    ref = mma_block_scaled(*_operands((a, sa), (bt, sb), fmt, vec))
    assert np.array_equal(launch_tma(name, a, sa, bt, sb), ref)


@pytest.mark.parametrize("name", TMA)
def test_triton_tma_block_scaled_matmul_exact_on_small_values(name):
    fmt, vec = _tma_kind(name)
    m, n, k = 128, 256, 512
    rng = np.random.default_rng(12)
    va = rng.choice([-3.0, -1.5, -0.5, 0.0, 1.0, 2.0, 4.0], (m, k))
    vb = rng.choice([-2.0, -1.0, 0.0, 0.5, 1.5, 3.0, 6.0], (n, k))
    a, bt = (formats.encode(x, fmt).astype(np.uint8) for x in (va, vb))
    if vec == 16:
        fsa, fsb = (rng.choice([0.25, 0.75, 1.0, 1.5, 3.0, 8.0], (r, k // 16)) for r in (m, n))
        sa, sb = (formats.encode(x, "e4m3").astype(np.uint8) for x in (fsa, fsb))
    else:
        ea, eb = (rng.integers(-3, 4, (r, k // 32)) for r in (m, n))
        fsa, fsb = np.ldexp(1.0, ea), np.ldexp(1.0, eb)
        sa, sb = (127 + ea).astype(np.uint8), (127 + eb).astype(np.uint8)
    exact = (va * np.repeat(fsa, vec, axis=1)) @ (vb * np.repeat(fsb, vec, axis=1)).T
    assert np.array_equal(launch_tma(name, a, sa, bt, sb), exact)
