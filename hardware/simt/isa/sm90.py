"""Instructions of sm_90 kernels that need no state of their own (PTX ISA 9.0):
``elect.sync`` (9.7.13.x), ``setmaxnreg`` (9.7.18.x), ``griddepcontrol`` (9.7.13.x),
``brkpt`` (9.7.19.1), ``prefetch``/``prefetchu`` (cache hints: no effect) and the packed 16-bit integer ``min``/``max`` (9.7.1.10-11,
``.u16x2``/``.s16x2``, ``.relu`` for ``.s16x2``).

- ``elect.sync d|p, membermask``: the leader is the lowest-numbered executing lane
  named by ``membermask``; every executing lane gets its lane number in ``d`` (``_`` to
  discard) and ``p`` is true in the leader only. Executing lanes must be named by the
  mask (synccheck checks it as for the other warp collectives).
- ``setmaxnreg.{inc,dec}.sync.aligned.u32 N``: N a multiple of 8 in 24..256 (a load-time
  error otherwise, as ptxas says). Registers are unbounded here, so values never change;
  what is checked at run time: the warp executes it with all its live lanes
  (``.aligned``), the four warps of a warpgroup execute the same sequence of
  ``setmaxnreg`` (warpgroup-uniform), ``.inc`` never lowers and ``.dec`` never raises a
  warpgroup's count, and the counts of the CTA's warpgroups fit the 65536 registers of
  the register file: an ``.inc`` that does not fit yet blocks its warps (PTX ISA: it
  "blocks the execution until enough registers are available in the CTA's register
  pool") until
  ``.dec`` of other warpgroups releases enough, warpgroups waiting first served
  first; when nothing else can run it is a
  :class:`~hardware.simt.errors.DeadlockError` naming the warpgroups and their
  counts. A warp whose lanes all skip it (its guard) does not execute it. A warpgroup starts at the kernel's ``.maxnreg`` if it has one, else
  at 65536 / (threads per block) rounded down to a multiple of 8 and at most 256 (the
  register count ptxas gives a kernel is not known here).
- ``griddepcontrol.launch_dependents`` / ``griddepcontrol.wait`` (programmatic
  dependent launch): no effect. Launches run one after another to completion, so the
  prerequisite grids have completed and their memory is visible before a kernel starts,
  which is what ``wait`` guarantees; ``launch_dependents`` only allows a dependent grid
  to start early.
- ``brkpt``: stops the launch with an :class:`~hardware.simt.errors.ExecutionError`
  naming the thread and line (there is no debugger to hand it to).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import DeadlockError, ExecutionError, PtxTypeError
from ..parser import Imm, Instruction, Pair, Sink
from ..types import TYPES
from .integer import c_min_max
from .operands import Op, _AR32, _rowvals, _unsupported, getter, setter

__all__ = ["COMPILERS", "REGISTER_FILE"]

#: registers of an SM's register file (sm_90): the pool setmaxnreg redistributes
REGISTER_FILE = 65536


def c_elect(inst: Instruction, ctx: Any) -> Op:
    """elect.sync d|p, membermask (see the module docstring)."""
    if inst.parts[1:] != ("sync",) or len(inst.operands) != 2:
        raise _unsupported(inst, "elect.sync d|p, membermask")
    d = inst.operands[0]
    first, second = (d.first, d.second) if isinstance(d, Pair) else (d, Sink())
    put = setter(first, TYPES["b32"], ctx, inst)
    putp = setter(second, TYPES["pred"], ctx, inst)
    gm = getter(inst.operands[1], TYPES["u32"], ctx, inst)

    def fn(ix: Any, ex: Any) -> None:
        sync = ctx.tools.get("synccheck") if ctx.tools else None
        mask = _rowvals(gm, ix, ex, np.uint32).astype(np.int64)
        if sync is not None:
            sync.collective(ctx, ex, inst, mask.astype(np.uint32))
        member = ex.mask & (((mask >> _AR32) & 1) == 1)
        leader = np.where(member.any(axis=1), np.argmax(member, axis=1), -1)
        lane = np.broadcast_to(leader[:, None], ex.rows.shape)[ex.mask]
        put(ix, np.where(lane < 0, 0, lane).astype(np.uint32))
        putp(ix, (np.broadcast_to(_AR32, ex.rows.shape) == leader[:, None])[ex.mask])
    return Op(inst, "alu", fn)


def c_setmaxnreg(inst: Instruction, ctx: Any) -> Op:
    """setmaxnreg.{inc,dec}.sync.aligned.u32 N (see the module docstring)."""
    parts = inst.parts
    if len(parts) != 5 or parts[1] not in ("inc", "dec") or parts[2:] != (
            "sync", "aligned", "u32"):
        raise PtxTypeError(f"line {inst.line}: {inst.text!r}: setmaxnreg takes "
                           ".inc/.dec.sync.aligned.u32 (PTX ISA 9.7.18)")
    if len(inst.operands) != 1 or not isinstance(inst.operands[0], Imm):
        raise PtxTypeError(f"line {inst.line}: {inst.text!r}: setmaxnreg takes one "
                           "immediate register count")
    n = inst.operands[0].value
    if not 24 <= n <= 256 or n % 8:
        raise PtxTypeError(f"line {inst.line}: {inst.text!r}: register count {n} is not a "
                           "multiple of 8 in 24..256 (PTX ISA 9.7.18)")
    op = HoldOp(inst, "hold")
    op.hold = lambda sched, warps, lanes: _registers(ctx).hold(
        sched, warps, lanes, inst, n, parts[1] == "inc")
    op.deadlock = lambda sched, held: _registers(ctx).deadlock(sched, held)
    return op


class HoldOp(Op):
    """An instruction the scheduler may hold its warps at (kind "hold", see
    :meth:`hardware.simt.scheduler.WarpScheduler._hold`): ``hold(scheduler, warps,
    lanes)`` executes it for the lanes ``lanes`` (G, 32) of ``warps`` and gives the
    (G,) warps that go on (the others wait until :meth:`~hardware.simt.scheduler.
    WarpScheduler.wake`); ``deadlock(scheduler, held)`` raises the DeadlockError of
    warps ``held`` when nothing else can run."""

    __slots__ = ("hold", "deadlock")


class _Registers:
    """Per-warpgroup register counts of one launch's wave (setmaxnreg). A warpgroup's
    ``.inc`` that the register file cannot hold yet waits (``pending``) until
    ``.dec`` of other warpgroups frees enough, first come first served."""

    def __init__(self, wave: Any) -> None:
        self.wave = wave
        k = wave.kernel
        tpb = wave.cfg.threads_per_block if wave.cfg else 32
        start = (k.source.directives.get("maxnreg") or (0,))[0]
        if not start:
            start = min(256, REGISTER_FILE // max(tpb, 1) // 8 * 8)
        self.start = start
        self.count: dict[int, int] = {}           # warpgroup -> registers per thread
        self.seq: dict[int, list] = {}            # warp -> [(line, N, inc)]
        self.done: dict[int, int] = {}            # warpgroup -> steps applied
        self.pending: dict[int, tuple] = {}       # warpgroup -> (N, inst, [warps held])
        self.wpb = wave.cfg.warps_per_block if wave.cfg else 1

    def hold(self, sched: Any, warps: np.ndarray, lanes: np.ndarray, inst: Instruction,
             n: int, inc: bool) -> np.ndarray:
        held = set()
        for i, wp in enumerate(warps.tolist()):
            if not lanes[i].any():
                continue  # the guard skips it for the whole warp
            live = sched.stacks[wp][0][2] if sched.stacks[wp] else lanes[i]
            if (live & ~lanes[i]).any():
                self._fail(wp, inst, "setmaxnreg executed by part of a warp (.aligned: "
                                     "every thread of the warp executes it)")
            blk, k = divmod(wp, self.wpb)
            wg = blk * 64 + k // 4
            mine = self.seq.setdefault(wp, [])
            mine.append((inst.line, n, inc))
            step = len(mine) - 1
            for other in range(wp - k % 4, wp - k % 4 + 4):
                if other == wp or other not in self.seq or len(self.seq[other]) <= step:
                    continue
                # "the same setmaxnreg instruction" (PTX ISA 9.7.19.5) is read as the
                # same action and count: compilers give each warp's code path its own
                # copy of it (Triton's warp_specialize partitions do), so the line may
                # differ
                if self.seq[other][step][1:] != mine[step][1:]:
                    o = self.seq[other][step]
                    self._fail(wp, inst, f"setmaxnreg is not warpgroup-uniform: warp "
                                         f"{other % self.wpb} of the warpgroup executed "
                                         f"setmaxnreg.{'inc' if o[2] else 'dec'} {o[1]} "
                                         f"(line {o[0]}) at this point")
            if step < self.done.get(wg, 0):
                continue  # another warp of the group applied this step already
            if wg in self.pending:
                self.pending[wg][2].append(wp)  # waits with the warps before it
                held.add(wp)
                continue
            cur = self.count.get(wg, self.start)
            if (inc and n < cur) or (not inc and n > cur):
                self._fail(wp, inst, f"setmaxnreg.{'inc' if inc else 'dec'} {n} while the "
                                     f"warpgroup has {cur} registers per thread")
            if self._total(wg, n) > REGISTER_FILE:
                self.pending[wg] = (n, inst, [wp])
                held.add(wp)
                continue
            self._apply(wg, n)
            if not inc:
                held -= self._grant(sched)
        return np.array([w not in held for w in warps.tolist()], dtype=bool)

    def _total(self, wg: int, n: int) -> int:
        """Registers of the CTA of warpgroup ``wg`` if it held ``n`` per thread."""
        blk = wg // 64
        return sum((n if blk * 64 + g == wg else self.count.get(blk * 64 + g, self.start))
                   * 128 for g in range(-(-self.wpb // 4)))

    def _apply(self, wg: int, n: int) -> None:
        self.count[wg] = n
        self.done[wg] = self.done.get(wg, 0) + 1

    def _grant(self, sched: Any) -> set:
        """Give the waiting warpgroups, in arrival order, the registers that now fit;
        wakes their warps and returns them."""
        woken: set = set()
        for wg in list(self.pending):
            n, _, ws = self.pending[wg]
            if self._total(wg, n) <= REGISTER_FILE:
                del self.pending[wg]
                self._apply(wg, n)
                sched.wake(np.array(ws, dtype=np.int64))
                woken.update(ws)
        return woken

    def deadlock(self, sched: Any, held: np.ndarray) -> None:
        """No warp can run and warps ``held`` wait for registers: a DeadlockError
        naming the waiting warpgroups, their counts and what the others do."""
        w = int(held[0])
        blk = w // self.wpb
        wg0 = blk * 64 + (w % self.wpb) // 4
        n, inst, _ = self.pending[wg0]
        groups = []
        for g in range(-(-self.wpb // 4)):
            wg = blk * 64 + g
            ws = range(blk * self.wpb + 4 * g, min(blk * self.wpb + 4 * g + 4,
                                                   (blk + 1) * self.wpb))
            have = self.count.get(wg, self.start)
            if wg in self.pending:
                p = self.pending[wg]
                what = f"waits at setmaxnreg.inc {p[0]} (line {p[1].line})"
            elif all(sched.state[x] == sched.DONE for x in ws):
                what = "has exited"
            else:
                lines = sorted({sched.ops[int(sched.warp_pc[x]) - 1].inst.line for x in ws
                                if sched.state[x] != sched.DONE})
                what = f"waits at a barrier (line {', '.join(map(str, lines))})"
            groups.append(f"warpgroup {g} (warps {ws[0] % self.wpb}-{ws[-1] % self.wpb}) "
                          f"holds {have} registers per thread and {what}")
        raise DeadlockError(
            f"{self.wave.location(w * 32, inst)}: setmaxnreg deadlock: warpgroup "
            f"{(w % self.wpb) // 4} waits for {n} registers per thread, with which the "
            f"CTA's warpgroups would hold {self._total(wg0, n)} registers, more than the "
            f"{REGISTER_FILE} of the register file, and no setmaxnreg.dec can free them "
            f"(every other warp has exited or waits); {'; '.join(groups)}")

    def _fail(self, warp: int, inst: Instruction, msg: str) -> None:
        raise ExecutionError(f"{self.wave.location(warp * 32, inst)}: {msg}")


def _registers(ctx: Any) -> _Registers:
    r = getattr(ctx, "_setmaxnreg", None)
    if r is None or r.wave is not ctx or getattr(ctx, "_setmaxnreg_stats", None) is not \
            ctx.stats:
        r = _Registers(ctx)
        ctx._setmaxnreg = r
        ctx._setmaxnreg_stats = ctx.stats
    return r


def c_griddepcontrol(inst: Instruction, ctx: Any) -> Op:
    """griddepcontrol.launch_dependents / .wait: no effect (see the module docstring)."""
    if inst.parts[1:] not in (("launch_dependents",), ("wait",)) or inst.operands:
        raise _unsupported(inst, "griddepcontrol.launch_dependents or griddepcontrol.wait")
    return Op(inst, "alu", lambda ix, ex: None)


def c_brkpt(inst: Instruction, ctx: Any) -> Op:
    """brkpt: an error naming the thread (see the module docstring)."""
    if len(inst.parts) != 1 or inst.operands:
        raise _unsupported(inst, "brkpt takes no modifiers or operands")

    def fn(ix: Any, ex: Any) -> None:
        thread = int(ctx._thread_ids(ix)[0])
        raise ExecutionError(f"{ctx.location(thread, inst)}: brkpt (breakpoint) reached")
    return Op(inst, "alu", fn)


def c_min_max_packed(inst: Instruction, ctx: Any) -> Op:
    """min/max: the packed .u16x2/.s16x2 forms here (each 16-bit half on its own, the
    low half from the low bits; ``.relu`` on .s16x2 clamps negative halves to 0), the
    others in :func:`~hardware.simt.isa.integer.c_min_max`."""
    packed = [p for p in inst.parts[1:] if p in ("u16x2", "s16x2")]
    if not packed:
        return c_min_max(inst, ctx)
    kind = packed[0]
    mods = set(inst.parts[1:]) - {kind}
    if mods - {"relu"} or len(inst.parts) - 1 != len(mods) + 1:
        raise _unsupported(inst, f"{inst.opcode}: modifier not supported")
    relu = "relu" in mods
    if relu and kind != "s16x2":
        raise PtxTypeError(f"line {inst.line}: {inst.text!r}: .relu needs .s16x2 "
                           "(PTX ISA 9.7.1.10)")
    if len(inst.operands) != 3:
        raise _unsupported(inst, f"{inst.opcode} d, a, b")
    ga, gb = (getter(o, TYPES["b32"], ctx, inst) for o in inst.operands[1:])
    put = setter(inst.operands[0], TYPES["b32"], ctx, inst)
    f = np.minimum if inst.parts[0] == "min" else np.maximum
    half = np.int16 if kind == "s16x2" else np.uint16

    def fn(ix: Any, ex: Any) -> None:
        a = np.atleast_1d(np.asarray(ga(ix)).astype(np.uint32))
        b = np.atleast_1d(np.asarray(gb(ix)).astype(np.uint32))
        a, b = np.broadcast_arrays(a, b)
        ah = np.ascontiguousarray(a).view(np.uint16).view(half)  # little endian: lo, hi
        bh = np.ascontiguousarray(b).view(np.uint16).view(half)
        r = f(ah, bh)
        if relu:
            r = np.maximum(r, 0).astype(half)
        put(ix, np.ascontiguousarray(r.astype(half)).view(np.uint32))
    return Op(inst, "alu", fn)


#: the timer special registers (PTX ISA 10, %globaltimer): read through :func:`c_clock`
#: (%clock and %clock64 stay refused)
CLOCKS = {"%globaltimer": 64, "%globaltimer_lo": 32, "%globaltimer_hi": 32}


def c_clock(inst: Instruction, ctx: Any) -> Op:
    """mov of %globaltimer{,_lo,_hi} (the nanosecond timer libcu++'s barrier waits
    back off with): a deterministic timer, the number of instructions the executing
    warp has executed so far in the launch (one "nanosecond" per instruction; not a
    time), so that timed back-off and timeout loops behave as a function of the program
    alone."""
    name = inst.operands[1].name
    bits = CLOCKS[name]
    t = TYPES["u64" if bits == 64 else "u32"]
    put = setter(inst.operands[0], t, ctx, inst)
    pc = next(i for i, x in enumerate(ctx.kernel.source.instructions) if x is inst)

    def fn(ix: Any, ex: Any) -> None:
        sched = getattr(ctx, "scheduler", None)
        if sched is None:
            steps = np.zeros(ex.warps.shape, np.int64)
        else:
            # the warps' counts are brought up to date at the end of a straight-line
            # run, which started at their recorded pc
            steps = sched.steps[ex.warps] + (pc - sched.warp_pc[ex.warps])
        v = np.broadcast_to(steps.astype(np.uint64)[:, None], ex.rows.shape)[ex.mask]
        if name == "%globaltimer_hi":
            v = v >> np.uint64(32)
        put(ix, v.astype(t.dtype))
    return Op(inst, "alu", fn)


def c_prefetch(inst: Instruction, ctx: Any) -> Op:
    """prefetch{.space}.{L1,L2} [a], prefetch.tensormap [a], prefetchu.L1 [a]
    (9.7.9.15): cache hints, no effect on values (the address is not accessed)."""
    if len(inst.operands) != 1:
        raise _unsupported(inst, f"{inst.parts[0]} takes one address")
    return Op(inst, "alu", lambda ix, ex: None)


COMPILERS = {"prefetch": c_prefetch, "prefetchu": c_prefetch, "elect": c_elect, "setmaxnreg": c_setmaxnreg, "griddepcontrol": c_griddepcontrol,
             "brkpt": c_brkpt, "min": c_min_max_packed, "max": c_min_max_packed}
