"""racecheck of asynchronous writes over the shared-memory operands of
``wgmma.mma_async`` (PTX ISA 9.0, sections 9.7.15.4 "Asynchronous Warpgroup Level Matrix
Multiply-Accumulate Operations" and 8 "Memory Consistency Model").

A ``wgmma.mma_async`` reads its descriptor operands asynchronously, from its issue until
the ``wgmma.wait_group`` of the issuing warpgroup that completes its wgmma-group. An
asynchronous copy into those bytes (``cp.async.bulk``, ``cp.async.bulk.tensor``, which
may land at any time after they are issued) must therefore be ordered after that wait:
the issuing thread is a thread of the warpgroup past its wait, or it acquired (an
mbarrier wait, a flag: racecheck's release/acquire clocks) a release that a thread of
the warpgroup made after its wait. The pattern this catches is a pipeline stage handed
back to the producer (``mbarrier.arrive`` on the "empty" barrier) before the
``wgmma.wait_group`` that completes the GEMM reading it: the interpreter computes the
product at issue, so the result would not show it.

Ordered also: a writer of the reading warpgroup's block after a barrier of the block
completed after the wait (as racecheck reads barriers, one with a thread count orders
the whole block, which can hide such a race).

Design: per warpgroup and 16-byte chunk of the wave's shared memory the last operand
read (a record: the warpgroup's 128 thread slots, its wgmma-group, the wgmma's line and
per thread the racecheck time of the wait that completed it); a copy checked as ordered
clears the chunks it writes. Enabled with racecheck only (its clocks); a write of a
chunk whose reading wgmma is not complete in any thread is a race whatever the clocks.
Generic stores ``st.shared`` by threads outside the warpgroup are checked the same way
(:func:`watch_store`); a thread's own stores before its wait are the wait's check (it
compares the operand's bytes). Not checked here: generic-address ``st``, ``atom``/``red``,
``stmatrix`` and ``st.shared::cluster`` into an operand.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .sanitizer import Report

__all__ = ["OperandReads", "watch_store"]


class OperandReads:
    """The operand reads of one wave's wgmma.mma_async (see the module docstring)."""

    def __init__(self, wave: Any) -> None:
        self.wave = wave
        self.race = wave.tools.get("racecheck") if wave.tools else None
        self.recs: dict[int, dict] = {}
        self.next = 0
        self.open: list[int] = []                 # records not completed by every thread
        self.chunks: dict[int, np.ndarray] = {}   # warpgroup -> record id per chunk
        self.refs: dict[int, int] = {}            # record id -> chunks naming it

    def issue(self, threads: np.ndarray, offsets: np.ndarray, groups: np.ndarray,
              line: int) -> None:
        """Warpgroup j (thread slots ``threads[j]``, wgmma-group ``groups[j]``) read the
        16-byte chunks at wave shared ``offsets[j]``."""
        if self.race is None:
            return
        n = self.wave.smem.size // 16 + 1
        for j in range(threads.shape[0]):
            rid = self.next
            self.next += 1
            self.recs[rid] = {"slots": threads[j].copy(), "group": int(groups[j]),
                              "done": np.full(threads.shape[1], -1, np.int64),
                              "line": line}
            self.open.append(rid)
            key = int(threads[j, 0])
            arr = self.chunks.get(key)
            if arr is None:
                arr = self.chunks[key] = np.full(n, -1, np.int64)
            ch = np.unique(np.asarray(offsets[j], np.int64) >> 4)
            self._forget(arr[ch])
            arr[ch] = rid
            self.refs[rid] = ch.size

    def _forget(self, rids: np.ndarray) -> None:
        """Chunks naming records ``rids`` are overwritten: drop records left unnamed."""
        old, cnt = np.unique(rids[rids >= 0], return_counts=True)
        for rid, c in zip(old.tolist(), cnt.tolist()):
            self.refs[rid] -= c
            if self.refs[rid] <= 0 and (self.recs[rid]["done"] >= 0).all():
                del self.refs[rid], self.recs[rid]

    def complete(self, completed: np.ndarray) -> None:
        """A wgmma.wait_group: ``completed`` (per wave thread slot) groups are done."""
        if self.race is None or not self.open:
            return
        self.race.now += 1
        now, keep = self.race.now, []
        for rid in self.open:
            rec = self.recs[rid]
            new = (completed[rec["slots"]] > rec["group"]) & (rec["done"] < 0)
            rec["done"][new] = now
            if (rec["done"] < 0).any():
                keep.append(rid)
            elif self.refs[rid] <= 0:
                del self.refs[rid], self.recs[rid]
        self.open = keep

    def write(self, slots: Any, offsets: np.ndarray, inst: Any, what: str, width: int = 1,
              others_only: bool = False) -> None:
        """Threads ``slots`` (one, or one per offset) write ``width`` bytes at each wave
        shared offset of ``offsets`` (at most 16, within two chunks); ``others_only``:
        writes by a thread of the reading warpgroup are left to the wait's check."""
        if self.race is None or not self.chunks:
            return
        offsets = np.asarray(offsets, np.int64).reshape(-1)
        if np.ndim(slots) == 0:           # one writer (a copy): its distinct chunks
            offsets, width = np.unique(offsets >> 4) << 4, 1
        slots = np.broadcast_to(np.asarray(slots, np.int64), offsets.shape)
        ch = np.concatenate([offsets >> 4, (offsets + width - 1) >> 4])
        sl = np.concatenate([slots, slots])
        for arr in self.chunks.values():
            rids = arr[ch]
            hit = rids >= 0
            if not hit.any():
                continue
            pairs = np.unique(np.stack([sl[hit], rids[hit], ch[hit]], axis=1), axis=0)
            for s, rid, c in pairs.tolist():
                rec = self.recs.get(rid)
                if rec is None or (others_only and s in rec["slots"].tolist()):
                    continue
                if not self._ordered(s, rec):
                    self._report(s, rec, c * 16, inst, what)
            used = np.unique(ch[hit])
            self._forget(arr[used])
            arr[used] = -1

    def _ordered(self, slot: int, rec: dict) -> bool:
        done = rec["done"] >= 0
        if not done.any():
            return False
        slots, times = rec["slots"][done], rec["done"][done]
        if slot in slots.tolist():
            return True
        race = self.race
        ws = race.ws
        blk = self.wave.thread_block
        # a barrier of the block completed after the wait (racecheck's reading: a
        # barrier orders its whole block)
        if ((blk[slots] == blk[slot]) & (times < ws.bar[slot])).any():
            return True
        me = int(ws.gid[slot])
        return any(race._acquired(me, int(ws.gid[s]), int(t))
                   for s, t in zip(slots.tolist(), times.tolist()))

    def _report(self, slot: int, rec: dict, off: int, inst: Any, what: str) -> None:
        wave, race = self.wave, self.race
        key = (rec["line"], inst.line, "wgmma-war")
        if key in race.seen:
            return
        race.seen.add(key)
        reader = int(rec["slots"][0])
        winst = next((i for i in race.insts if i.line == rec["line"]), inst)
        acc = wave.access_record(slot, inst, "st", "shared", off - int(wave.sbase[slot]), 16)
        other = wave.access_record(reader, winst, "ld", "shared",
                                   off - int(wave.sbase[reader]), 16)
        state = ("is complete in no thread of the warpgroup" if not (rec["done"] >= 0).any()
                 else "was completed by wgmma.wait_group in threads whose later release the "
                      "writing thread has not acquired")
        race._emit(Report(
            "racecheck", wave.kernel.name,
            f"write-after-read race: {what} over a wgmma.mma_async operand", acc, other,
            f"the wgmma reads its shared-memory operands until the wgmma.wait_group that "
            f"completes its group, and that wait {state} (e.g. a pipeline stage released "
            "before the wait)"), False)


def watch_store(op: Any, inst: Any, ctx: Any, reads: Any) -> Any:
    """Wrap a compiled ``st.shared`` of a kernel with wgmma: its writes are checked
    against the operand reads (``reads()``: the wave's :class:`OperandReads`)."""
    from .isa.data import _address
    from .types import TYPES
    vec = next((int(p[1:]) for p in inst.parts if p in ("v2", "v4", "v8")), 1)
    width = vec * TYPES[inst.parts[-1]].bits // 8
    addr = _address(inst.operands[0], ctx, inst, "shared")
    fn = op.fn

    def checked(ix: Any, ex: Any) -> None:
        fn(ix, ex)
        r = reads()
        if r.race is not None and r.chunks:
            th = np.asarray(ctx._thread_ids(ix))
            a = np.broadcast_to(np.asarray(addr(ix), np.int64), th.shape)
            r.write(th, ctx.sbase[th] + a, inst, "a shared-memory store", width,
                    others_only=True)
    op.fn = checked
    return op
