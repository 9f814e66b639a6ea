"""FlashAttention-2 forward schedule (Dao 2023, arXiv 2307.08691, Algorithm 1, section 3.1).

Per (batch, query head) instance: OUTER loop over query tiles i (one thread block each,
independent), INNER loop over key/value tiles j in increasing key order; ``m``, ``l`` and
the output accumulator stay on chip; normalisation is delayed to the end; only
``O_i`` and ``L_i = m + ln l`` are written back.

Per tile the arithmetic is exactly, in this order:

1. ``S = scores(Q_i, K_j)``: :func:`refimpl.attention.scores.scores` (correctly rounded
   ``Q_i K_j^T``, ``fl32(. * fl32(scale))``, softcap, masks ``-inf``, ALiBi), each element
   a function of its own row and key only;
2. :func:`refimpl.attention.online.online_block_update` with ``S`` and ``V_j``;

and after the last tile :func:`refimpl.attention.online.finalize`. Key tiles are
``[k0 + j B_c, k0 + (j + 1) B_c)`` clipped to the key range, so a schedule that reads the
same key tiles in the same order (for example block by block from a paged K/V cache with
page size ``B_c``) and calls the same two functions reproduces the bytes exactly.

Tile skipping: a (query tile, key tile) pair that the mask hides entirely (for causal
attention the tiles above the diagonal; for a window the tiles outside the band; tiles of
padding only) is not loaded or computed and is counted in ``blocks_skipped``. Skipping
changes no byte (see :mod:`refimpl.attention.online`).

B_r has no effect on the values (every step is row-local); B_c does (it sets the
granularity of the online rescaling).

Two implementations, tested against each other byte for byte: a plain one with the
paper's two loops, and a fast one that runs groups of query tiles in lock-step per key
tile. Reuse: :func:`flash_v2_core` runs the forward on a prepared problem and a key
range; :func:`computed_tiles` gives the skip decisions.
"""
from __future__ import annotations

from typing import Optional, Union

import numpy as np
from numpy.typing import ArrayLike

from refimpl.attention.online import OnlineState, finalize, online_block_update, online_step
from refimpl.attention.problem import Problem, prepare
from refimpl.attention.scores import scores, scores_from_product
from refimpl.attention.stats import ScheduleStats, forward_working_set
from refimpl.matmul.exact import exact_col_norms, exact_product_fp32, exact_row_bounds

__all__ = ["flash_v2", "flash_v2_core", "computed_tiles", "tile_ranges", "check_block",
           "DEFAULT_BLOCK"]

DEFAULT_BLOCK = (128, 128)


def check_block(block: object) -> tuple[int, int]:
    """Validate ``block = (B_r, B_c)``."""
    try:
        br, bc = block  # type: ignore[misc]
    except (TypeError, ValueError):
        raise ValueError(f"block must be a pair (B_r, B_c), got {block!r}") from None
    for name, x in (("B_r", br), ("B_c", bc)):
        if not isinstance(x, (int, np.integer)) or isinstance(x, bool) or x < 1:
            raise ValueError(f"block {name} must be a positive integer, got {x!r}")
    return int(br), int(bc)


def tile_ranges(n: int, size: int, start: int = 0) -> list[np.ndarray]:
    """Index arrays of consecutive tiles of ``size`` covering ``[start, n)``."""
    return [np.arange(a, min(n, a + size)) for a in range(start, n, size)]


def computed_tiles(
    prob: Problem, qtiles: list[np.ndarray], ktiles: list[np.ndarray]
) -> np.ndarray:
    """bool (B, T_r, T_c): which (batch entry, query tile, key tile) pairs some visible
    (row, key) pair makes the schedule compute; the rest are skipped."""
    b, sq = prob.q.shape[0], prob.q.shape[2]
    comp = np.ones((b, len(qtiles), len(ktiles)), dtype=bool)
    if prob.has_mask:
        for j, cols in enumerate(ktiles):
            vis = prob.visible(np.arange(sq), cols).any(axis=2)  # (B, Sq)
            for i, rows in enumerate(qtiles):
                comp[:, i, j] = vis[:, rows].any(axis=1)
    return comp


def forward_stats(
    prob: Problem, qtiles: list[np.ndarray], ktiles: list[np.ndarray], comp: np.ndarray,
    r: int, c: int,
) -> ScheduleStats:
    """HBM traffic as FlashAttention-2 counts it (elements; one Q read per query tile, K
    and V per computed tile pair, O and LSE written once) and the on-chip working set
    of an ``r``-row query tile and a ``c``-key tile (none without query tiles)."""
    b, hq, _, _, _, d = prob.shape
    dv = prob.v.shape[-1]
    st = ScheduleStats()
    if qtiles:
        st.sram(forward_working_set(r, c, d, dv))
    for i, rows in enumerate(qtiles):
        st.read("Q", b * hq * rows.size * d)
        st.write("O", b * hq * rows.size * dv)
        st.write("LSE", b * hq * rows.size)
        for j, cols in enumerate(ktiles):
            n = int(comp[:, i, j].sum()) * hq
            st.blocks_computed += n
            st.blocks_skipped += b * hq - n
            st.read("K", n * cols.size * d)
            st.read("V", n * cols.size * dv)
    return st


