"""The warp scheduler: runs every warp of a :class:`~hardware.simt.executor.Wave` to
completion under the SIMT-stack model described in :mod:`hardware.simt.executor`.

One scheduling step picks the warps whose top stack entry has the lowest pc (the
*group*), runs them together through the straight-line code that follows (every ALU
instruction once for all of them, as one NumPy operation over their active lanes), and
ends at the first branch, exit, barrier or reconvergence point, which it then applies
warp by warp where the warps disagree. Statistics (warp and thread instructions per
line, divergent branches, stack depth, barriers) are counted as the instructions run.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .access import Exec
from .errors import DeadlockError, ExecutionError, StepLimitError
from .executor import Wave
from .instructions import Op
from .progress import LOOK_EVERY, ProgressWatch
from . import racecheck as _racecheck  # noqa: F401 (registers the tool)
from .synccheck import deadlock_detail

__all__ = ["BARRIER_MODES", "SCHEDULING_MODES", "YIELD_AFTER", "WarpScheduler", "run_wave"]

BARRIER_MODES = ("strict", "warp")
SCHEDULING_MODES = ("independent", "lockstep")
#: backward branches a path (or a warp) takes in a row while other threads wait for it
#: before it yields to them under independent thread scheduling
YIELD_AFTER = 64

#: warp states (SUSPENDED: at an mbarrier wait, see :mod:`hardware.simt.mbarrier`)
RUNNING, WAITING, DONE, SUSPENDED = 0, 1, 2, 3
_NO_PC = 1 << 60  # the pc of a warp that cannot run now
HELD = -2  # the wait_id of a warp its instruction holds (WarpScheduler._hold)


def run_wave(wave: Wave, max_steps: int | None, barrier_mode: str = "strict",
             scheduling: str = "independent", budget: Any = None) -> None:
    """Execute every warp of ``wave`` to completion; a warp that executes more than
    ``max_steps`` instructions stops the launch (StepLimitError naming it). With
    ``max_steps`` None no warp is bounded: a wave that stops making progress stops the
    launch instead (LivelockError, :mod:`hardware.simt.progress`). ``budget``, when
    given, is called now and then with the wave's warp instructions so far and raises
    to stop the launch (the launch-wide bounds of :meth:`hardware.simt.Module.launch`).
    ``barrier_mode`` and ``scheduling`` are described in
    :meth:`hardware.simt.Module.launch` and :mod:`hardware.simt.executor`."""
    WarpScheduler(wave, max_steps, barrier_mode, scheduling, budget).run()


def _guarded(op: Op, rows: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The lanes of ``mask`` (G, 32; threads ``rows``) whose guard predicate lets ``op``
    execute (all of them for an unguarded op)."""
    guard = op.guard
    if guard is None:
        return mask
    gr = guard[rows]
    return mask & (~gr if op.guard_neg else gr)


class _Group:
    """The warps that run together in one scheduling step, from pc ``start``:
    ``warps`` (G,), their active ``mask`` and thread ``rows`` (G, 32), ``ix`` the
    register-file index of their active threads (``slice(None)`` for every thread of
    the wave), ``nact`` the number of active threads, ``stop`` the pc where the
    straight-line run must end (another warp's pc or a reconvergence point ahead),
    ``others`` the lowest pc of the warps left out, ``budget`` the steps the group may
    take before a warp exceeds ``max_steps``, ``alone`` whether they are the only warps
    that can run and none has a divergent path on its stack (see :meth:`_jump`)."""

    __slots__ = ("start", "warps", "mask", "rows", "ix", "nact", "ex", "stop", "others",
                 "budget", "alone")


