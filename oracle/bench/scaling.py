"""``python -m oracle bench scaling``: block-scaling throughput in Melem/s.

MXFP8 (E4M3) and MXFP4 (E2M1) quantise and dequantise, NVFP4 quantise (TE rule, 1x16) and
DeepSeek-style 1x128 block FP8 quantise of a 4096 x 4096 float32 tensor (1024 x 1024
with ``--quick``), normally distributed with a few outliers. Goal: faster than torchao's
CPU ``to_mx`` on this machine (about 48 Melem/s for MXFP8 and 40 for MXFP4).
"""
from __future__ import annotations

import argparse

import numpy as np
from tabulate import tabulate

from oracle.bench._timing import best_of
from refimpl.scaling import block_fp8_quantize, mx_quantize, nvfp4_quantize

#: operation -> goal in Melem/s (None: no stated goal)
GOALS = {"MXFP8 quantize": 48.0, "MXFP4 quantize": 40.0}


def _input(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, n)).astype(np.float32)
    idx = rng.integers(0, x.size, size=x.size // 1000)
    x.reshape(-1)[idx] *= np.float32(100.0)
    return x


def run(args: argparse.Namespace) -> int:
    n = 1024 if getattr(args, "quick", False) else 4096
    x = _input(n)
    mx8 = mx_quantize(x, "e4m3")
    mx4 = mx_quantize(x, "e2m1")
    ops = [
        ("MXFP8 quantize", lambda: mx_quantize(x, "e4m3")),
        ("MXFP8 dequantize", mx8.dequantize),
        ("MXFP4 quantize", lambda: mx_quantize(x, "e2m1")),
        ("MXFP4 dequantize", mx4.dequantize),
        ("NVFP4 quantize (te, 1x16)", lambda: nvfp4_quantize(x)),
        ("block FP8 quantize (1x128)", lambda: block_fp8_quantize(x)),
    ]
    rows = []
    for name, fn in ops:
        t = best_of(fn)
        rate = x.size / t / 1e6
        goal = GOALS.get(name)
        rows.append([name, f"{t * 1e3:.1f}", f"{rate:.1f}",
                     "" if goal is None else f"> {goal:.0f}"])
    print(tabulate(rows, headers=[f"{n}x{n} float32", "ms", "Melem/s", "goal"]))
    return 0
