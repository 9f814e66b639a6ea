"""The score pipeline: ``s = scale * q k^T``, softcap, masks, ALiBi (in this order).

One function computes the scores of any tile (rows x keys), so the reference and every
schedule see the same bytes for the same score: every step is elementwise or a correctly
rounded product, hence a tile's scores do not depend on how the matrix is tiled.

``precision="exact"`` (float32 pipeline). ``fl32`` is one IEEE round-to-nearest-even to
binary32 of the exact value written inside it; ``fl64`` the same to binary64.

1. ``S = fl32(q k^T)``: the exact dot products rounded once
   (:func:`refimpl.attention.products.matmul_f32`). A dot product whose correctly
   rounded value is beyond float32's range becomes ``+-inf`` (IEEE overflow).
2. ``s = fl32(S * fl32(scale))``: a binary32 multiply, one rounding (``scale`` itself is
   first rounded to float32, as a kernel receiving a float32 scale sees it).
3. softcap ``c``: ``s = fl32(fl64(c * t))`` with ``t = tanh(fl64(s / c))`` (the
   deterministic float64 ``tanh`` of :mod:`refimpl.elementary`, within 3 ulp). This step
   is a fixed float64 evaluation rounded to float32, not a correctly rounded function:
   ``tanh`` cannot be, and the double rounding at the end is part of the definition.
4. masked pairs (:meth:`Problem.visible`) become ``-inf``.
5. ALiBi: ``s = fl32(s - slope * d)`` with ``d = |i + offset - j|``: one rounding of the
   exact sum. The bias is formed exactly: for float32 slopes and ``d < 2^29`` it is one
   float64 product (24 + 29 bits); otherwise the slope is split (Veltkamp) into two
   26-bit halves whose products with ``d < 2^27`` are exact. The exact sum is rounded to
   odd at float64 precision (TwoSum and a sticky bit) and then to float32, which is a
   single correct rounding (Boldo and Melquiond 2008, Theorem 1: ``RN_24(RO_53(x)) =
   RN_24(x)``). Adding in float64 first and then casting, ``fl32(fl64(s + bias))``,
   rounds twice and can differ (tests pin a case).

``precision="float64"``: ``S`` from :func:`refimpl.attention.products.matmul_f64`
(products rounded to float64, summed in ``fold_sum`` order), ``s = fl64(S * scale)``
(``scale`` not rounded to float32), softcap ``fl64(c * tanh(fl64(s / c)))``, masks,
ALiBi ``fl64(s + fl64(-slope * d))``: every step rounded to float64.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Optional

import numpy as np

from refimpl import elementary
from refimpl.attention.problem import Problem
from refimpl.attention.products import matmul_f32, matmul_f64
from refimpl.eft import add_round_to_odd, round_to_odd, split, two_sum
from refimpl.validation import check_bool

__all__ = ["scores", "scores_from_product", "add_alibi_f32", "PRECISIONS"]

PRECISIONS = ("exact", "float64")


def scores(
    problem: Problem, q_tile: np.ndarray, k_tile: np.ndarray,
    rows: np.ndarray, cols: np.ndarray,
    *,
    precision: str = "exact",
    softcap_grad: bool = False,
) -> tuple[np.ndarray, np.ndarray, Optional[np.ndarray]]:
    """Scores of one tile.

    Args:
        problem: the validated problem (options, masks, offsets).
        q_tile: (B, H, r, D) query rows ``rows``.
        k_tile: (B, H, c, D) keys ``cols``, already mapped to the query heads (for GQA
            ``np.repeat(k_tile, Hq // Hkv, axis=1)``).
        rows, cols: absolute row and key indices of the tile.
        precision: ``"exact"`` (float32 result) or ``"float64"``.
        softcap_grad: also return ``ds/dx = 1 - tanh^2(x / c)`` (x the scaled score
            before the cap; float64), for the backward pass; None without softcap.
    Returns:
        ``(s, visible, grad)``: s (B, H, r, c) with ``-inf`` where masked, visible (B, r, c).
    """
    softcap_grad = check_bool("softcap_grad", softcap_grad)
    if precision == "exact":
        qk = matmul_f32(q_tile, np.swapaxes(k_tile, -1, -2))
    elif precision == "float64":
        qk = matmul_f64(q_tile, np.swapaxes(k_tile, -1, -2))
    else:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    return scores_from_product(problem, qk, rows, cols, precision=precision,
                               softcap_grad=softcap_grad)


# scores()'s options, repeated on purpose: the same steps on a product formed
# elsewhere.
def scores_from_product(
    problem: Problem, qk: np.ndarray,
    rows: np.ndarray, cols: np.ndarray,
    *,
    precision: str = "exact",
    softcap_grad: bool = False,
) -> tuple[np.ndarray, np.ndarray, Optional[np.ndarray]]:
    """Steps 2-5 of the pipeline on an already computed product ``qk = q k^T``
    (float32, correctly rounded, for ``"exact"``; float64 for ``"float64"``): the same
    result as :func:`scores` for a schedule that forms the product its own way (for
    example from operands prepared once per tensor)."""
    if precision == "exact":
        # an IEEE binary32 multiply: fl32(S * fl32(scale)); overflow to +-inf is the
        # documented result
        with np.errstate(over="ignore"):
            s = qk * np.float32(problem.scale)
        rnd = lambda x: x.astype(np.float32)  # noqa: E731  fl32(fl64(.)): step 3
    elif precision == "float64":
        s = qk * problem.scale
        rnd = lambda x: x  # noqa: E731
    else:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    grad = None
    if problem.softcap is not None:
        c = problem.softcap
        t = elementary.tanh(s.astype(np.float64) / c)
        if softcap_grad:
            grad = 1.0 - t * t
        s = rnd(c * t)
    if problem.has_mask:
        vis = problem.visible(rows, cols)
        s = np.where(vis[:, None], s, -np.inf)
    else:
        vis = np.ones((s.shape[0], len(rows), len(cols)), dtype=bool)
    if problem.slopes is not None:
        if precision == "exact":
            s = add_alibi_f32(problem, s, rows, cols)
        else:
            s = s + problem.alibi_bias(rows, cols)
    out = s.astype(np.float32, copy=False) if precision == "exact" else s
    return out, vis, grad


#: slopes from here on are split no further: a bias of 2^990 or more (or 0) rounds to
#: the same float32 value (+-inf or s) whatever its low bits
_SPLIT_MAX = 2.0**990


def _max_distance(problem: Problem, rows: np.ndarray, cols: np.ndarray) -> int:
    if len(rows) == 0 or len(cols) == 0:
        return 0
    lo = int(np.min(rows)) + int(np.min(problem.offset)) - int(np.max(cols))
    hi = int(np.max(rows)) + int(np.max(problem.offset)) - int(np.min(cols))
    return max(abs(lo), abs(hi))


def add_alibi_f32(problem: Problem, s: np.ndarray, rows: np.ndarray,
                  cols: np.ndarray) -> np.ndarray:
    """Step 5 of the exact pipeline: ``fl32(s - slope_h * |i + offset - j|)``, one
    rounding of the exact value, for the float32 scores ``s`` (B, H, len(rows),
    len(cols)) of query rows ``rows`` and keys ``cols`` (``-inf`` where masked stays
    ``-inf``). For a schedule that forms its scores its own way.

    Raises:
        ValueError: slopes that are not float32 values with distances of 2^27 or more
            (the bias would not be exact).
    """
    s64 = s.astype(np.float64)
    slopes = problem.slopes
    dmax = _max_distance(problem, rows, cols)
    if dmax < 2**29 and np.array_equal(slopes.astype(np.float32).astype(np.float64), slopes):
        # bias exact (24 + 29 bits): RO_53(s + bias), then one rounding to float32
        return add_round_to_odd(s64, problem.alibi_bias(rows, cols)).astype(np.float32)
    if dmax >= 2**27:
        raise ValueError(
            f"ALiBi distances up to {dmax} with slopes that are not float32 values: the "
            "exact pipeline forms the bias exactly only for distances below 2^27 "
            "(pass float32 slopes, exact up to 2^29)")
    # slope = a1 + a2 (Veltkamp), each product a_i * d exact; bias = c1 + c2 exactly
    big = np.abs(slopes) >= _SPLIT_MAX
    a1 = np.where(big, slopes, split(np.where(big, 0.0, slopes))[0])
    a2 = slopes - a1
    c1 = replace(problem, slopes=a1).alibi_bias(rows, cols)
    c2 = replace(problem, slopes=a2).alibi_bias(rows, cols)
    with np.errstate(invalid="ignore", over="ignore"):
        b1, b2 = two_sum(c1, c2)  # normalised: |b2| <= ulp(b1)/2
        h, l = two_sum(s64, b1)
        u, e = two_sum(l, b2)
        big_h, low = two_sum(h, u)
        # s + bias = big_h + low + e exactly, and |low + e| is below the gap from big_h
        # to its neighbour on that side (if |b2| > 2^-10 |h|, s + b1 cancelled exactly
        # and e = 0; otherwise |e| <= 2^-62.9 |big_h|), so the sign of fl(low + e)
        # decides round-to-odd
        ro = round_to_odd(big_h, low + e)
    ro = np.where(np.isneginf(s64), -np.inf, ro)  # masked stays masked
    return ro.astype(np.float32)
