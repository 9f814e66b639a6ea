"""Bulk reductions from shared to global memory (PTX ISA 9.7.9.25.4.2
``cp.reduce.async.bulk`` and 9.7.9.25.5.3 ``cp.reduce.async.bulk.tensor``)::

    cp.reduce.async.bulk.global.shared::cta.bulk_group{.L2::cache_hint}.redOp.type
        [dstMem], [srcMem], size{, cache-policy}
    cp.reduce.async.bulk.global.shared::cta.bulk_group.add.noftz.{f16,bf16} ...
    cp.reduce.async.bulk.tensor.{1d..5d}.global.shared::cta.redOp.tile.bulk_group
        [tensorMap, {coords}], [srcMem]

Each element of the destination becomes ``redOp(destination, source)``, element by
element, when the instruction is issued (as the bulk stores to global memory of
:mod:`hardware.simt.tma`: the reduction joins the thread's bulk group, whose wait then
has nothing left to do). The integer operations are exact: ``.add`` wraps, ``.min`` and
``.max`` compare as the type's signedness says, ``.inc`` gives ``(d >= s) ? 0 : d + 1``
and ``.dec`` ``(d == 0 || d > s) ? s : d - 1`` (unsigned, as atom.inc/dec), ``.and``,
``.or`` and ``.xor`` act on the bits. The floating-point ``.add`` rounds to nearest even
(9.7.9.25.4.2): ``.add.f32`` flushes subnormal inputs and results to sign-preserving zero
("the current implementation" the section describes), ``.add.f64`` keeps them, and
``.add.noftz`` on ``.f16``/``.bf16`` (which require it) keeps them too. The tensor form
takes its element type from the map (integer maps only) and reduces the box's in-bounds
elements, read from shared memory in the map's swizzled placement.

Into ``.shared::cluster`` (``.mbarrier::complete_tx::bytes``, the integer types of the
ISA's table for that destination) the reduction is queued as a bulk copy is
(:class:`hardware.simt.tma.BulkCopies`) and combines with the destination's bytes when it
lands, at the wait that observes its mbarrier.

Refused with a clear message: the half-precision ``.min``/``.max`` (their NaN and
signed-zero rules are not stated), floating-point tensor reductions (the tensor form's
section states no rounding rule), and the im2col tensor forms.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .errors import ExecutionError, UnsupportedPtxError
from .isa.data import _address
from .isa.half import _half_arith
from .isa.operands import Op, getter, per_thread
from .parser import Imm, Instruction, Reg
from .proxycheck import async_read
from .types import TYPES

__all__ = ["OPS", "DSMEM_OPS", "c_reduce_bulk", "reduce_op", "reduce_dsmem_op", "combine"]

#: the reduction operations and the element types each takes into global memory (PTX ISA
#: 9.7.9.25.4.2, table of valid .redOp and element types; the tensor form's table of
#: 9.7.9.25.5.3 is the same without .f64); the f16/bf16 min/max are refused below
OPS = {
    "and": ("b32", "b64"), "or": ("b32", "b64"), "xor": ("b32", "b64"),
    "add": ("u32", "s32", "u64", "f32", "f64", "f16", "bf16"), "inc": ("u32",),
    "dec": ("u32",), "min": ("u32", "s32", "u64", "s64", "f16", "bf16"),
    "max": ("u32", "s32", "u64", "s64", "f16", "bf16"),
}
#: element types of a tensor map that the integer reductions take, by map dtype
_MAP_TYPES = {"uint32": "u32", "int32": "s32", "uint64": "u64", "int64": "s64"}
_CHUNK = 16
#: the operations that are one NumPy ufunc on the element type
_ELEMENTWISE = {"add": np.add, "and": np.bitwise_and, "or": np.bitwise_or,
                "xor": np.bitwise_xor, "min": np.minimum, "max": np.maximum}


def _fail(inst: Instruction, why: str) -> UnsupportedPtxError:
    return UnsupportedPtxError(f"line {inst.line}: {inst.text!r}: {why}")


def reduce_op(inst: Instruction) -> str:
    """The instruction's reduction operation (its one qualifier among :data:`OPS`)."""
    ops = [p for p in inst.parts if p in OPS]
    if len(ops) != 1:
        raise _fail(inst, f"a bulk reduction names one of .{', .'.join(OPS)}")
    return ops[0]


def combine(op: str, tname: str, dst: np.ndarray, src: np.ndarray) -> np.ndarray:
    """``op(dst, src)`` element by element on raw bytes (uint8 arrays of whole elements
    of type ``tname``); the result's bytes."""
    if tname == "f32":
        # RN; "the current implementation of cp.reduce.async.bulk.add.f32 flushes
        # subnormal inputs and results to sign-preserving zero" (9.7.9.25.4.2)
        d, s = (_ftz32(a.view(np.float32)) for a in (dst, src))
        with np.errstate(over="ignore", invalid="ignore"):
            return _ftz32(d + s).view(np.uint8)
    if tname == "f64":
        with np.errstate(over="ignore", invalid="ignore"):
            return (dst.view(np.float64) + src.view(np.float64)).view(np.uint8)
    if tname in ("f16", "bf16"):
        d, s = dst.view(np.uint16), src.view(np.uint16)
        out = _half_arith("add", "fp16" if tname == "f16" else "bf16", "nearest_even",
                          [d, s], False, False)
        return np.asarray(out, np.uint16).view(np.uint8)
    t = TYPES["u" + tname[1:] if tname[0] == "b" else tname]
    d, s = dst.view(t.dtype), src.view(t.dtype)
    if op in _ELEMENTWISE:
        out = _ELEMENTWISE[op](d, s)     # add wraps, as the hardware's integer add
    elif op == "inc":
        out = np.where(d >= s, 0, d + 1).astype(t.dtype)
    else:  # dec
        out = np.where((d == 0) | (d > s), s, d - 1).astype(t.dtype)
    return np.ascontiguousarray(out, t.dtype).view(np.uint8)


