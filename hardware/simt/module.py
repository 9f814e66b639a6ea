"""Modules and kernels: ``load_ptx(text) -> Module`` and ``Module.launch``."""
from __future__ import annotations

import math
import re
import time
from functools import lru_cache
from typing import Any, Sequence

import numpy as np

from refimpl.matmul import presets

from .. import specs
from .cfg import reconvergence_points
from .cluster import block_ids as _cluster_block_ids, launch_cluster
from .workers import run_chunks, run_task
from .errors import LaunchBudgetError, LaunchError, PtxSyntaxError, UnsupportedPtxError
from .executor import Wave
from .inline import inline_calls
from .launch_config import LaunchConfig, dim3 as _dim3, is_int as _is_int
from .memory import GlobalMemory
from .ptx_rules import check_module
from .parser import (MAX_VARIABLE_BYTES, KernelSource, ModuleSource, Param, Reg, Sym,
                     parse_ptx)
from .sanitizer import Session, parse_sanitize
from .scheduler import BARRIER_MODES, SCHEDULING_MODES, run_wave
from .stats import LaunchStats
from .tmem import check_released

__all__ = ["Kernel", "Module", "load_ptx", "DEFAULT_MAX_STEPS", "DEFAULT_MAX_INSTRUCTIONS",
           "MAX_THREADS_PER_WAVE",
           "DEFAULT_GPU", "known_gpus"]

#: default bound on the instructions one warp may execute in a launch
DEFAULT_MAX_STEPS = None  # no per-warp bound: progress detection (hardware.simt.progress)
#: default bound on the warp instructions a whole launch may execute (at the
#: interpreter's 0.3-2 M warp instructions per second, one to six minutes)
DEFAULT_MAX_INSTRUCTIONS = 100_000_000
#: blocks are executed in batches of at most this many threads (memory bound only)
MAX_THREADS_PER_WAVE = 1 << 17
#: and of at most this many bytes of registers and local memory (at least one block)
MAX_WAVE_BYTES = 1 << 30
#: the GPU whose tensor-core model ``mma``/``wmma`` use unless ``launch(gpu=...)`` says
DEFAULT_GPU = "H100"
_SUPPORTED_TARGETS = ("sm_80", "sm_86", "sm_89", "sm_90", "sm_90a", "sm_100", "sm_120",
                      "sm_70", "sm_75", "sm_100a", "sm_120a")


