"""A CUTLASS 2.x GEMM for Ampere in the interpreter: cutlass::gemm::device::Gemm with
FP16 tensor-core operands, FP32 accumulation, a three-stage cp.async pipeline and
mma.sync m16n8k16 (tests/hardware/data/cutlass2_sm80: nvcc's sm_80 PTX and the Params
CUTLASS's own host code fills for a 256^3 problem with alpha = 1, beta = 0.5; the kernel
reads its by-value Params through the parameter's address). Checked bit for bit against
refimpl.matmul chained over mma's k16 steps with the GPU's FP16 preset, spot-checked
against the preset's plain rational model; the global traffic computed from the tiling."""
from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

from hardware.simt import GlobalMemory, load_ptx
from refimpl import matmul as mm
from refimpl.matmul import presets

DATA = pathlib.Path(__file__).parent / "data" / "cutlass2_sm80"
META = json.loads((DATA / "gemm_sm80_params.json").read_text())


def _operands():
    m, n, k = META["problem"]
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype(np.float16)      # A row-major (M x K)
    bt = rng.standard_normal((n, k)).astype(np.float16)     # B column-major: N rows of K
    c = rng.standard_normal((m, n)).astype(np.float32)      # C row-major
    return a, bt, c


@pytest.mark.parametrize("gpu", ["A100", "H100"])
def test_cutlass2_gemm_bit_for_bit(gpu):
    a, bt, c = _operands()
    m, n, k = META["problem"]
    mem = GlobalMemory()
    ptr = {"A": mem.to_device(a), "B": mem.to_device(bt), "C": mem.to_device(c),
           "D": mem.calloc(m * n * 4)}
    params = bytearray.fromhex(META["params"])
    for name, offsets in META["pointers"].items():
        assert len(offsets) == 1, name          # each pointer is one field of Params
        params[offsets[0]:offsets[0] + 8] = ptr[name].to_bytes(8, "little")
    st = load_ptx((DATA / "gemm_sm80.ptx").read_text()).launch(
        META["kernel"], tuple(META["grid"]), tuple(META["block"]), [bytes(params)], mem,
        dynamic_shared=META["dynamic_shared"], gpu=gpu)
    d = mem.from_device(ptr["D"], np.float32, (m, n))
    b = bt.T.astype(np.float32)
    acc = np.zeros((m, n), np.float32)
    for k0 in range(0, k, 16):          # one mma.sync k16 after the other, from zero
        acc = np.asarray(mm.matmul(a[:, k0:k0 + 16].astype(np.float32), b[k0:k0 + 16], acc,
                                   accumulate=f"{gpu}-FP16", out_format="fp32"), np.float32)
    # epilogue fma(alpha, acc, beta * c) with alpha = 1, beta * c exact: one binary32 add
    assert META["alpha"] == 1.0 and META["beta"] == 0.5
    want = acc + np.float32(0.5) * c
    assert np.array_equal(d.view(np.uint32), want.view(np.uint32))
    model = presets.preset(f"{gpu}-FP16")
    for i, j in ((0, 0), (255, 255), (130, 7)):
        ref = 0.0
        for k0 in range(0, k, 16):
            ref = model.dot_reference(a[i, k0:k0 + 16], b[k0:k0 + 16, j], ref)
        assert d[i, j] == np.float32(np.float32(ref) + np.float32(0.5) * c[i, j])
    exact = a.astype(np.float64) @ b.astype(np.float64) + 0.5 * c
    assert np.max(np.abs(d - exact)) < 1e-3
    # every CTA reads its 128 rows of A and of B over all of K (cp.async, FP16), the
    # epilogue reads C once (beta != 0) and writes D once, all in whole 32-byte sectors
    tiles = (m // 128) * (n // 128)
    loads = tiles * 2 * 128 * k * 2 + m * n * 4
    assert st.global_load_bytes == loads and st.global_load_sectors == loads // 32
    assert st.global_store_bytes == m * n * 4
