"""Synchronisation, atomics and warp-level collectives (PTX ISA 9.0, 9.7.12.8
atom/red, 9.7.13 bar/membar, 9.7.13.x vote/match/redux/activemask).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ExecutionError
from ..parser import Imm, Instruction, Pair
from ..types import PtxType, TYPES
from .data import _address, _space
from .half import _half_arith
from .operands import (Op, _AR32, _nops, _one_type, _rowvals, _u, _unsupported, getter,
                       setter)


_ATOM_OPS = ("add", "min", "max", "exch", "cas", "and", "or", "xor", "inc", "dec")


def c_atom(inst: Instruction, ctx: Any) -> Op:
    """atom / red .{global,shared}.op.type (9.7.13.4-5): applied lane by lane in thread
    order (a defined, deterministic order; hardware leaves it unspecified)."""
    t = _one_type(inst)
    is_red = inst.parts[0] == "red"
    space = _space(inst)
    if space not in ("global", "shared", "generic"):
        raise _unsupported(inst, f"atomics on .{space}")
    op = next((p for p in inst.parts[1:] if p in _ATOM_OPS), None)
    if op is None:
        raise _unsupported(inst, "unsupported atomic operation")
    if t.kind == "f" and op not in ("add", "exch", "min", "max"):
        raise _unsupported(inst, f"atomic {op} on floats")
    half = {"f16": ("fp16", 1), "bf16": ("bf16", 1), "f16x2": ("fp16", 2),
            "bf16x2": ("bf16", 2)}.get(t.name)
    if half is not None:
        # atom/red.add.noftz.{f16,f16x2,bf16,bf16x2} (9.7.13.4): round to nearest even,
        # subnormals kept; each 16-bit half of a packed pair is added on its own
        if op != "add" or "noftz" not in inst.parts:
            raise _unsupported(inst, f"atomic {op} on .{t.name} (only add.noftz)")
        fmt, lanes = half

        def hadd(cur: Any, x: Any) -> Any:
            c, v = int(cur), int(x)
            out = 0
            for k in range(lanes):
                a = np.array([(c >> (16 * k)) & 0xFFFF], np.uint16)
                b = np.array([(v >> (16 * k)) & 0xFFFF], np.uint16)
                r = _half_arith("add", fmt, "nearest_even", [a, b], False, False)
                out |= int(r[0]) << (16 * k)
            return out
        t = TYPES[f"b{16 * lanes}"]
        op = ("hadd", hadd)  # the executor applies the function lane by lane
    elif t.kind == "f" and t.bits == 16:
        raise _unsupported(inst, "16-bit float atomics")
    if any(p.startswith("v") and p[1:].isdigit() for p in inst.parts):
        raise _unsupported(inst, "vector atomics")
    if t.kind == "b" and op in ("add", "min", "max", "inc", "dec"):
        t = TYPES[f"u{t.bits}"]
    ops = inst.operands
    nsrc = 2 if op == "cas" else 1
    if len(ops) != (1 if is_red else 2) + nsrc:
        raise _unsupported(inst, "wrong number of operands")
    k = 0 if is_red else 1
    addr = _address(ops[k], ctx, inst, space)
    gets = [getter(o, t, ctx, inst) for o in ops[k + 1:]]
    put = None if is_red else setter(ops[0], t, ctx, inst)

    def fn(ix: Any, ex: Any) -> None:
        cnt = ctx.count(ix)
        srcs = [np.broadcast_to(np.asarray(g(ix)).astype(t.dtype), (cnt,)) for g in gets]
        old = ctx.atomic(space, ix, ex, np.broadcast_to(addr(ix), cnt), op, t, srcs, inst)
        if put is not None:
            put(ix, old)
    return Op(inst, "alu", fn)


def c_bar(inst: Instruction, ctx: Any) -> Op:
    """bar.sync / barrier.sync{.aligned} a{, b} (9.7.13.1); bar.arrive / barrier.arrive
    a, b: the warp's threads arrive and go on (the producer side of a named barrier: the
    barrier completes when b threads have arrived or synced); a and b may be registers
    (:func:`_register_barrier`); bar.warp.sync (:func:`c_warp_sync`)."""
    if inst.parts[1] == "warp":
        return c_warp_sync(inst, ctx)
    if inst.parts[1] == "cluster":
        from ..cluster import c_barrier_cluster
        return c_barrier_cluster(inst, ctx)
    arrive = "arrive" in inst.parts
    if "red" in inst.parts:
        raise _unsupported(inst, "barrier.red variants are not supported")
    if arrive and len(inst.operands) != 2:
        raise _unsupported(inst, "bar.arrive takes a barrier id and a thread count")
    if not arrive and inst.parts[1] not in ("sync", "cta") and inst.opcode not in ("bar.sync", "barrier.sync",
                                                                    "barrier.sync.aligned",
                                                                    "bar.cta.sync",
                                                                    "barrier.cta.sync.aligned",
                                                                    "barrier.cta.sync"):
        raise _unsupported(inst, "unsupported barrier form")
    if not inst.operands:
        raise _unsupported(inst, "a barrier takes an id and an optional thread count")
    if len(inst.operands) > 2:
        raise _unsupported(inst, "a barrier takes an id and an optional thread count")
    if not all(isinstance(o, Imm) for o in inst.operands):
        return _register_barrier(inst, ctx, arrive)
    op = Op(inst, "bar")
    op.target = inst.operands[0].value
    if not 0 <= op.target <= 15:
        raise _unsupported(inst, f"barrier id {op.target} outside 0..15 (a CTA has 16 "
                                 "barriers)")
    if len(inst.operands) > 1:
        if not isinstance(inst.operands[1], Imm):
            raise _unsupported(inst, "barrier thread count must be an immediate")
        count = inst.operands[1].value
        if count <= 0 or count % 32 or count > 1024:
            raise _unsupported(inst, f"barrier thread count {count} is not a positive "
                                     "multiple of the warp size up to 1024")
        op.uniform = "arrive" if arrive else True
        op.fn = count  # thread count
    return op


class RegisterBarrier(Op):
    """A ``bar``/``barrier`` whose id or thread count is a register (CUTLASS's named
    barriers): ``target`` is -1 and ``values(ix, ex)`` reads them when the warps arrive
    (:meth:`hardware.simt.scheduler.WarpScheduler._barrier`). ``uniform`` as for
    immediates: "arrive", True (sync with a count) or False (sync of the whole CTA)."""

    __slots__ = ("values",)


def _register_barrier(inst: Instruction, ctx: Any, arrive: bool) -> Op:
    """``bar.sync a{, b}`` / ``bar.arrive a, b`` with register operands (9.7.13.1):
    per warp, the id ``a`` (0..15) and count ``b`` (a positive multiple of the warp size
    up to 1024) its executing lanes give. The ISA leaves a value that differs between
    the threads of a warp undefined: an error naming the thread and line here, as is an
    id or count out of range."""
    u32 = TYPES["u32"]
    gets = [getter(o, u32, ctx, inst) for o in inst.operands]
    op = RegisterBarrier(inst, "bar")
    op.uniform = "arrive" if arrive else len(gets) > 1

    def values(ix: Any, ex: Any) -> tuple[np.ndarray, np.ndarray]:
        """(ids, counts), each (G,) int64 for the warps of ``ex``: -1 for a warp
        without executing lanes (it does not execute the barrier), count -1 without
        operand b (every thread of the CTA)."""
        rows = ex.mask.any(axis=1)
        out = []
        for k, g in enumerate(gets):
            v = _rowvals(g, ix, ex, np.int64)
            first = np.where(rows, v[np.arange(v.shape[0]), np.argmax(ex.mask, axis=1)], -1)
            bad = ex.mask & (v != first[:, None])
            what = "barrier id" if k == 0 else "thread count"
            if bad.any():
                i = int(np.argmax(bad.any(axis=1)))
                lane = int(np.argmax(bad[i]))
                raise ExecutionError(
                    f"{ctx.location(int(ex.rows[i, lane]), inst)}: the {what} is not "
                    f"warp-uniform: this thread gives {int(v[i, lane])}, lane "
                    f"{int(np.argmax(ex.mask[i]))} of its warp gives {int(first[i])} (PTX ISA "
                    "9.7.13.1: undefined unless every thread of the warp gives the same)")
            if k == 0:
                wrong = rows & ((first < 0) | (first > 15))
                why = "outside 0..15 (a CTA has 16 barriers)"
            else:
                wrong = rows & ((first <= 0) | (first % 32 != 0) | (first > 1024))
                why = "is not a positive multiple of the warp size up to 1024"
            if wrong.any():
                i = int(np.argmax(wrong))
                raise ExecutionError(
                    f"{ctx.location(int(ex.rows[i, int(np.argmax(ex.mask[i]))]), inst)}: "
                    f"{what} {int(first[i])} {why} (PTX ISA 9.7.13.1)")
            out.append(first)
        if len(out) == 1:
            out.append(np.full(rows.shape, -1, dtype=np.int64))
        return out[0], out[1]
    op.values = values
    return op


def c_warp_sync(inst: Instruction, ctx: Any) -> Op:
    """bar.warp.sync membermask (9.7.13.3): the executing lanes run together already
    (the SIMT stack); synccheck checks the mask, racecheck orders the lanes' accesses
    (:mod:`hardware.simt.synccheck`, :mod:`hardware.simt.racecheck`)."""
    if len(inst.operands) != 1:
        raise _unsupported(inst, "bar.warp.sync takes one operand, the member mask")
    gm = getter(inst.operands[0], TYPES["u32"], ctx, inst)

    def fn(ix: Any, ex: Any) -> None:
        tools = ctx.tools
        if not tools:
            return
        sync, race = tools.get("synccheck"), tools.get("racecheck")
        if sync is not None:
            done = sync.warp_sync(ctx, ex, inst, _rowvals(gm, ix, ex, np.uint32))
        else:
            done = ex.mask
        if race is not None and done.any():
            race.syncwarp(ctx, ex.rows[done])
    return Op(inst, "alu", fn)


def _collective_check(ctx: Any, gm: Any, inst: Instruction, ix: Any, ex: Any) -> None:
    """synccheck of a warp collective's member mask (the getter ``gm``)."""
    sync = ctx.tools.get("synccheck") if ctx.tools else None
    if sync is not None:
        sync.collective(ctx, ex, inst, _rowvals(gm, ix, ex, np.uint32))


