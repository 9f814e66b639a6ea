"""``python -m oracle bench formats``: encode and decode throughput of the format codec.

16M float32 values (1M with ``--quick``), drawn once from a fixed seed and scaled to
span each format's range, encoded with the default options (round to nearest even, no
saturation) and decoded back. Figures in Melem/s, best of three runs.
"""
from __future__ import annotations

import argparse

import numpy as np
from tabulate import tabulate

from oracle.bench._timing import best_of
from refimpl import formats as F

#: format -> scale of the standard-normal input (so values cover the format's range)
CASES = {"e4m3": 64.0, "e5m2": 4096.0, "e2m1": 2.0, "bf16": 1.0}


def run(args: argparse.Namespace) -> int:
    n = (1 << 20) if getattr(args, "quick", False) else (1 << 24)
    base = np.random.default_rng(2024).standard_normal(n).astype(np.float32)
    rows = []
    for name, scale in CASES.items():
        fmt = F.get(name)
        x = base * np.float32(scale)
        codes = F.encode(x, fmt)  # warm the lookup tables
        F.decode(codes, fmt)
        t_enc = best_of(lambda: F.encode(x, fmt))
        t_dec = best_of(lambda: F.decode(codes, fmt))
        enc = n / t_enc / 1e6
        dec = n / t_dec / 1e6
        rows.append((name, f"{enc:.0f}", f"{dec:.0f}", f"{dec / enc:.1f}"))
    print(f"{n} float32 values, round to nearest even")
    print(tabulate(rows, headers=["format", "encode Melem/s", "decode Melem/s",
                                  "decode/encode"], disable_numparse=True))
    return 0
