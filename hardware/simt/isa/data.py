"""Data movement (PTX ISA 9.0, 9.7.9): mov, ld/ldu/st, prmt, shfl.sync, isspacep.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..memory import LOCAL_WINDOW, SHARED_WINDOW, WINDOW_SIZE
from ..parser import Addr, Instruction, Pair, Reg, Sym, Vec
from ..types import TYPES
from .sm90 import CLOCKS, c_clock
from .operands import (Op, _AR32, _alu, _nops, _one_type, _rowvals, _u, _ubits,
                       _unsupported, getter, setter)


def c_prmt(inst: Instruction, ctx: Any) -> Op:
    """prmt.b32 d, a, b, c (9.7.8.9, default mode): pick 4 bytes of {b, a} by the
    selector nibbles of c; bit 3 of a nibble replicates the byte's sign bit."""
    if len(inst.parts) != 2:
        raise _unsupported(inst, "only the default prmt mode is supported")
    _nops(inst, 4)
    t = TYPES["u32"]
    ga, gb, gc = (getter(o, t, ctx, inst) for o in inst.operands[1:])
    put = setter(inst.operands[0], t, ctx, inst)

    def fn(ix: Any, ex: Any) -> None:
        a, b, c = (np.atleast_1d(np.asarray(g(ix), np.uint32)).astype(np.uint64)
                   for g in (ga, gb, gc))
        a, b, c = np.broadcast_arrays(a, b, c)
        src = a | (b << np.uint64(32))
        r = np.zeros(a.shape, np.uint64)
        for k in range(4):
            sel = (c >> np.uint64(4 * k)) & np.uint64(0xF)
            byte = (src >> ((sel & np.uint64(7)) * np.uint64(8))) & np.uint64(0xFF)
            sign = np.where((byte >> np.uint64(7)) & np.uint64(1) == 1, np.uint64(0xFF), np.uint64(0))
            byte = np.where(sel & np.uint64(8) != 0, sign, byte)
            r |= byte << np.uint64(8 * k)
        put(ix, r.astype(np.uint32))
    return Op(inst, "alu", fn)


def c_mov(inst: Instruction, ctx: Any) -> Op:
    """mov (9.7.9.1-2): registers, immediates, special registers, variable addresses, and
    the packing forms ``mov.b32 %r, {%h0, %h1}`` / unpacking ``mov.b64 {%r0, %r1}, %rd``
    (element 0 in the low bits)."""
    t = _one_type(inst)
    _nops(inst, 2)
    d, s = inst.operands
    if isinstance(s, Reg) and s.name in CLOCKS:
        return c_clock(inst, ctx)
    if isinstance(s, Vec) or isinstance(d, Vec):
        vec, packed, pack = (s, d, True) if isinstance(s, Vec) else (d, s, False)
        n = len(vec.items)
        part = t.bits // n
        pt = TYPES[f"b{part}"]
        wt = TYPES[f"b{t.bits}"]
        wu = _u(wt)
        if pack:
            gets = [getter(x, pt, ctx, inst) for x in vec.items]
            put = setter(packed, wt, ctx, inst)

            def packfn(ix: Any, ex: Any) -> None:
                r = None
                for k, g in enumerate(gets):
                    v = np.asarray(g(ix)).astype(wu) << wu.type(k * part)
                    r = v if r is None else (r | v)
                put(ix, r)
            return Op(inst, "alu", packfn)
        get = getter(packed, wt, ctx, inst)
        puts = [setter(x, pt, ctx, inst) for x in vec.items]
        pu = _u(pt)

        def unpack(ix: Any, ex: Any) -> None:
            v = np.asarray(get(ix)).astype(wu)
            for k, p in enumerate(puts):
                p(ix, ((v >> wu.type(k * part)) & wu.type((1 << part) - 1)).astype(pu))
        return Op(inst, "alu", unpack)
    if t.kind == "pred":
        return _alu(inst, ctx, t, lambda a: a, 1)
    return _alu(inst, ctx, t, lambda a: a, 1)


def _space(inst: Instruction) -> str:
    for p in inst.parts[1:]:
        base = p.split("::")[0]
        if base in ("global", "shared", "local", "param", "const"):
            return base
    return "generic"


