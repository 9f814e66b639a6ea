"""Regenerates the CUTLASS 3.x sm_90a PTX and kernel parameters in this folder (needs
nvcc 12.3 or later and a CUTLASS checkout, no GPU):

    python tests/hardware/data/cutlass3_sm90/generate.py /path/to/cutlass

ws_gemm.cu, with the macros of each of VARIANTS, is compiled with ``nvcc -arch=sm_90a
-ptx`` (<variant>.ptx) and as a host program, which CUTLASS's own host code (GemmKernel::to_underlying_arguments) uses to fill
the kernel's Params for one problem, with stand-in pointers; <variant>_params.json keeps
the Params bytes, the byte offsets of each pointer in them (to be replaced by a test's
own addresses), the arguments CUTLASS passed to cuTensorMapEncodeTiled for each map and
where the map lies in Params (an 8-byte marker the stand-in encoder wrote), and the
launch shape CUTLASS computes (grid, block, dynamic shared memory)."""
from __future__ import annotations

import json
import pathlib
import re
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
PROBLEM = (256, 256, 256)            # M, N, K: a 2 x 2 grid of 128 x 128 tiles
#: name -> the macros of ws_gemm.cu that make the variant
VARIANTS = {
    # one producer and one consumer warpgroup per 128 x 128 tile, default epilogue
    "ws_gemm": [],
    # persistent, two consumer warpgroups sharing each tile (64 rows each), TMA epilogue
    "ws_cooperative": ["-DSCHEDULE=KernelTmaWarpSpecializedCooperative",
                       "-DEPILOGUE=cutlass::epilogue::TmaWarpSpecializedCooperative"],
    # persistent, two consumer warpgroups on alternate tiles, ordered by a barrier
    "ws_pingpong": ["-DSCHEDULE=KernelTmaWarpSpecializedPingpong",
                    "-DEPILOGUE=cutlass::epilogue::TmaWarpSpecialized"],
    # clusters of two CTAs along M: B's tile multicast to both
    "ws_cluster2": ["-DCLUSTER_M=2"],
    # FP8 E4M3 operands (wgmma k32), FP32 accumulators promoted every few k-blocks
    "ws_e4m3": ["-DELEMENT=cutlass::float_e4m3_t"],
}
ALPHA, BETA = 1.0, 0.5
#: stand-in device pointers of A, B, C, D: distinct, 256-byte aligned, each unique in Params
POINTERS = {"A": 0x7A1100000000, "B": 0x7B2200000000, "C": 0x7C3300000000,
            "D": 0x7D4400000000}
MARKER = 0x4B52414D


def main(cutlass: str) -> None:
    for name, macros in VARIANTS.items():
        variant(cutlass, name, macros)


def variant(cutlass: str, name: str, macros: list[str]) -> None:
    root = pathlib.Path(cutlass)
    inc = ["-I", str(root / "include"), "-I", str(root / "tools/util/include")]
    flags = ["-std=c++17", "-arch=sm_90a", "--expt-relaxed-constexpr", "-DNDEBUG",
             "-DCUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL", *macros]
    src = str(HERE / "ws_gemm.cu")
    subprocess.run(["nvcc", *flags, *inc, "-ptx", src, "-o", str(HERE / f"{name}.ptx")],
                   check=True)
    subprocess.run(["ptxas", "-arch=sm_90a", str(HERE / f"{name}.ptx"), "-o", "/dev/null"],
                   check=True)
    with tempfile.TemporaryDirectory() as tmp:
        exe = str(pathlib.Path(tmp) / "ws_gemm_host")
        subprocess.run(["nvcc", *flags, *inc, src, "-o", exe], check=True)
        run = subprocess.run([exe, *map(str, PROBLEM), *(hex(POINTERS[k]) for k in "ABCD"),
                              repr(ALPHA), repr(BETA)], check=True, capture_output=True,
                             text=True)
    shape = re.search(r"grid (\d+) (\d+) (\d+) block (\d+) (\d+) (\d+) smem (\d+)",
                      run.stdout)
    params = bytes.fromhex(re.search(r"PARAMS ([0-9a-f]+)", run.stdout).group(1))
    pointers = {}
    for operand, value in POINTERS.items():
        raw = value.to_bytes(8, "little")
        pointers[operand] = [m.start() for m in re.finditer(re.escape(raw), params)]
    maps = []
    for line in run.stderr.splitlines():
        f = line.split()
        if not f or f[0] != "MAP":
            continue
        # MAP i dtype d rank r addr a dims ... strides ... box ... estr ... interleave il
        # swizzle sw l2 p oob o
        i, dtype, rank, addr = int(f[1]), int(f[3]), int(f[5]), int(f[7])
        at = f.index("dims") + 1
        dims = [int(x) for x in f[at:at + rank]]
        at = f.index("strides") + 1
        strides = [int(x) for x in f[at:at + rank - 1]]
        at = f.index("box") + 1
        box = [int(x) for x in f[at:at + rank]]
        at = f.index("estr") + 1
        estr = [int(x) for x in f[at:at + rank]]
        rest = [int(f[f.index(key) + 1]) for key in ("interleave", "swizzle", "l2", "oob")]
        marker = (MARKER | (i << 32)).to_bytes(8, "little")
        offsets = [m.start() for m in re.finditer(re.escape(marker), params)]
        operand = next(k for k, v in POINTERS.items() if v == addr)
        maps.append(dict(offset=offsets, operand=operand, dtype=dtype, rank=rank, dims=dims,
                         strides=strides, box=box, element_strides=estr,
                         interleave=rest[0], swizzle=rest[1], l2_promotion=rest[2],
                         oob_fill=rest[3]))
    out = dict(macros=macros, kernel=re.search(r"\.entry (\S+)\(", (HERE / f"{name}.ptx").read_text())[1],
               problem=PROBLEM, alpha=ALPHA, beta=BETA,
               grid=[int(x) for x in shape.groups()[:3]],
               block=[int(x) for x in shape.groups()[3:6]], dynamic_shared=int(shape[7]),
               params=params.hex(), pointers=pointers, maps=maps)
    (HERE / f"{name}_params.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
