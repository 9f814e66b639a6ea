"""The PTX test harness: single instructions wrapped in a kernel, run by the SIMT
interpreter on arrays of operands.

- :func:`run_instruction`: one element per thread over a 1-D grid (element count passed
  as a kernel parameter, so the kernel text depends only on the instruction and the
  operand widths).
- :func:`run_lanes`: one block whose every lane loads its own operand registers,
  executes the instruction once and stores its results (warp-level instructions).
- :func:`module`: :func:`hardware.simt.load_ptx` cached by the kernel text. A property
  test draws many examples of the same instruction; each launch gets fresh memory, the
  parsed module is shared (it holds no launch state).
"""
from __future__ import annotations

import functools

import numpy as np

from hardware.simt import GlobalMemory, load_ptx
from hardware.simt.module import Module


@functools.lru_cache(maxsize=512)
def module(ptx: str) -> Module:
    """``load_ptx(ptx)``, parsed once per distinct text."""
    return load_ptx(ptx)


# ----- one element per thread ----------------------------------------------------------

_REG = {1: "%rc", 2: "%rs", 4: "%r", 8: "%rd"}


def run_instruction(template: str, inputs: list[np.ndarray], out_dtype, *,
                    block: int = 128, extra_outputs: int = 0) -> np.ndarray | list:
    """Execute ``template`` (with {d}, {a}, {b}, {c}, ... placeholders; {d1} for a second
    destination) once per element. Inputs/outputs are raw-bit arrays; their itemsize picks
    the register width. Returns the output array (or a list with the extra outputs)."""
    n = len(inputs[0])
    out_dtype = np.dtype(out_dtype)
    names = "abcefgh"  # "d" is the destination
    lines = []
    params = []
    regs = {}
    for i, arr in enumerate(inputs):
        w = arr.dtype.itemsize
        regs[names[i]] = f"{_REG[w]}{i + 1}"
        params.append(f".param .u64 p{i}")
        lines.append(f"ld.param.u64 %rd{20 + i}, [p{i}];")
        lines.append(f"mul.wide.u32 %rd31, %r30, {w};")
        lines.append(f"add.s64 %rd{20 + i}, %rd{20 + i}, %rd31;")
        lines.append(f"ld.global.b{8 * w} {regs[names[i]]}, [%rd{20 + i}];")
    outs = [out_dtype] * (1 + extra_outputs)
    for j, dt in enumerate(outs):
        w = dt.itemsize
        key = "d" if j == 0 else f"d{j}"
        regs[key] = f"{_REG[w]}{9 - j}"
        params.append(f".param .u64 q{j}")
    params.append(".param .u32 count")
    lines.append(template.format(**regs) + ";")
    for j, dt in enumerate(outs):
        w = dt.itemsize
        key = "d" if j == 0 else f"d{j}"
        lines.append(f"ld.param.u64 %rd{40 + j}, [q{j}];")
        lines.append(f"mul.wide.u32 %rd31, %r30, {w};")
        lines.append(f"add.s64 %rd{40 + j}, %rd{40 + j}, %rd31;")
        lines.append(f"st.global.b{8 * w} [%rd{40 + j}], {regs[key]};")
    body = "\n\t".join(x for x in lines if x)
    ptx = f"""
.version 9.0
.target sm_90
.address_size 64
.visible .entry k({", ".join(params)})
{{
\t.reg .pred %p<10>;
\t.reg .b16 %rs<10>;
\t.reg .b32 %r<40>;
\t.reg .b64 %rd<50>;
\tmov.u32 %r31, %ctaid.x;
\tmov.u32 %r32, %ntid.x;
\tmov.u32 %r33, %tid.x;
\tmad.lo.s32 %r30, %r31, %r32, %r33;
\tld.param.u32 %r34, [count];
\tsetp.ge.u32 %p9, %r30, %r34;
\t@%p9 bra $L_end;
\t{body}
$L_end:
\tret;
}}
"""
    mem = GlobalMemory()
    ptrs = [mem.to_device(np.ascontiguousarray(a)) for a in inputs]
    optrs = [mem.alloc(max(1, n * dt.itemsize)) for dt in outs]
    module(ptx).launch("k", max(1, -(-n // block)), block, ptrs + optrs + [n], mem)
    res = [mem.from_device(p, dt, n) for p, dt in zip(optrs, outs)]
    return res[0] if not extra_outputs else res


# ----- one block, every lane -----------------------------------------------------------

_BITS = {np.dtype(np.uint8): 8, np.dtype(np.uint16): 16, np.dtype(np.uint32): 32}


def run_lanes(inst: str, ins: dict, outs: dict, *, target: str = "sm_90", threads: int = 32,
              gpu: str = "H100", setup: str = "", shared: int = 0) -> dict:
    """Run ``inst`` once per thread of one block.

    ``inst`` uses ``{name}`` for the brace vector of an operand's registers and
    ``{name0}``, ``{name1}``... for single registers (%r30-%r39 are free scratch). ``ins``:
    name -> (threads, n) array of uint8/uint16/uint32 (the register width follows the
    dtype). ``outs``: name -> (n, dtype). ``setup`` is PTX run before ``inst`` (it may use
    ``%tid``-based ``%r0``); ``shared`` declares ``.shared .align 16 .b8 smem[shared]``.
    Returns name -> (threads, n) arrays of the outputs."""
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
    mem = GlobalMemory()
    ptrs = []
    for name, (n, dt) in spec.items():
        if name in ins:
            ptrs.append(mem.to_device(np.ascontiguousarray(ins[name])))
        else:
            ptrs.append(mem.alloc(threads * n * np.dtype(dt).itemsize))
    module(ptx).launch("k", 1, threads, ptrs, mem, gpu=gpu)
    return {name: mem.from_device(p, spec[name][1], (threads, spec[name][0]))
            for name, p in zip(spec, ptrs) if name in outs}
