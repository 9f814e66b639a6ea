"""Block-scaled ``tcgen05.mma`` (sm_100a; PTX ISA 9.1, sections 9.7.16.10.7 Block Scaling,
9.7.16.4.2 Tables 43 and 44, 9.7.16.10.9)::

    tcgen05.mma.cta_group::1.kind.block_scale{.scale_vectorsize}
        [d-tmem], a-desc, b-desc, idesc, [scale-A-tmem], [scale-B-tmem], enable-input-d;
    tcgen05.mma.cta_group::1.kind.block_scale{.scale_vectorsize}
        [d-tmem], [a-tmem], b-desc, idesc, [scale-A-tmem], [scale-B-tmem], enable-input-d;

D = (A x scale_A)(B x scale_B) + D with M = 128 (data path layout D, as the other kinds
of :mod:`.tcgen05`), N a multiple of 8 in 8..256 (Table 39, every block-scaled kind) and
an FP32 D (the descriptor has no D type). Kinds and scale vector sizes (Tables 54, 55;
``.block32`` is the default ptxas takes when none is given, ``.block16`` is ``.scale_vec::4X``):

- ``kind::mxf8f6f4`` (``.scale_vec::1X``/``.block32``): K = 32, one UE8M0 scale per 32
  elements; A and B E4M3, E5M2 (one byte each in shared memory, the layouts of
  ``kind::f8f6f4``) or E2M1, packed with padding (9.7.16.10.4.4, Figure 202): each 16-byte
  chunk of the layout holds 16 elements in its first 8 bytes, two to a byte (the lower K
  in the low nibble), then 8 bytes of padding, K-major only (Table 52); Triton's sm_100
  ``tl.dot_scaled`` of E4M3 x E2M1 writes exactly that. The E2M3/E3M2 codes decode, but
  their packing (Figure 203) is not modelled, nor an E2M1 A in Tensor Memory (Figure
  199): refused.
- ``kind::mxf4`` (``.scale_vec::2X``/``.block32``) and ``kind::mxf4nvf4`` with
  ``.scale_vec::2X``/``.block32``: K = 64 E2M1 elements, two to a byte with no padding
  (9.7.16.10.4.6; the element of lower K in the low four bits), two UE8M0 scales per row
  (blocks of 32).
- ``kind::mxf4nvf4`` with ``.scale_vec::4X``/``.block16``: K = 64, four UE4M3 scales per
  row (blocks of 16). UE8M0 scales with blocks of 16 are valid PTX but no preset models
  them: refused.

Instruction descriptor (Table 43 for mxf8f6f4, 44 for mxf4/mxf4nvf4): bit 2 sparsity, 4-5
the scale factor B ID, 7-9 atype and 10-12 btype (mxf8f6f4: E4M3 0, E5M2 1, E2M3 3, E3M2
4, E2M1 5; the FP4 kinds: E2M1 1 in bits 7-9 and 10-11, bit 12 reserved), 13/14 negate A/B,
15/16 transpose A/B (must be 0 for the FP4 kinds, Table 49), 17-22 N >> 3, 23 the scale
type (UE8M0 1; UE4M3 0, mxf4nvf4 only), 27-28 M >> 7, 29-30 the scale factor A ID, 31
(FP4 kinds) K = 96, which is refused. Every reserved bit (0-1, 3, 6, 24-26 and, for
mxf8f6f4, 31) must be zero.

Scale factors in Tensor Memory (9.7.16.10.7.2-3, Figures 231-233 and 240-242): the
scale-A matrix (M x V, V = 1, 2 or 4 scales per row) is a tile of 32 lanes x M / 32
columns from ``scale-A-tmem``: the scales of row m are in lane m % 32, column m / 32,
bytes ID .. ID + V - 1 of that 32-bit cell (ID 0-3 for 1X, 0 or 2 for 2X, 0 for 4X; the
lowest byte first); scale-B (V x N) the same with column n of B in place of row m (N / 32
columns, rounded up). The ISA requires the tile duplicated to all four 32-lane quarters:
the values are read from lanes 0-31, and a byte that differs in another quarter is an
error naming the lanes. A scale address must be at lane 0. E8M0 0xFF is NaN; UE4M3 is
read without its sign bit (0x7F is NaN).

Arithmetic: the launch GPU's block-scaled presets (``"B200-MXF8F6F4"``, ``"B200-MXF4"``,
``"B200-NVF4"``) through :func:`refimpl.matmul.block_scaled_matmul` on the decoded
elements and scales, D the accumulator input when ``enable-input-d`` is true; a GPU
without the kind's preset is refused at launch. Negation is exact.

``.collector::a::fill/use/lastuse/discard`` follow tcgen05.mma's A collector rules
(:mod:`.tcgen05_ws`: a use is defined only when it reads the A of the fill). M = 256 and
other M are errors (.cta_group::1 has M = 128 only, Table 39).

Completion and races are those of :mod:`.tcgen05` (the operation is pending until a
commit's mbarrier phase is seen): the scale cells and an A in Tensor Memory must not be
outstanding ``tcgen05.st`` destinations (``wait::st``) nor cells a pending operation of
another thread writes; a ``tcgen05.cp`` of the same thread before the mma is ordered
with it (9.7.16.6.2.1, implicitly pipelined).
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from refimpl import formats
from refimpl.matmul import block_scaled_matmul, presets

from .errors import ExecutionError, LaunchError, UnsupportedPtxError
from .isa.operands import Op, getter
from .parser import Addr, Instruction
from .tcgen05_operands import (check_ldst, d_cells, per_thread, record, smem_operand,
                               tmem_operand)
from .tcgen05_ws import collector, through_collector
from .tmem import TensorMemory, _cta_group, observed, state_of, tmem_address
from .types import TYPES

__all__ = ["ScaledIDesc", "decode_scaled_idesc", "scale_vector", "scaled_preset",
           "c_mma_scaled"]

#: mxf8f6f4 element codes (Table 43); the FP4 kinds have E2M1 = 1 only (Table 44)
_F8F6F4 = {0: "e4m3", 1: "e5m2", 3: "e2m3", 4: "e3m2", 5: "e2m1"}
#: kind -> {qualifier: scales per row}; None: no qualifier (ptxas: .block32)
_VECTORS = {
    "mxf8f6f4": {None: 1, "scale_vec::1X": 1, "block32": 1},
    "mxf4": {None: 2, "scale_vec::2X": 2, "block32": 2},
    "mxf4nvf4": {"scale_vec::2X": 2, "block32": 2, "scale_vec::4X": 4, "block16": 4},
}


def _unsupported(inst: Instruction, why: str) -> UnsupportedPtxError:
    return UnsupportedPtxError(f"line {inst.line}: {inst.text!r}: {why}")


class ScaledIDesc(NamedTuple):
    """A decoded instruction descriptor of a block-scaled kind (Tables 43, 44)."""
    sparse: bool
    atype: str
    btype: str
    m: int
    n: int
    scale_type: str      # "ue8m0" or "ue4m3"
    sfa_id: int
    sfb_id: int
    neg_a: bool
    neg_b: bool
    trans_a: bool
    trans_b: bool
    k96: bool


def decode_scaled_idesc(kind: str, word: int) -> ScaledIDesc:
    """The fields of a 32-bit block-scaled instruction descriptor (PTX ISA 9.7.16.4.2,
    Table 43 for ``mxf8f6f4``, 44 for ``mxf4``/``mxf4nvf4``); ValueError naming the field
    for a code the kind does not have or a reserved bit that is set."""
    w = int(word) & 0xFFFFFFFF
    fp4 = kind != "mxf8f6f4"
    reserved = [0, 1, 3, 6, 24, 25, 26] + ([12] if fp4 else [31])
    bad = [b for b in reserved if w >> b & 1]
    if bad:
        raise ValueError(f"instruction descriptor {w:#010x}: reserved bit(s) "
                         f"{', '.join(map(str, bad))} set (kind::{kind}, Table "
                         f"{44 if fp4 else 43})")
    if fp4:
        codes = {"atype": (w >> 7) & 7, "btype": (w >> 10) & 3}
        table = {1: "e2m1"}
    else:
        codes = {"atype": (w >> 7) & 7, "btype": (w >> 10) & 7}
        table = _F8F6F4
    names = {}
    for field, code in codes.items():
        if code not in table:
            raise ValueError(f"instruction descriptor {w:#010x}: {field} code {code} is not "
                             f"one of kind::{kind} ({table})")
        names[field] = table[code]
    scale = "ue8m0" if w >> 23 & 1 else "ue4m3"
    if scale == "ue4m3" and kind != "mxf4nvf4":
        raise ValueError(f"instruction descriptor {w:#010x}: bit 23 (scale type) is 0, "
                         f"UE4M3, which only kind::mxf4nvf4 has; kind::{kind} scales are "
                         "UE8M0 (1)")
    if fp4 and w & (3 << 15):
        raise ValueError(f"instruction descriptor {w:#010x}: kind::{kind} cannot transpose "
                         "A or B (bits 15-16, Table 49)")
    return ScaledIDesc(sparse=bool(w >> 2 & 1), sfb_id=(w >> 4) & 3, atype=names["atype"],
                       btype=names["btype"], neg_a=bool(w >> 13 & 1),
                       neg_b=bool(w >> 14 & 1), trans_a=bool(w >> 15 & 1),
                       trans_b=bool(w >> 16 & 1), n=((w >> 17) & 0x3F) << 3,
                       scale_type=scale, m=((w >> 27) & 3) << 7, sfa_id=(w >> 29) & 3,
                       k96=bool(fp4 and w >> 31 & 1))


def scale_vector(inst: Instruction, kind: str) -> int:
    """Scales per row (1, 2 or 4) of the instruction's ``.scale_vectorsize`` (Table 54)."""
    given = [p for p in inst.parts if p.startswith(("scale_vec::", "block1", "block3"))]
    allowed = _VECTORS[kind]
    key = given[0] if len(given) == 1 else None
    if len(given) > 1 or key not in allowed:
        names = ", ".join("." + q for q in allowed if q) or "none"
        raise _unsupported(inst, f"kind::{kind}.block_scale takes {names} (PTX ISA Tables 54 "
                                 f"and 55), not {'.'.join(given) or 'none'}")
    return allowed[key]