def flash_v2_core(
    prob: Problem,
    block: tuple[int, int],
    key_range: Optional[tuple[int, int]] = None,
    implementation: str = "fast",
) -> tuple[np.ndarray, np.ndarray, ScheduleStats]:
    """FlashAttention-2 forward on the flattened problem over keys ``key_range`` (default
    all): returns out (B, Hq, Sq, Dv), LSE (B, Hq, Sq) (both float32) and the stats."""
    br, bc = check_block(block)
    b, hq, _, sq, sk, d = prob.shape
    dv = prob.v.shape[-1]
    k0, k1 = (0, sk) if key_range is None else key_range
    kq, vq = prob.kv_for_q_heads()
    qtiles = tile_ranges(sq, br)
    ktiles = tile_ranges(k1, bc, k0)
    comp = computed_tiles(prob, qtiles, ktiles)
    st = forward_stats(prob, qtiles, ktiles, comp, min(br, sq), min(bc, max(0, k1 - k0)))
    if implementation == "plain":
        out, lse = _plain(prob, kq, vq, qtiles, ktiles, comp)
    elif implementation == "fast":
        out, lse = _fast(prob, kq, vq, qtiles, ktiles, comp, br)
    else:
        raise ValueError(f"implementation must be 'plain' or 'fast', got {implementation!r}")
    return out, lse, st


def _plain(prob, kq, vq, qtiles, ktiles, comp):
    """The paper's loops, one batch entry and query tile at a time (all heads together)."""
    b, hq, _, sq, _, _ = prob.shape
    dv = prob.v.shape[-1]
    out = np.zeros((b, hq, sq, dv), dtype=np.float32)
    lse = np.full((b, hq, sq), -np.inf, dtype=np.float32)
    for bi in range(b):
        sub = _batch_entry(prob, bi)
        for i, rows in enumerate(qtiles):  # parallel over thread blocks on a GPU
            state = OnlineState.initial((1, hq, rows.size), dv)
            q_i = prob.q[bi:bi + 1, :, rows]
            for j, cols in enumerate(ktiles):
                if not comp[bi, i, j]:
                    continue
                s, _, _ = scores(sub, q_i, kq[bi:bi + 1, :, cols], rows, cols)
                state = online_block_update(state, s, vq[bi:bi + 1, :, cols])
            o, l_ = finalize(state)
            out[bi][:, rows] = o[0]
            lse[bi][:, rows] = l_[0]
    return out, lse


def _batch_entry(prob: Problem, bi: int) -> Problem:
    sl = slice(bi, bi + 1)
    return Problem(
        q=prob.q[sl], k=prob.k[sl], v=prob.v[sl], batch_shape=(1,), scale=prob.scale,
        causal=prob.causal, alignment=prob.alignment, window=prob.window,
        softcap=prob.softcap, slopes=None if prob.slopes is None else prob.slopes[sl],
        key_valid=None if prob.key_valid is None else prob.key_valid[sl],
        query_valid=None if prob.query_valid is None else prob.query_valid[sl],
        offset=prob.offset[sl],
    )


#: query rows run in lock-step by the fast implementation (bounds its temporaries to
#: about this many rows times B_c; any grouping gives the same bytes)
_LOCKSTEP_ROWS = 1024


