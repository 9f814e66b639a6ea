"""Attention backward: the reference gradients and the FlashAttention-2 backward schedule.

Math (FlashAttention paper appendix B.2, Algorithm 4; FlashAttention-2 Algorithm 2):
with ``P = e^(S - L)`` recomputed from the scores and the forward's LSE ``L``,

- ``dV = P^T dO``; ``dP = dO V^T``; ``D = rowsum(dO * O)`` (= ``rowsum(P * dP)``);
- ``dS = P * (dP - D)``; with softcap ``c``: ``dS *= 1 - tanh^2(x / c)`` (x the scaled
  score before the cap); ALiBi and masks have no gradient;
- ``dQ = scale dS K``; ``dK = scale dS^T Q``. GQA: dK and dV of a key/value head sum
  over its query heads.

Rows whose forward saw a ``+inf`` or NaN score (LSE ``+inf`` or NaN, output NaN; see
:mod:`refimpl.attention.reference`) have no gradient: both functions refuse such an LSE
(and non-finite ``o``/``dO``) with a ValueError naming the first bad index, rather than
let one row's NaN spread to every ``dK`` and ``dV``.

``precision="exact"``: products correctly rounded to float32, every elementwise step
rounded once to float32 (``dS_s = fl32(fl32(dS) * fl32(scale))`` feeds the products);
in the reference, the GQA sums over query heads are part of one correctly rounded
product. ``precision="float64"``: the same in float64.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
from numpy.typing import ArrayLike

from refimpl.attention.mask import MaskOptions, mask_keywords
from refimpl.attention.problem import Problem, prepare
from refimpl.attention.products import matmul_f32, matmul_f64
from refimpl.attention.result import AttentionGradients
from refimpl.attention.scores import PRECISIONS, scores
from refimpl.attention.stats import ScheduleStats
from refimpl.attention.tiles import DEFAULT_BLOCK, check_block, computed_tiles, tile_ranges
from refimpl.softmax import exp_diff, exp_diff_f32
from refimpl.summation import fold_sum
from refimpl.validation import as_float64, check_array_bytes, exact_astype

__all__ = ["attention_backward", "flash_v2_backward"]


def _grads_inputs(prob: Problem, o, do, lse, dt):
    b, hq, _, sq, _, _ = prob.shape
    dv = prob.v.shape[-1]
    o = as_float64(o, "o")
    do = as_float64(do, "do")
    lse = as_float64(lse, "lse")
    want_o = prob.batch_shape + (hq, sq, dv)
    for name, arr, want in (("o", o, want_o), ("do", do, want_o),
                            ("lse", lse, want_o[:-1])):
        if arr.shape != want:
            raise ValueError(f"{name} must have shape {want}, got {arr.shape}")
    # a forward row with a +inf (NaN) score has LSE +inf (NaN) and NaN output: it has no
    # gradient, and its NaN would reach every dK and dV through the sums over rows
    bad = np.isnan(lse) | np.isposinf(lse)
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(
            f"lse must be finite or -inf (fully masked row); lse{list(idx)} = "
            f"{lse[idx]}: the forward saw a +inf or NaN score in that row (its output is "
            "NaN), which has no gradient")
    for name, arr in (("o", o), ("do", do)):
        if not np.isfinite(arr).all():
            idx = tuple(int(i) for i in np.argwhere(~np.isfinite(arr))[0])
            raise ValueError(f"{name} must be finite; {name}{list(idx)} = {arr[idx]}")
    flat = lambda x: x.reshape((b,) + x.shape[len(prob.batch_shape):])  # noqa: E731
    # float32 arithmetic takes float32 values: a float64 o, do or lse that is not one
    # is refused, as q, k and v are, never rounded here
    return tuple(exact_astype(flat(a), dt, name)
                 for name, a in (("o", o), ("do", do), ("lse", lse)))


def _probs(s, lse, dt):
    """``P = e^(S - L)``: correctly rounded to float32 for the float32 pipeline
    (:func:`refimpl.softmax.exp_diff_f32`), in float64 for the float64 one; rows with
    ``L = -inf`` (no visible key) give 0."""
    if dt == np.float32:
        p = exp_diff_f32(s, lse[..., None])
        return np.where(np.isneginf(lse)[..., None], np.float32(0), p)
    p = exp_diff(s, lse[..., None])
    return np.where(np.isneginf(lse)[..., None], 0.0, p)


def _rowdot(do, o, dt):
    # D = rowsum(dO * O): float32 products are exact in float64
    return fold_sum(do.astype(np.float64) * o.astype(np.float64), axis=-1).astype(dt)


def _group_t(x: np.ndarray, hkv: int) -> np.ndarray:
    """(B, Hq, Sq, N) -> (B, Hkv, N, G*Sq): transposed, query heads of a group stacked."""
    b, hq, sq, n = x.shape
    g = hq // hkv
    return x.reshape(b, hkv, g, sq, n).transpose(0, 1, 4, 2, 3).reshape(b, hkv, n, g * sq)


def _group_rows(x: np.ndarray, hkv: int) -> np.ndarray:
    """(B, Hq, Sq, N) -> (B, Hkv, G*Sq, N)."""
    b, hq, sq, n = x.shape
    return x.reshape(b, hkv, (hq // hkv) * sq, n)


@mask_keywords
def attention_backward(
    q: ArrayLike, k: ArrayLike, v: ArrayLike,
    o: ArrayLike, do: ArrayLike, lse: ArrayLike,
    *,
    precision: str = "exact",
    mask: Optional[MaskOptions] = None,
) -> AttentionGradients:
    """Reference gradients of :func:`refimpl.attention.attention` (see module docstring).

    Args:
        q, k, v: the forward inputs; o, do: (..., Hq, Sq, Dv) output and its gradient;
        lse: (..., Hq, Sq) the forward's natural LSE (``-inf`` for fully masked rows).
        precision: ``"exact"`` or ``"float64"``.
        mask: the forward's masking options, a :class:`refimpl.attention.MaskOptions`
            (its fields are described there), or None for none; each field is also a
            keyword of this function (:func:`refimpl.attention.mask.mask_keywords`), not
            together with ``mask``.
    Returns:
        :class:`refimpl.attention.AttentionGradients` ``(dq, dk, dv)`` shaped like q, k,
        v (``stats`` is None: the reference has no schedule).
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    exact = precision == "exact"
    dt = np.float32 if exact else np.float64
    mm = matmul_f32 if exact else matmul_f64
    prob = prepare(q, k, v, mask=mask, input_dtype=dt)
    b, hq, hkv, sq, sk, d = prob.shape
    # the reference holds every score, probability and their gradients at once
    check_array_bytes("q, k", b * hq * sq * sk, 8,
                      what="the (B, Hq, Sq, Sk) score matrices of the reference backward")
    o_, do_, lse_ = _grads_inputs(prob, o, do, lse, dt)
    kq, vq = prob.kv_for_q_heads()
    s, _, g = scores(prob, prob.q, kq, np.arange(sq), np.arange(sk),
                     precision=precision, softcap_grad=True)
    p = _probs(s, lse_, dt)
    dv = mm(_group_t(p, hkv), _group_rows(do_, hkv))
    dp = mm(do_, np.swapaxes(vq, -1, -2)).astype(np.float64)
    dd = _rowdot(do_, o_, dt).astype(np.float64)
    ds = (p * (dp - dd[..., None])).astype(dt)
    if g is not None:
        ds = (ds * g).astype(dt)
    sc = float(np.float32(prob.scale)) if exact else prob.scale
    ds = (ds.astype(np.float64) * sc).astype(dt)
    dq = mm(ds, kq)
    dk = mm(_group_t(ds, hkv), _group_rows(prob.q.astype(dt), hkv))
    return AttentionGradients(prob.restore(dq), prob.restore(dk), prob.restore(dv))


