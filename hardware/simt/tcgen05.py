"""``tcgen05.mma`` and ``tcgen05.commit`` (sm_100a; PTX ISA 9.1/9.2, sections 9.7.16.4
descriptors, 9.7.16.10 the MMA, 9.7.16.12.1 commit); Tensor Memory and the other tcgen05
instructions are :mod:`hardware.simt.tmem`::

    tcgen05.mma.cta_group::1.kind [d-tmem], a-desc, b-desc, idesc{, {disable-output-lane}},
                                  enable-input-d{, scale-input-d};
    tcgen05.commit.cta_group::1.mbarrier::arrive::one{.shared::cluster}.b64 [mbar];
    tcgen05.commit.cta_group::1.mbarrier::arrive::one{.shared::cluster}.multicast::cluster.b64
                   [mbar], ctaMask;

Kinds: ``f16`` (f16 or bf16 inputs, f32 accumulator, or f16 with f16 inputs), ``tf32``
(f32), ``f8f6f4`` with e4m3/e5m2 inputs (f32 or f16) and ``i8`` (s8/u8, s32, with the
descriptor's saturate bit); A from shared memory or from Tensor Memory (``[a-tmem]``:
row i in lane i, the K elements packed along the columns, 32 / bits of them to a cell,
the lowest bits first; not transposed); M = 128 (the data path layout D of 9.7.16.10.5.4:
row i of D in lane i of Tensor Memory, column j in column j, from ``d-tmem``, whose lane
must be 0) or M = 64 (layout F, 9.7.16.10.5.6: rows 16 q .. 16 q + 15 in the lanes
32 q + a .. 32 q + a + 15 of warp quarter q, a = 0 or 16 the lane of ``d-tmem``; an A in
Tensor Memory has the same rows and alignment), see :mod:`.tcgen05_layouts`; N a
multiple of 8 (for i8: 8, 16, 24, 32, 48, ... 256) in 8..256; K 16 (f16), 8 (tf32) or 32.
A 16-bit D element takes the low 16 bits of its 32-bit cell (9.7.16.10.4.1).
``tcgen05.mma.ws`` (M = 32, 64, 128 and the B collector buffers) is :mod:`.tcgen05_ws`.

Instruction descriptor (9.7.16.4.2, Table 42): bits 0-1 sparsity selector, 2 sparsity,
3 saturate (i8), 4-5 dtype (F16 0, F32 1, S32 2), 7-9 atype and 10-12 btype (f16 kind:
F16 0, BF16 1; tf32: TF32 2; f8f6f4: E4M3 0, E5M2 1, E2M3 3, E3M2 4, E2M1 5; i8: U8 0,
S8 1), 13/14 negate A/B, 15/16 transpose A/B (A MN-major, B MN-major), 17-22 N >> 3,
24-28 M >> 4, 30-31 the .ws shift. Reserved bits must be zero.

Shared-memory descriptor (9.7.16.4.1, Table 40): bits 0-13 start address, 16-29 leading
dimension byte offset, 32-45 stride dimension byte offset (each ``(x & 0x3FFFF) >> 4``),
46-48 the constant 0b001, 49-51 base offset, 52 leading-dimension mode (0 relative; the
absolute mode exists on sm_103a only and is refused), 61-63 swizzle (0 none, 2 128-byte,
4 64-byte, 6 32-byte; 1, 128-byte with 32-byte atoms, is refused; 3, 5 and 7 are
invalid). The canonical layouts (9.7.16.3.3) are those of wgmma: the operand's 16-byte
chunks are placed by :func:`hardware.simt.wgmma.chunk_addresses` and swizzled by
:func:`hardware.simt.wgmma.swizzle`; a non-zero base offset of a swizzled layout is
refused (without swizzling it does not apply and is ignored, as for wgmma, 9.7.15.5.1.2.2).

``scale-input-d`` (kind::f16 and kind::tf32, 0..15; 9.7.16.10.9.1): D = A*B + D * 2^-s,
the scaled D the accumulator input; an element whose scaled value is not exactly a value
of D's type (it would underflow) is an error, the ISA not saying how it is rounded.

Arithmetic: the launch GPU's tcgen05 presets of :mod:`refimpl.matmul.presets`
(``"B200-FP16"``, ``"B200-BF16"``, ``"B200-TF32"``: the models of tcgen05.mma and
mma.sync; ``"B200-E4M3-TCGEN05"``, ``"B200-E5M2-TCGEN05"``; e4m3 x e5m2 is the E4M3 model
with each operand's own input exponent floor), by :func:`refimpl.matmul.matmul` on the
exact operands with D as the accumulator input when ``enable-input-d`` is true; a GPU
without them is refused at launch. Negation is exact. Integer products are exact, wrapped
to 32 bits (or saturated). ``disable-output-lane`` (four .b32 words, bit i of the mask for
Tensor Memory lane i) leaves the lanes named unchanged.

Refused (UnsupportedPtxError naming the instruction): ``.cta_group::2`` (M = 128 and 256
across a CTA pair, its alloc/commit forms: the peer CTA's Tensor Memory and the pair's
layouts A-C are not modelled), ``.sp``, ``.ashift``, a transposed A in Tensor Memory, the
e2m3/e3m2/e2m1 inputs of ``kind::f8f6f4`` (no tcgen05
model). The block-scaled kinds
``mxf8f6f4``/``mxf4``/``mxf4nvf4`` (M = 128 only, Table 39) are :mod:`.tcgen05_scaled`,
``tcgen05.cp`` :mod:`.tcgen05_cp`, ``tcgen05.shift`` :mod:`.tcgen05_shift`; their
operations are tracked by the same commits.
``.collector::a::fill/use/lastuse/discard`` (the A collector buffer, 9.7.16.10.9.1): a
use is defined only when the A it reads equals the A of the fill; see :mod:`.tcgen05_ws`.

Completion (9.7.16.6): the product is computed and written when the instruction issues,
and stays *pending* until known complete. ``tcgen05.commit`` by the issuing thread
makes an mbarrier track every tcgen05.mma that thread issued since its last commit, and
arrives on it (count 1) at once; a thread knows them complete once an mbarrier wait of
its own on that barrier has returned true after the tracked phase completed (each
``test_wait``/``try_wait`` that succeeds records it). A ``tcgen05.ld`` or ``tcgen05.st``
of a D cell by a warp none of whose threads has seen the completion is a race
(ExecutionError naming the instruction, thread, line and the mma's line); so is a
``tcgen05.mma`` whose D overlaps cells of an outstanding ``tcgen05.ld`` (not yet followed
by ``tcgen05.wait::ld`` in its thread) or ``tcgen05.st`` (``wait::st``).
"""
from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import numpy as np

