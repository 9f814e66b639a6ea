"""The shadow memory of racecheck (:mod:`hardware.simt.racecheck`): per buffer, the
last write and two recent reads of each 4-byte word (or byte), the log of reads not yet
entered in the reader rows, and per wave the threads' ids and barrier times.

The design and its costs are described in :mod:`hardware.simt.racecheck`; this module
holds the data structures, the checks live there.
"""
from __future__ import annotations

from typing import Any

import numpy as np

_PAGE_BITS = 12
#: global memory up to this size gets a shadow column per word at once (else pages)
_DIRECT_BYTES = 1 << 26
_PAGE = 1 << _PAGE_BITS
#: global memory up to this size gets a byte shadow column per byte at once (else pages)
_DIRECT_BYTE_SHADOW = 1 << 20
#: the dtype of logged columns
_LOG_DTYPE = np.int64
#: accesses of at most this many lanes are logged by keeping their offsets array
_SMALL = 8192
#: logged reads (columns) a shadow holds before it enters them all in its rows
_LOG_MAX = 1 << 22
#: rows of a shadow (one column per 4-byte word, or per byte for 1- and 2-byte
#: accesses): the last write, the last read, the last read by another thread; each an
#: entry time << 24 | thread (-1: none), the time naming the instruction (``tinfo``)
_W, _R1, _R2 = 0, 1, 2
_ROWS = 3
_TBITS = 24
#: rows of at most this many bytes are kept between launches (:meth:`_Shadow.kept_rows`)
_KEEP_ROWS = 1 << 26
_TMASK = (1 << _TBITS) - 1


