"""The scale part of ``python -m oracle bench simt``: the interpreter against the
figures an mma-heavy kernel and a large grid are held to.

- the gallery's ``mma_gemm_f16`` (ldmatrix + mma.sync m16n8k16, one warp per 16x16 output
  tile) on n^3 fp16 operands (n = 256; 128 with ``--quick``) against ``refimpl.matmul``
  with the same preset (H100-FP16) on the same operands: the goal is at most 3x, with the
  launch's default checks; the time without them is shown beside it;
- ``vector_add`` from 2^16 to 2^24 elements (2^16 to 2^20 with ``--quick``): warp
  instructions per second at each size (the goal: the slowest within 20 % of the
  fastest), and the peak of the memory the launch allocates (``tracemalloc``) at the
  largest size against the kernel's own data (three float32 arrays), with the default
  checks and without them (the goal: at most 2x).
"""
from __future__ import annotations

import time
import tracemalloc

import numpy as np
from tabulate import tabulate

from hardware.simt import GlobalMemory, gallery
from refimpl import matmul as mm

from ._timing import best_of_interleaved

__all__ = ["run_scale"]


def _mma_gemm(n: int):
    rng = np.random.default_rng(5)
    a = rng.standard_normal((n, n)).astype(np.float16)
    b = rng.standard_normal((n, n)).astype(np.float16)
    mem = GlobalMemory()
    pa, pb, pc = mem.to_device(a), mem.to_device(b), mem.alloc(4 * n * n)
    mod = gallery.load("mma_gemm")
    a32, b32, c0 = a.astype(np.float32), b.astype(np.float32), np.zeros((n, n), np.float32)
    return (lambda **kw: mod.launch("mma_gemm_f16", (n // 16, n // 16), 32,
                                    [pa, pb, pc, n, n, n], mem, **kw),
            lambda: mm.matmul(a32, b32, c0, accumulate="H100-FP16"))


def _vector_add(n: int):
    a = np.arange(n, dtype=np.float32)
    b = np.ones(n, np.float32)
    mem = GlobalMemory()
    pa, pb, pc = mem.to_device(a), mem.to_device(b), mem.alloc(4 * n)
    mod = gallery.load("vector_add")
    return lambda **kw: mod.launch("vector_add", -(-n // 256), 256, [pa, pb, pc, n], mem, **kw)


def _peak(fn, **kw) -> int:
    tracemalloc.start()
    try:
        fn(**kw)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def run_scale(quick: bool) -> None:
    n = 128 if quick else 256
    sim, ref = _mma_gemm(n)
    sim()
    t = best_of_interleaved({"default": sim, "off": lambda: sim(sanitize=False), "ref": ref},
                            dict.fromkeys(("default", "off", "ref"), 2 if quick else 3))
    ratio = t["default"] / t["ref"]
    print(f"\nmma_gemm_f16 {n}^3 (mma.sync, H100-FP16): {t['default']:.2f} s with the default "
          f"checks, {t['off']:.2f} s without; refimpl.matmul with the same preset "
          f"{t['ref']:.3f} s: {ratio:.1f}x ({t['off'] / t['ref']:.1f}x unchecked); goal 3x "
          + ("met" if ratio <= 3 else "MISSED"))
    rows, rates = [], []
    sizes = [16, 18, 20] if quick else [16, 20, 24]
    for e in sizes:
        fn = _vector_add(1 << e)
        st = fn()
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        rates.append(st.warp_instructions / dt)
        rows.append([f"2^{e}", st.warp_instructions, f"{dt:.2f}", f"{rates[-1]:,.0f}"])
    print(tabulate(rows, headers=["vector_add elements", "warp instr", "s/launch",
                                  "warp instr/s"]))
    flat = min(rates) / max(rates)
    print(f"throughput: slowest {flat:.2f} of fastest (goal >= 0.80: "
          + ("met" if flat >= 0.8 else "MISSED") + ")")
    big = _vector_add(1 << sizes[-1])
    data = 12 << sizes[-1]
    for label, kw in (("default checks", {}), ("sanitize=False", {"sanitize": False})):
        peak = _peak(big, **kw)
        print(f"traced peak at 2^{sizes[-1]} ({label}): {peak / 2**20:,.0f} MiB beside "
              f"{data / 2**20:,.0f} MiB of data: {(peak + data) / data:.2f}x the data (goal "
              "2x: " + ("met" if peak + data <= 2 * data else "MISSED") + ")")