from refimpl import matmul as mm
from refimpl.matmul import presets

from . import matrix
from .errors import ExecutionError, LaunchError, UnsupportedPtxError
from .isa.data import _address
from .isa.operands import Op, getter
from .mbarrier import MBarriers
from .memory import generic_to_shared
from .parser import Addr, Imm, Instruction, Vec
from .tmem import (COMPILERS as _MEMORY, TensorMemory, _cta_group, _marks,
                   c_tcgen05_memory, need_sm100a, observed, settle, state_of,
                   tmem_address)
from .tcgen05_cp import c_cp
from .tcgen05_layouts import layout_name
from .tcgen05_operands import (check_ldst, d_place, decode_smem_descriptor,
                               per_thread, record, smem_operand, tmem_operand)
from .tcgen05_scaled import c_mma_scaled
from .tcgen05_shift import c_shift
from .tcgen05_ws import WS_M, WS_N, collector, through_collector
from .types import TYPES

__all__ = ["COMPILERS", "IDesc", "decode_idesc", "decode_smem_descriptor", "settle",
           "observed", "observe_waits", "tcgen05_preset"]


def _unsupported(inst: Instruction, why: str) -> UnsupportedPtxError:
    return UnsupportedPtxError(f"line {inst.line}: {inst.text!r}: {why}")


