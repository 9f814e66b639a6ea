"""Thread-block clusters (sm_90): launch shapes, the cluster special registers,
distributed shared memory and the cluster barrier.

Sources: PTX ISA 9.0, sections 10 (special registers ``%cluster_ctarank``,
``%cluster_nctarank``, ``%cluster_ctaid``, ``%cluster_nctaid``, ``%clusterid``,
``%nclusterid``, ``%is_explicit_cluster``), 11.4 (``.reqnctapercluster``,
``.explicitcluster``, ``.maxclusterrank``), 9.7.9.15 (``mapa``), 9.7.9.16
(``getctarank``), 9.7.13.2 (``barrier.cluster``), 5.1.4 (the ``.shared::cluster``
window); CUDA C++ Programming Guide, "Thread Block Clusters" and "Distributed Shared
Memory".

- **Shapes.** ``Module.launch(..., cluster=(x, y, z))`` (or the kernel's
  ``.reqnctapercluster``) groups the grid's CTAs into clusters: the grid must be a
  multiple of the cluster in each dimension, a cluster has at most 8 CTAs (16 with
  ``non_portable_cluster=True``, the opt-in of ``cudaFuncAttributeNonPortableClusterSizeAllowed``)
  and no more than ``.maxclusterrank``. Without one, every CTA is a cluster of its own
  (``%cluster_nctarank`` = 1, ``%is_explicit_cluster`` false); a kernel with
  ``.explicitcluster`` must be launched with one.
- **Co-residence.** All CTAs of a cluster run in the same wave of blocks (the wave
  holds whole clusters, in cluster order, each cluster's CTAs in rank order: x fastest).
  A grid without clusters keeps its block order.
- **Distributed shared memory.** A ``.shared::cluster`` address is this interpreter's
  32-bit value ``((rank + 1) << 24) | offset`` for byte ``offset`` of CTA ``rank``'s
  shared memory (what ``mapa`` returns); an address below ``1 << 24`` is the executing
  CTA's own (a ``.shared::cta`` address is a valid ``.shared::cluster`` address of the
  executing CTA, PTX ISA 5.1.4). Generic addresses add the shared window as for any
  shared address. ``ld``/``st``/``atom``/``red`` on ``.shared::cluster`` (or generic)
  addresses reach the other CTAs of the cluster; the same address under ``.shared`` /
  ``.shared::cta`` is refused, and a rank outside the cluster is an error.
- **barrier.cluster.** ``arrive`` marks the thread arrived on the cluster's current
  phase and goes on; ``wait`` waits until every non-exited thread of the cluster has
  arrived on the phase the thread arrived on (arriving twice without a wait, or a wait
  without an arrival, is an error). ``.aligned`` is accepted (the warp executes it
  together here). ``.release`` (default) / ``.acquire`` (default): for racecheck a
  completed phase orders the accesses of the cluster's CTAs before it like a CTA
  barrier; a phase with ``.relaxed`` arrivals orders nothing. A wait that can never
  complete is a deadlock, reported as for mbarriers (:mod:`hardware.simt.mbarrier`).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .errors import ExecutionError, LaunchError, MemoryAccessError
from .isa.operands import Op, _unsupported, getter, setter
from .launch_config import dim3
from .memory import SHARED_WINDOW, generic_to_shared
from .parser import Instruction
from .types import TYPES

__all__ = ["UNIT", "PORTABLE_CLUSTER", "MAX_CLUSTER", "SPECIAL_NAMES", "launch_cluster",
           "block_ids", "Cluster", "COMPILERS"]

#: shared::cluster addresses: ((rank + 1) << 24) | offset
UNIT = 1 << 24
#: CTAs per cluster: the portable limit and the non-portable one (sm_90)
PORTABLE_CLUSTER = 8
MAX_CLUSTER = 16

SPECIAL_NAMES = tuple(
    [f"%{r}.{c}" for r in ("cluster_ctaid", "cluster_nctaid", "clusterid", "nclusterid")
     for c in "xyz"] + ["%cluster_ctarank", "%cluster_nctarank", "%is_explicit_cluster"])


def launch_cluster(kernel: Any, grid: tuple[int, int, int], cluster: Any,
                   non_portable: bool) -> tuple[tuple[int, int, int], bool]:
    """The cluster shape of a launch and whether it is explicit (see the module
    docstring); LaunchError for a shape the launch cannot have."""
    d = kernel.source.directives
    req = d.get("reqnctapercluster")
    req = (tuple(req) + (1, 1))[:3] if req else None
    if cluster is None:
        if req is None:
            if "explicitcluster" in d:
                raise LaunchError(f"kernel {kernel.name} has .explicitcluster: launch it "
                                  "with cluster=(x, y, z)")
            return (1, 1, 1), False
        shape = req
    else:
        shape = dim3(cluster, "cluster")
        if req is not None and shape != req:
            raise LaunchError(f"cluster {shape} differs from the cluster kernel {kernel.name} "
                              f"requires (.reqnctapercluster {', '.join(map(str, req))})")
    n = math.prod(shape)
    most = MAX_CLUSTER if non_portable else PORTABLE_CLUSTER
    if n > most:
        raise LaunchError(f"cluster {shape} has {n} CTAs, more than {most} "
                          + ("(the sm_90 limit)" if non_portable else
                             "(the portable limit; non_portable_cluster=True allows 16)"))
    mcr = d.get("maxclusterrank")
    if mcr and n > mcr[0]:
        raise LaunchError(f"cluster {shape} has {n} CTAs, more than kernel {kernel.name}'s "
                          f".maxclusterrank {mcr[0]}")
    for i, (g, c) in enumerate(zip(grid, shape)):
        if g % c:
            raise LaunchError(f"grid {grid} is not a multiple of cluster {shape} in "
                              f"dimension {'xyz'[i]}")
    return shape, True


def block_ids(grid: tuple[int, int, int], shape: tuple[int, int, int], start: int,
              stop: int) -> list[tuple[int, int, int]]:
    """The CTAs ``start..stop-1`` in cluster order (the grid's order when ``shape`` is
    1x1x1)."""
    cx, cy, cz = shape
    n = cx * cy * cz
    ncx, ncy = grid[0] // cx, grid[1] // cy
    out = []
    for i in range(start, stop):
        c, r = divmod(i, n)
        kx, ky, kz = c % ncx, c // ncx % ncy, c // (ncx * ncy)
        out.append((kx * cx + r % cx, ky * cy + r // cx % cy, kz * cz + r // (cx * cy)))
    return out


class Cluster:
    """The cluster view of one wave: registers, rank -> block mapping, the barrier."""

    UNIT = UNIT

    def __init__(self, wave: Any, shape: tuple[int, int, int], explicit: bool,
                 grid: tuple[int, int, int]) -> None:
        self.wave = wave
        self.shape = shape
        self.size = math.prod(shape)
        self.explicit = explicit
        self.grid = grid
        nb = len(wave.block_ids)
        self.n_clusters = max(1, nb // self.size)
        self.reset()

    def reset(self) -> None:
        nb = len(self.wave.block_ids)
        self.phase = np.zeros(self.n_clusters, dtype=np.int64)
        self.relaxed = np.zeros(self.n_clusters, dtype=bool)
        self.arrived = np.full(self.wave.T, -1, dtype=np.int64)  # phase each thread is on
        del nb

    def registers(self, bids: np.ndarray, blk: np.ndarray) -> dict[str, Any]:
        """The cluster special registers of every thread slot (``bids``: the wave's
        block ids (nb, 3), ``blk`` each slot's block)."""
        s = np.asarray(self.shape, dtype=np.int64)
        b = bids[blk]
        within = b % s
        out: dict[str, Any] = {}
        for i, c in enumerate("xyz"):
            out[f"%cluster_ctaid.{c}"] = within[:, i]
            out[f"%cluster_nctaid.{c}"] = int(s[i])
            out[f"%clusterid.{c}"] = b[:, i] // s[i]
            out[f"%nclusterid.{c}"] = self.grid[i] // int(s[i])
        out["%cluster_ctarank"] = within[:, 0] + s[0] * (within[:, 1] + s[1] * within[:, 2])
        out["%cluster_nctarank"] = self.size
        return out

    # ------------------------------------------------------------ addresses
    def own_address(self, ix: Any, a: np.ndarray) -> np.ndarray | None:
        """``a`` as addresses of the executing CTA (None if one names another CTA)."""
        w = self.wave
        rank = (a >> 24) - 1
        mine = w.thread_block[ix] % self.size if not isinstance(ix, slice) else \
            w.thread_block % self.size
        own = (a < UNIT) | (rank == mine)
        return np.where(a < UNIT, a, a & (UNIT - 1)) if own.all() else None

    def remote(self, ix: Any, addr: np.ndarray, width: int, inst: Instruction
               ) -> tuple[np.ndarray, np.ndarray]:
        """(offsets within the target CTA, the target CTAs' shared bases) of shared
        addresses some of which are ``.shared::cluster`` addresses of other CTAs."""
        w = self.wave
        th = w._thread_ids(ix)
        if "shared::cluster" not in inst.parts and any(
                p in ("shared", "shared::cta") for p in inst.parts[1:]):
            k = int(np.argmax(addr >= UNIT))
            raise MemoryAccessError(
                f"{w.location(int(th[k]), inst)}: the .shared::cluster address "
                f"{int(addr[k]):#x} (CTA rank {int(addr[k] >> 24) - 1} of the cluster) used "
                "by a .shared::cta access (use .shared::cluster or a generic address)")
        rank = np.where(addr >= UNIT, (addr >> 24) - 1, -1)
        blk = w.thread_block[th]
        bad = rank >= self.size
        if bad.any() or (addr >= (MAX_CLUSTER + 1) * UNIT).any():
            k = int(np.argmax(bad | (addr >= (MAX_CLUSTER + 1) * UNIT)))
            raise MemoryAccessError(
                f"{w.location(int(th[k]), inst)}: .shared::cluster address "
                f"{int(addr[k]):#x} names CTA rank {int(rank[k])}, outside the cluster of "
                f"{self.size} CTA(s)")
        target = np.where(rank >= 0, blk - blk % self.size + rank, blk)
        return addr & (UNIT - 1), target * w.smem_size

    # ------------------------------------------------------------ barrier.cluster
    def _cluster_of(self, th: np.ndarray) -> np.ndarray:
        return self.wave.thread_block[th] // self.size

    def _complete(self, c: int) -> bool:
        """Complete cluster ``c``'s phase if every non-exited thread has arrived."""
        w = self.wave
        sched = getattr(w, "scheduler", None)
        blocks = range(c * self.size, (c + 1) * self.size)
        slots = np.flatnonzero(np.isin(w.thread_block, list(blocks)) & w.exists)
        if sched is not None:
            live = np.zeros(w.T, dtype=bool)
            for wp in np.unique(slots // 32).tolist():
                s = sched.stacks[wp]
                if s:
                    live[wp * 32: wp * 32 + 32] = s[0][2]
            need = slots[live[slots]]
        else:
            need = slots
        if not (self.arrived[need] == self.phase[c]).all():
            return False
        self.phase[c] += 1
        mb = _mbarriers(w)
        mb.completions += 1
        mb.operations += 1
        race = w.tools.get("racecheck") if w.tools else None
        if race is not None and not self.relaxed[c]:
            race.barrier_release(w, np.asarray(list(blocks), dtype=np.int64))
        self.relaxed[c] = False
        return True

    def arrive(self, th: np.ndarray, relaxed: bool, inst: Instruction) -> None:
        w = self.wave
        cl = self._cluster_of(th)
        again = self.arrived[th] == self.phase[cl]
        if again.any():
            k = int(np.argmax(again))
            raise ExecutionError(f"{w.location(int(th[k]), inst)}: barrier.cluster.arrive "
                                 "twice without a barrier.cluster.wait between")
        self.arrived[th] = self.phase[cl]
        _mbarriers(w).operations += 1
        for c in np.unique(cl).tolist():
            if relaxed:
                self.relaxed[c] = True
            self._complete(c)

    def probe(self, th: np.ndarray, inst: Instruction) -> tuple[np.ndarray, np.ndarray]:
        w = self.wave
        cl = self._cluster_of(th)
        mine = self.arrived[th]
        if (mine < 0).any():
            k = int(np.argmax(mine < 0))
            raise ExecutionError(f"{w.location(int(th[k]), inst)}: barrier.cluster.wait "
                                 "without a preceding barrier.cluster.arrive")
        for c in np.unique(cl[mine >= self.phase[cl]]).tolist():
            self._complete(c)
        return self.phase[cl] > mine, cl

    def describe(self, key: int) -> str:
        c = -1 - key
        w = self.wave
        first = tuple(w.block_ids[c * self.size])
        slots = np.flatnonzero((w.thread_block // self.size == c) & w.exists)
        n = int((self.arrived[slots] == self.phase[c]).sum())
        return (f"cluster barrier of the cluster of {self.size} CTA(s) from block {first}: "
                f"phase {int(self.phase[c])}, {n} of {slots.size} threads arrived")


def _mbarriers(w: Any) -> Any:
    from .mbarrier import state_of
    return state_of(w)


def _cluster(ctx: Any) -> Cluster:
    return ctx.cluster


# ------------------------------------------------------------------ compilers
def c_mapa(inst: Instruction, ctx: Any) -> Op:
    """mapa{.shared::cluster}.{u32,u64} d, a, rank (9.7.9.15): the address of the same
    byte in CTA ``rank``'s shared memory."""
    t = TYPES.get(inst.parts[-1])
    generic = "shared::cluster" not in inst.parts
    if t is None or t.name not in ("u32", "u64") or len(inst.operands) != 3 or (
            generic and t.name != "u64"):
        raise _unsupported(inst, "mapa{.shared::cluster}.u32/.u64 d, a, rank (generic: .u64)")
    ga = getter(inst.operands[1], t, ctx, inst)
    gr = getter(inst.operands[2], TYPES["u32"], ctx, inst)
    put = setter(inst.operands[0], t, ctx, inst)

    def fn(ix: Any, ex: Any) -> None:
        cnt = ctx.count(ix)
        a = np.broadcast_to(np.asarray(ga(ix)).astype(np.int64), (cnt,))
        r = np.broadcast_to(np.asarray(gr(ix)).astype(np.int64), (cnt,))
        cl = _cluster(ctx)
        th = ctx._thread_ids(ix)
        if generic:
            a = generic_to_shared(ctx, a, th, inst, "mapa of {:#x}, not a shared-memory address")
        if (r >= cl.size).any():
            k = int(np.argmax(r >= cl.size))
            raise ExecutionError(f"{ctx.location(int(th[k]), inst)}: mapa to CTA rank "
                                 f"{int(r[k])}, outside the cluster of {cl.size} CTA(s)")
        if (a >= (MAX_CLUSTER + 1) * UNIT).any():
            k = int(np.argmax(a >= (MAX_CLUSTER + 1) * UNIT))
            raise ExecutionError(f"{ctx.location(int(th[k]), inst)}: mapa of "
                                 f"{int(a[k]):#x}, not a shared-memory address")
        d = ((r + 1) << 24) | (a & (UNIT - 1))
        put(ix, (d + (SHARED_WINDOW if generic else 0)).astype(t.dtype))
    return Op(inst, "alu", fn)


def c_getctarank(inst: Instruction, ctx: Any) -> Op:
    """getctarank{.shared::cluster}.{u32,u64} d, a (9.7.9.16): the rank of the CTA
    whose shared memory holds ``a``."""
    t = TYPES.get(inst.parts[-1])
    generic = "shared::cluster" not in inst.parts
    if t is None or t.name not in ("u32", "u64") or len(inst.operands) != 2:
        raise _unsupported(inst, "getctarank{.shared::cluster}.u32/.u64 d, a")
    ga = getter(inst.operands[1], t, ctx, inst)
    put = setter(inst.operands[0], TYPES["u32"], ctx, inst)

    def fn(ix: Any, ex: Any) -> None:
        cnt = ctx.count(ix)
        a = np.broadcast_to(np.asarray(ga(ix)).astype(np.int64), (cnt,))
        if generic:
            a = a - SHARED_WINDOW
        th = ctx._thread_ids(ix)
        bad = (a < 0) | (a >= (_cluster(ctx).size + 1) * UNIT)
        if bad.any():
            k = int(np.argmax(bad))
            raise ExecutionError(f"{ctx.location(int(th[k]), inst)}: getctarank of an "
                                 "address outside the cluster's shared memory")
        own = ctx.thread_block[th] % _cluster(ctx).size
        put(ix, np.where(a < UNIT, own, (a >> 24) - 1).astype(np.uint32))
    return Op(inst, "alu", fn)


def c_barrier_cluster(inst: Instruction, ctx: Any) -> Op:
    """barrier.cluster.arrive{.release|.relaxed}{.aligned} /
    barrier.cluster.wait{.acquire}{.aligned} (9.7.13.2; see the module docstring)."""
    from .mbarrier import WaitOp
    parts = set(inst.parts[2:])
    if inst.operands:
        raise _unsupported(inst, "barrier.cluster takes no operands")
    if "arrive" in parts:
        if parts - {"arrive", "release", "relaxed", "aligned"}:
            raise _unsupported(inst, "barrier.cluster.arrive{.release|.relaxed}{.aligned}")
        relaxed = "relaxed" in parts
        return Op(inst, "alu", lambda ix, ex: _cluster(ctx).arrive(
            ctx._thread_ids(ix), relaxed, inst))
    if "wait" not in parts or parts - {"wait", "acquire", "aligned"}:
        raise _unsupported(inst, "barrier.cluster.wait{.acquire}{.aligned}")

    def probe(ix: Any, ex: Any) -> tuple:
        th = ctx._thread_ids(ix)
        ok, cl = _cluster(ctx).probe(th, inst)
        return ok, -1 - cl, th, _cluster(ctx).arrived[th]

    def wait(ix: Any, ex: Any) -> None:
        ok = probe(ix, ex)[0]
        if not ok.all():
            ctx.fault_here(inst, "barrier.cluster.wait went on before its phase completed")
    op = WaitOp(inst, "mbwait", wait)
    op.probe = probe
    op.blocking = True
    op.describe = lambda key: _cluster(ctx).describe(key)
    op.wanted = lambda v: f"phase {v}"
    return op


COMPILERS = {"mapa": c_mapa, "getctarank": c_getctarank}
