"""``python -m oracle bench formats``: encode and decode throughput of the format codec.

16M float32 values (1M with ``--quick``), drawn once from a fixed seed and scaled to
span each format's range, encoded with the default options (round to nearest even, no
saturation) and decoded back. Figures in Melem/s, best of three runs.

When ml_dtypes is importable (optional, never a dependency), its casts of the same
values (``astype`` to its float8/float4/bfloat16 types, and back to float32) are timed
beside them in the same rounds, with the ratio (its time / ours) and whether its codes
equal ours; the goal is bf16 encode and decode at least 1.5x ml_dtypes.
"""
from __future__ import annotations

import argparse

import numpy as np
from tabulate import tabulate

from oracle.bench._environment import import_peer
from oracle.bench._timing import best_of
from refimpl import formats as F

#: format -> scale of the standard-normal input (so values cover the format's range)
CASES = {"e4m3": 64.0, "e5m2": 4096.0, "e2m1": 2.0, "bf16": 1.0}
#: format -> ml_dtypes' type of the same encoding (the peer)
PEER_TYPES = {"e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2", "e2m1": "float4_e2m1fn",
              "bf16": "bfloat16"}
#: the goal: bf16 encode and decode at least this many times ml_dtypes' speed
BF16_GOAL = 1.5


def run(args: argparse.Namespace) -> int:
    n = (1 << 20) if getattr(args, "quick", False) else (1 << 24)
    base = np.random.default_rng(2024).standard_normal(n).astype(np.float32)
    peer = import_peer("ml_dtypes")
    rows = []
    for name, scale in CASES.items():
        fmt = F.get(name)
        x = base * np.float32(scale)
        codes = F.encode(x, fmt)  # warm the lookup tables
        F.decode(codes, fmt)
        t_enc = t_dec = p_enc = p_dec = float("inf")
        ptype = getattr(peer["ml_dtypes"], PEER_TYPES[name], None) if peer else None
        theirs = None
        for _ in range(3):      # in rounds: ours and the peer's see the same load
            t_enc = min(t_enc, best_of(lambda: F.encode(x, fmt), repeat=1))
            t_dec = min(t_dec, best_of(lambda: F.decode(codes, fmt), repeat=1))
            if ptype is not None:
                p_enc = min(p_enc, best_of(lambda: x.astype(ptype), repeat=1))
                theirs = x.astype(ptype)
                p_dec = min(p_dec, best_of(lambda: theirs.astype(np.float32), repeat=1))
        enc, dec = n / t_enc / 1e6, n / t_dec / 1e6
        row = [name, f"{enc:.0f}", f"{dec:.0f}", f"{dec / enc:.1f}"]
        if peer is not None:
            if ptype is None:
                row += ["-", "-", "(no such type)", "-"]
            else:
                same = np.array_equal(theirs.view(np.uint8 if theirs.itemsize == 1
                                                  else np.uint16).reshape(-1) & _mask(fmt),
                                      codes.reshape(-1))
                goal = "-"
                if name == "bf16":
                    ok = p_enc / t_enc >= BF16_GOAL and p_dec / t_dec >= BF16_GOAL
                    goal = f">= {BF16_GOAL:g}x " + ("met" if ok else "MISSED")
                row += [f"{p_enc / t_enc:.2f}x", f"{p_dec / t_dec:.2f}x",
                        "yes" if same else "NO", goal]
        rows.append(row)
    print(f"{n} float32 values, round to nearest even")
    headers = ["format", "encode Melem/s", "decode Melem/s", "decode/encode"]
    if peer is not None:
        headers += ["encode vs ml_dtypes", "decode vs ml_dtypes", "same codes", "goal"]
    print(tabulate(rows, headers=headers, disable_numparse=True))
    if peer is None:
        print("peer: ml_dtypes not importable (optional; install it in a venv to compare)")
    else:
        print(f"peer: ml_dtypes {getattr(peer['ml_dtypes'], '__version__', '?')} "
              "(ratio: its time / ours, measured in this run)")
    return 0


def _mask(fmt) -> int:
    """The bits of a code of ``fmt`` (ml_dtypes keeps a 4-bit code in a byte)."""
    return (1 << fmt.bits) - 1
