"""Blocks of one launch on several processes: ``launch(..., workers=N)``.

The waves of a grid run in order in one process (:meth:`hardware.simt.Module.launch`).
When the blocks of a launch cannot communicate, the waves can as well run anywhere: a
launch with ``workers`` splits them into contiguous chunks of whole waves, runs each
chunk in a worker process on a copy of the global memory, and merges what the chunks
wrote, in block order. The result is the same bytes and the same
:class:`~hardware.simt.stats.LaunchStats` as one process.

What "cannot communicate" means, and who checks it:

- the kernel has no global atomic or reduction (``atom``/``red`` outside shared
  memory, ``cp.reduce.async.bulk``): checked before anything runs (a LaunchError);
- no two chunks change the same byte: checked when the chunks are merged (a LaunchError
  naming the byte's allocation and the two block ranges; nothing of the later chunk is
  written);
- no block reads what a block of another chunk wrote (a flag, a partial result): this
  is the caller's declaration, which passing ``workers`` makes (a block waiting for such
  a flag would spin in its worker until the progress detection stops it).

``workers`` is an int (that many local processes, started with the ``spawn`` method) or
any :class:`concurrent.futures.Executor` (a pool backed by Dask or Ray, say), which is
given one task per chunk: ``getattr(executor, "_max_workers", None)`` chunks, or
``os.cpu_count()``. Each task carries the PTX text, the arguments and the memory, and
returns the bytes it changed. A fault in a chunk is raised after the chunks before it
are merged, with the bytes the faulting chunk wrote before the fault (as one process
leaves them). ``max_instructions`` bounds each chunk while it runs and the launch's
total when the chunks are merged; ``time_limit`` bounds each chunk.
"""
from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import multiprocessing
import os
from typing import Any

import numpy as np

from .errors import LaunchBudgetError, LaunchError
from .memory import GlobalMemory
from .stats import LaunchStats

__all__ = ["communicating_instruction", "check_workers", "run_chunks", "run_task"]

_SHARED = ("shared", "shared::cta", "shared::cluster")


def communicating_instruction(kernel: Any) -> Any:
    """The first instruction of ``kernel`` through which blocks may communicate in global
    memory (an atomic or reduction outside shared memory), or None."""
    for inst in kernel.source.instructions:
        op = inst.parts[0]
        if op in ("atom", "red") and not any(p in _SHARED for p in inst.parts[1:]):
            return inst
        if op == "cp" and "reduce" in inst.parts:
            return inst
    return None


def check_workers(workers: Any) -> tuple[Any, int]:
    """(executor or None, number of chunks) for the ``workers`` argument."""
    if isinstance(workers, cf.Executor):
        n = getattr(workers, "_max_workers", None) or os.cpu_count() or 1
        return workers, int(n)
    if isinstance(workers, (bool, np.bool_)) or not isinstance(workers, (int, np.integer)) \
            or workers < 1:
        raise LaunchError(f"workers must be None, a positive int or a "
                          f"concurrent.futures.Executor, got {workers!r}")
    return None, int(workers)


def _state(memory: GlobalMemory) -> dict:
    top = memory.used
    return {"buf": memory.buffer[:top].copy(), "init": memory.init_shadow[:top].copy(),
            "size": list(memory._size), "boff": list(memory._boff),
            "live": list(memory._live), "names": list(memory._names), "top": top}


def _restore(state: dict) -> GlobalMemory:
    m = GlobalMemory()
    top = state["top"]
    cap = max(top, 4096)
    m._buf = np.zeros(cap, dtype=np.uint8)
    m._buf[:top] = state["buf"]
    m._init = np.zeros(cap, dtype=bool)
    m._init[:top] = state["init"]
    m._size, m._boff = state["size"], state["boff"]
    m._live, m._names, m._top = state["live"], state["names"], top
    return m


