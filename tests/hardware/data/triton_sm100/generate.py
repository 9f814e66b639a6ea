"""Regenerates the Triton sm_100 PTX in this folder (needs the pip package triton, no GPU):

    python tests/hardware/data/triton_sm100/generate.py

The matmul tutorial kernel of ../triton_sm90/generate.py (plain pointer loads, tl.dot)
compiled with triton.compile for GPUTarget("cuda", 100, 32): Triton lowers tl.dot to
tcgen05.mma with the accumulator in Tensor Memory. The PTX and the metadata the tests need
(num_warps, dynamic shared memory, parameter count) are written next to this file."""
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


def main() -> None:
    meta = {}
    ints = {n: "i32" for n in ("M", "N", "K", "stride_am", "stride_bk", "stride_cm")}
    # name -> element type, C type, BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages
    jobs = {"matmul_fp16": ("fp16", "fp32", 128, 64, 32, 4, 1),
            "matmul_bf16": ("bf16", "fp32", 128, 128, 64, 4, 1),
            "matmul_e4m3": ("fp8e4nv", "fp32", 128, 64, 64, 4, 1),
            "matmul_tf32": ("fp32", "fp32", 128, 64, 32, 4, 1),
            "matmul_s8": ("i8", "i32", 128, 64, 64, 4, 1)}
    for name, (a, c, bm, bn, bk, warps, stages) in jobs.items():
        sig = {"a_ptr": f"*{a}", "b_ptr": f"*{a}", "c_ptr": f"*{c}", **ints}
        const = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk,
                 "ACC_TYPE": tl.int32 if a == "i8" else tl.float32}
        attrs = {(i,): [["tt.divisibility", 16]] for i, _ in enumerate(sig)}
        src = triton.compiler.ASTSource(fn=sm90.matmul_kernel, signature=sig,
                                        constexprs=const, attrs=attrs)
        k = triton.compile(src, target=GPUTarget("cuda", 100, 32),
                           options={"num_warps": warps, "num_stages": stages})
        (HERE / f"{name}.ptx").write_text(k.asm["ptx"])
        meta[name] = {"kernel": k.metadata.name, "num_warps": k.metadata.num_warps,
                      "shared": k.metadata.shared, "params": len(sig) + 2,
                      "constexprs": {x: str(v) for x, v in const.items()},
                      "signature": sig, "num_stages": stages,
                      "triton_version": triton.__version__}
    # one attention step (../triton_sm90/generate.py): P goes to Tensor Memory and is
    # the A operand ([a-tmem]) of the second tcgen05.mma
    sig = {"q_ptr": "*fp16", "k_ptr": "*fp16", "v_ptr": "*fp16", "o_ptr": "*fp32"}
    const = {"BLOCK_M": 128, "BLOCK_N": 64, "HEAD": 64}
    attrs = {(i,): [["tt.divisibility", 16]] for i, _ in enumerate(sig)}
    k = triton.compile(triton.compiler.ASTSource(fn=sm90.attention_step_kernel,
                                                 signature=sig, constexprs=const,
                                                 attrs=attrs),
                       target=GPUTarget("cuda", 100, 32),
                       options={"num_warps": 4, "num_stages": 1})
    (HERE / "attention_step_fp16.ptx").write_text(k.asm["ptx"])
    meta["attention_step_fp16"] = {"kernel": k.metadata.name,
                                   "num_warps": k.metadata.num_warps,
                                   "shared": k.metadata.shared, "params": len(sig) + 2,
                                   "constexprs": {x: str(v) for x, v in const.items()},
                                   "signature": sig, "num_stages": 1,
                                   "triton_version": triton.__version__}
    (HERE / "metadata.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
