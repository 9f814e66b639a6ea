"""racecheck: data races on shared and global memory (``launch(sanitize=...)``).

A *race* (PTX ISA, "Memory Consistency Model": data race; compute-sanitizer's
racecheck: read-after-write, write-after-read and write-after-write hazards) is a pair of
accesses by different threads to a common byte, at least one a write, that no
synchronisation orders and that are not both *morally strong* (atomics, ``red``,
``.volatile``, ``.relaxed``, ``.acquire`` and ``.release`` loads and stores). The
interpreter executes one interleaving; the check does not depend on it: it decides
whether the two accesses are *ordered* (happen-before), so the same races are found under
``scheduling="independent"`` and ``"lockstep"``.

What orders two accesses of threads A (first) and B (second):

==========================================  =============================================
same thread                                 program order
same block                                  a barrier (``bar.sync``/``barrier.sync``,
                                            ``__syncthreads``) completed between them
same warp                                   ``bar.warp.sync`` (``__syncwarp``) naming both
                                            lanes completed between them
any two threads                             release/acquire through memory: A's access,
                                            then a release by A (``membar``/``fence``, or
                                            a ``.release`` store/atomic), then a strong
                                            write of a flag (A's own, or the end of a
                                            chain of atomics); B reads the flag with a
                                            strong read, then acquires (``membar``/
                                            ``fence``, or the read is ``.acquire``),
                                            then accesses. A barrier passes what a thread
                                            acquired to the block, and a release after a
                                            barrier releases the accesses of the block
                                            before it. ``.cta``-scoped fences order only
                                            threads of one block.
==========================================  =============================================

Severity. A race between threads of different warps (of one block or of different
blocks) is undefined on every GPU: an error (a :class:`~hardware.simt.errors.RaceError`
unless ``sanitize`` makes racecheck warn). A race between lanes of one warp is ordered on
GPUs before Volta (the warp executes in lockstep) but undefined under independent thread
scheduling (sm_70 and later: CUDA C++ Programming Guide, "Independent Thread
Scheduling" and ``__syncwarp``): it is reported as a hazard in ``LaunchStats.warnings``
(both scheduling modes alike), never raised. So are several lanes of one warp writing one
byte in one (non-atomic, non-volatile) instruction: one of the values lands and the PTX
ISA does not say which (the interpreter keeps the highest thread's). Several warps doing
so in one execution of an instruction is a race like any other.

Writes of one value (a decision). Two unordered plain writes of the same value to a word
by threads of different warps (or blocks) conflict in the sense of the PTX memory model,
but whichever lands, the word ends up holding that value and no read can see anything
else: the interpreter does not report them, in shared or in global memory (the gallery's
``warp_handshake`` in a block of two warps stores ``flags[1]`` to ``out[lane]`` from both
warps and runs clean). compute-sanitizer's racecheck would not report that kernel
either: it is a shared-memory hazard detector only (compute-sanitizer documentation,
"Racecheck Tool": "a run time shared memory data access hazard detector"), and global
memory is outside its scope. Writes of different values are a write-after-write race,
and a read unordered with either write is a read-after-write race as always.

Design: a shadow of the block's shared memory and of the global memory a launch touches
holds, per 4-byte word (per byte for 1- and 2-byte accesses, in a shadow of their own),
its last write and two recent reads by different threads, each one int64 entry ``time <<
24 | thread``; time counts the warp-level accesses, barriers and fences of the launch and
names the instruction (and whether it was atomic or strong). The fast check (NumPy over
the lanes of one warp-level access) drops entries older than the block's last barrier
and those of the same thread; the few left are checked against warp barriers and the
threads' release/acquire clocks (sparse vector clocks, kept only for threads that fence
or synchronise through memory). A write of the value the word already holds from the
last write, or several lanes of one instruction writing the value that lands, is
harmless and not reported. Each pair of instructions is reported once per launch.
The shadow, its read log and the per-wave thread state are in
:mod:`hardware.simt.racecheck_shadow`; the checks and the clocks are here.

Cost. Reads are checked against the last writes at once but enter the reader rows
lazily: each warp-level read is logged (its columns, threads and time), and the log is
entered, oldest first, only up to the last read whose columns meet those of a write
(reads of other words never need it); a barrier of every block of the wave drops the
logged shared reads (older than the barrier, none can race any more). The last-write
time and the hull of the written columns of each shadow, and the time of the newest
entered read, skip every gather of rows that hold nothing after the line; a plain word
read of shared memory with no write since the barrier, or of global memory no write
has touched, is logged by a short path.
Approximations (they can only hide races, never invent them): a barrier with a thread
count orders the whole block; exited threads count as having taken part in later
barriers of their block; a barrier completes the acquire of what its threads' strong
reads observed; an access of 1 or 2 bytes is not compared with wider accesses of the
same bytes; threads whose launch-wide indices differ by a multiple of 2^24 are taken for
one thread.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .sanitizer import Access, Report, register_tool
from .proxycheck import ProxyShadow, covers_shared, has_async_readers
from .memory import GLOBAL_BASE, SLOT_BYTES, spans
from .racecheck_shadow import (_DIRECT_BYTE_SHADOW, _DIRECT_BYTES, _R1, _R2, _TBITS, _TMASK,
                               _W, _Shadow, _WaveState)

__all__ = ["RaceCheck", "strength"]

#: instruction info per time: instruction index << 8 | strong << 1 | atomic
_STRONG, _ATOMIC = 2, 1
_PC_SHIFT = 8
_AR = {w: np.arange(w, dtype=np.int64) for w in (1, 2, 4, 8, 16, 32, 64, 128)}
_WHAT = {("w", "ld"): "read-after-write race", ("w", "st"): "write-after-write race",
         ("r", "st"): "write-after-read race"}
#: instruction modifiers that make an ld/st morally strong
_STRONG_PARTS = frozenset(("volatile", "relaxed", "acquire", "release", "acq_rel", "sc",
                           "mmio"))


def _warp_synced(ws: Any, p_e: np.ndarray, p_thr: np.ndarray, thr: np.ndarray,
                 sus: np.ndarray) -> bool:
    """Whether every suspect earlier access (``sus``) is by another lane of the same warp
    as the access checked and older than the last warp barrier of every thread of the
    wave: each such pair is ordered by a ``bar.warp.sync`` of both lanes (what
    :meth:`RaceCheck._check` finds entry by entry), with no gather of the entries."""
    wmin = int(ws.wsync.min())
    if wmin < 0 or int(np.max(p_e, where=sus, initial=-1)) >> _TBITS >= wmin:
        return False
    return not np.count_nonzero(sus & ((p_thr >> 5) != (thr >> 5)))


def strength(inst: Any, kind: str) -> tuple[bool, bool, bool, bool]:
    """(strong, acquire, release, cta scope) of an access instruction."""
    parts = set(inst.parts)
    strong = kind == "atom" or bool(parts & _STRONG_PARTS)
    acq = bool(parts & {"acquire", "acq_rel"})
    rel = bool(parts & {"release", "acq_rel"})
    return strong, acq, rel, "cta" in parts


class RaceCheck:
    """The racecheck tool of one launch (see the module docstring)."""

    name = "racecheck"

    def __init__(self, session: Any) -> None:
        self.session = session
        self.now = 0
        self.global_shadow: _Shadow | None = None
        self.insts: list[Any] = []
        self.pc: dict[int, int] = {}
        self.ws: _WaveState | None = None
        self.tpbp = 32
        self.seen: set[tuple] = set()
        self.vc: dict[int, dict[int, int]] = {}       # thread -> what it acquired
        self.pending: dict[int, dict[int, int]] = {}  # read through strong reads, not yet
        self.snap: dict[int, tuple] = {}              # thread -> its last release
        self.tags: dict[int, tuple] = {}              # global byte offset -> flag tag
        self.stags: dict[int, tuple] = {}             # shared byte offset -> flag tag
        self.memory = session.memory
        self.kinds: dict[tuple, tuple] = {}  # (instruction, kind) -> strength and info
        self.tinfo = np.zeros(1024, dtype=np.int64)  # instruction info per time
        self.global_bytes: _Shadow | None = None
        #: generic writes and proxy fences (:mod:`hardware.simt.proxycheck`), for
        #: kernels that read shared memory through the async proxy
        self.proxy: ProxyShadow | None = None
        self.async_readers = False
        self.one_warp = False

    # ------------------------------------------------------------ session hooks
    def begin_wave(self, wave: Any) -> None:
        if not self.insts:
            self.insts = list(wave.kernel.source.instructions)
            self.pc = {id(i): k for k, i in enumerate(self.insts)}
            self.tpbp = wave.cfg.warps_per_block * 32
            self.async_readers = has_async_readers(self.insts)
        if self.memory is None:
            self.memory = wave.memory
        self.ws = _WaveState(wave, self.tpbp)
        # one warp per block, one block per cluster: only a block's own warp touches its
        # shared memory (see _synced_since)
        self.one_warp = self.tpbp == 32 and wave.cluster.size == 1
        self.proxy = ProxyShadow(self, wave) if self.async_readers else None
        self.stags = {}

    def end_wave(self, wave: Any) -> None:
        if self.ws is not None:
            wave.racecheck_log_buffer = self.ws.shared.buf
        if self.global_shadow is not None:
            wave.racecheck_global_log_buffer = self.global_shadow.buf
        # the shadows' rows, for the next launch of this wave (see _Shadow.kept_rows)
        wave.racecheck_rows = tuple(
            None if sh is None else sh.kept_rows() for sh in (
                self.ws.shared if self.ws is not None else None,
                self.ws.shared_bytes if self.ws is not None else None,
                self.global_shadow, self.global_bytes))
        self.ws = None
        self.proxy = None

    def end_launch(self) -> None:
        pass

    # ------------------------------------------------------------ accesses
    def access(self, wave: Any, kind: str, space: str, threads: np.ndarray,
               offsets: np.ndarray, width: int, inst: Any) -> None:
        """One warp-level access (hook of the wave): check it against the shadow, then
        record it."""
        if space not in ("shared", "global") or threads.size == 0:
            return
        ws = self.ws
        if ws is None:
            return
        self.now += 1
        now = self.now
        if self.proxy is not None and kind != "ld" and space == "shared":
            self.proxy.write(threads, offsets, width, now, self.pc.get(id(inst), 0))
        c = self.kinds.get((id(inst), kind))
        if c is None:
            strong, acq, rel, cta = strength(inst, kind)
            info = (self.pc.get(id(inst), 0) << _PC_SHIFT) | (_STRONG if strong else 0) | (
                _ATOMIC if kind == "atom" else 0)
            c = self.kinds[(id(inst), kind)] = (strong, acq, rel, cta, info)
        strong, acq, rel, cta, info = c
        # every thread of the wave (the slots are sorted): its thread ids as they are
        full = threads.size == ws.tid24.size
        if kind == "ld" and width == 4 and space == "shared" and not strong and (
                ws.bar_all is not None) and (sh := ws.shared).wtime < ws.bar_all:
            # the common case in short: a plain word read of shared memory with no write
            # since the barrier of every block: nothing to check, the read is logged
            self._stamp(now, info)
            pos, shift, delta = sh.columns(wave, inst, offsets)
            ob = wave.off_bounds
            lo = hi = None
            if ob is not None and ob[0] is offsets:
                lo, hi = ob[1][0] >> 2, ob[1][1] >> 2
            sh.log_read([pos, ws.tids(threads), now,
                         ws.bar_all << _TBITS, lo, hi, shift, delta], offsets.size)
            return
        if kind == "ld" and width == 4 and space == "global" and not strong and not (
                sh := self._global_words(wave)).lazy:
            ob = wave.off_bounds
            if ob is not None and ob[0] is offsets:
                lo, hi = ob[1][0] >> 2, ob[1][1] >> 2
                if sh.wtime < 0 or lo > sh.whi or hi < sh.wlo:
                    # a plain word read of global memory no write has touched yet:
                    # nothing to check, the read is logged
                    self._stamp(now, info)
                    pos, shift, delta = sh.columns(wave, inst, offsets)
                    sh.log_read([pos, ws.tids(threads), now, 0, lo, hi, shift, delta],
                                offsets.size)
                    return
        if width >= 4:
            if space == "global":
                sh = self._global_words(wave)
            else:
                sh = ws.shared
            nw = width >> 2
            if kind == "ld" and sh.reuse:
                # the columns go straight to the read log's buffer
                word = sh.reserve(offsets.size * nw)
                if nw == 1:
                    np.right_shift(offsets, 2, out=word, casting="unsafe")
                else:
                    first = offsets >> 2  # lane by lane, its nw words (see spans)
                    for j in range(nw):
                        np.add(first, j, out=word[j::nw], casting="unsafe")
            else:
                word = offsets >> 2
                if nw > 1:
                    word = spans(word, nw)
            thr, slots = ws.tids_per_column(threads, nw)
        else:
            # 1- and 2-byte accesses: a shadow per byte of their own
            if space == "global":
                if self.global_bytes is None:
                    size = self.memory.used
                    self.global_bytes = (_Shadow(size + 1, lazy=False)
                                         if size <= _DIRECT_BYTE_SHADOW else
                                         _Shadow(0, lazy=True))
                    self.global_bytes.spare = getattr(wave, "racecheck_rows", (None,) * 4)[3]
                sh = self.global_bytes
            else:
                sh = ws.shared_bytes
            thr, slots = ws.tids_per_column(threads, width)
            word = offsets if width == 1 else spans(offsets, 2)
        self._stamp(now, info)
        pos = sh.index(word)
        S = sh.S
        # entries older than this line cannot race (shared memory: the block's last
        # barrier; global memory: any entry may, other blocks have no barrier in common)
        if space == "shared":
            line = (ws.bar_all << _TBITS) if ws.bar_all is not None else (
                ws.bar[slots] << _TBITS)
        else:
            line = 0
        lo = hi = None
        if not sh.lazy and width >= 4:
            ob = getattr(wave, "off_bounds", None)
            if ob is not None and ob[0] is offsets:
                # the wave knows the bounds of these offsets (its access memo)
                lo, hi = ob[1][0] >> 2, (ob[1][1] >> 2) + (width >> 2) - 1
        if kind == "ld":
            # the last writes: only where a write since the line may have landed
            if sh.wtime >= 0 and (sh.wtime << _TBITS) >= (
                    line if isinstance(line, int) else int(line.min())) and not \
                    self._synced_since(ws, space, sh.wtime):
                if lo is None:
                    lo, hi = int(pos.min()), int(pos.max())
                if lo <= sh.whi and hi >= sh.wlo:
                    wk = S[_W][pos]
                    if (wk >= line).any():
                        self._check(wave, wk[None], ("w",), thr, slots, word, kind, space,
                                    inst, info, width)
            # the read itself is logged; the shadow's reader rows take it when a write
            # may need it (_Shadow.flush_reads), a barrier of every block drops it
            sh.log_read([pos, thr, now, line, lo, hi, 0, 0], pos.size)
        else:
            entry = (now << _TBITS) | thr
            if lo is None:
                lo, hi = int(pos.min()), int(pos.max())
            if sh.log:
                sh.flush_reads(lo, hi)
            lmin = line if isinstance(line, int) else int(line.min())
            # rows with no entry at or after the line cannot race (nor need clearing)
            # (a strong access races with plain writes only)
            wt = sh.pwtime if strong else sh.wtime
            w_live = wt >= 0 and (wt << _TBITS) >= lmin and (
                lo <= sh.whi and hi >= sh.wlo)
            r_live = sh.rtime >= 0 and (sh.rtime << _TBITS) >= lmin
            w_check = w_live and not self._synced_since(ws, space, sh.wtime)
            r_check = r_live and not self._synced_since(ws, space, sh.rtime)
            for row, what, live in ((_W, "w", w_check), (_R1, "r", r_check),
                                    (_R2, "r", r_check)):
                if not live:
                    continue
                pk = S[row][pos]
                if not (pk >= line).any():
                    if row == _R1:
                        break  # no recent reader: none in R2 either
                    continue
                self._check(wave, pk[None], (what,), thr, slots, word, "st", space, inst,
                            info, width)
            sh.wtime = now
            if not strong:
                sh.pwtime = now
            if sh.wlo > sh.whi:
                sh.wlo, sh.whi = lo, hi
            else:
                sh.wlo, sh.whi = min(sh.wlo, lo), max(sh.whi, hi)
            S[_W][pos] = entry
            if r_live:
                S[_R1][pos] = -1
                S[_R2][pos] = -1
            if not strong:
                lost = S[_W][pos] != entry
                if lost.any():
                    self._same_instruction(wave, pos, lost, thr, slots, word, space, inst,
                                           width, S)
        if strong:
            self._strong(wave, kind, space, threads, offsets, ws.gid[threads], acq, rel, cta)

    def _synced_since(self, ws: _WaveState, space: str, t: int) -> bool:
        """Whether every entry of the wave's shared shadow up to time ``t`` is ordered
        before any access now: in blocks of one warp (and clusters of one block) every
        entry is by a lane of the accessing warp, and every thread's last
        ``bar.warp.sync`` came after ``t`` (the pairwise test of :meth:`_check`)."""
        return self.one_warp and space == "shared" and t < int(ws.wsync.min())

    def _global_words(self, wave: Any) -> _Shadow:
        """The shadow of global memory for accesses of 4 bytes and more."""
        if self.global_shadow is None:
            size = self.memory.used
            self.global_shadow = (_Shadow(size // 4 + 1, lazy=False, reuse=True)
                                  if size <= _DIRECT_BYTES else _Shadow(0, lazy=True))
            buf = getattr(wave, "racecheck_global_log_buffer", None)
            if buf is not None:
                self.global_shadow.buf = buf
            self.global_shadow.spare = getattr(wave, "racecheck_rows", (None,) * 4)[2]
        return self.global_shadow

    def _stamp(self, now: int, info: int) -> None:
        """Record the instruction info of the access at time ``now``."""
        if now >= self.tinfo.size:
            self.tinfo = np.concatenate([self.tinfo, np.zeros_like(self.tinfo)])
        self.tinfo[now] = info

    def _info(self, times: np.ndarray) -> np.ndarray:
        """The instruction info of the accesses at ``times``."""
        return self.tinfo[times]

    def _check(self, wave: Any, p_e: np.ndarray, rows: tuple, thr: np.ndarray,
               slots: np.ndarray, word: np.ndarray, kind: str, space: str, inst: Any,
               info: int, width: int) -> None:
        """Report the earlier accesses (entries ``p_e``, one row per kind of earlier
        access) not ordered before this one."""
        ws = self.ws
        if space == "shared":
            # one block's memory: ordered when a barrier of the block came between
            if ws.bar_all is not None:
                sus = p_e >= (ws.bar_all << _TBITS)
            else:
                sus = p_e >= (ws.bar[slots] << _TBITS)
            if not sus.any():
                return
            p_thr = p_e & _TMASK
            sus &= (p_e >= 0) & (p_thr != thr)
        else:
            p_thr = p_e & _TMASK
            sus = (p_e >= 0) & (p_thr != thr)
            if not sus.any():
                return
            tpbp = self.tpbp
            sus &= ~(((p_thr // tpbp) == (thr // tpbp)) & (p_e < (ws.bar[slots] << _TBITS)))
        if not sus.any():
            return
        if _warp_synced(ws, p_e, p_thr, thr, sus):
            return
        r, c = np.nonzero(sus)
        ptime = p_e[r, c] >> _TBITS
        pinfo = self._info(ptime)
        keep = np.ones(r.size, dtype=bool)
        if info & _STRONG:
            keep &= (pinfo & _STRONG) == 0
        if kind == "st" and not info & _ATOMIC:
            vals = self._words_written(wave, width, thr.size)
            if vals is not None:
                # the same value written again over the last write: harmless
                buf = wave.smem if space == "shared" else self.memory.buffer
                cur = buf[: buf.size - buf.size % 4].view(np.uint32)[word[c]]
                keep &= ~((np.asarray(rows)[r] == "w") & (cur == vals[c]))
        if not keep.any():
            return
        r, c, ptime, pinfo = r[keep], c[keep], ptime[keep], pinfo[keep]
        # a plain read and a strong write of another thread: the read sees an old or a
        # new value (a compare-and-swap loop's first guess): a hazard, not an error
        if kind == "ld":
            mixed = (pinfo & _STRONG) != 0
        elif info & _STRONG:
            mixed = ((pinfo & _STRONG) == 0) & (np.asarray(rows)[r] == "r")
        else:
            mixed = np.zeros(r.size, dtype=bool)
        pt = p_thr[r, c]
        ct, cs = thr[c], slots[c]
        same_warp = (pt // 32) == (ct // 32)
        if same_warp.any():
            ps = cs - (ct - pt)
            ok = same_warp & (ws.wsync[np.where(same_warp, ps, 0)] > ptime) & (
                ws.wsync[cs] > ptime)
            if ok.all():
                return
            if ok.any():
                # ordered by a __syncwarp of both threads since: no hazard (dropped here,
                # not one by one below)
                keep = ~ok
                r, c, ptime, pinfo, mixed = r[keep], c[keep], ptime[keep], pinfo[keep], mixed[keep]
                pt, ct, cs, same_warp = pt[keep], ct[keep], cs[keep], same_warp[keep]
            ok = np.zeros(r.size, dtype=bool)
        else:
            ok = np.zeros(r.size, dtype=bool)
        gid = ws.gid
        for i in range(r.size):
            g_cur = int(gid[cs[i]])
            g_prev = g_cur - int(ct[i]) + int(pt[i])
            if ok[i] or self._acquired(g_cur, g_prev, int(ptime[i])):
                continue
            prev_pc = int(pinfo[i]) >> _PC_SHIFT
            what = _WHAT[(rows[r[i]], kind)]
            key_ = (prev_pc, self.pc.get(id(inst), 0), what)
            if key_ in self.seen:
                continue
            self.seen.add(key_)
            off = int(word[c[i]]) * (4 if width >= 4 else 1)
            self._report(wave, what, bool(same_warp[i]), bool(mixed[i]), g_prev, prev_pc,
                         rows[r[i]], int(cs[i]), off, space, inst, kind, width)

    def _acquired(self, thread: int, other: int, time: int) -> bool:
        """Whether ``thread`` acquired ``other``'s accesses up to ``time``."""
        vc = self.vc.get(thread)
        if not vc:
            return False
        return vc.get(other, -1) > time or vc.get(-1 - other // self.tpbp, -1) > time

    def _same_instruction(self, wave: Any, pos: np.ndarray, lost: np.ndarray,
                          thr: np.ndarray, slots: np.ndarray, word: np.ndarray, space: str,
                          inst: Any, width: int, S: np.ndarray) -> None:
        """Lanes of one instruction writing a common word (``lost``: overwritten)."""
        won = S[_W][pos] & _TMASK
        vals = self._words_written(wave, width, thr.size)
        if vals is not None:
            # lanes writing the value that lands are harmless
            order = np.argsort(pos, kind="stable")
            ps, vs = pos[order], vals[order]
            step = ps[1:] != ps[:-1]
            group = np.cumsum(np.r_[True, step]) - 1
            final = vs[np.flatnonzero(np.r_[step, True])[group]]
            differ = np.empty(ps.size, dtype=bool)
            differ[order] = vs != final
            lost &= differ
        if not lost.any():
            return
        i = int(np.argmax(lost))
        winner, loser = int(won[i]), int(thr[i])
        pc = self.pc.get(id(inst), 0)
        seen = (pc, pc, "same")
        if seen in self.seen:
            return
        self.seen.add(seen)
        same_warp = winner // 32 == loser // 32
        what = ("write-after-write hazard: lanes of one warp write the same byte in one "
                "instruction (which value lands is unspecified)" if same_warp else
                "write-after-write race")
        slot = int(slots[i])
        wslot = slot + (winner - loser)
        off = int(word[i]) * (4 if width >= 4 else 1)
        first = wave.access_record(slot, inst, "st", space,
                                   self._address(wave, space, slot, off), width)
        second = wave.access_record(wslot, inst, "st", space,
                                    self._address(wave, space, wslot, off), width)
        self._emit(Report("racecheck", wave.kernel.name, what, second, first,
                          "the same execution of one instruction"), same_warp)

    def _words_written(self, wave: Any, width: int, n: int) -> np.ndarray | None:
        """The 32-bit words a store of ``width`` >= 4 bytes per lane writes (one per
        shadow column, as the access expanded them), or None (unknown, or sub-word)."""
        vals = getattr(wave, "store_values", None)
        if vals is None or width < 4:
            return None
        raw = np.ascontiguousarray(vals).view(np.uint8).reshape(vals.shape[0], -1)
        if raw.shape[1] != width:
            return None
        words = raw.view(np.uint32).reshape(-1)
        return words if words.size == n else None

    # ------------------------------------------------------------ reports
    def _address(self, wave: Any, space: str, slot: int, off: int) -> int:
        if space == "shared":
            return off - int(wave.sbase[slot])
        mem = self.memory
        boff = getattr(mem, "_boff", None)
        if not boff:
            return off
        k = int(np.searchsorted(np.asarray(boff), off, side="right")) - 1
        return GLOBAL_BASE + k * SLOT_BYTES + (off - boff[k])

    def _record_of(self, wave: Any, gid: int, pc: int, kind: str, space: str,
                   address: int, cur_slot: int, cur_gid: int) -> Access:
        """The Access of an earlier access by launch-wide thread ``gid``."""
        inst = self.insts[pc]
        ws = self.ws
        slot = cur_slot + (gid - cur_gid)
        if 0 <= slot < ws.gid.size and int(ws.gid[slot]) == gid:
            return wave.access_record(slot, inst, kind, space, address)
        gx, gy, _ = wave.cfg.grid
        bx, by, _ = wave.cfg.block
        b, lin = divmod(gid, self.tpbp)
        return Access({"ld": "read", "st": "write", "atom": "atomic"}[kind], space,
                      (b % gx, b // gx % gy, b // (gx * gy)),
                      (lin % bx, lin // bx % by, lin // (bx * by)), inst.line, inst.text,
                      address, 0, wave.describe_address(space, address))

    def _report(self, wave: Any, what: str, same_warp: bool, mixed: bool, pgid: int, ppc: int,
                prow: str, slot: int, off: int, space: str, inst: Any, kind: str,
                width: int) -> None:
        address = self._address(wave, space, slot, off)
        pinst = self.insts[ppc]
        pkind = "atom" if pinst.parts[0] in ("atom", "red") else (
            "st" if prow == "w" else "ld")
        cur_gid = int(self.ws.gid[slot])
        other = self._record_of(wave, pgid, ppc, pkind, space, address, slot, cur_gid)
        kind = "atom" if inst.parts[0] in ("atom", "red") else kind
        acc = wave.access_record(slot, inst, kind, space, address, width)
        if mixed:
            detail = ("a plain read and an atomic or volatile write, unordered: the read "
                      "may see the old or the new value")
        elif same_warp:
            detail = ("lanes of one warp, no __syncwarp (bar.warp.sync) between them: "
                      "ordered on GPUs before Volta only, undefined under independent "
                      "thread scheduling")
        elif other.block == acc.block:
            detail = "threads of different warps of one block, no barrier between them"
        else:
            detail = ("threads of different blocks, not ordered by a release/acquire "
                      "(fence and flag) pattern")
        self._emit(Report("racecheck", wave.kernel.name, what, acc, other, detail),
                   same_warp or mixed)

    def _emit(self, report: Report, hazard: bool) -> None:
        s = self.session
        action = s.options.action("racecheck")
        if action == "off":
            return
        if hazard and s.stats is not None:
            s.warn(str(report))
        else:
            s.report(report)

    # ------------------------------------------------------------ synchronisation
    def _release_tag(self, g: int, blk_time: int) -> dict[int, int]:
        tag = dict(self.vc.get(g, {}))
        tag[g] = self.now
        if blk_time >= 0:
            k = -1 - g // self.tpbp
            tag[k] = max(tag.get(k, -1), blk_time)
        return tag

    def _strong(self, wave: Any, kind: str, space: str, threads: np.ndarray,
                offsets: np.ndarray, gid: np.ndarray, acq: bool, rel: bool,
                cta: bool) -> None:
        """Release/acquire through a strong access (flags)."""
        tags = self.tags if space == "global" else self.stags
        reads = kind in ("ld", "atom")
        writes = kind in ("st", "atom")
        if reads and not tags and not writes:
            return
        if writes and not rel and not tags and (
                not self.snap or not any(int(g) in self.snap for g in gid)):
            return
        bar = self.ws.bar
        for i in range(threads.size):
            g, o = int(gid[i]), int(offsets[i])
            blk = g // self.tpbp
            if reads:
                t = tags.get(o)
                if t is not None and (t[1] is None or t[1] == blk):
                    if acq:
                        self._join(self.vc, g, t[0])
                    else:
                        self._join(self.pending, g, t[0])
            if writes:
                if rel:
                    mine = (self._release_tag(g, int(bar[threads[i]])), blk if cta else None)
                else:
                    mine = self.snap.get(g)
                old = tags.get(o) if kind == "atom" else None
                if mine is None:
                    if old is None:
                        tags.pop(o, None)
                    continue
                if old is not None:
                    merged = dict(old[0])
                    for k, v in mine[0].items():
                        merged[k] = max(merged.get(k, -1), v)
                    mine = (merged, mine[1] if mine[1] == old[1] else None)
                tags[o] = mine

    @staticmethod
    def _join(table: dict, g: int, tag: dict[int, int]) -> None:
        cur = table.get(g)
        new = dict(cur) if cur else {}
        for k, v in tag.items():
            if new.get(k, -1) < v:
                new[k] = v
        table[g] = new

    def fence(self, wave: Any, threads: np.ndarray, inst: Any) -> None:
        """``membar``/``fence`` by ``threads`` (wave slots): acquire what their strong
        reads saw, then release what they did."""
        ws = self.ws
        if ws is None or threads.size == 0:
            return
        self.now += 1
        cta = "cta" in inst.parts
        for s in threads.tolist():
            g = int(ws.gid[s])
            p = self.pending.pop(g, None)
            if p:
                self._join(self.vc, g, p)
            self.snap[g] = (self._release_tag(g, int(ws.bar[s])),
                            g // self.tpbp if cta else None)
        if self.proxy is not None and covers_shared(inst):
            self.proxy.fence(threads, self.now)

    def barrier_release(self, wave: Any, blocks: np.ndarray) -> None:
        """A barrier of each of ``blocks`` (indices of the wave's blocks) completed."""
        ws = self.ws
        if ws is None:
            return
        self.now += 1
        if blocks.size == len(wave.block_ids):
            # every logged shared read is now older than its block's barrier: none can
            # race with a later access, so none needs entering
            ws.shared.clear_log()
            ws.shared_bytes.clear_log()
            ws.bar[:] = self.now
            ws.bar_all = self.now
        else:
            # the logged reads were checked against the lines before this barrier
            ws.shared.flush_reads()
            ws.shared_bytes.flush_reads()
            ws.bar[np.isin(wave.thread_block, blocks)] = self.now
            ws.bar_all = None
        if not self.vc and not self.pending:
            return
        for b in blocks.tolist():
            slots = np.flatnonzero(wave.thread_block == b)
            gids = ws.gid[slots].tolist()
            for g in gids:
                # a barrier completes the acquire of what the threads' strong reads
                # observed (the pattern of the CUDA sample threadFenceReduction)
                p = self.pending.pop(g, None)
                if p:
                    self._join(self.vc, g, p)
            merged: dict[int, int] = {}
            for g in gids:
                for k, v in self.vc.get(g, {}).items():
                    if merged.get(k, -1) < v:
                        merged[k] = v
            if merged:
                for g in gids:
                    self.vc[g] = merged

    def syncwarp(self, wave: Any, slots: np.ndarray) -> None:
        """A warp barrier completed for the lanes ``slots``."""
        if self.ws is None:
            return
        self.now += 1
        self.ws.wsync[slots] = self.now


register_tool("racecheck", RaceCheck)
