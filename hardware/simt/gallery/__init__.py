"""The kernel gallery: CUDA sources and the PTX ``nvcc -ptx`` (13.0) made from them.

``source(name)`` returns the PTX text of ``name.ptx``; ``load(name)`` a loaded Module.
Regenerate the PTX (needs nvcc) with ``python -m hardware.simt.gallery``.

| file | kernels |
|---|---|
| vector_add | vector_add |
| divergence | divergence (the ``if (x < 4)`` example), divergent_loop |
| traversal | row_sums, col_sums |
| matmul | matmul_naive, matmul_tiled (16x16 tiles), transpose_unpadded, transpose_padded |
| reduction | warp_reduce, warp_allreduce, block_reduce, warp_vote |
| histogram | histogram (shared + global atomics), atomics |
| convert | to_bf16, to_fp16, to_e4m3, to_e5m2, bf16_round_trip, float_to_int |
| convert_sm80 | the same, compiled for sm_80 (software FP8 conversion) |
| struct_param | affine (a by-value struct parameter) |
| intrinsics | int_intrinsics (popc, clz, brev, prmt, mul.hi, shf, bfind, div/rem, mul24, sad, ...), warp_intrinsics (redux, match, activemask, shfl width) |
| module_vars | poly (a __constant__ table, an initialised __device__ array, a __device__ counter) |
| half_precision | halfk (f16 add/fma/neg), half2k (f16x2 add/max/mul), bf16k (bf16 setp/fma/sub) |
| memory_spaces | vec4_scale (.v4), local_table (.local), generic_pointer (cvta.shared, generic ld), dyn_reverse (dynamic shared) |
| mma_gemm | mma_gemm_f16 (ldmatrix.x4 / .trans, mma.m16n8k16 f16 -> f32), mma_gemm_s8 (mma.m16n8k32 s8 -> s32), mma_gemm_f16_pipelined (cp.async.cg double buffer + ldmatrix + mma), sm_80 |
| wmma | wmma_f16, wmma_f16_acc, wmma_s8, wmma_bf16, wmma_tf32, wmma_u8_wide (nvcuda::wmma), sm_80 |
| fp8_dequant | dequant_e4m3 (cvt.rn.f16x2.e4m3x2), dequant_e5m2, quant_e4m3, sm_90 |
| cp_async_gemm | cp_async_gemm (double-buffered, commit/wait_group), cp_async_zero_fill (src-size), cp_async_race (a read before the wait), sm_80 |
| wgmma_gemm | wgmma_gemm_f16 (128-byte swizzled K-major A and N-major B tiles, descriptors built in the kernel, wgmma.mma_async m64n64k16 f16 -> f32), wgmma_gemm_s8 (A fragments from registers, m64n64k32 s8 .satfinite), sm_90a |
| tma_wgmma_gemm | tma_wgmma_gemm_f16 (a producer warp's cp.async.bulk.tensor loads of 128-byte-swizzled tiles into a two-stage ring of full/empty mbarriers, one consumer warpgroup's wgmma.mma_async m64n64k16 f16 -> f32 on each stage), sm_90a |
| tcgen05_gemm | tcgen05_gemm_f16 (Tensor Memory allocated by one warp, k16 slices of A and B in the canonical K-major layout, one thread's tcgen05.mma kind::f16 -> f32 committed to an mbarrier, tcgen05.ld.32x32b of D), sm_100a |
| tcgen05_mxfp8_gemm | tcgen05_gemm_mxfp8 (MXFP8: E4M3 tiles and E8M0 scale tiles staged in shared memory per k128 chunk, the scales moved into Tensor Memory by one thread's tcgen05.cp.32x128b.warpx4, four tcgen05.mma kind::mxf8f6f4.block_scale.scale_vec::1X with scale factor IDs 0-3, committed to an mbarrier, tcgen05.ld.32x32b of D), sm_100a |
| cluster_multicast | cluster_multicast_matvec (a cluster of 4 CTAs: each loads a quarter of a 64 x 64 tile with cp.async.bulk.tensor .multicast::cluster into all four, then the CTAs' partial products are summed through distributed shared memory, mapa), sm_90a |
| fa3_forward | fa3_forward_f16, fa3_forward_e4m3, fa3_forward_e4m3_vtrans (FlashAttention-3-style forward, d = 64: a producer warpgroup's cp.async.bulk.tensor loads of Q and a two-stage K/V ring of full/empty mbarriers, two consumer warpgroups of 64 query rows each with wgmma S = Q K^T, online softmax with ex2 and the log2(e)-folded scale, P from registers into the PV wgmma (f16 k16; e4m3 k32 with V^T and P's bytes moved into the A layout by quad shuffles; _vtrans: V transposed by the producer warpgroup, generic stores and fence.proxy.async), ping-pong named barriers, intra-warpgroup overlap (wait_group 1), setmaxnreg dec/inc), sm_90a |
| printf | printf_formats (device printf: every conversion, with flags, widths, precisions and length modifiers, shared with printf_host.c, whose glibc output is printf_host.txt), assert_positive (a device-side assert) |
| noinline, noinline_G | noinline_calls (__noinline__ device functions: nested, looping, void), built with -lineinfo and with -G |
| reduction_G | the reduction kernels built with -G (debug: unoptimised, generic loads, DWARF sections) |
| spinlock_G, flash_attention_G | the spin-lock and FlashAttention-2 kernels built with -G |
| spinlock | spinlock_order (a global spin lock taken by every thread in turn), flag_handoff (warp 1 waits for a flag warp 0 sets), warp_handshake (the two halves of a warp wait for each other): all need independent thread scheduling |
| flash_attention | flash_attention_fwd (FlashAttention-2 forward, d = 64: 8 warps own 64 query rows, K/V tiles of 32 rows in shared memory, online softmax with exp2f, shuffles for the row max and sum), block_sum_2warps (a grid-stride sum with a 64-thread block) |
| edge_cases | float_to_int_edges (NaN/out-of-range cvt), narrow_divmod (s8/s16 loads, C div/rem of negatives), sub_warp_shuffles (width < 32), divergent_ballot, continue_break, cas_loops (atomicCAS, atomicInc/Dec), early_return_sync, float_atomic_add (global vs shared), double_math (tanh, rsqrt: rcp/rsqrt.approx.f64 seeds), device_calls (.func calls: double sin/cos slow path, a __noinline__ function), call_forms (nested, void, struct-returning, argument-less calls), int8_dot (dp4a, dp2a) |
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from ..module import Module, load_ptx

__all__ = ["NAMES", "BUILD", "source", "cuda_source", "load", "directory"]

NAMES = ("vector_add", "divergence", "traversal", "matmul", "reduction", "histogram",
         "convert", "memory_spaces", "convert_sm80", "struct_param", "intrinsics",
         "module_vars", "half_precision", "edge_cases", "printf", "noinline", "noinline_G",
         "reduction_G", "spinlock")

#: PTX file -> (CUDA source, target architecture, extra nvcc options); sm_80 has no FP8
#: cvt instruction, so ``convert_sm80`` holds nvcc's software FP8 conversion (integer
#: bit manipulation); ``-lineinfo`` and ``-G`` (debug) builds carry ``.loc``/``.file``
#: directives and DWARF sections, and ``-G`` ones unoptimised code
BUILD: dict[str, tuple[str, str, tuple[str, ...]]] = {
    name: (name, "sm_90", ()) for name in NAMES}
BUILD["convert_sm80"] = ("convert", "sm_80", ())
BUILD["noinline"] = ("noinline", "sm_90", ("-lineinfo",))
BUILD["noinline_G"] = ("noinline", "sm_90", ("-G",))
BUILD["reduction_G"] = ("reduction", "sm_90", ("-G",))
#: tensor-core, FP8 and asynchronous-copy kernels
NAMES += ("mma_gemm", "wmma", "fp8_dequant", "cp_async_gemm")
BUILD.update({"mma_gemm": ("mma_gemm", "sm_80", ()), "wmma": ("wmma", "sm_80", ()),
              "fp8_dequant": ("fp8_dequant", "sm_90", ()),
              "cp_async_gemm": ("cp_async_gemm", "sm_80", ())})
#: warpgroup (wgmma) kernels: sm_90a
NAMES += ("wgmma_gemm",)
BUILD["wgmma_gemm"] = ("wgmma_gemm", "sm_90a", ())
#: the tensor memory accelerator with mbarrier pipelines and clusters: sm_90a
NAMES += ("tma_wgmma_gemm", "cluster_multicast", "fa3_forward")
BUILD["tma_wgmma_gemm"] = ("tma_wgmma_gemm", "sm_90a", ())
BUILD["cluster_multicast"] = ("cluster_multicast", "sm_90a", ())
BUILD["fa3_forward"] = ("fa3_forward", "sm_90a", ())
#: fifth-generation tensor cores (tcgen05, Tensor Memory): sm_100a
NAMES += ("tcgen05_gemm", "tcgen05_mxfp8_gemm")
BUILD["tcgen05_gemm"] = ("tcgen05_gemm", "sm_100a", ())
BUILD["tcgen05_mxfp8_gemm"] = ("tcgen05_mxfp8_gemm", "sm_100a", ())
#: the interpreter's speed workloads (``python -m oracle bench simt``)
NAMES += ("flash_attention",)
BUILD["flash_attention"] = ("flash_attention", "sm_90", ())
#: debug (-G) builds of the spin lock and FlashAttention-2 kernels: unoptimised loops
#: that run many more instructions per warp (no default step limit may stop them)
NAMES += ("spinlock_G", "flash_attention_G")
BUILD["spinlock_G"] = ("spinlock", "sm_90", ("-G",))
BUILD["flash_attention_G"] = ("flash_attention", "sm_90", ("-G",))


def directory() -> Path:
    """The folder holding the gallery's .cu and .ptx files."""
    return Path(__file__).resolve().parent


def source(name: str) -> str:
    """PTX text of gallery file ``name``."""
    if name not in NAMES:
        raise ValueError(f"unknown gallery file {name!r}; known: {', '.join(NAMES)}")
    return (directory() / f"{name}.ptx").read_text()


def cuda_source(name: str) -> str:
    """CUDA C source of gallery file ``name``."""
    if name not in NAMES:
        raise ValueError(f"unknown gallery file {name!r}; known: {', '.join(NAMES)}")
    return (directory() / f"{BUILD[name][0]}.cu").read_text()


@lru_cache(maxsize=None)
def load(name: str) -> Module:
    """The loaded Module of gallery file ``name`` (cached; shared by every caller)."""
    return load_ptx(source(name))
