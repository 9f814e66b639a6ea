"""``python -m oracle bench simt``: speed of the SIMT/PTX interpreter.

Figures: wall time of one launch (best of 3) and warp instructions per second for
- the shared-memory tiled matmul of the gallery (64x64 matrices, 16x16 tiles: 16 blocks
  of 256 threads), compared with the same kernel in numba's CUDA simulator, timed in the
  same run when numba is importable (optional, never a dependency; by the interpreter
  named by the environment variable ``ORACLE_BENCH_PEER_PYTHON``, default this one); the
  goal is 300x faster; without numba the line says it was not measured;
- the divergence-heavy kernel ``divergent_loop`` (data-dependent trip counts and
  nested branches: warps split and regroup constantly);
- the naive matmul and the histogram (shared and global atomics) for context;
- the speed goals, in warp instructions per second: at least 500 K on the gallery's
  two-warp block sum, at least 2 M on the gallery's FlashAttention-2 forward kernel (one
  block of 8 warps: 64 queries, 256 keys, d = 64) and on the 256x256x256 tiled matmul;
- the mma GEMM against refimpl.matmul and vector_add from 2^16 to 2^24 elements
  (:mod:`oracle.bench.simt_scale`);
- the cost of the sanitizer: each launch timed with the default checks (the figures
  above) and with ``sanitize=False`` in alternation, and their ratio (the goal: the
  default checks at most 1.5x the interpreter's time without them).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from tabulate import tabulate

from hardware.simt import GlobalMemory, gallery

from ._timing import best_of_interleaved
from .simt_scale import run_scale

_PEER = Path(__file__).with_name("_numba_peer.py")


def numba_simulator_seconds(repeat: int = 1, timeout: float = 300.0) -> tuple[float | None, str]:
    """(seconds, note): the best of ``repeat`` launches of the 64x64 tiled matmul in
    numba's CUDA simulator, run now in a child process, or (None, why not)."""
    exe = os.environ.get("ORACLE_BENCH_PEER_PYTHON") or sys.executable
    try:
        r = subprocess.run([exe, str(_PEER), str(repeat)], capture_output=True, text=True,
                           timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"numba's CUDA simulator not measured ({type(e).__name__}: {e})"
    if r.returncode == 3:
        return None, (f"numba's CUDA simulator not measured: numba is not importable by "
                      f"{exe} (optional; ORACLE_BENCH_PEER_PYTHON names an interpreter "
                      "that has it)")
    try:
        secs, err = (float(x) for x in r.stdout.split())
    except ValueError:
        return None, ("numba's CUDA simulator not measured: the child failed: "
                      + (r.stderr.strip().splitlines() or ["no output"])[-1])
    if not err < 1e-3:
        return None, f"numba's CUDA simulator not measured: its product is wrong (error {err})"
    return secs, "numba's CUDA simulator measured now"


def _matmul(kernel: str, n: int):
    rng = np.random.default_rng(0)
    A = rng.standard_normal((n, n)).astype(np.float32)
    B = rng.standard_normal((n, n)).astype(np.float32)
    mem = GlobalMemory()
    pa, pb = mem.to_device(A), mem.to_device(B)
    pc = mem.alloc(4 * n * n)
    mod = gallery.load("matmul")
    return lambda **kw: mod.launch(kernel, (n // 16, n // 16), (16, 16), [pa, pb, pc, n, n, n], mem,
                                **kw)


def _divergent(n: int):
    x = np.random.default_rng(1).integers(0, 2**31, n).astype(np.int32)
    mem = GlobalMemory()
    px = mem.to_device(x)
    po = mem.alloc(4 * n)
    mod = gallery.load("divergence")
    return lambda **kw: mod.launch("divergent_loop", -(-n // 256), 256, [px, po, n], mem, **kw)


def _histogram(n: int):
    data = np.random.default_rng(2).integers(0, 256, n).astype(np.uint8)
    mem = GlobalMemory()
    pd = mem.to_device(data)
    ph = mem.calloc(1024)  # zeroed: the kernel adds to it
    mod = gallery.load("histogram")
    return lambda **kw: mod.launch("histogram", 8, 256, [pd, ph, n], mem, **kw)


def _flash_attention(n_q: int, n_kv: int):
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((n, 64)).astype(np.float32) for n in (n_q, n_kv, n_kv))
    mem = GlobalMemory()
    pq, pk, pv = mem.to_device(q), mem.to_device(k), mem.to_device(v)
    po = mem.alloc(4 * n_q * 64)
    scale_log2 = np.float32(1.4426950408889634 / 8)  # 1/sqrt(64), folded with log2(e)
    mod = gallery.load("flash_attention")
    return lambda **kw: mod.launch("flash_attention_fwd", -(-n_q // 64), 256,
                                   [pq, pk, pv, po, n_q, n_kv, scale_log2], mem, **kw)


def _block_sum(n: int):
    x = np.random.default_rng(4).standard_normal(n).astype(np.float32)
    mem = GlobalMemory()
    px, po = mem.to_device(x), mem.alloc(4)
    mod = gallery.load("flash_attention")
    return lambda **kw: mod.launch("block_sum_2warps", 1, 64, [px, po, n], mem, **kw)


#: warp instructions per second the interpreter should reach, per kernel (the goals are
#: set for the full-size workloads; ``--quick`` runs smaller ones)
GOALS = {"flash_attention_fwd": 2e6, "block_sum_2warps": 500e3, "matmul_tiled 256": 2e6}


def run(args: argparse.Namespace) -> int:
    quick = bool(getattr(args, "quick", False))
    cases = [
        ("matmul_tiled 64x64 (16x16 tiles)", _matmul("matmul_tiled", 64)),
        ("divergent_loop", _divergent(1024 if quick else 4096)),
        ("matmul_naive 64x64", _matmul("matmul_naive", 64)),
        ("histogram", _histogram(8192 if quick else 65536)),
        ("flash_attention_fwd (8 warps)", _flash_attention(64, 64 if quick else 256)),
        ("block_sum_2warps (2 warps)", _block_sum(64 * (256 if quick else 1024))),
        ("matmul_tiled 64x64x64 (quick)" if quick else "matmul_tiled 256x256x256",
         _matmul("matmul_tiled", 64 if quick else 256)),
    ]
    rows = []
    costs = []
    for name, fn in cases:
        stats = fn()  # warm-up (module load and compile are cached)
        fn(sanitize=False)
        # the default checks and none, timed in alternation (fair ratios on a busy
        # machine)
        t = best_of_interleaved({"default": fn, "off": lambda fn=fn: fn(sanitize=False)},
                                dict.fromkeys(("default", "off"), 2 if quick else 3))
        costs.append(t["default"] / t["off"])
        rows.append([name, stats.warp_instructions, f"{stats.simd_efficiency:.3f}",
                     f"{t['default'] * 1e3:.1f}", f"{stats.warp_instructions / t['default']:,.0f}",
                     f"{t['off'] * 1e3:.1f}", f"{costs[-1]:.2f}x"])
    for row in rows:
        goal = next((g for k, g in GOALS.items() if row[0].startswith(k)), None)
        rate = float(row[4].replace(",", ""))
        row.append("" if goal is None else f"{goal:,.0f} " + ("met" if rate >= goal else "MISSED"))
    print(tabulate(rows, headers=["kernel", "warp instr", "SIMD eff", "ms/launch",
                                  "warp instr/s", "ms unchecked", "checks cost", "goal"]))
    print(f"\nsanitizer (launch's default checks: memcheck, racecheck, initcheck, "
          f"synccheck) against sanitize=False: {min(costs):.2f}x to {max(costs):.2f}x "
          f"(geometric mean {float(np.exp(np.mean(np.log(costs)))):.2f}x)")
    run_scale(quick)
    t_mm = float(rows[0][3]) / 1e3
    if quick:
        print("\ntiled matmul against numba's CUDA simulator: not measured with --quick")
        return 0
    peer, note = numba_simulator_seconds()
    if peer is None:
        print(f"\ntiled matmul: {note}")
    else:
        print(f"\ntiled matmul: {peer / t_mm:,.0f}x faster than numba's CUDA simulator "
              f"({peer:.2f} s for the same kernel, {note}; goal: 300x)")
    return 0
