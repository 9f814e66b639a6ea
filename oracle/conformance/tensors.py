"""Conformance of the tensor operations: ``check_matmul`` (matmul.matmul: the
acceptance interval of float32 accumulation), ``check_attention``
(attention.attention: FlashAttention's 2x-naive rule) and ``check_softmax``
(softmax.softmax: ``oracle.tolerance.softmax_tolerance``)."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from oracle.cases.matmul import bounds, operands, values
from oracle.conformance.phases import check_max_examples, hunt, invoke
from oracle.conformance.report import (
    Collector, ConformanceError, ConformanceReport, Failure, NewKind,
)
from oracle.random_stream import CaseRandom
from oracle.cases.softmax import score_rows
from oracle.tolerance import Interval, RelativeToNaive, softmax_tolerance
from refimpl.attention import (
    ALIGNMENTS, NAIVE_DTYPES, MaskOptions, attention, naive_attention,
)
from refimpl.matmul import matmul
from refimpl.softmax import softmax
from refimpl.validation import check_bool

__all__ = ["check_matmul", "check_attention", "check_softmax", "fp32_attention_bound"]


def check_matmul(fn: Callable, in_format: Any = "bf16", *, max_examples: int = 30,
                 **_: Any) -> ConformanceReport:
    """Check a float32-accumulating matrix product ``fn(a, b) -> c`` (a, b float32
    arrays holding ``in_format`` values, c float32) against the acceptance interval of
    float32 accumulation in any order around the correctly rounded product
    (``refimpl.matmul``; Higham 2002 section 3.1): each element within
    gamma_K * sum|a_ik b_kj| of the exact value."""
    max_examples = check_max_examples(max_examples)
    title = f"matmul ({in_format} inputs)"
    col = Collector(title, "matmul")

    def one(a: np.ndarray, b: np.ndarray, phase: str, count: bool) -> Failure | None:
        c = matmul(a, b)
        lo, hi = bounds(a, b, c)
        got = np.asarray(invoke(fn, a, b))
        if got.shape != c.shape:
            raise ConformanceError(f"{title}: the product has shape {got.shape}, "
                                   f"expected {c.shape}")
        got = got.astype(np.float32)
        bad = Interval(lo, hi).compare(got, c).mismatch    # NaN bounds: NaN expected
        if count:
            col.count("out", bad.size, int(bad.sum()))
        first_new = None
        for i, j in (tuple(int(v) for v in ix) for ix in np.argwhere(bad)):
            kind = ("non-finite element differs"
                    if not (np.isfinite(c[i, j]) and np.isfinite(got[i, j]))
                    else "outside the acceptance interval of float32 accumulation")
            f = col.first(kind, count, lambda: Failure(
                kind, phase,
                f"  element  [{i}, {j}] of a {a.shape} x {b.shape} product "
                f"(K = {a.shape[1]})\n"
                f"  expected {float(c[i, j]):.9g} in [{float(lo[i, j]):.9g}, "
                f"{float(hi[i, j]):.9g}]\n  got      {float(got[i, j]):.9g}",
                (a, b), c[i, j], got[i, j], int(count)))
            first_new = first_new or f
        return first_new

    fmt = None if in_format in (None, "fp32") else in_format
    shapes = ((4, 8, 4), (8, 64, 8), (16, 300, 8))
    col.placed = len(shapes)
    for n, (m, k, nn) in enumerate(shapes):
        ops = operands(m, k, nn, fmt)(CaseRandom(n, "conformance.matmul"))
        a, b = values(ops["a"], fmt), values(ops["b"], fmt)
        one(a, b, f"sweep, shape {m}x{k}x{nn}", True)
    # deferred: hypothesis is imported only when a check runs (import time of oracle)
    from hypothesis import strategies as st

    def drawn(shape_seed: tuple[int, int, int, int]) -> None:
        col.examples += 1
        m, k, n, seed = shape_seed
        ops = operands(max(m, 3), k, n, fmt)(CaseRandom(seed, "conformance.matmul"))
        a, b = values(ops["a"], fmt), values(ops["b"], fmt)
        f = one(a, b, "hypothesis, shrunk", False)
        if f is not None:
            raise NewKind(f)

    hunt(col, st.tuples(st.integers(1, 8), st.integers(1, 200), st.integers(1, 8),
                         st.integers(0, 2**31)), drawn, max_examples)
    return col.finish()


def _attention_sweep(masks: bool, alignments: tuple[str, ...],
                     window: bool) -> list[dict[str, Any]]:
    """Fixed attention problems (values multiples of 1/64 in [-4, 4], exact in FP16 and
    BF16): GQA, Sq < Sk and Sq > Sk, and with ``masks`` every allowed causal alignment,
    a window and right key padding, alone and with each causal alignment."""
    r = CaseRandom(0, "conformance.attention")

    def t(*shape: int) -> np.ndarray:
        return r.integers(-256, 257, shape).astype(np.float32) / np.float32(64)

    out = []
    for b, hkv, g, sq, sk, d in ((1, 1, 1, 8, 8, 8), (2, 2, 2, 5, 13, 16),
                                 (1, 1, 3, 17, 6, 8)):
        base = {"q": t(b, hkv * g, sq, d), "k": t(b, hkv, sk, d), "v": t(b, hkv, sk, d),
                "causal": False, "causal_alignment": alignments[0], "window": None,
                "key_padding_mask": None}
        out.append(base)
        if not masks:
            continue
        for al in alignments:
            out.append(dict(base, causal=True, causal_alignment=al))
            if window:
                out.append(dict(base, causal_alignment=al, window=(2, 1)))
        pad = np.arange(sk)[None, :] < np.maximum(1, sk - 1 - np.arange(b))[:, None]
        out.append(dict(base, key_padding_mask=pad))
        for al in alignments:       # bottom_right aligns to each entry's valid keys
            out.append(dict(base, causal=True, causal_alignment=al, key_padding_mask=pad))
    return out


U32 = 2.0 ** -24     # float32 unit roundoff


def fp32_attention_bound(q: np.ndarray, k: np.ndarray, v: np.ndarray,
                         mask: MaskOptions) -> np.ndarray:
    """The float32 acceptance bound of attention: per output element, the largest
    ``|out - exact|`` a float32 computation of ``softmax(scale q k^T + masks) v`` may
    show, in any summation order, with an ``exp`` within 2 ulps.

    First-order error analysis (Higham 2002 sections 2.2 and 3.1; u = 2^-24):

    - logits ``s_ij = scale * q_i . k_j``: the dot product of length D is within
      ``gamma_D * scale * sum_d |q_id k_jd|`` and the scale multiply adds ``2u |s_ij|``:
      ``E_i = max_j`` of that over the keys row i sees;
    - softmax: a logit error ``E_i`` moves ``p_ij`` by at most ``2 E_i`` relative, and a
      float32 softmax of the row adds ``(8 + S + 2 Dspread_i) u`` relative
      (:func:`oracle.tolerance.softmax_tolerance`, ``S`` keys, ``Dspread_i`` the largest
      distance of a visible logit from the row's maximum);
    - ``P V``: a float32 sum of S products adds ``gamma_S sum_j p_ij |v_jd|``;

    so ``|out_id - exact_id| <= A_id (2 E_i + (2 S + 10 + 2 Dspread_i) u)`` with
    ``A_id = sum_j p_ij |v_jd|``. The criterion allows twice this (second-order terms)
    plus ``S * 2^-126 * max|v|`` for probabilities float32 flushes to zero. Fully masked
    rows have bound 0 (their output is exactly 0). Computed in float64 with
    ``numpy.einsum`` loops (no BLAS), so the bound is the same on every machine.
    """
    from refimpl.attention.problem import prepare

    prob = prepare(q, k, v, mask=mask)
    kk, vv = prob.kv_for_q_heads()
    b, hq, sq, d = prob.q.shape
    sk = kk.shape[2]
    q64, k64, v64 = (a.astype(np.float64) for a in (prob.q, kk, vv))
    scale = float(prob.scale)
    s = scale * np.einsum("bhid,bhjd->bhij", q64, k64, optimize=False)
    g = scale * np.einsum("bhid,bhjd->bhij", np.abs(q64), np.abs(k64), optimize=False)
    vis = prob.visible(np.arange(sq), np.arange(sk))[:, None, :, :]
    vis = np.broadcast_to(vis, s.shape)
    s = np.where(vis, s, -np.inf)
    m = np.max(s, axis=-1, keepdims=True)
    any_vis = np.isfinite(m)
    m = np.where(any_vis, m, 0.0)
    e = np.where(vis, np.exp(s - m), 0.0)
    den = e.sum(axis=-1, keepdims=True)
    p = np.where(any_vis, e / np.where(den > 0, den, 1.0), 0.0)
    gamma_d = d * U32 / (1 - d * U32)
    err = np.where(vis, gamma_d * g + 2 * U32 * np.abs(np.where(vis, s, 0.0)), 0.0)
    e_row = err.max(axis=-1, keepdims=True)
    spread = np.where(vis, m - np.where(vis, s, m), 0.0).max(axis=-1, keepdims=True)
    a = np.einsum("bhij,bhjd->bhid", p, np.abs(v64), optimize=False)
    rel = 2 * e_row + (2 * sk + 10 + 2 * np.ceil(spread)) * U32
    flush = sk * 2.0 ** -126 * (float(np.abs(v64).max()) if v64.size else 0.0)
    bound = np.where(any_vis, 2 * a * rel + flush, 0.0)
    return prob.restore(bound)


def check_attention(fn: Callable, *, dtype: str = "fp16", masks: bool = False,
                    factor: float = 2.0, atol: float = 1e-5, max_examples: int = 30,
                    alignment: str | None = None, window: bool = True,
                    **_: Any) -> ConformanceReport:
    """Check an attention forward ``fn(q, k, v, **options) -> out`` (SDPA layout,
    float32 arrays holding values exact in FP16 and BF16) with FlashAttention's rule:
    max|out - exact| <= factor * max|naive - exact| + atol, ``naive`` being the same
    computation done plainly in ``dtype`` (``"fp16"`` or ``"bf16"``,
    ``refimpl.attention.naive_attention``). With ``masks`` the options ``causal``,
    ``causal_alignment``, ``window`` and ``key_padding_mask`` are swept and drawn and
    passed too; otherwise ``fn(q, k, v)``. ``alignment`` restricts the causal alignment
    to the one ``fn`` implements (``"top_left"``: PyTorch SDPA's ``is_causal``);
    ``window=False`` never passes a sliding window."""
    # deferred: oracle.strategies imports hypothesis, only when a check runs
    from oracle.strategies import attention_inputs

    max_examples = check_max_examples(max_examples)
    masks = check_bool("masks", masks)
    window = check_bool("window", window)
    if dtype not in NAIVE_DTYPES + ("fp32",):
        raise ValueError(f"dtype must be one of {NAIVE_DTYPES + ('fp32',)}, got {dtype!r}")
    if alignment is not None and alignment not in ALIGNMENTS:
        raise ValueError(f"alignment must be one of {sorted(ALIGNMENTS)} or None, "
                         f"got {alignment!r}")
    aligns = (alignment,) if alignment else ("bottom_right", "top_left")
    title = ("attention (float32 bound)" if dtype == "fp32"
             else f"attention ({factor}x-naive-{dtype} rule)")
    col = Collector(title, "attention")

    def one(x: dict[str, Any], phase: str, count: bool) -> Failure | None:
        opts = {k: x[k] for k in ("causal", "causal_alignment", "window", "key_padding_mask")}
        if not masks:
            opts = {}
        mask = MaskOptions(**opts)
        want = attention(x["q"], x["k"], x["v"], mask=mask)
        if dtype == "fp32":
            bound = fp32_attention_bound(x["q"], x["k"], x["v"], mask)
            rule: Any = Interval(want.astype(np.float64) - bound,
                                 want.astype(np.float64) + bound)
        else:
            naive = naive_attention(x["q"], x["k"], x["v"], dtype=dtype, mask=mask)
            rule = RelativeToNaive(factor, naive, atol)
        # the implementation under test takes the options as keywords
        got = np.asarray(invoke(fn, x["q"], x["k"], x["v"], **opts))
        c = rule.compare(got.astype(np.float64) if dtype == "fp32" else got, want)
        if col.judge("out", c, count):
            return None
        named = [f"{k}={v}" for k, v in opts.items() if k != "key_padding_mask"]
        if opts.get("key_padding_mask") is not None:
            named.append("key padding")
        kind = f"out beyond the bound ({', '.join(named) or 'no masks'})"
        idx = tuple(int(v) for v in np.argwhere(c.mismatch)[0])
        return col.first(kind, count, lambda: Failure(
            kind, phase,
            f"  inputs   q {x['q'].shape}, k {x['k'].shape}\n  {c.summary()}\n"
            f"  element  {list(idx)}: expected {float(want[idx]):.9g}, "
            f"got {float(got[idx]):.9g}", x, want, got, int(count)))

    sweep = _attention_sweep(masks, aligns, window)
    col.placed = len(sweep)
    for i, x in enumerate(sweep):
        one(x, f"sweep, problem {i}", True)

    def drawn(x: dict[str, Any]) -> None:
        col.examples += 1
        f = one(x, "hypothesis, shrunk", False)
        if f is not None:
            raise NewKind(f)

    hunt(col, attention_inputs(masks=masks, alignments=aligns, window=window), drawn,
          max_examples)
    return col.finish()


#: the fixed softmax problems: (rows, length, offset, spread of the scores)
SOFTMAX_SWEEP = ((6, 37, 0.0, 8.0), (8, 128, 0.0, 8.0), (6, 257, 1e4, 8.0),
                 (4, 1, 0.0, 8.0), (5, 64, -30.0, 60.0), (4, 300, 0.0, 0.5))


def check_softmax(fn: Callable, *, max_examples: int = 30, **_: Any) -> ConformanceReport:
    """Check a float32 softmax along the last axis ``fn(x) -> y`` (x float32 (rows, L))
    against the correctly rounded softmax (``refimpl.softmax.softmax``) under the public
    rule :func:`oracle.tolerance.softmax_tolerance`: within ``8 + L + 2 * ceil(D)``
    float32 ulps, ``D`` the largest distance of an entry from its row's maximum. Rows
    hold ``-inf`` entries (output exactly 0), a fully masked row (all zeros), tied maxima
    and large offsets (a naive ``exp`` overflows)."""
    max_examples = check_max_examples(max_examples)
    title = "softmax (float32, last axis; ulp(8 + L + 2 ceil(D)) rule)"
    col = Collector(title, "softmax")

    def one(x: np.ndarray, phase: str, count: bool) -> Failure | None:
        want = softmax(x, axis=-1).astype(np.float32)
        tol = softmax_tolerance(x)
        got = np.asarray(invoke(fn, x))
        if got.shape != want.shape:
            raise ConformanceError(f"{title}: y has shape {got.shape}, expected {want.shape}")
        c = tol.compare(got.astype(np.float32) if got.dtype.kind == "f" else got, want)
        if col.judge("y", c, count):
            return None
        first_new = None
        for r, j in (tuple(int(v) for v in ix) for ix in np.argwhere(c.mismatch)):
            row = x[r]
            if not np.isfinite(row).any():
                where = "fully masked row"
            elif np.isneginf(row[j]):
                where = "masked (-inf) entry"
            else:
                where = "finite entry"
            e, g = float(want[r, j]), float(got[r, j])
            what = ("NaN where a number is expected" if np.isnan(g) else
                    "beyond the ulp bound")
            kind = f"y {what} ({where})"
            # alike in shape on purpose with the other checks' reports (oracle/conformance)
            f = col.first(kind, count, lambda: Failure(
                kind, phase,
                f"  input    row {r} of {x.shape}, L = {x.shape[1]}, rule n = {tol.n:g}\n"
                f"  element  [{r}, {j}] (x = {float(x[r, j]):.9g}): expected "
                f"{e:.9g}, got {g:.9g} ({float(c.error[r, j]):.3g} ulps)",
                x, want[r, j], got[r, j], int(count)))
            first_new = first_new or f
        return first_new

    col.placed = len(SOFTMAX_SWEEP)
    for i, (rows, length, offset, spread) in enumerate(SOFTMAX_SWEEP):
        x = score_rows(rows, length, offset, spread)(CaseRandom(i, "conformance.softmax"))["x"]
        one(x, f"sweep, problem {i} ({rows}x{length}, offset {offset:g})", True)
    # deferred: hypothesis is imported only when a check runs (import time of oracle)
    from hypothesis import strategies as st

    def drawn(v: tuple[int, int, int, int, int]) -> None:
        col.examples += 1
        rows, length, offset, spread, seed = v
        x = score_rows(rows, length, float(offset), float(spread))(
            CaseRandom(seed, "conformance.softmax"))["x"]
        f = one(x, "hypothesis, shrunk", False)
        if f is not None:
            raise NewKind(f)

    hunt(col, st.tuples(st.integers(1, 6), st.integers(1, 300),
                         st.sampled_from([0, 1, -50, 1000, -30000]),
                         st.sampled_from([1, 8, 40, 100]), st.integers(0, 2**31)),
         drawn, max_examples)
    return col.finish()
