"""A harness for single warp-level PTX instructions: every lane loads its operand
registers from global memory, executes the instruction once and stores its results."""
from __future__ import annotations

import numpy as np
import pytest

from hardware.simt import GlobalMemory, load_ptx

_BITS = {np.dtype(np.uint8): 8, np.dtype(np.uint16): 16, np.dtype(np.uint32): 32}


def run_lanes(inst: str, ins: dict, outs: dict, *, target: str = "sm_90", threads: int = 32,
              gpu: str = "H100", setup: str = "", shared: int = 0) -> dict:
    """Run ``inst`` once per thread of one block.

    ``inst`` uses ``{name}`` for the brace vector of an operand's registers and
    ``{name0}``, ``{name1}``... for single registers (%r30-%r39 are free scratch). ``ins``: name -> (threads, n) array
    of uint8/uint16/uint32 (the register width follows the dtype). ``outs``: name ->
    (n, dtype). ``setup`` is PTX run before ``inst`` (it may use ``%tid``-based
    ``%r0``); ``shared`` declares ``.shared .align 16 .b8 smem[shared]``. Returns
    name -> (threads, n) arrays of the outputs."""
    spec = {k: (v.shape[1], v.dtype) for k, v in ins.items()}
    spec.update({k: (n, np.dtype(dt)) for k, (n, dt) in outs.items()})
    fmt, decl, load, store, params = {}, [], [], [], []
    counts = {8: 0, 16: 0, 32: 0}
    prefix = {8: "%c", 16: "%h", 32: "%r"}
    for i, (name, (n, dt)) in enumerate(spec.items()):
        bits = _BITS[np.dtype(dt)]
        regs = [f"{prefix[bits]}{counts[bits] + 1 + j}" for j in range(n)]
        counts[bits] += n
        fmt[name] = "{" + ", ".join(regs) + "}"
        for j, r in enumerate(regs):
            fmt[f"{name}{j}"] = r
        params.append(f".param .u64 p{i}")
        lines = load if name in ins else store
        lines += [f"ld.param.u64 %rd1, [p{i}];", f"mul.wide.u32 %rd2, %r0, {n * bits // 8};",
                  "add.s64 %rd1, %rd1, %rd2;"]
        for j, r in enumerate(regs):
            off = j * bits // 8
            lines.append(f"ld.global.b{bits} {r}, [%rd1+{off}];" if name in ins else
                         f"st.global.b{bits} [%rd1+{off}], {r};")
    for bits, n in counts.items():
        decl.append(f".reg .b{bits} {prefix[bits]}<{max(n + 2, 40)}>;")
    smem = f".shared .align 16 .b8 smem[{shared}];" if shared else ""
    body = "\n\t".join(load + [setup, inst.format(**fmt) + ";"] + store)
    ptx = f""".version 9.0
.target {target}
.address_size 64
.visible .entry k({", ".join(params)})
{{
\t{chr(10).join(decl)}
\t.reg .b64 %rd<8>;
\t.reg .pred %p<4>;
\t{smem}
\tmov.u32 %r0, %tid.x;
\t{body}
\tret;
}}
"""
    mod = load_ptx(ptx)
    mem = GlobalMemory()
    ptrs = []
    for name, (n, dt) in spec.items():
        if name in ins:
            ptrs.append(mem.to_device(np.ascontiguousarray(ins[name])))
        else:
            ptrs.append(mem.alloc(threads * n * np.dtype(dt).itemsize))
    mod.launch("k", 1, threads, ptrs, mem, gpu=gpu)
    return {name: mem.from_device(p, spec[name][1], (threads, spec[name][0]))
            for name, p in zip(spec, ptrs) if name in outs}


@pytest.fixture
def simt_lanes():
    """The :func:`run_lanes` harness."""
    return run_lanes