# ------------------------------------------------------------------ descriptors

#: kind -> (K, element bytes in shared memory, {atype code: name}, {dtype code: name})
KINDS = {
    "f16": (16, 2, {0: "f16", 1: "bf16"}, {0: "f16", 1: "f32"}),
    "tf32": (8, 4, {2: "tf32"}, {1: "f32"}),
    "f8f6f4": (32, 1, {0: "e4m3", 1: "e5m2", 3: "e2m3", 4: "e3m2", 5: "e2m1"},
               {0: "f16", 1: "f32"}),
    "i8": (32, 1, {0: "u8", 1: "s8"}, {2: "s32"}),
}
#: the block-scaled kinds (:mod:`.tcgen05_scaled`)
_SCALED = ("kind::mxf8f6f4", "kind::mxf4", "kind::mxf4nvf4")
_INT_N = (8, 16, 24) + tuple(range(32, 257, 16))


class IDesc(NamedTuple):
    """A decoded instruction descriptor of kind f16/tf32/f8f6f4/i8 (Table 42)."""
    sparse: bool
    saturate: bool
    dtype: str
    atype: str
    btype: str
    neg_a: bool
    neg_b: bool
    trans_a: bool
    trans_b: bool
    n: int
    m: int
    ws_shift: int


def decode_idesc(kind: str, word: int) -> IDesc:
    """The fields of a 32-bit instruction descriptor (PTX ISA 9.7.16.4.2, Table 42);
    ValueError naming the field for a code the kind does not have or a reserved bit
    that is set."""
    w = int(word) & 0xFFFFFFFF
    _, _, atypes, dtypes = KINDS[kind]
    if w & (1 << 6) or w & (1 << 23) or w & (1 << 29):
        raise ValueError(f"instruction descriptor {w:#010x}: reserved bit 6, 23 or 29 set")
    f = {"dtype": (w >> 4) & 3, "atype": (w >> 7) & 7, "btype": (w >> 10) & 7}
    names = {}
    for field, code in f.items():
        table = dtypes if field == "dtype" else atypes
        if code not in table:
            raise ValueError(f"instruction descriptor {w:#010x}: {field} code {code} is not "
                             f"one of kind::{kind} ({table})")
        names[field] = table[code]
    if kind == "i8" and w & (3 << 13):
        raise ValueError(f"instruction descriptor {w:#010x}: kind::i8 cannot negate")
    if kind != "i8" and w & (1 << 3):
        raise ValueError(f"instruction descriptor {w:#010x}: bit 3 (saturate) is for "
                         "kind::i8 only")
    return IDesc(sparse=bool(w & 4), saturate=bool(w & 8), dtype=names["dtype"],
                 atype=names["atype"], btype=names["btype"], neg_a=bool(w >> 13 & 1),
                 neg_b=bool(w >> 14 & 1), trans_a=bool(w >> 15 & 1),
                 trans_b=bool(w >> 16 & 1), n=((w >> 17) & 0x3F) << 3,
                 m=((w >> 24) & 0x1F) << 4, ws_shift=(w >> 30) & 3)


def tcgen05_preset(gpu: str, aname: str, bname: str) -> Any:
    """The tcgen05.mma model of ``gpu`` for the inputs (see the module docstring), or
    None when the GPU has none."""
    def name(t: str) -> str | None:
        fmt = matrix.TENSOR_CORE_FORMATS[t][2]
        for x in (f"{gpu}-{fmt}-TCGEN05", f"{gpu}-{fmt}"):
            if presets.is_preset(x) and "tcgen05" in \
                    presets.PRESETS[presets.canonical(x)].instruction:
                return presets.canonical(x)
        return None
    na, nb = name(aname), name(bname)
    if na is None or nb is None:
        return None
    if na == nb:
        return na
    ma, mb = presets.preset(na), presets.preset(nb)
    return dataclasses.replace(ma, input_emin=(ma.input_emin, mb.input_emin))


# ------------------------------------------------------------------ completion