class WarpScheduler:
    """The scheduling state of one wave: per warp its SIMT stack (entries ``[pc,
    reconvergence pc, active mask, backward branches in a row]``), the top entry
    mirrored in ``warp_pc`` / ``top_rpc`` / ``top_mask``, its ``state`` (RUNNING,
    WAITING at a barrier, DONE) and its executed ``steps``; per block the threads
    ``arrived`` at each barrier and the threads that ``exited``."""

    DONE = DONE

    def __init__(self, wave: Wave, max_steps: int | None, barrier_mode: str = "strict",
                 scheduling: str = "independent", budget: Any = None) -> None:
        self.wave = wave
        # no per-warp bound: progress detection (self.watch) stops a livelock instead
        self.max_steps = max_steps if max_steps is not None else 1 << 62
        self.independent = scheduling == "independent"
        self.exited_threads_arrive = barrier_mode == "warp"
        self.ops = ops = wave.ops
        self.n = n = len(ops)
        self.rpc_of = wave.kernel.reconvergence
        self.warp_count = [0] * (n + 1)     # warp instructions per pc (control)
        self.thread_count = [0] * (n + 1)   # thread instructions per pc (control)
        # straight-line runs are counted as differences: +count at their first pc,
        # -count after their last (summed up in _record_statistics)
        self.run_warps = [0] * (n + 2)
        self.run_threads = [0] * (n + 2)
        # the first control instruction at or after each pc (n: none)
        self.next_control = [n] * (n + 1)
        for pc in range(n - 1, -1, -1):
            self.next_control[pc] = pc if ops[pc].kind != "alu" else self.next_control[pc + 1]
        n_warps = wave.W
        self.n_warps = n_warps
        self.rows_all = wave.rows_all
        self.all_warps = np.arange(n_warps, dtype=np.int64)
        self.warp_block = wave.warp_block
        exists = wave.exists.reshape(n_warps, 32)
        self.warp_pc = np.zeros(n_warps, dtype=np.int64)
        self.top_rpc = np.full(n_warps, n, dtype=np.int64)
        self.top_mask = exists.copy()
        self.state = np.where(self.top_mask.any(axis=1), RUNNING, DONE).astype(np.int8)
        # each warp's first entry holds a row of one copy of the masks (its own memory:
        # rows are written in place, never shared with top_mask or another warp)
        first = exists.copy()
        self.stacks: list[list[list[Any]]] = [[[0, n, first[w], 0]] for w in range(n_warps)]
        self.depth = np.ones(n_warps, dtype=np.int64)
        self.steps = np.zeros(n_warps, dtype=np.int64)  # instructions executed per warp
        self.yielded = np.zeros(n_warps, dtype=bool)    # warps that gave way to the others
        self.any_yielded = False
        self.spin = np.zeros(n_warps, dtype=np.int64)   # backward branches while others wait
        self.max_depth = 1
        self.divergent = 0
        self.barriers = 0
        n_blocks = len(wave.block_ids)
        self.n_blocks = n_blocks
        bx, by, bz = wave.cfg.block
        self.threads_per_block = bx * by * bz
        self.arrived: dict[int, np.ndarray] = {}
        self.wait_id = np.full(n_warps, -1, dtype=np.int64)  # the barrier a warp waits at
        # mbarrier waits: the waiters' barriers, the completions seen, the operation
        # count at the last timeout, the warps whose next wait times out
        self.mb_waiting: dict[int, tuple] = {}
        self.mb_seen = 0
        self.mb_round: tuple = ()
        self.timeout = np.zeros(n_warps, dtype=bool)
        self.exited = np.zeros(n_blocks, dtype=np.int64)  # exited threads of each block
        # the sanitizer's racecheck and synccheck (hardware.simt.racecheck / .synccheck)
        # read the stacks (live lanes) through the wave
        wave.scheduler = self
        self.race = wave.tools.get("racecheck")
        self.sync = wave.tools.get("synccheck")
        self.watch = ProgressWatch(self, max_steps is None, budget) \
            if max_steps is None or budget is not None else None

    # ------------------------------------------------------------------ the main loop
    def run(self) -> None:
        """Run scheduling steps until no warp can run; then record the statistics."""
        watch = self.watch
        look = LOOK_EVERY if watch is not None else -1
        while True:
            group = self._next_group()
            if group is None:
                break
            while True:
                pc = self._run_straight_line(group)
                more = self._end_run(group, pc)
                look -= 1
                if look == 0:
                    look = LOOK_EVERY
                    watch.look()
                if not more:
                    break
        self._record_statistics()

    def _next_group(self) -> _Group | None:
        """The warps to run next: every runnable warp at the lowest pc (warps that
        yielded wait until every runnable warp has yielded). None when no warp can run
        (a :class:`DeadlockError` when some still wait at a barrier)."""
        state, warp_pc = self.state, self.warp_pc
        mb = self.wave.mbarriers
        if mb is not None and mb.completions != self.mb_seen:
            # a phase completed: the suspended waiters try again
            self.mb_seen = mb.completions
            state[state == SUSPENDED] = RUNNING
        if self.any_yielded:
            live = (state == RUNNING) & ~self.yielded
            if not live.any():
                self.yielded[:] = False
                self.any_yielded = False
                live = state == RUNNING
            cand = np.where(live, warp_pc, _NO_PC)
        else:
            cand = np.where(state == RUNNING, warp_pc, _NO_PC)
        pc = int(cand.min())
        if pc >= _NO_PC and (state == SUSPENDED).any():
            sus = np.flatnonzero(state == SUSPENDED)
            progress = (mb.operations, sum(int(s[0][2].sum()) for s in self.stacks if s))
            if progress == self.mb_round:
                mb.deadlock(self, sus, np.flatnonzero(state == WAITING))
            # nothing else can run: the suspended waits time out (return false)
            self.mb_round = progress
            self.timeout[sus] = True
            state[sus] = RUNNING
            return self._next_group()
        if pc >= _NO_PC:
            if (state == WAITING).any():
                held = np.flatnonzero((state == WAITING) & (self.wait_id == HELD))
                if held.size:
                    self.ops[int(warp_pc[held[0]]) - 1].deadlock(self, held)
                _deadlock(self.wave, state, warp_pc, self.arrived, self.ops,
                          self if self.sync is not None else None)
            return None
        at_pc = cand == pc
        g = _Group()
        if at_pc.all():
            warps = self.all_warps
            g.others = _NO_PC
        else:
            warps = np.flatnonzero(at_pc)
            g.others = int(cand[~at_pc].min())
        g.start = pc
        g.warps = warps
        g.mask = m = self.top_mask[warps]
        g.rows = rows = self.rows_all[warps]
        g.ix = slice(None) if warps.shape[0] == self.n_warps and m.all() else rows[m]
        g.nact = int(m.sum())
        g.ex = Exec(warps, rows, m, m)
        rp = self.top_rpc[warps]
        ahead = rp[rp > pc]
        g.stop = min(g.others, int(ahead.min())) if ahead.size else g.others
        g.budget = self.max_steps - int(self.steps[warps].max())
        g.alone = g.others == _NO_PC and not self.any_yielded and bool(
            (self.depth[warps] == 1).all()) and bool(m.any(axis=1).all())
        return g

    def _run_straight_line(self, g: _Group) -> int:
        """Execute the ALU instructions from ``g.start`` for the whole group, up to the
        first control instruction, the end of the kernel or ``g.stop``; returns the pc
        reached."""
        pc0 = g.start
        end = self.next_control[pc0]
        if end > g.stop:
            end = g.stop
        if end == pc0:
            return pc0
        limit = pc0 + g.budget if end > pc0 + g.budget else end
        n_group = g.warps.shape[0]
        self.run_warps[pc0] += n_group
        self.run_warps[limit] -= n_group
        self.run_threads[pc0] += g.nact
        self.run_threads[limit] -= g.nact
        wave, ix, ex = self.wave, g.ix, g.ex
        wave.cur = ex
        for op in self.ops[pc0:limit]:
            guard = op.guard
            if guard is None:
                op.fn(ix, ex)
                continue
            sel = guard[ix]
            if op.guard_neg:
                sel = ~sel
            if sel.all():
                op.fn(ix, ex)
            elif sel.any():
                # only the lanes whose guard holds execute
                ix2 = np.flatnonzero(sel) if isinstance(ix, slice) else ix[sel]
                rows, m = g.rows, g.mask
                ex2 = Exec(g.warps, rows, _guarded(op, rows, m), m)
                wave.cur = ex2
                op.fn(ix2, ex2)
                wave.cur = ex
        if limit < end:
            _step_limit(wave, self.ops[limit], self.max_steps, g.warps, self.steps)
        return end

    def _end_run(self, g: _Group, pc: int) -> bool:
        """Account for the straight-line run that ended at ``pc`` and apply what ended
        it: the end of the kernel, a reconvergence point, or a control instruction.
        Returns True when the group goes on from ``g.start`` as it is (:meth:`_jump`)."""
        if g.alone and pc < self.n and self.ops[pc].kind == "bra" and self._jump(g, pc):
            return True
        warps, m = g.warps, g.mask
        self.steps[warps] += pc - g.start
        self.warp_pc[warps] = pc
        if pc >= self.n:
            # fell off the end of the kernel: behaves like ret
            self._exit_lanes(warps, m)
            self._note_exits(warps, m)
            return False
        if (self.top_rpc[warps] == pc).any():
            self._pop_reconverged(warps)  # reached a reconvergence point: regroup first
            return False
        op = self.ops[pc]
        if op.kind == "alu":
            return False  # stopped where another warp waits: the next step regroups
        if op.kind == "mbwait":
            self._mbarrier_wait(g, op, pc)
            return False
        self.warp_count[pc] += warps.shape[0]
        self.thread_count[pc] += g.nact
        if pc - g.start >= g.budget:
            _step_limit(self.wave, op, self.max_steps, warps, self.steps)
        self.steps[warps] += 1
        taken = _guarded(op, g.rows, m)
        if op.kind == "bra":
            self._branch(g, op, pc, taken)
        elif op.kind == "brx":
            self._branch_indexed(g, op, pc, taken)
        elif op.kind == "exit":
            self._exit(warps, pc, taken)
        elif op.kind == "bar":
            self._barrier(warps, op, pc, taken)
        elif op.kind == "hold":
            self._hold(warps, op, pc, taken)
        else:  # pragma: no cover
            raise AssertionError(op.kind)
        return False

    # ------------------------------------------------------------------ control flow
    def _jump(self, g: _Group, pc: int) -> bool:
        """The branch at ``pc`` that ends a straight-line run, when every lane of the
        group takes it or none does while the group is ``alone`` (no other warp can run,
        no divergent path is pending): the group goes on at the new pc with the same
        warps and lanes, exactly as :meth:`_next_group` would regroup them after
        :meth:`_branch` (which would push nothing, yield nothing and pop nothing: every
        stack holds one entry, reconverging at the end of the kernel). Returns False,
        changing nothing, otherwise."""
        op = self.ops[pc]
        guard = op.guard
        if guard is None:
            new_pc = op.target
        else:
            sel = guard[g.ix]  # the guard of the group's active lanes
            if op.guard_neg:
                sel = ~sel
            if sel.all():
                new_pc = op.target
            elif not sel.any():
                new_pc = pc + 1
            else:
                return False
        if new_pc >= self.n:
            return False
        warps = g.warps
        ran = pc - g.start + 1  # the straight-line run and the branch, for every warp
        self.warp_count[pc] += warps.shape[0]
        self.thread_count[pc] += g.nact
        self.steps[warps] += ran
        if ran > g.budget:
            _step_limit(self.wave, op, self.max_steps, warps, self.steps)
        self.warp_pc[warps] = new_pc
        g.budget -= ran
        g.start = new_pc
        return True

    # ------------------------------------------------------------------ control flow
    def _branch(self, g: _Group, op: Op, pc: int, taken: np.ndarray) -> None:
        """``bra`` for the group: lanes in ``taken`` (G, 32) go to the target; warps
        whose lanes disagree diverge (:meth:`_diverge`)."""
        warps, m = g.warps, g.mask
        target = op.target
        if op.guard is None:
            self.warp_pc[warps] = target
            took = uniform = warps
        else:
            t_any = taken.any(axis=1)
            not_taken = m & ~taken
            nt_any = not_taken.any(axis=1)
            self.warp_pc[warps] = np.where(t_any, target, pc + 1)
            div = t_any & nt_any
            if div.any():
                self._diverge(warps, pc, target, taken, not_taken, np.flatnonzero(div))
            took = warps[t_any]
            uniform = warps[t_any & ~nt_any]
        if self.independent and target <= pc:
            self._backward_branch(took, uniform, g.others)
        self._pop_reconverged(warps)

    def _branch_indexed(self, g: _Group, op: Op, pc: int, taken: np.ndarray) -> None:
        """``brx.idx`` for the group: each lane in ``taken`` (G, 32) goes to entry
        ``index`` of the op's targets, the others (a false guard) to ``pc + 1``; a warp
        whose lanes go to several places diverges into one path per place, all
        reconverging at the branch's immediate post-dominator (:meth:`_diverge_many`)."""
        warps, m = g.warps, g.mask
        n = op.targets.shape[0]
        idx = op.index[g.rows].astype(np.int64)
        bad = taken & ((idx < 0) | (idx >= n))
        if bad.any():
            w, lane = (int(v) for v in np.argwhere(bad)[0])
            t = int(g.rows[w, lane])
            raise ExecutionError(
                f"{self.wave.location(t, op.inst)}: brx.idx index {int(idx[w, lane])} is "
                f"outside its list of {n} targets (undefined behaviour, PTX ISA 9.7.12.2)")
        dest = np.where(taken, op.targets[np.clip(idx, 0, n - 1)], pc + 1)
        took, uniform = [], []
        for i, w in enumerate(warps.tolist()):
            places = np.unique(dest[i][m[i]])
            if places.size == 1:
                self.warp_pc[w] = int(places[0])
                if places[0] <= pc:
                    took.append(w)
                    uniform.append(w)
                continue
            self._diverge_many(w, pc, [(int(d), m[i] & (dest[i] == d)) for d in places])
            if (places <= pc).any():
                took.append(w)
        if self.independent and took:
            self._backward_branch(np.array(took, np.int64), np.array(uniform, np.int64),
                                  g.others)
        self._pop_reconverged(warps)

    def _diverge_many(self, w: int, pc: int, paths: list) -> None:
        """Push the paths ``[(pc, lanes)]`` of a multiway branch on warp ``w``'s stack,
        all reconverging at the branch's immediate post-dominator (the two-way case is
        :meth:`_diverge`)."""
        r = self.rpc_of[pc]
        s = self.stacks[w]
        if len(s) > 1 and s[-1][1] == r:
            s.pop()       # the top entry already reconverges at r (see _diverge)
        else:
            s[-1][0] = r
        for start, lanes in reversed(paths):    # the lowest pc on top, as bra's taken path
            if start != r:
                s.append([start, r, lanes.copy(), 0])
        top = s[-1]
        self.warp_pc[w] = top[0]
        self.top_rpc[w] = top[1]
        self.top_mask[w] = top[2]
        self.depth[w] = len(s)
        self.divergent += 1
        if len(s) > self.max_depth:
            self.max_depth = len(s)

    def _diverge(self, warps: np.ndarray, pc: int, target: int, taken: np.ndarray,
                 not_taken: np.ndarray, which: np.ndarray) -> None:
        """Push the two paths of a divergent branch on the stacks of ``warps[which]``,
        both reconverging at the branch's immediate post-dominator."""
        r = self.rpc_of[pc]
        stacks = self.stacks
        warp_pc, top_rpc, top_mask, depth = self.warp_pc, self.top_rpc, self.top_mask, self.depth
        for i in which.tolist():
            w = int(warps[i])
            s = stacks[w]
            if len(s) > 1 and s[-1][1] == r:
                # the top entry already reconverges at r (a loop's divergent exit):
                # lanes whose path starts at r drop out (the entry below waits at r
                # with them), the others replace the top
                s.pop()
            else:
                s[-1][0] = r
            if pc + 1 != r:
                s.append([pc + 1, r, not_taken[i].copy(), 0])
            if target != r:
                s.append([target, r, taken[i].copy(), 0])
            top = s[-1]
            warp_pc[w] = top[0]
            top_rpc[w] = top[1]
            top_mask[w] = top[2]
            depth[w] = len(s)
            self.divergent += 1
            if len(s) > self.max_depth:
                self.max_depth = len(s)

    def _backward_branch(self, took: np.ndarray, uniform: np.ndarray, others: int) -> None:
        """Independent thread scheduling: a path that keeps looping while other threads
        of its warp wait for it yields to them (:func:`_spin_yield`), and a warp that
        keeps looping while other warps could run gives way to them."""
        for w in uniform[self.depth[uniform] > 1].tolist():
            if _spin_yield(self.stacks[w], int(self.warp_pc[w])):
                self._load_top(w)
        if (others < _NO_PC or self.any_yielded) and took.size:
            spin = self.spin
            spin[took] += 1
            over = took[spin[took] >= YIELD_AFTER]
            if over.size:
                spin[over] = 0
                self.yielded[over] = True
                self.any_yielded = True

    def _exit(self, warps: np.ndarray, pc: int, lanes: np.ndarray) -> None:
        """``ret`` / ``exit`` for the lanes ``lanes`` (G, 32) of ``warps``."""
        self.warp_pc[warps] = pc + 1
        self._exit_lanes(warps, lanes)
        live = warps[self.state[warps] == RUNNING]
        if live.size:
            self._pop_reconverged(live)
        self._note_exits(warps, lanes)

    def _load_top(self, w: int) -> None:
        """Mirror the top entry of warp ``w``'s stack in the per-warp arrays."""
        s = self.stacks[w]
        top = s[-1]
        self.warp_pc[w] = top[0]
        self.top_rpc[w] = top[1]
        self.top_mask[w] = top[2]
        self.depth[w] = len(s)

    def _pop_reconverged(self, ws: np.ndarray) -> None:
        """Pop the entries of ``ws`` whose pc reached their reconvergence pc."""
        warp_pc, top_rpc, top_mask, depth = self.warp_pc, self.top_rpc, self.top_mask, self.depth
        stacks = self.stacks
        for w in ws[warp_pc[ws] == top_rpc[ws]].tolist():
            s = stacks[w]
            pc, rpc = warp_pc[w], top_rpc[w]
            if len(s) > 1 and pc == rpc:
                while len(s) > 1 and pc == rpc:
                    s.pop()
                    pc, rpc = s[-1][0], s[-1][1]
                # mirror the new top entry (the arrays as _load_top sets them)
                top = s[-1]
                warp_pc[w] = pc
                top_rpc[w] = rpc
                top_mask[w] = top[2]
                depth[w] = len(s)

    def _exit_lanes(self, warps: np.ndarray, em: np.ndarray) -> None:
        """Remove the lanes ``em`` (G, 32) of ``warps`` from every stack entry."""
        depth, top_mask, state = self.depth, self.top_mask, self.state
        simple = (depth[warps] == 1) & (em == top_mask[warps]).all(axis=1)
        if simple.all():
            state[warps] = DONE
            top_mask[warps] = False
            for w in warps.tolist():
                self.stacks[w][0][2][:] = False
            return
        for i, w in enumerate(warps.tolist()):
            e = em[i]
            if not e.any():
                continue
            s = self.stacks[w]
            for entry in s:
                entry[2] = entry[2] & ~e
            top_mask[w] = s[-1][2]
            if s[-1][2].any():
                continue
            while s and not s[-1][2].any():
                s.pop()
            if not s:
                state[w] = DONE
                depth[w] = 0
                continue
            self._load_top(w)

    # ------------------------------------------------------------------ mbarrier waits
    def _mbarrier_wait(self, g: _Group, op: Op, pc: int) -> None:
        """``mbarrier.test_wait``/``try_wait`` for the group: warps whose waiting lanes
        all see their phase complete (or whose wait times out, or that have another
        divergent path to run) execute it; the others are suspended before it (see
        :mod:`hardware.simt.mbarrier`)."""
        warps, m = g.warps, g.mask
        taken = _guarded(op, g.rows, m)
        ready = np.ones(m.shape, dtype=bool)
        probe = None
        if taken.any():
            ix = g.rows[taken]
            self.wave.cur = Exec(warps, g.rows, taken, m)
            probe = op.probe(ix, self.wave.cur)
            ready[taken] = probe[0]
        go = (ready | ~taken).all(axis=1)
        if not op.blocking:
            # a test_wait/try_wait may return false: when it times out, or when the
            # warp has another path to run
            go |= self.timeout[warps]
            for i in np.flatnonzero(~go).tolist():
                if _has_sibling(self.stacks[int(warps[i])]):
                    go[i] = True
        self.timeout[warps] = False
        stay = warps[~go]
        if stay.size:
            self.state[stay] = SUSPENDED
            pos = np.cumsum(taken.ravel()).reshape(taken.shape) - 1
            for i in np.flatnonzero(~go).tolist():
                lanes = taken[i] & ~ready[i]
                k = pos[i][lanes]
                self.mb_waiting[int(warps[i])] = (op, probe[2][k], probe[1][k],
                                                  probe[3][k])
        run = warps[go]
        if not run.size:
            return
        if pc - g.start >= g.budget:
            _step_limit(self.wave, op, self.max_steps, run, self.steps)
        self.warp_count[pc] += run.shape[0]
        tk = taken[go]
        self.thread_count[pc] += int(m[go].sum())
        self.steps[run] += 1
        if tk.any():
            ex = Exec(run, g.rows[go], tk, m[go])
            self.wave.cur = ex
            op.fn(g.rows[go][tk], ex)
        self.warp_pc[run] = pc + 1
        self._pop_reconverged(run)

    # ------------------------------------------------------------------ barriers
    def _barrier(self, warps: np.ndarray, op: Op, pc: int, lanes: np.ndarray) -> None:
        """``bar.sync``: the lanes ``lanes`` (G, 32) of ``warps`` arrive (every live lane
        of the warp in barrier_mode="warp") and the warps wait until it releases. An id
        or count in registers (``op.target`` -1, :class:`~.isa.sync.RegisterBarrier`)
        is read per warp now; warps giving the same id and count arrive together, a warp
        whose lanes all skip the barrier (its guard) goes on."""
        self.warp_pc[warps] = pc + 1
        if op.target >= 0:
            self._arrive(warps, op.target, op.fn if op.uniform else None, op, lanes)
            return
        rows = self.rows_all[warps]
        ex = Exec(warps, rows, lanes, self.top_mask[warps])
        self.wave.cur = ex
        ids, counts = op.values(rows[lanes], ex)
        self._pop_reconverged(warps[ids < 0])
        for bid, count in sorted(set(zip(ids.tolist(), counts.tolist()))):
            if bid >= 0:
                sel = (ids == bid) & (counts == count)
                self._arrive(warps[sel], bid, count if count > 0 else None, op, lanes[sel])

    def _arrive(self, warps: np.ndarray, bid: int, need: int | None, op: Op,
                lanes: np.ndarray) -> None:
        """The arrival of :meth:`_barrier` at barrier ``bid`` expecting ``need`` threads
        (None: the block's)."""
        arr = self.arrived.setdefault(bid, np.zeros(self.n_blocks, dtype=np.int64))
        blk = self.warp_block[warps]
        if self.exited_threads_arrive:
            # PTX ISA (bar): barriers are executed per warp, as if all the threads
            # of the warp were active: every live lane of the warp arrives
            count = np.array([int(self.stacks[w][0][2].sum()) for w in warps.tolist()])
        else:
            count = lanes.sum(axis=1)
        if self.sync is not None:
            if (self.depth[warps] == 1).all():
                live = self.top_mask[warps]  # one entry: its lanes are the live ones
            else:
                live = np.stack([self.stacks[w][0][2] for w in warps.tolist()])
            self.sync.barrier_arrive(self.wave, warps, op.inst, lanes, live)
        np.add.at(arr, blk, count)
        if op.uniform == "arrive":
            # bar.arrive: the warps arrive and go on
            self._release(np.unique(blk), bid, need)
            self._pop_reconverged(warps)
            return
        self.state[warps] = WAITING
        self.wait_id[warps] = bid
        self._release(np.unique(blk), bid, need)
        self._pop_reconverged(warps[self.state[warps] == RUNNING])

    def _hold(self, warps: np.ndarray, op: Op, pc: int, lanes: np.ndarray) -> None:
        """An instruction that may hold warps (setmaxnreg.inc waiting for registers,
        :class:`~.isa.sm90.HoldOp`): the warps it holds wait (``wait_id`` HELD) until it
        wakes them (:meth:`wake`), the others go on."""
        self.warp_pc[warps] = pc + 1
        go = op.hold(self, warps, lanes)
        stay = warps[~go]
        self.state[stay] = WAITING
        self.wait_id[stay] = HELD
        self._pop_reconverged(warps[go])

    def wake(self, ws: np.ndarray) -> None:
        """Warps ``ws`` held by their instruction (:meth:`_hold`) go on."""
        held = ws[(self.state[ws] == WAITING) & (self.wait_id[ws] == HELD)]
        self.state[held] = RUNNING
        self.wait_id[held] = -1

    def _release(self, blocks: np.ndarray, bid: int, count: int | None) -> None:
        """Release barrier ``bid`` in those ``blocks`` where every expected thread
        (``count``, or the block's threads) has arrived."""
        arr = self.arrived.get(bid)
        if arr is None:
            return
        if count is not None:
            need: Any = count
        elif self.exited_threads_arrive:
            need = self.threads_per_block - self.exited[blocks]
        else:
            need = self.threads_per_block
        have = arr[blocks]
        done = blocks[(have > 0) & (have >= need)]
        if done.size:
            arr[done] = 0
            released = np.zeros(self.n_blocks, dtype=bool)
            released[done] = True
            self.state[released[self.warp_block] & (self.state == WAITING)
                       & (self.wait_id == bid)] = RUNNING
            self.barriers += int(done.size)
            if self.race is not None:
                self.race.barrier_release(self.wave, done)

    def _note_exits(self, warps: np.ndarray, lanes: np.ndarray) -> None:
        """barrier_mode="warp": exited threads count as arrived at every barrier."""
        if not self.exited_threads_arrive:
            return
        blk = self.warp_block[warps]
        np.add.at(self.exited, blk, lanes.sum(axis=1))
        blocks = np.unique(blk)
        for bid in list(self.arrived):
            self._release(blocks, bid, None)
        woke = np.flatnonzero(self.state == RUNNING)
        if woke.size:
            self._pop_reconverged(woke)

    # ------------------------------------------------------------------ statistics
    def _record_statistics(self) -> None:
        stats = self.wave.stats
        if stats is None:
            return
        lines = [op.inst.line for op in self.ops]
        warp_count, thread_count = self.warp_count[:], self.thread_count[:]
        run_w = run_t = 0
        for pc in range(self.n):
            run_w += self.run_warps[pc]
            run_t += self.run_threads[pc]
            warp_count[pc] += run_w
            thread_count[pc] += run_t
        for pc in range(self.n):
            if warp_count[pc]:
                ln = lines[pc]
                stats.line_warp_instructions[ln] = (
                    stats.line_warp_instructions.get(ln, 0) + warp_count[pc])
                stats.line_thread_instructions[ln] = (
                    stats.line_thread_instructions.get(ln, 0) + thread_count[pc])
        stats.warp_instructions += sum(warp_count)
        stats.thread_instructions += sum(thread_count)
        stats.divergent_branches += self.divergent
        stats.max_stack_depth = max(stats.max_stack_depth, self.max_depth)
        stats.barriers += self.barriers


