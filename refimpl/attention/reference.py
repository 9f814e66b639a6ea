"""Reference attention: the definition every schedule must match.

``softmax(score pipeline(q, k)) v`` with the options of :func:`attention`; the standard
(materialising) schedule of the FlashAttention paper's Algorithm 0 with its memory
traffic; and the naive low-precision computation that framework code performs, for the
tolerance rule of flash-attention's tests (see :mod:`refimpl.attention.tolerance`).

Conventions (those of the public libraries named below, stated once here and used
everywhere):
- Causal alignment default ``"bottom_right"`` (flash-attention >= 2.1, FlashInfer):
  row i sees key j iff ``j <= i + Sk - Sq``; ``"top_left"`` (PyTorch SDPA ``is_causal``):
  ``j <= i``. Sliding window ``(w_left, w_right)``, bounds inclusive, around the same
  aligned position (flash-attention's ``window_size``, with ``None`` where it writes
  -1 for unbounded); ``causal`` is the window ``(None, 0)`` and both may be combined.
  With padding masks, Sq and Sk in the alignment are each batch entry's numbers of valid
  queries and keys (right padding, as flash-attention's variable-length kernels see it).
  ALiBi distances use the same alignment.
- No softcap is ``softcap=None`` (flash-attention writes 0.0; 0 is refused here). The
  cap applies to the scaled score ``scale * q k^T``, before masks and ALiBi.
- Padding masks are boolean, ``True`` marks a valid token (flash-attention's
  ``attention_ref``; the opposite of ``torch.nn.MultiheadAttention.key_padding_mask``).
- A fully masked row (all keys masked, a padded query row, ``Sq > Sk`` under bottom-right
  causal, ``Sk = 0``) has output exactly 0 and LSE ``-inf`` (FA3 and FlashInfer; FA2
  writes ``+inf``). ``-inf`` is the neutral element of :func:`merge_attention_states`.
- Non-finite scores (a correctly rounded dot product, scale multiply or ALiBi sum
  beyond float32's range, in the float32 pipeline): a ``-inf`` score weighs nothing,
  like a masked key; a row holding a ``+inf`` score has output NaN and LSE ``+inf``,
  a row holding a NaN score output NaN and LSE NaN (the special values of
  :mod:`refimpl.softmax`). The overflow is visible, never silently turned into a
  masked row, and no other row changes (rows are independent in every schedule).
- LSE is the natural log-sum-exp of the final scores of a row (base e). With ALiBi the
  bias is ``-slope * |i + offset - j|`` in every mode, so the LSE includes it. For
  causal ALiBi, flash-attention's kernel adds ``+slope * j`` instead (it drops the
  row-constant ``-slope * (i + offset)``, which the softmax ignores): outputs agree,
  but its LSE equals this LSE plus ``slope * (i + offset)``; flash-attention's
  ``attention_ref`` uses ``slope * (j - Sk + 1)``, another row constant.
"""
from __future__ import annotations

from typing import Optional, Union

import numpy as np
from numpy.typing import ArrayLike

from refimpl import elementary
from refimpl.attention.mask import MaskOptions, mask_keywords
from refimpl.attention.problem import Problem, prepare
from refimpl.attention.products import matmul_f32, matmul_f64
from refimpl.attention.result import AttentionResult
from refimpl.attention.scores import PRECISIONS, scores
from refimpl.attention.scores import scores_from_product
from refimpl.attention.stats import ScheduleStats
from refimpl.blas import ProductThread
from refimpl.matmul.screening import (exact_col_norms, exact_row_bounds, resolve_flagged,
                                      screen_fp32, screen_width)
from refimpl.softmax import exp_diff
from refimpl.summation import fold_sum
from refimpl.validation import check_bool

__all__ = ["attention", "standard_attention", "naive_attention", "NAIVE_DTYPES"]

#: rows per chunk are chosen so that a chunk holds about this many scores; every step
#: is row-local, so chunking changes no result, only memory and cache use
_CHUNK_SCORES = 1 << 19

NAIVE_DTYPES = ("fp16", "bf16")