def _ftz32(x: np.ndarray) -> np.ndarray:
    """float32 ``x`` with its subnormals replaced by the zero of their sign."""
    sub = (x != 0) & (np.abs(x) < np.float32(2.0**-126))
    return np.where(sub, np.copysign(np.float32(0), x), x).astype(np.float32)


def map_type(tm: Any, op: str, ctx: Any, thread: int, inst: Instruction) -> str:
    """The element type of a tensor reduction through map ``tm`` (an ExecutionError for
    a map type or operation the reduction does not take)."""
    tname = _MAP_TYPES.get(tm.dtype)
    if tname is None:
        raise ExecutionError(f"{ctx.location(thread, inst)}: a tensor reduction through a "
                             f"{tm.dtype} map is not modelled (integer maps only: the "
                             "floating-point rounding of cp.reduce.async.bulk.tensor is "
                             "not)")
    if op in ("and", "or", "xor"):
        return "b" + tname[1:]
    if tname not in OPS[op]:     # the tensor form's table (9.7.9.25.5.3) for integers
        raise ExecutionError(f"{ctx.location(thread, inst)}: .{op} does not take "
                             f"{tm.dtype} elements (PTX ISA 9.7.9.25.5.3)")
    return tname


#: the reductions into .shared::cluster and their types (9.7.9.25.4.2's table)
DSMEM_OPS = {"add": ("u32", "s32", "u64"), "min": ("u32", "s32"), "max": ("u32", "s32"),
             "inc": ("u32",), "dec": ("u32",), "and": ("b32",), "or": ("b32",),
             "xor": ("b32",)}


def reduce_dsmem_op(inst: Instruction) -> tuple[str, str]:
    """(operation, element type) of a cp.reduce.async.bulk into .shared::cluster, checked
    against the ISA's table for that destination."""
    op = reduce_op(inst)
    tnames = [p for p in inst.parts if p in TYPES]
    if len(tnames) != 1 or tnames[0] not in DSMEM_OPS[op]:
        raise _fail(inst, f".{op} into .shared::cluster takes ."
                          f"{', .'.join(DSMEM_OPS[op])} (PTX ISA 9.7.9.25.4.2)")
    return op, tnames[0]


def c_reduce_bulk(inst: Instruction, ctx: Any, spans: Any, bulk_state: Any) -> Op:
    """cp.reduce.async.bulk (the non-tensor form; see the module docstring); ``spans``
    and ``bulk_state`` are :mod:`hardware.simt.tma`'s byte locator and bulk-copy state
    (passed in: that module dispatches here)."""
    parts = inst.parts
    mods = set(parts[4:])
    if len(parts) < 6 or parts[4] != "global" or parts[5] != "shared::cta":
        raise _fail(inst, "cp.reduce.async.bulk is .global.shared::cta.bulk_group or "
                          ".shared::cluster.shared::cta.mbarrier::complete_tx::bytes")
    if "bulk_group" not in mods:
        raise _fail(inst, "cp.reduce.async.bulk.global.shared::cta completes with "
                          ".bulk_group")
    op = reduce_op(inst)
    tnames = [p for p in parts if p in TYPES]
    if len(tnames) != 1:
        raise _fail(inst, "a bulk reduction names one element type")
    tname = tnames[0]
    if tname not in OPS[op]:
        raise _fail(inst, f".{op} does not take .{tname} (PTX ISA 9.7.9.25.4.2: "
                          f".{', .'.join(OPS[op])})")
    if tname in ("f16", "bf16"):
        if op != "add":
            raise _fail(inst, f".{op}.{tname}: the NaN and signed-zero rules of the "
                              "half-precision bulk min/max are not stated; not modelled")
        if "noftz" not in mods:
            raise _fail(inst, f".add.{tname} requires .noftz (PTX ISA 9.7.9.25.4.2)")
    elif "noftz" in mods:
        raise _fail(inst, f".noftz is for .f16 and .bf16, not .{tname}")
    ops = list(inst.operands)
    if "L2::cache_hint" in mods:
        ops = ops[:-1]
    if len(ops) != 3:
        raise _fail(inst, "expected [dstMem], [srcMem], size")
    if not isinstance(ops[2], (Reg, Imm)):
        raise _fail(inst, "size must be a register or a constant")
    gdst = _address(ops[0], ctx, inst, "global")
    gsrc = _address(ops[1], ctx, inst, "shared")
    gsize = getter(ops[2], TYPES["u32"], ctx, inst)
    st = bulk_state(ctx)

    def fn(ix: Any, ex: Any) -> None:
        th, (dst, src, size) = per_thread(ctx, ix, [(g, np.int64) for g in
                                                    (gdst, gsrc, gsize)])
        for i in range(th.size):
            t, n = int(th[i]), int(size[i])
            if n <= 0 or n % _CHUNK:
                raise ExecutionError(f"{ctx.location(t, inst)}: bulk reduction size {n} is "
                                     "not a positive multiple of 16 bytes")
            sbuf, soff = spans(ctx, "shared", t, ex, int(src[i]), n, inst, "ld")
            async_read(ctx, t, soff[::_CHUNK], _CHUNK, inst, "bulk reduction")
            dbuf, doff = spans(ctx, "global", t, ex, int(dst[i]), n, inst, "atom")
            dbuf[doff] = combine(op, tname, dbuf[doff].copy(), sbuf[soff].copy())
            ctx.memory.init_shadow[doff] = True
            st.bytes += n
            if ctx.stats is not None:
                ctx.stats.bulk_copy_bytes += n
    return Op(inst, "alu", fn)
