"""Attention over a paged KV cache, reading K/V page by page through each sequence's
block table (Kwon et al. 2023, section 4.1, "PagedAttention": for each logical block,
look up the block table, find the physical block, read it).

The schedule is FlashAttention-2's (Dao 2023, Algorithm 1) with key tile = page: for
each query tile, for each logical block ``i`` of the sequence in order, the scores of
the page's filled slots (:func:`refimpl.attention.scores.scores`) and one
:func:`refimpl.attention.online.online_block_update`; then
:func:`refimpl.attention.online.finalize`. The key tiles are exactly the tiles
``flash_v2`` uses with ``B_c = block_size``, and a (query tile, page) pair hidden by the
mask is skipped as ``flash_v2`` skips it, so the result equals
``flash_v2(q, K, V, block=(block_q, block_size))`` on the gathered K/V bit for bit,
including rows with a ``+inf`` score (NaN output, LSE ``+inf``, other rows unaffected:
the convention of :mod:`refimpl.attention.reference`).
"""
from __future__ import annotations

import dataclasses
from typing import Hashable, Optional, Sequence

import numpy as np
from numpy.typing import ArrayLike

from refimpl.attention.mask import MaskOptions, as_mask, mask_keywords
from refimpl.attention.online import OnlineState, finalize, online_block_update
from refimpl.attention.problem import prepare
from refimpl.attention.result import AttentionResult
from refimpl.attention.scores import scores
from refimpl.attention.stats import ScheduleStats, forward_working_set
from refimpl.attention.tiles import DEFAULT_BLOCK
from refimpl.kvcache.cache import PagedKVCache
from refimpl.validation import check_bool, check_positive_int

__all__ = ["paged_attention"]


def _page_f32(page: np.ndarray, seq_id: Hashable, start: int, name: str) -> np.ndarray:
    """A page's filled slots as float32, refusing what ``prepare`` refuses for K/V:
    non-finite values and float64 (or wider) values that are not float32 values."""
    bad = ~np.isfinite(page)
    if bad.any():
        h, t, d = (int(i) for i in np.argwhere(bad)[0])
        raise ValueError(f"{name} of sequence {seq_id!r} holds a non-finite value at "
                         f"token {start + t}, head {h}, lane {d}")
    out = page.astype(np.float32)
    # float64 and wider (longdouble) storage must hold float32 values
    if page.dtype.itemsize > 4 and not np.array_equal(out.astype(page.dtype), page):
        h, t, d = (int(i) for i in np.argwhere(out.astype(page.dtype) != page)[0])
        raise ValueError(f"{name} of sequence {seq_id!r} holds a value that is not a "
                         f"float32 value at token {start + t}, head {h}, lane {d}")
    return out


