"""A CUTLASS 3.x GEMM for Hopper in the interpreter: the TMA warp-specialized FP16 kernel
that CUTLASS's collective builders make (tests/hardware/data/cutlass3_sm90: nvcc's
sm_90a PTX, and the Params that CUTLASS's own host code fills for a 256^3 problem with
alpha = 1, beta = 0.5). A producer warpgroup issues cp.async.bulk.tensor loads of
128-byte-swizzled A and B tiles into a multistage mbarrier ring; a consumer warpgroup
issues wgmma.mma_async m64n128k16 with FP32 accumulators and the default epilogue
writes D = alpha acc + beta C with plain stores. Checked bit for bit against
refimpl.matmul chained over k16 with the GPU's FP16 preset (wgmma's arithmetic,
spot-checked against the preset's plain rational model), the TMA bytes and wgmma counts
computed by hand from the tiling."""
from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

from hardware.simt import GlobalMemory, load_ptx
from hardware.simt.tensormap import (DTYPES, INTERLEAVES, L2_PROMOTIONS, OOB_FILLS, SWIZZLES,
                                     encode_tiled)
from refimpl import matmul as mm
from refimpl.matmul import presets

DATA = pathlib.Path(__file__).parent / "data" / "cutlass3_sm90"
META = json.loads((DATA / "ws_gemm_params.json").read_text())
TILE = 128          # TileShape 128 x 128 x 64: one CTA's M and N


def _operands():
    m, n, k = META["problem"]
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype(np.float16)      # A row-major (M x K)
    bt = rng.standard_normal((n, k)).astype(np.float16)     # B column-major: N rows of K
    ct = rng.standard_normal((n, m)).astype(np.float32)     # C column-major: N rows of M
    return a, bt, ct


def _params(pointers: dict[str, int]) -> bytes:
    """META's Params with the test's pointers and tensor maps written in."""
    params = bytearray.fromhex(META["params"])
    for name, offsets in META["pointers"].items():
        for o in offsets:
            params[o:o + 8] = pointers[name].to_bytes(8, "little")
    for tm in META["maps"]:
        raw = encode_tiled(DTYPES[tm["dtype"]][0], tm["rank"], pointers[tm["operand"]],
                           tm["dims"], tm["strides"], tm["box"], tm["element_strides"],
                           interleave=INTERLEAVES[tm["interleave"]],
                           swizzle=list(SWIZZLES)[tm["swizzle"]],
                           l2_promotion=L2_PROMOTIONS[tm["l2_promotion"]],
                           oob_fill=OOB_FILLS[tm["oob_fill"]])
        (o,) = tm["offset"]
        params[o:o + 128] = raw.tobytes()
    return bytes(params)


def _run(gpu: str):
    a, bt, ct = _operands()
    m, n, _ = META["problem"]
    mem = GlobalMemory()
    ptr = {"A": mem.to_device(a), "B": mem.to_device(bt), "C": mem.to_device(ct),
           "D": mem.calloc(m * n * 4)}
    mod = load_ptx((DATA / "ws_gemm.ptx").read_text())
    st = mod.launch(META["kernel"], tuple(META["grid"]), tuple(META["block"]),
                    [_params(ptr)], mem, dynamic_shared=META["dynamic_shared"], gpu=gpu)
    d = mem.from_device(ptr["D"], np.float32, (n, m)).T
    return d, st


def test_the_recorded_launch_is_what_the_tiling_says():
    m, n, k = META["problem"]
    assert META["grid"] == [m // TILE, n // TILE, 1]
    assert META["block"] == [256, 1, 1]                      # producer + consumer warpgroup
    assert len(bytearray.fromhex(META["params"])) == 896
    # A and B reach the kernel only through their tensor maps, C and D as pointers
    assert META["pointers"]["A"] == [] and META["pointers"]["B"] == []
    assert [tm["operand"] for tm in META["maps"]] == ["A", "B"]
    assert all(len(v) == 1 for k_, v in META["pointers"].items() if k_ in "CD")


@pytest.mark.parametrize("gpu", ["H100", "H200"])
def test_cutlass3_warp_specialized_gemm_bit_for_bit(gpu):
    d, st = _run(gpu)
    a, bt, ct = _operands()
    m, n, k = META["problem"]
    assert META["alpha"] == 1.0 and META["beta"] == 0.5
    acc = np.zeros((m, n), np.float32)
    b = bt.T
    for k0 in range(0, k, 16):          # one wgmma k16 step after the other, from zero
        acc = np.asarray(mm.matmul(a[:, k0:k0 + 16].astype(np.float32),
                                   b[k0:k0 + 16].astype(np.float32), acc,
                                   accumulate=f"{gpu}-FP16", out_format="fp32"), np.float32)
    # epilogue: fma(alpha, acc, beta * c) with alpha = 1 and beta * c exact: one IEEE
    # binary32 addition, as NumPy's float32 add computes it
    want = acc + np.float32(0.5) * ct.T
    assert np.array_equal(d.view(np.uint32), want.view(np.uint32))
    model = presets.preset(f"{gpu}-FP16")
    for i, j in ((0, 0), (255, 255), (130, 7), (64, 200)):
        ref = 0.0
        for k0 in range(0, k, 16):
            ref = model.dot_reference(a[i, k0:k0 + 16], b[k0:k0 + 16, j], ref)
        assert d[i, j] == np.float32(np.float32(ref) + np.float32(0.5) * ct[j, i])
    # close to the float64 product (a wrong tile placement would not be)
    exact = a.astype(np.float64) @ b.astype(np.float64) + 0.5 * ct.T.astype(np.float64)
    assert np.max(np.abs(d - exact)) < 1e-3
    tiles = (m // TILE) * (n // TILE)
    assert st.wgmma_instructions == tiles * (k // 16) * (TILE // 64)   # m64 per wgmma
    assert st.wgmma_flops == 2 * m * n * k
    # each CTA loads its 128 rows of A and of B, all of K, in FP16
    assert st.tma_bytes == tiles * 2 * (TILE * k * 2)
    # by map: the maps are .param objects, keyed by their offset in the parameters
    assert st.tma_load_bytes == {tm["offset"][0]: tiles * TILE * k * 2 for tm in META["maps"]}