def observe_waits(prev: Any) -> Any:
    """Wrap the mbarrier compiler: a thread whose test_wait/try_wait returns true is
    recorded as having seen the barrier's phases completed so far (the completion of
    the tcgen05 operations committed to it)."""
    def compile_(inst: Instruction, ctx: Any) -> Op:
        op = prev(inst, ctx)
        if inst.parts[1] not in ("test_wait", "try_wait") or not _uses_tcgen05(ctx):
            return op
        fn, probe = op.fn, op.probe

        def wrapped(ix: Any, ex: Any) -> None:
            fn(ix, ex)
            st = getattr(ctx, TensorMemory.ATTR, None)
            if st is None or st.wave is not ctx or not st.pending:
                return
            ok, off, th, _ = probe(ix, ex)
            mb = MBarriers.of(ctx)
            for t, o in zip(th[ok].tolist(), off[ok].tolist()):
                obj = mb.objects.get(o)
                if obj is not None:
                    st.observed[(t, o)] = (obj, obj.phase)
        op.fn = wrapped
        return op
    compile_.__doc__ = prev.__doc__
    return compile_


def _uses_tcgen05(ctx: Any) -> bool:
    got = getattr(ctx, "_uses_tcgen05", None)
    if got is None:
        got = any(i.parts[0] == "tcgen05" for i in ctx.kernel.source.instructions)
        ctx._uses_tcgen05 = got
    return got


def _mbar_offset(ctx: Any, inst: Instruction, a: int, thread: int, generic: bool) -> int:
    """The wave shared-memory offset of the executing CTA's mbarrier at address ``a``."""
    if generic:
        a = int(generic_to_shared(ctx, np.array([a], np.int64), np.array([thread]), inst,
                                  "tcgen05.commit mbarrier {:#x} is not a shared-memory "
                                  "address")[0])
    cl = getattr(ctx, "cluster", None)
    if cl is not None and a >= cl.UNIT:
        own = cl.own_address(np.array([thread]), np.array([a], np.int64))
        if own is None:
            raise _unsupported(inst, "a commit to another CTA's mbarrier is not supported")
        a = int(own[0])
    if a % 8 or a < 0 or a + 8 > ctx.smem_size:
        raise ExecutionError(f"{ctx.location(thread, inst)}: mbarrier address {a:#x} is "
                             "not 8-byte aligned shared memory of the CTA")
    return int(ctx.sbase[thread]) + a


def c_commit(inst: Instruction, ctx: Any) -> Op:
    """tcgen05.commit (see the module docstring); with ``.multicast::cluster`` the arrive
    goes to the mbarrier at the same CTA-relative offset in every CTA of the cluster that
    the 16-bit ctaMask names (bit r for %cluster_ctarank r; PTX ISA 9.7.16.12.1)."""
    parts = set(inst.parts[2:])
    generic = "shared::cluster" not in parts
    parts.discard("shared::cluster")
    multicast = "multicast::cluster" in parts
    parts.discard("multicast::cluster")
    nops = 2 if multicast else 1
    if parts != {"cta_group::1", "mbarrier::arrive::one", "b64"} or \
            len(inst.operands) != nops:
        _cta_group(inst)
        raise _unsupported(inst, "tcgen05.commit.cta_group::1.mbarrier::arrive::one"
                                 "{.shared::cluster}{.multicast::cluster}.b64 [mbar]"
                                 "{, ctaMask}")
    addr = _address(inst.operands[0], ctx, inst, "generic" if generic else "shared")
    gmask = getter(inst.operands[1], TYPES["b16"], ctx, inst) if multicast else None

    def fn(ix: Any, ex: Any) -> None:
        st = state_of(ctx)
        mb = MBarriers.of(ctx)
        th = ctx._thread_ids(ix)
        a = np.broadcast_to(np.asarray(addr(ix), np.int64), th.shape)
        masks = np.broadcast_to(np.asarray(gmask(ix)).astype(np.int64), th.shape) \
            if multicast else None
        for i, (t, av) in enumerate(zip(th.tolist(), a.tolist())):
            if multicast:
                offs = _multicast_offsets(ctx, inst, av, t, int(masks[i]), generic)
            else:
                offs = [_mbar_offset(ctx, inst, av, t, generic)]
            marks = []
            for off in offs:
                obj = mb.get(off, t, inst)
                marks.append((off, obj, obj.phase))
            for rec in st.pending:
                if rec["thread"] != t:
                    continue
                if rec.get("mbar") is None:
                    rec["mbar"] = marks if multicast else marks[0]
                else:
                    # a commit tracks every prior asynchronous tcgen05 operation of its
                    # thread (PTX ISA 9.7.16.12.1), so observing this later one
                    # completes the earlier operations too
                    rec["mbar"] = _marks(rec) + marks
            for off in offs:
                mb.arrive(off, 1, False, False, t, inst)
    return Op(inst, "alu", fn)


