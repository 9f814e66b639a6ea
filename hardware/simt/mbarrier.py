"""``mbarrier``: the shared-memory barrier objects of sm_80/sm_90 (PTX ISA 9.0, section
9.7.13.15, "Parallel Synchronization and Communication Instructions: mbarrier").

Forms (``.space`` is ``.shared``/``.shared::cta``, or none for a generic address;
``.shared::cluster`` where marked, for a barrier in another CTA of the cluster)::

    mbarrier.init{.space}.b64 [addr], count;
    mbarrier.inval{.space}.b64 [addr];
    mbarrier.arrive{.noComplete}{.sem}{.scope}{.space}.b64 state, [addr]{, count};
    mbarrier.arrive{.sem}{.scope}.shared::cluster.b64 _, [addr]{, count};
    mbarrier.arrive.expect_tx{.sem}{.scope}{.space|.shared::cluster}.b64 state|_, [addr], tx;
    mbarrier.arrive_drop{.expect_tx}{.noComplete}... (as arrive; the expected count drops)
    mbarrier.expect_tx{.sem}{.scope}{.space|.shared::cluster}.b64 [addr], tx;
    mbarrier.complete_tx{.sem}{.scope}{.space|.shared::cluster}.b64 [addr], tx;
    mbarrier.test_wait{.parity}{.sem}{.scope}{.space}.b64 p, [addr], state|parity;
    mbarrier.try_wait{.parity}{.sem}{.scope}{.space}.b64 p, [addr], state|parity{, hint};
    mbarrier.pending_count.b64 count, state;

``.sem`` is ``.release``/``.relaxed`` for arrivals and ``.acquire``/``.relaxed`` for
waits, ``.scope`` ``.cta``/``.cluster``.

Semantics (the ISA's): an object has a current phase, an expected arrival count (1 to
2^20 - 1, set by ``init``), a pending arrival count and a transaction count (tx-count,
-(2^20 - 1) to 2^20 - 1). ``init`` starts phase 0 with pending = expected and tx-count 0.
``arrive`` subtracts ``count`` (default 1) from the pending count; ``expect_tx`` adds to
the tx-count, ``complete_tx`` (and the bytes of a ``cp.async.bulk`` that signals the
barrier) subtracts from it; ``arrive.expect_tx`` is expect-tx then arrive. When the
pending count and the tx-count are both zero the phase completes: the phase advances and
the pending count is reloaded with the expected count. ``arrive_drop`` also lowers the
expected count of every later phase. ``test_wait`` tells whether the phase named by a
state (returned by an ``arrive`` of the current or the previous phase) or the phase of
parity ``P`` (``.parity``: the current phase when its parity is P, else the previous
one) has completed; ``try_wait`` is the same test, after which the thread may have been
suspended (the hint, in nanoseconds, has no effect here).

The 64-bit object in shared memory (its layout is opaque in the ISA; this encoding is
this interpreter's, written whenever the object changes so that a plain ``ld`` sees it):
bits 0-19 the pending arrival count, 20-39 the expected count, 40-61 the tx-count
(22-bit two's complement), bit 62 set while the object is valid (initialised and not
invalidated), bit 63 the phase parity. A *state* returned by ``arrive``: bits 0-19 the
pending count left by the arrival, bits 32-61 the phase number (modulo 2^30), bit 62
set, bit 63 the phase parity. ``pending_count`` returns bits 0-19 of a state.

Scheduling (a legal schedule of the ISA; :mod:`hardware.simt.scheduler`): a warp that
reaches ``test_wait``/``try_wait`` whose phase has not completed is suspended before
executing it, until a phase of some barrier completes (then it tries again) or until no
other thread can run, when it executes the wait, which returns false (a timeout). A
warp with another divergent path pending is not suspended (the wait returns false and
independent thread scheduling lets the other path run). When nothing can run and no
mbarrier operation happened since the previous such timeout, no wait can ever complete:
the launch stops with a :class:`~hardware.simt.errors.DeadlockError` naming each
barrier (block, address, phase, arrivals and tx bytes outstanding, or a negative
tx-count: copies that completed more bytes than expect_tx announced) and the threads
that wait for it.

Errors (:class:`~hardware.simt.errors.ExecutionError`, naming the thread and line): an
operation on an object that is not valid (never initialised, invalidated, or
overwritten by an ordinary store), ``init`` of a valid object, a count outside its
range, more arrivals than are pending, a tx-count leaving its range, an address that is
not 8-byte aligned shared memory, a wait on another CTA's barrier, and a state that
names neither the current nor the previous phase. ``.noComplete`` arrivals that would
complete the phase are errors too (the ISA calls them undefined).

Memory ordering (for racecheck, :mod:`hardware.simt.racecheck`): an arrival is an atomic
on the object, preceded by a release of the arriving thread unless ``.relaxed``; a wait
that returns true reads the object atomically, followed by an acquire unless
``.relaxed``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .errors import DeadlockError, ExecutionError, PtxTypeError
from .isa.data import _address
from .isa.operands import Op, _unsupported, getter, setter
from .memory import generic_to_shared
from .parser import Imm, Instruction, Sink
from .types import TYPES
from .wave_state import WaveState

__all__ = ["MBarriers", "WaitOp", "COMPILERS", "MAX_COUNT", "encode", "state_token"]

#: the largest expected arrival count and |tx-count| (PTX ISA 9.7.13.15.1)
MAX_COUNT = (1 << 20) - 1
_PHASE_MOD = 1 << 30
_VALID = 1 << 62


def encode(pending: int, expected: int, tx: int, phase: int) -> int:
    """The 64-bit word of a valid object (see the module docstring)."""
    return (pending | expected << 20 | (tx & ((1 << 22) - 1)) << 40 | _VALID
            | (phase & 1) << 63)


def state_token(pending: int, phase: int) -> int:
    """The state an arrival returns (see the module docstring)."""
    return pending | (phase % _PHASE_MOD) << 32 | _VALID | (phase & 1) << 63


class _Barrier:
    __slots__ = ("expected", "pending", "tx", "phase", "word")

    def __init__(self, count: int) -> None:
        self.expected = self.pending = count
        self.tx = 0
        self.phase = 0
        self.word = encode(count, count, 0, 0)


class MBarriers(WaveState):
    """The mbarrier objects of one wave, by byte offset in the wave's shared memory."""

    ATTR = "mbarriers"

    def reset(self) -> None:
        self.objects: dict[int, _Barrier] = {}
        #: phases completed so far (the scheduler wakes suspended waiters when it grows)
        self.completions = 0
        #: operations that changed an object (the scheduler's deadlock test)
        self.operations = 0
        self.waits = 0
        bulk = getattr(self.wave, "bulk_copies", None)
        if bulk is not None:
            bulk.reset()

    # ------------------------------------------------------------ the objects
    def _fail(self, thread: int, inst: Instruction, msg: str) -> None:
        raise ExecutionError(f"{self.wave.location(thread, inst)}: {msg}")

    def _describe(self, off: int) -> str:
        w = self.wave
        blk = off // w.smem_size
        return (f"mbarrier at shared address {off - blk * w.smem_size:#x} of block "
                f"{tuple(w.block_ids[blk])}")

    def _word(self, off: int) -> int:
        return int(self.wave.smem[off:off + 8].view(np.uint64)[0])

    def _store(self, off: int, b: _Barrier) -> None:
        b.word = encode(b.pending, b.expected, b.tx, b.phase)
        self.wave.smem[off:off + 8].view(np.uint64)[0] = np.uint64(b.word)

    def get(self, off: int, thread: int, inst: Instruction) -> _Barrier:
        """The valid object at ``off`` (an error if there is none)."""
        b = self.objects.get(off)
        if b is None:
            self._fail(thread, inst, f"{self._describe(off)} is not a valid mbarrier object "
                       "(never initialised by mbarrier.init, or invalidated)")
        if self._word(off) != b.word:
            self._fail(thread, inst, f"{self._describe(off)} was overwritten by an ordinary "
                       "store while valid (only mbarrier instructions may access a valid "
                       "object; PTX ISA 9.7.13.15.3)")
        return b

    def init(self, off: int, count: int, thread: int, inst: Instruction) -> None:
        if off in self.objects and self._word(off) == self.objects[off].word:
            self._fail(thread, inst, f"mbarrier.init of a valid object ({self._describe(off)}"
                       "): invalidate it with mbarrier.inval first")
        if not 1 <= count <= MAX_COUNT:
            self._fail(thread, inst, f"mbarrier.init count {count} outside 1..{MAX_COUNT}")
        b = _Barrier(count)
        self.objects[off] = b
        self._store(off, b)
        self.operations += 1

    def inval(self, off: int, thread: int, inst: Instruction) -> None:
        self.get(off, thread, inst)
        del self.objects[off]
        self.wave.smem[off:off + 8] = 0
        self.operations += 1

    def _settle(self, off: int, b: _Barrier) -> None:
        if b.pending == 0 and b.tx == 0:
            b.phase += 1
            b.pending = b.expected
            self.completions += 1
        self._store(off, b)
        self.operations += 1

    def tx(self, off: int, delta: int, thread: int, inst: Instruction) -> None:
        """expect_tx (``delta`` > 0) or complete_tx (< 0)."""
        b = self.get(off, thread, inst)
        new = b.tx + delta
        if not -MAX_COUNT <= new <= MAX_COUNT:
            self._fail(thread, inst, f"tx-count of {self._describe(off)} would become {new}, "
                       f"outside -{MAX_COUNT}..{MAX_COUNT}")
        b.tx = new
        self._settle(off, b)

    def arrive(self, off: int, count: int, drop: bool, no_complete: bool, thread: int,
               inst: Instruction) -> int:
        """One arrival of ``count``; returns the state."""
        b = self.get(off, thread, inst)
        if not 1 <= count <= MAX_COUNT:
            self._fail(thread, inst, f"arrival count {count} outside 1..{MAX_COUNT}")
        if count > b.pending:
            self._fail(thread, inst, f"{count} arrival(s) on {self._describe(off)}, which "
                       f"has only {b.pending} pending in phase {b.phase}")
        if drop:
            if count > b.expected:
                self._fail(thread, inst, f"arrive_drop of {count} below zero expected "
                           f"arrivals ({self._describe(off)} expects {b.expected})")
            b.expected -= count
        b.pending -= count
        if no_complete and b.pending == 0 and b.tx == 0:
            self._fail(thread, inst, f".noComplete arrival completes the phase of "
                       f"{self._describe(off)} (undefined in the PTX ISA)")
        token = state_token(b.pending, b.phase)
        self._settle(off, b)
        return token

    def complete(self, off: int, want: int, parity: bool, thread: int,
                 inst: Instruction) -> bool:
        """Whether the phase named by ``want`` (a state, or a parity) has completed."""
        b = self.get(off, thread, inst)
        if parity:
            return (b.phase & 1) != (want & 1)
        if not want & _VALID:
            self._fail(thread, inst, f"{want:#x} is not a state returned by mbarrier.arrive")
        ph = (want >> 32) & (_PHASE_MOD - 1)
        cur = b.phase % _PHASE_MOD
        if ph == cur:
            return False
        if ph == (cur - 1) % _PHASE_MOD:
            return True
        self._fail(thread, inst, f"state of phase {ph} waited on {self._describe(off)}, "
                   f"whose phase is {b.phase} (a state must be of the current or the "
                   "previous phase)")
        return False

    # ------------------------------------------------------------ deadlock report
    def deadlock(self, sched: Any, suspended: np.ndarray, bar_waiting: np.ndarray) -> None:
        """Raise the DeadlockError of a launch whose suspended waiters (warps
        ``suspended``) can never go on."""
        from .synccheck import lanes_text
        w = self.wave
        by_barrier: dict[int, list[str]] = {}
        describe: dict[int, Any] = {}
        for wp in suspended.tolist():
            op, threads, keys, wants = sched.mb_waiting[int(wp)]
            first = int(np.flatnonzero(w.warp_block == w.warp_block[wp])[0])
            for key in np.unique(keys).tolist():
                sel = keys == key
                lanes = np.zeros(32, bool)
                lanes[threads[sel] % 32] = True
                describe[key] = op.describe
                by_barrier.setdefault(key, []).append(
                    f"warp {wp - first} of block {tuple(w.block_ids[w.warp_block[wp]])} "
                    f"lanes {lanes_text(lanes)} at line {op.inst.line} ({op.inst.text!r}, "
                    f"{op.wanted(int(wants[sel][0]))})")
        lines = []
        for key in sorted(by_barrier):
            who = by_barrier[key]
            shown = "; ".join(who[:4]) + (f"; and {len(who) - 4} more warps" if len(who) > 4
                                          else "")
            lines.append(f"  {describe[key](key)}; waiting: {shown}")
        extra = ""
        if bar_waiting.size:
            at = sorted({sched.ops[int(sched.warp_pc[x]) - 1].inst.line for x in bar_waiting})
            extra = f"\n  {bar_waiting.size} warp(s) also wait at bar.sync (lines {at})"
        raise DeadlockError(
            f"kernel {w.kernel.name}: barrier deadlock: threads wait for mbarrier or "
            "cluster barrier phases "
            "that can never complete (no other thread can run, and none performed an "
            "mbarrier operation or exited since the waiters last timed out):\n" + "\n".join(lines)
            + extra)


