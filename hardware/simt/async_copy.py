"""``cp.async`` with its groups: copies land in shared memory when a wait says so.

PTX ISA 9.0, sections 9.7.9.25.3.1 (``cp.async``), 9.7.9.25.3.2
(``cp.async.commit_group``) and 9.7.9.25.3.3 (``cp.async.wait_group`` /
``cp.async.wait_all``)::

    cp.async.ca.shared{::cta}.global{.L2::cache_hint}{.L2::prefetch} [dst], [src], cp-size{, src-size}{, cache-policy};
    cp.async.cg.shared{::cta}.global{...} [dst], [src], 16{, src-size}{, cache-policy};
    cp.async.ca/cg ... [dst], [src], cp-size{, ignore-src}{, cache-policy};
    cp.async.commit_group;
    cp.async.wait_group N;
    cp.async.wait_all;

Semantics (a legal schedule of the asynchronous copies, deterministic):

- ``cp.async`` reads its ``src-size`` source bytes (0 when the ``ignore-src`` predicate is
  true) when it is issued and queues the ``cp-size`` bytes (4, 8 or 16; 16 only for
  ``.cg``), zeros past ``src-size``, in the thread's current, uncommitted group;
- ``commit_group`` closes the thread's current group (an empty group is allowed);
- ``wait_group N`` completes every committed group of the thread except the N most
  recent ones; ``wait_all`` commits and completes all. Completing a group writes its
  bytes to shared memory, in issue order.

Until its group is completed, every destination byte is *pending*: a load, store or
atomic on a pending shared byte, by any thread of the block (the issuing thread
included), is a race on hardware and is reported as an
:class:`~hardware.simt.errors.ExecutionError` naming the address, the thread, the
instruction and the ``cp.async`` that wrote it. ``bar.sync`` does not complete copies
(the usual pattern is wait, then barrier). Copies a thread never waits for are dropped
when it exits (no thread may read them without a race).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .errors import ExecutionError, UnsupportedPtxError
from .isa.data import _address
from .isa.operands import Op, getter
from .parser import Imm, Instruction, Reg
from .proxycheck import generic_landed
from .types import TYPES
from .wave_state import WaveState

__all__ = ["AsyncCopies", "c_cp"]


class AsyncCopies(WaveState):
    """The queued copies and the pending shared-memory bytes of one wave."""

    ATTR = "async_copies"

    def reset(self) -> None:
        w = self.wave
        self.committed = np.zeros(w.T, dtype=np.int64)      # groups committed per thread
        self.pending = np.zeros(w.smem.size, dtype=np.int32)  # queued writes per byte
        self.owner = np.zeros(w.smem.size, dtype=np.int64)   # last issuing thread
        self.owner_line = np.zeros(w.smem.size, dtype=np.int32)
        self.queue: list[dict] = []
        self.any_pending = False

    # ------------------------------------------------------------ queueing
    def issue(self, threads: np.ndarray, dst: np.ndarray, data: np.ndarray,
              inst: Instruction) -> None:
        size = data.shape[1]
        span = (dst[:, None] + np.arange(size)).reshape(-1)
        np.add.at(self.pending, span, 1)
        self.owner[span] = np.repeat(threads, size)
        self.owner_line[span] = inst.line
        self.queue.append({"threads": threads.copy(), "group": self.committed[threads].copy(),
                           "dst": dst.copy(), "data": data.copy(),
                           "inst": np.full(threads.shape, id(inst), np.int64)})
        self.any_pending = True

    def commit(self, threads: np.ndarray) -> None:
        self.committed[threads] += 1

    def wait(self, threads: np.ndarray, keep: int) -> None:
        """Complete the committed groups of ``threads`` but the ``keep`` most recent."""
        if not self.queue:
            return
        limit = np.full(self.committed.shape, -1, dtype=np.int64)
        limit[threads] = self.committed[threads] - keep
        smem = self.wave.smem
        left = []
        for rec in self.queue:
            done = rec["group"] < limit[rec["threads"]]
            if done.any():
                size = rec["data"].shape[1]
                span = rec["dst"][done][:, None] + np.arange(size)
                smem[span] = rec["data"][done]
                np.add.at(self.pending, span.reshape(-1), -1)
                if self.wave.tools:  # generic-proxy writes (hardware.simt.proxycheck)
                    generic_landed(self.wave, rec["threads"][done], rec["dst"][done],
                                   size, rec["inst"][done])
                if done.all():
                    continue
                rec = {k: v[~done] for k, v in rec.items()}
            left.append(rec)
        self.queue = left
        self.any_pending = bool(left)

    # ------------------------------------------------------------ race detection
    def check(self, off: np.ndarray, width: int, ix: Any, inst: Instruction,
              what: str) -> None:
        """Raise if an access of ``width`` bytes at shared offsets ``off`` touches a
        pending byte."""
        if not self.any_pending:
            return
        span = off[:, None] + np.arange(width)
        hit = self.pending[span] > 0
        if not hit.any():
            return
        row, col = np.argwhere(hit)[0]
        w = self.wave
        thread = int(np.arange(w.T)[ix][row])
        byte = int(span[row, col])
        rel = byte - int(w.sbase[thread])
        src = int(self.owner[byte])
        src_where = w.location(src, None).split(", ", 1)[1]
        raise ExecutionError(
            f"{w.location(thread, inst)}: race: {what} of shared address {rel:#x} before "
            f"the cp.async (line {int(self.owner_line[byte])}, {src_where}) that writes it "
            "has been completed by cp.async.wait_group/wait_all of the issuing thread")


_state = AsyncCopies.of


def _threads(ctx: Any, ix: Any) -> np.ndarray:
    return np.arange(ctx.T)[ix] if isinstance(ix, slice) else np.asarray(ix)


def c_cp(inst: Instruction, ctx: Any) -> Op:
    """cp.async, cp.async.commit_group, cp.async.wait_group N, cp.async.wait_all (see the
    module docstring)."""
    parts = inst.parts
    if len(parts) < 2 or parts[1] != "async":
        raise UnsupportedPtxError(f"line {inst.line}: {inst.text!r}: only cp.async is "
                                  "supported")
    if any(p.startswith("bulk") or p in ("mbarrier", "tensor") for p in parts[2:]):
        raise UnsupportedPtxError(f"line {inst.line}: {inst.text!r}: bulk, tensor and "
                                  "mbarrier asynchronous copies are not supported")
    st = _state(ctx)
    if "commit_group" in parts:
        if inst.operands:
            raise UnsupportedPtxError(f"line {inst.line}: {inst.text!r}: commit_group takes "
                                      "no operand")
        return Op(inst, "alu", lambda ix, ex: st.commit(_threads(ctx, ix)))
    if "wait_all" in parts:
        def wait_all(ix: Any, ex: Any) -> None:
            th = _threads(ctx, ix)
            st.commit(th)
            st.wait(th, 0)
        return Op(inst, "alu", wait_all)
    if "wait_group" in parts:
        if len(inst.operands) != 1 or not isinstance(inst.operands[0], Imm) or \
                inst.operands[0].value < 0:
            raise UnsupportedPtxError(f"line {inst.line}: {inst.text!r}: wait_group takes a "
                                      "non-negative integer constant")
        keep = inst.operands[0].value
        return Op(inst, "alu", lambda ix, ex: st.wait(_threads(ctx, ix), keep))
    return _copy(inst, ctx, st)


def _copy(inst: Instruction, ctx: Any, st: AsyncCopies) -> Op:
    parts = inst.parts
    where = f"line {inst.line}: {inst.text!r}"
    if "shared" not in [p.split("::")[0] for p in parts] or "global" not in parts:
        raise UnsupportedPtxError(f"{where}: cp.async needs .shared and .global")
    if "ca" not in parts and "cg" not in parts:
        raise UnsupportedPtxError(f"{where}: cp.async needs .ca or .cg")
    ops = inst.operands
    if len(ops) < 3 or not isinstance(ops[2], Imm):
        raise UnsupportedPtxError(f"{where}: cp.async needs an immediate cp-size")
    size = ops[2].value
    if size not in (4, 8, 16) or ("cg" in parts and size != 16):
        raise UnsupportedPtxError(f"{where}: cp-size {size} (4, 8 or 16; .cg takes 16)")
    rest = list(ops[3:])
    if "L2::cache_hint" in parts:
        if not rest:
            raise UnsupportedPtxError(f"{where}: .L2::cache_hint needs a cache-policy operand")
        rest = rest[:-1]                        # the cache policy: no effect on values
    if len(rest) > 1:
        raise UnsupportedPtxError(f"{where}: too many operands")
    src_size = None          # a function ix -> per-thread byte counts
    if rest:
        op = rest[0]
        if isinstance(op, Imm):
            if not 0 <= op.value <= size:
                raise UnsupportedPtxError(f"{where}: src-size {op.value} outside [0, {size}]")
            v = op.value
            src_size = lambda ix: v  # noqa: E731
        elif isinstance(op, Reg) and ctx.register(op.name, inst).dtype == np.bool_:
            ignore = getter(op, TYPES["pred"], ctx, inst)   # ignore-src: zero fill
            src_size = lambda ix: np.where(ignore(ix), 0, size)  # noqa: E731
        else:
            src_size = getter(op, TYPES["u32"], ctx, inst)
    dst = _address(ops[0], ctx, inst, "shared")
    src = _address(ops[1], ctx, inst, "global")
    u8 = np.dtype(np.uint8)

    def fn(ix: Any, ex: Any) -> None:
        cnt = ctx.count(ix)
        th = _threads(ctx, ix)
        sa = np.broadcast_to(np.asarray(src(ix), np.int64), (cnt,))
        n = np.full(cnt, size, np.int64) if src_size is None else \
            np.broadcast_to(np.asarray(src_size(ix)).astype(np.int64), (cnt,))
        if (n > size).any():
            ctx.fault_here(inst, f"src-size {int(n[n > size][0])} exceeds cp-size {size}")
        data = np.zeros((cnt, size), dtype=u8)
        if (sa % size).any():
            bad = int(sa[sa % size != 0][0])
            ctx.fault_here(inst, f"source address {bad:#x} is not aligned to cp-size {size}")
        for k in np.unique(n).tolist():
            if k == 0:
                continue            # nothing is read: the source may lie anywhere
            sel = n == k
            if sel.all():
                sub_ix, sub, rows = ix, ex, slice(None)
            else:
                sub_ix, rows = th[sel], sel
                m2 = ex.mask.copy()
                m2[ex.mask] = sel
                sub = type(ex)(ex.warps, ex.rows, m2, ex.lane_active)
            # src-size bytes as aligned power-of-two pieces (12 = 8 + 4)
            start = 0
            for piece in (16, 8, 4, 2, 1):
                if k - start >= piece:
                    data[rows, start:start + piece] = ctx.load(
                        "global", sub_ix, sub, sa[rows] + start, u8, piece, inst)
                    start += piece
        off = ctx.shared_offsets(ix, ex, dst(ix), size, inst)
        st.check(off, size, ix, inst, "cp.async write")
        st.issue(th, off, data, inst)
    return Op(inst, "alu", fn)
