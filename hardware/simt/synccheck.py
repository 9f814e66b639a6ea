"""synccheck: barriers and warp collectives reached by part of their threads.

What is reported (compute-sanitizer's synccheck; PTX ISA 9.7.13.1 ``bar``/``barrier``,
9.7.13.3 ``bar.warp.sync``, 9.7.9.6 ``shfl.sync``, 9.7.13.7 ``vote.sync``, ``match.sync``,
``redux.sync``); every case is undefined on every GPU, hence an error unless
``sanitize`` makes synccheck warn:

- **divergent barrier**: an aligned CTA barrier (``bar.sync``, ``barrier.sync.aligned``,
  ``__syncthreads``) that a warp executes without some of its live lanes, which later
  arrive at a barrier on their own (PTX ISA: "all threads in a warp must execute the
  same barrier instruction" for ``.aligned``); lanes that exit instead are an early
  return (in ``barrier_mode="strict"`` a deadlock, as below);
- **barrier deadlock**: a barrier that part of a block can never reach (exited threads in
  ``barrier_mode="strict"``): still a :class:`~hardware.simt.errors.DeadlockError`, whose
  message names the threads that arrived and those that did not;
- **warp barrier**: ``bar.warp.sync`` (``__syncwarp``) whose mask lacks an executing
  lane's own bit, whose mask differs between the executing lanes, or that names live lanes
  that never execute a ``bar.warp.sync`` with the same mask before the lanes that wait
  execute another one (or before the warp ends);
- **collective mask**: ``shfl.sync``, ``vote.sync``, ``match.sync`` and ``redux.sync``
  whose member mask lacks an executing lane's own bit, differs between the executing
  lanes, or names live lanes that do not execute the instruction (PTX ISA: "the
  behavior is undefined if the executing thread is not in membermask", and every
  non-exited named thread must execute the same instruction); a shuffle that reads a
  lane outside the member mask or an inactive lane (PTX ISA, ``shfl.sync``: the value is
  undefined).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .sanitizer import Access, Report, register_tool

__all__ = ["SyncCheck", "lanes_text", "deadlock_detail"]

_BITS = np.uint64(1) << np.arange(32, dtype=np.uint64)


def lanes_text(lanes: np.ndarray) -> str:
    """"0-15, 17" for a boolean lane mask (32,)."""
    idx = np.flatnonzero(lanes).tolist()
    out, k = [], 0
    while k < len(idx):
        j = k
        while j + 1 < len(idx) and idx[j + 1] == idx[j] + 1:
            j += 1
        out.append(str(idx[k]) if j == k else f"{idx[k]}-{idx[j]}")
        k = j + 1
    return ", ".join(out) if out else "none"


def _word(lanes: np.ndarray) -> int:
    return int((lanes.astype(np.uint64) * _BITS).sum())


class SyncCheck:
    """The synccheck tool of one launch (see the module docstring)."""

    name = "synccheck"
    wants_access = False  # no memory-access hook: the wave skips it

    def __init__(self, session: Any) -> None:
        self.session = session
        self.pending: dict[int, tuple[int, np.ndarray, Any, int]] = {}
        self.owed: dict[int, tuple[np.ndarray, Any]] = {}

    # ------------------------------------------------------------ session hooks
    def begin_wave(self, wave: Any) -> None:
        self.pending = {}
        self.owed = {}

    def end_wave(self, wave: Any) -> None:
        for w in sorted(self.pending):
            mask, arrived, inst, live = self.pending[w]
            self._warp_barrier_missing(wave, w, mask, arrived, inst, live)
        self.pending = {}

    def end_launch(self) -> None:
        pass

    def access(self, *args: Any) -> None:
        pass

    # ------------------------------------------------------------ helpers
    @staticmethod
    def _ids(wave: Any, slot: int) -> tuple:
        b = tuple(int(x) for x in wave.block_ids[int(wave.thread_block[slot])])
        lin = int(wave.thread_linear[slot])
        bx, by, _ = wave.cfg.block
        return b, (lin % bx, lin // bx % by, lin // (bx * by))

    def _emit(self, wave: Any, w: int, lane: int, inst: Any, what: str, detail: str) -> None:
        block, thread = self._ids(wave, int(wave.rows_all[w, lane]))
        acc = Access("executed", "", block, thread, inst.line, inst.text, 0, 0, "")
        rep = Report("synccheck", wave.kernel.name, what, acc, None, detail)
        self.session.report(rep)

    @staticmethod
    def _warp_in_block(wave: Any, w: int) -> int:
        return w - int(np.flatnonzero(wave.warp_block == wave.warp_block[w])[0])

    @staticmethod
    def _live(wave: Any, w: int) -> np.ndarray:
        sched = getattr(wave, "scheduler", None)
        if sched is None:
            return wave.exists.reshape(-1, 32)[w]
        s = sched.stacks[w]
        return s[0][2] if s else np.zeros(32, dtype=bool)

    # ------------------------------------------------------------ CTA barriers
    def barrier_arrive(self, wave: Any, warps: np.ndarray, inst: Any, lanes: np.ndarray,
                       live: np.ndarray) -> None:
        """Lanes ``lanes`` (G, 32) of ``warps`` execute the barrier ``inst``; ``live``
        (G, 32) their lanes that have not exited. Live lanes left out are *owed*: when
        they later arrive at a barrier on their own, the barrier was divergent (lanes
        that exit instead are fine: an early return)."""
        if "aligned" not in inst.parts and inst.parts[0] == "barrier":
            return  # barrier.sync without .aligned: lanes may arrive one by one
        owed = self.owed
        if owed:
            for i, w in enumerate(warps.tolist()):
                o = owed.get(w)
                if o is not None and (o[0] & lanes[i] & live[i]).any():
                    late = o[0] & lanes[i] & live[i]
                    del owed[w]
                    self._emit(wave, w, int(np.argmax(late)), inst, "divergent barrier",
                               f"warp {self._warp_in_block(wave, w)}: lanes "
                               f"{lanes_text(late)} arrive here after the rest of the warp "
                               f"arrived without them at line {o[1].line} ({o[1].text!r}); "
                               "an aligned barrier must be executed by all threads of a "
                               "warp together")
        missing = live & ~lanes
        bad = missing.any(axis=1)
        for i in np.flatnonzero(bad).tolist():
            owed[int(warps[i])] = (missing[i].copy(), inst)
        for i in np.flatnonzero(~bad).tolist():
            owed.pop(int(warps[i]), None)

    # ------------------------------------------------------------ warp barriers
    def _agreed_masks(self, wave: Any, ex: Any, inst: Any, masks: np.ndarray, what: str,
                      plural: str) -> Any:
        """Per warp executing ``inst`` whose lanes give one mask naming them all: (row,
        warp, first lane, executing lanes, mask, named lanes); a warp whose lanes give
        different masks, or a mask that leaves out one of them, is a hazard instead."""
        for i in range(ex.warps.shape[0]):
            ex_l = ex.mask[i]
            if not ex_l.any():
                continue
            w = int(ex.warps[i])
            vals = masks[i][ex_l]
            lane0 = int(np.argmax(ex_l))
            if (vals != vals[0]).any():
                self._emit(wave, w, lane0, inst, f"{what} mismatch",
                           f"the executing lanes {lanes_text(ex_l)} give different {plural} "
                           f"({', '.join(sorted({f'{int(v):#010x}' for v in vals}))})")
                continue
            mask = int(vals[0])
            named = ((mask >> np.arange(32)) & 1).astype(bool)
            if (ex_l & ~named).any():
                self._emit(wave, w, lane0, inst, f"{what} lacks an executing lane",
                           f"mask {mask:#010x} does not name lanes "
                           f"{lanes_text(ex_l & ~named)}, which execute it")
                continue
            yield i, w, lane0, ex_l, mask, named

    def warp_sync(self, wave: Any, ex: Any, inst: Any, masks: np.ndarray) -> np.ndarray:
        """``bar.warp.sync`` with member masks ``masks`` (G, 32; executing lanes). Returns
        the (G, 32) lanes whose warp barrier completed (for racecheck)."""
        done = np.zeros(ex.rows.shape, dtype=bool)
        for i, w, lane0, ex_l, mask, named in self._agreed_masks(
                wave, ex, inst, masks, "warp barrier mask", "masks"):
            live = self._live(wave, w)
            pend = self.pending.get(w)
            if pend is not None:
                pmask, parr, pinst, plive = pend
                if pmask == mask and not (parr & ex_l).any():
                    arrived = parr | ex_l
                    if not (named & live & ~arrived).any():
                        del self.pending[w]
                        done[i] = named & arrived
                    else:
                        self.pending[w] = (mask, arrived, pinst, plive)
                    continue
                del self.pending[w]
                self._warp_barrier_missing(wave, w, pmask, parr, pinst, plive)
                continue
            if (named & live & ~ex_l).any():
                self.pending[w] = (mask, ex_l.copy(), inst, live.copy())
            else:
                done[i] = ex_l
        return done

    def _warp_barrier_missing(self, wave: Any, w: int, mask: int, arrived: np.ndarray,
                              inst: Any, live: np.ndarray) -> None:
        named = ((mask >> np.arange(32)) & 1).astype(bool)
        lane0 = int(np.argmax(arrived))
        self._emit(wave, w, lane0, inst, "warp barrier not reached by every named lane",
                   f"warp {self._warp_in_block(wave, w)}: mask {mask:#010x}; lanes "
                   f"{lanes_text(arrived)} execute it, live lanes "
                   f"{lanes_text(named & live & ~arrived)} never do")

    # ------------------------------------------------------------ collectives
    def collective(self, wave: Any, ex: Any, inst: Any, masks: np.ndarray) -> None:
        """A ``*.sync`` warp collective with member masks ``masks`` (G, 32)."""
        if ex.mask.all() and (masks == 0xFFFFFFFF).all():
            return  # every lane of every warp executes it with the full mask
        for _, w, lane0, ex_l, mask, named in self._agreed_masks(
                wave, ex, inst, masks, "member mask", "member masks"):
            missing = named & self._live(wave, w) & ~ex_l
            if missing.any():
                self._emit(wave, w, lane0, inst, "member mask names lanes that do not "
                           "execute it", f"warp {self._warp_in_block(wave, w)}: mask "
                           f"{mask:#010x}; lanes {lanes_text(ex_l)} execute it, live lanes "
                           f"{lanes_text(missing)} do not")

    def bad_source(self, wave: Any, ex: Any, inst: Any, bad: np.ndarray, msg: str) -> None:
        """A shuffle whose lanes ``bad`` (G, 32) read an inactive or non-member lane."""
        i = int(np.argmax(bad.any(axis=1)))
        w = int(ex.warps[i])
        self._emit(wave, w, int(np.argmax(bad[i])), inst, "shuffle from a lane that does "
                   "not take part", f"lanes {lanes_text(bad[i])} {msg}")


def deadlock_detail(wave: Any, sched: Any, block: int) -> str:
    """Which threads of wave block ``block`` wait at a barrier and which never arrive."""
    warps = np.flatnonzero(wave.warp_block == block)
    w0 = int(warps[0])
    arrived, missing = [], []
    for w in warps.tolist():
        live = SyncCheck._live(wave, w)
        lanes = wave.exists.reshape(-1, 32)[w]
        if sched.state[w] == 1:  # WAITING
            top = sched.top_mask[w]
            a, m = top & lanes, lanes & ~top
        else:
            a, m = np.zeros(32, dtype=bool), lanes
        k = w - w0
        if a.any():
            arrived.append(f"warp {k} lanes {lanes_text(a)}")
        if m.any():
            why = "exited" if not (m & live).any() else "elsewhere"
            missing.append(f"warp {k} lanes {lanes_text(m)} ({why})")
    return (f"synccheck: arrived: {'; '.join(arrived) or 'none'}; never arrive: "
            f"{'; '.join(missing) or 'none'}")


register_tool("synccheck", SyncCheck)