class _Shadow:
    """The access history of the bytes of one buffer: a (3, N) int64 array, rows as
    :data:`_W`/:data:`_R1`/:data:`_R2`. ``lazy``: pages of 4096 words are given a place
    when first touched (global memory); otherwise every word has one."""

    def __init__(self, size: int, lazy: bool, reuse: bool = False) -> None:
        self.lazy = lazy
        self.reuse = reuse  # logged columns live in one buffer (reused between launches)
        self.used = 0  # pages given a place
        # reads not yet entered in the reader rows, oldest first: [columns, threads,
        # time, line, lowest column, highest column, shift, delta] (the bounds None
        # until needed; the columns are ``(columns >> shift) + delta``: byte offsets
        # kept as they are, or an earlier read's columns shifted);
        # with ``reuse`` the columns are a slice of ``buf`` (one buffer reused, so that
        # logging allocates nothing)
        self.log: list[list] = []
        self.buf = np.empty(0, dtype=_LOG_DTYPE)
        self.fill = 0
        self.logged = 0  # columns in the log
        # per instruction: (its last offsets array, columns, shift, delta) logged for it
        self.last_cols: dict[int, tuple] = {}
        # time of the last write and the hull of the columns ever written
        self.wtime = -1
        self.pwtime = -1  # the last plain (not strong) write
        self.wlo, self.whi = 0, -1
        # time of the newest read entered in the reader rows
        self.rtime = -1
        #: rows an earlier shadow of the same size left (:meth:`kept_rows`), or None
        self.spare: np.ndarray | None = None
        if lazy:
            self.table = np.full(0, -1, dtype=np.int64)
            self.S = np.full((_ROWS, 0), -1, dtype=np.int64)
        else:
            self._S: np.ndarray | None = None  # made when first needed (a read-only
            self._size = max(size, 1)          # kernel may log reads and never look)

    @property
    def S(self) -> np.ndarray:
        if self._S is None:
            sp = self.spare
            if sp is not None and sp.shape == (_ROWS, self._size):
                sp.fill(-1)  # the rows of an earlier shadow of the same size, emptied
                self._S = sp
            else:
                self._S = np.full((_ROWS, self._size), -1, dtype=np.int64)
            self.spare = None
        return self._S

    def kept_rows(self) -> np.ndarray | None:
        """The rows, for a later shadow of the same size to reuse (:attr:`spare`: fresh
        memory costs page faults), when they exist and are at most :data:`_KEEP_ROWS`
        bytes; else None."""
        S = None if self.lazy else self._S
        return S if S is not None and S.nbytes <= _KEEP_ROWS else None

    @S.setter
    def S(self, value: np.ndarray) -> None:
        self._S = value

    def reserve(self, n: int) -> np.ndarray:
        """Room for the columns of a read of ``n`` columns to be logged (``reuse``)."""
        a = self.fill
        if a + n > self.buf.size:
            # a larger buffer; the logged columns keep their views of the old one
            self.buf = np.empty(max(32 * n, 2 * self.buf.size), dtype=_LOG_DTYPE)
            a = 0
        self.fill = a + n
        return self.buf[a:a + n]

    def log_read(self, e: list, n: int) -> None:
        """Log a read (an entry of :attr:`log`) of ``n`` columns; past :data:`_LOG_MAX`
        logged columns, enter them all in the reader rows (the log's memory stays
        bounded)."""
        self.log.append(e)
        self.logged += n
        if self.logged > _LOG_MAX:
            self.flush_reads()

    def bounds(self, e: list) -> tuple[int, int]:
        """Lowest and highest column of a logged read."""
        if e[4] is None:
            e[4] = (int(e[0].min()) >> e[6]) + e[7]
            e[5] = (int(e[0].max()) >> e[6]) + e[7]
        return e[4], e[5]

    def clear_log(self) -> None:
        self.log.clear()
        self.fill = 0
        self.logged = 0
        self.last_cols.clear()  # their buffer slices are reused from now on

    def index(self, off: np.ndarray) -> np.ndarray:
        if not self.lazy:
            return off
        page = off >> _PAGE_BITS
        top = int(page.max()) + 1
        if top > self.table.size:
            t = np.full(max(top, 2 * self.table.size), -1, dtype=np.int64)
            t[: self.table.size] = self.table
            self.table = t
        slot = self.table[page]
        miss = slot < 0
        if miss.any():
            # the pages touched for the first time, in order (a mark per page of the
            # table: no sort of the accesses)
            mark = np.zeros(top, dtype=bool)
            mark[page[miss]] = True
            new = np.flatnonzero(mark)
            n0 = self.used
            self.used += new.size
            self.table[new] = np.arange(n0, self.used)
            have = self.S.shape[1] // _PAGE
            if self.used > have:  # grow geometrically: pages are added often
                more = max(self.used, 2 * have) - have
                self.S = np.concatenate(
                    [self.S, np.full((_ROWS, more * _PAGE), -1, dtype=np.int64)], axis=1)
            slot = self.table[page]
        return (slot << _PAGE_BITS) | (off & (_PAGE - 1))

    def columns(self, wave: Any, inst: Any, offsets: np.ndarray
                ) -> tuple[np.ndarray, int, int]:
        """(columns, shift, delta) of a plain word read to be logged here, the
        columns being ``(columns >> shift) + delta``: those of the instruction's last
        logged read when the wave says these offsets are its offsets again or shifted
        by a multiple of 4 (no copy), else the offsets themselves (small accesses) or
        their words in the log's buffer."""
        key = id(inst)
        prev = self.last_cols.get(key)
        if prev is not None:
            if prev[0] is offsets:
                return prev[1], prev[2], prev[3]
            sft = wave.off_shift
            if sft is not None and sft[0] is offsets and sft[1] is prev[0] and not sft[2] & 3:
                r = (prev[1], prev[2], prev[3] + (sft[2] >> 2))
                self.last_cols[key] = (offsets,) + r
                return r
        if offsets.size <= _SMALL:
            r = (offsets, 2, 0)  # a small access: its byte offsets kept
        else:
            pos = self.reserve(offsets.size)
            np.right_shift(offsets, 2, out=pos)
            r = (pos, 0, 0)
        self.last_cols[key] = (offsets,) + r
        return r

    def flush_reads(self, lo: int | None = None, hi: int | None = None) -> None:
        """Enter the logged reads into the reader rows: all of them, or (given
        the column range ``lo``..``hi`` of a write) the oldest ones up to the last that
        touches the range (so the rows always take reads in time order)."""
        log = self.log
        if lo is None:
            upto = len(log)
        else:
            upto = 0
            for k in range(len(log) - 1, -1, -1):
                elo, ehi = self.bounds(log[k])
                if elo <= hi and ehi >= lo:
                    upto = k + 1
                    break
        if not upto:
            return
        S = self.S
        r1, r2 = S[_R1], S[_R2]
        self.rtime = log[upto - 1][2]
        for pos, thr, now, line, _, _, shift, delta in log[:upto]:
            if shift:
                pos = pos >> shift
            if delta:
                pos = pos + delta
            entry = (now << _TBITS) | thr
            o1 = r1[pos]
            m = o1 >= line
            if m.any():
                m &= (o1 & _TMASK) != thr  # a recent reader by another thread is kept
            r1[pos] = entry
            r2[pos[::-1]] = entry[::-1]  # the first of several readers in one instruction
            if m.any():
                r2[pos[m]] = o1[m]
        if upto == len(log):
            self.clear_log()
        else:
            self.logged -= sum(e[0].size for e in log[:upto])
            del log[:upto]


