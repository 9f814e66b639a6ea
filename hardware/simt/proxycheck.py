"""racecheck across memory proxies: ``fence.proxy.async`` (PTX ISA 9.0, section 8
"Memory Consistency Model": proxies, proxy-preserved base causality order; section
9.7.13.4 ``membar``/``fence``: ``fence.proxy``).

Shared memory is reached through two proxies. ``ld``/``st``/``atom``/``red``, ``stmatrix``
and the bytes a ``cp.async`` (non-bulk) lands are *generic-proxy* accesses; the bulk and
tensor copies (``cp.async.bulk``, ``cp.async.bulk.tensor``) and the operand reads of
``wgmma.mma_async`` through a matrix descriptor are *async-proxy* accesses. A generic
write X and an async read Y of the same bytes are ordered only when an async proxy fence
(``fence.proxy.async`` or ``fence.proxy.async.shared::cta``/``.shared::cluster``;
``.global`` covers global memory only) lies on a causality path from X to Y. Without
one the async proxy may read stale bytes: a race, reported by racecheck like the others
(:class:`~hardware.simt.sanitizer.Report` naming the async instruction, its thread, line
and address, and the write).

The paths recognised (each only hides a race, never invents one):

- the writing thread fences after the write, and that fence is ordered before the read:
  the same thread reads, a barrier of its block completed between the fence and the
  read, a ``__syncwarp`` naming both lanes did, or the reader acquired the writer's
  release made after the fence (racecheck's release/acquire clocks: an mbarrier arrival
  and wait, a flag);
- the reading thread fences before the read, after the write was ordered before that
  fence: the same thread wrote, a barrier of its block completed between the write and
  the fence (Triton's ``cp.async.wait_group; bar.sync; fence.proxy.async; wgmma``), a
  ``__syncwarp`` did, or it had acquired the writer's accesses by then.

A fence by a third thread is not looked for (a reported race may then be a false one:
none of the compilers' patterns does so). ``wgmma.mma_async`` reads its operands as the
warpgroup: the chunk a thread's lane reads is taken as that thread's read.

Design: enabled (by :class:`~hardware.simt.racecheck.RaceCheck`) for kernels with an
async-proxy reader; per 4-byte word of the wave's shared memory the last generic write
(time, thread slot, instruction) and the time of the first fence of its writer after it;
per thread the time of its last proxy fence, with its block's last barrier, its warp's
last ``__syncwarp`` and what it had acquired at that moment. Bytes an async copy lands
forget their generic write. Word granularity: two threads writing different bytes of one
word keep the second writer only.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .sanitizer import Report

__all__ = ["ProxyShadow", "async_read", "async_landed", "generic_landed", "covers_shared",
           "has_async_readers"]


def covers_shared(inst: Any) -> bool:
    """Whether ``inst`` is an async proxy fence covering shared memory:
    fence.proxy.async{.shared::cta,.shared::cluster} (not .global)."""
    p = inst.parts
    if len(p) < 3 or p[0] != "fence" or p[1] != "proxy":
        return False
    if p[2] == "async::generic":  # the one-way generic-to-async release form
        return True
    return p[2] == "async" and "global" not in p[3:]


def has_async_readers(insts: list) -> bool:
    """Whether a kernel has an instruction that reads shared memory through the async
    proxy (then generic writes are tracked)."""
    for i in insts:
        p = i.parts
        if p[0] == "wgmma" and "mma_async" in p:
            return True
        if p[0] == "tcgen05":  # its mma and cp read shared memory by descriptor
            return True
        if p[0] == "cp" and len(p) > 2 and p[1] == "async" and p[2] == "bulk":
            return True
    return False


class ProxyShadow:
    """Generic writes and proxy fences of one wave (see the module docstring)."""

    def __init__(self, race: Any, wave: Any) -> None:
        self.race = race
        n = wave.smem.size // 4 + 1
        self.wt = np.full(n, -1, np.int64)     # time of the last generic write
        self.wslot = np.zeros(n, np.int32)     # its thread slot
        self.wpc = np.zeros(n, np.int32)       # its instruction (index)
        self.ft = np.full(n, -1, np.int64)     # first fence of the writer after it
        t = wave.T
        self.lo = np.full(t, n, np.int64)      # hull of each thread's unfenced words
        self.hi = np.full(t, -1, np.int64)
        self.lastf = np.full(t, -1, np.int64)  # time of each thread's last proxy fence
        self.lastf_bar = np.full(t, -1, np.int64)   # its block's last barrier then
        self.lastf_ws = np.full(t, -1, np.int64)    # its last __syncwarp then
        self.lastf_vc: dict[int, dict[int, int]] = {}  # what it had acquired then
        self.block = wave.thread_block

    def write(self, slots: np.ndarray, offsets: np.ndarray, width: int, now: int,
              pc: int) -> None:
        """A generic write of ``width`` bytes per thread at byte ``offsets``."""
        if offsets.size == 0:
            return
        first = offsets >> 2
        nw = ((offsets + width - 1) >> 2) - first + 1
        k = int(nw.max())
        if k == 1:
            words, who = first, slots
        else:
            words = (first[:, None] + np.arange(k)).ravel()
            who = np.repeat(slots, k)
            keep = (np.arange(k)[None, :] < nw[:, None]).ravel()
            words, who = words[keep], who[keep]
        self.wt[words] = now
        self.wslot[words] = who
        self.wpc[words] = pc
        self.ft[words] = -1
        np.minimum.at(self.lo, who, words)
        np.maximum.at(self.hi, who, words)

    def landed(self, offsets: np.ndarray) -> None:
        """Bytes written by the async proxy: their generic write is overwritten."""
        if offsets.size:
            self.wt[np.unique(offsets >> 2)] = -1

    def fence(self, slots: np.ndarray, now: int) -> None:
        """``fence.proxy.async`` by ``slots``."""
        ws = self.race.ws
        self.lastf[slots] = now
        self.lastf_bar[slots] = ws.bar[slots]
        self.lastf_ws[slots] = ws.wsync[slots]
        vc = self.race.vc
        for s in slots.tolist():
            g = int(ws.gid[s])
            if vc.get(g):
                self.lastf_vc[s] = dict(vc[g])
            else:
                self.lastf_vc.pop(s, None)
        lo, hi = int(self.lo[slots].min()), int(self.hi[slots].max())
        if hi < lo:
            return
        seg = slice(lo, hi + 1)
        m = (self.wt[seg] >= 0) & (self.ft[seg] < 0) & np.isin(self.wslot[seg], slots)
        self.ft[seg][m] = now
        self.lo[slots] = self.wt.size
        self.hi[slots] = -1

    def read(self, wave: Any, slots: np.ndarray, offsets: np.ndarray, width: int,
             inst: Any, what: str) -> None:
        """An async-proxy read by thread ``slots`` of ``width`` bytes at byte
        ``offsets`` (one per slot): report the generic writes not ordered before it."""
        first = offsets >> 2
        k = int((((offsets + width - 1) >> 2) - first).max()) + 1
        words = (first[:, None] + np.arange(k)).ravel()
        rdr = np.repeat(slots, k)
        byte = np.repeat(offsets, k)
        tw = self.wt[words]
        m = tw >= 0
        if not m.any():
            return
        words, rdr, byte, tw = words[m], rdr[m], byte[m], tw[m]
        race, ws = self.race, self.race.ws
        a = self.wslot[words].astype(np.int64)
        ft = self.ft[words]
        same = a == rdr
        blk = self.block[a] == self.block[rdr]
        warp = (a // 32) == (rdr // 32)
        # the writer's fence, ordered before the read
        ok = (ft >= 0) & (same | (blk & (ft < ws.bar[rdr])) | (
            warp & (ws.wsync[a] > ft) & (ws.wsync[rdr] > ft)))
        # the reader's fence, after the write was ordered before it
        lf = self.lastf[rdr]
        ok |= (lf >= 0) & ((same & (tw < lf)) | (blk & (tw < self.lastf_bar[rdr])) | (
            warp & (tw < self.lastf_ws[rdr]) & (ws.wsync[a] > tw)))
        if ok.all():
            return
        gid = ws.gid
        for i in np.flatnonzero(~ok).tolist():
            ga, gr = int(gid[a[i]]), int(gid[rdr[i]])
            if ft[i] >= 0 and race._acquired(gr, ga, int(ft[i])):
                continue
            snap = self.lastf_vc.get(int(rdr[i]))
            if snap and (snap.get(ga, -1) > tw[i] or
                         snap.get(-1 - ga // race.tpbp, -1) > tw[i]):
                continue
            self._report(wave, int(rdr[i]), int(a[i]), int(words[i]), int(byte[i]),
                         int(ft[i]), inst, what, width)
            return

    def _report(self, wave: Any, rslot: int, wslot: int, word: int, byte: int, ft: int,
                inst: Any, what: str, width: int) -> None:
        race = self.race
        pc = race.pc.get(id(inst), 0)
        wpc = int(self.wpc[word])
        key = (wpc, pc, "proxy")
        if key in race.seen:
            return
        race.seen.add(key)
        winst = race.insts[wpc]
        off = max(word * 4, byte)
        acc = wave.access_record(rslot, inst, "ld", "shared", off - int(wave.sbase[rslot]),
                                 width)
        wkind = "atom" if winst.parts[0] in ("atom", "red") else "st"
        other = wave.access_record(wslot, winst, wkind, "shared",
                                   word * 4 - int(wave.sbase[wslot]))
        if ft >= 0:
            detail = ("the writing thread's fence.proxy.async is not ordered before the "
                      f"{what}: no barrier between them, and the issuing thread has no "
                      "fence.proxy.async after the write was ordered before it")
        else:
            detail = ("no fence.proxy.async of shared memory between the write and the "
                      f"{what}: neither by the writing thread after the write and before "
                      "the synchronisation, nor by the issuing thread after it")
        race._emit(Report("racecheck", wave.kernel.name,
                          "read-after-write race between the generic and the async proxy",
                          acc, other, detail), False)


def _shadow(ctx: Any) -> ProxyShadow | None:
    race = ctx.tools.get("racecheck") if ctx.tools else None
    return getattr(race, "proxy", None) if race is not None else None


def async_read(ctx: Any, slots: np.ndarray, offsets: np.ndarray, width: int, inst: Any,
               what: str) -> None:
    """Hook of the async-proxy readers: ``slots`` (wave thread slots) read ``width``
    bytes at wave shared ``offsets`` (one per slot) for ``what`` (e.g. "bulk store")."""
    sh = _shadow(ctx)
    if sh is None or offsets.size == 0:
        return
    slots = np.broadcast_to(np.asarray(slots, np.int64), offsets.shape)
    sh.read(ctx, slots, np.asarray(offsets, np.int64), width, inst, what)


def async_landed(ctx: Any, offsets: np.ndarray) -> None:
    """Hook of the async-proxy writers: bytes at wave shared ``offsets`` landed."""
    sh = _shadow(ctx)
    if sh is not None:
        sh.landed(np.asarray(offsets, np.int64))


def generic_landed(ctx: Any, slots: np.ndarray, offsets: np.ndarray, width: int,
                   inst_ids: np.ndarray) -> None:
    """Hook of cp.async (non-bulk, generic proxy): the copies of ``slots`` (one each, of
    ``width`` bytes at ``offsets``) by the instructions of ids ``inst_ids`` landed."""
    sh = _shadow(ctx)
    if sh is None or not len(inst_ids):
        return
    race = sh.race
    race.now += 1
    slots, offsets = np.asarray(slots, np.int64), np.asarray(offsets, np.int64)
    for iid in np.unique(inst_ids).tolist():
        sel = inst_ids == iid
        sh.write(slots[sel], offsets[sel], width, race.now, race.pc.get(iid, 0))
