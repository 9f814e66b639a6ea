"""Regenerates the Triton sm_100 PTX in this folder (needs the pip package triton, no GPU):

    python tests/hardware/data/triton_sm100/generate.py

Kernels of ../triton_sm90/generate.py compiled with triton.compile for
GPUTarget("cuda", 100, 32): the matmul tutorial kernel (plain pointer loads, tl.dot,
which Triton lowers to tcgen05.mma with the accumulator in Tensor Memory) for each kind
it emits, one attention step (P goes to Tensor Memory and is the A operand of the second
tcgen05.mma), an E4M3 tl.dot_scaled (tcgen05.mma kind::mxf8f6f4.block_scale), tl.dot_scaled
of the other formats (E5M2; E4M3 x E5M2; E2M1 x E2M1, kind::mxf4; E4M3 x E2M1,
kind::mxf8f6f4 with the padded FP4 layout; NVFP4 with E4M3 scales per 16,
kind::mxf4nvf4.block16), the TMA-fed pipelined MXFP8/MXFP4/NVFP4 matmuls of Triton's
block-scaled tutorial (scales moved by tcgen05.cp), the matmul with BLOCK_M = 64 for
each kind (tcgen05.mma with M = 64) and a row softmax (the sm_100 f32x2 pair
arithmetic, three-input max and redux.sync.f32). The PTX and the metadata the tests
need (num_warps, dynamic shared memory, parameter count) are written next to this file."""
from __future__ import annotations

import importlib.util
import json
import pathlib

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget

HERE = pathlib.Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("triton_sm90_generate",
                                               HERE.parent / "triton_sm90" / "generate.py")
sm90 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sm90)


@triton.jit
def softmax_kernel(x_ptr, y_ptr, N: tl.constexpr):
    """Row softmax of an (rows, N) float32 array, one program per row: on sm_100 Triton
    emits the packed add/sub/mul.f32x2, three-input max.f32 and redux.sync.max.f32."""
    row = tl.program_id(0)
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + row * N + offs)
    x = x - tl.max(x, 0)
    e = tl.exp(x)
    tl.store(y_ptr + row * N + offs, e / tl.sum(e, 0))


