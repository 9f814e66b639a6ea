"""Warp execution: the SIMT stack, the warp scheduler, barriers and memory spaces.

Model (a documented choice: CUDA C++ Programming Guide, "SIMT Architecture", allows either;
pre-Volta reconvergence, with Volta's forward progress):
- **Pre-Volta SIMT stack.** Each warp has a stack of (pc, reconvergence pc, active mask)
  entries. At a branch where the active lanes disagree, the top entry's pc becomes the
  branch's immediate post-dominator ``r`` and one entry per path is pushed with
  reconvergence pc ``r`` (the fall-through path first, the taken path last, so the taken
  path runs first); a path that starts at ``r`` is not pushed, and when the top entry
  already reconverges at ``r`` it is replaced instead of kept, so a loop's divergent exit
  just shrinks the mask. An entry is popped when its pc reaches its reconvergence pc.
  Lanes that exit are removed from every entry; empty entries are popped.
- **Scheduling.** Among the warps that can run, those whose top entry has the *lowest*
  pc run next, all together: one instruction is executed for every such warp at once
  (NumPy over every active lane of those warps, across blocks). Warps therefore stay
  together as long as their program counters agree, which is what makes the interpreter
  fast. The order is a fixed function of the program and its inputs (deterministic).
- **Barriers.** ``bar.sync`` blocks the warp until every thread of its block (or the
  given thread count) has arrived; lanes arrive when the warp's active entry reaches it.
  When no warp can run but some wait at a barrier, the launch stops with a
  :class:`DeadlockError` (a barrier that exited or divergent threads can never reach:
  ``__syncthreads()`` in divergent code is undefined in CUDA, and is refused here).
  The launch option ``barrier_mode="warp"`` follows the hardware instead: a warp that
  reaches the barrier arrives with all its live threads (PTX ISA, ``bar``: barriers are
  executed on a per-warp basis), and threads that have exited count as arrived.
- Within one instruction, lanes act in thread order: for conflicting stores to one
  address the highest thread index wins; atomics apply lane by lane in thread order.
- **Independent thread scheduling** (``scheduling="independent"``, the default for
  sm_70 and later; CUDA C Programming Guide, "Independent Thread Scheduling"): on top
  of the stack and the lowest-pc order, a path that takes :data:`YIELD_AFTER` (64)
  uniform backward branches (counted since it last diverged or yielded) while other
  threads of its warp wait for it yields to them: the sibling paths of its divergent
  branch run in turn (the yielding path goes below them on the stack), or the threads
  waiting at the path's reconvergence point go on from there as a path of their own
  (the two then reconverge where the waiting entry would have).
  Likewise a warp that takes :data:`YIELD_AFTER` backward branches while other warps
  can run gives way to them until every runnable warp has given way. A spin lock thus
  completes (the holder of the lock gets to release it), and code that loops fewer
  than 64 times in a row behaves as under the plain stack. ``scheduling="lockstep"``
  is the pre-Volta model alone, under which such a kernel livelocks (reported as a
  LivelockError by :mod:`hardware.simt.progress`, or stopped at an explicit
  ``max_steps``).
- Registers, shared and local memory start at zero (on a GPU they start undefined);
  initcheck reports reading shared or local memory before it was written.
- **Sanitizer** (:mod:`hardware.simt.sanitizer`, ``launch(sanitize=...)``): every access
  is checked against the exact bounds of its allocation (global) or variable (shared,
  local), and per-byte shadows record which bytes were written; other tools see each
  access through :meth:`Wave._notify`. Static shared variables are laid out with an
  unallocated gap after each (see :func:`_shared_layout`), so that an overrun is
  reported rather than landing in the next variable.
- Blocks run in batches of at most ``module.MAX_THREADS_PER_WAVE`` threads, in block
  order; all blocks of a batch execute together.

This module holds the wave (registers, memory spaces, the compile context of the
instructions); the checks and statistics of each access are :mod:`hardware.simt.access`,
the launch's shapes :mod:`hardware.simt.launch_config`, and the run loop is
:class:`hardware.simt.scheduler.WarpScheduler` (:func:`~hardware.simt.scheduler.run_wave`).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .access import Exec, WaveMemory
from .cluster import SPECIAL_NAMES as _CLUSTER_NAMES, Cluster
from .errors import ExecutionError, MemoryAccessError, PtxSyntaxError, UnsupportedPtxError
from .instructions import Op, compile_instruction
from .isa.operands import getter
from .launch_config import LaunchConfig
from .memory import LOCAL_WINDOW, SHARED_WINDOW, GlobalMemory, spans
from .sanitizer import DEFAULT, Regions, Session
from .parser import Addr, Instruction, Reg, Sym
from .stats import LaunchStats, MemoryCounters
from .types import PtxType

__all__ = ["Wave", "Exec", "LaunchConfig"]


class Wave(WaveMemory):
    """A batch of blocks executed together; also the compile context of instructions."""

    def __init__(self, cfg: LaunchConfig | None, kernel: Any, block_ids: list[tuple[int, int, int]],
                 memory: GlobalMemory | None, params: bytes, stats: LaunchStats | None) -> None:
        self.kernel = kernel
        self.cfg = cfg
        self.memory = memory
        self.params = params if params else bytes(max(kernel.param_bytes, 8))
        self.stats = stats
        self.counters = MemoryCounters(stats) if stats is not None else None
        bx, by, bz = cfg.block if cfg else (32, 1, 1)
        tpb = bx * by * bz
        wpb = -(-tpb // 32)
        nb = len(block_ids)
        self.W = W = wpb * nb
        self.T = T = W * 32
        self.block_ids = block_ids
        self.warp_block = np.repeat(np.arange(nb, dtype=np.int64), wpb)
        slot = np.arange(T, dtype=np.int64)
        lin = (slot // 32 % wpb) * 32 + slot % 32        # linear thread id in block
        blk = slot // 32 // wpb
        self.exists = lin < tpb
        self.thread_block = blk
        self.thread_linear = lin
        self.regs: dict[str, np.ndarray] = {}
        for name, t in kernel.source.registers.items():
            self.regs[name] = np.zeros(T, dtype=t.storage)
        self.regs["%cc.cf"] = np.zeros(T, dtype=np.uint32)  # CC.CF of add.cc/addc/...
        tid = (lin % bx, lin // bx % by, lin // (bx * by))
        gx, gy, gz = cfg.grid if cfg else (1, 1, 1)
        bids = np.asarray(block_ids, dtype=np.int64).reshape(nb, 3)
        special = {
            "%tid.x": tid[0], "%tid.y": tid[1], "%tid.z": tid[2],
            "%ntid.x": bx, "%ntid.y": by, "%ntid.z": bz,
            "%ctaid.x": bids[blk, 0], "%ctaid.y": bids[blk, 1], "%ctaid.z": bids[blk, 2],
            "%nctaid.x": gx, "%nctaid.y": gy, "%nctaid.z": gz,
            "%laneid": slot % 32, "%warpid": slot // 32 % wpb, "%nwarpid": wpb,
            "%warpsize": 32,
            "%dynamic_smem_size": cfg.dynamic_shared if cfg else 0,
            "%total_smem_size": cfg.shared_bytes if cfg else kernel.static_shared_bytes,
        }
        self.cluster = Cluster(self, cfg.cluster if cfg else (1, 1, 1),
                               cfg.explicit_cluster if cfg else False, (gx, gy, gz))
        special.update(self.cluster.registers(bids, blk))
        lane = slot % 32
        special["%lanemask_eq"] = (np.int64(1) << lane)
        special["%lanemask_lt"] = (np.int64(1) << lane) - 1
        special["%lanemask_le"] = (np.int64(2) << lane) - 1
        special["%lanemask_gt"] = (~((np.int64(2) << lane) - 1)) & 0xFFFFFFFF
        special["%lanemask_ge"] = (~((np.int64(1) << lane) - 1)) & 0xFFFFFFFF
        for k, v in special.items():
            self.regs[k] = np.broadcast_to(np.asarray(v, dtype=np.int64), (T,)).astype(np.uint32)
        self.regs["%is_explicit_cluster"] = np.full(T, self.cluster.explicit, dtype=bool)
        self.shared_layout, self.shared_regions, sh = _shared_layout(
            kernel, cfg.dynamic_shared if cfg else 0)
        self.smem_size = sh
        self.smem = np.zeros(max(nb * sh, 16) + 16, dtype=np.uint8)
        self.sbase = blk * sh
        lb = cfg.local_bytes if cfg else kernel.local_bytes
        self.local_size = lb
        self.lmem = np.zeros(max(T * lb, 16) + 16, dtype=np.uint8)
        self.lbase = slot * lb
        # initcheck: per byte of shared and local memory, whether it was written
        self.sinit = np.zeros(self.smem.size, dtype=bool)
        self.linit = np.zeros(self.lmem.size, dtype=bool)
        self.local_regions = _local_regions(kernel)
        self.rows_all = slot.reshape(W, 32)
        self.cur: Exec | None = None
        self._memo: dict[int, Any] = {}
        self._repeat = False
        self._init_ok: set[int] = set()
        self._sparse: set[int] = set()
        #: per space (shared, local): byte ranges found written in full this launch
        self._known_init: dict[str, list[tuple[int, int]]] = {}
        #: (offsets, (lowest, highest)) of the last access located, for the tools
        self.off_bounds: tuple | None = None
        #: (offsets, offsets of the instruction's previous access, shift) when the
        #: last access located repeated that one shifted by a constant (the memo)
        self.off_shift: tuple | None = None
        self._views: dict[tuple, np.ndarray] = {}
        self.module_addrs: dict[str, int] = {}
        self.gpu = cfg.gpu if cfg else None
        self.async_copies: Any = None  # cp.async state (hardware.simt.async_copy)
        self.mbarriers: Any = None  # mbarrier objects (hardware.simt.mbarrier)
        #: the registers the compiled instructions hold (Wave.rebase rewrites only those)
        self.named: set[str] = set()
        self.ops: list[Op] = [compile_instruction(i, self) for i in kernel.source.instructions]
        self._all_ids: np.ndarray | None = None
        self._slice_ids: dict[tuple, np.ndarray] = {}
        self.attach(None)

    def attach(self, session: Session | None) -> None:
        """Use the sanitizer ``session`` of a launch (None: the default options, raising,
        without the registered tools)."""
        self.session = session if session is not None else \
            Session(DEFAULT, self.stats, bare=True)
        opts = self.session.options
        self.memcheck = opts.enabled("memcheck")
        self.initcheck = opts.enabled("initcheck")
        #: the registered tools of the launch (name -> instance), see .sanitizer
        self.tools: dict[str, Any] = self.session.tools
        #: those that look at memory accesses (a tool without them says
        #: ``wants_access = False``)
        self.access_tools = [t for t in self.tools.values()
                             if getattr(t, "wants_access", True)]

    def rebase(self, block_ids: list[tuple[int, int, int]]) -> None:
        """Run this compiled wave for other blocks of the same launch shape (as many as
        before): the block and cluster special registers are rewritten in place, so the
        compiled instructions, which hold the register arrays, read the new values."""
        if len(block_ids) != len(self.block_ids):
            raise ValueError(f"rebase needs {len(self.block_ids)} blocks, got {len(block_ids)}")
        self.block_ids = block_ids
        nb = len(block_ids)
        bids = np.asarray(block_ids, dtype=np.int64).reshape(nb, 3)
        blk = self.thread_block
        new = {"%ctaid.x": bids[blk, 0], "%ctaid.y": bids[blk, 1], "%ctaid.z": bids[blk, 2]}
        if not self.named.isdisjoint(_CLUSTER_NAMES):
            new.update(self.cluster.registers(bids, blk))
        T = self.T
        for k, v in new.items():
            if k not in self.named:
                continue  # no instruction reads it
            self.regs[k][:] = np.broadcast_to(np.asarray(v, dtype=np.int64), (T,)).astype(np.uint32)

    def reset(self, memory: GlobalMemory, params: bytes, stats: LaunchStats) -> None:
        """Prepare a compiled wave for another launch with the same blocks: registers,
        shared and local memory start at zero again (a deterministic choice: on a GPU
        they start undefined)."""
        self.memory = memory
        self.params = params if params else bytes(max(self.kernel.param_bytes, 8))
        self.stats = stats
        self.counters = MemoryCounters(stats)
        for name, arr in self.regs.items():
            if name not in _SPECIAL_NAMES:
                arr.fill(0)
        self.smem.fill(0)
        self.lmem.fill(0)
        self.sinit.fill(False)
        self.linit.fill(False)
        if self.async_copies is not None:
            self.async_copies.reset()
        if self.mbarriers is not None:
            self.mbarriers.reset()
        self.cluster.reset()
        self.cur = None
        self._memo = {}
        self._repeat = False  # the last access repeated its instruction's last one
        self._init_ok: set[int] = set()  # instructions whose last read was all written
        self._sparse: set[int] = set()  # instructions whose reads spread too far
        self._known_init = {}  # written ranges of shared / local memory
        self._views = {}

    # ------------------------------------------------------------ compile-time hooks
    def register(self, name: str, inst: Instruction, write: bool = False) -> np.ndarray:
        self.named.add(name)
        arr = self.regs.get(name)
        if arr is None:
            what = "special register" if name.split(".")[0] in (
                "%clock", "%clock64", "%smid", "%nsmid", "%gridid", "%globaltimer",
                "%pm0", "%envreg0") else "register"
            raise UnsupportedPtxError(f"line {inst.line}: {inst.text!r}: undeclared or "
                                      f"unsupported {what} {name}")
        if write and name.startswith("%") and name in _SPECIAL_NAMES:
            raise UnsupportedPtxError(f"line {inst.line}: {inst.text!r}: cannot write "
                                      f"special register {name}")
        return arr

    def register_or_const(self, op: Any, t: PtxType, inst: Instruction) -> np.ndarray:
        if isinstance(op, Reg):
            arr = self.register(op.name, inst)
            if arr.dtype.itemsize * 8 != t.bits:
                raise UnsupportedPtxError(f"line {inst.line}: {inst.text!r}: {op.name} "
                                          f"is not {t.bits} bits")
            return arr.view(t.storage)
        v = getter(op, t, self, inst)(slice(None))
        return np.full(self.T, v, dtype=t.storage)

    def symbol(self, name: str, inst: Instruction) -> tuple[str, int]:
        k = self.kernel
        if name in self.shared_layout:
            return "shared", self.shared_layout[name]
        if name in k.local_offsets:
            return "local", k.local_offsets[name]
        if name in k.param_index:
            return "param", k.param_index[name].offset
        if name in k.module_globals:
            return k.module_globals[name].space, -1  # placed at launch: module_symbol()
        raise UnsupportedPtxError(f"line {inst.line}: {inst.text!r}: unknown symbol {name}")

    def module_symbol(self, name: str) -> int:
        """Address of a module .global/.const variable in this launch's memory."""
        return self.module_addrs[name]

    def window(self, space: str) -> int:
        return {"global": 0, "const": 0, "shared": SHARED_WINDOW, "local": LOCAL_WINDOW}[space]

    def label(self, name: str, inst: Instruction) -> int:
        labels = self.kernel.source.labels
        if name not in labels:
            raise PtxSyntaxError(f"line {inst.line}: {inst.text!r}: undefined label {name}")
        return labels[name]

    def param_reader(self, op: Any, t: PtxType, n: int, inst: Instruction) -> Any:
        """A function returning the ``n`` values of ``ld.param`` from this launch's
        parameter bytes (read when executed, so a compiled wave can be relaunched)."""
        if isinstance(op, Addr) and isinstance(op.base, Reg):
            return self._param_register_reader(op, t, n, inst)
        if not isinstance(op, Addr) or not isinstance(op.base, Sym):
            raise UnsupportedPtxError(f"line {inst.line}: {inst.text!r}: ld.param needs "
                                      "[param_name+offset] or [register+offset]")
        sp, off = self.symbol(op.base.name, inst)
        if sp != "param":
            raise UnsupportedPtxError(f"line {inst.line}: {inst.text!r}: {op.base.name} "
                                      "is not a kernel parameter")
        start = off + op.offset
        p = self.kernel.param_index[op.base.name]
        if op.offset < 0 or op.offset + n * t.bytes > p.nbytes:
            raise UnsupportedPtxError(f"line {inst.line}: {inst.text!r}: reads past "
                                      f"parameter {op.base.name} ({p.nbytes} bytes)")
        dt = t.storage
        size = t.bytes

        def read() -> list[Any]:
            raw = np.frombuffer(self.params, dtype=np.uint8, count=start + n * size)
            return [raw[start + k * size: start + (k + 1) * size].view(dt)[0].view(t.dtype)
                    for k in range(n)]
        return read

    def _param_register_reader(self, op: Addr, t: PtxType, n: int, inst: Instruction) -> Any:
        """``ld.param`` through a register holding a .param address (PTX ISA 5.1.6.1:
        ``mov`` of a kernel parameter's name gives its address in the .param space,
        here its byte offset in the parameter buffer): a function of ``ix`` returning
        the ``n`` values of each thread; an address outside the parameters faults."""
        reg = self.register(op.base.name, inst)
        size, dt = t.bytes, t.storage
        total = self.kernel.param_bytes

        def read(ix: Any) -> list[Any]:
            a = reg[ix].astype(np.int64) + op.offset
            if a.size and (int(a.min()) < 0 or int(a.max()) + n * size > total
                           or (a % size).any()):
                bad = (a < 0) | (a + n * size > total) | (a % size != 0)
                k = int(np.argmax(bad))
                thread = int(self._thread_ids(ix)[k])
                raise MemoryAccessError(
                    f"{self._where(thread, inst)}: .param address {int(a[k]):#x} is "
                    f"misaligned or outside the {total} bytes of kernel parameters")
            raw = np.frombuffer(self.params, dtype=np.uint8)
            return [raw[(a + k * size)[:, None] + np.arange(size)].copy().view(dt)[:, 0]
                    .view(t.dtype) for k in range(n)]
        read.per_thread = True  # type: ignore[attr-defined]
        return read

    def count(self, ix: Any) -> int:
        return self.T if isinstance(ix, slice) else len(ix)

    def _thread_ids(self, ix: Any) -> np.ndarray:
        """The thread indices ``ix`` selects (``ix`` is a slice of all or an index array)."""
        if not isinstance(ix, slice):
            return ix
        ids = self._all_ids
        if ids is None or ids.size != self.T:
            ids = self._all_ids = np.arange(self.T)
            ids.flags.writeable = False
            self._slice_ids = {}
        key = (ix.start, ix.stop, ix.step)
        sel = self._slice_ids.get(key)
        if sel is None:
            # one array per slice (a view, read-only): the tools key their memos on it
            sel = self._slice_ids[key] = ids[ix]
        return sel

    # ------------------------------------------------------------ error reporting
    def _where(self, thread: int, inst: Instruction | None) -> str:
        b = self.block_ids[int(self.thread_block[thread])]
        lin = int(self.thread_linear[thread])
        bx, by, _ = self.cfg.block
        t = (lin % bx, lin // bx % by, lin // (bx * by))
        if inst is None:
            return f"kernel {self.kernel.name}, block {tuple(b)}, thread {t}"
        return (f"kernel {self.kernel.name}, block {tuple(b)}, thread {t}, "
                f"line {inst.line} ({inst.text!r})")

    def location(self, thread: int, inst: Instruction | None) -> str:
        """"kernel K, block B, thread T[, line L (text)]" of a thread slot of this wave."""
        return self._where(thread, inst)

    def shared_offsets(self, ix: Any, ex: Exec, addr: Any, width: int,
                       inst: Instruction) -> np.ndarray:
        """Byte offsets into this wave's shared memory of a ``width``-byte .shared store
        at ``addr`` (checked, and counted in the statistics)."""
        addr = self._full(ix, addr)
        off = self._access("st", "shared", ix, ex, addr, width, inst)[1]
        if off.size:
            self.sinit[spans(off, width)] = True
        if self.access_tools:
            self._notify("st", "shared", ix, off, width, inst)
        return off

    def fault_here(self, inst: Instruction, msg: str) -> None:
        ex = self.cur
        thread = int(ex.rows[ex.mask][0]) if ex is not None and ex.mask.any() else 0
        raise ExecutionError(f"{self._where(thread, inst)}: {msg}")

    def warn_collective(self, inst: Instruction, ex: Exec, bad: np.ndarray, msg: str) -> None:
        if "synccheck" in self.tools:  # a synccheck hazard (hardware.simt.synccheck)
            return self.tools["synccheck"].bad_source(self, ex, inst, bad, msg)
        thread = int(ex.rows[bad][0])
        w = f"{self._where(thread, inst)}: {msg}"
        if self.stats is not None and len(self.stats.warnings) < 100:
            self.stats.warnings.append(w)

    def _mem_fault(self, ix: Any, pos: int, addr: int, inst: Instruction, why: str) -> None:
        thread = pos if isinstance(ix, slice) else int(ix[pos])
        raise MemoryAccessError(f"{self._where(thread, inst)}: {why} at address {addr:#x}")


_GAP = 256  # least gap after each shared variable (see _shared_layout)


def _declarations(kernel: Any) -> dict[str, Any]:
    owner = getattr(kernel.module_key, "source", None)
    return {v.name: v for v in list(getattr(owner, "variables", [])) + kernel.source.variables}


def _shared_layout(kernel: Any, dynamic: int) -> tuple[dict[str, int], Regions, int]:
    """Where this interpreter places the .shared variables of ``kernel`` in a block's
    shared memory: ``(offsets, regions, bytes)``. Each static variable (in the order of
    ``kernel.shared_offsets``), then the dynamic region, is followed by an unallocated
    gap as large as itself (at least 256 bytes), so that an index past a variable's end
    by up to its own size is caught by memcheck instead of landing in the next one.
    Only addresses change: ``%total_smem_size`` and the launch limits count the
    variables' own bytes."""
    decls = _declarations(kernel)
    offsets: dict[str, int] = {}
    regions: list[tuple[int, int, str]] = []
    off, externs, dyn_align = 0, [], 16
    for name in sorted(kernel.shared_offsets, key=kernel.shared_offsets.get):
        v = decls.get(name)
        if v is None or v.extern:
            externs.append(name)
            dyn_align = max(dyn_align, v.align if v is not None else 16)
            continue
        off = -(-off // v.align) * v.align
        offsets[name] = off
        regions.append((off, off + v.nbytes, name))
        off += v.nbytes + max(v.nbytes, _GAP)
    off = -(-off // dyn_align) * dyn_align
    for name in externs:
        offsets[name] = off
    if dynamic:
        regions.append((off, off + dynamic, "/".join(externs) or "dynamic shared memory"))
        off += dynamic + max(dynamic, _GAP)
    return offsets, Regions("shared", regions), off


def _local_regions(kernel: Any) -> Regions:
    """The .local variables of ``kernel``, as memcheck bounds them."""
    decls = _declarations(kernel)
    return Regions("local", [(off, off + decls[name].nbytes, name)
                             for name, off in kernel.local_offsets.items() if name in decls])


_SPECIAL_NAMES = frozenset([
    "%tid.x", "%tid.y", "%tid.z", "%ntid.x", "%ntid.y", "%ntid.z", "%ctaid.x",
    "%ctaid.y", "%ctaid.z", "%nctaid.x", "%nctaid.y", "%nctaid.z", "%laneid", "%warpid",
    "%nwarpid", "%warpsize", "%lanemask_eq", "%lanemask_lt", "%lanemask_le",
    "%lanemask_gt", "%lanemask_ge", "%dynamic_smem_size", "%total_smem_size",
    *_CLUSTER_NAMES])
