"""``tcgen05.shift`` (sm_100a; PTX ISA 9.2, sections 9.7.16.9.3 the instruction, 9.7.16.2.3
its implicit ``.31x256b`` data movement shape, 9.7.16.6 completion)::

    tcgen05.shift.cta_group::1.down [taddr];

"Asynchronously shift down the rows of the matrix in the Tensor Memory for a warp": the
matrix is the 32 lanes from the lane of ``taddr`` (which must be a multiple of 32) by
256 bits, the 8 columns from the column of ``taddr``; its 32-byte rows 0..30 move down by
one row, to lanes 1..31 (the shape ``.31x256b``: 31 rows of 256 bits are moved). Row 31,
the last, is overwritten. What row 0 holds afterwards the ISA does not say: its cells
become undefined, and reading one (``tcgen05.ld``, an A, a D accumulated with
``enable-input-d``, scale factors) before a ``tcgen05.st``, ``tcgen05.cp`` or mma
writes it is an error naming the shift's line. One thread issues it (single-thread semantics, as ``tcgen05.mma``); the cells must
lie in one allocation of the CTA.

Completion: as ``tcgen05.mma`` and ``tcgen05.cp`` (the cells change when the instruction
issues and stay pending until a ``tcgen05.commit`` of the issuing thread and an
mbarrier wait that sees it; a ``tcgen05.ld``/``st`` of them before that is a race), and a
shift of cells of an outstanding ``tcgen05.ld`` or ``tcgen05.st``, or of cells a pending
operation of another thread writes, is a race. ``tcgen05.mma`` and ``tcgen05.cp.4x256b``
of the same thread are pipelined with it in both directions (9.7.16.6.2), so they see
each other in issue order.

Refused: ``.cta_group::2`` (the peer CTA's Tensor Memory is not modelled).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .errors import UnsupportedPtxError
from .isa.operands import Op
from .parser import Instruction
from .tcgen05_operands import check_ldst, per_thread, record
from .tmem import _cta_group, state_of, tmem_address

__all__ = ["c_shift"]


def c_shift(inst: Instruction, ctx: Any) -> Op:
    """tcgen05.shift.cta_group::1.down [taddr] (see the module docstring)."""
    parts = list(inst.parts[2:])
    _cta_group(inst)
    rest = [p for p in parts if not p.startswith("cta_group::")]
    if rest != ["down"] or len(inst.operands) != 1:
        raise UnsupportedPtxError(f"line {inst.line}: {inst.text!r}: "
                                  "tcgen05.shift.cta_group::1.down [taddr]")
    ga = tmem_address(inst.operands[0], ctx, inst)

    def fn(ix: Any, ex: Any) -> None:
        st = state_of(ctx)
        th, (av,) = per_thread(ctx, ix, [(ga, np.int64)])
        for t, a in zip(th.tolist(), av.tolist()):
            blk = int(ctx.thread_block[t])
            lane0, col0 = a >> 16, a & 0xFFFF
            if lane0 % 32:
                st.fail(t, inst, f"tcgen05.shift taddr {a:#x} has lane {lane0}, not a "
                        "multiple of 32 (PTX ISA 9.7.16.9.3)")
            cells = ((lane0, lane0 + 32), (col0, col0 + 8))
            st.check_cells(blk, cells[0], cells[1], t, inst, "tcgen05.shift")
            check_ldst(st, blk, cells, t, inst, who="tcgen05.shift")
            for rec in st.pending:
                if rec["block"] == blk and rec["thread"] != t and \
                        rec["lanes"][0] < cells[0][1] and cells[0][0] < rec["lanes"][1] and \
                        rec["cols"][0] < cells[1][1] and cells[1][0] < rec["cols"][1]:
                    st.fail(t, inst, f"race: tcgen05.shift moves Tensor Memory lanes "
                            f"{lane0}..{lane0 + 31}, columns {col0}..{col0 + 7}, which the "
                            f"{rec.get('op', 'tcgen05.mma')} on line {rec['line']} of "
                            f"another thread writes")
            block = st.cells[blk, lane0:lane0 + 32, col0:col0 + 8]
            block[1:] = block[:-1].copy()
            undef = st.undefined[blk, lane0:lane0 + 32, col0:col0 + 8]
            undef[1:] = undef[:-1].copy()
            undef[0] = inst.line
            st.shifted = True
            record(st, blk, t, cells, inst, op="tcgen05.shift",
                   what="the rows moved by the tcgen05.shift")
    return Op(inst, "alu", fn)