def _multicast_offsets(ctx: Any, inst: Instruction, a: int, thread: int, mask: int,
                       generic: bool) -> list[int]:
    """The wave shared-memory offsets of the mbarriers a ``.multicast::cluster`` commit
    of ``thread`` arrives on (a launch without a cluster is a cluster of one CTA)."""
    cl = getattr(ctx, "cluster", None)
    size = cl.size if cl is not None else 1
    where = ctx.location(thread, inst)
    if mask >> size or not mask:
        raise ExecutionError(f"{where}: ctaMask {mask:#x} names no CTA or CTAs outside the "
                             f"cluster of {size} (PTX ISA 9.7.16.12.1)")
    if generic:
        a = int(generic_to_shared(ctx, np.array([a], np.int64), np.array([thread]), inst,
                                  "tcgen05.commit mbarrier {:#x} is not a shared-memory "
                                  "address")[0])
    unit = cl.UNIT if cl is not None else 1 << 62
    off = a & (unit - 1) if a >= unit else a
    if off % 8 or off + 8 > ctx.smem_size:
        raise ExecutionError(f"{where}: mbarrier address {a:#x} is not 8-byte aligned "
                             "shared memory of a CTA")
    blk = int(ctx.thread_block[thread])
    first = blk - blk % size
    return [(first + r) * ctx.smem_size + off for r in range(size) if mask >> r & 1]


# ------------------------------------------------------------------ mma


def _parse_mma(inst: Instruction) -> tuple[str, bool, tuple]:
    """(kind, .ws, the collector qualifier: B buffer of .ws or A buffer) of a
    tcgen05.mma."""
    parts = inst.parts[2:]
    if inst.parts[1] != "mma":
        raise _unsupported(inst, f"tcgen05.{inst.parts[1]} is not supported")
    ws = "ws" in parts
    kinds = [p[6:] for p in parts if p.startswith("kind::")]
    rest = [p for p in parts if not p.startswith(("kind::", "cta_group::", "collector::"))
            and p != "ws"]
    if "sp" in parts:
        raise _unsupported(inst, "tcgen05.mma.sp (sparse A) is refused: the layouts of its "
                                 "sparsity metadata in Tensor Memory are given only as "
                                 "figures (PTX ISA 9.7.16.10.8.4)")
    if "ashift" in parts:
        raise _unsupported(inst, ".ashift is refused: PTX ISA 9.7.16.10.9.1 says it shifts "
                                 "A's rows down by one 'except for the last row in the Tensor "
                                 "Memory' without saying whether the product uses A before "
                                 "or after the shift, nor what the first row holds")
    if len(kinds) != 1:
        raise _unsupported(inst, "tcgen05.mma needs one .kind")
    kind = kinds[0]
    if kind not in KINDS:
        raise _unsupported(inst, f".kind::{kind} is not a tcgen05.mma{'.ws' if ws else ''} "
                                 "kind")
    if rest:
        raise _unsupported(inst, f"modifier(s) {rest} not supported")
    coll = [p for p in parts if p.startswith("collector::")]
    if ws:
        if "cta_group::2" in parts:
            raise _unsupported(inst, "tcgen05.mma.ws exists for .cta_group::1 only (PTX ISA "
                                     "Table 39: invalid with .cta_group::2)")
        return kind, True, collector(inst, list(parts))
    bad = [p for p in coll if not p.startswith("collector::a::")]
    if bad:
        raise _unsupported(inst, f".{bad[0]}: the B collector buffers belong to "
                                 "tcgen05.mma.ws; tcgen05.mma takes .collector::a::*")
    return kind, False, collector(inst, list(parts), ws=False)


