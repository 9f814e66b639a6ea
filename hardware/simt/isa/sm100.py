"""The sm_100 additions to the floating-point instructions (PTX ISA 9.1) that kernels
without tensor cores use (softmax, layer norm: Triton emits them for sm_100):

- ``add/sub/mul{.rnd}{.ftz}.f32x2 d, a, b`` and ``fma.rnd{.ftz}.f32x2 d, a, b, c``
  (9.7.3.3-9.7.3.6): the operands are ``.b64`` registers holding two binary32 values,
  element 0 in bits 0-31 and element 1 in bits 32-63; each element is one IEEE
  operation correctly rounded in the instruction's mode (``.rn`` when none is given for
  add/sub/mul; fma needs one), ``.ftz`` flushes subnormal inputs and results to
  sign-preserving zero, a NaN result is the canonical NaN 0x7FFFFFFF as for ``.f32``.
  ``.sat`` does not exist for ``.f32x2`` (ptxas: "Illegal modifier '.sat'"). sm_100 and
  later targets.
- three-input ``min/max{.ftz}{.NaN}{.abs}.f32 d, a, b, c`` (9.7.3.11-12): the two-input
  operation applied as ``op(op(a, b), c)``, with IEEE 754-2019 minimumNumber /
  maximumNumber (a NaN input is ignored, -0 < +0; all NaN gives the canonical NaN;
  ``.NaN``: any NaN input gives it) and ``.abs`` taking the magnitudes first. sm_100 and
  later, PTX ISA 8.8 or later (as ptxas requires); ``.xorsign`` exists only with two
  inputs.
- two-input ``min/max{.ftz}{.NaN}.xorsign.abs.f32 d, a, b`` (sm_86 and later): the
  magnitude is min/max of ``|a|`` and ``|b|``, the sign bit the XOR of the sign bits of
  ``a`` and ``b``; when the result is NaN the modifiers are ignored (canonical NaN).
- ``redux.sync.{min,max}{.abs}{.NaN}.f32 d, a, membermask`` (9.7.13.12, sm_100a): the
  minimum/maximum over the executing lanes named by the mask, ``+0.0 > -0.0``,
  ``.abs`` reducing the magnitudes, NaN inputs ignored unless ``.NaN`` (then any NaN
  gives the canonical NaN), all NaN the canonical NaN. ``.add`` and ``.ftz`` do not
  exist for .f32 (ptxas refuses them).

Every other form of these opcodes goes to the compiler that handled it before
(:func:`extend` wraps the table's entries). Target gating follows ptxas 13.0 verdicts
(``-arch=sm_100a`` against ``sm_90a``/``sm_100``/``sm_120a``).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .. import rounding
from ..errors import PtxTypeError
from ..parser import Instruction
from ..types import TYPES
from .operands import (Op, _canonical_nan32, _ftz32, _mode, _unsupported,
                       float_min_max, getter, setter)

__all__ = ["extend"]

_CANON = np.uint32(0x7FFFFFFF)
_SIGN = np.uint32(0x80000000)


def _arch(ctx: Any) -> str:
    target = str(getattr(getattr(ctx.kernel, "module_key", None), "target", "") or "")
    return target.split(",")[0].strip()


def _version(ctx: Any) -> tuple[int, int] | None:
    src = getattr(getattr(ctx.kernel, "module_key", None), "source", None)
    v = str(getattr(src, "version", "") or "")
    try:
        major, minor = v.split(".")
        return int(major), int(minor)
    except ValueError:
        return None


def _sm(arch: str) -> int:
    digits = "".join(ch for ch in arch[3:] if ch.isdigit())
    return int(digits) if arch.startswith("sm_") and digits else 0


def _need_sm100(inst: Instruction, ctx: Any, feature: str) -> None:
    arch = _arch(ctx)
    if arch and _sm(arch) < 100:
        raise PtxTypeError(f"line {inst.line}: {inst.text!r}: {feature} requires .target "
                           f"sm_100 or higher, the module's is {arch} (PTX ISA 9.1)")


def _error(inst: Instruction, why: str) -> PtxTypeError:
    return PtxTypeError(f"line {inst.line}: {inst.text!r}: {why}")


def _bits(x: Any) -> np.ndarray:
    return np.atleast_1d(np.asarray(x)).astype(np.uint64, copy=False)


def _halves(x: Any) -> tuple[np.ndarray, np.ndarray]:
    u = _bits(x)
    lo = (u & np.uint64(0xFFFFFFFF)).astype(np.uint32).view(np.float32)
    hi = (u >> np.uint64(32)).astype(np.uint32).view(np.float32)
    return lo, hi


def _join(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    lo = np.asarray(lo, np.float32).view(np.uint32).astype(np.uint64)
    hi = np.asarray(hi, np.float32).view(np.uint32).astype(np.uint64)
    return lo | (hi << np.uint64(32))


def _f32x2(inst: Instruction, ctx: Any) -> Op:
    op = inst.parts[0]
    _need_sm100(inst, ctx, f"{op}.f32x2")
    mods = [p for p in inst.parts[1:] if p != "f32x2"]
    rnd = [p for p in mods if p in ("rn", "rz", "rm", "rp")]
    if "sat" in mods:
        raise _error(inst, f".sat does not exist for {op}.f32x2 (PTX ISA 9.7.3)")
    extra = set(mods) - {"rn", "rz", "rm", "rp", "ftz"}
    if extra or len(rnd) > 1 or len(mods) != len(set(mods)):
        raise _error(inst, f"{op}.f32x2 takes {{.rnd}}{{.ftz}} only, got "
                           f"{'.'.join(mods) or 'nothing'}")
    if op == "fma" and not rnd:
        raise _error(inst, "fma.f32x2 needs a rounding modifier (.rn/.rz/.rm/.rp)")
    nsrc = 3 if op == "fma" else 2
    if len(inst.operands) != nsrc + 1:
        raise _unsupported(inst, f"expected {nsrc + 1} operands, got {len(inst.operands)}")
    mode = _mode(inst)
    ftz = "ftz" in mods
    b64 = TYPES["b64"]
    from ..parser import Reg
    for o in inst.operands:
        if not isinstance(o, Reg):
            raise _error(inst, f"{op}.f32x2 takes .b64 registers only (got {o!r})")
    srcs = [getter(o, b64, ctx, inst) for o in inst.operands[1:]]
    put = setter(inst.operands[0], b64, ctx, inst)
    for o in inst.operands:
        if ctx.register(o.name, inst).dtype.itemsize != 8:
            raise _error(inst, f"{op}.f32x2 operand {o.name} is not a 64-bit register")
    f: Callable
    if op == "add":
        f = lambda a, b: rounding.add_f32(a, b, mode)
    elif op == "sub":
        f = lambda a, b: rounding.add_f32(a, -np.asarray(b, np.float32), mode)
    elif op == "mul":
        f = lambda a, b: rounding.mul_f32(a, b, mode)
    else:
        f = lambda a, b, c: rounding.fma_f32(a, b, c, mode)

    def elem(*xs: np.ndarray) -> np.ndarray:
        if ftz:
            xs = tuple(_ftz32(x) for x in xs)
        with np.errstate(all="ignore"):
            r = np.asarray(f(*xs), np.float32)
        if ftz:
            r = _ftz32(r)
        return np.asarray(_canonical_nan32(r), np.float32)

    def fn(ix: Any, ex: Any) -> None:
        parts = [_halves(g(ix)) for g in srcs]
        n = max(p[0].shape[0] for p in parts)
        lo = elem(*(np.broadcast_to(p[0], (n,)) for p in parts))
        hi = elem(*(np.broadcast_to(p[1], (n,)) for p in parts))
        put(ix, _join(lo, hi))
    return Op(inst, "alu", fn)


def _pick(a: np.ndarray, b: np.ndarray, is_min: bool, nan_mode: bool) -> np.ndarray:
    """Two-input min/max on float32 arrays per PTX ISA 9.7.3.11-12 (NaN -> canonical)."""
    return float_min_max(a, b, is_min, nan_mode, _CANON.view(np.float32)).astype(np.float32)


def _minmax_f32(inst: Instruction, ctx: Any) -> Op:
    is_min = inst.parts[0] == "min"
    mods = [p for p in inst.parts[1:] if p != "f32"]
    if set(mods) - {"ftz", "NaN", "abs", "xorsign"} or len(mods) != len(set(mods)):
        raise _unsupported(inst, f"{inst.opcode}: modifier not supported")
    three = len(inst.operands) == 4
    xorsign = "xorsign" in mods
    absm = "abs" in mods
    if xorsign and not absm:
        raise _error(inst, ".xorsign needs .abs (PTX ISA 9.7.3.11-12)")
    if three:
        _need_sm100(inst, ctx, f"{inst.parts[0]}.f32 with 3 input operands")
        v = _version(ctx)
        if v is not None and v < (8, 8):
            raise _error(inst, f"{inst.parts[0]}.f32 with 3 input operands requires PTX "
                               f"ISA .version 8.8 or later, the module's is "
                               f"{v[0]}.{v[1]}")
        if xorsign:
            raise _error(inst, ".xorsign cannot be used with three inputs (PTX ISA "
                               "9.7.3.11-12)")
    elif absm and not xorsign:
        raise _error(inst, ".abs without .xorsign needs three inputs (PTX ISA 9.7.3.11-12)")
    elif len(inst.operands) != 3:
        raise _unsupported(inst, f"expected 3 or 4 operands, got {len(inst.operands)}")
    ftz = "ftz" in mods
    nan_mode = "NaN" in mods
    f32 = TYPES["f32"]
    srcs = [getter(o, f32, ctx, inst) for o in inst.operands[1:]]
    put = setter(inst.operands[0], f32, ctx, inst)

    def fn(ix: Any, ex: Any) -> None:
        xs = [np.atleast_1d(np.asarray(g(ix), np.float32)) for g in srcs]
        xs = list(np.broadcast_arrays(*xs))
        if ftz:
            xs = [_ftz32(x) for x in xs]
        sign = None
        if xorsign:
            sign = (xs[0].view(np.uint32) ^ xs[1].view(np.uint32)) & _SIGN
        if absm:
            xs = [np.abs(x) for x in xs]
        r = _pick(xs[0], xs[1], is_min, nan_mode)
        if three:
            r = _pick(r, xs[2], is_min, nan_mode)
        if sign is not None:
            u = r.view(np.uint32)
            r = np.where(np.isnan(r), r, ((u & ~_SIGN) | sign).view(np.float32))
        if ftz:
            r = _ftz32(r)
        put(ix, np.asarray(r, np.float32))
    return Op(inst, "alu", fn)


def _redux_f32(inst: Instruction, ctx: Any) -> Op:
    from .sync import redux_operands
    arch = _arch(ctx)
    if arch and arch != "sm_100a":
        raise _error(inst, f"redux.f32 is not supported on .target {arch} (sm_100a; "
                           "ptxas refuses it on sm_90a, sm_100 and sm_120a)")
    mods = [p for p in inst.parts[1:] if p not in ("sync", "f32")]
    ops = [p for p in mods if p in ("min", "max", "add", "and", "or", "xor")]
    if len(ops) != 1 or ops[0] not in ("min", "max"):
        raise _error(inst, f"redux.sync on .f32 takes .min or .max (got "
                           f"{'.'.join(ops) or 'none'})")
    if set(mods) - {"min", "max", "abs", "NaN"} or len(mods) != len(set(mods)):
        raise _error(inst, f"redux.sync.{ops[0]}.f32 takes {{.abs}}{{.NaN}} only")
    if inst.parts[1] != "sync" or len(inst.operands) != 3:
        raise _unsupported(inst, "redux.sync.op.f32 d, a, membermask")
    is_min = ops[0] == "min"
    absm = "abs" in mods
    nan_mode = "NaN" in mods
    values, put = redux_operands(inst, ctx, TYPES["f32"], np.float32)

    def fn(ix: Any, ex: Any) -> None:
        v = values(ix, ex)
        if absm:
            v = np.abs(v)
        # lanes outside the executing set act as NaN: ignored without .NaN
        nanpad = _CANON.view(np.float32)
        acc = np.full(v.shape[0], nanpad, np.float32)
        for lane in range(32):
            x = np.where(ex.mask[:, lane], v[:, lane], nanpad).astype(np.float32)
            nxt = _pick(acc, x, is_min, False)
            acc = nxt
        if nan_mode:
            anynan = (np.isnan(v) & ex.mask).any(axis=1)
            acc = np.where(anynan, nanpad, acc)
        put(ix, np.broadcast_to(acc[:, None], ex.rows.shape)[ex.mask])
    return Op(inst, "alu", fn)


def extend(table: dict[str, Callable[[Instruction, Any], Op]]) -> None:
    """Route the forms this module implements to it; the rest keep ``table``'s
    compilers."""
    def wrap(name: str, mine: Callable[[Instruction, Any], Op | None]) -> None:
        prev = table[name]

        def compile_(inst: Instruction, ctx: Any) -> Op:
            op = mine(inst, ctx)
            return prev(inst, ctx) if op is None else op
        compile_.__doc__ = prev.__doc__
        table[name] = compile_

    def arith(inst: Instruction, ctx: Any) -> Op | None:
        return _f32x2(inst, ctx) if "f32x2" in inst.parts[1:] else None

    def minmax(inst: Instruction, ctx: Any) -> Op | None:
        if "f32" not in inst.parts[1:]:
            return None
        if len(inst.operands) == 4 or "xorsign" in inst.parts or "abs" in inst.parts:
            return _minmax_f32(inst, ctx)
        return None

    def redux(inst: Instruction, ctx: Any) -> Op | None:
        return _redux_f32(inst, ctx) if "f32" in inst.parts[1:] else None

    for name in ("add", "sub", "mul", "fma"):
        wrap(name, arith)
    for name in ("min", "max"):
        wrap(name, minmax)
    wrap("redux", redux)
