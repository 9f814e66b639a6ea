"""Gallery kernels with tensor-core, FP8 and asynchronous-copy instructions against
independent NumPy references: integer and small-integer products exactly (float64 /
int64 matmul), other float products against refimpl.matmul's preset for the launch's
GPU, FP8 values from tables built from the E4M3/E5M2 definitions (OCP OFP8) in
simt_reference."""
from __future__ import annotations

import numpy as np
import pytest
from simt_reference import decode_table, nearest_code, round_code

from hardware.simt import ExecutionError, GlobalMemory, gallery
from refimpl import matmul as mm

E4M3 = decode_table("e4m3")
E5M2 = decode_table("e5m2")


def _launch(file, kernel, grid, block, arrays, outs, scalars=(), **kw):
    mem = GlobalMemory()
    ptrs = [mem.to_device(np.ascontiguousarray(a)) for a in arrays]
    optrs = [mem.alloc(n) for n in outs]
    st = gallery.load(file).launch(kernel, grid, block, ptrs + optrs + list(scalars), mem, **kw)
    return mem, optrs, st


# ------------------------------------------------------------------------ mma_gemm


@pytest.mark.parametrize("gpu", ["H100", "A100"])
@pytest.mark.parametrize("kind", ["int", "random"])
def test_mma_gemm_f16(gpu, kind):
    rng = np.random.default_rng(21)
    M, N, K = 32, 32, 48
    if kind == "int":
        A = rng.integers(-8, 9, (M, K)).astype(np.float16)
        B = rng.integers(-8, 9, (K, N)).astype(np.float16)
    else:
        A = rng.standard_normal((M, K)).astype(np.float16)
        B = rng.standard_normal((K, N)).astype(np.float16)
    mem, (pc,), _ = _launch("mma_gemm", "mma_gemm_f16", (N // 16, M // 16), 32, [A, B],
                            [4 * M * N], [M, N, K], gpu=gpu)
    C = mem.from_device(pc, np.float32, (M, N))
    if kind == "int":
        assert (C == A.astype(np.float64) @ B.astype(np.float64)).all()
    # the kernel's k loop: one m16n8k16 per 16-wide step, the accumulator carried as c
    want = np.zeros((M, N), np.float32)
    for k0 in range(0, K, 16):
        want = mm.matmul(A[:, k0:k0 + 16].astype(np.float32),
                         B[k0:k0 + 16].astype(np.float32), want, accumulate=f"{gpu}-FP16")
    assert (C.view(np.uint32) == want.view(np.uint32)).all()


def test_mma_gemm_pipelined_matches_the_plain_kernel():
    rng = np.random.default_rng(31)
    M, N, K = 32, 48, 64
    A = rng.standard_normal((M, K)).astype(np.float16)
    B = rng.standard_normal((K, N)).astype(np.float16)
    outs = []
    for kernel in ("mma_gemm_f16", "mma_gemm_f16_pipelined"):
        mem, (pc,), _ = _launch("mma_gemm", kernel, (N // 16, M // 16), 32, [A, B],
                                [4 * M * N], [M, N, K], gpu="A100")
        outs.append(mem.from_device(pc, np.float32, (M, N)))
    want = np.zeros((M, N), np.float32)
    for k0 in range(0, K, 16):
        want = mm.matmul(A[:, k0:k0 + 16].astype(np.float32),
                         B[k0:k0 + 16].astype(np.float32), want, accumulate="A100-FP16")
    for out in outs:
        assert (out.view(np.uint32) == want.view(np.uint32)).all()


def test_mma_gemm_pipelined_with_a_too_shallow_wait_races_in_ldmatrix():
    from hardware.simt import load_ptx
    text = gallery.source("mma_gemm")
    assert text.count("cp.async.wait_group 1;") >= 1      # nvcc unrolls the k loop
    bad = load_ptx(text.replace("cp.async.wait_group 1;", "cp.async.wait_group 2;"))
    A = np.ones((16, 32), np.float16)
    B = np.ones((32, 16), np.float16)
    mem = GlobalMemory()
    pa, pb, pc = mem.to_device(A), mem.to_device(B), mem.alloc(4 * 256)
    with pytest.raises(ExecutionError, match=r"ldmatrix.*race: load of shared address"):
        bad.launch("mma_gemm_f16_pipelined", 1, 32, [pa, pb, pc, 16, 16, 32], mem)


def test_mma_gemm_s8_is_exact():
    rng = np.random.default_rng(22)
    M, N, K = 32, 48, 64
    A = rng.integers(-128, 128, (M, K)).astype(np.int8)
    B = rng.integers(-128, 128, (K, N)).astype(np.int8)
    mem, (pc,), st = _launch("mma_gemm", "mma_gemm_s8", (N // 16, M // 16), 32,
                             [A, np.ascontiguousarray(B.T)], [4 * M * N], [M, N, K])
    assert (mem.from_device(pc, np.int32, (M, N)) == A.astype(np.int64) @ B.astype(np.int64)).all()
    assert st.divergent_branches == 0


# ---------------------------------------------------------------------------- wmma


def test_wmma_f16_with_a_leading_dimension():
    rng = np.random.default_rng(23)
    lda = 24                               # a 16 x 16 tile inside wider rows
    A = rng.integers(-8, 9, (16, lda)).astype(np.float16)
    Bt = rng.integers(-8, 9, (16, lda)).astype(np.float16)   # column-major B: B^T rows
    mem, (pc,), _ = _launch("wmma", "wmma_f16", 1, 32, [A, Bt], [4 * 256], [lda])
    C = mem.from_device(pc, np.float32, (16, 16))
    assert (C == A[:, :16].astype(np.float64) @ Bt[:, :16].T.astype(np.float64)).all()


@pytest.mark.parametrize("gpu", ["H100", "V100"])
def test_wmma_f16_accumulator_in_place(gpu):
    rng = np.random.default_rng(24)
    A = rng.standard_normal((32, 16)).astype(np.float16)
    B = rng.standard_normal((16, 8)).astype(np.float16)
    C0 = rng.standard_normal((32, 8)).astype(np.float16)
    mem = GlobalMemory()
    pa = mem.to_device(np.asfortranarray(A).ravel(order="K"))
    pb = mem.to_device(B)
    pc = mem.to_device(np.asfortranarray(C0).ravel(order="K"))
    gallery.load("wmma").launch("wmma_f16_acc", 1, 32, [pa, pb, pc], mem, gpu=gpu)
    C = mem.from_device(pc, np.float16, (8, 32)).T
    want = mm.matmul(A.astype(np.float32), B.astype(np.float32), C0.astype(np.float32),
                     accumulate=f"{gpu}-FP16", out_format="fp16")
    assert (C.astype(np.float32) == want).all()


def test_wmma_s8_is_exact():
    rng = np.random.default_rng(25)
    A = rng.integers(-128, 128, (16, 16)).astype(np.int8)
    Bt = rng.integers(-128, 128, (16, 16)).astype(np.int8)
    mem, (pc,), _ = _launch("wmma", "wmma_s8", 1, 32, [A, Bt], [4 * 256])
    assert (mem.from_device(pc, np.int32, (16, 16)) ==
            A.astype(np.int64) @ Bt.T.astype(np.int64)).all()


def test_wmma_u8_m8n32k16_is_exact():
    rng = np.random.default_rng(30)
    A = rng.integers(0, 256, (8, 16)).astype(np.uint8)
    B = rng.integers(0, 256, (16, 32)).astype(np.uint8)
    mem, (pc,), _ = _launch("wmma", "wmma_u8_wide", 1, 32, [A, B], [4 * 256])
    assert (mem.from_device(pc, np.int32, (8, 32)) == A.astype(np.int64) @ B + 7).all()


def test_wmma_bf16_against_the_preset():
    rng = np.random.default_rng(26)
    a32 = rng.standard_normal((2, 16, 16)).astype(np.float32)
    bits = (a32.view(np.uint32) >> 16).astype(np.uint16)       # bf16 by truncation
    A, B = bits
    mem, (pc,), _ = _launch("wmma", "wmma_bf16", 1, 32, [A, B], [4 * 256], gpu="A100")
    C = mem.from_device(pc, np.float32, (16, 16)).T               # stored column-major
    av, bv = ((x.astype(np.uint32) << 16).view(np.float32) for x in (A, B))
    want = mm.matmul(av, bv, np.zeros((16, 16), np.float32), accumulate="A100-BF16")
    assert (C.view(np.uint32) == want.view(np.uint32)).all()


def test_wmma_tf32_rounds_inputs_then_uses_the_preset():
    rng = np.random.default_rng(27)
    A = rng.standard_normal((16, 8)).astype(np.float32)
    Bt = rng.standard_normal((16, 8)).astype(np.float32)          # column-major 8 x 16
    mem, (pc,), _ = _launch("wmma", "wmma_tf32", 1, 32, [A, Bt], [4 * 256], gpu="H100")
    C = mem.from_device(pc, np.float32, (16, 16))

    def rna(x):  # to TF32 (10 fraction bits), ties away from zero
        codes = [round_code("tf32", float(v), "rna") << 13 for v in x.ravel()]
        return np.array(codes, np.uint32).view(np.float32).reshape(x.shape)
    want = mm.matmul(rna(A), rna(Bt).T.copy(), np.zeros((16, 16), np.float32),
                     accumulate="H100-TF32")
    assert (C.view(np.uint32) == want.view(np.uint32)).all()


# --------------------------------------------------------------------- fp8_dequant


def test_dequant_e4m3_every_code():
    rows, cols = 4, 128
    q = np.tile(np.arange(256, dtype=np.uint8), 2).reshape(rows, cols)
    scale = np.array([1.0, 0.5, 3.0, 2.0**-7], np.float32)
    n = rows * cols // 2
    mem, (po,), _ = _launch("fp8_dequant", "dequant_e4m3", -(-n // 128), 128, [q, scale],
                            [4 * rows * cols], [rows, cols])
    out = mem.from_device(po, np.float32, (rows, cols))
    want = (E4M3[q].astype(np.float32) * scale[:, None]).astype(np.float32)
    np.testing.assert_array_equal(out, want)       # NaN codes give NaN (positions equal)


def test_dequant_e5m2_every_code():
    rows, cols = 2, 256
    q = np.tile(np.arange(256, dtype=np.uint8), rows).reshape(rows, cols)
    scale = np.array([0.25, -1.5], np.float32)
    mem, (po,), _ = _launch("fp8_dequant", "dequant_e5m2", 4, 128, [q, scale],
                            [4 * rows * cols], [rows, cols])
    out = mem.from_device(po, np.float32, (rows, cols))
    with np.errstate(invalid="ignore"):
        want = (E5M2[q].astype(np.float32) * scale[:, None]).astype(np.float32)
    np.testing.assert_array_equal(out, want)


def test_quant_e4m3_then_dequant_round_trip():
    rng = np.random.default_rng(28)
    rows, cols = 4, 64
    x = (rng.standard_normal((rows, cols)) * 100).astype(np.float32)
    x[0, :6] = [1000.0, -1000.0, 0.0, -0.0, 2.0**-12, 17.0]
    scale = np.array([0.5, 1.0, 2.0, 0.75], np.float32)
    n = rows * cols // 2
    mem, (pq,), _ = _launch("fp8_dequant", "quant_e4m3", 1, n, [x, scale], [rows * cols],
                            [rows, cols])
    q = mem.from_device(pq, np.uint8, (rows, cols))
    inv = (np.float32(1.0) / scale).astype(np.float32)          # rcp.rn.f32
    want = [[nearest_code("e4m3", float(v)) for v in row] for row in x * inv[:, None]]
    np.testing.assert_array_equal(q, want)


# ------------------------------------------------------------------- cp_async_gemm


def test_cp_async_gemm_is_exact_on_dyadic_inputs():
    rng = np.random.default_rng(29)
    n, m, k = 32, 48, 64
    A = (rng.integers(-32, 33, (n, k)) / 8).astype(np.float32)
    B = (rng.integers(-32, 33, (k, m)) / 8).astype(np.float32)
    mem, (pc,), st = _launch("cp_async_gemm", "cp_async_gemm", (m // 16, n // 16), (16, 16),
                             [A, B], [4 * n * m], [n, m, k])
    # every partial sum is a multiple of 1/64 below 2**17: exact in float32, any order
    assert (mem.from_device(pc, np.float32, (n, m)) == A.astype(np.float64) @ B).all()
    assert st.barriers == 2 * (k // 16) * (m // 16) * (n // 16)


def test_cp_async_zero_fill_pads_the_tail():
    src = np.arange(1, 38, dtype=np.float32)
    mem, (po,), _ = _launch("cp_async_gemm", "cp_async_zero_fill", 1, 16, [src], [4 * 64],
                            [37], dynamic_shared=256)
    out = mem.from_device(po, np.float32, 64)
    assert out.tolist() == list(range(1, 38)) + [0.0] * 27


def test_cp_async_race_is_reported():
    mem = GlobalMemory()
    pa = mem.to_device(np.arange(32, dtype=np.float32))
    po = mem.alloc(128)
    with pytest.raises(ExecutionError, match=r"race: load of shared address 0x4 before the "
                                             r"cp.async .*thread \(1, 0, 0\)"):
        gallery.load("cp_async_gemm").launch("cp_async_race", 1, 32, [pa, po], mem)