def c_fence(inst: Instruction, ctx: Any) -> Op:
    """membar / fence (9.7.13.4): execution is sequentially consistent, so no effect on
    values; racecheck counts the fence as a release and an acquire of the executing
    threads (:mod:`hardware.simt.racecheck`)."""
    def fn(ix: Any, ex: Any) -> None:
        race = ctx.tools.get("racecheck") if ctx.tools else None
        if race is not None:
            race.fence(ctx, ctx._thread_ids(ix), inst)
    return Op(inst, "alu", fn)


def c_noop(inst: Instruction, ctx: Any) -> Op:
    """nanosleep: no effect."""
    if inst.parts[0] in ("membar", "fence"):
        return c_fence(inst, ctx)
    return Op(inst, "alu", lambda ix, ex: None)


def c_vote(inst: Instruction, ctx: Any) -> Op:
    """vote.sync.{all,any,uni}.pred / vote.sync.ballot.b32 (9.7.13.7): over the
    executing lanes (the member mask must name them)."""
    if "sync" not in inst.parts:
        raise _unsupported(inst, "vote without .sync")
    mode = next((p for p in inst.parts if p in ("all", "any", "uni", "ballot")), None)
    if mode is None or len(inst.operands) != 3:
        raise _unsupported(inst, "malformed vote.sync")
    gp = getter(inst.operands[1], TYPES["pred"], ctx, inst)
    gm = getter(inst.operands[2], TYPES["u32"], ctx, inst)
    if mode == "ballot":
        put = setter(inst.operands[0], TYPES["b32"], ctx, inst)
    else:
        put = setter(inst.operands[0], TYPES["pred"], ctx, inst)
    weights = (np.uint64(1) << _AR32.astype(np.uint64))

    def fn(ix: Any, ex: Any) -> None:
        _collective_check(ctx, gm, inst, ix, ex)
        p = np.zeros(ex.rows.shape, bool)
        p[ex.mask] = gp(ix)
        p &= ex.mask
        if mode == "ballot":
            word = (p.astype(np.uint64) * weights).sum(axis=1).astype(np.uint32)
            r = np.broadcast_to(word[:, None], ex.rows.shape)[ex.mask]
        elif mode == "all":
            r = np.broadcast_to((p | ~ex.mask).all(axis=1)[:, None], ex.rows.shape)[ex.mask]
        elif mode == "any":
            r = np.broadcast_to(p.any(axis=1)[:, None], ex.rows.shape)[ex.mask]
        else:
            allv = (p | ~ex.mask).all(axis=1)
            nonev = ~p.any(axis=1)
            r = np.broadcast_to((allv | nonev)[:, None], ex.rows.shape)[ex.mask]
        put(ix, r)
    return Op(inst, "alu", fn)


