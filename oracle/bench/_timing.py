"""Small timing helpers shared by the benchmark areas."""
from __future__ import annotations

import time
from typing import Callable


def best_of(fn: Callable[[], object], repeat: int = 3) -> float:
    """Best wall time in seconds over ``repeat`` calls (the least disturbed run)."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def best_of_interleaved(fns: dict[str, Callable[[], object]],
                        repeat: dict[str, int]) -> dict[str, float]:
    """Best wall time in seconds of each of ``fns`` over ``repeat[name]`` calls, the
    calls taken in rounds (one call of each function per round) so that every function
    sees the same changes of machine load: ratios of the results are fairer on a
    shared machine than those of :func:`best_of` called one function after the
    other."""
    best = {name: float("inf") for name in fns}
    for r in range(max(repeat.values(), default=0)):
        for name, fn in fns.items():
            if r < repeat[name]:
                t0 = time.perf_counter()
                fn()
                best[name] = min(best[name], time.perf_counter() - t0)
    return best
