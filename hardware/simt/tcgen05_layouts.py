"""Where the D matrix (and an A in Tensor Memory) of a ``tcgen05.mma`` of
``.cta_group::1`` lies in Tensor Memory: the data path layouts of PTX ISA 9.2, section
9.7.16.10.5 (the table of layouts and Figures 211-218)::

    M    .ws   organisation            layout  lane alignment of d-tmem
    128  either 4x1                    D       0
    64   no    4x1, half the lanes     F       0 or 16
    64   yes   2x2                     E       0
    32   yes   1x4                     G       0

Row m, column n of an M x N matrix at ``d-tmem`` (lane ``a``, column ``c``):

- Layout D: lane m, column c + n.
- Layout F: lane 32 (m / 16) + a + m % 16, column c + n: each warp quarter of the Tensor
  Memory holds 16 rows, in its lower (a = 0) or upper (a = 16) half; the other half is
  free for a second matrix at the other alignment. Triton's sm_100 ``tl.dot`` with
  BLOCK_M = 64 relies on exactly this: it zeroes and reads D with
  ``tcgen05.st/ld.16x32bx2`` at lane 32 w of warp w (tests/hardware/data/triton_sm100).
- Layout E (2x2): lane m + 64 h, column c + n % (N/2), h = n / (N/2): the two column halves
  of the 64 rows side by side in the lower and upper 64 lanes.
- Layout G (1x4): lane m + 32 q, column c + n % (N/4), q = n / (N/4): each column quarter
  of the 32 rows in one warp quarter.

The ISA gives E and G as figures (Figures 213, 217) and names their organisation "2x2"
and "1x4"; the placements above are those NVIDIA's CUTLASS uses for the weight-stationary
accumulator (``cute::UMMA::tmem_frg_ws``, atoms ``(64, (N/2, 2)) : (1, (128, 64))`` and
``(32, (N/4, 4)) : (1, (128, 32))`` in its DP-stride-1, column-stride-128 addressing), and
the layout D and F ones those of ``tmem_frg`` (``((16, 4), N) : ((1, 32), 128)`` for M = 64).
An A in Tensor Memory has the rows of D's layout (the ISA requires layouts F and C to use
the same lane alignment for A and D); with ``.ws`` and M < 128 its layout is not stated
(CUTLASS notes it should be "duplicated"), so such an A is refused by the caller.
"""
from __future__ import annotations

import numpy as np

__all__ = ["LAYOUTS", "layout_name", "d_layout", "a_lanes", "rectangles"]

#: (M, .ws) -> (layout letter, the lane alignments d-tmem may have)
LAYOUTS = {(128, False): ("D", (0,)), (128, True): ("D", (0,)), (64, False): ("F", (0, 16)),
           (64, True): ("E", (0,)), (32, True): ("G", (0,))}


def layout_name(m: int, ws: bool) -> str:
    """``"Layout X (PTX ISA 9.7.16.10.5)"`` for an M of ``.cta_group::1``."""
    return f"Layout {LAYOUTS[(m, ws)][0]} (PTX ISA 9.7.16.10.5)"


def d_layout(m: int, n: int, ws: bool, lane0: int, col0: int) -> tuple[np.ndarray, np.ndarray]:
    """(lane, column) arrays of shape (M, N): where row m, column n of D lies."""
    r = np.arange(m)[:, None]
    c = np.arange(n)[None, :]
    letter = LAYOUTS[(m, ws)][0]
    if letter == "D":
        lane, col = r + 0 * c, col0 + c + 0 * r
    elif letter == "F":
        lane, col = 32 * (r // 16) + lane0 + r % 16 + 0 * c, col0 + c + 0 * r
    elif letter == "E":
        lane, col = r + 64 * (c // (n // 2)), col0 + c % (n // 2) + 0 * r
    else:
        lane, col = r + 32 * (c // (n // 4)), col0 + c % (n // 4) + 0 * r
    return lane.astype(np.int64), col.astype(np.int64)


def a_lanes(m: int, lane0: int) -> np.ndarray:
    """The Tensor Memory lane of each of the M rows of an A in Tensor Memory (layouts D
    and F; the columns hold K, packed from the column of ``a-tmem``)."""
    r = np.arange(m)
    return (r if m == 128 else 32 * (r // 16) + lane0 + r % 16).astype(np.int64)


def rectangles(lane: np.ndarray, col: np.ndarray) -> list[tuple]:
    """The ((lane lo, hi), (column lo, hi)) blocks, one per warp quarter, that cover the
    cells of a layout (for allocation, race and pending-operation bookkeeping)."""
    out = []
    for q in range(4):
        sel = (lane >= 32 * q) & (lane < 32 * q + 32)
        if sel.any():
            ls, cs = lane[sel], col[sel]
            out.append(((int(ls.min()), int(ls.max()) + 1), (int(cs.min()), int(cs.max()) + 1)))
    return out