def _complete_bulk_copies(ctx: Any, offsets: np.ndarray) -> None:
    """Before a wait tests the barriers at shared ``offsets``: complete the bulk copies
    (:mod:`hardware.simt.tma`) queued on them, if the wave has any."""
    st = getattr(ctx, "bulk_copies", None)
    if st is None or not st.queue:
        return
    for off in np.unique(offsets).tolist():
        st.flush(int(off))


state_of = MBarriers.of


class WaitOp(Op):
    """A wait the scheduler may suspend a warp at (kind "mbwait"): ``probe(ix, ex)`` ->
    (ready, keys, threads, wanted) of the lanes, read before it runs the wait;
    ``describe(key)`` the barrier and its state, ``wanted(w)`` what a lane waits for
    (for the deadlock report); ``blocking`` waits never time out."""

    __slots__ = ("probe", "describe", "wanted", "blocking")

    def __init__(self, inst: Instruction, kind: str, fn: Any) -> None:
        super().__init__(inst, kind, fn)
        self.blocking = False  # True: never times out (barrier.cluster.wait)


# ------------------------------------------------------------------ compilers
_SEMS = ("release", "relaxed", "acquire", "acq_rel")


def _parse(inst: Instruction) -> tuple[str, set, str]:
    parts = inst.parts
    if len(parts) < 3 or parts[-1] != "b64":
        raise _unsupported(inst, "mbarrier instructions take .b64")
    verb = parts[1]
    mods = set(parts[2:-1])
    space = "generic"
    for p in list(mods):
        if p.split("::")[0] == "shared":
            space = "cluster" if p == "shared::cluster" else "shared"
            mods.discard(p)
    return verb, mods, space