@mask_keywords(exclude=("key_padding_mask", "query_padding_mask"))
def paged_attention(
    q: ArrayLike,
    cache: PagedKVCache,
    seq_ids: Sequence[Hashable],
    *,
    block_q: int = DEFAULT_BLOCK[0],
    mask: Optional[MaskOptions] = None,
    return_lse: bool = True,
) -> AttentionResult:
    """Attention of each sequence's queries over its cached K/V, read through the page
    table.

    Args:
        q: (B, Hq, Sq, D) float32 values, ``B = len(seq_ids)``; ``D`` the cache's head
            dim; ``Hq`` a multiple of its KV heads (GQA/MQA). Decode: ``Sq = 1``.
            With ``"bottom_right"`` alignment, query row ``i`` of sequence ``b`` is at
            key position ``i + length(b) - Sq`` (its last ``Sq`` tokens).
        cache: the paged KV cache (K/V must hold finite float32 values).
        seq_ids: the sequences, one per batch entry of ``q``.
        block_q: query tile ``B_r`` (as ``flash_v2``'s ``block[0]``, default 128).
        mask: the masking options, a :class:`refimpl.attention.MaskOptions` (its
            fields are described there), or None for none; each field but the two
            padding masks is also a keyword of this function
            (:func:`refimpl.attention.mask.mask_keywords`), not together with ``mask``.
            ``alibi_slopes`` of shape (Hq,) or (B, Hq). Padding masks do not apply (the
            page table defines the keys): a ``mask`` holding one is refused.
        return_lse: also return the natural LSE (default True, as ``flash_v2``).

    Returns:
        :class:`refimpl.attention.AttentionResult`: ``(out, lse, stats)`` or
        ``(out, stats)``: out (B, Hq, Sq, D) and lse (B, Hq, Sq) float32, bit-equal to
        ``flash_v2`` per sequence with ``block=(block_q, cache.block_size)``; stats
        count elements moved per (sequence, query head) instance, K and V read page by
        page.

    Raises:
        TypeError: a wrong type (an option, ``mask``, ``return_lse``).
        ValueError: shapes, option values, padding masks, non-float32 K/V values.
        (and whatever :meth:`PagedKVCache.block_table` raises for an unknown or freed
        sequence id).
    """
    mask = as_mask(mask)
    if mask.key_padding_mask is not None or mask.query_padding_mask is not None:
        raise ValueError("paged_attention takes no padding masks: the page table defines "
                         "each sequence's keys")
    return_lse = check_bool("return_lse", return_lse)
    qa = np.asarray(q)
    if qa.ndim != 4 or qa.shape[0] != len(seq_ids):
        raise ValueError(f"q must have shape (len(seq_ids)={len(seq_ids)}, Hq, Sq, D), "
                         f"got {qa.shape}")
    block_q = check_positive_int("block_q", block_q)
    seqs = list(seq_ids)
    tables = [cache.block_table(s) for s in seqs]  # unknown/freed ids fail here
    lengths = [cache.length(s) for s in seqs]
    b_n, hq, sq, d = qa.shape
    hkv, dk, bs = cache.num_kv_heads, cache.head_dim, cache.block_size
    if d != dk:
        raise ValueError(f"q's head dim ({d}) must equal the cache's ({dk})")
    slopes = mask.alibi_slopes
    if slopes is not None:
        if slopes.shape not in ((hq,), (b_n, hq)):
            raise ValueError(f"alibi_slopes must have shape ({hq},) or ({b_n}, {hq}), "
                             f"got {slopes.shape}")
    out = np.zeros((b_n, hq, sq, dk), np.float32)
    lse = np.full((b_n, hq, sq), -np.inf, np.float32)
    stats = ScheduleStats()
    stub = np.zeros((1, hkv, 1, dk), np.float32)
    for b, (sid, table, length) in enumerate(zip(seqs, tables, lengths)):
        # validate q and the options exactly as flash_v2 does, on a one-key stand-in
        # for K/V, then set the alignment offset of the real key count
        entry = mask if slopes is None or slopes.ndim == 1 else dataclasses.replace(
            mask, alibi_slopes=slopes[b:b + 1])
        prob = prepare(qa[b:b + 1], stub, stub, mask=entry)
        offset = 0 if mask.causal_alignment == "top_left" else length - sq
        prob = dataclasses.replace(prob, offset=np.array([offset], np.int64))
        group = hq // hkv
        pages = []  # (key positions, physical block, filled slots) of each page
        for i, block in enumerate(table):
            c = min(bs, length - i * bs)
            pages.append((np.arange(i * bs, i * bs + c), block, c))
        if sq:
            # flash_v2's on-chip working set
            stats.sram(forward_working_set(min(block_q, sq), min(bs, length), d, d))
        for r0 in range(0, sq, block_q):
            rows = np.arange(r0, min(sq, r0 + block_q))
            q_i = prob.q[:, :, rows]
            stats.read("Q", hq * rows.size * d)
            state = OnlineState.initial((1, hq, rows.size), dk)
            for cols, block, c in pages:
                if not prob.visible(rows, cols).any():
                    stats.blocks_skipped += hq
                    continue
                # look up the page table, find the physical block, read its slots
                kp, vp = cache.page(block)
                k = _page_f32(kp[:, :c], sid, int(cols[0]), "K")
                v = _page_f32(vp[:, :c], sid, int(cols[0]), "V")
                if group > 1:
                    k, v = np.repeat(k, group, axis=0), np.repeat(v, group, axis=0)
                s, _, _ = scores(prob, q_i, k[None], rows, cols)
                state = online_block_update(state, s, v[None])
                stats.blocks_computed += hq
                stats.read("K", hq * c * d)
                stats.read("V", hq * c * d)
            o, l_ = finalize(state)
            out[b][:, rows] = o[0]
            lse[b][:, rows] = l_[0]
            stats.write("O", hq * rows.size * d)
            stats.write("LSE", hq * rows.size)
    return AttentionResult(out, lse if return_lse else None, stats)
