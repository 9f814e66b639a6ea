"""Regenerates the Triton sm_90 PTX in this folder (needs the pip package triton, no GPU):

    python tests/hardware/data/triton_sm90/generate.py

Each kernel is compiled with triton.compile for GPUTarget("cuda", 90, 32); the PTX and
the compiled metadata the tests need (num_warps, dynamic shared memory, parameter
count) are written next to this file. The kernels are a blocked matmul in the style of
Triton's matmul tutorial (plain pointer loads, no tensor descriptors, so no TMA; FP16
plain and software-pipelined with cp.async over two warpgroups, BF16 with N = 256,
TF32, FP8 E4M3 and INT8), a one-block attention step whose second product takes P
from registers, the forward loop of flash attention (online softmax, the
accumulator rescaled between products), tl.dot_scaled (E4M3), and tensor descriptors."""
from __future__ import annotations

import json
import pathlib

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget

HERE = pathlib.Path(__file__).resolve().parent


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  ACC_TYPE: tl.constexpr):
    """C[M, N] = A[M, K] B[K, N], row-major, accumulated in ACC_TYPE, K a multiple of
    BLOCK_K; the result stored in C's element type."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rm[:, None] * stride_am + rk[None, :]
    b_ptrs = b_ptr + rk[:, None] * stride_bk + rn[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=ACC_TYPE)
    for _ in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs)
        b = tl.load(b_ptrs)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + rm[:, None] * stride_cm + rn[None, :]
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def matmul_masked_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk,
                         stride_bn, stride_cm, stride_cn, BLOCK_M: tl.constexpr,
                         BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """The tutorial's general form: any strides, any K (the last block masked, zeros
    loaded past K), fp32 accumulation."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak
    b_ptrs = b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=rk[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=rk[:, None] < K - k * BLOCK_K, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def dot_scaled_kernel(a_ptr, a_scale_ptr, b_ptr, b_scale_ptr, c_ptr, BLOCK_M: tl.constexpr,
                      BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """C = (A x 2^(SA - 127)) (B x 2^(SB - 127)) for E4M3 A (M x K) and B (K x N) with
    one E8M0 scale per 32 elements along K (SA: M x K/32, SB: N x K/32), one block;
    on sm_90 Triton scales the operands in BF16 and multiplies them with wgmma."""
    rm = tl.arange(0, BLOCK_M)
    rn = tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    rs = tl.arange(0, BLOCK_K // 32)
    a = tl.load(a_ptr + rm[:, None] * BLOCK_K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * BLOCK_N + rn[None, :])
    sa = tl.load(a_scale_ptr + rm[:, None] * (BLOCK_K // 32) + rs[None, :])
    sb = tl.load(b_scale_ptr + rn[:, None] * (BLOCK_K // 32) + rs[None, :])
    c = tl.dot_scaled(a, sa, "e4m3", b, sb, "e4m3")
    tl.store(c_ptr + rm[:, None] * BLOCK_N + rn[None, :], c)


@triton.jit
def attention_step_kernel(q_ptr, k_ptr, v_ptr, o_ptr, BLOCK_M: tl.constexpr,
                          BLOCK_N: tl.constexpr, HEAD: tl.constexpr):
    """O = exp2(Q K^T - rowmax) V for one block (fp16 in, fp32 accumulation): the second
    tl.dot takes P = exp2(...) as fp16 from registers."""
    rm = tl.arange(0, BLOCK_M)
    rn = tl.arange(0, BLOCK_N)
    rd = tl.arange(0, HEAD)
    q = tl.load(q_ptr + rm[:, None] * HEAD + rd[None, :])
    k = tl.load(k_ptr + rn[None, :] * HEAD + rd[:, None])
    v = tl.load(v_ptr + rn[:, None] * HEAD + rd[None, :])
    s = tl.dot(q, k)
    p = tl.math.exp2(s - tl.max(s, 1)[:, None])
    o = tl.dot(p.to(tl.float16), v)
    tl.store(o_ptr + rm[:, None] * HEAD + rd[None, :], o)


@triton.jit
def attention_fwd_kernel(q_ptr, k_ptr, v_ptr, o_ptr, N_CTX: tl.constexpr,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD: tl.constexpr):
    """The forward loop of flash attention over N_CTX keys in blocks of BLOCK_N (online
    softmax in base 2, P from registers in the second product), storing the
    unnormalised accumulator O."""
    start_m = tl.program_id(0)
    rm = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.arange(0, BLOCK_N)
    rd = tl.arange(0, HEAD)
    q = tl.load(q_ptr + rm[:, None] * HEAD + rd[None, :])
    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD), tl.float32)
    for start_n in range(0, N_CTX, BLOCK_N):
        k = tl.load(k_ptr + (start_n + rn)[None, :] * HEAD + rd[:, None])
        v = tl.load(v_ptr + (start_n + rn)[:, None] * HEAD + rd[None, :])
        s = tl.dot(q, k)
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.math.exp2(m_i - m_new)
        p = tl.math.exp2(s - m_new[:, None])
        acc = acc * alpha[:, None]
        acc = tl.dot(p.to(tl.float16), v, acc)
        m_i = m_new
    tl.store(o_ptr + rm[:, None] * HEAD + rd[None, :], acc)


@triton.jit
def tensor_desc_matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr,
                              BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """C[M, N] = A[M, K] B[K, N] (row-major, FP16 in, FP32 out) through tensor
    descriptors the kernel builds itself (tl.make_tensor_descriptor: tensormap.replace of
    every field on zeroed shared memory, tensormap.cp_fenceproxy into the global scratch
    buffer), loaded and stored with TMA."""
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1],
                                       block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1],
                                       block_shape=[BLOCK_K, BLOCK_N])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1],
                                       block_shape=[BLOCK_M, BLOCK_N])
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = a_desc.load([pid_m * BLOCK_M, k])
        b = b_desc.load([k, pid_n * BLOCK_N])
        acc = tl.dot(a, b, acc)
    c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc)