def _locator(inst: Instruction, ctx: Any, op: Any, space: str, remote_ok: bool) -> Any:
    """f(ix, ex) -> (offsets into the wave's shared memory, thread ids)."""
    get = _address(op, ctx, inst, "generic" if space == "generic" else "shared")

    def locate(ix: Any, ex: Any) -> tuple[np.ndarray, np.ndarray]:
        cnt = ctx.count(ix)
        a = np.broadcast_to(np.asarray(get(ix), np.int64), (cnt,))
        th = ctx._thread_ids(ix)
        if space == "generic":
            a = generic_to_shared(ctx, a, th, inst,
                                  "mbarrier address {:#x} is not a shared-memory address")
        cl = getattr(ctx, "cluster", None)
        if not remote_ok and cl is not None and a.size and int(a.max()) >= cl.UNIT:
            own = cl.own_address(ix, a)
            if own is None:
                k = int(np.argmax(a >= cl.UNIT))
                raise ExecutionError(f"{ctx.location(int(th[k]), inst)}: {inst.parts[1]} on "
                                     "an mbarrier of another CTA (waits, init and inval take "
                                     "the executing CTA's barriers only)")
            a = own
        off = ctx._locate("shared", ix, ex, a, 8, inst, "atom")[1]
        return off, th
    return locate


