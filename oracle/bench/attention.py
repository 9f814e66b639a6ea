"""``python -m oracle bench attention``: the exact reference attention and the
FlashAttention-2 schedule against a plain NumPy ``softmax(Q K^T / sqrt(D)) V``.

One head, float32, N = 4096, D = 128 (``--quick``: N = 1024). The floor is what an
exact method cannot avoid on this machine: the two float64 GEMMs of the same shapes
(``Q K^T``, N x D x N, and ``P V``, N x N x D), timed in the same rounds. Goals at
N = 4096: the exact reference within 2.5x of the floor, ``flash_v2`` (block 128 x 128)
within 2x, while holding only O(N D + block^2) extra memory; the ratio to plain NumPy
(float32) is printed beside it, not a goal: it moves with the BLAS kernel. Peak memory
is the tracemalloc peak of one call (NumPy reports its array allocations to tracemalloc). The timed calls are taken
in rounds, one call of each implementation per round, so that on a shared machine
every implementation sees the same changes of load.

On a machine with two or more cores and OpenBLAS, ``flash_v2`` and the exact reference
run their float64 products on a helper thread, ahead of the elementwise work of the
calling thread (flash_v2 in chunks of query rows, which the calling thread forms itself
when the helper has not started them; :mod:`refimpl.blas`); the report says whether
they did. The
results do not depend on it, nor on ``OPENBLAS_NUM_THREADS``.

When PyTorch is importable (optional, never a dependency), its CPU
``scaled_dot_product_attention`` on the same inputs is timed beside them as the peer.
The report ends with NumPy's BLAS kernel and thread count.
"""
from __future__ import annotations

import argparse
import math
import tracemalloc

import numpy as np
from tabulate import tabulate

from oracle.bench._environment import blas_line, import_peer, peer_line
from oracle.bench._timing import best_of_interleaved
from refimpl.blas import product_thread_available
from refimpl.attention import attention, flash_v2

#: goals as multiples of the floor (the two float64 GEMMs), at N = 4096
GOALS = {"exact reference": 2.5, "flash_v2 128x128": 2.0}
PEER = "torch SDPA (peer)"
FLOOR = "floor: two f64 GEMMs"


def plain_numpy(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """What framework code does on the CPU: BLAS products and the platform's exp."""
    s = (q @ k.T) * np.float32(1 / math.sqrt(q.shape[-1]))
    s -= s.max(axis=-1, keepdims=True)
    np.exp(s, out=s)
    s /= s.sum(axis=-1, keepdims=True)
    return s @ v


def _peak_mib(fn) -> tuple[float, object]:
    tracemalloc.start()
    tracemalloc.reset_peak()
    result = fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 2**20, result


def run(args: argparse.Namespace) -> int:
    n = 1024 if getattr(args, "quick", False) else 4096
    d = 128
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((n, d)).astype(np.float32) for _ in range(3))
    cases = {
        "plain numpy": lambda: plain_numpy(q, k, v),
        "exact reference": lambda: attention(q[None], k[None], v[None]),
        "flash_v2 128x128": lambda: flash_v2(q[None], k[None], v[None], block=(128, 128)),
    }
    repeat = {"plain numpy": 7, "exact reference": 3, "flash_v2 128x128": 5}
    q64, k64, v64 = (a.astype(np.float64) for a in (q, k, v))
    p64 = rng.random((n, n))
    floor_fns = {FLOOR: lambda: (q64 @ k64.T, p64 @ v64)}
    peer = import_peer("torch")
    if peer is not None:
        torch = peer["torch"]
        tq, tk, tv = (torch.from_numpy(a)[None, None] for a in (q, k, v))
        sdpa = torch.nn.functional.scaled_dot_product_attention
        cases[PEER] = lambda: sdpa(tq, tk, tv).numpy()[0]
        repeat[PEER] = 7
    times = best_of_interleaved({**cases, **floor_fns}, {**repeat, FLOOR: 5})
    measured = {name: _peak_mib(fn) for name, fn in cases.items()}
    base, floor = times["plain numpy"], times[FLOOR]
    ref = np.asarray(measured["exact reference"][1])[0]
    rows = []
    for name in cases:
        ratio = times[name] / floor
        goal = GOALS.get(name)
        out = measured[name][1]
        out = np.asarray(out[0] if isinstance(out, tuple) else out).reshape(n, d)
        err = float(np.max(np.abs(out.astype(np.float64) - ref)))
        rows.append([
            name, f"{times[name]:.3f}", f"{times[name] / base:.1f}x", f"{ratio:.2f}x",
            "-" if goal is None else (
                f"<= {goal:g}x " + ("met" if ratio <= goal else "MISSED") if n == 4096
                else f"<= {goal:g}x at N=4096"),
            "- (not traced)" if name == PEER else f"{measured[name][0]:.1f}", f"{err:.2e}",
        ])
    print(f"attention, one head, N={n}, D={d}, float32 (inputs {3 * n * d * 4 / 2**20:.1f} MiB; "
          f"N^2 scores {n * n * 4 / 2**20:.0f} MiB in float32)")
    rows.append([FLOOR, f"{floor:.3f}", f"{floor / base:.1f}x", "1.00x", "-", "-", "-"])
    print(tabulate(rows, headers=["implementation", "seconds", "vs numpy f32", "vs floor",
                                  "goal (vs floor)", "peak MiB", "max |out - exact|"]))
    print("floor: Q K^T and P V in float64 (np.matmul, the BLAS below); "
          "best of 7 / 3 / 5 / 5 runs taken in rounds (one call of each per round); "
          "the float64 products of flash_v2 and the exact reference "
          + ("ran on a helper thread beside its elementwise work (BLAS at one thread "
             "meanwhile)" if product_thread_available() else
             "ran on the calling thread (no settable OpenBLAS or one core)"))
    print(blas_line())
    print(peer_line(peer))
    return 0