def scaled_preset(gpu: str, kind: str, vec: int, scale: str) -> str | None:
    """The block-scaled preset of ``gpu`` for the kind, vector size and scale type, or
    None when the GPU has none (or no preset models the combination)."""
    suffix = {(1, "ue8m0"): "MXF8F6F4", (2, "ue8m0"): "MXF4", (4, "ue4m3"): "NVF4"}.get(
        (vec, scale))
    if suffix is None:
        return None
    name = f"{gpu}-{suffix}"
    return presets.canonical(name) if presets.is_preset(name) else None


def c_mma_scaled(inst: Instruction, ctx: Any) -> Op:
    """tcgen05.mma of a block-scaled kind (see the module docstring)."""
    parts = inst.parts[2:]
    kinds = [p[6:] for p in parts if p.startswith("kind::")]
    if len(kinds) != 1 or kinds[0] not in _VECTORS:
        raise _unsupported(inst, ".block_scale needs one of .kind::mxf8f6f4, .kind::mxf4, "
                                 ".kind::mxf4nvf4")
    kind = kinds[0]
    if "block_scale" not in parts:
        raise _unsupported(inst, f"kind::{kind} needs .block_scale (ptxas requires it)")
    _cta_group(inst)
    if "sp" in parts or "ws" in parts:
        raise _unsupported(inst, "tcgen05.mma.sp and .ws are not supported")
    vec = scale_vector(inst, kind)
    coll = collector(inst, list(parts), ws=False)
    rest = [p for p in parts if not p.startswith(("kind::", "cta_group::", "collector::a::",
                                                  "scale_vec::", "block1", "block3"))
            and p != "block_scale"]
    if rest:
        raise _unsupported(inst, f"modifier(s) {rest} not supported")
    ops = list(inst.operands)
    if len(ops) != 7:
        raise _unsupported(inst, "[d-tmem], a-desc or [a-tmem], b-desc, idesc, "
                                 f"[scale-A-tmem], [scale-B-tmem], enable-input-d (got "
                                 f"{len(ops)} operands)")
    gd = tmem_address(ops[0], ctx, inst)
    a_tmem = isinstance(ops[1], Addr)
    ga = tmem_address(ops[1], ctx, inst) if a_tmem else getter(ops[1], TYPES["b64"], ctx, inst)
    gb = getter(ops[2], TYPES["b64"], ctx, inst)
    gi = getter(ops[3], TYPES["b32"], ctx, inst)
    gsa, gsb = (tmem_address(x, ctx, inst) for x in ops[4:6])
    ge = getter(ops[6], TYPES["pred"], ctx, inst)
    gpu = getattr(ctx, "gpu", None)
    if gpu is not None:
        scale = "ue4m3" if vec == 4 else "ue8m0"
        if scaled_preset(gpu, kind, vec, scale) is None:
            raise LaunchError(f"line {inst.line}: {inst.text!r}: gpu={gpu!r} has no "
                              f"block-scaled preset for kind::{kind} with {vec} scale(s) per "
                              "row (launch with gpu='B200'; no other model is substituted)")

    def fn(ix: Any, ex: Any) -> None:
        st = state_of(ctx)
        th, (*vals, en) = per_thread(ctx, ix, [
            (gd, np.int64), (ga, np.int64 if a_tmem else np.uint64), (gb, np.uint64),
            (gi, np.uint32), (gsa, np.int64), (gsb, np.int64), (ge, bool)])
        for i, t in enumerate(th.tolist()):
            _issue(ctx, st, inst, kind, vec, t, *(int(v[i]) for v in vals), bool(en[i]),
                   a_tmem, coll)
    return Op(inst, "alu", fn)