def _count_getter(inst: Instruction, ctx: Any, op: Any) -> Any:
    return getter(op, TYPES["u32"], ctx, inst)


def _race(ctx: Any, ix: Any, off: np.ndarray, inst: Instruction, release: bool,
          acquire: bool, threads: np.ndarray) -> None:
    race = ctx.tools.get("racecheck") if ctx.tools else None
    if race is None or not threads.size:
        return
    if release:
        race.fence(ctx, threads, inst)
    ctx._notify("atom", "shared", ix, off, 8, inst)
    if acquire:
        race.fence(ctx, threads, inst)


def c_mbarrier(inst: Instruction, ctx: Any) -> Op:
    """Every mbarrier instruction (see the module docstring)."""
    verb, mods, space = _parse(inst)
    st = state_of(ctx)
    ops = inst.operands
    relaxed = "relaxed" in mods
    bad = mods - {"release", "relaxed", "acquire", "cta", "cluster", "expect_tx",
                  "noComplete", "parity"}
    if bad:
        raise _unsupported(inst, f"mbarrier modifier(s) {sorted(bad)}")
    scoped = mods & {"cta", "cluster"}
    if scoped and not mods & {"release", "relaxed", "acquire"} and verb != "pending_count":
        raise PtxTypeError(f"line {inst.line}: {inst.text!r}: .{scoped.pop()} needs "
                           ".release or .relaxed (arrivals) or .acquire or .relaxed "
                           "(waits) (PTX ISA 9.7.13.15)")
    if verb in ("init", "inval"):
        if space == "cluster" or mods:
            raise _unsupported(inst, f"mbarrier.{verb} takes only .shared{{::cta}}")
        if len(ops) != (2 if verb == "init" else 1):
            raise _unsupported(inst, f"mbarrier.{verb}: wrong number of operands")
        loc = _locator(inst, ctx, ops[0], space, False)
        gc = _count_getter(inst, ctx, ops[1]) if verb == "init" else None

        def init_inval(ix: Any, ex: Any) -> None:
            off, th = loc(ix, ex)
            if gc is not None:
                cnt = np.broadcast_to(np.asarray(gc(ix), np.int64), off.shape)
                for o, c, t in zip(off.tolist(), cnt.tolist(), th.tolist()):
                    st.init(o, c, t, inst)
                ctx.sinit[off[:, None] + np.arange(8)] = True
                if ctx.access_tools:
                    ctx._notify("st", "shared", ix, off, 8, inst)
            else:
                for o, t in zip(off.tolist(), th.tolist()):
                    st.inval(o, t, inst)
                if ctx.access_tools:
                    ctx._notify("st", "shared", ix, off, 8, inst)
        return Op(inst, "alu", init_inval)
    if verb in ("expect_tx", "complete_tx"):
        if len(ops) != 2:
            raise _unsupported(inst, f"mbarrier.{verb} takes [addr], txCount")
        loc = _locator(inst, ctx, ops[0], space, True)
        gt = _count_getter(inst, ctx, ops[1])
        sign = 1 if verb == "expect_tx" else -1

        def tx(ix: Any, ex: Any) -> None:
            off, th = loc(ix, ex)
            n = np.broadcast_to(np.asarray(gt(ix), np.int64), off.shape)
            for o, c, t in zip(off.tolist(), n.tolist(), th.tolist()):
                st.tx(o, sign * c, t, inst)
            _race(ctx, ix, off, inst, not relaxed, False, th)
        return Op(inst, "alu", tx)
    if verb in ("arrive", "arrive_drop"):
        return _c_arrive(inst, ctx, st, verb == "arrive_drop", mods, space)
    if verb in ("test_wait", "try_wait"):
        return _c_wait(inst, ctx, st, mods, space)
    if verb == "pending_count":
        if len(ops) != 2 or mods or space != "generic":
            raise _unsupported(inst, "mbarrier.pending_count.b64 count, state")
        gs = getter(ops[1], TYPES["b64"], ctx, inst)
        put = setter(ops[0], TYPES["u32"], ctx, inst)
        return Op(inst, "alu", lambda ix, ex: put(
            ix, (np.asarray(gs(ix)).astype(np.uint64) & np.uint64(MAX_COUNT)).astype(np.uint32)))
    raise _unsupported(inst, f"mbarrier.{verb} is not an mbarrier instruction")


