"""FlashAttention (V1) forward schedule: Dao et al. 2022, arXiv 2205.14135, Algorithm 1
(with the masking of Algorithm 2).

Loop order as in the paper: the OUTER loop runs over key/value tiles j, the INNER loop over
query tiles i; ``O``, ``l`` and ``m`` live in HBM and make a round trip for every
(j, i) pair, and ``O_i`` is kept normalised after every step. (Some textbook accounts,
among them the source chapter this project started from, describe V1 with the query loop
outermost; that is the FlashAttention-2 order. This module follows the paper.)

Per pair (i, j), with ``fl32`` one rounding to float32 of a float64 evaluation (of the
exact value for ``e^x``: :func:`refimpl.elementary.exp_f32` of the float64 difference)
and ``e^(-inf - (-inf)) := 0``:

- ``S = scores(Q_i, K_j)`` (:func:`refimpl.attention.scores.scores`, float32)
- ``m~ = rowmax(S)``; ``P~ = fl32(e^(S - m~))``; ``l~ = fl32(fold_sum(P~))``
- ``m_new = max(m_i, m~)``; ``a = fl32(e^(m_i - m_new))``; ``b = fl32(e^(m~ - m_new))``
- ``l_new = fl32(a l_i + b l~)``
- ``O_i = fl32((l_i a O_i + b matmul_f32(P~, V_j)) / l_new)`` (0 while ``l_new = 0``)
- write ``O_i``, ``l_i = l_new``, ``m_i = m_new``

A row holding a ``+inf`` or NaN score (``m~`` not finite) enters the product with
``P~ = 0`` and its final ``O_i`` is NaN, as in :mod:`refimpl.attention.reference`.

Block sizes from on-chip memory M (elements), paper line 1: ``B_c = ceil(M / 4d)``,
``B_r = min(ceil(M / 4d), d)``. Those are asymptotic choices: the working set
``B_r d + B_r d + B_c d + B_c d + B_r B_c + 2 B_r`` (Q_i, O_i, K_j, V_j, S_ij, l_i, m_i)
can exceed M by a constant factor, so this module then halves B_r, and after it B_c,
until the working set fits (``peak_sram_elements <= M`` always holds). The HBM accesses
keep the Theta(N^2 d^2 / M) of Theorem 2.
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np
from numpy.typing import ArrayLike

from refimpl.attention.mask import MaskOptions, mask_keywords
from refimpl.attention.online import final_lse, nonfinite_rows, product_operand
from refimpl.attention.problem import prepare
from refimpl.attention.products import matmul_f32
from refimpl.attention.result import AttentionResult
from refimpl.attention.scores import scores
from refimpl.attention.stats import ScheduleStats, forward_working_set
from refimpl.attention.tiles import check_block, tile_ranges
from refimpl.softmax import exp_diff_f32
from refimpl.summation import fold_sum
from refimpl.validation import check_bool

__all__ = ["flash_v1", "v1_block_sizes"]


def v1_block_sizes(sram_elements: int, d: int, dv: Optional[int] = None) -> tuple[int, int]:
    """``(B_r, B_c)`` for on-chip memory ``sram_elements`` (paper Algorithm 1 line 1, then
    shrunk until the working set fits; see the module docstring)."""
    dv = d if dv is None else dv
    m = sram_elements
    if not isinstance(m, (int, np.integer)) or m < 1:
        raise ValueError(f"sram_elements must be a positive integer, got {m!r}")
    bc = math.ceil(m / (4 * d))
    br = min(bc, d)
    while forward_working_set(br, bc, d, dv) > m:
        if br > 1:
            br = (br + 1) // 2
        elif bc > 1:
            bc = (bc + 1) // 2
        else:
            raise ValueError(
                f"sram_elements={m} is too small for d={d}: one query row and one key "
                f"need {forward_working_set(1, 1, d, dv)} elements"
            )
    return br, bc


@mask_keywords
def flash_v1(
    q: ArrayLike,
    k: ArrayLike,
    v: ArrayLike,
    *,
    sram_elements: Optional[int] = None,
    block: Optional[tuple[int, int]] = None,
    mask: Optional[MaskOptions] = None,
    return_lse: bool = False,
) -> AttentionResult:
    """FlashAttention V1 forward (paper Algorithm 1; see the module docstring).

    Args:
        q, k, v: as :func:`refimpl.attention.attention`.
        sram_elements: on-chip memory M in elements (block sizes derived from it), or
        block: explicit ``(B_r, B_c)``. Exactly one of the two.
        mask: the masking options, a :class:`refimpl.attention.MaskOptions` (its
            fields are described there), or None for none; each field is also a keyword
            of this function (:func:`refimpl.attention.mask.mask_keywords`), not together
            with ``mask``.
        return_lse: also return the natural LSE ``fl32(m + ln l)`` of the final
            ``m`` and ``l`` in HBM (default False, so that ``out, stats = flash_v1(...)``
            unpacks as before). Algorithm 1 does not write an LSE: it is formed from
            ``l`` and ``m`` after the loops and adds no counted traffic. Special rows as
            :func:`refimpl.attention.online.finalize`: no visible key ``-inf``, a
            ``+inf`` score ``+inf``, a NaN score NaN.
    Returns:
        :class:`refimpl.attention.AttentionResult`: ``(out, stats)``, or
        ``(out, lse, stats)`` with ``return_lse``. HBM counts per instance: O, l, m
        initialised (written) once; K_j, V_j read once per key tile; Q_i, O_i, l_i, m_i
        read and O_i, l_i, m_i written once per (key tile, query tile) pair. No tile is
        skipped.
    """
    return_lse = check_bool("return_lse", return_lse)
    if (sram_elements is None) == (block is None):
        raise ValueError("give exactly one of sram_elements=M or block=(B_r, B_c)")
    prob = prepare(q, k, v, mask=mask)
    b, hq, _, sq, sk, d = prob.shape
    dv = prob.v.shape[-1]
    br, bc = v1_block_sizes(sram_elements, d, dv) if block is None else check_block(block)
    kq, vq = prob.kv_for_q_heads()
    inst = b * hq
    st = ScheduleStats()
    if sq and sk:
        st.sram(forward_working_set(min(br, sq), min(bc, sk), d, dv))
    # HBM state (line 2)
    o = np.zeros((b, hq, sq, dv), dtype=np.float32)
    l_hbm = np.zeros((b, hq, sq), dtype=np.float32)
    m_hbm = np.full((b, hq, sq), -np.inf, dtype=np.float32)
    st.write("O", inst * sq * dv)
    st.write("l", inst * sq)
    st.write("m", inst * sq)
    for cols in tile_ranges(sk, bc):  # outer loop over K/V tiles (line 5)
        k_j, v_j = kq[:, :, cols], vq[:, :, cols]
        st.read("K", inst * cols.size * d)
        st.read("V", inst * cols.size * dv)
        for rows in tile_ranges(sq, br):  # inner loop over Q tiles (line 7)
            r = rows.size
            st.read("Q", inst * r * d)
            st.read("O", inst * r * dv)
            st.read("l", inst * r)
            st.read("m", inst * r)
            st.blocks_computed += inst
            q_i = prob.q[:, :, rows]
            o_i = o[:, :, rows].astype(np.float64)
            l_i = l_hbm[:, :, rows].astype(np.float64)
            m_i = m_hbm[:, :, rows]
            s, _, _ = scores(prob, q_i, k_j, rows, cols)
            m_t = np.max(s, axis=-1)
            p_t = exp_diff_f32(s, m_t[..., None])
            l_t = fold_sum(p_t, axis=-1).astype(np.float32)
            m_new = np.maximum(m_i, m_t)
            a = exp_diff_f32(m_i, m_new).astype(np.float64)
            bb = exp_diff_f32(m_t, m_new).astype(np.float64)
            l_new = (a * l_i + bb * l_t).astype(np.float32)
            # rows holding a +inf or NaN score have NaN probabilities; they take no part
            # in the product (its error screen is per matrix, a NaN would reach other
            # rows) and come out NaN below
            pv = matmul_f32(product_operand(p_t, m_t), v_j).astype(np.float64)
            num = (l_i * a)[..., None] * o_i + bb[..., None] * pv
            pos = l_new > 0
            den = np.where(pos, l_new, 1.0).astype(np.float64)[..., None]
            o[:, :, rows] = np.where(pos[..., None], num / den, 0.0).astype(np.float32)
            l_hbm[:, :, rows] = l_new
            m_hbm[:, :, rows] = m_new
            st.write("O", inst * r * dv)
            st.write("l", inst * r)
            st.write("m", inst * r)
    # a row that saw a +inf or NaN score: NaN output (refimpl.attention.reference)
    o[nonfinite_rows(m_hbm)] = np.nan
    lse = prob.restore(final_lse(m_hbm, l_hbm)) if return_lse else None
    return AttentionResult(prob.restore(o), lse, st)