# attention_backward()'s operands, repeated on purpose: the schedule takes the
# reference's arguments.
@mask_keywords
def flash_v2_backward(
    q: ArrayLike, k: ArrayLike, v: ArrayLike,
    o: ArrayLike, do: ArrayLike, lse: ArrayLike,
    *,
    block: tuple[int, int] = DEFAULT_BLOCK,
    mask: Optional[MaskOptions] = None,
) -> AttentionGradients:
    """FlashAttention-2 backward schedule (Dao 2023, Algorithm 2), float32 arithmetic.

    Pre-pass ``D = fl32(fold_sum(dO * O))`` (reads dO, O; writes D). dQ is initialised
    to 0 in HBM. OUTER loop over key tiles j (load K_j, V_j; dK_j = dV_j = 0 on chip);
    INNER loop over query tiles i in increasing order, skipping tiles the mask hides
    (load Q_i, O_i, dO_i, dQ_i, L_i, D_i as the paper writes):

    - ``S = scores(Q_i, K_j)``; ``P = RN32(e^(fl64(S - L_i)))`` (:func:`refimpl.elementary.exp_f32`)
    - ``dV_j = fl32(dV_j + matmul_f32(P^T, dO_i))``
    - ``dP = matmul_f32(dO_i, V_j^T)``; ``dS = fl32(P (dP - D_i))`` (softcap factor
      ``fl32(dS (1 - tanh^2))``); ``dS_s = fl32(dS fl32(scale))``
    - ``dQ_i = fl32(dQ_i + matmul_f32(dS_s, K_j))``, written back to HBM (on a GPU this
      is the atomic add that makes dQ order-dependent; here the order is i-major as
      written, so the bytes are fixed)
    - ``dK_j = fl32(dK_j + matmul_f32(dS_s^T, Q_i))``

    then write dK_j, dV_j. GQA: each query head computes its own dK, dV; a reduction then
    sums the heads of a group in head order (``fl32`` after each addition), reading the
    per-head results and writing the final ones (counted as dK/dV traffic).

    Args:
        q, k, v, o, do, lse: as :func:`attention_backward`.
        block: ``(B_r, B_c)`` (default 128 x 128).
        mask: the forward's masking options, a :class:`refimpl.attention.MaskOptions`
            (its fields are described there), or None for none; each field is also a
            keyword of this function (:func:`refimpl.attention.mask.mask_keywords`), not
            together with ``mask``.
    Returns:
        :class:`refimpl.attention.AttentionGradients` ``(dq, dk, dv, stats)``.
    """
    br, bc = check_block(block)
    prob = prepare(q, k, v, mask=mask)
    o_, do_, lse_ = _grads_inputs(prob, o, do, lse, np.float32)
    b, hq, hkv, sq, sk, d = prob.shape
    dvd = prob.v.shape[-1]
    inst = b * hq
    kq, vq = prob.kv_for_q_heads()
    qtiles, ktiles = tile_ranges(sq, br), tile_ranges(sk, bc)
    comp = computed_tiles(prob, qtiles, ktiles)
    sc = float(np.float32(prob.scale))
    st = ScheduleStats()
    if qtiles and ktiles:
        r, c = min(br, sq), min(bc, sk)
        # Q_i, O_i, dO_i, dQ_i, K_j, V_j, dK_j, dV_j, S/P and dP/dS tiles, L_i, D_i
        st.sram(r * d + 2 * r * dvd + r * d + 2 * c * d + 2 * c * dvd + 2 * r * c + 2 * r)
    dd = _rowdot(do_, o_, np.float32)
    st.read("dO", inst * sq * dvd)
    st.read("O", inst * sq * dvd)
    st.write("D", inst * sq)
    dq = np.zeros((b, hq, sq, d), dtype=np.float32)
    st.write("dQ", inst * sq * d)
    dk_h = np.zeros((b, hq, sk, d), dtype=np.float32)
    dv_h = np.zeros((b, hq, sk, dvd), dtype=np.float32)
    for j, cols in enumerate(ktiles):
        st.read("K", inst * cols.size * d)
        st.read("V", inst * cols.size * dvd)
        k_j, v_j = kq[:, :, cols], vq[:, :, cols]
        dk_j = np.zeros((b, hq, cols.size, d), dtype=np.float32)
        dv_j = np.zeros((b, hq, cols.size, dvd), dtype=np.float32)
        for i, rows in enumerate(qtiles):
            keep = comp[:, i, j]
            n = int(keep.sum()) * hq
            st.blocks_computed += n
            st.blocks_skipped += inst - n
            if n == 0:
                continue
            r = rows.size
            for name, cnt in (("Q", r * d), ("O", r * dvd), ("dO", r * dvd), ("dQ", r * d),
                              ("LSE", r), ("D", r)):
                st.read(name, n * cnt)
            kb = keep[:, None, None, None]
            q_i = prob.q[:, :, rows]
            s, _, g = scores(prob, q_i, k_j, rows, cols, softcap_grad=True)
            p = _probs(s, lse_[:, :, rows], np.float32)
            do_i = do_[:, :, rows]
            upd = matmul_f32(np.swapaxes(p, -1, -2), do_i).astype(np.float64)
            dv_j = np.where(kb, (dv_j + upd).astype(np.float32), dv_j)
            dp = matmul_f32(do_i, np.swapaxes(v_j, -1, -2)).astype(np.float64)
            ds = (p * (dp - dd[:, :, rows, None].astype(np.float64))).astype(np.float32)
            if g is not None:
                ds = (ds * g).astype(np.float32)
            ds = (ds.astype(np.float64) * sc).astype(np.float32)
            upd = matmul_f32(ds, k_j).astype(np.float64)
            dq[:, :, rows] = np.where(kb, (dq[:, :, rows] + upd).astype(np.float32),
                                      dq[:, :, rows])
            st.write("dQ", n * r * d)
            upd = matmul_f32(np.swapaxes(ds, -1, -2), q_i).astype(np.float64)
            dk_j = np.where(kb, (dk_j + upd).astype(np.float32), dk_j)
        dk_h[:, :, cols] = dk_j
        dv_h[:, :, cols] = dv_j
        st.write("dK", inst * cols.size * d)
        st.write("dV", inst * cols.size * dvd)
    g_ = hq // hkv
    dk = dk_h.reshape(b, hkv, g_, sk, d)
    dv = dv_h.reshape(b, hkv, g_, sk, dvd)
    dk_out, dv_out = dk[:, :, 0], dv[:, :, 0]
    for h in range(1, g_):
        dk_out = (dk_out.astype(np.float64) + dk[:, :, h]).astype(np.float32)
        dv_out = (dv_out.astype(np.float64) + dv[:, :, h]).astype(np.float32)
    if g_ > 1:
        st.read("dK", inst * sk * d)
        st.read("dV", inst * sk * dvd)
        st.write("dK", b * hkv * sk * d)
        st.write("dV", b * hkv * sk * dvd)
    return AttentionGradients(prob.restore(dq), prob.restore(dk_out), prob.restore(dv_out), st)