def _c_arrive(inst: Instruction, ctx: Any, st: MBarriers, drop: bool, mods: set,
              space: str) -> Op:
    ops = inst.operands
    expect = "expect_tx" in mods
    if expect and len(ops) != 3:
        raise _unsupported(inst, "arrive.expect_tx takes state, [addr], txCount")
    if not 2 <= len(ops) <= 3:
        raise _unsupported(inst, "mbarrier.arrive takes state, [addr]{, count}")
    if space == "cluster" and not isinstance(ops[0], Sink):
        raise PtxTypeError(f"line {inst.line}: {inst.text!r}: an arrival on "
                           ".shared::cluster returns no state: its destination must be _ "
                           "(PTX ISA 9.7.13.15.13)")
    if "acquire" in mods:
        raise PtxTypeError(f"line {inst.line}: {inst.text!r}: arrivals take .release or "
                           ".relaxed (PTX ISA 9.7.13.15.13)")
    no_complete = "noComplete" in mods
    loc = _locator(inst, ctx, ops[1], space, True)
    third = _count_getter(inst, ctx, ops[2]) if len(ops) == 3 else None
    put = setter(ops[0], TYPES["b64"], ctx, inst)
    release = "relaxed" not in mods

    def arrive(ix: Any, ex: Any) -> None:
        off, th = loc(ix, ex)
        n = off.shape[0]
        v = np.ones(n, np.int64) if third is None else \
            np.broadcast_to(np.asarray(third(ix), np.int64), (n,))
        race = ctx.tools.get("racecheck") if ctx.tools else None
        if release and race is not None:
            race.fence(ctx, th, inst)  # the arrival releases what the thread did
        tokens = np.empty(n, np.uint64)
        for i, (o, c, t) in enumerate(zip(off.tolist(), v.tolist(), th.tolist())):
            if expect:
                st.tx(o, c, t, inst)
                c = 1
            tokens[i] = st.arrive(o, c, drop, no_complete, t, inst)
        if ctx.access_tools:
            ctx._notify("atom", "shared", ix, off, 8, inst)
        put(ix, tokens)
    return Op(inst, "alu", arrive)