def _address(op: Any, ctx: Any, inst: Instruction, space: str) -> Callable:
    """``f(ix)`` -> int64 addresses of an ``[base+offset]`` operand in ``space``."""
    if not isinstance(op, Addr):
        raise _unsupported(inst, f"expected an address operand, got {op!r}")
    # the parser gives the offset modulo 2^64 as a signed 64-bit value: addresses are
    # 64-bit, and one outside every allocation faults when it is accessed
    off = np.int64(op.offset)
    if op.base is None:
        return lambda ix: off
    if isinstance(op.base, Sym):
        sp, a = ctx.symbol(op.base.name, inst)
        if sp != space and not (space == "generic"):
            raise _unsupported(inst, f"symbol {op.base.name} is in .{sp}, not .{space}")
        if sp in ("global", "const"):
            name = op.base.name
            return lambda ix: np.int64(ctx.module_symbol(name)) + off
        if space == "generic":
            a = a + ctx.window(sp)
        v = np.int64((a + op.offset + (1 << 63)) % (1 << 64) - (1 << 63))
        return lambda ix: v
    arr = ctx.register(op.base.name, inst)
    if arr.dtype == np.uint64:
        view = arr.view(np.int64)
        return lambda ix: view[ix] + off
    if arr.dtype == np.uint32:
        return lambda ix: arr[ix].astype(np.int64) + off
    raise _unsupported(inst, f"address register {op.base.name} must be 32 or 64 bits")


def _vec_width(inst: Instruction) -> int:
    for p in inst.parts:
        if p in ("v2", "v4", "v8"):
            return int(p[1])
    return 1


def c_ld(inst: Instruction, ctx: Any) -> Op:
    """ld{.ss}{.cop}{.nc}{.vN}.type d, [a] (9.7.9.8-9); cache operators are accepted
    and have no effect on values."""
    t = _one_type(inst)
    _nops(inst, 2)
    space = _space(inst)
    n = _vec_width(inst)
    # .volatile/.acquire (ordering) need nothing: this interpreter is sequentially consistent
    dst = inst.operands[0]
    items = list(dst.items) if isinstance(dst, Vec) else [dst]
    if len(items) != n:
        raise _unsupported(inst, f"destination has {len(items)} elements, .v{n} expected")
    if t.kind == "pred":
        raise _unsupported(inst, "ld of .pred")
    puts = [setter(x, t, ctx, inst) for x in items]
    if space == "param":
        read = ctx.param_reader(inst.operands[1], t, n, inst)
        per_thread = getattr(read, "per_thread", False)

        def ld_param(ix: Any, ex: Any) -> None:
            for p, v in zip(puts, read(ix) if per_thread else read()):
                p(ix, v)
        return Op(inst, "alu", ld_param)
    addr = _address(inst.operands[1], ctx, inst, space)
    elem = t.storage if t.bits >= 8 else np.dtype(np.uint8)

    def fn(ix: Any, ex: Any) -> None:
        v = ctx.load(space, ix, ex, addr(ix), elem, n, inst)
        for k, p in enumerate(puts):
            p(ix, v[:, k].view(t.dtype) if t.bits >= 8 else v[:, k])
    return Op(inst, "alu", fn)


def c_st(inst: Instruction, ctx: Any) -> Op:
    """st{.ss}{.cop}{.vN}.type [a], b (9.7.9.10)."""
    t = _one_type(inst)
    _nops(inst, 2)
    space = _space(inst)
    if space in ("param", "const"):
        raise _unsupported(inst, f"st to .{space} (read-only)")
    n = _vec_width(inst)
    src = inst.operands[1]
    items = list(src.items) if isinstance(src, Vec) else [src]
    if len(items) != n:
        raise _unsupported(inst, f"source has {len(items)} elements, .v{n} expected")
    gets = [getter(x, t, ctx, inst) for x in items]
    addr = _address(inst.operands[0], ctx, inst, space)
    elem = t.storage

    def fn(ix: Any, ex: Any) -> None:
        cnt = ctx.count(ix)
        vals = np.empty((cnt, n), dtype=elem)
        for k, g in enumerate(gets):
            vals[:, k] = _ubits(g(ix), t)  # raw bits; a scalar broadcasts
        ctx.store(space, ix, ex, addr(ix), vals, inst)
    return Op(inst, "alu", fn)