def _has_sibling(s: list) -> bool:
    """Whether stack ``s`` holds a divergent path that is not the top's and can run
    (an entry sharing its upper neighbour's reconvergence pc, not yet at it)."""
    for j in range(len(s) - 1):
        lo, up = s[j], s[j + 1]
        if lo[1] == up[1] and lo[0] != lo[1]:
            return True
    return False


def _spin_yield(s: list, pc: int) -> bool:
    """Count a uniform backward branch of the top entry of stack ``s``; after
    :data:`YIELD_AFTER` of them in a row, let the threads waiting for it run: a sibling
    path (same reconvergence pc) comes to the top (the yielding path goes below all of
    its siblings, so that they run in turn), or the threads waiting at the
    top's reconvergence point go on from there as a path of their own (the looping
    path then reconverges with them where the waiting entry would have). Returns
    whether the stack changed. ``pc`` is the top entry's current pc."""
    top = s[-1]
    top[0] = pc
    top[3] += 1
    if top[3] < YIELD_AFTER:
        return False
    top[3] = 0
    below = s[-2]
    if below[1] == top[1] and below[0] != top[1]:
        # sibling paths (same reconvergence pc) run in turn: the top goes below them all
        j = len(s) - 2
        while j > 0 and s[j - 1][1] == top[1] and s[j - 1][0] != top[1]:
            j -= 1
        s.insert(j, s.pop())
        return True
    if below[0] == top[1]:
        waiting = below[2] & ~top[2]
        if waiting.any():
            s[-2] = [top[0], below[1], top[2], 0]
            s[-1] = [below[0], below[1], waiting, 0]  # the waiting threads run on
            return True
    return False