def _softmax_rows(s: np.ndarray, exact: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """P, natural LSE and the non-finite-row mask of score rows (last axis); empty rows
    give P = 0, LSE = -inf.

    ``e = exp(fl64(s - max))`` (the deterministic exp, within 0.52 ulp) and
    ``l = fold_sum(e)`` in float64; ``P = fl64(e / l)`` and
    ``LSE = fl64(max + ln l)``; when ``exact`` each is then rounded to float32:
    ``fl32(fl64(.))``. ``e`` and ``l`` are float64 approximations, so that double
    rounding is part of the definition (it fixes the bytes; it is not a correctly rounded
    quotient of exact values). A row whose sum ``l`` is zero (all scores ``-inf``)
    gives P = 0 and LSE = -inf. A row holding ``+inf`` or NaN (``max`` is ``+inf`` or
    NaN; flagged in the returned mask) gives P = 0, for the product with V only (so the
    NaN cannot reach other rows), and LSE ``max`` (``+inf`` or NaN); its output is NaN.
    """
    s64 = s.astype(np.float64)
    if s64.shape[-1] == 0:
        m = np.full(s64.shape[:-1] + (1,), -np.inf)
    else:
        m = np.max(s64, axis=-1, keepdims=True)
    bad = ~(m < np.inf)  # +inf or NaN
    m_ok = m
    if bad.any():  # such rows are taken as empty here (copies only when they occur)
        m_ok = np.where(bad, -np.inf, m)
        s64 = np.where(bad, -np.inf, s64)
    e = exp_diff(s64, m_ok)
    l = fold_sum(e, axis=-1, keepdims=True)
    pos = l > 0
    p = np.where(pos, e / np.where(pos, l, 1.0), 0.0)
    lse = np.where(pos, m_ok + elementary.log(np.where(pos, l, 1.0)), -np.inf)
    lse = np.where(bad, m, lse)[..., 0]
    if exact:
        return p.astype(np.float32), lse.astype(np.float32), bad[..., 0]
    return p, lse, bad[..., 0]


def _forward(prob: Problem, precision: str, keep: bool = False, fast: bool = True):
    """(out, lse) in the flattened layout; with ``keep`` also the full S and P.
    ``fast``: the exact forward through :func:`_forward_exact` (same bytes; not with
    ``keep``); False: the plain loop below."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    exact = precision == "exact"
    b, hq, _, sq, sk, _ = prob.shape
    if exact and fast and not keep and sq and sk:
        return _forward_exact(prob) + (None, None)
    dv = prob.v.shape[-1]
    kq, vq = prob.kv_for_q_heads()
    dt = np.float32 if exact else np.float64
    out = np.zeros((b, hq, sq, dv), dtype=dt)
    lse = np.full((b, hq, sq), -np.inf, dtype=dt)
    s_all = np.empty((b, hq, sq, sk), dtype=dt) if keep else None
    p_all = np.empty((b, hq, sq, sk), dtype=dt) if keep else None
    if sk == 0 or sq == 0:
        return out, lse, s_all, p_all
    cols = np.arange(sk)
    rows_per = max(1, _CHUNK_SCORES // max(1, sk * b * hq))
    mm = matmul_f32 if exact else matmul_f64
    for r0 in range(0, sq, rows_per):
        rows = np.arange(r0, min(sq, r0 + rows_per))
        s, _, _ = scores(prob, prob.q[:, :, rows], kq, rows, cols, precision=precision)
        p, l_, bad = _softmax_rows(s, exact)
        o = mm(p, vq)
        o[bad] = np.nan  # a row with a +inf or NaN score (the convention of attention())
        out[:, :, rows] = o
        lse[:, :, rows] = l_
        if keep:
            s_all[:, :, rows] = s
            p_all[:, :, rows] = np.where(bad[..., None], np.nan, p)
    return out, lse, s_all, p_all


#: scores per chunk of the fast exact forward (:func:`_forward_exact`); two chunks are
#: in flight at a time
_FAST_CHUNK_SCORES = _CHUNK_SCORES // 2
#: multiply-adds of the products below which the fast exact forward does not overlap
#: them with the elementwise work (a helper thread costs more than it saves)
_OVERLAP_MIN_WORK = 1 << 26
#: keys per partial product of ``P V`` in the fast exact forward (see
#: :func:`_blocked_scale`)
_PV_KEYS = 512


def _blocked_scale(k: int, kb: int) -> float:
    """Factor of ``||a_i||_2 ||b_j||_2`` in the screen width of a float64 product of
    length ``k`` summed as ``ceil(k / kb)`` BLAS partial products of at most ``kb``
    terms each, added one after the other.

    Each partial sum is within ``gamma_kb sum |a b|`` over its block (Higham, Accuracy
    and Stability of Numerical Algorithms, 2nd ed., eq. (3.5): any order, with or
    without FMA), adding the ``nb`` partial sums costs ``gamma_(nb-1)`` times the sum
    of their magnitudes (at most ``(1 + gamma_kb) sum |a b|``), and
    ``gamma_x + gamma_y + gamma_x gamma_y <= gamma_(x+y)``: the total error is at most
    ``gamma_(kb+nb) sum |a b| <= gamma_(kb+nb) ||a_i|| ||b_j||`` (Cauchy-Schwarz): the
    bound of :func:`refimpl.matmul.screening.exact_product_fp32` with ``kb + nb`` for
    the length (its width ``(1.001 K + 3) u`` with ``K = kb + nb``), times its factor
    ``1 + (4 k + 16) u`` for the rounding of the norms of length ``k``."""
    nb = -(-k // kb)
    u = 2.0**-53
    return (1.0 + (4 * k + 16) * u) * ((1.001 * (min(k, kb) + nb) + 3.0) * u)


def _forward_exact(prob: Problem) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_forward` for ``precision="exact"``: the same bytes, in a pipeline of
    row chunks. A helper thread (:class:`refimpl.blas.ProductThread`) forms chunk
    i + 1's ``Q K^T`` in float64 and chunk i - 1's correctly rounded ``P V`` while the
    calling thread screens chunk i's ``Q K^T``, runs the score pipeline, the
    exponentials and the probabilities, in reused scratch arrays; a task the helper has
    not started when the calling thread needs it is taken back and run there.

    Every product is correctly rounded (the screen of
    :func:`refimpl.matmul.screening.exact_product_fp32`, flagged outputs resolved), so
    its bytes are those of :func:`refimpl.attention.products.matmul_f32` whichever
    valid screen certifies them; ``P V`` is formed as partial products of
    :data:`_PV_KEYS` keys, whose tighter error bound (:func:`_blocked_scale`, with the
    row norms of ``P`` and the column norms of ``V``) flags fewer outputs. The softmax
    performs the operations of :func:`_softmax_rows` on each value in the same order
    (``fl64(s - max)``, the deterministic exp, ``fold_sum``, ``fl64(e / l)`` rounded to
    float32); a chunk with a ``+inf`` or NaN score is handed to :func:`_softmax_rows`
    itself.
    """
    b, hq, _, sq, sk, d = prob.shape
    dv = prob.v.shape[-1]
    nbh = b * hq
    kq, vq = prob.kv_for_q_heads()
    q3 = prob.q.reshape(nbh, sq, d)
    k64_t = np.swapaxes(kq.reshape(nbh, sk, d).astype(np.float64), 1, 2)
    k_norms = exact_col_norms(k64_t)
    v64 = vq.reshape(nbh, sk, dv).astype(np.float64)
    v_norms = exact_col_norms(v64)
    pv_scale = _blocked_scale(sk, _PV_KEYS)
    out = np.zeros((b, hq, sq, dv), dtype=np.float32)
    lse = np.full((b, hq, sq), -np.inf, dtype=np.float32)
    r = min(sq, max(1, _FAST_CHUNK_SCORES // max(1, sk * nbh)))
    chunks = [(r0, min(sq, r0 + r)) for r0 in range(0, sq, r)]
    cols = np.arange(sk)
    plain = not (prob.has_mask or prob.softcap is not None or prob.slopes is not None)
    scale32 = np.float32(prob.scale)
    y32 = np.empty((nbh, r, sk), dtype=np.float32)
    p64 = [np.empty((nbh, r, sk)) for _ in range(2)]
    s64 = np.empty((nbh, r, sk))  # one buffer: chunk i + 1's product starts after
    q64 = [None]                   # chunk i's screen
    h32 = np.empty((nbh, r, sk), dtype=np.float32)
    # the helper thread's own scratch
    # one set per chunk parity: a product taken over by the calling thread may run
    # beside the helper's
    part = [np.empty((nbh, r, dv)) for _ in range(2)]
    acc = [np.empty((nbh, r, dv)) for _ in range(2)]
    fold = np.empty((nbh, r, (sk + 1) // 2))

    def qk(i: int) -> None:
        """Chunk i's ``Q K^T`` in float64 into ``s64``."""
        r0, r1 = chunks[i]
        q64[0] = q3[:, r0:r1].astype(np.float64)
        np.matmul(q64[0], k64_t, out=s64[:, :r1 - r0])

    def pv(i: int) -> None:
        """Chunk i's correctly rounded ``P V`` into ``out``."""
        r0, r1 = chunks[i]
        n = r1 - r0
        p = p64[i % 2][:, :n]
        a = acc[i % 2][:, :n]
        for j0 in range(0, sk, _PV_KEYS):
            j1 = min(sk, j0 + _PV_KEYS)
            if j0 == 0:
                np.matmul(p[:, :, j0:j1], v64[:, j0:j1], out=a)
            else:
                a += np.matmul(p[:, :, j0:j1], v64[:, j0:j1], out=part[i % 2][:, :n])
        p_norms = np.sqrt(np.einsum("bik,bik->bi", p, p))
        w = (p_norms * pv_scale)[:, :, None] * v_norms[:, None, :]
        tiny = not (w.min(initial=np.inf) >= 2.0**-140)
        o = np.empty((nbh, n, dv), dtype=np.float32)
        _screen_resolve(a, w, o, np.empty_like(o), tiny, p, v64)
        out[:, :, r0:r1] = o.reshape(b, hq, n, dv)

    work = sq * sk * nbh * (d + dv)
    pending = []
    pvs = []

    def submit(fn):
        f = blas.submit(fn)
        f.steal = fn
        pending.append(f)
        return f

    def take(f):
        """Wait for ``f``; a task the helper has not started is run here instead."""
        if f.cancelled():  # taken over and run here already
            return
        if blas.overlap and f.cancel():
            f.steal()
        else:
            blas.wait(f)

    with ProductThread(enabled=work >= _OVERLAP_MIN_WORK) as blas:
        try:
            fut = submit(lambda: qk(0))
            for i, (r0, r1) in enumerate(chunks):
                n = r1 - r0
                take(fut)
                if i >= 2 and pvs[i - 2] is not None:
                    take(pvs[i - 2])  # p64[i % 2] is free again
                y = y32[:, :n]
                # correctly rounded Q K^T
                w, tiny = screen_width(exact_row_bounds(q64[0]), k_norms)
                _screen_resolve(s64[:, :n], w, y, h32[:, :n], tiny, q64[0], k64_t)
                if i + 1 < len(chunks):  # s64 and q64 are free again
                    fut = submit(lambda i=i: qk(i + 1))
                with np.errstate(over="ignore"):
                    if plain:
                        s = np.multiply(y, scale32, out=y)  # fl32(S * fl32(scale))
                    else:
                        s = scores_from_product(prob, y.reshape(b, hq, n, sk),
                                                np.arange(r0, r1), cols)[0].reshape(nbh, n, sk)
                p = p64[i % 2][:, :n]
                l1 = _exp_rows_into(s, p, fold[:, :n], lse, b, hq, r0, r1)
                if l1 is None:  # a +inf or NaN score: the reference's own steps
                    p, l_, bad = _softmax_rows(s.reshape(b, hq, n, sk), True)
                    o = matmul_f32(p, vq)
                    o[bad] = np.nan
                    out[:, :, r0:r1] = o
                    lse[:, :, r0:r1] = l_
                    pvs.append(None)
                    continue
                np.divide(p, l1[..., None], out=p)  # rows with l = 0 hold e = 0: +0
                np.copyto(h32[:, :n], p, casting="same_kind")  # fl32(fl64(e / l))
                np.copyto(p, h32[:, :n])
                pvs.append(submit(lambda i=i: pv(i)))
            for f in pending:
                take(f)
        finally:
            for f in pending:  # nothing may still write to the buffers
                if not f.cancelled():
                    f.exception()
    return out, lse


def _screen_resolve(blk, w, y, hi, tiny, a3, b3) -> None:
    """RN32 of the float64 BLAS product ``blk`` of ``a3`` and ``b3`` into ``y``: the
    screen of :func:`refimpl.matmul.screening.exact_product_fp32` with width ``w``
    (broadcastable to ``blk``), flagged outputs resolved exactly."""
    resolve_flagged(screen_fp32(blk, w, y, hi, tiny), y, a3, b3, blk)


def _exp_rows_into(s, e, fold, lse, b, hq, r0, r1):
    """The first steps of :func:`_softmax_rows` (``exact``) on float32 scores ``s``
    (nbh, n, sk): ``e = exp(fl64(s - max))`` into the float64 array ``e``, the LSE
    ``fl32(fl64(max + ln l))`` into ``lse[:, :, r0:r1]``; returns ``l`` with 1 where it
    is 0 (the divisor of the probabilities; those rows hold e = 0), or None (nothing
    written to ``lse``) when a row holds ``+inf`` or NaN."""
    m = s.max(axis=-1)  # exact: the float64 maximum of the same values
    if not (m < np.inf).all():
        return None
    m64 = m.astype(np.float64)
    with np.errstate(invalid="ignore"):
        np.subtract(s, np.where(np.isneginf(m64), 0.0, m64)[..., None], out=e)
    elementary.exp(e, out=e)
    l_ = _fold_last_into(e, fold)
    pos = l_ > 0
    l1 = np.where(pos, l_, 1.0)
    lse[:, :, r0:r1] = np.where(pos, m64 + elementary.log(l1), -np.inf).astype(
        np.float32).reshape(b, hq, r1 - r0)
    return l1


def _fold_last_into(x: np.ndarray, buf: np.ndarray) -> np.ndarray:
    """:func:`refimpl.summation.fold_sum` over the last axis of ``x`` (..., n), n >= 1,
    the same additions in the same order, halving in the scratch array ``buf``
    (..., ceil(n / 2)); returns a view (...)."""
    n = x.shape[-1]
    if n == 1:
        return x[..., 0].copy()
    h = (n + 1) // 2
    np.add(x[..., :n - h], x[..., h:n], out=buf[..., :n - h])
    if n - h < h:  # odd: the middle element passes through
        buf[..., h - 1] = x[..., h - 1]
    m = h
    while m > 1:
        h = (m + 1) // 2
        buf[..., :m - h] += buf[..., h:m]
        m = h
    return buf[..., 0]


@mask_keywords
def attention(
    q: ArrayLike, k: ArrayLike, v: ArrayLike,
    *,
    mask: Optional[MaskOptions] = None,
    return_lse: bool = False,
    precision: str = "exact",
) -> Union[np.ndarray, AttentionResult]:
    """Reference scaled dot-product attention (the definition; Vaswani et al. 2017 eq. 1,
    with the options of flash-attention 2 and FlashInfer).

    Score pipeline, in order: ``s = scale * q k^T``; softcap ``cap * tanh(s / cap)``;
    masks (key padding, causal, sliding window, query padding) set ``-inf``; ALiBi bias
    ``-slope_h * |i + offset - j|``; softmax over keys; ``P v``.

    ``precision="exact"``: every matrix product is correctly rounded to float32; the
    scale multiply and the ALiBi addition are single float32 roundings of the exact
    value; softcap, ``exp``, ``ln`` and the softmax quotient are evaluated in float64
    and then rounded to float32 (see :mod:`refimpl.attention.scores` for each step's
    rounding): ``e = exp(fl64(s - rowmax))`` with the deterministic exp of
    :mod:`refimpl.elementary`, ``l = fold_sum(e)``, ``P = fl32(fl64(e / l))``,
    ``O = fl32(P v)`` (correctly rounded), ``LSE = fl32(fl64(rowmax + ln l))``. Nothing
    depends on the platform's exp or BLAS, so the result is the same bytes on every
    machine. ``precision="float64"``: the same pipeline in float64 (fixed summation
    order), every step rounded to float64.

    Scores beyond float32's range (``precision="exact"``): a dot product ``q . k``
    (or its product with ``scale``, or the ALiBi sum) whose correctly rounded float32
    value overflows becomes ``+inf`` or ``-inf``, as IEEE rounding of an out-of-range
    value gives (float32 inputs can reach about 2^255 in a product). A ``-inf`` score
    weighs nothing, like a masked key (a row whose scores are all ``-inf`` is a fully
    masked row). A row holding a ``+inf`` score gives **output NaN (every element) and
    LSE +inf**, loudly, as :func:`refimpl.softmax.softmax` gives NaN probabilities and
    log-sum-exp ``+inf`` for such a row (``e^x / sum e^x = inf / inf``); a row holding a
    NaN score gives output NaN and LSE NaN. Only that row is affected: every other row's
    bytes are those it has without the bad row. Every schedule (``flash_v1``,
    ``flash_v2``, ``split_kv`` and :func:`merge_attention_states`, ``flash_v3``, paged
    attention) follows this convention; the backward pass refuses an LSE of ``+inf``
    or NaN. With ``precision="float64"`` the same scores are finite (float64's range
    holds every product of float32 values): the row's weight goes to its largest
    scores, e.g. output ``v_j`` for a single dominating key ``j``, and LSE is that score
    (finite, possibly beyond float32).

    Args:
        q: (..., Hq, Sq, D); k: (..., Hkv, Sk, D); v: (..., Hkv, Sk, Dv); float32 values.
        mask: the masking options, a :class:`refimpl.attention.MaskOptions` (its
            fields are described there), or None for none; each field is also a keyword
            of this function (:func:`refimpl.attention.mask.mask_keywords`), not together
            with ``mask``.
        return_lse: also return the natural LSE (..., Hq, Sq) (default False).
        precision: ``"exact"`` (float32 result) or ``"float64"``.
    Returns:
        out (..., Hq, Sq, Dv), a bare array (default); with ``return_lse`` an
        :class:`refimpl.attention.AttentionResult` that unpacks as ``(out, lse)``
        (``stats`` is None: the reference has no schedule). Fully masked rows: out 0,
        LSE ``-inf``. Rows with a ``+inf`` score: out NaN, LSE ``+inf``; with a NaN
        score: out NaN, LSE NaN.
    Raises:
        TypeError: a wrong type (an option, ``mask``, ``return_lse``).
        ValueError: shapes, head counts, non-finite or non-float32 inputs, bad option
            values.
    """
    return_lse = check_bool("return_lse", return_lse)
    prob = prepare(q, k, v, mask=mask,
                   input_dtype=np.float64 if precision == "float64" else np.float32)
    out, lse, _, _ = _forward(prob, precision)
    if return_lse:
        return AttentionResult(prob.restore(out), prob.restore(lse))
    return prob.restore(out)


# attention()'s operands and options, repeated on purpose: every schedule takes the
# reference's arguments (also flash_v2, split_kv).
@mask_keywords
def standard_attention(
    q: ArrayLike, k: ArrayLike, v: ArrayLike,
    *,
    mask: Optional[MaskOptions] = None,
    return_lse: bool = False,
) -> AttentionResult:
    """Standard attention (FlashAttention paper, Algorithm 0) with its HBM traffic.

    Per (batch, head): 1. read Q, K, compute S, write S; 2. read S, compute P, write P;
    3. read P and V, compute O = PV, write O. For Sq = Sk = N that is
    ``4 N d + 4 N^2`` element accesses: Theta(N d + N^2) (Theorem 2). Values equal
    :func:`attention` with ``precision="exact"``. ``peak_sram_elements`` is not
    modelled (0).

    Args:
        q, k, v: as :func:`attention`.
        mask: the masking options, a :class:`refimpl.attention.MaskOptions` (its
            fields are described there), or None for none; each field is also a keyword
            of this function (:func:`refimpl.attention.mask.mask_keywords`), not together
            with ``mask``.
        return_lse: also return the natural LSE (default False; the LSE is not part
            of the counted traffic, as Algorithm 0 does not write it).
    Returns:
        :class:`refimpl.attention.AttentionResult`: ``(out, stats)``, or
        ``(out, lse, stats)`` with ``return_lse``.
    """
    return_lse = check_bool("return_lse", return_lse)
    prob = prepare(q, k, v, mask=mask)
    out, lse, _, _ = _forward(prob, "exact")
    b, hq, _, sq, sk, d = prob.shape
    dv = prob.v.shape[-1]
    inst = b * hq
    st = ScheduleStats()
    st.read("Q", inst * sq * d)
    st.read("K", inst * sk * d)
    st.write("S", inst * sq * sk)
    st.read("S", inst * sq * sk)
    st.write("P", inst * sq * sk)
    st.read("P", inst * sq * sk)
    st.read("V", inst * sk * dv)
    st.write("O", inst * sq * dv)
    return AttentionResult(prob.restore(out), prob.restore(lse) if return_lse else None, st)


@mask_keywords
def naive_attention(
    q: ArrayLike, k: ArrayLike, v: ArrayLike,
    *,
    dtype: str = "fp16",
    mask: Optional[MaskOptions] = None,
) -> np.ndarray:
    """Attention computed in a low precision the way plain framework code does it
    (flash-attention's ``attention_ref`` with ``upcast=False``), as float32 values of
    ``dtype``. Each tensor operation rounds its result to ``dtype``
    (:func:`refimpl.formats.round_to`, nearest-even, overflow to inf):

    ``q_s = rd(fl32(q * fl32(scale)))``; ``S = rd(fl32(q_s k^T))`` (a GEMM accumulating
    in float32: the correctly rounded float32 product, then rounded to dtype); softcap
    ``rd(fl32(cap * rd(fl32(tanh(rd(fl32(S / cap)))))))`` with ``cap`` rounded to float32
    (binary32 divide and multiply; ``tanh`` the deterministic float64 one);
    masks ``-inf``; ALiBi ``fl32(S + fl32(bias))`` (``attention_ref`` adds a float32
    bias tensor, so type promotion leaves these scores in float32; the sum of two
    float32 values is formed in float64 and cast, which equals the binary32 addition:
    double rounding is innocuous for ``+`` when 53 >= 2 * 24 + 2, Figueroa 1995);
    ``P = rd(softmax(S))`` (softmax internally in float32, as frameworks do for half
    inputs); ``O = rd(P v)``. Inputs are first rounded to ``dtype``.

    Args:
        q, k, v: as :func:`attention`.
        dtype: ``"fp16"`` (default) or ``"bf16"``.
        mask: the masking options, a :class:`refimpl.attention.MaskOptions` (its
            fields are described there), or None for none; each field is also a keyword
            of this function (:func:`refimpl.attention.mask.mask_keywords`), not together
            with ``mask``.
    Returns:
        out (..., Hq, Sq, Dv), a bare array (float32 values of ``dtype``).
    """
    from refimpl.formats import round_to

    if dtype not in NAIVE_DTYPES:
        raise ValueError(f"dtype must be one of {NAIVE_DTYPES}, got {dtype!r}")
    rd = lambda x: round_to(np.asarray(x, dtype=np.float32), dtype).astype(np.float32)  # noqa: E731
    prob = prepare(q, k, v, mask=mask)
    b, hq, _, sq, sk, d = prob.shape
    kq, vq = prob.kv_for_q_heads()
    qs = rd(rd(prob.q) * np.float32(prob.scale))
    s = rd(matmul_f32(qs, np.swapaxes(rd(kq), -1, -2)))
    if prob.softcap is not None:
        c = np.float32(prob.softcap)
        t = rd(elementary.tanh(rd(s / c)))
        s = rd(c * t)
    rows, cols = np.arange(sq), np.arange(sk)
    vis = prob.visible(rows, cols)
    s = np.where(vis[:, None], s, np.float32(-np.inf))
    if prob.slopes is not None:
        # framework code adds a float32 bias to the half scores: type promotion makes the
        # sum, and so the softmax input, float32 (rounded once, not back to dtype)
        bias = prob.alibi_bias(rows, cols).astype(np.float32)
        s = (s.astype(np.float64) + bias).astype(np.float32)
    p, _, bad = _softmax_rows(s, exact=True)
    out = rd(matmul_f32(rd(p), rd(vq)))
    out[bad] = np.nan
    return prob.restore(out)