@triton.jit
def dot_scaled_fmt_kernel(a_ptr, a_scale_ptr, b_ptr, b_scale_ptr, c_ptr, BLOCK_M: tl.constexpr,
                          BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, A_FMT: tl.constexpr,
                          B_FMT: tl.constexpr):
    """tl.dot_scaled of one block with the element formats A_FMT and B_FMT (e2m1 codes two
    to a byte along K, the first in the low bits) and E8M0 scales per 32 along K (SA:
    M x K/32, SB: N x K/32): Triton picks kind::mxf8f6f4 (FP8, or FP8 with FP4) or
    kind::mxf4 (FP4 x FP4)."""
    PA: tl.constexpr = 2 if A_FMT == "e2m1" else 1
    PB: tl.constexpr = 2 if B_FMT == "e2m1" else 1
    rm = tl.arange(0, BLOCK_M)
    rn = tl.arange(0, BLOCK_N)
    rka = tl.arange(0, BLOCK_K // PA)
    rkb = tl.arange(0, BLOCK_K // PB)
    rs = tl.arange(0, BLOCK_K // 32)
    a = tl.load(a_ptr + rm[:, None] * (BLOCK_K // PA) + rka[None, :])
    b = tl.load(b_ptr + rkb[:, None] * BLOCK_N + rn[None, :])
    sa = tl.load(a_scale_ptr + rm[:, None] * (BLOCK_K // 32) + rs[None, :])
    sb = tl.load(b_scale_ptr + rn[:, None] * (BLOCK_K // 32) + rs[None, :])
    c = tl.dot_scaled(a, sa, A_FMT, b, sb, B_FMT)
    tl.store(c_ptr + rm[:, None] * BLOCK_N + rn[None, :], c)


@triton.jit
def dot_scaled_nvfp4_kernel(a_ptr, a_scale_ptr, b_ptr, b_scale_ptr, c_ptr,
                            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                            BLOCK_K: tl.constexpr):
    """NVFP4 tl.dot_scaled: E2M1 codes two to a byte along K and E4M3 scales per 16 along
    K (SA: M x K/16, SB: N x K/16): kind::mxf4nvf4.block_scale.block16."""
    rm = tl.arange(0, BLOCK_M)
    rn = tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K // 2)
    rs = tl.arange(0, BLOCK_K // 16)
    a = tl.load(a_ptr + rm[:, None] * (BLOCK_K // 2) + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * BLOCK_N + rn[None, :])
    sa = tl.load(a_scale_ptr + rm[:, None] * (BLOCK_K // 16) + rs[None, :])
    sb = tl.load(b_scale_ptr + rn[:, None] * (BLOCK_K // 16) + rs[None, :])
    c = tl.dot_scaled(a, sa, "e2m1", b, sb, "e2m1")
    tl.store(c_ptr + rm[:, None] * BLOCK_N + rn[None, :], c)


@triton.jit
def block_scaled_matmul_kernel(a_desc, a_scale_desc, b_desc, b_scale_desc, c_ptr, M, N, K,
                               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                               BLOCK_K: tl.constexpr, NUM_STAGES: tl.constexpr,
                               VEC_SIZE: tl.constexpr, FMT: tl.constexpr):
    """The block-scaled matmul of Triton's tutorial 10: A (M x K) and B^T (N x K) tiles of
    FMT (E4M3, or E2M1 two to a byte along K) by TMA (tensor descriptors), the scales (one
    per VEC_SIZE along K: E8M0, or E4M3 for NVFP4) by TMA from the preshuffled 5-D layout
    (1, M / 128, K / VEC_SIZE / 4, 2, 256), whose 512 bytes per 128 rows and 4 K-blocks are
    row r, then row 32 c + r's four K-blocks (Triton moves them into Tensor Memory with
    tcgen05.cp.warpx4.32x128b); a pipelined loop over K."""
    PACK: tl.constexpr = 2 if FMT == "e2m1" else 1
    rep_m: tl.constexpr = BLOCK_M // 128
    rep_n: tl.constexpr = BLOCK_N // 128
    rep_k: tl.constexpr = BLOCK_K // VEC_SIZE // 4
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in tl.range(0, tl.cdiv(K, BLOCK_K), num_stages=NUM_STAGES):
        a = a_desc.load([pid_m * BLOCK_M, k * BLOCK_K // PACK])
        b = b_desc.load([pid_n * BLOCK_N, k * BLOCK_K // PACK])
        sa = a_scale_desc.load([0, pid_m * rep_m, k * rep_k, 0, 0])
        sb = b_scale_desc.load([0, pid_n * rep_n, k * rep_k, 0, 0])
        sa = sa.reshape(rep_m, rep_k, 32, 4, 4).trans(0, 3, 2, 1, 4).reshape(
            BLOCK_M, BLOCK_K // VEC_SIZE)
        sb = sb.reshape(rep_n, rep_k, 32, 4, 4).trans(0, 3, 2, 1, 4).reshape(
            BLOCK_N, BLOCK_K // VEC_SIZE)
        acc = tl.dot_scaled(a, sa, FMT, b.T, sb, FMT, acc)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)


@triton.jit
def warp_specialized_matmul_kernel(a_desc, b_desc, c_desc, K, BLOCK_M: tl.constexpr,
                                   BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """C = A B^T through host tensor descriptors (A: M x K, B: N x K, FP16; C FP32) with
    tl.range(..., warp_specialize=True): Triton splits the loop into a TMA-load warp, an
    MMA warp and the default partition's epilogue, the warps dispatched by brx.idx over a
    .branchtargets list, each partition with its own setmaxnreg."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in tl.range(0, K, BLOCK_K, warp_specialize=True):
        a = a_desc.load([pid_m * BLOCK_M, k])
        b = b_desc.load([pid_n * BLOCK_N, k])
        acc = tl.dot(a, b.T, acc)
    c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc)


def _tma_dot_scaled(fmt: str, vec: int) -> tuple:
    """The tutorial kernel for E4M3 (k128 tiles) or E2M1 (k256 tiles, 128 bytes) inputs."""
    elem = "fp8e4nv" if fmt == "e4m3" else "u8"
    scale = "fp8e4nv" if vec == 16 else "u8"
    bk = 128 if fmt == "e4m3" else 256
    rep_k = bk // vec // 4
    return (block_scaled_matmul_kernel,
            {"a_desc": f"tensordesc<{elem}[128, 128]>",
             "a_scale_desc": f"tensordesc<{scale}[1, 1, {rep_k}, 2, 256]>",
             "b_desc": f"tensordesc<{elem}[128, 128]>",
             "b_scale_desc": f"tensordesc<{scale}[1, 1, {rep_k}, 2, 256]>",
             "c_ptr": "*fp32", "M": "i32", "N": "i32", "K": "i32"},
            {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": bk, "NUM_STAGES": 2, "VEC_SIZE": vec,
             "FMT": fmt})


def _dot_scaled(a: str, b: str) -> tuple:
    ty = {"e4m3": "*fp8e4nv", "e5m2": "*fp8e5", "e2m1": "*u8"}
    return (dot_scaled_fmt_kernel,
            {"a_ptr": ty[a], "a_scale_ptr": "*u8", "b_ptr": ty[b], "b_scale_ptr": "*u8",
             "c_ptr": "*fp32"},
            {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 128, "A_FMT": a, "B_FMT": b})


def _matmul(a: str, c: str, bm: int, bn: int, bk: int) -> tuple:
    ints = {n: "i32" for n in ("M", "N", "K", "stride_am", "stride_bk", "stride_cm")}
    return (sm90.matmul_kernel, {"a_ptr": f"*{a}", "b_ptr": f"*{a}", "c_ptr": f"*{c}", **ints},
            {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk,
             "ACC_TYPE": tl.int32 if a == "i8" else tl.float32})


def _params(ptx: str) -> int:
    """The kernel's parameter count (a tensor descriptor is its 128-byte map, its shape
    and its strides; Triton adds two pointers)."""
    return ptx.split(".entry")[1].split(")")[0].count(".param")


def main() -> None:
    meta = {}
    #: kernels compiled with other than 4 warps and one stage: (num_warps, num_stages)
    options = {"matmul_fp16_pipelined": (8, 3), "warp_specialized_matmul_fp16": (4, 3)}
    # name -> (kernel, signature, constexprs)
    jobs = {
        "matmul_fp16_pipelined": _matmul("fp16", "fp32", 128, 128, 64),
        "matmul_fp16": _matmul("fp16", "fp32", 128, 64, 32),
        "matmul_bf16": _matmul("bf16", "fp32", 128, 128, 64),
        "matmul_e4m3": _matmul("fp8e4nv", "fp32", 128, 64, 64),
        "matmul_tf32": _matmul("fp32", "fp32", 128, 64, 32),
        "matmul_s8": _matmul("i8", "i32", 128, 64, 64),
        # BLOCK_M = 64: tcgen05.mma with M = 64 (data path layout F), D read with
        # tcgen05.ld.16x32bx2 from the lower 16 lanes of each warp's quarter
        "matmul_fp16_m64": _matmul("fp16", "fp32", 64, 64, 32),
        "matmul_tf32_m64": _matmul("fp32", "fp32", 64, 64, 32),
        "matmul_e4m3_m64": _matmul("fp8e4nv", "fp32", 64, 64, 64),
        "matmul_s8_m64": _matmul("i8", "i32", 64, 64, 64),
        "attention_step_fp16": (sm90.attention_step_kernel,
                                {"q_ptr": "*fp16", "k_ptr": "*fp16", "v_ptr": "*fp16",
                                 "o_ptr": "*fp32"},
                                {"BLOCK_M": 128, "BLOCK_N": 64, "HEAD": 64}),
        # BLOCK_M = 64: P stored to Tensor Memory in layout F, the A of an M = 64 mma
        "attention_step_fp16_m64": (sm90.attention_step_kernel,
                                    {"q_ptr": "*fp16", "k_ptr": "*fp16", "v_ptr": "*fp16",
                                     "o_ptr": "*fp32"},
                                    {"BLOCK_M": 64, "BLOCK_N": 64, "HEAD": 64}),
        "softmax_fp32": (softmax_kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32"}, {"N": 1024}),
        "dot_scaled_e4m3": (sm90.dot_scaled_kernel,
                            {"a_ptr": "*fp8e4nv", "a_scale_ptr": "*u8", "b_ptr": "*fp8e4nv",
                             "b_scale_ptr": "*u8", "c_ptr": "*fp32"},
                            {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 128}),
        # BLOCK_M = 64: Triton scales E4M3 into BF16 (cvt.rn.bf16x2.e4m3x2, PTX ISA 9.2)
        # and multiplies with tcgen05.mma kind::f16, M = 64
        "bf16_scaled_dot_e4m3_m64": (sm90.dot_scaled_kernel,
                                     {"a_ptr": "*fp8e4nv", "a_scale_ptr": "*u8",
                                      "b_ptr": "*fp8e4nv", "b_scale_ptr": "*u8",
                                      "c_ptr": "*fp32"},
                                     {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 128}),
        "warp_specialized_matmul_fp16": (warp_specialized_matmul_kernel,
                                         {"a_desc": "tensordesc<fp16[128, 64]>",
                                          "b_desc": "tensordesc<fp16[128, 64]>",
                                          "c_desc": "tensordesc<fp32[128, 128]>",
                                          "K": "i32"},
                                         {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64}),
        "dot_scaled_e5m2": _dot_scaled("e5m2", "e5m2"),
        "dot_scaled_e4m3_e5m2": _dot_scaled("e4m3", "e5m2"),
        "dot_scaled_e2m1": _dot_scaled("e2m1", "e2m1"),
        "dot_scaled_e4m3_e2m1": _dot_scaled("e4m3", "e2m1"),
        "dot_scaled_tma_e4m3": _tma_dot_scaled("e4m3", 32),
        "dot_scaled_tma_mxfp4": _tma_dot_scaled("e2m1", 32),
        "dot_scaled_tma_nvfp4": _tma_dot_scaled("e2m1", 16),
        "dot_scaled_nvfp4": (dot_scaled_nvfp4_kernel,
                             {"a_ptr": "*u8", "a_scale_ptr": "*fp8e4nv", "b_ptr": "*u8",
                              "b_scale_ptr": "*fp8e4nv", "c_ptr": "*fp32"},
                             {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 128}),
    }
    for name, (fn, sig, const) in jobs.items():
        attrs = {(i,): [["tt.divisibility", 16]] for i, t in enumerate(sig.values())
                 if not t.startswith("tensordesc")}
        src = triton.compiler.ASTSource(fn=fn, signature=sig, constexprs=const, attrs=attrs)
        warps, stages = options.get(name, (4, 1))
        k = triton.compile(src, target=GPUTarget("cuda", 100, 32),
                           options={"num_warps": warps, "num_stages": stages})
        (HERE / f"{name}.ptx").write_text(k.asm["ptx"])
        meta[name] = {"kernel": k.metadata.name, "num_warps": k.metadata.num_warps,
                      "shared": k.metadata.shared, "params": _params(k.asm["ptx"]),
                      "constexprs": {x: str(v) for x, v in const.items()},
                      "signature": sig, "num_stages": stages,
                      "triton_version": triton.__version__}
        if k.metadata.tensordesc_meta:
            # what Triton's launcher encodes each host descriptor with (driver enums)
            meta[name]["tensordesc_meta"] = [
                {x: d[x] for x in ("swizzle", "elem_size", "elem_type", "block_size")}
                for d in k.metadata.tensordesc_meta]
    (HERE / "metadata.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