def _step_limit(wave: Wave, op: Op, max_steps: int, warps: np.ndarray,
                wsteps: np.ndarray) -> None:
    w = int(warps[int(np.argmax(wsteps[warps]))])
    b = int(wave.warp_block[w])
    first = int(np.flatnonzero(wave.warp_block == b)[0])
    k = w - first
    raise StepLimitError(
        f"kernel {wave.kernel.name}: warp {k} of block {tuple(wave.block_ids[b])} (threads "
        f"{32 * k}-{32 * k + 31} of the block) executed more than max_steps={max_steps} "
        f"instructions, now at line {op.inst.line} ({op.inst.text!r}): a spinning or "
        "runaway loop? Raise max_steps if the kernel needs more")


def _deadlock(wave: Wave, st: np.ndarray, tp: np.ndarray, arrived: dict, ops: list[Op],
              sched: Any = None) -> None:
    waiting = np.flatnonzero(st == WAITING)
    w = int(waiting[0])
    b = int(wave.warp_block[w])
    blk_warps = np.flatnonzero(wave.warp_block == b)
    done = [int(x) for x in blk_warps if st[x] == DONE]
    wait_lines = sorted({ops[int(tp[x]) - 1].inst.line for x in blk_warps if st[x] == WAITING})
    raise DeadlockError(
        f"kernel {wave.kernel.name}, block {tuple(wave.block_ids[b])}: barrier deadlock: "
        f"warps {[int(x) - int(blk_warps[0]) for x in blk_warps if st[x] == WAITING]} wait at "
        f"the barrier on line(s) {wait_lines}, but the other threads of the block can "
        f"never arrive (warps {[x - int(blk_warps[0]) for x in done]} have exited, and "
        "a waiting warp may have lanes that exited or took another path); threads that "
        "returned before the barrier never arrive in barrier_mode='strict', while "
        "barrier_mode='warp' counts them as arrived"
        + (f"\n{deadlock_detail(wave, sched, b)}" if sched is not None else ""))