def c_mma(inst: Instruction, ctx: Any) -> Op:
    """tcgen05.mma (see the module docstring)."""
    kind, ws, coll = _parse_mma(inst)
    _cta_group(inst)
    ops = list(inst.operands)
    if len(ops) < 5:
        raise _unsupported(inst, "[d-tmem], a-desc, b-desc, idesc, enable-input-d")
    mask_op = ops.pop(4) if isinstance(ops[4], Vec) and not ws else None
    if ws and len(ops) == 6:
        raise _unsupported(inst, "the zero-column-mask-desc operand of tcgen05.mma.ws is "
                                 "refused: PTX ISA 9.7.16.4.3 defines Skip Span as the run of "
                                 "used B columns and Use Span as the run of zeroed ones "
                                 "(minus one), but its Example 2 (skip span 2, use span 3) "
                                 "shows runs of 4 used and 3 zeroed columns")
    if len(ops) == 6:
        if not isinstance(ops[5], Imm) or not 0 <= ops[5].value <= 15:
            raise _unsupported(inst, "scale-input-d must be an immediate in 0..15")
        if kind not in ("f16", "tf32"):
            raise _unsupported(inst, "scale-input-d exists for kind::f16 and kind::tf32 "
                                     "only")
        scale = ops.pop().value
    else:
        scale = 0
    if len(ops) != 5:
        raise _unsupported(inst, f"wrong number of operands ({len(inst.operands)})")
    gd = tmem_address(ops[0], ctx, inst)
    a_tmem = isinstance(ops[1], Addr)
    ga = tmem_address(ops[1], ctx, inst) if a_tmem else getter(ops[1], TYPES["b64"], ctx, inst)
    gb = getter(ops[2], TYPES["b64"], ctx, inst)
    gi = getter(ops[3], TYPES["b32"], ctx, inst)
    ge = getter(ops[4], TYPES["pred"], ctx, inst)
    gm = []
    if mask_op is not None:
        if len(mask_op.items) != 4:
            raise _unsupported(inst, "disable-output-lane of .cta_group::1 is 4 .b32 words")
        gm = [getter(x, TYPES["b32"], ctx, inst) for x in mask_op.items]
    k, ebytes = KINDS[kind][0], KINDS[kind][1]
    gpu = getattr(ctx, "gpu", None)
    if gpu is not None and kind != "i8":
        # the types come from the descriptor at run time: every float kind needs a model
        probe = {"f16": "f16", "tf32": "tf32", "f8f6f4": "e4m3"}[kind]
        if tcgen05_preset(gpu, probe, probe) is None:
            raise LaunchError(f"line {inst.line}: {inst.text!r}: gpu={gpu!r} has no "
                              f"tcgen05.mma preset for kind::{kind} (tcgen05 is an sm_100a "
                              "instruction: launch with gpu='B200'; no other model is "
                              "substituted)")

    def fn(ix: Any, ex: Any) -> None:
        st = state_of(ctx)
        th, (dv, av, bv, iv, en, *masks) = per_thread(ctx, ix, [
            (gd, np.int64), (ga, np.int64 if a_tmem else np.uint64), (gb, np.uint64),
            (gi, np.uint32), (ge, bool)] + [(g, np.uint32) for g in gm])
        for i, t in enumerate(th.tolist()):
            mask = np.zeros(128, bool)
            for w, m in enumerate(masks):
                mask[32 * w:32 * w + 32] = (int(m[i]) >> np.arange(32)) & 1 == 1
            _issue(ctx, st, inst, kind, k, ebytes, t, int(dv[i]), int(av[i]), int(bv[i]),
                   int(iv[i]), bool(en[i]), mask, a_tmem, coll, scale)
    return Op(inst, "alu", fn)


