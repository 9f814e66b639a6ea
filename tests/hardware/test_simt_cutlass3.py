"""CUTLASS 3.x GEMMs for Hopper in the interpreter: the TMA warp-specialized kernels that
CUTLASS's collective builders make (tests/hardware/data/cutlass3_sm90: nvcc's sm_90a PTX
of each variant, and the Params that CUTLASS's own host code fills for a 256^3 problem
with alpha = 1, beta = 0.5). A producer warpgroup issues cp.async.bulk.tensor loads of
128-byte-swizzled A and B tiles into a multistage mbarrier ring; consumer warpgroups
issue wgmma.mma_async with FP32 accumulators; the epilogue writes D = alpha acc + beta C
with plain stores or, in the persistent variants, through TMA. Variants: one consumer
(ws_gemm), a cluster of two CTAs sharing B by TMA multicast (ws_cluster2), FP8 E4M3
operands (ws_e4m3), and the persistent cooperative and ping-pong schedules with the TMA
epilogue. Checked bit for bit against refimpl.matmul chained over wgmma's k steps with
the GPU's preset (spot-checked against the preset's plain rational model), the TMA load
bytes and wgmma counts computed by hand from the tiling."""
from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

from hardware.simt import GlobalMemory, load_ptx
from hardware.simt.tensormap import (DTYPES, INTERLEAVES, L2_PROMOTIONS, OOB_FILLS, SWIZZLES,
                                     encode_tiled)
from refimpl import formats
from refimpl import matmul as mm
from refimpl.matmul import presets

DATA = pathlib.Path(__file__).parent / "data" / "cutlass3_sm90"
VARIANTS = ("ws_gemm", "ws_cluster2", "ws_e4m3", "ws_cooperative", "ws_pingpong")
TILE = 128          # TileShape 128 x 128 x (128 bytes of K): one CTA tile's M and N


def _meta(variant: str) -> dict:
    return json.loads((DATA / f"{variant}_params.json").read_text())


def _fp8(meta: dict) -> bool:
    return "-DELEMENT=cutlass::float_e4m3_t" in meta["macros"]


def _operands(meta: dict):
    """A row-major (M x K), B column-major (N rows of K), C column-major (N rows of M), and
    the values of A and B in float32."""
    m, n, k = meta["problem"]
    rng = np.random.default_rng(0)
    if _fp8(meta):
        a = formats.encode(rng.standard_normal((m, k)), "e4m3").astype(np.uint8)
        bt = formats.encode(rng.standard_normal((n, k)), "e4m3").astype(np.uint8)
        av = formats.decode(a, "e4m3").astype(np.float32)
        bv = formats.decode(bt, "e4m3").astype(np.float32)
    else:
        a = rng.standard_normal((m, k)).astype(np.float16)
        bt = rng.standard_normal((n, k)).astype(np.float16)
        av, bv = a.astype(np.float32), bt.astype(np.float32)
    ct = rng.standard_normal((n, m)).astype(np.float32)
    return a, bt, ct, av, bv.T


def _params(meta: dict, pointers: dict[str, int]) -> bytes:
    """The recorded Params with the test's pointers and tensor maps written in."""
    params = bytearray.fromhex(meta["params"])
    for name, offsets in meta["pointers"].items():
        for o in offsets:
            params[o:o + 8] = pointers[name].to_bytes(8, "little")
    for tm in meta["maps"]:
        raw = encode_tiled(DTYPES[tm["dtype"]][0], tm["rank"], pointers[tm["operand"]],
                           tm["dims"], tm["strides"], tm["box"], tm["element_strides"],
                           interleave=INTERLEAVES[tm["interleave"]],
                           swizzle=list(SWIZZLES)[tm["swizzle"]],
                           l2_promotion=L2_PROMOTIONS[tm["l2_promotion"]],
                           oob_fill=OOB_FILLS[tm["oob_fill"]])
        (o,) = tm["offset"]
        params[o:o + 128] = raw.tobytes()
    return bytes(params)


def _run(variant: str, gpu: str):
    meta = _meta(variant)
    a, bt, ct, _, _ = _operands(meta)
    m, n, _ = meta["problem"]
    mem = GlobalMemory()
    ptr = {"A": mem.to_device(a), "B": mem.to_device(bt), "C": mem.to_device(ct),
           "D": mem.calloc(m * n * 4)}
    cluster = (2, 1, 1) if "-DCLUSTER_M=2" in meta["macros"] else None
    mod = load_ptx((DATA / f"{variant}.ptx").read_text())
    st = mod.launch(meta["kernel"], tuple(meta["grid"]), tuple(meta["block"]),
                    [_params(meta, ptr)], mem, dynamic_shared=meta["dynamic_shared"],
                    gpu=gpu, cluster=cluster)
    return mem.from_device(ptr["D"], np.float32, (n, m)).T, st