def _c_wait(inst: Instruction, ctx: Any, st: MBarriers, mods: set, space: str) -> Op:
    ops = inst.operands
    verb = inst.parts[1]
    most = 4 if verb == "try_wait" else 3
    if not 3 <= len(ops) <= most:
        raise _unsupported(inst, f"mbarrier.{verb} takes waitComplete, [addr], "
                                 f"state{' {, suspendTimeHint}' if most == 4 else ''}")
    if space == "cluster":
        raise PtxTypeError(f"line {inst.line}: {inst.text!r}: waits take .shared{{::cta}} "
                           "(PTX ISA 9.7.13.15.16)")
    if "release" in mods:
        raise PtxTypeError(f"line {inst.line}: {inst.text!r}: waits take .acquire or "
                           ".relaxed (PTX ISA 9.7.13.15.16)")
    parity = "parity" in mods
    if isinstance(ops[2], Imm) and not parity:
        raise _unsupported(inst, "the state of a wait is a .b64 register")
    loc = _locator(inst, ctx, ops[1], space, False)
    gw = getter(ops[2], TYPES["u32" if parity else "b64"], ctx, inst)
    if len(ops) == 4:
        getter(ops[3], TYPES["u32"], ctx, inst)  # the suspend-time hint: checked, no effect
    put = setter(ops[0], TYPES["pred"], ctx, inst)
    acquire = "relaxed" not in mods

    def probe(ix: Any, ex: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        off, th = loc(ix, ex)
        _complete_bulk_copies(ctx, off)  # bulk copies signalling these barriers land now
        want = np.broadcast_to(np.asarray(gw(ix)).astype(np.uint64), off.shape)
        ok = np.array([st.complete(o, int(w), parity, t, inst)
                       for o, w, t in zip(off.tolist(), want.tolist(), th.tolist())], bool)
        return ok, off, th, want

    def wait(ix: Any, ex: Any) -> None:
        ok, off, th, _ = probe(ix, ex)
        st.waits += int(ex.mask.any(axis=1).sum())
        if ctx.stats is not None:
            ctx.stats.mbarrier_waits += int(ok.size)
            ctx.stats.mbarrier_waits_completed += int(ok.sum())
        put(ix, ok)
        if ok.any():
            sel = np.flatnonzero(ok)
            _race(ctx, th[sel] if not ok.all() else ix, off[sel], inst, False, acquire, th[sel])
    op = WaitOp(inst, "mbwait", wait)
    op.probe = probe

    def describe(off: int) -> str:
        b = st.objects.get(off)
        state = ("not valid" if b is None else
                 f"phase {b.phase} (parity {b.phase & 1}), {b.pending} of {b.expected} "
                 "arrivals pending, " + (f"{b.tx} tx bytes outstanding" if b.tx >= 0 else
                                          f"tx-count {b.tx} (copies completed {-b.tx} bytes "
                                          "more than expect_tx announced)"))
        return f"{st._describe(off)}: {state}"
    op.describe = describe
    op.wanted = (lambda v: f"parity {v & 1}") if parity else (
        lambda v: f"the state of phase {(v >> 32) & (_PHASE_MOD - 1)}")
    return op


COMPILERS = {"mbarrier": c_mbarrier}
