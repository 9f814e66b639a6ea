"""The operands and Tensor Memory cells of the tcgen05 instructions, shared by the
mma of every kind (:mod:`.tcgen05`, :mod:`.tcgen05_scaled`) and by tcgen05.cp
(:mod:`.tcgen05_cp`): the sm_100 shared-memory matrix descriptor (PTX ISA 9.7.16.4.1),
operands read through it or from Tensor Memory, D's cells, and the bookkeeping of
pending asynchronous operations and of the races with tcgen05.ld/st."""
from __future__ import annotations

from typing import Any

import numpy as np

from .errors import ExecutionError
from .isa.operands import per_thread
from .parser import Instruction
from .proxycheck import async_read
from .tcgen05_layouts import LAYOUTS, a_lanes, d_layout, layout_name, rectangles
from .tmem import TensorMemory, observed
from .wgmma_layout import Descriptor, descriptor_chunks

__all__ = ["decode_smem_descriptor", "per_thread", "d_cells", "d_place", "record",
           "tmem_operand", "check_ldst", "smem_operand"]

#: the descriptor's swizzle mode field (bits 61-63) -> the swizzle span in bytes
_SWIZZLE = {0: 0, 2: 128, 4: 64, 6: 32}


def decode_smem_descriptor(desc: int) -> Descriptor:
    """The fields of a 64-bit sm_100 shared-memory descriptor (PTX ISA 9.7.16.4.1,
    Table 40) as a :class:`hardware.simt.wgmma.Descriptor` (byte quantities); ValueError
    for the forms this interpreter does not take or the ISA calls invalid. The base
    offset applies to the swizzled layouts only and reads 0 without swizzling (Triton
    fills it from the address whatever the mode)."""
    d = int(desc) & 0xFFFFFFFFFFFFFFFF
    if (d >> 46) & 7 != 1:
        raise ValueError(f"matrix descriptor {d:#x}: bits 46-48 must hold the constant "
                         f"0b001, not {(d >> 46) & 7:#05b}")
    if (d >> 52) & 1:
        raise ValueError(f"matrix descriptor {d:#x}: the absolute leading-dimension "
                         "address mode (bit 52) exists on sm_103a only")
    mode = (d >> 61) & 7
    if mode == 1:
        raise ValueError(f"matrix descriptor {d:#x}: 128-byte swizzling with 32-byte "
                         "atoms (mode 1) is not supported")
    if mode not in _SWIZZLE:
        raise ValueError(f"matrix descriptor {d:#x}: swizzle mode {mode} is invalid")
    return Descriptor(start=(d & 0x3FFF) << 4, lbo=((d >> 16) & 0x3FFF) << 4,
                      sbo=((d >> 32) & 0x3FFF) << 4,
                      base_offset=(d >> 49) & 7 if mode else 0, swizzle=_SWIZZLE[mode])


def d_cells(st: TensorMemory, inst: Instruction, t: int, blk: int, taddr: int,
            n: int) -> tuple:
    """The (lanes, columns) of an M = 128 D at ``taddr``, checked allocated and free of
    outstanding tcgen05.ld/st."""
    lane0, col0 = taddr >> 16, taddr & 0xFFFF
    if lane0 != 0:
        st.fail(t, inst, f"d-tmem {taddr:#x} has lane {lane0}; D of M = 128 starts at lane "
                "0 (data path layout D, alignment 0)")
    cells = ((0, 128), (col0, col0 + n))
    st.check_cells(blk, cells[0], cells[1], t, inst, "tcgen05.mma D")
    check_ldst(st, blk, cells, t, inst)
    return cells


def record(st: TensorMemory, blk: int, t: int, cells: tuple, inst: Instruction,
           **extra: Any) -> None:
    """Make an asynchronous operation of thread ``t`` on ``cells`` pending (until a
    commit's completion is seen); an earlier one of the thread on the same cells whose
    completion was seen is subsumed."""
    st.pending = [r for r in st.pending if not (
        r["block"] == blk and r["thread"] == t and r["cols"] == cells[1]
        and r["lanes"] == cells[0] and observed(st, r, [t]))]
    st.pending.append({"block": blk, "lanes": cells[0], "cols": cells[1],
                       "line": inst.line, "thread": t, "mbar": None, **extra})


def d_place(st: TensorMemory, inst: Instruction, t: int, blk: int, taddr: int, m: int,
            n: int, ws: bool = False) -> tuple:
    """(lane, column) arrays (M, N) of a D of ``m`` rows at ``taddr`` in its data path
    layout (:mod:`.tcgen05_layouts`) and the rectangles that cover it, each checked
    allocated and free of outstanding tcgen05.ld/st."""
    lane0, col0 = taddr >> 16, taddr & 0xFFFF
    aligns = LAYOUTS[(m, ws)][1]
    if lane0 not in aligns:
        st.fail(t, inst, f"d-tmem {taddr:#x} has lane {lane0}; D of M = {m}"
                f"{' (.ws)' if ws else ''} starts at lane "
                f"{' or '.join(map(str, aligns))} ({layout_name(m, ws)}, lane alignment)")
    lane, col = d_layout(m, n, ws, lane0, col0)
    rects = rectangles(lane, col)
    for cells in rects:
        st.check_cells(blk, cells[0], cells[1], t, inst, "tcgen05.mma D")
        check_ldst(st, blk, cells, t, inst)
    return lane, col, rects