def _expected(meta: dict, gpu: str) -> np.ndarray:
    """D as the kernel computes it: wgmma k steps (16 FP16 or 32 FP8 elements) chained
    from zero with the GPU's preset; for FP8, CUTLASS's two-level accumulation
    (GmmaFP8Accumulation, mma_promotion_interval = 4 wgmma: every k-block of 128 elements
    is a chain of its own from zero, added into the FP32 accumulator with one RN
    addition); then the epilogue fma(alpha, acc, beta * c) with alpha = 1 and beta * c
    exact: one binary32 addition, as NumPy's float32 add computes it."""
    _, _, ct, av, b = _operands(meta)
    m, n, k = meta["problem"]
    fp8 = _fp8(meta)
    step, preset = (32, f"{gpu}-E4M3") if fp8 else (16, f"{gpu}-FP16")
    block = 128 if fp8 else k
    acc = np.zeros((m, n), np.float32)
    for kb in range(0, k, block):
        part = np.zeros((m, n), np.float32)
        for k0 in range(kb, kb + block, step):
            part = np.asarray(mm.matmul(av[:, k0:k0 + step], b[k0:k0 + step], part,
                                        accumulate=preset, out_format="fp32"), np.float32)
        acc = part if not fp8 else acc + part
    assert meta["alpha"] == 1.0 and meta["beta"] == 0.5
    return acc + np.float32(0.5) * ct.T


def test_the_recorded_launches_are_what_the_tilings_say():
    for v in VARIANTS:
        meta = _meta(v)
        m, n, _ = meta["problem"]
        persistent = v in ("ws_cooperative", "ws_pingpong")
        # persistent kernels: one CTA per tile here (fewer tiles than the 132 SMs)
        assert meta["grid"] == ([1, (m // TILE) * (n // TILE), 1] if persistent
                                else [m // TILE, n // TILE, 1]), v
        # a producer warpgroup and one or two consumer warpgroups
        assert meta["block"] == [384 if persistent else 256, 1, 1], v
        # A and B reach the kernel through their tensor maps only
        assert meta["pointers"]["A"] == [] == meta["pointers"]["B"], v
        assert [tm["operand"] for tm in meta["maps"]][:2] == ["A", "B"], v


@pytest.mark.parametrize("variant,gpu", [("ws_gemm", "H100"), ("ws_gemm", "H200"),
                                         ("ws_cluster2", "H100"), ("ws_e4m3", "H100"),
                                         ("ws_cooperative", "H100"), ("ws_pingpong", "H200")])
def test_cutlass3_gemm_bit_for_bit(variant, gpu):
    meta = _meta(variant)
    d, st = _run(variant, gpu)
    want = _expected(meta, gpu)
    assert np.array_equal(d.view(np.uint32), want.view(np.uint32))
    m, n, k = meta["problem"]
    _, _, ct, av, b = _operands(meta)
    if not _fp8(meta):
        model = presets.preset(f"{gpu}-FP16")
        for i, j in ((0, 0), (255, 255), (130, 7), (64, 200)):
            ref = 0.0
            for k0 in range(0, k, 16):
                ref = model.dot_reference(av[i, k0:k0 + 16], b[k0:k0 + 16, j], ref)
            assert d[i, j] == np.float32(np.float32(ref) + np.float32(0.5) * ct[j, i])
    # close to the float64 product (a misplaced tile would not be)
    exact = av.astype(np.float64) @ b.astype(np.float64) + 0.5 * ct.T.astype(np.float64)
    assert np.max(np.abs(d - exact)) < (0.05 if _fp8(meta) else 1e-3)
    tiles = (m // TILE) * (n // TILE)
    kstep = 32 if _fp8(meta) else 16
    assert st.wgmma_instructions == tiles * (k // kstep) * (TILE // 64)   # m64 each
    assert st.wgmma_flops == 2 * m * n * k
    # every CTA loads its 128 rows of A and of B over all of K; in a cluster of two along
    # M, B's box is loaded once and multicast to both CTAs (a box counts once)
    ebytes = 1 if _fp8(meta) else 2
    per_map = tiles * TILE * k * ebytes
    maps = {tm["operand"]: tm["offset"][0] for tm in meta["maps"]}
    assert st.tma_load_bytes[maps["A"]] == per_map
    assert st.tma_load_bytes[maps["B"]] == (per_map // 2 if variant == "ws_cluster2"
                                            else per_map)
    if "C" in maps:                       # the TMA epilogue reads C through its map
        assert st.tma_load_bytes[maps["C"]] == m * n * 4
