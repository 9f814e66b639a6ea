"""Regenerates the CUTLASS 2.x sm_80 PTX and kernel parameters in this folder (needs nvcc
and a CUTLASS checkout, no GPU):

    python tests/hardware/data/cutlass2_sm80/generate.py /path/to/cutlass

gemm_sm80.cu is compiled with ``nvcc -arch=sm_80 -ptx`` (gemm_sm80.ptx) and as a host
program that fills the kernel's Params for one problem with stand-in pointers;
gemm_sm80_params.json keeps the Params bytes, the byte offsets of each pointer in them
(to be replaced by a test's own addresses) and the launch shape CUTLASS computes."""
from __future__ import annotations

import json
import pathlib
import re
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
PROBLEM = (256, 256, 256)            # M, N, K: a 2 x 2 grid of 128 x 128 tiles
ALPHA, BETA = 1.0, 0.5
#: stand-in device pointers of A, B, C, D: distinct, 256-byte aligned, each unique in Params
POINTERS = {"A": 0x7A1100000000, "B": 0x7B2200000000, "C": 0x7C3300000000,
            "D": 0x7D4400000000}


def main(cutlass: str) -> None:
    flags = ["-std=c++17", "-arch=sm_80", "--expt-relaxed-constexpr", "-DNDEBUG",
             "-I", str(pathlib.Path(cutlass) / "include")]
    src, ptx = str(HERE / "gemm_sm80.cu"), HERE / "gemm_sm80.ptx"
    subprocess.run(["nvcc", *flags, "-ptx", src, "-o", str(ptx)], check=True)
    subprocess.run(["ptxas", "-arch=sm_80", str(ptx), "-o", "/dev/null"], check=True)
    with tempfile.TemporaryDirectory() as tmp:
        exe = str(pathlib.Path(tmp) / "gemm_sm80_host")
        subprocess.run(["nvcc", *flags, src, "-o", exe], check=True)
        run = subprocess.run([exe, *map(str, PROBLEM), *(hex(POINTERS[k]) for k in "ABCD"),
                              repr(ALPHA), repr(BETA)], check=True, capture_output=True,
                             text=True)
    shape = re.search(r"grid (\d+) (\d+) (\d+) block (\d+) (\d+) (\d+) smem (\d+)",
                      run.stdout)
    params = bytes.fromhex(re.search(r"PARAMS ([0-9a-f]+)", run.stdout).group(1))
    pointers = {k: [m.start() for m in re.finditer(re.escape(v.to_bytes(8, "little")),
                                                   params)]
                for k, v in POINTERS.items()}
    out = dict(kernel=re.search(r"\.entry (\S+)\(", ptx.read_text())[1], problem=PROBLEM,
               alpha=ALPHA, beta=BETA, grid=[int(x) for x in shape.groups()[:3]],
               block=[int(x) for x in shape.groups()[3:6]], dynamic_shared=int(shape[7]),
               params=params.hex(), pointers=pointers)
    (HERE / "gemm_sm80_params.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
