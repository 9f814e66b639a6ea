"""Warp-level matrix instructions: ``mma.sync``, ``ldmatrix``, ``stmatrix``,
``movmatrix`` and the ``wmma`` load/store/mma that ``nvcuda::wmma`` compiles to.

Sources: PTX ISA 9.0, sections 9.7.14.4 (``wmma``), 9.7.14.5 (``mma``; the fragment
tables of 9.7.14.5.1 "Matrix Fragments for mma.m8n8k4 with .f16 floating point type",
9.7.14.5.6 "... mma.m16n8k4", 9.7.14.5.7 "... mma.m16n8k8", 9.7.14.5.8 "... mma.m16n8k16
with floating point type", 9.7.14.5.9 "... mma.m16n8k16 with integer type", 9.7.14.5.10
"... mma.m16n8k32"), 9.7.14.5.15 (``ldmatrix``), 9.7.14.5.16 (``stmatrix``), 9.7.14.5.17
(``movmatrix``).

Every instruction here is a warp collective with ``.sync.aligned``: all 32 lanes of the
warp must execute it together; a partial warp (divergence, a guard that differs between
lanes, a block size that is not a multiple of 32) is refused with an
:class:`~hardware.simt.errors.ExecutionError`, as its result is undefined in the ISA.

A fragment layout is a table ``(lane, element) -> (problem, row, column)``: element ``i``
of a lane is bits ``[w*(i % per), w*(i % per + 1))`` of register ``i // per`` (``per``
elements of ``w`` bits in each 32-bit register, the lowest first). ``problem`` is 0
except for ``m8n8k4``, where a warp computes four independent products (lanes 0-3 with
16-19, 4-7 with 20-23, ...).

Arithmetic:

- integer ``mma`` (``.s8``/``.u8`` to ``.s32``) is exact: d = c + a b in 64-bit integers,
  then wrapped to 32 bits (two's complement), or clamped to the ``.s32`` range with
  ``.satfinite``;
- floating-point ``mma`` / ``wmma.mma`` computes d = a b + c with the tensor-core model of
  the GPU chosen at launch (``Module.launch(..., gpu=...)``): the preset
  ``"<GPU>-<FORMAT>"`` of :mod:`refimpl.matmul.presets` (``"H100-FP16"``,
  ``"A100-BF16"``, ``"A100-TF32"``; ``"<GPU>-<FORMAT>-MMA"`` where the GPU has a separate
  model of ``mma.sync``, as Hopper FP8 has: :func:`preset_name`), evaluated by
  :func:`refimpl.matmul.matmul` with c as its accumulator input and the result in
  ``.dtype`` (``out_format`` "fp32" or "fp16"). A GPU without a preset for the instruction's
  input format is refused at launch (:class:`~hardware.simt.errors.LaunchError`), never
  replaced by another model. ``.tf32`` operands are the ``.b32`` registers with the low
  13 bits dropped (the tensor core reads 19 bits).
- memory statistics: ``ldmatrix``/``stmatrix`` count one 32-bit access per lane and
  matrix (two 16-bit ones with ``.trans``), ``wmma.load``/``store`` one access per
  fragment element, not the hardware's wider row transactions.
- ``wmma`` fragments: the PTX ISA leaves the mapping of matrix elements to a fragment
  unspecified. Here element ``e`` of the logical matrix in row-major order is held by lane
  ``e // n`` in element ``e % n`` (``n`` = elements / 32); fragments with more elements
  than that (``.f16`` ``a``/``b``) repeat the first ``n`` in the rest. Kernels that
  touch fragment elements one by one (other than uniformly, like scaling all of them)
  depend on the hardware's private layout and are not portable.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from refimpl import formats
from refimpl import matmul as mm
from refimpl.matmul import presets

from .errors import LaunchError, UnsupportedPtxError
from .isa.data import _address, _space
from .isa.operands import Op, getter, setter
from .parser import Addr, Instruction, Reg, Vec
from .types import TYPES

__all__ = ["COMPILERS", "mma_layout", "wmma_layout", "TENSOR_CORE_FORMATS"]

_LANE = np.arange(32)

#: mma element type -> (refimpl format, bits per element, preset suffix or None for int)
TENSOR_CORE_FORMATS = {
    "f16": ("fp16", 16, "FP16"), "bf16": ("bf16", 16, "BF16"), "tf32": ("tf32", 32, "TF32"),
    "e4m3": ("e4m3", 8, "E4M3"), "e5m2": ("e5m2", 8, "E5M2"),
    "s8": (None, 8, None), "u8": (None, 8, None),
}
_ACC = {"f32": 32, "f16": 16, "s32": 32}


def _unsupported(inst: Instruction, why: str) -> UnsupportedPtxError:
    return UnsupportedPtxError(f"line {inst.line}: {inst.text!r}: {why}")


# ------------------------------------------------------------------- fragment tables


def _table(n: int, fn: Callable[[np.ndarray, int], tuple]) -> np.ndarray:
    """(32, n, 3) int array: for each lane and element i, (problem, row, col)."""
    out = np.zeros((32, n, 3), dtype=np.int64)
    for i in range(n):
        p, r, c = fn(_LANE, i)
        out[:, i, 0] = p
        out[:, i, 1] = r
        out[:, i, 2] = c
    return out


def _g(lane: np.ndarray) -> np.ndarray:
    return lane >> 2


def _t(lane: np.ndarray) -> np.ndarray:
    return lane % 4


def _hi(lane: np.ndarray) -> np.ndarray:      # m8n8k4: the high group adds 4
    return np.where(lane >= 16, 4, 0)


def _q(lane: np.ndarray) -> np.ndarray:       # m8n8k4: which of the four products
    return (lane % 16) // 4


_MMA: dict[tuple, tuple[int, Callable]] = {
    # (shape, operand, element bits[, layout]) -> (elements per lane, i -> (p, row, col))
    ("m16n8k16", "a", 16): (8, lambda l, i: (0, _g(l) + (8 if i in (2, 3, 6, 7) else 0),
                                            2 * _t(l) + (i & 1) + (8 if i >= 4 else 0))),
    ("m16n8k16", "b", 16): (4, lambda l, i: (0, 2 * _t(l) + (i & 1) + (8 if i >= 2 else 0),
                                            _g(l))),
    ("m16n8k8", "a", 16): (4, lambda l, i: (0, _g(l) + (8 if i >= 2 else 0), 2 * _t(l) + (i & 1))),
    ("m16n8k8", "b", 16): (2, lambda l, i: (0, 2 * _t(l) + i, _g(l))),
    ("m16n8k4", "a", 32): (2, lambda l, i: (0, _g(l) + 8 * i, _t(l))),
    ("m16n8k4", "b", 32): (1, lambda l, i: (0, _t(l), _g(l))),
    ("m16n8k8", "a", 32): (4, lambda l, i: (0, _g(l) + (8 if i in (1, 3) else 0),
                                           _t(l) + (4 if i >= 2 else 0))),
    ("m16n8k8", "b", 32): (2, lambda l, i: (0, _t(l) + 4 * i, _g(l))),
    ("m16n8k32", "a", 8): (16, lambda l, i: (0, _g(l) + (0 if (i < 4 or 8 <= i < 12) else 8),
                                            4 * _t(l) + (i & 3) + (16 if i >= 8 else 0))),
    ("m16n8k32", "b", 8): (8, lambda l, i: (0, 4 * _t(l) + (i & 3) + (16 if i >= 4 else 0),
                                           _g(l))),
    ("m16n8k16", "a", 8): (8, lambda l, i: (0, _g(l) + (8 if i >= 4 else 0), 4 * _t(l) + (i & 3))),
    ("m16n8k16", "b", 8): (4, lambda l, i: (0, 4 * _t(l) + i, _g(l))),
    ("m8n8k4", "a", 16, "row"): (4, lambda l, i: (_q(l), l % 4 + _hi(l), i + 0 * l)),
    ("m8n8k4", "a", 16, "col"): (4, lambda l, i: (_q(l), i % 4 + _hi(l), l % 4)),
    ("m8n8k4", "b", 16, "row"): (4, lambda l, i: (_q(l), l % 4, i + _hi(l))),
    ("m8n8k4", "b", 16, "col"): (4, lambda l, i: (_q(l), i + 0 * l, l % 4 + _hi(l))),
    ("m8n8k4", "c", 16): (8, lambda l, i: (_q(l), l % 4 + _hi(l), i + 0 * l)),
    ("m8n8k4", "c", 32): (8, lambda l, i: (_q(l), (l & 1) + (i & 2) + _hi(l),
                                          (i & 4) + (l & 2) + (i & 1))),
}
for _shape in ("m16n8k16", "m16n8k8", "m16n8k4", "m16n8k32"):
    for _bits in (16, 32):
        _MMA[(_shape, "c", _bits)] = (4, lambda l, i: (0, _g(l) + (8 if i >= 2 else 0),
                                                       2 * _t(l) + (i & 1)))

#: (M, N, K, problems per warp) of each mma shape
_SHAPES = {"m8n8k4": (8, 8, 4, 4), "m16n8k4": (16, 8, 4, 1), "m16n8k8": (16, 8, 8, 1),
           "m16n8k16": (16, 8, 16, 1), "m16n8k32": (16, 8, 32, 1)}


def mma_layout(shape: str, operand: str, bits: int, layout: str = "row") -> np.ndarray:
    """The fragment table of an ``mma`` operand: (32, elements, 3) of (problem, row, col).

    Args:
        shape: "m8n8k4", "m16n8k4", "m16n8k8", "m16n8k16" or "m16n8k32".
        operand: "a", "b" or "c" (c also describes d).
        bits: element width (8, 16 or 32; 32 for .tf32 multiplicands and f32/s32
            accumulators).
        layout: "row" or "col" (only m8n8k4's a and b depend on it).

    Raises:
        ValueError: a combination the PTX ISA does not define.
    """
    key = (shape, operand, bits, layout) if shape == "m8n8k4" and operand != "c" else \
        (shape, operand, bits)
    if key not in _MMA:
        raise ValueError(f"no mma fragment layout for shape={shape!r}, operand={operand!r}, "
                         f"bits={bits!r}, layout={layout!r} (PTX ISA 9.7.14.5)")
    n, fn = _MMA[key]
    return _table(n, fn)


def wmma_layout(rows: int, cols: int, slots: int) -> np.ndarray:
    """This interpreter's wmma fragment table (see the module docstring)."""
    n = rows * cols // 32
    e = _LANE[:, None] * n + (np.arange(slots) % n)[None, :]
    return np.stack([np.zeros_like(e), e // cols, e % cols], axis=-1)


# ---------------------------------------------------------------- register access


def _vec(op: Any, inst: Instruction, what: str) -> list:
    if isinstance(op, Vec):
        return list(op.items)
    if isinstance(op, Reg):
        return [op]
    raise _unsupported(inst, f"{what} must be a register vector {{...}}")


class _Frag:
    """Reads and writes a fragment held in a vector of 32-bit (or 16-bit) registers."""

    def __init__(self, items: list, bits: int, nelem: int, ctx: Any, inst: Instruction,
                 write: bool = False, reg_bits: int = 32) -> None:
        self.per = reg_bits // bits
        self.bits = bits
        self.reg_bits = reg_bits
        need = -(-nelem // self.per)
        if len(items) != need:
            raise _unsupported(inst, f"a fragment of {nelem} {bits}-bit elements needs "
                                     f"{need} registers, got {len(items)}")
        t = TYPES[f"b{reg_bits}"]
        self.gets = [getter(x, t, ctx, inst) for x in items]
        self.puts = [setter(x, t, ctx, inst) for x in items] if write else []
        self.nelem = nelem

    def read(self, ix: Any, g: int) -> np.ndarray:
        """(G, 32, nelem) uint32 element codes."""
        out = np.empty((g, 32, self.nelem), dtype=np.uint32)
        mask = np.uint64((1 << self.bits) - 1)
        for r, get in enumerate(self.gets):
            v = np.broadcast_to(np.asarray(get(ix)).astype(np.uint64), (g * 32,)).reshape(g, 32)
            for k in range(self.per):
                i = r * self.per + k
                if i < self.nelem:
                    out[:, :, i] = (v >> np.uint64(k * self.bits)) & mask
        return out

    def write(self, ix: Any, codes: np.ndarray) -> None:
        g = codes.shape[0]
        for r, put in enumerate(self.puts):
            v = np.zeros((g, 32), dtype=np.uint64)
            for k in range(self.per):
                i = r * self.per + k
                if i < self.nelem:
                    v |= codes[:, :, i].astype(np.uint64) << np.uint64(k * self.bits)
            put(ix, v.reshape(-1).astype(np.dtype(f"uint{self.reg_bits}")))


def _whole_warps(inst: Instruction, ctx: Any, ex: Any) -> None:
    if not ex.mask.all():
        ctx.fault_here(inst, "executed by a partial warp (a .sync.aligned warp-matrix "
                             "instruction needs all 32 lanes; undefined in the PTX ISA)")


def _gather(codes: np.ndarray, table: np.ndarray, shape: tuple[int, int, int]) -> np.ndarray:
    """Fragment codes (G, 32, n) -> matrices (G, P, R, C) (the first writer wins nowhere:
    every table used covers each position exactly once, or repeats equal values)."""
    g = codes.shape[0]
    p, r, c = shape
    out = np.zeros((g, p, r, c), dtype=codes.dtype)
    out[:, table[..., 0], table[..., 1], table[..., 2]] = codes
    return out


def _scatter(mats: np.ndarray, table: np.ndarray) -> np.ndarray:
    return mats[:, table[..., 0], table[..., 1], table[..., 2]]


# ---------------------------------------------------------------------- arithmetic


def _values(codes: np.ndarray, tname: str) -> np.ndarray:
    """Element codes -> float64 values (tf32: f32 bits with the low 13 bits dropped)."""
    if tname == "tf32":
        return (codes.astype(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
    if tname == "f32":
        return codes.astype(np.uint32).view(np.float32).astype(np.float64)
    fmt = {"f16": "fp16", "bf16": "bf16", "e4m3": "e4m3", "e5m2": "e5m2"}[tname]
    return formats.decode(codes, fmt).astype(np.float64)


def _codes(values: np.ndarray, tname: str) -> np.ndarray:
    values = np.asarray(values, np.float32)
    if tname == "f32":
        nan = values != values
        bits = values.view(np.uint32).copy()
        bits[nan] = np.uint32(0x7FFFFFFF)
        return bits
    return formats.encode(values, "fp16", nan=0x7FFF).astype(np.uint32)


def _integers(codes: np.ndarray, tname: str) -> np.ndarray:
    x = codes.astype(np.int64)
    if tname == "s8":
        return np.where(x >= 128, x - 256, x)
    if tname == "s32":
        return np.where(x >= 2**31, x - 2**32, x)
    return x


def preset_name(gpu: str, tname: str) -> str | None:
    """The :mod:`refimpl.matmul.presets` name (canonical) that an ``mma.sync`` /
    ``wmma.mma`` with ``.tname`` inputs uses on ``gpu``: ``"<gpu>-<FORMAT>-MMA"`` where the
    GPU has a separate model of ``mma.sync`` (Hopper FP8: with ``.f16`` C and D it rounds
    two interleaved halves into FP16, which its warpgroup instruction does not), else
    ``"<gpu>-<FORMAT>"`` (Blackwell FP8: ``"B200-E4M3"`` is ``mma.sync``, ``tcgen05.mma``
    has its own preset); aliases resolved (H200 is H100). None when the GPU has
    neither."""
    fmt = TENSOR_CORE_FORMATS[tname][2]
    for name in (f"{gpu}-{fmt}-MMA", f"{gpu}-{fmt}"):
        if presets.is_preset(name):
            return presets.canonical(name)
    return None


def _check_preset(gpu: str | None, tname: str, inst: Instruction) -> None:
    """Refuse a floating-point mma the chosen GPU has no tensor-core model for."""
    if gpu is None:
        return  # load-time validation: the GPU is chosen at launch
    if preset_name(gpu, tname) is None:
        fmt = TENSOR_CORE_FORMATS[tname][2]
        same = sorted(p for p in presets.PRESETS if p.endswith(f"-{fmt}"))
        raise LaunchError(
            f"line {inst.line}: {inst.text!r}: gpu={gpu!r} has no tensor-core preset for "
            f".{tname} inputs ({gpu}-{fmt}); GPUs with one: {', '.join(same)}; launch "
            "with one of them (no other model is substituted)")


def _float_mma(gpu: str, tname: str, a: np.ndarray, b: np.ndarray, c: np.ndarray,
               dname: str) -> np.ndarray:
    out = "fp16" if dname == "f16" else "fp32"
    return np.asarray(mm.matmul(a.astype(np.float32), b.astype(np.float32),
                                c.astype(np.float32), accumulate=preset_name(gpu, tname),
                                out_format=out), dtype=np.float32)


def _int_mma(a: np.ndarray, b: np.ndarray, c: np.ndarray, satfinite: bool) -> np.ndarray:
    d = c + np.matmul(a, b)          # exact: |a b| <= 32 * 255 * 255, int64 throughout
    if satfinite:
        d = np.clip(d, -2**31, 2**31 - 1)
    return (d & 0xFFFFFFFF).astype(np.uint32)


class _Product:
    """The typed matrix product d = a b + c shared by mma.sync and wmma.mma."""

    def __init__(self, inst: Instruction, ctx: Any, dname: str, aname: str, bname: str,
                 cname: str) -> None:
        self.dname, self.aname, self.bname, self.cname = dname, aname, bname, cname
        self.integer = TENSOR_CORE_FORMATS[aname][2] is None
        if self.integer:
            if dname != "s32" or cname != "s32" or bname not in ("s8", "u8"):
                raise _unsupported(inst, "integer mma is .s32.{s8,u8}.{s8,u8}.s32")
        else:
            if aname != bname:
                raise _unsupported(inst, f"mixed input types .{aname}/.{bname} have no "
                                         "tensor-core preset")
            if dname not in ("f32", "f16") or cname not in ("f32", "f16"):
                raise _unsupported(inst, "floating-point mma accumulates in .f32 or .f16")
            if aname in ("bf16", "tf32") and (dname, cname) != ("f32", "f32"):
                raise _unsupported(inst, f".{aname} mma accumulates in .f32 only")
            _check_preset(getattr(ctx, "gpu", None), aname, inst)
        self.satfinite = "satfinite" in inst.parts
        if self.satfinite and not self.integer:
            raise _unsupported(inst, ".satfinite applies to integer mma only")
        self.ctx = ctx

    def __call__(self, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
        """Code matrices in, code matrix out (uint32)."""
        if self.integer:
            return _int_mma(_integers(a, self.aname), _integers(b, self.bname),
                            _integers(c, "s32"), self.satfinite)
        cv = _values(c, self.cname)
        d = _float_mma(self.ctx.gpu, self.aname, _values(a, self.aname),
                       _values(b, self.aname), cv, self.dname)
        return _codes(d, self.dname)


def _types_of(inst: Instruction) -> list[str]:
    return [p for p in inst.parts[1:] if p in TENSOR_CORE_FORMATS or p in _ACC]


def c_mma(inst: Instruction, ctx: Any) -> Op:
    """mma.sync.aligned.shape.alayout.blayout{.satfinite}.dtype.atype.btype.ctype d, a, b, c
    (PTX ISA 9.7.14.5.14) for the shapes and types of the module docstring."""
    parts = inst.parts
    if any(p.startswith(("kind", "block_scale", "scale_vec", "sp")) or p in ("xor", "and")
           for p in parts):
        raise _unsupported(inst, "sparse, block-scaled, .kind and single-bit mma are not "
                                 "supported")
    if parts[1:3] != ("sync", "aligned"):
        raise _unsupported(inst, "mma needs .sync.aligned")
    shape = parts[3] if len(parts) > 3 else ""
    if shape not in _SHAPES:
        raise _unsupported(inst, f"mma shape .{shape} is not supported (supported: "
                                 f"{', '.join(_SHAPES)})")
    other = [p for p in parts[4:] if p in ("f64", "s4", "u4", "b1", "e2m1", "e3m2", "e2m3")]
    if other:
        raise _unsupported(inst, f"mma with .{other[0]} elements is not supported (supported "
                                 "inputs: f16, bf16, tf32, e4m3, e5m2, s8, u8)")
    lay = [p for p in parts[4:] if p in ("row", "col")]
    if len(lay) != 2:
        raise _unsupported(inst, "mma needs .alayout.blayout")
    types = _types_of(inst)
    if len(types) != 4:
        raise _unsupported(inst, "mma needs .dtype.atype.btype.ctype")
    dname, aname, bname, cname = types
    abits = TENSOR_CORE_FORMATS[aname][1]
    if shape != "m8n8k4" and tuple(lay) != ("row", "col"):
        raise _unsupported(inst, f"{shape} takes .row.col only")
    allowed = {"m8n8k4": ("f16",), "m16n8k4": ("tf32",), "m16n8k8": ("f16", "bf16", "tf32"),
               "m16n8k16": ("f16", "bf16", "s8", "u8"),
               "m16n8k32": ("e4m3", "e5m2", "s8", "u8")}[shape]
    if aname not in allowed or bname not in allowed:
        raise _unsupported(inst, f"mma.{shape} with .{aname}/.{bname} inputs is not "
                                 f"supported (inputs: {', '.join(allowed)})")
    prod = _Product(inst, ctx, dname, aname, bname, cname)
    m, n, k, nprob = _SHAPES[shape]
    try:
        ta = mma_layout(shape, "a", abits, lay[0])
        tb = mma_layout(shape, "b", abits, lay[1])
        tc = mma_layout(shape, "c", _ACC[cname])
        td = mma_layout(shape, "c", _ACC[dname])
    except (KeyError, ValueError):
        raise _unsupported(inst, f"no fragment layout for this form of mma.{shape}") from None
    if len(inst.operands) != 4:
        raise _unsupported(inst, "mma takes d, a, b, c")
    od, oa, ob, oc = inst.operands
    fa = _Frag(_vec(oa, inst, "a"), abits, ta.shape[1], ctx, inst)
    fb = _Frag(_vec(ob, inst, "b"), abits, tb.shape[1], ctx, inst)
    fc = _Frag(_vec(oc, inst, "c"), _ACC[cname], tc.shape[1], ctx, inst)
    fd = _Frag(_vec(od, inst, "d"), _ACC[dname], td.shape[1], ctx, inst, write=True)

    def fn(ix: Any, ex: Any) -> None:
        _whole_warps(inst, ctx, ex)
        g = ex.rows.shape[0]
        a = _gather(fa.read(ix, g), ta, (nprob, m, k)).reshape(g * nprob, m, k)
        b = _gather(fb.read(ix, g), tb, (nprob, k, n)).reshape(g * nprob, k, n)
        c = _gather(fc.read(ix, g), tc, (nprob, m, n)).reshape(g * nprob, m, n)
        d = prod(a, b, c).reshape(g, nprob, m, n)
        fd.write(ix, _scatter(d, td))
    return Op(inst, "alu", fn)


# ---------------------------------------------------------------- ldmatrix & co.


def _num(inst: Instruction) -> int:
    nums = [p for p in inst.parts if p in ("x1", "x2", "x4")]
    if len(nums) != 1:
        raise _unsupported(inst, "needs .x1, .x2 or .x4")
    return int(nums[0][1])


def _check_m8n8(inst: Instruction) -> None:
    if inst.parts[1:3] != ("sync", "aligned") or "m8n8" not in inst.parts or \
            "b16" not in inst.parts:
        raise _unsupported(inst, "only the .sync.aligned.m8n8 ... .b16 form is supported "
                                 "(the 8-bit and sub-byte shapes of sm_100 are not)")


def _matrix_space(inst: Instruction) -> str:
    sp = _space(inst)
    if sp not in ("shared", "generic"):
        raise _unsupported(inst, f".{sp} (ldmatrix/stmatrix address .shared memory)")
    return sp


def _row_addresses(inst: Instruction, ctx: Any, space: str) -> Callable:
    addr = _address(inst.operands[1] if inst.parts[0] == "ldmatrix" else inst.operands[0],
                    ctx, inst, space)

    def rows(ix: Any, ex: Any, nmat: int) -> np.ndarray:
        g = ex.rows.shape[0]
        a = np.broadcast_to(np.asarray(addr(ix), np.int64), (g * 32,)).reshape(g, 32)
        r = a[:, : 8 * nmat]
        if (r % 16).any():
            bad = int(r[r % 16 != 0][0])
            ctx.fault_here(inst, f"row address {bad:#x} is not 16-byte aligned")
        return r
    return rows


def _element_addresses(rows: np.ndarray, j: int, trans: bool) -> list[np.ndarray]:
    """Per lane, the addresses of its two 16-bit elements of matrix j (G, 32) each."""
    t = _LANE
    if not trans:  # lane t: row t // 4, columns 2 (t % 4) and 2 (t % 4) + 1
        base = rows[:, 8 * j + t // 4] + 4 * (t % 4)
        return [base, base + 2]
    # .trans: lane t holds M[2 (t % 4)][t // 4] and M[2 (t % 4) + 1][t // 4]
    return [rows[:, 8 * j + 2 * (t % 4)] + 2 * (t // 4),
            rows[:, 8 * j + 2 * (t % 4) + 1] + 2 * (t // 4)]


def _matrix_operands(inst: Instruction, load: bool) -> tuple[int, bool, str, list]:
    """(.num, .trans, state space, register list) of ldmatrix (``load``: r, [p]) or
    stmatrix ([p], r), with the operand checks both share."""
    _check_m8n8(inst)
    nmat = _num(inst)
    space = _matrix_space(inst)
    name, regs, addr, role = (("ldmatrix", 0, 1, "destination") if load
                              else ("stmatrix", 1, 0, "source"))
    if len(inst.operands) != 2 or not isinstance(inst.operands[addr], Addr):
        raise _unsupported(inst, f"{name} takes " + ("r, [p]" if load else "[p], r"))
    items = _vec(inst.operands[regs], inst, "r")
    if len(items) != nmat:
        raise _unsupported(inst, f".x{nmat} needs {nmat} {role} registers")
    return nmat, "trans" in inst.parts, space, items


def c_ldmatrix(inst: Instruction, ctx: Any) -> Op:
    """ldmatrix.sync.aligned.m8n8.num{.trans}{.shared{::cta}}.b16 r, [p] (9.7.14.5.15):
    lanes 8j..8j+7 give the row addresses of matrix j; lane t receives row t / 4,
    columns 2 (t % 4) and 2 (t % 4) + 1 of each matrix (.trans: the transpose)."""
    nmat, trans, space, items = _matrix_operands(inst, load=True)
    puts = [setter(x, TYPES["b32"], ctx, inst) for x in items]
    rows_of = _row_addresses(inst, ctx, space)
    u16, u32 = np.dtype(np.uint16), np.dtype(np.uint32)

    def fn(ix: Any, ex: Any) -> None:
        _whole_warps(inst, ctx, ex)
        rows = rows_of(ix, ex, nmat)
        for j, put in enumerate(puts):
            lo_a, hi_a = _element_addresses(rows, j, trans)
            if not trans:   # the pair is one aligned 32-bit word of the row
                put(ix, ctx.load(space, ix, ex, lo_a.reshape(-1), u32, 1, inst)[:, 0])
                continue
            lo, hi = (ctx.load(space, ix, ex, a.reshape(-1), u16, 1, inst)[:, 0]
                      for a in (lo_a, hi_a))
            put(ix, lo.astype(np.uint32) | (hi.astype(np.uint32) << np.uint32(16)))
    return Op(inst, "alu", fn)


def c_stmatrix(inst: Instruction, ctx: Any) -> Op:
    """stmatrix.sync.aligned.m8n8.num{.trans}{.shared{::cta}}.b16 [p], r (9.7.14.5.16):
    the inverse of ldmatrix (sm_90)."""
    nmat, trans, space, items = _matrix_operands(inst, load=False)
    gets = [getter(x, TYPES["b32"], ctx, inst) for x in items]
    rows_of = _row_addresses(inst, ctx, space)

    def fn(ix: Any, ex: Any) -> None:
        _whole_warps(inst, ctx, ex)
        rows = rows_of(ix, ex, nmat)
        g = ex.rows.shape[0]
        for j, get in enumerate(gets):
            v = np.broadcast_to(np.asarray(get(ix)).astype(np.uint32), (g * 32,))
            if not trans:   # the pair is one aligned 32-bit word of the row
                a = _element_addresses(rows, j, trans)[0]
                ctx.store(space, ix, ex, a.reshape(-1), v[:, None].copy(), inst)
                continue
            for half, a in enumerate(_element_addresses(rows, j, trans)):
                vals = ((v >> np.uint32(16 * half)) & np.uint32(0xFFFF)).astype(np.uint16)
                ctx.store(space, ix, ex, a.reshape(-1), vals[:, None], inst)
    return Op(inst, "alu", fn)


def c_movmatrix(inst: Instruction, ctx: Any) -> Op:
    """movmatrix.sync.aligned.m8n8.trans.b16 d, a (9.7.14.5.17): lane t holds row t / 4,
    columns 2 (t % 4), 2 (t % 4) + 1 of the input in a, and the same of its transpose in
    d."""
    if inst.parts[1:] != ("sync", "aligned", "m8n8", "trans", "b16") or len(inst.operands) != 2:
        raise _unsupported(inst, "only movmatrix.sync.aligned.m8n8.trans.b16 d, a exists")
    get = getter(inst.operands[1], TYPES["b32"], ctx, inst)
    put = setter(inst.operands[0], TYPES["b32"], ctx, inst)
    t = _LANE
    # M[r][c] is half (c % 2) of lane 4 r + c // 2; d of lane t is M^T's row t / 4, i.e.
    # M[2 (t % 4) + h][t // 4] for h = 0, 1
    src_lane = [4 * (2 * (t % 4) + h) + (t // 4) // 2 for h in (0, 1)]
    src_half = (t // 4) % 2

    def fn(ix: Any, ex: Any) -> None:
        _whole_warps(inst, ctx, ex)
        g = ex.rows.shape[0]
        v = np.broadcast_to(np.asarray(get(ix)).astype(np.uint32), (g * 32,)).reshape(g, 32)
        out = np.zeros((g, 32), np.uint32)
        for h in (0, 1):
            e = (v[:, src_lane[h]] >> (16 * src_half).astype(np.uint32)) & np.uint32(0xFFFF)
            out |= e << np.uint32(16 * h)
        put(ix, out.reshape(-1))
    return Op(inst, "alu", fn)


# ------------------------------------------------------------------------------ wmma

_WMMA_SHAPES = {"m16n16k16": (16, 16, 16), "m32n8k16": (32, 8, 16), "m8n32k16": (8, 32, 16),
                "m16n16k8": (16, 16, 8)}
#: registers of a wmma fragment: (operand, element type) -> registers (all shapes above)
_WMMA_REGS = {("a", "f16"): 8, ("b", "f16"): 8, ("c", "f16"): 4, ("c", "f32"): 8,
              ("a", "bf16"): None, ("b", "bf16"): None, ("a", "s8"): None,
              ("b", "s8"): None, ("a", "u8"): None, ("b", "u8"): None, ("c", "s32"): 8,
              ("a", "tf32"): 4, ("b", "tf32"): 4}


def _wmma_dims(shape: str, operand: str) -> tuple[int, int]:
    m, n, k = _WMMA_SHAPES[shape]
    return {"a": (m, k), "b": (k, n), "c": (m, n), "d": (m, n)}[operand]


def _wmma_frag(shape: str, operand: str, tname: str) -> tuple[int, int, int]:
    """(rows, cols, element slots) of a wmma fragment."""
    rows, cols = _wmma_dims(shape, operand)
    bits = 32 if tname in ("f32", "s32", "tf32") else TENSOR_CORE_FORMATS.get(tname, (0, 16))[1]
    op = "c" if operand == "d" else operand
    regs = _WMMA_REGS.get((op, tname))
    if regs is None:  # packed exactly: elements / 32 per lane
        regs = max(1, rows * cols // 32 * bits // 32)
    return rows, cols, regs * (32 // bits)


def c_wmma(inst: Instruction, ctx: Any) -> Op:
    """wmma.load / wmma.store / wmma.mma (9.7.14.4.x) as ``nvcuda::wmma`` compiles them:
    shapes m16n16k16, m32n8k16, m8n32k16 (f16, bf16, s8, u8) and m16n16k8 (tf32)."""
    sub = inst.parts[1] if len(inst.parts) > 1 else ""
    if sub not in ("load", "store", "mma"):
        raise _unsupported(inst, f"wmma.{sub} is not supported")
    shape = next((p for p in inst.parts if p in _WMMA_SHAPES), None)
    if shape is None:
        raise _unsupported(inst, f"wmma shape not supported (supported: {', '.join(_WMMA_SHAPES)})")
    if "sync" not in inst.parts or "aligned" not in inst.parts:
        raise _unsupported(inst, "wmma needs .sync.aligned")
    if sub == "mma":
        return _wmma_mma(inst, ctx, shape)
    return _wmma_move(inst, ctx, shape, sub)


def _wmma_move(inst: Instruction, ctx: Any, shape: str, sub: str) -> Op:
    operand = inst.parts[2]
    if (sub == "load" and operand not in ("a", "b", "c")) or (sub == "store" and operand != "d"):
        raise _unsupported(inst, f"wmma.{sub}.{operand}")
    layout = next((p for p in inst.parts if p in ("row", "col")), None)
    if layout is None:
        raise _unsupported(inst, "wmma load/store needs .row or .col")
    tname = inst.parts[-1]
    if tname not in TENSOR_CORE_FORMATS and tname not in _ACC:
        raise _unsupported(inst, f"wmma element type .{tname}")
    space = _space(inst)
    if space not in ("global", "shared", "generic"):
        raise _unsupported(inst, f"wmma on .{space}")
    rows, cols, slots = _wmma_frag(shape, operand, tname)
    bits = 32 if tname in ("f32", "s32", "tf32") else TENSOR_CORE_FORMATS[tname][1]
    table = wmma_layout(rows, cols, slots)
    ops = inst.operands
    if len(ops) not in (2, 3):
        raise _unsupported(inst, f"wmma.{sub} takes a fragment, an address and a stride")
    frag_op, addr_op = (ops[0], ops[1]) if sub == "load" else (ops[1], ops[0])
    frag = _Frag(_vec(frag_op, inst, "the fragment"), bits, slots, ctx, inst,
                 write=(sub == "load"))
    addr = _address(addr_op, ctx, inst, space)
    default = cols if layout == "row" else rows
    stride = getter(ops[2], TYPES["u32"], ctx, inst) if len(ops) == 3 else (lambda ix: default)
    esize = bits // 8
    elem = np.dtype(f"uint{bits}")
    # the element offset of (row, col) in units of the stride / one element
    major = table[..., 1] if layout == "row" else table[..., 2]
    minor = table[..., 2] if layout == "row" else table[..., 1]

    def offsets(ix: Any, ex: Any) -> np.ndarray:
        g = ex.rows.shape[0]
        base = np.broadcast_to(np.asarray(addr(ix), np.int64), (g * 32,)).reshape(g, 32)
        ld = np.broadcast_to(np.asarray(stride(ix), np.int64), (g * 32,)).reshape(g, 32)
        if (base != base[:, :1]).any() or (ld != ld[:, :1]).any():
            ctx.fault_here(inst, "the lanes of a warp give different addresses or strides "
                                 "(wmma needs one matrix per warp)")
        return base[:, :, None] + (major[None] * ld[:, :, None] + minor[None]) * esize

    def load(ix: Any, ex: Any) -> None:
        _whole_warps(inst, ctx, ex)
        a = offsets(ix, ex)
        g = a.shape[0]
        codes = np.empty((g, 32, slots), np.uint32)
        for s in range(slots):
            codes[:, :, s] = ctx.load(space, ix, ex, a[:, :, s].reshape(-1), elem, 1,
                                      inst)[:, 0].reshape(g, 32)
        frag.write(ix, codes)

    def store(ix: Any, ex: Any) -> None:
        _whole_warps(inst, ctx, ex)
        a = offsets(ix, ex)
        g = a.shape[0]
        codes = frag.read(ix, g)
        n = rows * cols // 32
        for s in range(min(slots, n)):
            ctx.store(space, ix, ex, a[:, :, s].reshape(-1),
                      codes[:, :, s].reshape(-1, 1).astype(elem), inst)
    return Op(inst, "alu", load if sub == "load" else store)


def _wmma_mma(inst: Instruction, ctx: Any, shape: str) -> Op:
    types = _types_of(inst)
    if len(types) == 2:            # .dtype.ctype: f16 inputs
        dname, cname = types
        aname = bname = "f16"
    elif len(types) == 4:
        dname, aname, bname, cname = types
    else:
        raise _unsupported(inst, "wmma.mma needs .dtype.ctype or .dtype.atype.btype.ctype")
    if shape == "m16n16k8" and aname != "tf32":
        raise _unsupported(inst, "m16n16k8 takes .tf32 inputs")
    if aname not in ("f16", "bf16", "tf32", "s8", "u8"):
        raise _unsupported(inst, f"wmma.mma with .{aname} inputs is not supported")
    prod = _Product(inst, ctx, dname, aname, bname, cname)
    m, n, k = _WMMA_SHAPES[shape]
    frags = []
    for operand, tname in (("a", aname), ("b", bname), ("c", cname), ("d", dname)):
        rows, cols, slots = _wmma_frag(shape, operand, tname)
        bits = 32 if tname in ("f32", "s32", "tf32") else TENSOR_CORE_FORMATS[tname][1]
        frags.append((rows, cols, slots, bits, wmma_layout(rows, cols, slots)))
    od, oa, ob, oc = inst.operands if len(inst.operands) == 4 else (None,) * 4
    if od is None:
        raise _unsupported(inst, "wmma.mma takes d, a, b, c")
    fa, fb, fc = (_Frag(_vec(o, inst, nm), f[3], f[2], ctx, inst)
                  for o, nm, f in ((oa, "a", frags[0]), (ob, "b", frags[1]), (oc, "c", frags[2])))
    fdd = frags[3]
    fd = _Frag(_vec(od, inst, "d"), fdd[3], fdd[2], ctx, inst, write=True)

    def first(codes: np.ndarray, f: tuple) -> np.ndarray:
        rows, cols = f[0], f[1]
        nuniq = rows * cols // 32
        return _gather(codes[:, :, :nuniq], f[4][:, :nuniq], (1, rows, cols))[:, 0]

    def fn(ix: Any, ex: Any) -> None:
        _whole_warps(inst, ctx, ex)
        g = ex.rows.shape[0]
        a = first(fa.read(ix, g), frags[0])
        b = first(fb.read(ix, g), frags[1])
        c = first(fc.read(ix, g), frags[2])
        d = prod(a, b, c)
        fd.write(ix, _scatter(d[:, None], fdd[4]))
    return Op(inst, "alu", fn)


#: opcode -> compiler, merged into the instruction table
COMPILERS = {"mma": c_mma, "ldmatrix": c_ldmatrix, "stmatrix": c_stmatrix,
             "movmatrix": c_movmatrix, "wmma": c_wmma}
