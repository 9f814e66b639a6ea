"""``python -m oracle bench tensorcore``: every tensor-core and matrix-core preset's speed.

Each preset of ``refimpl.matmul.presets`` evaluates D = A B + C for random operands of
its input format with K = 32 (one to eight block FMAs or groups per dot product) and a
random FP32 C; the figure is dot products of length 32 per second (best of the runs).
The goal: at least 1 M per second for every preset (1024 x 1024 outputs; ``--quick``:
256 x 256). The block-scaled presets run through ``block_scaled_matmul`` with random
power-of-two (E8M0) or E4M3 scales.
"""
from __future__ import annotations

import argparse

import numpy as np
from tabulate import tabulate

from oracle.bench._timing import best_of
from refimpl import formats as F
from refimpl.matmul import PRESETS, block_scaled_matmul, matmul

GOAL = 1e6
K = 32


def _operands(fmt: str, m: int, n: int, rng: np.random.Generator):
    a = np.asarray(F.round_to(rng.standard_normal((m, K)), fmt, saturate=True), np.float32)
    b = np.asarray(F.round_to(rng.standard_normal((K, n)), fmt, saturate=True), np.float32)
    return a, b


def _case(name: str, m: int, n: int, rng: np.random.Generator):
    """A zero-argument callable computing one m x n product with preset ``name``."""
    p = PRESETS[name]
    c = rng.standard_normal((m, n)).astype(np.float32)
    if not p.block_scaled:
        a, b = _operands(p.in_format, m, n, rng)
        return lambda: matmul(a, b, c, accumulate=name)
    model = p.model()
    fmt = "e2m1" if model.kind == "mxf4nvf4" else "e4m3"
    a, b = _operands(fmt, m, n, rng)
    nb = K // model.scale_block
    if model.scale_format == "e8m0":
        sa = np.ldexp(1.0, rng.integers(-4, 5, (m, nb)))
        sb = np.ldexp(1.0, rng.integers(-4, 5, (nb, n)))
    else:
        sa = np.abs(np.asarray(F.round_to(rng.random((m, nb)) * 8, "e4m3"), np.float64))
        sb = np.abs(np.asarray(F.round_to(rng.random((nb, n)) * 8, "e4m3"), np.float64))
    return lambda: block_scaled_matmul(a, sa, b, sb, c, accumulate=name, in_format=fmt)


def run(args: argparse.Namespace) -> int:
    size = getattr(args, "size", None) or (256 if getattr(args, "quick", False) else 1024)
    rng = np.random.default_rng(0)
    rows, slow = [], []
    for name in PRESETS:
        fn = _case(name, size, size, rng)
        fn()  # warm up (first-call imports and caches)
        t = best_of(fn, repeat=2)
        rate = size * size / t
        if rate < GOAL:
            slow.append(name)
        rows.append([name, f"{t * 1e3:.0f}", f"{rate / 1e6:.2f}", "yes" if rate >= GOAL else "no"])
    print(tabulate(rows, headers=["preset", f"{size}x{K}x{size} ms", "M dots/s (K=32)",
                                  ">= 1 M/s"], disable_numparse=True))
    print(f"goal: every preset >= 1 M dot products of length {K} per second: "
          + ("met" if not slow else f"not met by {', '.join(slow)}"))
    return 0
