"""Split-KV attention (Flash-Decoding) and the merge of partial attention states.

The key range is cut into ``num_splits`` parts on key-tile boundaries; each part runs the
FlashAttention-2 forward (:mod:`refimpl.attention.flash_v2`, masks at absolute key
positions) and writes a partial output ``O_s`` (normalised over its part) and ``L_s``
(natural LSE of its part). The parts are then combined:
``L = logsumexp_s L_s``, ``O = sum_s e^(L_s - L) O_s``. An empty part (no keys, or all
masked) has ``L_s = -inf`` and weight 0. The order of the parts matters only through
rounding.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence, Union

import numpy as np
from numpy.typing import ArrayLike

from refimpl import elementary
from refimpl.attention.flash_v2 import flash_v2_core
from refimpl.attention.mask import MaskOptions, mask_keywords
from refimpl.attention.problem import prepare
from refimpl.attention.result import AttentionResult
from refimpl.attention.stats import ScheduleStats
from refimpl.attention.tiles import DEFAULT_BLOCK, check_block
from refimpl.softmax import exp_diff
from refimpl.summation import fold_sum
from refimpl.validation import as_float64, check_bool, check_positive_int

__all__ = ["split_kv", "merge_attention_states", "split_ranges", "MAX_SPLITS_BEYOND_KEYS"]

#: the most parts :func:`split_ranges` makes when there are fewer keys than parts
MAX_SPLITS_BEYOND_KEYS = 128


def split_ranges(sk: int, block_c: int, num_splits: int) -> list[tuple[int, int]]:
    """Key ranges of the parts: ``ceil(ceil(Sk / B_c) / num_splits)`` key tiles each, in
    order; trailing parts may be empty ``(Sk, Sk)``.

    ``num_splits`` is at most ``max(Sk, MAX_SPLITS_BEYOND_KEYS)`` (128): a fixed split
    count may exceed the keys of a short sequence (the extra parts are empty), but every
    part costs a partial result and a merge term, so counts beyond both the keys and 128
    are refused. They are not clamped: fewer parts would change the merge's folding
    order, hence the bytes.

    Raises:
        TypeError: ``num_splits`` is not an int.
        ValueError: ``num_splits < 1`` or ``num_splits > max(Sk, 128)``.
    """
    num_splits = check_positive_int("num_splits", num_splits)
    limit = max(sk, MAX_SPLITS_BEYOND_KEYS)
    if num_splits > limit:
        raise ValueError(
            f"num_splits = {num_splits} is more than {sk} keys can fill: at most "
            f"max(Sk, {MAX_SPLITS_BEYOND_KEYS}) = {limit} parts")
    tiles = math.ceil(sk / block_c)
    per = max(1, math.ceil(tiles / num_splits))
    out = []
    for s in range(num_splits):
        a = min(sk, s * per * block_c)
        out.append((a, min(sk, (s + 1) * per * block_c)))
    return out


def merge_attention_states(
    outs: Union[Sequence[ArrayLike], ArrayLike], lses: Union[Sequence[ArrayLike], ArrayLike]
) -> tuple[np.ndarray, np.ndarray]:
    """Combine partial attention results over disjoint key sets.

    With ``M = max_s L_s``, ``w_s = e^(L_s - M)`` (0 for ``L_s = -inf``),
    ``Z = fold_sum_s w_s``: ``O = fl32(fold_sum_s((w_s / Z) O_s))`` and
    ``L = fl32(M + ln Z)``, in float64 with the deterministic exp/log. All parts empty:
    ``O = 0``, ``L = -inf``. A row where some part has LSE NaN gives ``O`` NaN and
    ``L`` NaN; otherwise, where some part has LSE ``+inf`` (it saw a ``+inf`` score),
    ``O`` NaN and ``L = +inf`` (the convention of
    :func:`refimpl.attention.attention`); other rows are not affected.

    Args:
        outs: (S, ..., Sq, Dv) or a sequence of S arrays (..., Sq, Dv).
        lses: (S, ..., Sq) natural LSEs.
    Returns:
        (out, lse) float32.
    """
    if not isinstance(outs, np.ndarray) and len(outs) == 0:
        raise ValueError("outs and lses must hold at least one part (or be arrays with a "
                         "leading axis of length 0)")
    o = as_float64(np.stack([as_float64(x, "outs[i]") for x in outs])
                   if not isinstance(outs, np.ndarray) else outs, "outs")
    l_ = as_float64(np.stack([as_float64(x, "lses[i]") for x in lses])
                    if not isinstance(lses, np.ndarray) else lses, "lses")
    if o.ndim < 2 or l_.shape != o.shape[:-1]:
        raise ValueError(
            f"lses must have the shape of outs without the last axis: outs {o.shape}, "
            f"lses {l_.shape}"
        )
    if o.shape[0] == 0:
        return (np.zeros(o.shape[1:], dtype=np.float32),
                np.full(l_.shape[1:], -np.inf, dtype=np.float32))
    # a part that saw a +inf (NaN) score has LSE +inf (NaN) and NaN output: the row's
    # result is NaN with LSE +inf (NaN if any part has NaN), as in one pass over the keys
    # (np.max propagates NaN); such rows are left out of the weighted sum
    m_all = np.max(l_, axis=0)
    bad = ~(m_all < np.inf)
    if bad.any():
        l_ = np.where(bad[None], -np.inf, l_)
        o = np.where(bad[None, ..., None], 0.0, o)
    m = np.where(bad, -np.inf, m_all)
    w = exp_diff(l_, m[None])
    z = fold_sum(w, axis=0)
    pos = z > 0
    zs = np.where(pos, z, 1.0)
    out = fold_sum((w / zs[None])[..., None] * o, axis=0)
    out = np.where(pos[..., None], out, 0.0)
    lse = np.where(pos, m + elementary.log(zs), -np.inf)
    out = np.where(bad[..., None], np.nan, out)
    lse = np.where(bad, m_all, lse)
    return out.astype(np.float32), lse.astype(np.float32)


# flash_v2()'s arguments plus num_splits, repeated on purpose (the same schedule per
# key range).
@mask_keywords
def split_kv(
    q: ArrayLike, k: ArrayLike, v: ArrayLike,
    *,
    num_splits: int,
    block: tuple[int, int] = DEFAULT_BLOCK,
    mask: Optional[MaskOptions] = None,
    return_lse: bool = True,
) -> AttentionResult:
    """Flash-Decoding: FlashAttention-2 over ``num_splits`` key ranges, then
    :func:`merge_attention_states`.

    Args:
        q, k, v: as :func:`refimpl.attention.attention`.
        num_splits: number of key ranges, 1 to ``max(Sk, 128)`` (see
            :func:`split_ranges`).
        block: ``(B_r, B_c)`` of each part's FlashAttention-2 run.
        mask: the masking options, a :class:`refimpl.attention.MaskOptions` (its
            fields are described there), or None for none; each field is also a keyword
            of this function (:func:`refimpl.attention.mask.mask_keywords`), not together
            with ``mask``.
        return_lse: also return the merged natural LSE (default True).
    Returns:
        :class:`refimpl.attention.AttentionResult`: ``(out, lse, stats)`` (or
        ``(out, stats)``). Stats: the parts' counts, plus each part writing
        ``O_partial``/``LSE_partial`` and the merge reading them and writing O and LSE.
    """
    return_lse = check_bool("return_lse", return_lse)
    br, bc = check_block(block)
    prob = prepare(q, k, v, mask=mask)
    b, hq, _, sq, sk, _ = prob.shape
    dv = prob.v.shape[-1]
    st = ScheduleStats()
    outs, lses = [], []
    for rng_ in split_ranges(sk, bc, num_splits):
        o_s, l_s, st_s = flash_v2_core(prob, (br, bc), key_range=rng_)
        # a part writes its partial results, not the final ones
        st_s.hbm_writes["O_partial"] = st_s.hbm_writes.pop("O", 0)
        st_s.hbm_writes["LSE_partial"] = st_s.hbm_writes.pop("LSE", 0)
        st.add(st_s)
        outs.append(o_s)
        lses.append(l_s)
    out, lse = merge_attention_states(outs, lses)
    n = b * hq * sq
    st.read("O_partial", num_splits * n * dv)
    st.read("LSE_partial", num_splits * n)
    st.write("O", n * dv)
    st.write("LSE", n)
    return AttentionResult(prob.restore(out), prob.restore(lse) if return_lse else None, st)
