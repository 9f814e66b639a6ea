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
  is the pre-Volta model alone, under which such a kernel livelocks until
  ``max_steps``.
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

This module holds the wave (registers, memory spaces, checks and statistics of each
access); the run loop is :class:`hardware.simt.scheduler.WarpScheduler`
(:func:`run_wave`).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .cluster import SPECIAL_NAMES as _CLUSTER_NAMES, UNIT as _DSMEM, Cluster
from .errors import ExecutionError, MemoryAccessError, PtxSyntaxError, UnsupportedPtxError
from .instructions import Op, compile_instruction
from .isa.operands import getter
from .memory import LOCAL_WINDOW, SHARED_WINDOW, UNALLOCATED, WINDOW_SIZE, GlobalMemory
from .sanitizer import DEFAULT, TOOL_ERRORS, Access, Regions, Report, Session
from .parser import Addr, Instruction, Reg, Sym
from .stats import LaunchStats, MemoryCounters
from .types import PtxType

__all__ = ["Wave", "Exec", "LaunchConfig"]

_AR32 = np.arange(32, dtype=np.int64)
_RUN, _WAIT, _DONE = 0, 1, 2
_BIG = 1 << 60


class LaunchConfig:
    """Grid, block and the kernel's memory layout for one launch."""

    def __init__(self, kernel: Any, grid: tuple[int, int, int], block: tuple[int, int, int],
                 dynamic_shared: int, gpu: str | None = None) -> None:
        self.kernel = kernel
        self.gpu = gpu  # the tensor-core model of mma (see hardware.simt.matrix)
        self.grid = grid
        self.block = block
        self.threads_per_block = block[0] * block[1] * block[2]
        self.warps_per_block = -(-self.threads_per_block // 32)
        self.dynamic_shared = dynamic_shared
        self.shared_bytes = kernel.static_shared_bytes + dynamic_shared
        self.local_bytes = kernel.local_bytes
        #: the cluster shape and whether the launch gave one (hardware.simt.cluster)
        self.cluster: tuple[int, int, int] = (1, 1, 1)
        self.explicit_cluster = False


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


class Wave:
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
        self._memo: dict[int, tuple] = {}
        self._repeat = False
        self._init_ok: set[int] = set()
        self._sparse: set[int] = set()
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
        self._views = {}

    # ------------------------------------------------------------ compile-time hooks
    def register(self, name: str, inst: Instruction, write: bool = False) -> np.ndarray:
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
            self.sinit[off[:, None] + np.arange(width)] = True
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
        threads = self._thread_ids(ix)
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
        got = sv[e] if n == 1 else sv[e[:, None] + np.arange(n)]
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
        if not count or id(inst) in self._sparse:
            return False
        if space == "global":
            memo = self._memo.get(id(inst))
            if memo is None:
                return False
            lo, end = memo[5], memo[6] + width
        else:
            ob = self.off_bounds
            if ob is None or ob[0] is not off or space not in ("shared", "local"):
                return False
            lo, end = ob[1][0], ob[1][1] + width
        if end - lo > 4 * width * count:
            self._sparse.add(id(inst))  # a spread pattern: not tried again this launch
            return False
        if space == "global":
            return self.memory.written(lo, end)
        return bool((self.sinit if space == "shared" else self.linit)[lo:end].all())

    def _mark_init(self, space: str, e: np.ndarray, isz: int, n: int) -> None:
        sv = self._view(self._shadow(space), _SHADOW_DTYPE[isz])
        if n == 1:
            sv[e] = _SHADOW_ONES[isz]
        else:
            sv[e[:, None] + np.arange(n)] = _SHADOW_ONES[isz]

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
        memo = self._memo.get(id(inst))
        if memo is not None and addr.size:
            m_ix, m_addr, m_space, m_deltas, m_off, m_lo, m_hi, m_kind, m_width, m_ob = memo
            if m_space == space and m_kind == kind and m_width == width and \
                    addr.shape == m_addr.shape and (
                    ix is m_ix or (isinstance(ix, slice) and isinstance(m_ix, slice)) or (
                    not isinstance(ix, slice) and not isinstance(m_ix, slice)
                    and ix.shape == m_ix.shape and bool((ix == m_ix).all()))):
                d0 = int(addr[0]) - int(m_addr[0])
                if d0 == 0:
                    hit = bool((addr == m_addr).all())
                else:
                    hit = (d0 % width == 0 and self._shift_keeps_stats(space, d0)
                           and bool((addr - m_addr == d0).all())
                           and self._in_bounds(space, m_lo + d0, m_hi + d0 + width))
                if hit:
                    if self.counters is not None:
                        self.counters.apply(m_deltas)
                    buf = self.memory.buffer if space in ("global", "const") else (
                        self.smem if space == "shared" else self.lmem)
                    if d0:
                        old_off = m_off
                        m_off = m_off + d0
                        if self.access_tools:
                            # these offsets are the last ones of the instruction + d0
                            self.off_shift = (m_off, old_off, d0)
                        if m_ob is not None:
                            m_ob = (m_ob[0] + d0, m_ob[1] + d0)
                        self._memo[id(inst)] = (ix, addr.copy(), space, m_deltas, m_off,
                                                m_lo + d0, m_hi + d0, kind, width, m_ob)
                    if m_ob is not None:
                        self.off_bounds = (m_off, m_ob)
                    self._repeat = not d0
                    return buf, m_off
        buf, off = self._locate(space, ix, ex, addr, width, inst, kind)
        deltas = self._record(kind, space, ix, ex, addr, width)
        if addr.size:
            ob = None
            if self.access_tools:
                # the offsets' bounds, for the tools (racecheck's read log)
                ob = (int(off.min()), int(off.max()))
                self.off_bounds = (off, ob)
            self._memo[id(inst)] = (ix, addr.copy(), space, deltas, off, int(addr.min()),
                                    int(addr.max()), kind, width, ob)
        return buf, off

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
        return view[e][:, None] if n == 1 else view[e[:, None] + np.arange(n)]

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
            view[e[:, None] + np.arange(n)] = vals
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
_GAP = 256  # least gap after each shared variable (see _shared_layout)
#: initcheck shadows are read through an unsigned view of each element's size: an
#: element is written when all its flag bytes are 1
_SHADOW_DTYPE = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32),
                 8: np.dtype(np.uint64)}
_SHADOW_ONES = {k: d.type(int.from_bytes(b"\x01" * k, "little"))
                for k, d in _SHADOW_DTYPE.items()}


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


_SPECIAL_NAMES = frozenset([
    "%tid.x", "%tid.y", "%tid.z", "%ntid.x", "%ntid.y", "%ntid.z", "%ctaid.x",
    "%ctaid.y", "%ctaid.z", "%nctaid.x", "%nctaid.y", "%nctaid.z", "%laneid", "%warpid",
    "%nwarpid", "%warpsize", "%lanemask_eq", "%lanemask_lt", "%lanemask_le",
    "%lanemask_gt", "%lanemask_ge", "%dynamic_smem_size", "%total_smem_size",
    *_CLUSTER_NAMES])


# the run loop lives in .scheduler; importable from here as before
from .scheduler import BARRIER_MODES, SCHEDULING_MODES, YIELD_AFTER, run_wave  # noqa: E402,F401
