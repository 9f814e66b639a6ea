"""The instruction table: each supported PTX opcode compiled to a vectorised closure.

``compile_instruction(inst, ctx)`` turns one decoded :class:`~hardware.simt.parser.Instruction`
into an :class:`Op` whose ``fn(ix, ex)`` executes it for the threads ``ix`` (an index
array into the register file, or ``slice(None)`` for all of them) of the warps described
by ``ex``. Every register holds raw bits (see :mod:`hardware.simt.types`); an operand is
*viewed* as the instruction type. Anything outside this table is an
:class:`~hardware.simt.errors.UnsupportedPtxError` at load time.

Supported (PTX ISA 9.0, chapter 9.7; section numbers in each function):

- integer (.s/.u/.b 8-64 bits): add, sub (.sat.s32), mul (.lo/.hi/.wide), mad (.lo/.hi/
  .wide), extended precision (add.cc, addc, sub.cc, subc, mad.cc, madc), div, rem, abs,
  neg, min, max, sad, popc, clz, brev, bfe, bfi, bfind, and, or, xor, not, cnot, lop3,
  shl, shr, shf, prmt (default mode), dp4a, dp2a;
- device functions: ``.func`` definitions and ``call``, by inlining (:mod:`.inline`);
- comparison and selection: setp (all integer and float comparisons, .and/.or/.xor with
  a predicate, two destinations), selp, testp;
- float32/float64: add, sub, mul, fma, mad.rnd, div (.rn/.rz/.rm/.rp, .approx, .full),
  sqrt, rcp (IEEE modes and .approx), rsqrt/ex2/lg2/sin/cos/tanh .approx, min, max, abs,
  neg, copysign, with .ftz and .sat;
- float16/bfloat16 (scalar and .x2): add, sub, mul, fma.rn, neg, abs, min, max, setp;
- cvt: every integer/float pair with .rn/.rz/.rm/.rp/.rni/.rzi/.rmi/.rpi, .sat, .ftz;
  to and from f16/bf16, to f16x2/bf16x2; the packed FP8/FP6/FP4/UE8M0 forms
  (e4m3x2, e5m2x2, e2m3x2, e3m2x2, e2m1x2, ue8m0x2) in :mod:`.lowprec`;
- data movement: mov (incl. special registers, variable addresses, vector pack/unpack),
  ld/ldu/st on .param/.global/.shared/.local/.const and generic addresses, .v2/.v4,
  cp.async global -> shared with its commit/wait groups (:mod:`.async_copy`),
  cache operators accepted; cvta (to/from .global/.shared/.local/.const); isspacep;
- atomics: atom and red on .global/.shared/generic: add, min, max, exch, cas, and, or,
  xor, inc, dec (integer; add/min/max/exch on f32/f64; add.noftz on f16/bf16 and
  their .x2 pairs);
- warp level: shfl.sync (up/down/bfly/idx, clamp and segment), vote.sync (all/any/uni/
  ballot), activemask, redux.sync (integer), match.sync (any/all), bar.warp.sync;
- warp matrix (:mod:`.matrix`): mma.sync (m8n8k4 f16; m16n8k8/k16 f16, bf16; m16n8k4/k8
  tf32; m16n8k32 e4m3/e5m2; m16n8k16/k32 s8/u8), ldmatrix/stmatrix .m8n8.b16,
  movmatrix, wmma.load/store/mma (m16n16k16, m32n8k16, m8n32k16, m16n16k8);
- control: bra (.uni), ret, exit, bar.sync / barrier.sync (id, thread count),
  bar.arrive (named barriers), membar/fence (no effect on values: execution is
  sequentially consistent; fence.proxy.async, fence.mbarrier_init and
  fence.acq_rel.cluster included; racecheck orders accesses by them, and by
  fence.proxy.async a generic write before an async-proxy read, :mod:`.proxycheck`);
- sm_90 asynchronous programming: mbarrier (:mod:`.mbarrier`), clusters with
  barrier.cluster, mapa, getctarank and .shared::cluster accesses (:mod:`.cluster`),
  cp.async.bulk and cp.async.bulk.tensor with tensor maps (:mod:`.tma`,
  :mod:`.tensormap`), wgmma (:mod:`.wgmma`), elect.sync, setmaxnreg, griddepcontrol,
  brkpt, prefetch, %globaltimer, packed .u16x2/.s16x2 min/max (:mod:`.isa.sm90`);
- sm_100a: Tensor Memory with tcgen05.alloc/dealloc/relinquish_alloc_permit/ld/st/wait/
  fence (:mod:`.tmem`), tcgen05.mma and tcgen05.commit (:mod:`.tcgen05`), the f32x2 pair
  arithmetic, three-input min/max.f32 and redux.sync.f32 (:mod:`.isa.sm100`).

Integer arithmetic wraps modulo 2**n; integer division by zero is refused (the PTX ISA
calls its result unspecified). Floating-point results are IEEE 754 correctly rounded in
the instruction's mode (:mod:`hardware.simt.rounding`), and a NaN result of f32
arithmetic is the canonical NaN 0x7FFFFFFF (f64 NaNs keep NumPy's propagation);
``.approx`` instructions return
a float64 model rounded to float32 (``sin``/``cos``/``tanh`` are
:func:`refimpl.elementary.sin`, ``cos`` and ``tanh``, whose error bounds are absolute for
sin and cos), which is within the documented hardware error (see :data:`APPROX_ERROR`),
not the hardware's bits; ``div.approx.f32`` is ``a * (1/b)`` as the PTX ISA defines it, with the
reciprocal rounded and flushed to zero when subnormal (so it gives the documented 0 for
divisors beyond 2**126).

The compilers live in :mod:`hardware.simt.isa`, one module per chapter of the PTX ISA:
:mod:`~.isa.integer` (9.7.1-9.7.2, 9.7.8), :mod:`~.isa.floating` (9.7.3),
:mod:`~.isa.half` (9.7.4), :mod:`~.isa.conversion` (cvt, cvta), :mod:`~.isa.data`
(mov, ld/st, prmt, shfl), :mod:`~.isa.sync` (bar, membar, atom/red, vote, match, redux)
and :mod:`~.isa.control` (setp, selp, bra, ret, exit), with the shared operand access in
:mod:`~.isa.operands`; this module is the opcode table and its dispatch.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from . import async_copy, cluster, matrix, mbarrier, tcgen05, tma, wgmma
from .device_runtime import c_call, c_trap
from .errors import PtxError
from .isa.control import c_bra, c_brx, c_exit, c_selp, c_setp
from .isa.conversion import c_cvt, c_cvta
from .isa.data import c_isspacep, c_ld, c_mov, c_prmt, c_shfl, c_st
from .isa.floating import APPROX_ERROR, c_copysign, c_fma, c_testp, c_unary_float
from .isa.half import _HALF_FORMATS, c_half
from .isa.integer import CARRY_REGISTER  # noqa: F401 (importable from here)
from .isa.integer import (c_abs_neg, c_add_sub, c_bfe, c_bfi, c_bfind, c_bitcount, c_bitwise,
                          c_carry, c_div, c_dot, c_lop3, c_mad, c_min_max, c_mul, c_rem, c_sad,
                          c_shf, c_shift)
from .isa.operands import Op, _unsupported, getter, setter  # noqa: F401
from .isa import sm90, sm100
from .isa.sync import c_activemask, c_atom, c_bar, c_match, c_noop, c_redux, c_vote
from .parser import Instruction

__all__ = ["Op", "compile_instruction", "APPROX_ERROR", "SUPPORTED_OPCODES"]

_TABLE: dict[str, Callable[[Instruction, Any], Op]] = {
    "add": c_add_sub, "sub": c_add_sub, "mul": c_mul, "mad": c_mad, "fma": c_fma,
    "addc": c_carry, "subc": c_carry, "madc": c_carry, "dp4a": c_dot, "dp2a": c_dot,
    "div": c_div, "rem": c_rem, "abs": c_abs_neg, "neg": c_abs_neg,
    "min": c_min_max, "max": c_min_max,
    "and": c_bitwise, "or": c_bitwise, "xor": c_bitwise, "not": c_bitwise,
    "cnot": c_bitwise, "lop3": c_lop3, "shl": c_shift, "shr": c_shift,
    "popc": c_bitcount, "clz": c_bitcount, "brev": c_bitcount, "bfe": c_bfe, "bfi": c_bfi,
    "prmt": c_prmt, "setp": c_setp, "selp": c_selp, "mov": c_mov, "cvta": c_cvta,
    "cvt": c_cvt, "sqrt": c_unary_float, "rcp": c_unary_float, "rsqrt": c_unary_float,
    "ex2": c_unary_float, "lg2": c_unary_float, "sin": c_unary_float, "cos": c_unary_float,
    "tanh": c_unary_float,
    "ld": c_ld, "ldu": c_ld, "st": c_st, "atom": c_atom, "red": c_atom,
    "bar": c_bar, "barrier": c_bar, "membar": c_noop, "fence": c_noop, "nanosleep": c_noop,
    "bra": c_bra, "brx": c_brx, "ret": c_exit, "exit": c_exit,
    "shfl": c_shfl, "vote": c_vote, "activemask": c_activemask, "redux": c_redux,
    "copysign": c_copysign, "testp": c_testp, "shf": c_shf, "bfind": c_bfind, "sad": c_sad,
    "match": c_match, "isspacep": c_isspacep,
    "call": c_call, "trap": c_trap,
}


def _c_cp(inst: Instruction, ctx: Any) -> Op:
    """cp.async (hardware.simt.async_copy); cp.async.bulk{.tensor} and cp.reduce.async.bulk
    (hardware.simt.tma)."""
    parts = inst.parts
    if len(parts) > 2 and parts[2] == "bulk" or len(parts) > 1 and parts[1] == "reduce":
        return tma.c_bulk(inst, ctx)
    return async_copy.c_cp(inst, ctx)


def _register_extensions() -> None:
    """The warp-matrix instructions and cp.async live in their own modules."""
    _TABLE.update(matrix.COMPILERS)
    _TABLE.update(wgmma.COMPILERS)
    _TABLE.update(mbarrier.COMPILERS)
    _TABLE.update(cluster.COMPILERS)
    _TABLE.update(sm90.COMPILERS)
    _TABLE.update(tcgen05.COMPILERS)
    _TABLE["mbarrier"] = tcgen05.observe_waits(_TABLE["mbarrier"])
    _TABLE["tensormap"] = tma.c_tensormap
    _TABLE["cp"] = _c_cp
    sm100.extend(_TABLE)  # sm_100 forms of add/sub/mul/fma/min/max/redux


_register_extensions()

#: the opcodes this interpreter implements (see each compiler's docstring for forms)
SUPPORTED_OPCODES = tuple(sorted(_TABLE))


def compile_instruction(inst: Instruction, ctx: Any) -> Op:
    """Compile ``inst`` for the launch ``ctx``; unsupported forms raise at once."""
    c = _TABLE.get(inst.parts[0])
    if c is None:
        raise _unsupported(inst, f"opcode {inst.parts[0]!r} is not supported")
    if inst.parts[0] not in ("cvt", "mov", "ld", "st", "ldu", "selp", "atom", "red", "mma",
                             "wmma", "wgmma", "cp") and any(
            p in _HALF_FORMATS for p in inst.parts[1:]):
        c = c_half
    try:
        op = c(inst, ctx)
    except PtxError:
        raise
    except (KeyError, IndexError, ValueError, AttributeError, TypeError) as e:
        raise _unsupported(inst, f"cannot decode ({type(e).__name__}: {e})") from None
    if inst.guard is not None:
        g = ctx.register(inst.guard.name, inst)
        if g.dtype != np.bool_:
            raise _unsupported(inst, f"guard {inst.guard.name} is not a predicate")
        op.guard = g
        op.guard_neg = inst.guard.neg
    return wgmma.watch(op, inst, ctx)
