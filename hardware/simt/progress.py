"""Progress detection: the default guard against kernels that can never finish.

A launch without ``max_steps`` has no per-warp instruction bound. Instead the scheduler
looks at the wave's state at checkpoints: every register of every thread, the wave's
shared and local memory (mbarrier objects live there), which warps run, wait or have
exited, and the completed barriers. When that state is the same at two checkpoints
(and global memory is the same too: it is compared only once the cheaper parts have
matched), the warps that ran in between changed nothing, so every later step repeats
what they did: the kernel livelocks (a spin wait that nothing can satisfy). The launch
then stops with a :class:`~hardware.simt.errors.LivelockError` naming the spinning
warps and lines.

The scheduler under independent thread scheduling is fair (a path that loops while
other threads wait for it yields to them after
:data:`~hardware.simt.scheduler.YIELD_AFTER` backward branches), so a kernel that can
make progress does so between two checkpoints: they are at least
``MIN_WINDOW`` warp instructions (and ``PER_WARP`` per warp of the wave) apart, and the
gap grows with the instructions run so far (half of them), so a long run is never
stopped by a short quiet phase. A loop that changes a register (a counter, a clock
read) is progress by this rule: such a runaway loop is bounded by the launch-wide
``max_instructions`` budget or an explicit ``max_steps``.
"""
from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from .errors import LivelockError

__all__ = ["MIN_WINDOW", "PER_WARP", "LOOK_EVERY", "ProgressWatch"]

#: the fewest warp instructions between two checkpoints
MIN_WINDOW = 1 << 16
#: warp instructions per warp of the wave between two checkpoints, at the least
PER_WARP = 1 << 13
#: scheduling steps between two looks at the instruction count
LOOK_EVERY = 512


class ProgressWatch:
    """Checkpoints of one wave's state for :class:`~hardware.simt.scheduler.WarpScheduler`
    (``sched``): :meth:`look` is called every :data:`LOOK_EVERY` scheduling steps. It
    passes the wave's instruction count to ``budget`` (when given; it raises to stop the
    launch) and, when ``livelock``, compares the state at checkpoints."""

    def __init__(self, sched: Any, livelock: bool = True, budget: Any = None) -> None:
        self.sched = sched
        self.livelock = livelock
        self.budget = budget
        self.window = max(MIN_WINDOW, PER_WARP * sched.n_warps)
        self.next_at = self.window
        self.last: bytes | None = None     # the state without global memory
        self.last_global: bytes | None = None  # with it, once the rest matched
        self.since = 0                     # instructions at the last checkpoint

    def _digest(self, with_global: bool) -> bytes:
        s = self.sched
        w = s.wave
        h = hashlib.blake2b(digest_size=20)
        for name in sorted(w.regs):
            h.update(np.ascontiguousarray(w.regs[name]).view(np.uint8))
        h.update(w.smem)
        h.update(w.lmem)
        h.update(s.state.tobytes())
        h.update(s.exited.tobytes())
        h.update(s.top_mask.tobytes())
        mb = w.mbarriers
        h.update(np.int64([s.barriers, mb.completions if mb is not None else 0]).tobytes())
        if with_global:
            mem = w.memory
            h.update(mem.buffer[:mem.used])
        return h.digest()

    def look(self) -> None:
        """Take a checkpoint when enough instructions ran since the last one; raise
        LivelockError when the state has not changed since then."""
        s = self.sched
        total = int(s.steps.sum())
        if self.budget is not None:
            self.budget(total)
        if total < self.next_at or not self.livelock:
            return
        d = self._digest(False)
        if d == self.last:
            g = self._digest(True)
            if g == self.last_global:
                self._raise(total)
            self.last_global = g
        else:
            self.last_global = None
        self.last = d
        self.since = total
        self.next_at = total + max(self.window, total // 2)

    def _raise(self, total: int) -> None:
        s = self.sched
        w = s.wave
        run = np.flatnonzero(s.state != s.DONE)  # every warp that has not finished
        first = {}
        parts = []
        for x in run.tolist()[:8]:
            b = int(w.warp_block[x])
            if b not in first:
                first[b] = int(np.flatnonzero(w.warp_block == b)[0])
            k = x - first[b]
            pc = int(s.warp_pc[x])
            where = (f"line {s.ops[pc].inst.line} ({s.ops[pc].inst.text!r})"
                     if pc < s.n else "the end of the kernel")
            parts.append(f"warp {k} of block {tuple(w.block_ids[b])} at {where}")
        more = f" and {run.size - 8} more warps" if run.size > 8 else ""
        raise LivelockError(
            f"kernel {w.kernel.name}: no progress: the wave's warps ran "
            f"{total - self.since} instructions (of {total}) without changing a register, "
            "shared, local or global memory, a barrier or which warps run; they spin on "
            "a condition nothing can make true (a livelock): " + "; ".join(parts) + more
            + ". Pass max_steps=N to bound each warp's instructions instead")