def _issue(ctx: Any, st: TensorMemory, inst: Instruction, kind: str, vec: int, t: int,
           taddr: int, adesc: int, bdesc: int, idesc: int, sfa: int, sfb: int,
           enable: bool, a_tmem: bool, coll: tuple = ("a", "discard")) -> None:
    """One block-scaled tcgen05.mma issued by thread ``t`` (``coll``: its A collector
    qualifier, :func:`.tcgen05_ws.through_collector`)."""
    where = ctx.location(t, inst)
    try:
        idd = decode_scaled_idesc(kind, idesc)
    except ValueError as e:
        raise ExecutionError(f"{where}: {e} (PTX ISA 9.7.16.4.2)") from None
    if idd.sparse:
        raise _unsupported(inst, "sparse A (descriptor bit 2) is not supported")
    if idd.k96:
        raise _unsupported(inst, "K = 96 (descriptor bit 31) is not supported")
    if idd.m != 128:
        raise ExecutionError(f"{where}: M = {idd.m} is not a kind::{kind} shape with "
                             ".cta_group::1 (M = 128 only, PTX ISA Table 39)")
    if not (8 <= idd.n <= 256 and idd.n % 8 == 0):
        raise ExecutionError(f"{where}: N = {idd.n} is not a kind::{kind} shape for M = 128 "
                             "and .cta_group::1 (a multiple of 8 in 8..256, PTX ISA Table 39)")
    ids = {1: (0, 1, 2, 3), 2: (0, 2), 4: (0,)}[vec]
    for name, sid in (("A", idd.sfa_id), ("B", idd.sfb_id)):
        if sid not in ids:
            raise ExecutionError(f"{where}: scale factor {name} ID {sid} is not one of {ids} "
                                 f"for {vec} scale(s) per row (PTX ISA 9.7.16.10.7.2-3)")
    if vec == 2 and idd.scale_type != "ue8m0":
        raise ExecutionError(f"{where}: .scale_vec::2X/.block32 takes UE8M0 scales, the "
                             "descriptor's bit 23 says UE4M3 (PTX ISA Table 55)")
    model = scaled_preset(ctx.gpu, kind, vec, idd.scale_type)
    if model is None:
        raise _unsupported(inst, f"no block-scaled preset of gpu={ctx.gpu!r} models "
                                 f"kind::{kind} with {vec} {idd.scale_type.upper()} scales "
                                 "per row")
    fmts = (idd.atype, idd.btype)
    if kind == "mxf8f6f4" and {"e2m3", "e3m2"} & set(fmts):
        raise _unsupported(inst, f"kind::mxf8f6f4 with {fmts[0]} x {fmts[1]} inputs: the "
                                 "padded shared-memory packing of 6-bit elements (PTX ISA "
                                 "9.7.16.10.4.4, Figure 203) is not modelled; E4M3, E5M2 "
                                 "and E2M1 run")
    if kind == "mxf8f6f4" and "e2m1" in fmts:
        if a_tmem and fmts[0] == "e2m1":
            raise _unsupported(inst, "an E2M1 A of kind::mxf8f6f4 in Tensor Memory (one "
                                     "element to a byte, Figure 199) is not modelled")
        if (fmts[0] == "e2m1" and idd.trans_a) or (fmts[1] == "e2m1" and idd.trans_b):
            raise ExecutionError(f"{where}: 4-bit operands of kind::mxf8f6f4 are K-major "
                                 "only (transpose bits 15-16, PTX ISA Table 52)")
    blk = int(ctx.thread_block[t])
    cells = d_cells(st, inst, t, blk, taddr, idd.n)
    col0 = cells[1][0]
    k = 32 if kind == "mxf8f6f4" else 64
    kb = 32       # bytes of a row of A or B: 32 one-byte or 64 half-byte elements
    if a_tmem:
        a = tmem_operand(st, inst, t, blk, adesc, kb, 1, idd.trans_a)
    else:
        a = smem_operand(ctx, inst, t, adesc, 128, kb, 1, idd.trans_a, "A")
    b = smem_operand(ctx, inst, t, bdesc, idd.n, kb, 1, idd.trans_b, "B")
    through_collector(ctx, st, inst, t, blk, a, idd.atype, *coll)
    if k == 64:
        a, b = _nibbles(a), _nibbles(b)
    else:     # kind::mxf8f6f4: an E2M1 operand fills the low 8 bytes of each 16-byte chunk
        a, b = (_padded_fp4(x) if f == "e2m1" else x for x, f in ((a, fmts[0]), (b, fmts[1])))
    sa = read_scales(st, inst, t, blk, sfa, 128, vec, idd.sfa_id, "A")
    sb = read_scales(st, inst, t, blk, sfb, idd.n, vec, idd.sfb_id, "B")
    av = _element_values(a, fmts[0]) * (-1.0 if idd.neg_a else 1.0)
    bv = _element_values(b, fmts[1]) * (-1.0 if idd.neg_b else 1.0)
    cols = np.arange(col0, col0 + idd.n)[None, :]
    if enable:
        st.read(blk, np.arange(128)[:, None], cols, t, inst, "tcgen05.mma (enable-input-d) D")
    dcells = st.cells[blk, :, col0:col0 + idd.n]
    c = dcells.view(np.float32).astype(np.float64) if enable else None
    with np.errstate(invalid="ignore", over="ignore"):
        res = block_scaled_matmul(av, _scale_values(sa, idd.scale_type), bv.T,
                                  _scale_values(sb, idd.scale_type).T, c, accumulate=model,
                                  in_format=fmts)
    st.cells[blk, :, col0:col0 + idd.n] = _f32_codes(res)
    st.write(blk, slice(None), slice(col0, col0 + idd.n))
    record(st, blk, t, cells, inst)