class Kernel:
    """One ``.entry`` of a module, validated and ready to launch."""

    def __init__(self, source: KernelSource, module_vars: list, module_key: object = None) -> None:
        self.source = source
        self.module_key = module_key if module_key is not None else self
        self.name = source.name
        self.params: list[Param] = source.params
        self.param_index = {p.name: p for p in source.params}
        self.param_bytes = (source.params[-1].offset + source.params[-1].nbytes
                            if source.params else 0)
        # shared variables: module-level ones first, then the kernel's, each aligned;
        # the .extern (dynamic) array starts after all static ones
        self.shared_offsets: dict[str, int] = {}
        off = 0
        externs = []
        #: module-level .global/.const variables, placed in each GlobalMemory at launch
        self.module_globals = {v.name: v for v in module_vars if v.space in ("global", "const")}
        for v in [v for v in list(module_vars) + source.variables if v.space == "shared"]:
            if v.extern:
                externs.append(v)
                continue
            off = -(-off // v.align) * v.align
            self.shared_offsets[v.name] = off
            off += v.nbytes
        if off > MAX_VARIABLE_BYTES["shared"]:
            raise UnsupportedPtxError(
                f"line {source.line}: kernel {source.name} uses {off} bytes of static "
                f"shared memory, more than the {MAX_VARIABLE_BYTES['shared']} a block may "
                "have (larger arrays must be dynamic: extern __shared__)")
        dyn_align = max([v.align for v in externs] + [16])
        off_dyn = -(-off // dyn_align) * dyn_align if externs else off
        for v in externs:
            self.shared_offsets[v.name] = off_dyn
        self.static_shared_bytes = off_dyn
        self.local_offsets: dict[str, int] = {}
        loff = 0
        for v in source.variables:
            if v.space == "local":
                loff = -(-loff // v.align) * v.align
                self.local_offsets[v.name] = loff
                loff += v.nbytes
        self.local_bytes = -(-loff // 16) * 16
        if self.local_bytes > MAX_VARIABLE_BYTES["local"]:
            raise UnsupportedPtxError(
                f"line {source.line}: kernel {source.name} uses {self.local_bytes} bytes of "
                f"local memory per thread, more than {MAX_VARIABLE_BYTES['local']}")
        #: bytes each thread holds in a wave (registers and local memory): bounds how
        #: many threads run together
        self.thread_bytes = self.local_bytes + sum(t.storage.itemsize
                                                   for t in source.registers.values())
        d = source.directives
        #: the block-size bounds of .maxntid / .reqntid (PTX ISA 11.4.2-3), if any
        self.maxntid = d.get("maxntid") or None
        self.reqntid = d.get("reqntid") or None
        for inst in source.instructions:
            if inst.parts[0] == "brx":
                _check_brx(inst, source)
                continue
            if inst.parts[0] != "bra":
                continue
            if len(inst.operands) != 1 or not isinstance(inst.operands[0], Sym):
                raise UnsupportedPtxError(f"line {inst.line}: {inst.text!r}: bra needs a "
                                          "label (indirect branches are not supported)")
            if inst.operands[0].name not in source.labels:
                raise PtxSyntaxError(f"line {inst.line}: {inst.text!r}: undefined label "
                                     f"{inst.operands[0].name}")
        self.reconvergence = reconvergence_points(source.instructions, source.labels,
                                                  source.branch_tables)
        # compile once on a one-warp launch: every unsupported construct fails here
        Wave(None, self, [(0, 0, 0)], None, b"", None)
        self._waves: dict[tuple, Wave] = {}

    def wave(self, cfg: LaunchConfig, blocks: list, memory: GlobalMemory, params: bytes,
             stats: LaunchStats) -> Wave:
        """A compiled wave for ``blocks`` (reused across launches of the same shape:
        compiling every instruction costs as much as running a small kernel)."""
        # one compiled wave per launch shape: the waves of a grid differ only in their
        # block ids, which Wave.rebase rewrites (a grid of many waves compiles once)
        key = (cfg.grid, cfg.block, cfg.dynamic_shared, len(blocks), cfg.gpu,
               cfg.cluster, cfg.explicit_cluster)
        w = self._waves.get(key)
        if w is None:
            w = Wave(cfg, self, blocks, memory, params, stats)
            if len(self._waves) >= 4:
                self._waves.pop(next(iter(self._waves)))
            self._waves[key] = w
        else:
            w.reset(memory, params, stats)
            if w.block_ids != blocks:
                w.rebase(blocks)
        w.module_addrs = memory.module_variables(self.module_key, self.module_globals)
        return w

    def __repr__(self) -> str:
        ps = ", ".join(f".{p.type.name} {p.name}" for p in self.params)
        return f"Kernel({self.name}({ps}), {len(self.source.instructions)} instructions)"

    # ---------------------------------------------------------------- arguments
    def pack_args(self, args: Sequence[Any]) -> bytes:
        """Lay out ``args`` as the ``.param`` space (PTX ISA 5.1.6.1, kernel parameters)."""
        if not isinstance(args, (list, tuple)):
            raise LaunchError(f"args of kernel {self.name} must be a list or tuple of "
                              f"{len(self.params)} values, got {type(args).__name__}")
        if len(args) != len(self.params):
            raise LaunchError(f"kernel {self.name} takes {len(self.params)} arguments "
                              f"({', '.join('.' + p.type.name for p in self.params)}), "
                              f"got {len(args)}")
        buf = bytearray(self.param_bytes)
        for i, (p, a) in enumerate(zip(self.params, args)):
            t = p.type
            if p.nbytes != t.bytes:
                # a by-value aggregate (struct): its bytes, as the host lays them out
                if isinstance(a, np.ndarray):
                    a = np.ascontiguousarray(a).tobytes()
                if not isinstance(a, (bytes, bytearray)) or len(a) != p.nbytes:
                    raise LaunchError(f"argument {i} of {self.name} is a {p.nbytes}-byte "
                                      "aggregate: pass bytes or a NumPy array of exactly "
                                      f"{p.nbytes} bytes")
                buf[p.offset: p.offset + p.nbytes] = bytes(a)
                continue
            if t.kind == "f":
                if isinstance(a, bool) or not isinstance(a, (int, float, np.floating, np.integer)):
                    raise LaunchError(f"argument {i} of {self.name} (.{t.name}) must be a "
                                      f"float, got {type(a).__name__}")
                if t.bits == 16:
                    raise LaunchError(f"argument {i}: .f16 parameters are not supported")
                raw = _float_arg(a, t, i, self.name)
            else:
                if isinstance(a, bool) or not isinstance(a, (int, np.integer)):
                    raise LaunchError(f"argument {i} of {self.name} (.{t.name}) must be an "
                                      f"int, got {type(a).__name__}")
                v = int(a)
                lo = -(1 << (t.bits - 1)) if t.kind == "s" else -(1 << (t.bits - 1))
                hi = (1 << t.bits) - 1
                if not lo <= v <= hi:
                    shown = str(v) if len(str(v)) <= 40 else str(v)[:37] + "..."
                    raise LaunchError(f"argument {i} of {self.name} (.{t.name}) = {shown} "
                                      f"does not fit {t.bits} bits (-2**{t.bits - 1} to "
                                      f"2**{t.bits} - 1; a negative value is stored in two's "
                                      "complement)")
                raw = (v % (1 << t.bits)).to_bytes(t.bytes, "little")
            buf[p.offset: p.offset + t.bytes] = raw
        return bytes(buf)


def _check_brx(inst: Any, source: KernelSource) -> None:
    """brx.idx{.uni} index, tlist (PTX ISA 9.7.12.2): a register index and the label of a
    ``.branchtargets`` list of labels of the kernel."""
    ops = inst.operands
    if inst.parts[1:] not in (("idx",), ("idx", "uni")) or len(ops) != 2 or \
            not isinstance(ops[0], Reg) or not isinstance(ops[1], Sym):
        raise UnsupportedPtxError(f"line {inst.line}: {inst.text!r}: brx.idx{{.uni}} takes "
                                  "an index register and a .branchtargets label")
    targets = source.branch_tables.get(ops[1].name)
    if targets is None:
        raise PtxSyntaxError(f"line {inst.line}: {inst.text!r}: {ops[1].name} is not the "
                             "label of a .branchtargets list")
    missing = [t for t in targets if t not in source.labels]
    if missing:
        raise PtxSyntaxError(f"line {inst.line}: {inst.text!r}: undefined label "
                             f"{missing[0]} in {ops[1].name}")


def _float_arg(a: Any, t: Any, i: int, kernel: str) -> bytes:
    """The bytes of a float argument: rounded to nearest like a C conversion, but a
    finite value the parameter's type cannot hold (it would become an infinity) is
    refused."""
    try:
        with np.errstate(over="ignore"):
            v = np.asarray(a, dtype=t.dtype)
        finite = math.isfinite(float(a))
    except OverflowError:
        v, finite = np.asarray(np.inf, dtype=t.dtype), True
    if finite and not np.isfinite(v):
        shown = repr(a) if len(repr(a)) <= 40 else repr(a)[:37] + "..."
        raise LaunchError(f"argument {i} of {kernel} (.{t.name}) = {shown} is beyond the "
                          f"largest finite .{t.name}")
    return v.tobytes()


@lru_cache(maxsize=1)
def known_gpus() -> tuple[str, ...]:
    """The NVIDIA GPUs ``launch(gpu=...)`` accepts: those of :mod:`hardware.specs` and
    those with a tensor-core preset (or alias) in :mod:`refimpl.matmul.presets`."""
    names = {n for n in specs.names() if specs.get(n).vendor == "NVIDIA"}
    names |= {p.gpu for p in presets.PRESETS.values() if not p.gpu.startswith("MI")}
    names |= {a.split("-", 1)[0] for a in presets.ALIASES if not a.startswith("MI")}
    return tuple(sorted(names))


class Module:
    """A loaded PTX module: ``kernels`` maps entry names to :class:`Kernel`."""

    def __init__(self, source: ModuleSource) -> None:
        self.source = source
        self.version = source.version
        self.target = source.target
        #: "independent" for sm_70 and later targets (PTX ISA 9.7.12, "independent
        #: thread scheduling"), else "lockstep"
        arch = source.target.split(",")[0].strip()
        num = int(re.sub(r"\D", "", arch) or 0) if arch.startswith("sm_") else 0
        self.default_scheduling = "independent" if (num >= 70 or not arch) else "lockstep"
        self.kernels: dict[str, Kernel] = {
            name: Kernel(k, source.variables, self) for name, k in source.kernels.items()}
        self.variables = {v.name: v for v in source.variables if v.space in ("global", "const")}

    def symbol_address(self, name: str, memory: GlobalMemory) -> int:
        """Address of the module's ``.global``/``.const`` variable ``name`` in ``memory``
        (``cudaGetSymbolAddress``): write it before a launch to set ``__constant__`` data.
        The variables are allocated and initialised in a memory on first use."""
        if not isinstance(memory, GlobalMemory):
            raise LaunchError(f"memory must be a GlobalMemory, got {type(memory).__name__}")
        if not isinstance(name, str) or name not in self.variables:
            raise LaunchError(f"no .global/.const variable named {name!r}; this module has "
                              f"{', '.join(self.variables) or 'none'}")
        return memory.module_variables(self, self.variables)[name]

    def __repr__(self) -> str:
        return f"Module(target={self.target!r}, kernels={list(self.kernels)})"

    def __getitem__(self, name: str) -> Kernel:
        return self.kernel(name)

    def kernel(self, name: str) -> Kernel:
        if not isinstance(name, str) or name not in self.kernels:
            raise LaunchError(f"no kernel named {name!r}; this module has "
                              f"{', '.join(self.kernels) or 'no kernels'}")
        return self.kernels[name]

    def launch(self, name: str, grid: Any, block: Any, args: Sequence[Any],
               memory: GlobalMemory, dynamic_shared: int = 0,
               max_steps: int | None = DEFAULT_MAX_STEPS,
               barrier_mode: str = "strict", gpu: str = DEFAULT_GPU,
               scheduling: str | None = None, sanitize: Any = None,
               max_instructions: int | None = DEFAULT_MAX_INSTRUCTIONS,
               time_limit: float | None = None, cluster: Any = None,
               non_portable_cluster: bool = False, workers: Any = None,
               _block_range: tuple[int, int] | None = None) -> LaunchStats:
        """Run kernel ``name`` on a ``grid`` of ``block``-sized thread blocks.

        Args:
            name: the ``.entry`` name (``extern "C"`` kernels keep their C name).
            grid, block: int or 1-3 tuple (x, y, z), as ``<<<grid, block>>>``.
            args: one Python int (pointers, integers) or float per ``.param``.
            memory: the :class:`GlobalMemory` the pointers refer to.
            dynamic_shared: bytes of ``extern __shared__`` memory per block.
            max_steps: bound on the instructions each warp executes (a spinning warp
                is stopped after that many of its own instructions, however many
                other warps run); exceeding it raises StepLimitError naming the warp.
                Default None: no per-warp bound; a wave whose warps stop changing
                anything (registers, shared, local and global memory, barriers) stops
                the launch with LivelockError naming the spinning warps
                (:mod:`hardware.simt.progress`), so no correct kernel is stopped for
                running long.
            barrier_mode: "strict" (default): ``bar.sync`` waits until every thread of
                the block has itself arrived, so a barrier in divergent code or after
                an early ``return`` is a DeadlockError (undefined in CUDA). "warp": a
                warp reaching the barrier arrives with all its live threads and exited
                threads count as arrived (the per-warp hardware behaviour that kernels
                with an early ``return`` before ``__syncthreads()`` rely on).
            gpu: the GPU (one of :func:`known_gpus`, default ``DEFAULT_GPU`` = "H100")
                whose tensor-core model floating-point ``mma``/``wmma.mma`` use: the
                ``refimpl.matmul`` preset "<gpu>-<format>" (see
                :mod:`hardware.simt.matrix`); a kernel with an mma the GPU has no preset
                for is refused with a LaunchError.
            scheduling: "independent" (the default for sm_70 and later PTX, which is
                every target this interpreter accepts): independent thread scheduling,
                under which a path of a warp (or a warp) that keeps looping while other
                threads wait for it yields to them, so that spin locks complete (policy
                in :mod:`hardware.simt.executor`); "lockstep": the pre-Volta SIMT stack
                alone, under which they livelock.
            sanitize: the sanitizer's tools (memcheck, racecheck, initcheck,
                synccheck) and whether their hazards raise or become
                ``LaunchStats.warnings``; default None = every tool, raising (table of
                values in :mod:`hardware.simt.sanitizer`).

            max_instructions: bound on the warp instructions of the whole launch
                (default ``DEFAULT_MAX_INSTRUCTIONS`` = 10^8; None: no bound). A grid
                whose warps alone exceed it (each warp executes at least one
                instruction) is refused before anything runs; otherwise the count is
                checked while each wave of blocks runs (a wave holds at most
                ``MAX_THREADS_PER_WAVE`` threads) and after it. Exceeding it raises LaunchBudgetError.
            time_limit: bound in seconds on the launch's wall time, checked after
                each wave (default None: none, so that whether a launch completes
                never depends on the machine); exceeding it raises LaunchBudgetError.
            cluster: the thread-block cluster shape (int or 1-3 tuple, as
                ``cudaLaunchAttributeClusterDimension``; default None: the kernel's
                ``.reqnctapercluster``, else no clusters); the grid must be a multiple
                of it, at most 8 CTAs (16 with ``non_portable_cluster=True``); the
                CTAs of a cluster run together (see :mod:`hardware.simt.cluster`).
            workers: None (default): the waves of blocks run in this process; an int N
                or a ``concurrent.futures.Executor``: they run in N worker processes (or
                as the executor's tasks), each on a copy of ``memory``, merged in block
                order into the same bytes and LaunchStats. Passing it declares that no
                block reads what a block of another worker wrote; global atomics are
                refused and two workers changing one byte is an error
                (:mod:`hardware.simt.workers`).

        Returns:
            LaunchStats (see :mod:`hardware.simt.stats`).

        Raises:
            LaunchError: bad arguments; MemoryAccessError, DeadlockError,
            StepLimitError, LaunchBudgetError, ExecutionError: faults while running
            (memory written before the fault stays written, as on a device).
        """
        k = self.kernel(name)
        g = _dim3(grid, "grid")
        b = _dim3(block, "block")
        nthreads = b[0] * b[1] * b[2]
        if nthreads > 1024 or b[0] > 1024 or b[1] > 1024 or b[2] > 64:
            raise LaunchError(f"block {b} exceeds the block limits (x, y <= 1024, z <= 64, "
                              "at most 1024 threads)")
        if g[0] > 2**31 - 1 or g[1] > 65535 or g[2] > 65535:
            raise LaunchError(f"grid {g} exceeds the grid limits (x <= 2**31 - 1, "
                              "y, z <= 65535)")
        if k.maxntid is not None and nthreads > math.prod(k.maxntid):
            raise LaunchError(
                f"block {b} has {nthreads} threads, more than the {math.prod(k.maxntid)} "
                f"kernel {k.name} allows (.maxntid {', '.join(map(str, k.maxntid))}: "
                "__launch_bounds__)")
        if k.reqntid is not None and b != (tuple(k.reqntid) + (1, 1))[:3]:
            raise LaunchError(f"block {b} differs from the block kernel {k.name} requires "
                              f"(.reqntid {', '.join(map(str, k.reqntid))})")
        if not isinstance(memory, GlobalMemory):
            raise LaunchError(f"memory must be a GlobalMemory, got {type(memory).__name__}")
        if not _is_int(dynamic_shared) or dynamic_shared < 0:
            raise LaunchError(f"dynamic_shared must be a non-negative int, got {dynamic_shared!r}")
        if dynamic_shared > MAX_SHARED_BYTES:
            raise LaunchError(f"dynamic_shared = {dynamic_shared} bytes exceeds the "
                              f"{MAX_SHARED_BYTES >> 10} KiB of shared memory a block may have")
        if max_steps is not None and (not _is_int(max_steps) or not 1 <= max_steps < 1 << 62):
            raise LaunchError(f"max_steps must be None or a positive int below 2**62, got "
                              f"{max_steps!r}")
        budget = _check_budget(max_instructions, time_limit)
        if barrier_mode not in BARRIER_MODES:
            raise LaunchError(f"barrier_mode must be one of {BARRIER_MODES}, got {barrier_mode!r}")
        gpus = known_gpus()
        if not isinstance(gpu, str) or gpu not in gpus:
            raise LaunchError(f"gpu must be one of {list(gpus)}, got {gpu!r}")
        if scheduling is None:
            scheduling = self.default_scheduling
        if scheduling not in SCHEDULING_MODES:
            raise LaunchError(f"scheduling must be one of {SCHEDULING_MODES}, got "
                              f"{scheduling!r}")
        if not isinstance(non_portable_cluster, bool):
            raise LaunchError(f"non_portable_cluster must be a bool, got "
                              f"{non_portable_cluster!r}")
        cshape, explicit = launch_cluster(k, g, cluster, non_portable_cluster)
        csize = cshape[0] * cshape[1] * cshape[2]
        params = k.pack_args(args)
        cfg = LaunchConfig(k, g, b, int(dynamic_shared), gpu)
        cfg.cluster, cfg.explicit_cluster = cshape, explicit
        if cfg.shared_bytes > MAX_SHARED_BYTES:
            raise LaunchError(f"{cfg.shared_bytes} bytes of shared memory per block exceed "
                              f"the {MAX_SHARED_BYTES >> 10} KiB of sm_90")
        stats = LaunchStats(k.name, g, b)
        session = Session(parse_sanitize(sanitize), stats, memory)
        block_threads = cfg.warps_per_block * 32
        per_wave = max(1, min(MAX_THREADS_PER_WAVE // block_threads,
                              MAX_WAVE_BYTES // max(1, block_threads * k.thread_bytes)))
        if csize > 1:
            # the CTAs of a cluster are co-resident: a wave holds whole clusters
            per_wave = max(csize, per_wave // csize * csize)
        nblocks = g[0] * g[1] * g[2]
        budget.refuse_grid(k.name, nblocks, cfg.warps_per_block)
        if workers is not None and _block_range is None:
            options = dict(dynamic_shared=dynamic_shared, max_steps=max_steps,
                           barrier_mode=barrier_mode, gpu=gpu, scheduling=scheduling,
                           sanitize=sanitize, max_instructions=max_instructions,
                           time_limit=time_limit, cluster=cluster,
                           non_portable_cluster=non_portable_cluster)
            waves = [(s, min(s + per_wave, nblocks)) for s in range(0, nblocks, per_wave)]
            return run_chunks(_worker_task, self, k, name, grid, block, args, memory, options, workers,
                              waves, stats, budget.max_instructions)
        lo, hi = _block_range if _block_range is not None else (0, nblocks)
        with np.errstate(all="ignore"):
            for start in range(lo, hi, per_wave):
                # the blocks of one wave, made when it runs (a grid is never listed whole)
                stop = min(start + per_wave, hi)
                if csize > 1:
                    blocks = _cluster_block_ids(g, cshape, start, stop)
                else:
                    blocks = [(i % g[0], i // g[0] % g[1], i // (g[0] * g[1]))
                              for i in range(start, stop)]
                wave = k.wave(cfg, blocks, memory, params, stats)
                wave.attach(session)
                session.begin_wave(wave)
                before, span = stats.warp_instructions, f"blocks {start}-{stop - 1}"
                run_wave(wave, None if max_steps is None else int(max_steps), barrier_mode,
                         scheduling, lambda n, b=before, w=span: budget.during(k.name, b + n, w))
                check_released(wave)  # Tensor Memory freed before the CTAs exit
                session.end_wave(wave)
                budget.check(k.name, stats, start + len(blocks), nblocks)
        session.end_launch()
        return stats


#: shared memory per block, static and dynamic (sm_90: 227 KiB usable of 228 KiB;
#: CUDA C Programming Guide, "Technical Specifications per Compute Capability")
MAX_SHARED_BYTES = 228 * 1024


class _Budget:
    """The launch-wide bounds of :meth:`Module.launch`: warp instructions and wall time."""

    def __init__(self, max_instructions: int | None, time_limit: float | None) -> None:
        self.max_instructions = max_instructions
        self.time_limit = time_limit
        self.start = time.monotonic()

    def refuse_grid(self, kernel: str, nblocks: int, warps_per_block: int) -> None:
        """Refuse, before anything runs, a grid whose warps exceed the instruction bound
        even if each executes a single instruction."""
        warps = nblocks * warps_per_block
        if self.max_instructions is not None and warps > self.max_instructions:
            raise LaunchBudgetError(
                f"kernel {kernel}: the grid has {warps} warps ({nblocks} blocks of "
                f"{warps_per_block}), each executing at least one instruction, more than "
                f"max_instructions={self.max_instructions} warp instructions for the whole "
                "launch; pass a larger max_instructions (or None) to run it")

    def during(self, kernel: str, count: int, blocks: str) -> None:
        """While a wave runs (``count`` warp instructions of the launch so far): raise
        LaunchBudgetError if a bound is exceeded."""
        self._bounds(f"kernel {kernel} stopped in the wave of {blocks} after {count} warp "
                     "instructions", count, " (a runaway loop?)")

    def check(self, kernel: str, stats: LaunchStats, done: int, nblocks: int) -> None:
        """After a wave: raise LaunchBudgetError if a bound is exceeded and blocks remain."""
        if done >= nblocks:
            return
        count = stats.warp_instructions
        self._bounds(f"kernel {kernel} stopped after {done} of {nblocks} blocks and {count} "
                     "warp instructions", count, "")

    def _bounds(self, where: str, count: int, hint: str) -> None:
        if self.max_instructions is not None and count > self.max_instructions:
            raise LaunchBudgetError(
                f"{where}: more than max_instructions={self.max_instructions} for the "
                f"launch{hint}; pass a larger max_instructions (or None) if the kernel "
                "needs more")
        elapsed = time.monotonic() - self.start
        if self.time_limit is not None and elapsed > self.time_limit:
            raise LaunchBudgetError(
                f"{where}, {elapsed:.1f} s: more than time_limit={self.time_limit} s; pass a "
                "larger time_limit (or None) if the launch needs longer")


def _check_budget(max_instructions: Any, time_limit: Any) -> _Budget:
    if max_instructions is not None and (not _is_int(max_instructions)
                                         or max_instructions < 1):
        raise LaunchError(f"max_instructions must be a positive int or None, got "
                          f"{max_instructions!r}")
    if time_limit is not None and (isinstance(time_limit, (bool, np.bool_))
                                   or not isinstance(time_limit, (int, float, np.integer,
                                                                  np.floating))
                                   or not 0 < time_limit < math.inf):
        raise LaunchError(f"time_limit must be a positive number of seconds or None, got "
                          f"{time_limit!r}")
    return _Budget(None if max_instructions is None else int(max_instructions),
                   None if time_limit is None else float(time_limit))


def _worker_task(*args: Any) -> tuple:
    """A task of ``launch(..., workers=...)`` (:func:`hardware.simt.workers.run_task`)."""
    return run_task(load_ptx, *args)


def load_ptx(text: str) -> Module:
    """Parse and validate PTX text (as ``nvcc -ptx`` emits it for sm_80/sm_90).

    Raises:
        PtxSyntaxError: malformed text (names the line).
        UnsupportedPtxError: a construct this interpreter does not implement (names the
            line, the instruction and what is unsupported).
    """
    src = parse_ptx(inline_calls(text) if isinstance(text, str) else text)
    tgt = src.target.split(",")[0].strip()
    if tgt and tgt not in _SUPPORTED_TARGETS:
        raise UnsupportedPtxError(f".target {src.target}: supported targets are "
                                  f"{', '.join(_SUPPORTED_TARGETS)}")
    module = Module(src)
    module.text = text if isinstance(text, str) else None  # for workers (a task's PTX)
    check_module(src)  # after compiling: constructs the interpreter lacks say so first
    return module