def run_task(load_ptx: Any, text: str, name: str, grid: Any, block: Any, args: list,
             options: dict, state: dict, module_addrs: dict,
             blocks: tuple[int, int]) -> tuple:
    """One worker's task: load ``text`` with ``load_ptx`` and run the blocks ``blocks``
    of the launch on a copy of the memory; returns (stats or None, changed byte offsets,
    their values, offsets newly written, the exception or None)."""
    mem = _restore(state)
    mod = load_ptx(text)
    mem._modules[id(mod)] = (mod, dict(module_addrs))
    stats, error = None, None
    try:
        stats = mod.launch(name, grid, block, args, mem, _block_range=blocks, **options)
    except Exception as e:  # noqa: BLE001 (raised again by the caller, in block order)
        error = e
    before, after = state["buf"], mem.buffer[:state["top"]]
    changed = np.flatnonzero(after != before)
    new_init = np.flatnonzero(mem.init_shadow[:state["top"]] & ~state["init"])
    return stats, changed, after[changed].copy(), new_init, error


def _merge_stats(total: LaunchStats, part: LaunchStats) -> None:
    for f in dataclasses.fields(LaunchStats):
        if f.name in ("kernel", "grid", "block"):
            continue
        a, b = getattr(total, f.name), getattr(part, f.name)
        if f.name == "max_stack_depth":
            setattr(total, f.name, max(a, b))
        elif isinstance(a, dict):
            for key, v in b.items():
                a[key] = a.get(key, 0) + v
        elif isinstance(a, list):
            a.extend(b)
        else:
            setattr(total, f.name, a + b)


def run_chunks(task: Any, module: Any, kernel: Any, name: str, grid: Any, block: Any,
               args: list, memory: GlobalMemory, options: dict, workers: Any, waves: list,
               stats: LaunchStats, max_instructions: int | None) -> LaunchStats:
    """Run the ``waves`` ((first block, end) each) of a launch on ``workers`` and merge
    the results into ``memory`` and ``stats`` (see the module docstring). ``task`` is
    a picklable function called as :func:`run_task` without its first argument."""
    inst = communicating_instruction(kernel)
    if inst is not None:
        raise LaunchError(
            f"kernel {name}: line {inst.line} ({inst.text!r}) is an atomic or reduction in "
            "global memory, through which blocks of different workers could communicate; "
            "launch without workers")
    text = getattr(module, "text", None)
    if text is None:
        raise LaunchError("workers need a module loaded from PTX text (load_ptx)")
    executor, n = check_workers(workers)
    n = max(1, min(n, len(waves)))
    bounds = np.linspace(0, len(waves), n + 1).round().astype(int)
    chunks = [(waves[int(lo)][0], waves[int(hi) - 1][1])
              for lo, hi in zip(bounds[:-1], bounds[1:]) if hi > lo]
    addrs = memory.module_variables(kernel.module_key, kernel.module_globals)
    state = _state(memory)
    own = None
    if executor is None:
        own = executor = cf.ProcessPoolExecutor(
            max_workers=len(chunks), mp_context=multiprocessing.get_context("spawn"))
    try:
        futures = [executor.submit(task, text, name, grid, block, list(args), options,
                                   state, addrs, c) for c in chunks]
        results = [f.result() for f in futures]
    finally:
        if own is not None:
            own.shutdown()
    owner = np.full(state["top"], -1, dtype=np.int64)  # the chunk that changed each byte
    buf, init = memory.buffer, memory.init_shadow
    for i, (part, changed, values, new_init, error) in enumerate(results):
        clash = changed[owner[changed] >= 0]
        if clash.size:
            j = int(owner[clash[0]])
            raise LaunchError(
                f"kernel {name}: blocks {chunks[j][0]}-{chunks[j][1] - 1} and blocks "
                f"{chunks[i][0]}-{chunks[i][1] - 1}, run by different workers, both changed "
                f"{memory.describe(memory.address_of(int(clash[0])))}: blocks that write "
                "the same bytes race (or communicate); launch without workers")
        owner[changed] = i
        buf[changed] = values
        init[new_init] = True
        if error is not None:
            raise error
        _merge_stats(stats, part)
        if max_instructions is not None and stats.warp_instructions > max_instructions \
                and i < len(results) - 1:
            raise LaunchBudgetError(
                f"kernel {name} stopped after {chunks[i][1]} blocks and "
                f"{stats.warp_instructions} warp instructions: more than "
                f"max_instructions={max_instructions} for the launch; pass a larger "
                "max_instructions (or None) if the kernel needs more")
    return stats
