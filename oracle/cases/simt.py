"""Golden cases for the SIMT interpreter's kernel gallery (``hardware.simt``): runs of
the PTX that ``nvcc -ptx`` made from the gallery's CUDA sources, with their outputs and
launch statistics.

``simt.gallery_run`` launches one kernel. ``params["args"]`` lists the kernel's
arguments in order, each one of ``{"in": NAME}`` (an input array copied to device
memory), ``{"inout": NAME, "out": OUT}`` (copied in, read back as output ``OUT``),
``{"out": NAME, "dtype": DT, "count": N}`` (N zero-filled elements read back),
``{"int": V}`` or ``{"float": V}`` (scalars). Outputs: each ``out`` array, and ``stats``
(int64): warp instructions, thread instructions, divergent branches, max SIMT stack
depth, barriers, global load requests, global load sectors, global store requests,
global store sectors, shared load wavefronts, shared store wavefronts, shared load bank
conflicts, shared store bank conflicts, atomic requests.

Kernel outputs are what the PTX semantics give bit for bit (every gallery kernel uses
IEEE-rounded instructions and integer atomics, so the result does not depend on thread
scheduling). The statistics are the interpreter's model of the hardware counters (warps
of 32, immediate-post-dominator reconvergence, 32-byte sectors, 32 banks): variant
``simt_counters``.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from hardware.simt import GlobalMemory, gallery
from oracle.cases import Area, CaseSpec, Operation

SPECS = {"PTX ISA": "as emitted by nvcc 13 for sm_80/sm_90"}
STATS = ("warp_instructions", "thread_instructions", "divergent_branches", "max_stack_depth",
         "barriers", "global_load_requests", "global_load_sectors", "global_store_requests",
         "global_store_sectors", "shared_load_wavefronts", "shared_store_wavefronts",
         "shared_load_bank_conflicts", "shared_store_bank_conflicts", "atomic_requests")
VARIANT = {"choice": "simt_counters", "option": "hardware.simt model"}


def _run(inputs: Mapping[str, np.ndarray], p: Mapping[str, Any]) -> dict[str, np.ndarray]:
    mem = GlobalMemory()
    args: list[Any] = []
    reads: list[tuple[str, int, np.dtype, tuple[int, ...]]] = []
    for a in p["args"]:
        if "in" in a:
            args.append(mem.to_device(inputs[a["in"]]))
        elif "inout" in a:
            arr = inputs[a["inout"]]
            args.append(mem.to_device(arr))
            reads.append((a["out"], args[-1], arr.dtype, arr.shape))
        elif "out" in a:
            dt = np.dtype(a["dtype"])
            # zero-filled and written (cudaMalloc then cudaMemset): kernels that add
            # into their output (the histogram) read it before writing it
            args.append(mem.calloc(max(1, a["count"] * dt.itemsize)))
            reads.append((a["out"], args[-1], dt, (a["count"],)))
        elif "int" in a:
            args.append(int(a["int"]))
        else:
            args.append(np.float32(a["float"]))
    st = gallery.load(p["file"]).launch(p["kernel"], tuple(p["grid"]), tuple(p["block"]),
                                        args, mem, dynamic_shared=p.get("dynamic_shared", 0))
    out = {name: mem.from_device(addr, dt, shape) for name, addr, dt, shape in reads}
    out["stats"] = np.array([getattr(st, n) for n in STATS], np.int64)
    return out


OPERATIONS = [Operation("simt.gallery_run", _run,
                        "hardware.simt.gallery.load(file).launch(kernel, grid, block, args)")]


def _case(kernel: str, file: str, grid, block, args: list[dict], build, level: int,
          desc: str, *, formats: dict[str, str] | None = None,
          dynamic_shared: int = 0) -> CaseSpec:
    params = {"file": file, "kernel": kernel, "grid": list(grid), "block": list(block),
              "args": args}
    if dynamic_shared:
        params["dynamic_shared"] = dynamic_shared
    return CaseSpec(f"simt.{file}.{kernel}", "simt.gallery_run", params, build,
                    formats=formats or {}, level=level, variant=VARIANT, description=desc)


def cases() -> list[CaseSpec]:
    out = []

    def floats(name: str, *shape: int, scale: float = 1.0):
        return lambda r: {name: r.normal(shape, scale=scale)}

    out.append(_case("vector_add", "vector_add", (2,), (32,),
                     [{"in": "a"}, {"in": "b"}, {"out": "c", "dtype": "float32", "count": 40},
                      {"int": 40}],
                     lambda r: {"a": r.normal(40), "b": r.normal(40)}, 0,
                     "c = a + b for 40 elements on 2 blocks of 32 threads"))
    # the description is pinned by the published suite (its manifest is the schema)
    out.append(_case("divergence", "divergence", (1,), (32,),
                     [{"in": "x"}, {"out": "a", "dtype": "int32", "count": 32},
                      {"out": "b", "dtype": "int32", "count": 32},
                      {"out": "z", "dtype": "int32", "count": 32}],
                     lambda r: {"x": (np.arange(32) % 8).astype(np.int32)}, 1,
                     "the seed's if (x < 4) example: 16 lanes on each path"))
    out.append(_case("matmul_tiled", "matmul", (2, 2), (16, 16),
                     [{"in": "a"}, {"in": "b"}, {"out": "c", "dtype": "float32", "count": 1024},
                      {"int": 32}, {"int": 32}, {"int": 32}],
                     lambda r: {"a": r.normal((32, 32)), "b": r.normal((32, 32))}, 1,
                     "shared-memory tiled matmul, 32 x 32, 16 x 16 tiles"))
    for kernel in ("row_sums", "col_sums"):
        out.append(_case(kernel, "traversal", (1,), (32,),
                         [{"in": "m"}, {"out": "sums", "dtype": "float32", "count": 32},
                          {"int": 32}, {"int": 32}],
                         floats("m", 32, 32), 1,
                         f"{kernel} of a 32 x 32 row-major matrix: coalescing differs"))
    out.append(_case("warp_reduce", "reduction", (1,), (128,),
                     [{"in": "x"}, {"out": "sums", "dtype": "float32", "count": 4}],
                     floats("x", 128), 1, "shfl.down tree reduction per warp"))
    out.append(_case("block_reduce", "reduction", (2,), (256,),
                     [{"in": "x"}, {"out": "sums", "dtype": "float32", "count": 2},
                      {"int": 500}],
                     floats("x", 512), 1, "block reduction through shared memory, n = 500"))
    out.append(_case("histogram", "histogram", (3,), (128,),
                     [{"in": "data"}, {"out": "hist", "dtype": "uint32", "count": 256},
                      {"int": 1000}],
                     lambda r: {"data": r.integers(0, 256, 1000).astype(np.uint8)}, 1,
                     "byte histogram with shared and global atomics"))
    out.append(_case("to_e4m3", "convert", (1,), (128,),
                     [{"in": "x"}, {"out": "codes", "dtype": "uint16", "count": 64},
                      {"int": 64}],
                     floats("x", 128, scale=200.0), 1,
                     "cvt.rn.satfinite.e4m3x2.f32 pairs: x[2i] low byte, x[2i+1] high"))
    out.append(_case("to_bf16", "convert", (1,), (128,),
                     [{"in": "x"}, {"out": "codes", "dtype": "uint16", "count": 100},
                      {"int": 100}],
                     floats("x", 100, scale=1e3), 1, "cvt.rn.bf16.f32"))
    out.append(_case("divergent_loop", "divergence", (1,), (64,),
                     [{"in": "x"}, {"out": "y", "dtype": "int32", "count": 64}, {"int": 64}],
                     lambda r: {"x": r.integers(0, 20, 64).astype(np.int32)}, 1,
                     "data-dependent trip counts per lane"))
    out.append(_case("warp_vote", "reduction", (1,), (64,),
                     [{"in": "x"}, {"out": "ballots", "dtype": "uint32", "count": 2},
                      {"out": "counts", "dtype": "int32", "count": 2}],
                     lambda r: {"x": (r.integers(0, 3, 64) - 1).astype(np.int32)}, 1,
                     "vote.ballot and popc per warp"))
    out.append(_case("atomics", "histogram", (2,), (64,),
                     [{"in": "x"}, {"inout": "init", "out": "result"}, {"int": 100}],
                     lambda r: {"x": r.integers(-1000, 1000, 100).astype(np.int32),
                                "init": np.concatenate([
                                    np.array([np.iinfo(np.int32).min, np.iinfo(np.int32).max,
                                              -1, 0, 0, 0, 0, 0], np.int32),
                                    np.zeros(100, np.int32)])}, 1,
                     "atomic max/min/CAS/xor/add on global memory"))
    out.append(_case("float_to_int", "convert", (1,), (32,),
                     [{"in": "x"}, {"out": "y", "dtype": "int32", "count": 64}, {"int": 16}],
                     lambda r: {"x": np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.7, 2.7, 3e9,
                                               -3e9, np.nan, np.inf, -np.inf, 1e-40,
                                               2147483520.0, 7.0, -7.0], np.float32)}, 1,
                     "cvt.rni/rzi/rmi/rpi.s32.f32 with saturation and NaN -> 0"))
    def ints(name: str, n: int, lo: int, hi: int, dtype=np.int32):
        return lambda r: {name: r.integers(lo, hi, n).astype(dtype)}

    out.append(_case("halfk", "half_precision", (1,), (64,),
                     [{"in": "x"}, {"out": "y", "dtype": "float16", "count": 50}, {"int": 50}],
                     lambda r: {"x": r.normal(50, scale=4.0).astype(np.float16)}, 1,
                     "fp16 add, fma and neg (__hadd, __hfma, __hneg)"))
    out.append(_case("bf16k", "half_precision", (1,), (64,),
                     [{"in": "x"}, {"out": "y", "dtype": "uint16", "count": 50}, {"int": 50}],
                     lambda r: {"x": (r.normal(50, scale=4.0).view(np.uint32) >> np.uint32(16))
                                .astype(np.uint16)}, 1,
                     "bf16 compare, fma and sub on BF16 codes", formats={"x": "bf16", "y": "bf16"}))
    out.append(_case("int_intrinsics", "intrinsics", (1,), (64,),
                     [{"in": "x"}, {"out": "y", "dtype": "uint32", "count": 16 * 40},
                      {"int": 40}],
                     lambda r: {"x": r.bits(40, np.uint32)}, 1,
                     "popc, clz, brev, byte_perm, mulhi, funnel shift, ffs, div/rem, mul24, "
                     "sad, ..."))
    out.append(_case("sub_warp_shuffles", "edge_cases", (1,), (32,),
                     [{"in": "x"}, {"out": "o", "dtype": "int32", "count": 160}],
                     ints("x", 32, -1000, 1000), 1, "shfl.sync with segment widths 8, 16, 4"))
    out.append(_case("continue_break", "edge_cases", (1,), (32,),
                     [{"in": "x"}, {"out": "o", "dtype": "int32", "count": 32}],
                     ints("x", 32, 0, 200), 1, "loops with continue and break per lane"))
    out.append(_case("divergent_ballot", "edge_cases", (1,), (32,),
                     [{"in": "x"}, {"out": "o", "dtype": "uint32", "count": 32}],
                     ints("x", 32, -5, 30), 1, "ballot/any/all inside divergent branches"))
    out.append(_case("local_table", "memory_spaces", (1,), (64,),
                     [{"in": "x"}, {"out": "out", "dtype": "int32", "count": 60}, {"int": 60}],
                     ints("x", 60, 0, 100), 1, "a per-thread table in local memory"))
    out.append(_case("generic_pointer", "memory_spaces", (1,), (64,),
                     [{"in": "g"}, {"out": "out", "dtype": "float32", "count": 64}],
                     floats("g", 66), 1, "generic pointers to shared and global memory"))
    out.append(_case("dyn_reverse", "memory_spaces", (2,), (64,),
                     [{"in": "x"}, {"out": "out", "dtype": "int32", "count": 128}],
                     ints("x", 128, -100, 100), 1, "dynamic shared memory: reverse per block",
                     dynamic_shared=256))
    out.append(_case("transpose_unpadded", "matmul", (1, 1), (32, 32),
                     [{"in": "x"}, {"out": "y", "dtype": "float32", "count": 1024}, {"int": 32}],
                     floats("x", 32, 32), 1, "transpose through an unpadded shared tile: "
                     "32-way bank conflicts"))
    out.append(_case("transpose_padded", "matmul", (1, 1), (32, 32),
                     [{"in": "x"}, {"out": "y", "dtype": "float32", "count": 1024}, {"int": 32}],
                     floats("x", 32, 32), 1, "transpose through a padded [32][33] shared tile"))
    return out


AREA = Area("simt", SPECS, OPERATIONS, cases)