def read_scales(st: TensorMemory, inst: Instruction, t: int, blk: int, taddr: int,
                rows: int, vec: int, sid: int, what: str) -> np.ndarray:
    """The (rows, vec) scale codes of matrix ``what`` (A: its M rows, B: its N columns)
    at ``taddr`` (the module docstring's layout), checked duplicated in the four lane
    quarters."""
    where = st.wave.location(t, inst)
    lane0, col0 = taddr >> 16, taddr & 0xFFFF
    if lane0 != 0:
        raise ExecutionError(f"{where}: scale-{what}-tmem {taddr:#x} has lane {lane0}; the "
                             "scale factors fill lanes 0-127 (one 32-lane tile duplicated in "
                             "each quarter) and start at lane 0")
    ncols = -(-rows // 32)
    cells = ((0, 128), (col0, col0 + ncols))
    st.check_cells(blk, cells[0], cells[1], t, inst, f"tcgen05.mma scale-{what}")
    check_ldst(st, blk, cells, t, inst, what_op=f"reads scale factors {what} from")
    for rec in st.pending:
        if rec["block"] == blk and rec["thread"] != t and rec["cols"][0] < cells[1][1] \
                and cells[1][0] < rec["cols"][1] and not observed(st, rec, [t]):
            st.fail(t, inst, f"race: tcgen05.mma reads scale factors {what} from Tensor "
                    f"Memory columns {col0}..{col0 + ncols - 1}, which the "
                    f"{rec.get('op', 'tcgen05.mma')} on line {rec['line']} of another "
                    "thread writes and whose completion this thread has not seen")
    st.read(blk, np.arange(128)[:, None], np.arange(col0, col0 + ncols)[None, :], t, inst,
            f"tcgen05.mma scale factors {what}")
    by = np.ascontiguousarray(st.cells[blk, :, col0:col0 + ncols]).view(np.uint8)
    by = by.reshape(4, 32, ncols, 4)[..., sid:sid + vec]     # quarter, lane, column, byte
    r = np.arange(rows)
    for q in range(1, 4):
        diff = np.flatnonzero((by[q, r % 32, r // 32] != by[0, r % 32, r // 32]).any(axis=1))
        if diff.size:
            i = int(diff[0])
            raise ExecutionError(
                f"{where}: scale factors {what} of {'row' if what == 'A' else 'column'} {i} "
                f"differ between lane {i % 32} and lane {32 * q + i % 32} (column "
                f"{col0 + i // 32}, bytes {sid}..{sid + vec - 1}: "
                f"{by[0, i % 32, i // 32].tolist()} and {by[q, i % 32, i // 32].tolist()}); "
                "the ISA requires them duplicated to all four 32-lane quarters (PTX ISA "
                "9.7.16.10.7)")
    return by[0, r % 32, r // 32]


def _nibbles(codes: np.ndarray) -> np.ndarray:
    """(rows, 32) bytes of packed E2M1 pairs -> (rows, 64) codes, low nibble first."""
    b = codes.astype(np.uint8)
    return np.stack([b & 0xF, b >> 4], axis=-1).reshape(b.shape[0], -1)


def _padded_fp4(codes: np.ndarray) -> np.ndarray:
    """(rows, 32) bytes of a kind::mxf8f6f4 E2M1 operand -> (rows, 32) codes: each 16-byte
    chunk holds 16 elements packed in its first 8 bytes (the lower K in the low nibble)
    and 8 bytes of padding (9.7.16.10.4.4, Figure 202)."""
    b = codes.astype(np.uint8).reshape(codes.shape[0], 2, 16)[:, :, :8]
    return _nibbles(b.reshape(codes.shape[0], 16))


def _element_values(codes: np.ndarray, fmt: str) -> np.ndarray:
    return formats.decode(codes.astype(np.uint8), fmt).astype(np.float64)


def _scale_values(codes: np.ndarray, scale: str) -> np.ndarray:
    """UE8M0: 2^(s - 127), 0xFF NaN; UE4M3: the E4M3 value of the code without its sign
    bit."""
    c = codes.astype(np.int64)
    if scale == "ue8m0":
        return np.where(c == 0xFF, np.nan, np.ldexp(1.0, c - 127))
    return formats.decode((c & 0x7F).astype(np.uint8), "e4m3").astype(np.float64)


def _f32_codes(values: np.ndarray) -> np.ndarray:
    v = np.asarray(values, np.float32)
    bits = v.view(np.uint32).copy()
    bits[v != v] = np.uint32(0x7FFFFFFF)
    return bits