def _fast(prob, kq, vq, qtiles, ktiles, comp, br):
    """Groups of query tiles in lock-step per key tile; rows of tiles that skip a key tile
    keep their state. Same bytes as :func:`_plain` (every step is row-local).

    The correctly rounded products use operands prepared once per query group and key
    tile (float64 copies and the norms of the product screen, see
    :func:`refimpl.matmul.exact.exact_product_fp32`), never more than a group of rows
    and a tile at a time. They are formed transposed, ``S^T = K_j Q^T`` and
    ``(P V_j)^T = V_j^T P^T``, so that the score tile and the accumulator lie key-major
    and feature-major in memory: the row operations of the online softmax (row max,
    ``s - m``, ``alpha * acc``) then run along contiguous memory. A dot product's
    correct rounding does not depend on the orientation: the same bytes as
    :func:`refimpl.attention.products.matmul_f32`."""
    b, hq, _, sq, _, _ = prob.shape
    dv = prob.v.shape[-1]
    out = np.zeros((b, hq, sq, dv), dtype=np.float32)
    lse = np.full((b, hq, sq), -np.inf, dtype=np.float32)
    if not ktiles or sq == 0:
        return out, lse
    per = max(1, _LOCKSTEP_ROWS // br)
    for g0 in range(0, len(qtiles), per):
        group = qtiles[g0:g0 + per]
        r0, r1 = int(group[0][0]), int(group[-1][-1]) + 1
        q64 = prob.q[:, :, r0:r1].astype(np.float64)  # this group's query rows
        q_norms = exact_col_norms(np.swapaxes(q64, -1, -2))  # columns of Q^T
        state = OnlineState(
            np.full((b, hq, r1 - r0), -np.inf, dtype=np.float32),
            np.zeros((b, hq, r1 - r0), dtype=np.float32),
            np.swapaxes(np.zeros((b, hq, dv, r1 - r0), dtype=np.float32), -1, -2),
        )
        tile_of_row = (np.arange(r0, r1) // br) - g0
        for j, cols in enumerate(ktiles):
            comp_j = comp[:, g0:g0 + per, j]  # (B, tiles in group)
            live = np.flatnonzero(comp_j.any(axis=0))
            if live.size == 0:
                continue
            a0, a1 = int(group[live[0]][0]), int(group[live[-1]][-1]) + 1
            rows = np.arange(a0, a1)
            c0, c1 = int(cols[0]), int(cols[-1]) + 1
            k_j = kq[:, :, c0:c1].astype(np.float64)
            qk_t = exact_product_fp32(k_j, np.swapaxes(q64[:, :, a0 - r0:a1 - r0], -1, -2),
                                      exact_row_bounds(k_j), q_norms[:, :, a0 - r0:a1 - r0])
            s, _, _ = scores_from_product(prob, np.swapaxes(qk_t, -1, -2), rows, cols)
            v_t = np.swapaxes(vq[:, :, c0:c1].astype(np.float64), -1, -2)  # (B, H, Dv, c)
            v_rows = exact_row_bounds(v_t)

            def product(p, p64, v_t=v_t, v_rows=v_rows):
                p_t = np.swapaxes(p64, -1, -2)  # (B, H, c, r)
                pv_t = exact_product_fp32(v_t, p_t, v_rows, exact_col_norms(p_t))
                return np.swapaxes(pv_t, -1, -2)

            sl = slice(a0 - r0, a1 - r0)
            sub = OnlineState(state.m[:, :, sl], state.l[:, :, sl], state.acc[:, :, sl])
            keep = comp_j[:, tile_of_row[sl]]  # (B, rows)
            everywhere = bool(keep.all())
            new = online_step(sub, s, product, out=sub if everywhere else None)
            if not everywhere:
                new = sub.where(keep[:, None, :], new)
                state.m[:, :, sl] = new.m
                state.l[:, :, sl] = new.l
                state.acc[:, :, sl] = new.acc
        out[:, :, r0:r1], lse[:, :, r0:r1] = finalize(state)
    return out, lse


def flash_v2(
    q: ArrayLike,
    k: ArrayLike,
    v: ArrayLike,
    *,
    block: tuple[int, int] = DEFAULT_BLOCK,
    scale: Optional[float] = None,
    causal: bool = False,
    causal_alignment: str = "bottom_right",
    window: Optional[tuple[Optional[int], Optional[int]]] = None,
    softcap: Optional[float] = None,
    alibi_slopes: Optional[ArrayLike] = None,
    key_padding_mask: Optional[ArrayLike] = None,
    query_padding_mask: Optional[ArrayLike] = None,
    return_lse: bool = True,
    implementation: str = "fast",
) -> Union[tuple[np.ndarray, np.ndarray, ScheduleStats], tuple[np.ndarray, ScheduleStats]]:
    """FlashAttention-2 forward (see the module docstring for the exact arithmetic).

    Args:
        q, k, v and the masking options: as :func:`refimpl.attention.attention`.
        block: ``(B_r, B_c)`` query and key tile sizes (default 128 x 128).
        return_lse: return the natural LSE the algorithm writes for the backward pass
            (default True).
        implementation: ``"fast"`` (default) or ``"plain"``; same bytes.
    Returns:
        ``(out, lse, stats)`` or, without ``return_lse``, ``(out, stats)``. Stats per
        instance: Q_i read once per query tile; K_j and V_j read once per computed tile
        pair; O_i and LSE_i written once.
    """
    prob = prepare(
        q, k, v, scale=scale, causal=causal, causal_alignment=causal_alignment,
        window=window, softcap=softcap, alibi_slopes=alibi_slopes,
        key_padding_mask=key_padding_mask, query_padding_mask=query_padding_mask,
    )
    out, lse, st = flash_v2_core(prob, block, implementation=implementation)
    if return_lse:
        return prob.restore(out), prob.restore(lse), st
    return prob.restore(out), st
