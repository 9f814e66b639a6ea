"""Execution statistics of one launch, named as the profiler names them.

Counting rules (Nsight Compute Kernel Profiling Guide, "Metrics Reference"):
- a *warp instruction* is one instruction issued for one warp
  (``smsp__inst_executed.sum``); a branch, a barrier and an exit count like any other;
- *thread instructions* count the lanes active in the warp's SIMT-stack entry when the
  instruction issues; lanes switched off by the instruction's own guard predicate still
  count (``smsp__thread_inst_executed.sum``, not the ``_pred_on`` variant);
- SIMD efficiency = thread instructions / (32 * warp instructions);
- global memory: one *request* per warp-level ld/st with an active lane, *sectors* from
  :func:`hardware.memory.coalesce` (32-byte segments);
- shared memory: *wavefronts* and *bank conflicts* from
  :func:`hardware.memory.bank_conflicts`, per warp-level ld/st.
Atomics (``atom``/``red``) are counted in ``atomic_requests`` only.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tabulate import tabulate

from .. import memory as hwmem

__all__ = ["LaunchStats", "MemoryCounters"]


@dataclass
class LaunchStats:
    """Figures of one :meth:`Module.launch` (deterministic for given inputs)."""

    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    warp_instructions: int = 0
    thread_instructions: int = 0
    divergent_branches: int = 0
    max_stack_depth: int = 1
    barriers: int = 0
    global_load_requests: int = 0
    global_load_sectors: int = 0
    global_store_requests: int = 0
    global_store_sectors: int = 0
    global_load_bytes: int = 0
    global_store_bytes: int = 0
    shared_load_requests: int = 0
    shared_store_requests: int = 0
    shared_load_wavefronts: int = 0
    shared_store_wavefronts: int = 0
    shared_load_bank_conflicts: int = 0
    shared_store_bank_conflicts: int = 0
    local_requests: int = 0
    #: warp-level loads from the .const space (modelled as read-only global memory)
    constant_requests: int = 0
    atomic_requests: int = 0
    #: wgmma.mma_async issued, one per warpgroup (:mod:`hardware.simt.wgmma`)
    wgmma_instructions: int = 0
    #: their multiply-adds counted as 2 flops each (2 x 64 x N x K per instruction)
    wgmma_flops: int = 0
    #: bytes of the boxes cp.async.bulk.tensor loaded through each tensor map, by the
    #: map's address (:mod:`hardware.simt.tma`; a map passed as a kernel parameter: its
    #: .param address, the offset in the parameter buffer; a map in global or const
    #: memory: its global address); a box counts once, multicast or not, its
    #: out-of-bounds (zero-filled) elements included
    tma_load_bytes: dict[int, int] = field(default_factory=dict)
    #: bytes of the boxes cp.async.bulk.tensor stored through each map, by its address
    #: (out-of-bounds elements, which are not written, included)
    tma_store_bytes: dict[int, int] = field(default_factory=dict)
    #: bytes copied by cp.async.bulk (the non-tensor form), each copy once
    bulk_copy_bytes: int = 0
    #: mbarrier.test_wait/try_wait executed, one per thread (:mod:`hardware.simt.mbarrier`;
    #: a warp suspended on a wait has not executed it yet), and how many of them found
    #: their phase completed (returned true)
    mbarrier_waits: int = 0
    mbarrier_waits_completed: int = 0
    #: PTX source line -> warp instructions issued from it
    line_warp_instructions: dict[int, int] = field(default_factory=dict)
    #: PTX source line -> thread instructions issued from it
    line_thread_instructions: dict[int, int] = field(default_factory=dict)
    #: undefined behaviour observed (e.g. a shuffle reading an inactive lane)
    warnings: list[str] = field(default_factory=list)
    #: device ``printf`` output, each call's text per thread in thread order, calls in
    #: the order the warps executed them (:mod:`hardware.simt.device_runtime`)
    stdout: str = ""

    @property
    def simd_efficiency(self) -> float:
        """thread instructions / (32 * warp instructions); 0.0 if nothing ran."""
        if self.warp_instructions == 0:
            return 0.0
        return self.thread_instructions / (32 * self.warp_instructions)

    @property
    def tma_bytes(self) -> int:
        """Bytes of every cp.async.bulk.tensor box, loads and stores, over all maps."""
        return sum(self.tma_load_bytes.values()) + sum(self.tma_store_bytes.values())

    @property
    def shared_wavefronts(self) -> int:
        return self.shared_load_wavefronts + self.shared_store_wavefronts

    @property
    def shared_bank_conflicts(self) -> int:
        return self.shared_load_bank_conflicts + self.shared_store_bank_conflicts

    @property
    def line_counts(self) -> dict[int, int]:
        """Alias of :attr:`line_warp_instructions`."""
        return self.line_warp_instructions

    def summary(self, source: str | None = None, top: int = 10) -> str:
        """A printable report: the profiler metrics, then the ``top`` PTX lines by warp
        instructions with their SIMD efficiency (and text, when the PTX ``source`` is
        given)."""
        head = (f"kernel {self.kernel}  grid {self.grid}  block {self.block}\n"
                f"warp instructions {self.warp_instructions}, thread instructions "
                f"{self.thread_instructions}, SIMD efficiency {self.simd_efficiency:.3f}, "
                f"divergent branches {self.divergent_branches}, max stack depth "
                f"{self.max_stack_depth}, barriers {self.barriers}")
        mt = tabulate([[k, f"{v:.4g}" if isinstance(v, float) else v]
                       for k, v in self.metrics().items()], headers=["metric", "value"])
        lines = source.splitlines() if source else None
        hot = sorted(self.line_warp_instructions.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
        rows = []
        for ln, w in hot:
            t = self.line_thread_instructions.get(ln, 0)
            row = [ln, w, t, f"{t / (32 * w):.3f}" if w else "0"]
            if lines is not None and 0 < ln <= len(lines):
                row.append(" ".join(lines[ln - 1].split())[:60])
            rows.append(row)
        hdr = ["line", "warp instr", "thread instr", "SIMD eff"] + (["PTX"] if lines else [])
        text = head + "\n\n" + mt + "\n\n" + tabulate(rows, headers=hdr)
        if self.wgmma_instructions or self.tma_bytes or self.bulk_copy_bytes or \
                self.mbarrier_waits:
            text += (f"\n\nwgmma {self.wgmma_instructions} ({self.wgmma_flops} flops), "
                     f"TMA bytes {self.tma_bytes} (per map: loads "
                     f"{_by_map(self.tma_load_bytes)}, stores "
                     f"{_by_map(self.tma_store_bytes)}), bulk copy bytes "
                     f"{self.bulk_copy_bytes}, mbarrier waits {self.mbarrier_waits} "
                     f"({self.mbarrier_waits_completed} completed)")
        if self.warnings:
            text += "\n\nwarnings:\n" + "\n".join(self.warnings[:10])
        return text

    def metrics(self) -> dict[str, float]:
        """The figures under Nsight Compute metric names."""
        def per(a: int, b: int) -> float:
            return a / b if b else 0.0
        return {
            "smsp__inst_executed.sum": self.warp_instructions,
            "smsp__thread_inst_executed.sum": self.thread_instructions,
            "smsp__thread_inst_executed_per_inst_executed.ratio":
                per(self.thread_instructions, self.warp_instructions),
            "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": self.global_load_requests,
            "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": self.global_load_sectors,
            "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum.per_request":
                per(self.global_load_sectors, self.global_load_requests),
            "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum": self.global_store_requests,
            "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum": self.global_store_sectors,
            "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum.per_request":
                per(self.global_store_sectors, self.global_store_requests),
            "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum": self.shared_load_wavefronts,
            "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum": self.shared_store_wavefronts,
            "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum":
                self.shared_load_bank_conflicts,
            "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum":
                self.shared_store_bank_conflicts,
            "simd_efficiency": self.simd_efficiency,
            "divergent_branches": self.divergent_branches,
        }


def _by_map(d: dict[int, int]) -> str:
    return "{" + ", ".join(f"{k:#x}: {v}" for k, v in sorted(d.items())) + "}"


_BANK_CACHE: dict[tuple[int, bytes], hwmem.BankReport] = {}
_SECTOR_CACHE: dict[tuple[int, bytes], hwmem.CoalesceReport] = {}
_CACHE_LIMIT = 1 << 16


def _patterns(addrs: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Distinct per-warp address patterns relative to a 128-byte boundary and their
    counts, or None when no lane is active. Sectors (32 B), lines (128 B), bytes and
    shared-memory banks (32 x 4 B) are all unchanged by a shift of a multiple of 128
    bytes, so each distinct pattern needs to be evaluated once."""
    if mask.all():
        base = (addrs.min(axis=1) // 128) * 128
        rel = addrs - base[:, None]
    else:
        any_row = mask.any(axis=1)
        if not any_row.all():
            addrs, mask = addrs[any_row], mask[any_row]
        if addrs.shape[0] == 0:
            return None
        base = (np.where(mask, addrs, np.int64(2**62)).min(axis=1) // 128) * 128
        rel = np.where(mask, addrs - base[:, None], -1)
    if (rel == rel[0]).all():
        return rel[:1], np.array([rel.shape[0]])
    # hash the rows to 1-D keys, then verify the grouping exactly
    key = rel @ _WEIGHTS[: rel.shape[1]]
    _, first, inv, counts = np.unique(key, return_index=True, return_inverse=True,
                                      return_counts=True)
    reps = rel[first]
    if (reps[inv.ravel()] == rel).all():
        return reps, counts
    return np.unique(rel, axis=0, return_counts=True)


_WEIGHTS = np.random.default_rng(20240607).integers(1, 2**61, 64, dtype=np.int64)


def _report(cache: dict, analyse: Any, row: np.ndarray, width: int) -> Any:
    """``analyse(addresses, width, active)`` of one pattern from :func:`_patterns`
    (inactive lanes are -1), memoised in ``cache`` up to ``_CACHE_LIMIT`` entries."""
    key = (width, row.tobytes())
    rep = cache.get(key)
    if rep is None:
        act = row >= 0
        rep = analyse(np.where(act, row, 0), width, act)
        if len(cache) < _CACHE_LIMIT:
            cache[key] = rep
    return rep


class MemoryCounters:
    """Memory statistics of warp-level accesses, computed through :mod:`hardware.memory`.

    Warps are grouped by their address pattern relative to a 128-byte boundary (see
    :func:`_patterns`); :func:`hardware.memory.coalesce` and
    :func:`hardware.memory.bank_conflicts` evaluate each distinct pattern once (results
    are cached). Each method returns the increments as ``(field, value)`` pairs and
    applies them to the LaunchStats.
    """

    def __init__(self, stats: LaunchStats) -> None:
        self.s = stats

    def apply(self, deltas: tuple[tuple[str, int], ...]) -> None:
        d = self.s.__dict__  # (a plain dataclass: its fields are its __dict__)
        for name, v in deltas:
            d[name] += v

    def _count(self, kind: str, addrs: np.ndarray, mask: np.ndarray, width: int,
               space: str, cache: dict, analyse: Any, figures: Any,
               names: tuple[str, str, str]) -> tuple[tuple[str, int], ...]:
        """Add ``figures(report)`` of each distinct pattern, times its warps, to the
        counters ``<space>_<load|store>_<name>``; returns the increments."""
        pats = _patterns(addrs, mask)
        if pats is None:
            return ()
        totals = [0, 0, 0]
        for row, c in zip(*pats):
            rep = _report(cache, analyse, row, width)
            for i, v in enumerate(figures(rep)):
                totals[i] += v * int(c)
        way = "load" if kind == "ld" else "store"
        d = tuple((f"{space}_{way}_{n}", t) for n, t in zip(names, totals))
        self.apply(d)
        return d

    def global_access(self, kind: str, addrs: np.ndarray, mask: np.ndarray,
                      width: int) -> tuple[tuple[str, int], ...]:
        """Requests, sectors and bytes of warp-level global loads (``kind`` "ld") or
        stores, by :func:`hardware.memory.coalesce`."""
        return self._count(kind, addrs, mask, width, "global", _SECTOR_CACHE,
                           hwmem.coalesce,
                           lambda r: (r.requests, r.sectors, r.bytes_requested),
                           ("requests", "sectors", "bytes"))

    def shared_access(self, kind: str, addrs: np.ndarray, mask: np.ndarray,
                      width: int) -> tuple[tuple[str, int], ...]:
        """Requests (one per warp with an active lane), wavefronts and bank conflicts
        of warp-level shared loads (``kind`` "ld") or stores, by
        :func:`hardware.memory.bank_conflicts`."""
        return self._count(kind, addrs, mask, width, "shared", _BANK_CACHE,
                           hwmem.bank_conflicts,
                           lambda r: (1, r.wavefronts, r.conflicts),
                           ("requests", "wavefronts", "bank_conflicts"))