def tmem_operand(st: TensorMemory, inst: Instruction, t: int, blk: int, taddr: int, k: int,
                 ebytes: int, trans: bool, m: int = 128, lane0: int = 0) -> np.ndarray:
    """The (M, K) codes of A in Tensor Memory: row i in the lane of D's layout (lane i
    for M = 128, layout F's for M = 64 with D's alignment ``lane0``), the K elements
    packed along the columns from ``taddr``, 4 / ebytes to a 32-bit cell, the lowest bits
    first."""
    where = st.wave.location(t, inst)
    if trans:
        raise ExecutionError(f"{where}: A in Tensor Memory cannot be transposed "
                             "(instruction descriptor bit 15)")
    alane, col0 = taddr >> 16, taddr & 0xFFFF
    if alane != lane0:
        raise ExecutionError(f"{where}: a-tmem {taddr:#x} has lane {alane}; A of M = {m} "
                             f"starts at lane {lane0}" + (" (D's lane alignment; PTX ISA "
                             "9.7.16.10.5: layout F uses the same alignment for A and D)"
                             if m == 64 else ""))
    ncols = k * ebytes // 4
    lanes = a_lanes(m, lane0)
    rects = rectangles(lanes[:, None], np.full((m, 1), col0))
    for (l0, l1), _ in rects:
        cells = ((l0, l1), (col0, col0 + ncols))
        st.check_cells(blk, cells[0], cells[1], t, inst, "tcgen05.mma A")
        check_ldst(st, blk, cells, t, inst, what_op="reads A from")
    for rec in st.pending:
        if rec["block"] == blk and rec["cols"][0] < col0 + ncols and \
                col0 < rec["cols"][1] and rec["thread"] != t and any(
                    rec["lanes"][0] < l1 and l0 < rec["lanes"][1] for (l0, l1), _ in rects):
            st.fail(t, inst, f"race: tcgen05.mma reads A from Tensor Memory columns "
                    f"{col0}..{col0 + ncols - 1} that the tcgen05.mma on line "
                    f"{rec['line']} of another thread writes")
    st.read(blk, lanes[:, None], np.arange(col0, col0 + ncols)[None, :], t, inst,
            "tcgen05.mma A")
    words = np.ascontiguousarray(st.cells[blk][lanes][:, col0:col0 + ncols])
    return words.view(f"<u{ebytes}").reshape(m, k).astype(np.uint32)


def check_ldst(st: TensorMemory, blk: int, cells: tuple, t: int, inst: Instruction,
                what_op: str = "writes", who: str = "tcgen05.mma") -> None:
    """An mma (or ``who``) that writes (or reads A or scale factors from) cells of an
    outstanding tcgen05.ld (only writes conflict with those) or tcgen05.st is a race."""
    books = ((st.loads, "read by", "wait::ld"), (st.stores, "written by", "wait::st"))
    for book, what, wait in books if what_op == "writes" else books[1:]:
        for thread, recs in book.items():
            for rblk, lanes, cols, line in recs:
                if rblk == blk and lanes[0] < cells[0][1] and cells[0][0] < lanes[1] and \
                        cols[0] < cells[1][1] and cells[1][0] < cols[1]:
                    st.fail(t, inst, f"race: {who} {what_op} Tensor Memory columns "
                            f"{cols[0]}..{cols[1] - 1} {what} the tcgen05."
                            f"{'ld' if wait == 'wait::ld' else 'st'} on line {line} of "
                            f"{st.wave.location(thread, None)}, which has not executed "
                            f"tcgen05.{wait} since")


def smem_operand(ctx: Any, inst: Instruction, t: int, desc: int, rows: int, k: int, ebytes: int,
             mn_major: bool, what: str) -> np.ndarray:
    """The (rows, K) element codes of a shared-memory operand of thread ``t``'s CTA."""
    where = ctx.location(t, inst)
    try:
        d = decode_smem_descriptor(desc)
    except ValueError as e:
        raise ExecutionError(f"{where}: {what}: {e} (PTX ISA 9.7.16.4.1)") from None
    try:
        c = descriptor_chunks(d, desc, rows, k * ebytes, ebytes, mn_major, ctx.smem_size)
    except ValueError as e:
        raise ExecutionError(f"{where}: {what}: {e}") from None
    off = int(ctx.sbase[t]) + c
    if ctx.tools:
        async_read(ctx, np.full(off.shape, t), off, 16, inst,
                   f"tcgen05.mma {what} operand read")
    data = ctx.smem[off[:, None] + np.arange(16)]
    elem = data.reshape(-1, 16 // ebytes, ebytes).copy().view(f"<u{ebytes}")[..., 0]
    if not mn_major:
        return elem.reshape(rows, k).astype(np.uint32)
    per = 16 // ebytes
    e = elem.reshape(rows // per, k, per)
    return np.transpose(e, (0, 2, 1)).reshape(rows, k).astype(np.uint32)