def _issue(ctx: Any, st: TensorMemory, inst: Instruction, kind: str, k: int, ebytes: int,
           t: int, taddr: int, adesc: int, bdesc: int, idesc: int, enable: bool,
           disabled: np.ndarray, a_tmem: bool = False,
           coll: tuple = ("a", "discard"), scale: int = 0) -> None:
    """One tcgen05.mma (a B collector buffer in ``coll``: tcgen05.mma.ws) issued by
    thread ``t``."""
    ws = coll[0] != "a"
    try:
        idd = decode_idesc(kind, idesc)
    except ValueError as e:
        raise ExecutionError(f"{ctx.location(t, inst)}: {e} (PTX ISA 9.7.16.4.2)") from None
    where = ctx.location(t, inst)
    if idd.sparse:
        raise _unsupported(inst, "sparse A (descriptor bit 2) is not supported")
    if idd.ws_shift and not ws:
        raise ExecutionError(f"{where}: the .ws shift bits 30-31 of the instruction "
                             "descriptor must be 0 without .ws")
    m_ok = WS_M if ws else (64, 128)
    name = "tcgen05.mma.ws" if ws else "tcgen05.mma"
    if idd.m not in m_ok:
        raise ExecutionError(f"{where}: M = {idd.m} is not a {name}.cta_group::1 shape "
                             f"(M = {', '.join(map(str, m_ok))}; PTX ISA Table 39)")
    n_ok = WS_N if ws else _INT_N if kind == "i8" else tuple(range(8, 257, 8))
    if idd.n not in n_ok:
        raise ExecutionError(f"{where}: N = {idd.n} is not a kind::{kind} shape of {name} "
                             f"with M = {idd.m} (PTX ISA Table 39)")
    aname, bname, dname = idd.atype, idd.btype, idd.dtype
    if kind == "f16" and (aname != bname or (dname == "f16" and aname != "f16")):
        raise ExecutionError(f"{where}: kind::f16 takes f16 x f16 (f16 or f32 D) or "
                             f"bf16 x bf16 (f32 D), not {aname} x {bname} -> {dname}")
    if kind == "f8f6f4" and not {aname, bname} <= {"e4m3", "e5m2"}:
        raise _unsupported(inst, f"kind::f8f6f4 with {aname} x {bname} inputs: only "
                                 "e4m3/e5m2 have a tcgen05 model here")
    if kind == "tf32" and (idd.trans_a or idd.trans_b):
        raise _unsupported(inst, "MN-major tf32 needs 128-byte swizzling with 32-byte atoms, "
                                 "which is not supported")
    blk = int(ctx.thread_block[t])
    lane, col, rects = d_place(st, inst, t, blk, taddr, idd.m, idd.n, ws)
    if a_tmem:
        if ws and idd.m != 128:
            raise _unsupported(inst, f"A in Tensor Memory for tcgen05.mma.ws with M = {idd.m}:"
                                     " the ISA does not state its layout for data path "
                                     f"{layout_name(idd.m, True)}")
        a = tmem_operand(st, inst, t, blk, adesc, k, ebytes, idd.trans_a, idd.m,
                         (taddr >> 16) if idd.m == 64 else 0)
    else:
        a = smem_operand(ctx, inst, t, adesc, idd.m, k, ebytes, idd.trans_a, "A")
    b = smem_operand(ctx, inst, t, bdesc, idd.n, k, ebytes, idd.trans_b, "B")
    through_collector(ctx, st, inst, t, blk, b if ws else a, bname if ws else aname, *coll)
    if enable:
        st.read(blk, lane, col, t, inst, f"{name} (enable-input-d) D")
    dcells = st.cells[blk, lane, col]
    if dname == "f16":
        dcodes = dcells & np.uint32(0xFFFF)
    else:
        dcodes = dcells.copy()
    c = None
    if enable and kind != "i8":
        c = _scaled_d(where, dcodes, dname, scale)
    out = _product(ctx, kind, idd, a, b.T, dcodes if c is None else c, enable)
    keep = ~disabled[lane]
    st.cells[blk, lane[keep], col[keep]] = out[keep]
    st.write(blk, lane[keep], col[keep])
    for cells in rects:
        record(st, blk, t, cells, inst)


