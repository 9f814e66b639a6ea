"""``tcgen05.cp``: the asynchronous copy from shared memory into Tensor Memory that
kernels use to move scale factors (sm_100a; PTX ISA 9.1, sections 9.7.16.9.2 the
instruction, 9.7.16.2.3 data movement shapes, 9.7.16.4.1 the matrix descriptor)::

    tcgen05.cp.cta_group::1.shape{.multicast} [taddr], s-desc;

The source is a matrix of ``lanes`` rows of 128 or 256 bits, described by the 64-bit
shared-memory descriptor ``s-desc`` as a K-major operand of :mod:`.tcgen05.mma` (Table 40
and the canonical layouts of 9.7.16.3.3: without swizzling, row r's 16-byte chunk c at
start + 16 (r % 8) + SBO (r / 8) + LBO c; the swizzled layouts likewise). Row r goes to
one lane of Tensor Memory, its bytes to consecutive 32-bit cells from the column of
``taddr`` (the lowest address byte the lowest bits of the first cell). Shapes (ptxas
13.0 accepts exactly these pairs):

- ``.128x256b``, ``.128x128b``: 128 rows to lanes 0-127 (``taddr`` at lane 0), 8 or 4
  columns;
- ``.4x256b``: 4 rows to the 4 lanes from ``taddr``'s, 8 columns;
- ``.64x128b.warpx2::02_13`` / ``.warpx2::01_23``: the 64 rows are copied to each warp
  pair (warps 0, 2 and 1, 3, or 0, 1 and 2, 3: the lane quarters of those warps), the
  first warp of a pair receiving rows 0-31 and the second rows 32-63 (the multicast
  qualifier may also stand before the shape, as Triton writes it);
- ``.32x128b.warpx4``: 32 rows copied to each of the four lane quarters (the duplicated
  scale-factor tile of :mod:`.tcgen05_scaled`).

The multicast shapes need ``taddr`` at lane 0. The destination must lie in one
allocation of the CTA. Refused: ``.cta_group::2`` and the decompressing forms
``.b8x16.b6x16_p32``/``.b8x16.b4x16_p64`` (the 8-bit container layouts of Figures 199-201
are not modelled here).

Completion: as ``tcgen05.mma`` (the cells are written when the instruction issues and
stay pending until a ``tcgen05.commit`` of the issuing thread and an mbarrier wait that
sees it; a ``tcgen05.ld``/``st`` of them before that is a race), and a cp that writes
cells of an outstanding ``tcgen05.ld`` or ``tcgen05.st`` is a race. A later
``tcgen05.mma`` of the same thread reads them in order (the two are implicitly
pipelined, 9.7.16.6.2.1).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .errors import ExecutionError, UnsupportedPtxError
from .isa.operands import Op, getter
from .parser import Instruction
from .proxycheck import async_read
from .tcgen05_operands import check_ldst, decode_smem_descriptor, per_thread, record
from .tmem import TensorMemory, _cta_group, state_of, tmem_address
from .types import TYPES
from .wgmma_layout import descriptor_chunks

__all__ = ["SHAPES", "c_cp", "destination_lanes"]

#: shape -> (rows, bits per row, the multicast qualifiers it takes; None: none)
SHAPES = {
    "128x256b": (128, 256, (None,)), "4x256b": (4, 256, (None,)),
    "128x128b": (128, 128, (None,)),
    "64x128b": (64, 128, ("warpx2::02_13", "warpx2::01_23")),
    "32x128b": (32, 128, ("warpx4",)),
}


def _unsupported(inst: Instruction, why: str) -> UnsupportedPtxError:
    return UnsupportedPtxError(f"line {inst.line}: {inst.text!r}: {why}")


def destination_lanes(shape: str, multicast: str | None, lane0: int = 0) -> np.ndarray:
    """(copies, rows) Tensor Memory lanes that receive each source row (module
    docstring)."""
    rows = SHAPES[shape][0]
    r = np.arange(rows)
    if multicast is None:
        return (lane0 + r)[None, :]
    if multicast == "warpx4":
        return np.stack([32 * q + r for q in range(4)])
    first, second = ((0, 2), (1, 3)) if multicast == "warpx2::02_13" else ((0, 1), (2, 3))
    # pair (w0, w1): rows 0-31 to warp w0's quarter, rows 32-63 to warp w1's
    return np.stack([np.where(r < 32, 32 * p[0] + r, 32 * p[1] + r - 32)
                     for p in (first, second)])


def c_cp(inst: Instruction, ctx: Any) -> Op:
    """tcgen05.cp (see the module docstring)."""
    _cta_group(inst)
    parts = [p for p in inst.parts[2:] if not p.startswith("cta_group::")]
    if any(p.startswith(("b8x16", "b6x16", "b4x16")) for p in parts):
        raise _unsupported(inst, "the decompressing tcgen05.cp forms (.b8x16.b6x16_p32, "
                                 ".b8x16.b4x16_p64) are not supported")
    # ptxas takes the multicast qualifier before or after the shape (Triton writes
    # .warpx4.32x128b)
    shapes = [p for p in parts if p in SHAPES]
    casts = [p for p in parts if p not in SHAPES]
    if len(shapes) != 1 or len(casts) > 1:
        raise _unsupported(inst, f"tcgen05.cp.cta_group::1.shape{{.multicast}}: shape one of "
                                 f"{', '.join('.' + s for s in SHAPES)} (got "
                                 f"{'.'.join(parts) or 'none'})")
    shape, multicast = shapes[0], casts[0] if casts else None
    allowed = SHAPES[shape][2]
    if multicast not in allowed:
        want = " or ".join("." + m if m else "no multicast qualifier" for m in allowed)
        raise _unsupported(inst, f"tcgen05.cp.{shape} takes {want}, not "
                                 f"{'.' + multicast if multicast else 'none'} (PTX ISA "
                                 "9.7.16.9.2)")
    if len(inst.operands) != 2:
        raise _unsupported(inst, f"tcgen05.cp takes [taddr], s-desc (got "
                                 f"{len(inst.operands)} operands)")
    ga = tmem_address(inst.operands[0], ctx, inst)
    gs = getter(inst.operands[1], TYPES["b64"], ctx, inst)

    def fn(ix: Any, ex: Any) -> None:
        st = state_of(ctx)
        th, (av, sv) = per_thread(ctx, ix, [(ga, np.int64), (gs, np.uint64)])
        for i, t in enumerate(th.tolist()):
            _copy(ctx, st, inst, shape, multicast, t, int(av[i]), int(sv[i]))
    return Op(inst, "alu", fn)


def _copy(ctx: Any, st: TensorMemory, inst: Instruction, shape: str, multicast: str | None,
          t: int, taddr: int, sdesc: int) -> None:
    """One tcgen05.cp issued by thread ``t``."""
    where = ctx.location(t, inst)
    rows, bits, _ = SHAPES[shape]
    lane0, col0 = taddr >> 16, taddr & 0xFFFF
    if (rows == 128 or multicast) and lane0 != 0:
        raise ExecutionError(f"{where}: tcgen05.cp.{shape}{'.' + multicast if multicast else ''}"
                             f" to {taddr:#x}: lane {lane0}, but this shape fills lanes from "
                             "0 (taddr must be at lane 0)")
    if lane0 + rows > 128:
        raise ExecutionError(f"{where}: tcgen05.cp.{shape} to lanes {lane0}..{lane0 + rows - 1}"
                             ", outside the 128 lanes of Tensor Memory")
    try:
        d = decode_smem_descriptor(sdesc)
        chunks = descriptor_chunks(d, sdesc, rows, bits // 8, 1, False, ctx.smem_size)
    except ValueError as e:
        raise ExecutionError(f"{where}: tcgen05.cp source: {e} (PTX ISA 9.7.16.4.1)") from None
    blk = int(ctx.thread_block[t])
    lanes = destination_lanes(shape, multicast, lane0)
    ncols = bits // 32
    span = ((int(lanes.min()), int(lanes.max()) + 1), (col0, col0 + ncols))
    st.check_cells(blk, span[0], span[1], t, inst, "tcgen05.cp destination")
    check_ldst(st, blk, span, t, inst, who="tcgen05.cp")
    off = int(ctx.sbase[t]) + chunks
    if ctx.tools:
        async_read(ctx, np.full(off.shape, t), off, 16, inst, "tcgen05.cp source read")
    data = ctx.smem[off[:, None] + np.arange(16)].reshape(rows, bits // 8)
    words = np.ascontiguousarray(data).view("<u4").reshape(rows, ncols)
    for copy in lanes:
        st.cells[blk, copy, col0:col0 + ncols] = words
        st.write(blk, copy, slice(col0, col0 + ncols))
    record(st, blk, t, span, inst, op="tcgen05.cp", what="the destination of the tcgen05.cp")