class _WaveState:
    """Per wave: thread slot -> launch-wide thread id, block, and the times of the last
    barrier of its block and of its last completed warp barrier."""

    def __init__(self, wave: Any, tpbp: int) -> None:
        gx, gy, _ = wave.cfg.grid
        blin = np.asarray([x + y * gx + z * gx * gy for x, y, z in wave.block_ids],
                          dtype=np.int64)
        self.gid = blin[wave.thread_block] * tpbp + wave.thread_linear
        self.tid24 = self.gid & _TMASK
        self.tid24.flags.writeable = False
        self._tids: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._repeated: dict[tuple[int, int], tuple] = {}
        self.bar = np.full(wave.T, -1, dtype=np.int64)
        self.wsync = np.full(wave.T, -1, dtype=np.int64)
        self.shared = _Shadow(wave.smem.size // 4 + 1, lazy=False, reuse=True)
        # 1- and 2-byte accesses: a column per byte at once when the wave's shared memory
        # is small (its rows are made at the first such access), else pages
        n = wave.smem.size
        self.shared_bytes = (_Shadow(n + 1, lazy=False, reuse=True) if n <= _DIRECT_BYTE_SHADOW
                             else _Shadow(0, lazy=True, reuse=True))
        # the read log's buffer of the wave's last launch (fresh memory costs page faults)
        buf = getattr(wave, "racecheck_log_buffer", None)
        if buf is not None:
            self.shared.buf = buf
        # the rows of the wave's last launch (the same shapes when the launch is)
        self.shared.spare, self.shared_bytes.spare = getattr(
            wave, "racecheck_rows", (None, None, None, None))[:2]
        self.bar_all = -1  # the common value of ``bar`` when every block has the same

    def tids_per_column(self, threads: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(thread ids, thread slots) of an access of ``k`` shadow columns per lane, each
        lane's repeated ``k`` times (read-only, kept per index array as :meth:`tids`)."""
        thr = self.tids(threads)
        if k == 1:
            return thr, threads
        key = (id(threads), k)
        m = self._repeated.get(key)
        if m is not None and m[0] is threads:
            return m[1], m[2]
        thr, slots = np.repeat(thr, k), np.repeat(threads, k)
        thr.flags.writeable = False
        slots.flags.writeable = False
        if len(self._repeated) > 4096:
            self._repeated.clear()
        self._repeated[key] = (threads, thr, slots)
        return thr, slots

    def tids(self, threads: np.ndarray) -> np.ndarray:
        """``tid24[threads]`` (read-only), kept per index array: a warp passes the same
        array (the wave's cached slice of its slots) at each access."""
        m = self._tids.get(id(threads))
        if m is not None and m[0] is threads:
            return m[1]
        if threads.size == self.tid24.size:
            return self.tid24
        t = self.tid24[threads]
        t.flags.writeable = False
        if len(self._tids) > 4096:
            self._tids.clear()
        self._tids[id(threads)] = (threads, t)
        return t
