"""Comparison, selection (PTX ISA 9.0, 9.7.7: setp, selp) and control flow
(9.7.10: bra, ret, exit).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..parser import Instruction, Pair, Sym
from ..types import PtxType, TYPES
from .operands import Op, _ftz32, _nops, _one_type, _unsupported, getter, setter


_CMP = {
    "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
    "gt": np.greater, "ge": np.greater_equal,
    "lo": np.less, "ls": np.less_equal, "hi": np.greater, "hs": np.greater_equal,
}


def _compare(inst: Instruction, cmp: str, t: PtxType) -> Callable:
    if t.kind == "f":
        if cmp in ("num", "nan"):
            return (lambda a, b: ~(np.isnan(a) | np.isnan(b))) if cmp == "num" else \
                (lambda a, b: np.isnan(a) | np.isnan(b))
        unordered = cmp.endswith("u") and cmp[:-1] in ("eq", "ne", "lt", "le", "gt", "ge")
        base = cmp[:-1] if unordered else cmp
        if base not in ("eq", "ne", "lt", "le", "gt", "ge"):
            raise _unsupported(inst, f"comparison .{cmp} on floats")
        f = _CMP[base]
        if unordered:
            return lambda a, b: f(a, b) | np.isnan(a) | np.isnan(b)
        if base == "ne":  # ordered: false when either is NaN
            return lambda a, b: (a != b) & ~(np.isnan(a) | np.isnan(b))
        return f
    if cmp not in _CMP:
        raise _unsupported(inst, f"comparison .{cmp} on integers")
    return _CMP[cmp]


def c_setp(inst: Instruction, ctx: Any) -> Op:
    """setp.CmpOp[.BoolOp].type p[|q], a, b[, {!}c] (9.7.2.5 / 9.7.3.x)."""
    t = _one_type(inst)
    cmp = inst.parts[1]
    boolop = inst.parts[2] if inst.parts[2] in ("and", "or", "xor") else None
    if cmp in ("lo", "ls", "hi", "hs") and t.kind == "s":
        t = TYPES[f"u{t.bits}"]
    if t.kind == "b" and cmp in ("eq", "ne"):
        t = TYPES[f"u{t.bits}"]
    f = _compare(inst, cmp, t)
    ops = inst.operands
    if len(ops) != (4 if boolop else 3):
        raise _unsupported(inst, "wrong number of operands for setp")
    d = ops[0]
    if isinstance(d, Pair):
        pp = setter(d.first, TYPES["pred"], ctx, inst)
        pq = setter(d.second, TYPES["pred"], ctx, inst)
    else:
        pp = setter(d, TYPES["pred"], ctx, inst)
        pq = None
    ga = getter(ops[1], t, ctx, inst)
    gb = getter(ops[2], t, ctx, inst)
    gc = getter(ops[3], TYPES["pred"], ctx, inst) if boolop else None
    comb = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}.get(boolop or "")
    if "ftz" in inst.parts and t.kind == "f" and t.bits == 32:
        fc = f
        f = lambda a, b: fc(_ftz32(a), _ftz32(b))  # noqa: E731 - subnormal inputs as zero

    def fn(ix: Any, ex: Any) -> None:
        r = f(ga(ix), gb(ix))
        if comb is not None:
            c = gc(ix)
            p = comb(r, c)
            q = comb(np.logical_not(r), c)
        else:
            p = r
            q = np.logical_not(r)
        pp(ix, p)
        if pq is not None:
            pq(ix, q)
    return Op(inst, "alu", fn)


def c_selp(inst: Instruction, ctx: Any) -> Op:
    """selp.type d, a, b, c (9.7.2.6): d = c ? a : b."""
    t = _one_type(inst)
    _nops(inst, 4)
    ga = getter(inst.operands[1], t, ctx, inst)
    gb = getter(inst.operands[2], t, ctx, inst)
    gc = getter(inst.operands[3], TYPES["pred"], ctx, inst)
    put = setter(inst.operands[0], t, ctx, inst)
    return Op(inst, "alu", lambda ix, ex: put(ix, np.where(gc(ix), ga(ix), gb(ix)).astype(t.dtype)))


def c_bra(inst: Instruction, ctx: Any) -> Op:
    """bra{.uni} target (9.7.12.1)."""
    if len(inst.operands) != 1 or not isinstance(inst.operands[0], Sym):
        raise _unsupported(inst, "bra needs a label (indirect branches are not supported)")
    target = ctx.label(inst.operands[0].name, inst)
    op = Op(inst, "bra")
    op.target = target
    op.uniform = "uni" in inst.parts
    return op


class IndexedBranch(Op):
    """A ``brx.idx`` (kind "brx"): ``targets`` the instruction index of each entry of
    its list, ``index`` the wave's index register."""

    __slots__ = ("targets", "index")


def c_brx(inst: Instruction, ctx: Any) -> Op:
    """brx.idx{.uni} index, tlist (PTX ISA 9.7.12.2): each thread branches to entry
    ``index`` of the ``.branchtargets`` list ``tlist`` (an index outside it is undefined
    behaviour, reported when it happens); the paths of a warp whose lanes pick different
    entries reconverge at the branch's immediate post-dominator."""
    idx = ctx.register(inst.operands[0].name, inst)
    if idx.dtype.kind not in "ui" or idx.dtype.itemsize != 4:
        raise _unsupported(inst, "brx.idx takes a 32-bit index register")
    table = ctx.kernel.source.branch_tables[inst.operands[1].name]
    op = IndexedBranch(inst, "brx")
    op.targets = np.array([ctx.label(t, inst) for t in table], np.int64)
    op.index = idx
    op.uniform = "uni" in inst.parts
    return op


def c_exit(inst: Instruction, ctx: Any) -> Op:
    """ret / exit (9.7.12.4-5): in a kernel, ret ends the thread like exit."""
    if inst.operands:
        raise _unsupported(inst, f"{inst.parts[0]} takes no operands")
    return Op(inst, "exit")
