"""The memory accesses of a wave: generic addresses split into spaces, every access
located and checked (alignment, the space's bounds, memcheck's exact allocation and
variable bounds, initcheck's per-byte shadows), reported to the sanitizer tools and
counted in the launch statistics; loads, stores and atomics in thread order.

:class:`WaveMemory` is the half of :class:`hardware.simt.executor.Wave` that does this;
:class:`Exec` names the warps and lanes an instruction executes for, which every access
is made for (the scheduler builds one per step).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .cluster import UNIT as _DSMEM
from .errors import UnsupportedPtxError
from .memory import LOCAL_WINDOW, SHARED_WINDOW, UNALLOCATED, WINDOW_SIZE, spans
from .sanitizer import TOOL_ERRORS, Access, Report
from .parser import Instruction
from .types import PtxType

__all__ = ["Exec", "WaveMemory"]


class Exec:
    """The warps executing one instruction: ``warps`` (G,), ``rows`` (G, 32) thread
    indices, ``mask`` (G, 32) lanes executing it (after the guard), ``lane_active``
    (G, 32) lanes active in the SIMT stack."""

    __slots__ = ("warps", "rows", "mask", "lane_active")

    def __init__(self, warps: np.ndarray, rows: np.ndarray, mask: np.ndarray,
                 lane_active: np.ndarray) -> None:
        self.warps = warps
        self.rows = rows
        self.mask = mask
        self.lane_active = lane_active


class _Memo:
    """The last access of one instruction (:meth:`WaveMemory._access`): its threads
    ``ix``, addresses and space, the statistics it added (``deltas``), its byte
    offsets ``off``, lowest and highest address, kind and width, the offsets' bounds
    ``ob`` (when tools look at accesses) and ``held``, a shared/local variable's
    ``[start, end)`` known to hold its addresses (or None)."""

    __slots__ = ("ix", "addr", "space", "deltas", "off", "lo", "hi", "kind", "width", "ob",
                 "held")

    def __init__(self, ix: Any, addr: np.ndarray, space: str, deltas: tuple,
                 off: np.ndarray, lo: int, hi: int, kind: str, width: int,
                 ob: tuple | None) -> None:
        self.ix, self.addr, self.space, self.deltas, self.off = ix, addr, space, deltas, off
        self.lo, self.hi, self.kind, self.width, self.ob = lo, hi, kind, width, ob
        self.held: tuple[int, int] | None = None


class WaveMemory:
    """Checked memory access for :class:`hardware.simt.executor.Wave` (which holds the
    buffers, layouts, shadows and tools these methods use)."""

    # ------------------------------------------------------------ sanitizer
    def describe_address(self, space: str, address: int) -> str:
        """The allocation or variable ``address`` of ``space`` lies in, or the nearest."""
        if space in ("global", "const"):
            return self.memory.describe(address)
        regions = self.shared_regions if space == "shared" else self.local_regions
        return regions.describe(address)

    def access_record(self, thread: int, inst: Instruction, kind: str, space: str,
                      address: int, width: int = 0) -> Access:
        """The :class:`~hardware.simt.sanitizer.Access` of thread slot ``thread``:
        ``kind`` "ld"/"st"/"atom" (or "read"/"write"/"atomic"), ``address`` the global
        address or the .shared/.local address."""
        b = self.block_ids[int(self.thread_block[thread])]
        lin = int(self.thread_linear[thread])
        bx, by, _ = self.cfg.block if self.cfg else (32, 1, 1)
        t = (lin % bx, lin // bx % by, lin // (bx * by))
        return Access(_KINDS.get(kind, kind), space, tuple(int(x) for x in b), t,
                      inst.line, inst.text, int(address), width,
                      self.describe_address(space, int(address)))

    def _report(self, tool: str, what: str, kind: str, space: str, ix: Any, pos: int,
                addr: int, width: int, inst: Instruction, fault: bool = False) -> None:
        """Report a one-access hazard of the access at position ``pos`` (raised
        whatever ``sanitize`` says when ``fault``: the access cannot be performed)."""
        thread = pos if isinstance(ix, slice) else int(ix[pos])
        rep = Report(tool, self.kernel.name, what,
                     self.access_record(thread, inst, kind, space, addr, width))
        action = self.session.options.action(tool)
        if fault or action == "error":
            err = TOOL_ERRORS[tool](f"{self._where(thread, inst)}: {what} at address "
                                    f"{addr:#x} ({rep.access.allocation})")
            err.report = rep
            raise err
        self.session.report(rep)

    def _notify(self, kind: str, space: str, ix: Any, off: np.ndarray, width: int,
                inst: Instruction) -> None:
        """Show one warp-level access to the registered tools (see .sanitizer)."""
        threads = ix if not isinstance(ix, slice) else self._thread_ids(ix)
        for tool in self.access_tools:
            tool.access(self, kind, space, threads, off, width, inst)

    def _shadow(self, space: str) -> np.ndarray:
        if space in ("global", "const"):
            return self.memory.init_shadow
        return self.sinit if space == "shared" else self.linit

    def _check_init(self, space: str, ix: Any, addr: np.ndarray, e: np.ndarray,
                    isz: int, n: int, inst: Instruction, kind: str = "ld") -> bool:
        """initcheck: every byte the access reads was written (``e``: element indices
        of ``isz`` bytes, ``n`` per thread); whether none was unwritten."""
        sv = self._view(self._shadow(space), _SHADOW_DTYPE[isz])
        got = sv[e] if n == 1 else sv[spans(e, n).reshape(-1, n)]
        ok = got == _SHADOW_ONES[isz]
        if np.count_nonzero(ok) == ok.size:
            return True
        bad = ~ok if n == 1 else ~ok.all(axis=1)
        pos = int(np.argmax(bad))
        lane_ok = ok[pos] if n == 1 else ok[pos]
        first = 0 if n == 1 else int(np.argmin(lane_ok))
        what = f"read of uninitialized {space} memory"
        self._report("initcheck", what, kind, space, ix, pos, int(addr[pos]) + first * isz,
                     isz * n, inst)
        return False

    def _written(self, space: str, inst: Instruction, width: int, count: int,
                 off: np.ndarray) -> bool:
        """Whether the bytes between the lowest and the highest address of the access
        just located (global memory: its memo; shared and local memory: the offsets'
        bounds, known when a tool looks at accesses) were all written, when that range
        is not much larger than the bytes read (initcheck's fast path: no gather)."""
        if not count:
            return False
        if space == "global":
            if id(inst) in self._sparse:
                return False
            memo = self._memo.get(id(inst))
            if memo is None:
                return False
            lo, end = memo.lo, memo.hi + width
            if end - lo > 4 * width * count:
                self._sparse.add(id(inst))  # a spread pattern: not tried again this launch
                return False
            return self.memory.written(lo, end)
        ob = self.off_bounds
        if ob is None or ob[0] is not off or space not in ("shared", "local"):
            return False
        lo, end = ob[1][0], ob[1][1] + width
        # a range found written in full stays written (initialisation is never undone in
        # a launch): a range inside it needs no look at the shadow
        known = self._known_init.setdefault(space, [])
        for k_lo, k_end in known:
            if k_lo <= lo and end <= k_end:
                return True
        if id(inst) in self._sparse:
            return False
        spread = end - lo > 4 * width * count
        if spread and end - lo > _SCAN_BYTES:
            self._sparse.add(id(inst))  # a spread pattern: not tried again this launch
            return False
        if (self.sinit if space == "shared" else self.linit)[lo:end].all():
            # overlapping or adjacent written ranges: their union is written
            near = [r for r in known if r[0] <= end and lo <= r[1]]
            for r in near:
                known.remove(r)
                lo, end = min(lo, r[0]), max(end, r[1])
            known.insert(0, (lo, end))
            del known[_KNOWN_RANGES:]
            return True
        if spread:
            self._sparse.add(id(inst))  # a spread pattern, not all written: not tried again
        return False

    def _mark_init(self, space: str, e: np.ndarray, isz: int, n: int) -> None:
        sv = self._view(self._shadow(space), _SHADOW_DTYPE[isz])
        if n == 1:
            sv[e] = _SHADOW_ONES[isz]
        else:
            sv[spans(e, n)] = _SHADOW_ONES[isz]

    # ------------------------------------------------------------ memory
    def _split(self, ix: Any, ex: Exec, addr: np.ndarray) -> list[tuple[str, Any, Exec, np.ndarray]]:
        """Classify generic addresses into spaces (PTX ISA 6.4.1)."""
        ixa = self._thread_ids(ix)
        sh = (addr >= SHARED_WINDOW) & (addr < SHARED_WINDOW + WINDOW_SIZE)
        lo = (addr >= LOCAL_WINDOW) & (addr < LOCAL_WINDOW + WINDOW_SIZE)
        gl = ~(sh | lo)
        out = []
        for space, sel, base in (("global", gl, 0), ("shared", sh, SHARED_WINDOW),
                                 ("local", lo, LOCAL_WINDOW)):
            if not sel.any():
                continue
            if sel.all():
                out.append((space, ix, ex, addr - base))
                continue
            m = ex.mask.copy()
            m[ex.mask] = sel
            out.append((space, ixa[sel], Exec(ex.warps, ex.rows, m, ex.lane_active),
                        addr[sel] - base))
        return out

    def _locate(self, space: str, ix: Any, ex: Exec, addr: np.ndarray, width: int,
                inst: Instruction, kind: str = "ld") -> tuple[np.ndarray, np.ndarray]:
        """(byte buffer, byte offsets) of the accesses, after every check: a misaligned
        access or one outside the space's memory is a fault (MemoryAccessError whatever
        ``sanitize`` says); one past the exact end of its allocation or variable, or
        into freed memory, is a memcheck hazard."""
        if (addr & (width - 1)).any() if width & (width - 1) == 0 else (addr % width).any():
            mis = (addr % width) != 0
            p = int(np.argmax(mis))
            self._report("memcheck", f"misaligned {width}-byte {space} access", kind, space,
                         ix, p, int(addr[p]), width, inst, fault=True)
        if space in ("global", "const"):
            off, p, why = self.memory.locate(addr, width)
            if p is not None and (why == UNALLOCATED or self.memcheck):
                what = ("use after free" if why == "freed" else
                        f"out-of-bounds {space} access")
                self._report("memcheck", what, kind, space, ix, p, int(addr[p]), width,
                             inst, fault=why == UNALLOCATED)
            return self.memory.buffer, off
        if space == "shared":
            buf, base, lim, what, regions = (self.smem, self.sbase, self.smem_size, "block",
                                             self.shared_regions)
        elif space == "local":
            buf, base, lim, what, regions = (self.lmem, self.lbase, self.local_size,
                                             "thread", self.local_regions)
        else:
            raise UnsupportedPtxError(f"line {inst.line}: {inst.text!r}: .{space} space")
        bases = None
        if addr.size:
            lo, hi = int(addr.min()), int(addr.max())
            if hi >= _DSMEM and space == "shared":
                # .shared::cluster addresses of other CTAs (hardware.simt.cluster)
                addr, bases = self.cluster.remote(ix, addr, width, inst)
                lo, hi = int(addr.min()), int(addr.max())
            if lo < 0 or hi + width > lim:
                bad = (addr < 0) | (addr + width > lim)
                p = int(np.argmax(bad))
                self._report("memcheck", f"out-of-bounds {space} access ({what} has {lim} "
                             "bytes)", kind, space, ix, p, int(addr[p]), width, inst,
                             fault=True)
            if self.memcheck:
                p = regions.first_outside(addr, width, lo, hi)
                if p is not None:
                    self._report("memcheck", f"out-of-bounds {space} access", kind, space,
                                 ix, p, int(addr[p]), width, inst)
        return buf, (base[ix] if bases is None else bases) + addr

    def _rows(self, ix: Any, ex: Exec, addr: np.ndarray) -> np.ndarray:
        if isinstance(ix, slice):
            return addr.reshape(ex.rows.shape)
        a = np.zeros(ex.rows.shape, dtype=np.int64)
        a[ex.mask] = addr
        return a

    def _record(self, kind: str, space: str, ix: Any, ex: Exec, addr: np.ndarray,
                width: int) -> tuple:
        if self.counters is None:
            return ()
        if space == "global":
            return self.counters.global_access(kind, self._rows(ix, ex, addr), ex.mask, width)
        if space == "shared":
            return self.counters.shared_access(kind, self._rows(ix, ex, addr), ex.mask, width)
        field = "constant_requests" if space == "const" else "local_requests"
        d = ((field, int(ex.mask.any(axis=1).sum())),)
        self.counters.apply(d)
        return d

    def _access(self, kind: str, space: str, ix: Any, ex: Exec, addr: np.ndarray,
                width: int, inst: Instruction) -> tuple[np.ndarray, np.ndarray]:
        """Checks and statistics of one access; (buffer, byte offsets).

        An instruction that repeats the addresses of its previous execution with the same
        threads, or shifts all of them by one amount (a loop walking through a tile),
        reuses the checks and statistics of that execution when they cannot differ: the
        shifted range still lies in one allocation (in the block's shared memory, in the
        thread's local memory), the shift keeps the alignment, and it keeps the
        statistics (a multiple of 128 bytes for global sectors and lines, of the 4-byte
        bank width for shared-memory banks, whose wavefronts only depend on which lanes
        share a word or a bank)."""
        self._repeat = False
        self.off_shift = None
        m = self._memo.get(id(inst))
        if m is not None and addr.size and m.space == space and m.kind == kind and \
                m.width == width and addr.shape == m.addr.shape:
            m_ix = m.ix
            if ix is m_ix or (isinstance(ix, slice) and isinstance(m_ix, slice)) or (
                    not isinstance(ix, slice) and not isinstance(m_ix, slice)
                    and ix.shape == m_ix.shape and not _nz(ix != m_ix)):
                m_addr = m.addr
                d0 = int(addr[0]) - int(m_addr[0])
                if d0 == 0:
                    hit = not _nz(addr != m_addr)
                else:
                    hit = (d0 % width == 0 and self._shift_keeps_stats(space, d0)
                           and not _nz(np.subtract(addr, m_addr) != d0)
                           and self._holds_shifted(m, space, m.lo + d0, m.hi + d0 + width))
                if hit:
                    if self.counters is not None:
                        self.counters.apply(m.deltas)
                    buf = self.memory.buffer if space in ("global", "const") else (
                        self.smem if space == "shared" else self.lmem)
                    if d0:
                        old_off = m.off
                        m.off = old_off + d0
                        if self.access_tools:
                            # these offsets are the last ones of the instruction + d0
                            self.off_shift = (m.off, old_off, d0)
                        if m.ob is not None:
                            m.ob = (m.ob[0] + d0, m.ob[1] + d0)
                        m.ix = ix
                        m.addr = addr.copy()
                        m.lo += d0
                        m.hi += d0
                    if m.ob is not None:
                        self.off_bounds = (m.off, m.ob)
                    self._repeat = not d0
                    return buf, m.off
        buf, off = self._locate(space, ix, ex, addr, width, inst, kind)
        deltas = self._record(kind, space, ix, ex, addr, width)
        if addr.size:
            ob = None
            if self.access_tools:
                # the offsets' bounds, for the tools (racecheck's read log)
                ob = (int(off.min()), int(off.max()))
                self.off_bounds = (off, ob)
            self._memo[id(inst)] = _Memo(ix, addr.copy(), space, deltas, off, int(addr.min()),
                                         int(addr.max()), kind, width, ob)
        return buf, off

    def _holds_shifted(self, m: _Memo, space: str, lo: int, end: int) -> bool:
        """Whether ``[lo, end)`` lies in one allocation of ``space`` (:meth:`_in_bounds`),
        for the memo ``m``'s access shifted: a shared or local variable found to hold
        an earlier shift of it is remembered (the layout is fixed for the wave)."""
        if space in ("global", "const"):
            return self.memory.holds(lo, end)
        held = m.held
        if held is not None and held[0] <= lo and end <= held[1]:
            return True
        if not self.memcheck:
            size = self.smem_size if space == "shared" else self.local_size
            m.held = held = (0, size) if lo >= 0 and end <= size else None
        else:
            m.held = held = (self.shared_regions if space == "shared"
                             else self.local_regions).holder(lo, end)
        return held is not None

    def _shift_keeps_stats(self, space: str, shift: int) -> bool:
        if self.counters is None or space in ("local", "const"):
            return True  # no statistics, or request counts only
        return shift % (128 if space == "global" else 4) == 0

    def _in_bounds(self, space: str, lo: int, end: int) -> bool:
        """Whether ``[lo, end)`` lies in one allocation of ``space``."""
        if space in ("global", "const"):
            return self.memory.holds(lo, end)
        if not self.memcheck:
            return lo >= 0 and end <= (self.smem_size if space == "shared"
                                       else self.local_size)
        return (self.shared_regions if space == "shared" else self.local_regions).holds(lo, end)

    def _view(self, buf: np.ndarray, elem: np.dtype) -> np.ndarray:
        key = (id(buf), buf.size, elem)
        v = self._views.get(key)
        if v is None:
            isz = elem.itemsize
            v = buf[: buf.size - buf.size % isz].view(elem)
            self._views[key] = v
        return v

    def _full(self, ix: Any, addr: Any) -> np.ndarray:
        cnt = self.count(ix)
        a = np.asarray(addr, dtype=np.int64)
        if a.ndim == 0 or a.shape[0] != cnt:
            a = np.broadcast_to(a, (cnt,))
        return a

    def load(self, space: str, ix: Any, ex: Exec, addr: np.ndarray, elem: np.dtype, n: int,
             inst: Instruction) -> np.ndarray:
        addr = self._full(ix, addr)
        if space == "generic":
            parts = self._split(ix, ex, addr)
            if len(parts) == 1 and parts[0][1] is ix:
                sp, six, sex, sa = parts[0]
                return self.load(sp, six, sex, sa, elem, n, inst)
            out = np.zeros((addr.shape[0], n), dtype=elem)
            full = self._thread_ids(ix)
            for sp, six, sex, sa in parts:
                out[np.searchsorted(full, six)] = self.load(sp, six, sex, sa, elem, n, inst)
            return out
        width = elem.itemsize * n
        buf, off = self._access("ld", space, ix, ex, addr, width, inst)
        if space == "shared" and self.async_copies is not None:
            self.async_copies.check(off, width, ix, inst, "load")
        view = self._view(buf, elem)
        e = off // elem.itemsize
        if self.initcheck and not (self._repeat and id(inst) in self._init_ok):
            # the bytes an instruction read in full last time (same threads, same
            # addresses) are still written: initialisation is never undone in a launch
            if self._written(space, inst, width, addr.size, off) or self._check_init(
                    space, ix, addr, e, elem.itemsize, n, inst):
                self._init_ok.add(id(inst))
        if self.access_tools:
            self._notify("ld", space, ix, off, width, inst)
        return view[e][:, None] if n == 1 else view[spans(e, n).reshape(-1, n)]

    def store(self, space: str, ix: Any, ex: Exec, addr: np.ndarray, vals: np.ndarray,
              inst: Instruction) -> None:
        addr = self._full(ix, addr)
        cnt = addr.shape[0]
        if vals.shape[0] != cnt:
            vals = np.broadcast_to(vals, (cnt, vals.shape[1]))
        if space == "generic":
            parts = self._split(ix, ex, addr)
            full = self._thread_ids(ix)
            for sp, six, sex, sa in parts:
                if six is ix:
                    self.store(sp, six, sex, sa, vals, inst)
                    return
                self.store(sp, six, sex, sa, vals[np.searchsorted(full, six)], inst)
            return
        elem = vals.dtype
        n = vals.shape[1]
        buf, off = self._access("st", space, ix, ex, addr, elem.itemsize * n, inst)
        if space == "shared" and self.async_copies is not None:
            self.async_copies.check(off, elem.itemsize * n, ix, inst, "store")
        view = self._view(buf, elem)
        e = off // elem.itemsize
        if self.access_tools:
            self.store_values = vals  # racecheck tells writes of the same value apart
            self._notify("st", space, ix, off, elem.itemsize * n, inst)
        if n == 1:
            view[e] = vals[:, 0]
        else:
            view[spans(e, n).reshape(-1, n)] = vals
        self._mark_init(space, e, elem.itemsize, n)

    def atomic(self, space: str, ix: Any, ex: Exec, addr: np.ndarray, op: str, t: PtxType,
               srcs: list[np.ndarray], inst: Instruction) -> np.ndarray:
        cnt = self.count(ix)
        addr = np.broadcast_to(np.asarray(addr, np.int64), (cnt,))
        srcs = [np.broadcast_to(s, (cnt,)) for s in srcs]
        if space == "generic":
            parts = self._split(ix, ex, addr)
            out = np.zeros(cnt, dtype=t.dtype)
            full = self._thread_ids(ix)
            for sp, six, sex, sa in parts:
                if six is ix:
                    return self.atomic(sp, six, sex, sa, op, t, srcs, inst)
                pos = np.searchsorted(full, six)
                out[pos] = self.atomic(sp, six, sex, sa, op, t, [s[pos] for s in srcs], inst)
            return out
        if space not in ("global", "shared"):
            raise UnsupportedPtxError(f"line {inst.line}: atomics on .{space}")
        buf, off = self._locate(space, ix, ex, addr, t.bytes, inst, "atom")
        if space == "shared" and self.async_copies is not None:
            self.async_copies.check(off, t.bytes, ix, inst, "atomic")
        if self.initcheck:
            self._check_init(space, ix, addr, off // t.bytes, t.bytes, 1, inst, "atom")
        if self.access_tools:
            self._notify("atom", space, ix, off, t.bytes, inst)
        if self.stats is not None:
            self.stats.atomic_requests += int(ex.mask.any(axis=1).sum())
        view = buf[: buf.size - buf.size % t.bytes].view(t.storage).view(t.dtype)
        e = off // t.bytes
        a = srcs[0].astype(t.dtype) if srcs else None
        if op == "add" and t.kind != "f":
            # integer add: order does not change the final value; the old values are
            # the running sums in thread order per address
            u = t.storage
            order = np.argsort(e, kind="stable")
            es = e[order]
            av = a.view(u) if a.ndim else np.asarray(a).astype(t.dtype).view(u)
            vs = av[order].astype(np.uint64)
            csum = np.cumsum(vs, dtype=np.uint64)
            starts = np.r_[0, np.flatnonzero(es[1:] != es[:-1]) + 1]
            grp = np.repeat(starts, np.diff(np.r_[starts, es.size]))
            before = csum - vs - np.where(grp > 0, csum[grp - 1], 0).astype(np.uint64)
            old_sorted = (view.view(u)[es].astype(np.uint64) + before).astype(u)
            old = np.empty_like(old_sorted)
            old[order] = old_sorted
            totals = np.add.reduceat(vs, starts) if es.size else vs
            uv = view.view(u)
            uv[es[starts]] = (uv[es[starts]].astype(np.uint64) + totals).astype(u)
            return old.view(t.dtype)
        # general case: lane by lane, in thread order
        old = np.empty(cnt, dtype=t.dtype)
        b = srcs[1].astype(t.dtype) if len(srcs) > 1 else None
        # PTX ISA 9.7.13.4 (atom): atom.add.f32 without .noftz flushes subnormal inputs
        # and results to sign-preserving zero on global memory (not on shared memory)
        ftz = (op == "add" and t.kind == "f" and t.bits == 32 and space == "global"
               and "noftz" not in inst.parts)
        with np.errstate(all="ignore"):
            for i in range(cnt):
                k = e[i]
                cur = view[k]
                old[i] = cur
                x = a[i]
                if isinstance(op, tuple):  # ("hadd", fn): 16-bit float add on raw bits
                    new = t.dtype.type(op[1](cur, x))
                elif op == "add" and ftz:
                    new = _ftz_scalar(_ftz_scalar(np.float32(cur)) + _ftz_scalar(np.float32(x)))
                elif op == "add":
                    new = (np.float32(cur) + np.float32(x)) if t.bits == 32 else cur + x
                elif op == "min":
                    new = _fminmax(cur, x, True) if t.kind == "f" else min(cur, x)
                elif op == "max":
                    new = _fminmax(cur, x, False) if t.kind == "f" else max(cur, x)
                elif op == "exch":
                    new = x
                elif op == "cas":
                    new = b[i] if cur == x else cur
                elif op == "and":
                    new = cur & x
                elif op == "or":
                    new = cur | x
                elif op == "xor":
                    new = cur ^ x
                elif op == "inc":  # ((cur >= x) ? 0 : cur + 1), unsigned
                    new = t.dtype.type(0) if cur >= x else t.dtype.type(int(cur) + 1)
                elif op == "dec":  # ((cur == 0) | (cur > x)) ? x : cur - 1
                    new = x if (cur == 0 or cur > x) else t.dtype.type(int(cur) - 1)
                else:  # pragma: no cover - filtered at compile time
                    raise AssertionError(op)
                view[k] = new
        return old


_KINDS = {"ld": "read", "st": "write", "atom": "atomic"}
_nz = np.count_nonzero  # how many lanes: cheaper than .any() / .all() on a warp's lanes
#: initcheck's fast path looks at a shared or local range of at most this many bytes
#: however few the bytes read in it (one slice of the shadow: cheaper than a gather)
_SCAN_BYTES = 1 << 16
#: written ranges initcheck keeps per space (the newest first)
_KNOWN_RANGES = 8
#: initcheck shadows are read through an unsigned view of each element's size: an
#: element is written when all its flag bytes are 1
_SHADOW_DTYPE = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32),
                 8: np.dtype(np.uint64)}
_SHADOW_ONES = {k: d.type(int.from_bytes(b"\x01" * k, "little"))
                for k, d in _SHADOW_DTYPE.items()}


def _ftz_scalar(x: np.float32) -> np.float32:
    # a float32 subnormal becomes a zero of the same sign
    return np.float32(np.copysign(np.float32(0.0), x)) if abs(x) < np.float32(2.0**-126) else x


def _fminmax(a: Any, b: Any, is_min: bool) -> Any:
    if np.isnan(a):
        return b
    if np.isnan(b):
        return a
    if a == b:
        return a if (np.signbit(a) == is_min) else b
    return min(a, b) if is_min else max(a, b)