@triton.jit
def host_desc_matmul_kernel(a_desc, b_desc, c_desc, K, BLOCK_M: tl.constexpr,
                            BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """The same product through tensor descriptors made on the host (Triton's
    TensorDescriptor: each a 128-byte CUtensorMap parameter, then its shape and
    strides)."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = a_desc.load([pid_m * BLOCK_M, k])
        b = b_desc.load([k, pid_n * BLOCK_N])
        acc = tl.dot(a, b, acc)
    c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc)


def _compile(fn, signature: dict, constexprs: dict, num_warps: int = 4,
             num_stages: int = 1):
    # pointers and the integer parameters are multiples of 16 (what Triton's launcher
    # specialises for such arguments), so loads and stores are vectorised; the masked
    # kernel is compiled without (scalar loads and stores)
    attrs = {} if fn is matmul_masked_kernel else \
        {(i,): [["tt.divisibility", 16]] for i, name in enumerate(signature)
         if not signature[name].startswith("tensordesc")}
    src = triton.compiler.ASTSource(fn=fn, signature=signature, constexprs=constexprs,
                                    attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32),
                          options={"num_warps": num_warps, "num_stages": num_stages})


def main() -> None:
    meta = {}
    ints = {n: "i32" for n in ("M", "N", "K", "stride_am", "stride_bk", "stride_cm")}
    def mm(a: str, c: str, bm: int, bn: int, bk: int, acc=tl.float32) -> tuple:
        sig = {"a_ptr": f"*{a}", "b_ptr": f"*{a}", "c_ptr": f"*{c}", **ints}
        return matmul_kernel, sig, {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk,
                                    "ACC_TYPE": acc}
    # name -> (kernel, signature, constexprs), num_warps, num_stages
    jobs = {
        "matmul_fp16": (mm("fp16", "fp16", 64, 64, 32), 4, 1),
        "matmul_fp16_acc16": (mm("fp16", "fp16", 64, 64, 32, tl.float16), 4, 1),
        "matmul_fp16_pipelined": (mm("fp16", "fp16", 128, 128, 64), 8, 3),
        "matmul_bf16_n256": (mm("bf16", "fp32", 64, 256, 32), 4, 2),
        "matmul_tf32": (mm("fp32", "fp32", 64, 32, 32), 4, 1),
        "matmul_e4m3": (mm("fp8e4nv", "fp32", 64, 64, 64), 4, 1),
        "matmul_s8": (mm("i8", "i32", 64, 64, 64, tl.int32), 4, 1),
        "matmul_masked_fp16": ((matmul_masked_kernel,
                                {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16",
                                 **{x: "i32" for x in ("M", "N", "K", "stride_am",
                                                       "stride_ak", "stride_bk",
                                                       "stride_bn", "stride_cm",
                                                       "stride_cn")}},
                                {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}), 4, 1),
        "dot_scaled_e4m3": ((dot_scaled_kernel,
                             {"a_ptr": "*fp8e4nv", "a_scale_ptr": "*u8", "b_ptr": "*fp8e4nv",
                              "b_scale_ptr": "*u8", "c_ptr": "*fp32"},
                             {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64}), 4, 1),
        "tensor_desc_matmul_fp16": ((tensor_desc_matmul_kernel,
                                     {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32",
                                      "M": "i32", "N": "i32", "K": "i32"},
                                     {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64}), 4, 3),
        "host_desc_matmul_fp16": ((host_desc_matmul_kernel,
                                   {"a_desc": "tensordesc<fp16[64, 64]>",
                                    "b_desc": "tensordesc<fp16[64, 64]>",
                                    "c_desc": "tensordesc<fp32[64, 64]>", "K": "i32"},
                                   {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64}), 4, 3),
        "attention_step_fp16": ((attention_step_kernel,
                                 {"q_ptr": "*fp16", "k_ptr": "*fp16", "v_ptr": "*fp16",
                                  "o_ptr": "*fp32"},
                                 {"BLOCK_M": 64, "BLOCK_N": 64, "HEAD": 64}), 4, 1),
        "attention_fwd_fp16": ((attention_fwd_kernel,
                                {"q_ptr": "*fp16", "k_ptr": "*fp16", "v_ptr": "*fp16",
                                 "o_ptr": "*fp32"},
                                {"N_CTX": 256, "BLOCK_M": 64, "BLOCK_N": 64, "HEAD": 64}),
                               4, 2),
    }
    for name, ((fn, sig, const), warps, stages) in jobs.items():
        k = _compile(fn, sig, const, warps, stages)
        (HERE / f"{name}.ptx").write_text(k.asm["ptx"])
        meta[name] = {"kernel": k.metadata.name, "num_warps": k.metadata.num_warps,
                      "shared": k.metadata.shared,
                      # the entry's .param count: Triton's two scratch pointers included
                      # and a descriptor expanded into its map, shape and strides
                      "params": k.asm["ptx"].split(")")[0].count(".param"),
                      "constexprs": {c: str(v) for c, v in const.items()},
                      "signature": sig, "num_stages": stages,
                      "global_scratch_size": k.metadata.global_scratch_size,
                      "global_scratch_align": k.metadata.global_scratch_align,
                      # per descriptor argument: what Triton's launcher encodes the
                      # host map with (swizzle and element type in the driver's enums)
                      "tensordesc_meta": [
                          {key: d[key] for key in ("swizzle", "elem_size", "elem_type",
                                                   "block_size")}
                          for d in (k.metadata.tensordesc_meta or [])],
                      "triton_version": triton.__version__}
    (HERE / "metadata.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