def c_activemask(inst: Instruction, ctx: Any) -> Op:
    """activemask.b32 d (9.7.13.8): the lanes executing this instruction."""
    _nops(inst, 1)
    put = setter(inst.operands[0], TYPES["b32"], ctx, inst)
    weights = (np.uint64(1) << _AR32.astype(np.uint64))

    def fn(ix: Any, ex: Any) -> None:
        word = (ex.mask.astype(np.uint64) * weights).sum(axis=1).astype(np.uint32)
        put(ix, np.broadcast_to(word[:, None], ex.rows.shape)[ex.mask])
    return Op(inst, "alu", fn)


def redux_operands(inst: Instruction, ctx: Any, t: PtxType, dtype: Any) -> tuple[Any, Any]:
    """(values, put) of ``redux.sync d, a, membermask``: ``values(ix, ex)`` checks the
    member mask and gives the (G, 32) values of ``a`` as ``dtype``, ``put`` writes ``d``."""
    ga = getter(inst.operands[1], t, ctx, inst)
    gm = getter(inst.operands[2], TYPES["u32"], ctx, inst)
    put = setter(inst.operands[0], t, ctx, inst)

    def values(ix: Any, ex: Any) -> np.ndarray:
        _collective_check(ctx, gm, inst, ix, ex)
        return _rowvals(ga, ix, ex, dtype)
    return values, put


