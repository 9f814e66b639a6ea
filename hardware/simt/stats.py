"""Execution statistics of one launch, named as the profiler names them.

Counting rules (Nsight Compute metric definitions, the reference doc's table):
- a *warp instruction* is one instruction issued for one warp
  (``smsp__inst_executed.sum``); a branch, a barrier and an exit count like any other;
- *thread instructions* count the lanes active in the warp's SIMT-stack entry when the
  instruction issues; lanes switched off by the instruction's own guard predicate still
  count (``smsp__thread_inst_executed.sum``, not the ``_pred_on`` variant);
- SIMD efficiency = thread instructions / (32 * warp instructions);
- global memory: one *request* per warp-level ld/st with an active lane, *sectors* from
  :func:`hardware.memory.coalesce_warps` (32-byte segments);
- shared memory: *wavefronts* and *bank conflicts* from
  :func:`hardware.memory.bank_conflicts`, per warp-level ld/st.
Atomics (``atom``/``red``) are counted in ``atomic_requests`` only.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

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
    #: PTX source line -> warp instructions issued from it
    line_warp_instructions: dict[int, int] = field(default_factory=dict)
    #: PTX source line -> thread instructions issued from it
    line_thread_instructions: dict[int, int] = field(default_factory=dict)
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
    atomic_requests: int = 0
    #: undefined behaviour observed (e.g. a shuffle reading an inactive lane)
    warnings: list[str] = field(default_factory=list)

    @property
    def simd_efficiency(self) -> float:
        """thread instructions / (32 * warp instructions); 0.0 if nothing ran."""
        if self.warp_instructions == 0:
            return 0.0
        return self.thread_instructions / (32 * self.warp_instructions)

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


class MemoryCounters:
    """Accumulates the memory statistics of warp-level accesses into a LaunchStats,
    through :mod:`hardware.memory` (one vectorised call per global access; shared
    accesses are grouped by their address pattern relative to a 128-byte boundary,
    which leaves bank and sector counts unchanged, and each distinct pattern is
    evaluated once)."""

    def __init__(self, stats: LaunchStats) -> None:
        self.s = stats
        self._bank_cache: dict[tuple[int, bytes], hwmem.BankReport] = {}

    def global_access(self, kind: str, addrs: np.ndarray, mask: np.ndarray, width: int) -> None:
        rep = hwmem.coalesce_warps(addrs, width, mask)
        if kind == "ld":
            self.s.global_load_requests += rep.requests
            self.s.global_load_sectors += rep.sectors
            self.s.global_load_bytes += rep.bytes_requested
        else:
            self.s.global_store_requests += rep.requests
            self.s.global_store_sectors += rep.sectors
            self.s.global_store_bytes += rep.bytes_requested

    def shared_access(self, kind: str, addrs: np.ndarray, mask: np.ndarray, width: int) -> None:
        any_row = mask.any(axis=1)
        if not any_row.all():
            addrs, mask = addrs[any_row], mask[any_row]
        if addrs.shape[0] == 0:
            return
        big = np.int64(2**62)
        base = (np.where(mask, addrs, big).min(axis=1) // 128) * 128
        rel = np.where(mask, addrs - base[:, None], -1)
        if (rel == rel[0]).all():
            pats, counts = rel[:1], [rel.shape[0]]
        else:
            pats, counts = np.unique(rel, axis=0, return_counts=True)
        waves = conflicts = 0
        for row, c in zip(pats, counts):
            key = (width, row.tobytes())
            rep = self._bank_cache.get(key)
            if rep is None:
                act = row >= 0
                rep = hwmem.bank_conflicts(np.where(act, row, 0), width, act)
                self._bank_cache[key] = rep
            waves += rep.wavefronts * int(c)
            conflicts += rep.conflicts * int(c)
        if kind == "ld":
            self.s.shared_load_requests += int(addrs.shape[0])
            self.s.shared_load_wavefronts += waves
            self.s.shared_load_bank_conflicts += conflicts
        else:
            self.s.shared_store_requests += int(addrs.shape[0])
            self.s.shared_store_wavefronts += waves
            self.s.shared_store_bank_conflicts += conflicts