def c_shfl(inst: Instruction, ctx: Any) -> Op:
    """shfl.sync.mode.b32 d[|p], a, b, c, membermask (9.7.9.6)."""
    if "sync" not in inst.parts:
        raise _unsupported(inst, "shfl without .sync (removed for sm_70+)")
    mode = next((p for p in inst.parts if p in ("up", "down", "bfly", "idx")), None)
    if mode is None or len(inst.operands) != 5:
        raise _unsupported(inst, "malformed shfl.sync")
    d = inst.operands[0]
    if isinstance(d, Pair):
        put = setter(d.first, TYPES["b32"], ctx, inst)
        putp = setter(d.second, TYPES["pred"], ctx, inst)
    else:
        put, putp = setter(d, TYPES["b32"], ctx, inst), None
    src = ctx.register_or_const(inst.operands[1], TYPES["b32"], inst)
    gb = getter(inst.operands[2], TYPES["u32"], ctx, inst)
    gc = getter(inst.operands[3], TYPES["u32"], ctx, inst)
    gm = getter(inst.operands[4], TYPES["u32"], ctx, inst)

    def lanes(b: np.ndarray, c: np.ndarray, lane: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        # PTX ISA 9.7.9.6 (shfl.sync semantics): bval = b[4:0], cval = c[4:0],
        # segmask = c[12:8]; a lane offset of 32 or more wraps to its low 5 bits
        b = b & 0x1F
        segmask = (c >> 8) & 0x1F
        maxlane = (lane & segmask) | (c & 0x1F & ~segmask)
        minlane = lane & segmask
        if mode == "up":
            j = lane - b
            valid = j >= maxlane
        elif mode == "down":
            j = lane + b
            valid = j <= maxlane
        elif mode == "bfly":
            j = lane ^ b
            valid = j <= maxlane
        else:
            j = minlane | (b & ~segmask)
            valid = j <= maxlane
        return np.clip(np.where(valid, j, lane), 0, 31), valid

    # full warps whose lane, clamp and member-mask operands agree across the group (the
    # usual case): the source lane of each lane is computed once per operand triple
    uniform_lanes: dict[tuple[int, int, int], tuple[np.ndarray, np.ndarray] | None] = {}
    valid_rows: dict[tuple, np.ndarray] = {}

    def one_value(g: Callable, ix: Any) -> int | None:
        v = g(ix)
        if np.ndim(v) == 0:
            return int(v)
        v0 = v[0]
        return None if np.count_nonzero(v != v0) else int(v0)

    def fn(ix: Any, ex: Any) -> None:
        if "synccheck" in ctx.tools:  # member-mask checks (hardware.simt.synccheck)
            ctx.tools["synccheck"].collective(ctx, ex, inst, _rowvals(gm, ix, ex, np.uint32))
        rows = ex.rows            # (G, 32) thread indices of the warps
        act = ex.mask             # (G, 32) executing lanes
        if act.all() and ex.lane_active.all():
            key = (one_value(gb, ix), one_value(gc, ix), one_value(gm, ix))
            if None not in key:
                hit = uniform_lanes.get(key)
                if hit is None and key not in uniform_lanes:
                    jc, valid = lanes(np.int64(key[0]), np.int64(key[1]), _AR32)
                    member = ((np.int64(key[2]) >> jc) & 1) != 0
                    # a non-member source lane takes the general path (it warns)
                    hit = uniform_lanes[key] = (jc, valid) if (member | ~valid).all() else None
                if hit is not None:
                    jc, valid = hit
                    put(ix, src[rows[:, jc]].ravel())
                    if putp is not None:
                        # the predicate of every lane, per group size (read-only)
                        vg = valid_rows.get((key, rows.shape[0]))
                        if vg is None:
                            vg = valid_rows[(key, rows.shape[0])] = np.broadcast_to(
                                valid, rows.shape).ravel()
                            vg.flags.writeable = False
                        putp(ix, vg)
                    return
        lane = np.broadcast_to(_AR32, rows.shape)
        b = _rowvals(gb, ix, ex, np.uint32).astype(np.int64)
        c = _rowvals(gc, ix, ex, np.uint32).astype(np.int64)
        jc, valid = lanes(b, c, lane)
        srcact = np.take_along_axis(ex.lane_active, jc, axis=1)
        memb = _rowvals(gm, ix, ex, np.uint32).astype(np.int64)
        bad = act & (~srcact | ((memb >> jc) & 1 == 0)) & valid
        if bad.any():
            ctx.warn_collective(inst, ex, bad, "reads an inactive or non-member lane "
                                               "(undefined in the PTX ISA)")
        vals = src[np.take_along_axis(rows, jc, axis=1)]
        put(ix, vals[act])
        if putp is not None:
            putp(ix, valid[act])
    return Op(inst, "alu", fn)


def c_isspacep(inst: Instruction, ctx: Any) -> Op:
    """isspacep.{global,shared,local,const} p, a (9.7.9.x): whether a generic address
    lies in the space's window (see :mod:`hardware.simt.memory`)."""
    space = next((p for p in inst.parts[1:] if p.split("::")[0] in
                  ("global", "shared", "local", "const")), None)
    if space is None or len(inst.operands) != 2:
        raise _unsupported(inst, "malformed isspacep")
    space = space.split("::")[0]
    ga = getter(inst.operands[1], TYPES["u64"], ctx, inst)
    put = setter(inst.operands[0], TYPES["pred"], ctx, inst)
    lo = {"shared": SHARED_WINDOW, "local": LOCAL_WINDOW}.get(space, 0)

    def fn(ix: Any, ex: Any) -> None:
        a = np.asarray(ga(ix), np.uint64)
        in_sh = (a >= np.uint64(SHARED_WINDOW)) & (a < np.uint64(SHARED_WINDOW + WINDOW_SIZE))
        in_lo = (a >= np.uint64(LOCAL_WINDOW)) & (a < np.uint64(LOCAL_WINDOW + WINDOW_SIZE))
        if space in ("global", "const"):
            r = ~(in_sh | in_lo)
        else:
            r = (a >= np.uint64(lo)) & (a < np.uint64(lo + WINDOW_SIZE))
        put(ix, r)
    return Op(inst, "alu", fn)