def c_redux(inst: Instruction, ctx: Any) -> Op:
    """redux.sync.op.type d, a, membermask (9.7.13.10, sm_80): integer warp reduction."""
    t = _one_type(inst)
    op = next((p for p in inst.parts if p in ("add", "min", "max", "and", "or", "xor")), None)
    if op is None or len(inst.operands) != 3 or t.kind == "f":
        raise _unsupported(inst, "malformed or unsupported redux.sync")
    values, put = redux_operands(inst, ctx, t, t.dtype)

    def fn(ix: Any, ex: Any) -> None:
        v = values(ix, ex)
        if op == "add":
            r = np.where(ex.mask, v.astype(_u(t)), 0).astype(_u(t)).sum(axis=1, dtype=_u(t)).view(t.dtype)
        elif op in ("min", "max"):
            fill = np.iinfo(t.dtype).max if op == "min" else np.iinfo(t.dtype).min
            f = np.min if op == "min" else np.max
            r = f(np.where(ex.mask, v, fill), axis=1)
        else:
            f = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[op]
            fill = ~t.dtype.type(0) if op == "and" else t.dtype.type(0)
            r = f.reduce(np.where(ex.mask, v, fill), axis=1)
        put(ix, np.broadcast_to(np.asarray(r).astype(t.dtype)[:, None], ex.rows.shape)[ex.mask])
    return Op(inst, "alu", fn)


def c_match(inst: Instruction, ctx: Any) -> Op:
    """match.{any,all}.sync.{b32,b64} d[|p], a, membermask (9.7.13.x): lanes of the
    executing set holding the same value."""
    t = _one_type(inst)
    mode = "any" if "any" in inst.parts else "all"
    if len(inst.operands) != 3:
        raise _unsupported(inst, "malformed match.sync")
    d = inst.operands[0]
    if isinstance(d, Pair):
        put, putp = setter(d.first, TYPES["b32"], ctx, inst), setter(d.second, TYPES["pred"], ctx, inst)
    else:
        put, putp = setter(d, TYPES["b32"], ctx, inst), None
    ga = getter(inst.operands[1], t, ctx, inst)
    gm = getter(inst.operands[2], TYPES["u32"], ctx, inst)
    weights = (np.uint64(1) << _AR32.astype(np.uint64))

    def fn(ix: Any, ex: Any) -> None:
        _collective_check(ctx, gm, inst, ix, ex)
        v = _rowvals(ga, ix, ex, t.dtype)
        same = (v[:, :, None] == v[:, None, :]) & ex.mask[:, None, :]   # (G, lane, other)
        masks = (same.astype(np.uint64) * weights).sum(axis=2).astype(np.uint32)
        active = (ex.mask.astype(np.uint64) * weights).sum(axis=1).astype(np.uint32)
        if mode == "any":
            put(ix, masks[ex.mask])
            return
        allsame = masks == active[:, None]
        put(ix, np.where(allsame, active[:, None], np.uint32(0))[ex.mask])
        if putp is not None:
            putp(ix, allsame[ex.mask])
    return Op(inst, "alu", fn)