def _scaled_d(where: str, dcodes: np.ndarray, dname: str, scale: int) -> np.ndarray:
    """The accumulator input D * 2^-scale-input-d (9.7.16.10.9.1) as float32 values; an
    ExecutionError where a scaled element is not exactly a value of D's type (the ISA does
    not say how such a product is rounded)."""
    v = matrix._values(dcodes, dname)
    if not scale:
        return v.astype(np.float32)
    w = v * 2.0 ** -scale
    back = w.astype(np.float16 if dname == "f16" else np.float32).astype(np.float64)
    bad = (back != w) & ~np.isnan(w)
    if bad.any():
        r, c = (int(x[0]) for x in np.nonzero(bad))
        raise ExecutionError(f"{where}: scale-input-d {scale}: D[{r}, {c}] = {float(v[r, c])!r} "
                             f"times 2^-{scale} is not exactly a {dname} value (PTX ISA "
                             "9.7.16.10.9.1 does not say how the scaled D is rounded)")
    return w.astype(np.float32)


def _product(ctx: Any, kind: str, idd: IDesc, a: np.ndarray, b: np.ndarray,
             d: np.ndarray, enable: bool) -> np.ndarray:
    """D codes (M, N) of A (M, K) times B (K, N) (+ D: its codes, or for the float kinds
    its float32 values as :func:`_scaled_d` gives them)."""
    if kind == "i8":
        ai = matrix._integers(a, idd.atype)
        bi = matrix._integers(b, idd.btype)
        ci = matrix._integers(d, "s32") if enable else np.zeros(d.shape, np.int64)
        return matrix._int_mma(ai, bi, ci, idd.saturate)
    av = matrix._values(a, idd.atype) * (-1.0 if idd.neg_a else 1.0)
    bv = matrix._values(b, idd.btype) * (-1.0 if idd.neg_b else 1.0)
    model = tcgen05_preset(ctx.gpu, idd.atype, idd.btype)
    c = (d if d.dtype == np.float32 else matrix._values(d, idd.dtype).astype(np.float32)) \
        if enable else None
    out_fmt = "fp16" if idd.dtype == "f16" else "fp32"
    res = np.asarray(mm.matmul(av.astype(np.float32), bv.astype(np.float32), c,
                               accumulate=model, out_format=out_fmt), dtype=np.float32)
    return matrix._codes(res, idd.dtype)


# ------------------------------------------------------------------ dispatch


def c_tcgen05(inst: Instruction, ctx: Any) -> Op:
    """Every tcgen05 instruction: Tensor Memory ones in :mod:`.tmem`, mma (and mma.ws,
    :mod:`.tcgen05_ws`) and commit here, the block-scaled mma in :mod:`.tcgen05_scaled`,
    tcgen05.cp in :mod:`.tcgen05_cp`, tcgen05.shift in :mod:`.tcgen05_shift`."""
    need_sm100a(inst, ctx)
    sub = inst.parts[1] if len(inst.parts) > 1 else ""
    if sub in _MEMORY:
        return c_tcgen05_memory(inst, ctx)
    if sub == "mma":
        if "block_scale" in inst.parts or any(p in inst.parts for p in _SCALED):
            return c_mma_scaled(inst, ctx)
        return c_mma(inst, ctx)
    if sub == "commit":
        return c_commit(inst, ctx)
    if sub == "cp":
        return c_cp(inst, ctx)
    if sub == "shift":
        return c_shift(inst, ctx)
    raise _unsupported(inst, f"tcgen05.{sub} is not a tcgen05 instruction")


COMPILERS = {"tcgen05": c_tcgen05}
