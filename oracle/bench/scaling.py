"""``python -m oracle bench scaling``: block-scaling throughput in Melem/s.

MX quantise for every element format (E4M3, E5M2, E3M2, E2M3, E2M1, INT8) of a 4096 x 4096
tensor (1024 x 1024 with ``--quick``), normally distributed with a few outliers, given as
float32 and as float32 holding bfloat16 values; MX dequantise; NVFP4 quantise (TE rule,
1x16) and DeepSeek-style 1x128 block FP8 quantise.

When PyTorch and torchao are importable (optional, never a dependency) the same inputs
go through torchao's CPU ``to_mx`` and ``nvfp4_quantize`` (with its per-tensor scale)
and the table shows their time and the ratio, measured side by side in this run.
Goals: MX and NVFP4 quantise at least 2x torchao's speed; MX dequantise at least
300 Melem/s. Each figure is the best of three calls after one warm-up call; where torchao
has the operation, the two are called in turns (ours, torchao's, three rounds), so that
both see the same changes of machine load.
"""
from __future__ import annotations

import argparse
from typing import Callable, Optional

import numpy as np
from tabulate import tabulate

from oracle.bench._environment import blas_line, import_peer, peer_line
from oracle.bench._timing import best_of, best_of_interleaved
from refimpl import formats
from refimpl.scaling import MX_ELEMENTS, block_fp8_quantize, mx_quantize, nvfp4_quantize

#: goals: the ratio to the peer for quantisation, Melem/s for dequantisation
PEER_RATIO_GOAL = 2.0
DEQUANTIZE_GOAL = 300.0
#: MX element format -> torchao's ``elem_dtype`` (a torch dtype name or a string)
_TORCHAO_ELEM = {"e4m3": ("torch", "float8_e4m3fn"), "e5m2": ("torch", "float8_e5m2"),
                 "e3m2": ("str", "fp6_e3m2"), "e2m3": ("str", "fp6_e2m3"),
                 "e2m1": ("torch", "float4_e2m1fn_x2")}


def _input(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, n)).astype(np.float32)
    idx = rng.integers(0, x.size, size=x.size // 1000)
    x.reshape(-1)[idx] *= np.float32(100.0)
    return x


def _timed(fn: Callable[[], object]) -> float:
    fn()  # warm-up: first-call dispatch and allocation
    return best_of(fn, repeat=3)


def _peer_quantizers(peer: Optional[dict], x32: np.ndarray, xbf: np.ndarray) -> dict:
    """(format, input) -> a call of torchao on the same values, where torchao has it."""
    if peer is None:
        return {}
    torch = peer["torch"]
    to_mx = peer["torchao.prototype.mx_formats.mx_tensor"].to_mx
    nv = peer["torchao.prototype.mx_formats.nvfp4_tensor"]
    t32 = torch.from_numpy(x32)
    tbf = torch.from_numpy(xbf).to(torch.bfloat16)  # exact: the values are bfloat16
    out = {}
    for fmt, (kind, name) in _TORCHAO_ELEM.items():
        elem = getattr(torch, name) if kind == "torch" else name
        for label, t in (("float32", t32), ("bf16 values", tbf)):
            out[(fmt, label)] = (lambda t=t, elem=elem: to_mx(t, elem, 32))

    def nvfp4():
        scale = nv.per_tensor_amax_to_scale(torch.max(torch.abs(t32)))
        return nv.nvfp4_quantize(t32, 16, scale)
    out[("nvfp4", "float32")] = nvfp4
    return out


def run(args: argparse.Namespace) -> int:
    n = 1024 if getattr(args, "quick", False) else 4096
    x = _input(n)
    xbf = formats.round_to(x, "bf16").astype(np.float32)
    peer = import_peer("torch", "torchao", "torchao.prototype.mx_formats.mx_tensor",
                       "torchao.prototype.mx_formats.nvfp4_tensor")
    peer_calls = _peer_quantizers(peer, x, xbf)
    rows = []

    def row(name: str, label: str, fn, key=None, goal: str = "") -> None:
        peer_fn = peer_calls.get(key)
        if peer_fn is None:
            t = _timed(fn)
        else:
            fn()  # warm-up calls
            peer_fn()
            times = best_of_interleaved({"ours": fn, "peer": peer_fn}, {"ours": 3, "peer": 3})
            t, p = times["ours"], times["peer"]
        rate = x.size / t / 1e6
        pt = ptxt = ratio = ""
        if peer_fn is not None:
            pt, ptxt, r = f"{p * 1e3:.0f}", f"{x.size / p / 1e6:.0f}", p / t
            ratio = f"{r:.1f}x"
            goal = f">= {PEER_RATIO_GOAL:g}x torchao " + ("met" if r >= PEER_RATIO_GOAL
                                                           else "MISSED")
        elif goal.startswith(">="):
            goal += " met" if rate >= DEQUANTIZE_GOAL else " MISSED"
        rows.append([name, label, f"{t * 1e3:.1f}", f"{rate:.0f}", pt, ptxt, ratio, goal])

    for fmt in MX_ELEMENTS:
        for label, arr in (("float32", x), ("bf16 values", xbf)):
            row(f"MX {fmt} quantize", label, lambda a=arr, f=fmt: mx_quantize(a, f),
                (fmt, label), "" if fmt in _TORCHAO_ELEM else "(torchao: no MXINT8)")
    for fmt in MX_ELEMENTS:
        q = mx_quantize(x, fmt)
        row(f"MX {fmt} dequantize", "float32 out", q.dequantize,
            goal=f">= {DEQUANTIZE_GOAL:g} Melem/s")
    row("NVFP4 quantize (te, 1x16)", "float32", lambda: nvfp4_quantize(x),
        ("nvfp4", "float32"))
    row("block FP8 quantize (1x128)", "float32", lambda: block_fp8_quantize(x))
    print(f"{n}x{n} tensor; best of 3 calls after a warm-up (ours and torchao's in turns); "
          "ratio = torchao time / ours")
    print(tabulate(rows, headers=["operation", "input", "ms", "Melem/s", "torchao ms",
                                  "torchao Melem/s", "ratio", "goal"]))
    print(blas_line())
    print(peer_line(peer))
    return 0
