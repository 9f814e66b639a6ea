"""The score pipeline: ``s = scale * q k^T``, softcap, masks, ALiBi (in this order).

One function computes the scores of any tile (rows x keys), so the reference and every
schedule see the same bytes for the same score: every step is elementwise or a correctly
rounded product, hence a tile's scores do not depend on how the matrix is tiled.

``precision="exact"`` (float32 pipeline, each step rounded once to float32):

1. ``S = q k^T`` correctly rounded (:func:`refimpl.attention.products.matmul_f32`).
2. ``s = fl32(S * fl32(scale))`` (an IEEE float32 multiply).
3. softcap ``c``: ``s = fl32(c * tanh(s / c))``, evaluated in float64 with the
   deterministic ``tanh`` of :mod:`refimpl.elementary`.
4. masked pairs (:meth:`Problem.visible`) become ``-inf``.
5. ALiBi: ``s = fl32(s + bias)`` with the bias exact in float64.

``precision="float64"``: the same steps in float64 (``scale`` not rounded to float32,
products through :func:`refimpl.attention.products.matmul_f64`).
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from refimpl import elementary
from refimpl.attention.problem import Problem
from refimpl.attention.products import matmul_f32, matmul_f64

__all__ = ["scores", "scores_from_product", "PRECISIONS"]

PRECISIONS = ("exact", "float64")


def scores(
    problem: Problem,
    q_tile: np.ndarray,
    k_tile: np.ndarray,
    rows: np.ndarray,
    cols: np.ndarray,
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
    if precision == "exact":
        qk = matmul_f32(q_tile, np.swapaxes(k_tile, -1, -2))
    elif precision == "float64":
        qk = matmul_f64(q_tile, np.swapaxes(k_tile, -1, -2))
    else:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    return scores_from_product(problem, qk, rows, cols, precision=precision,
                               softcap_grad=softcap_grad)


def scores_from_product(
    problem: Problem,
    qk: np.ndarray,
    rows: np.ndarray,
    cols: np.ndarray,
    *,
    precision: str = "exact",
    softcap_grad: bool = False,
) -> tuple[np.ndarray, np.ndarray, Optional[np.ndarray]]:
    """Steps 2-5 of the pipeline on an already computed product ``qk = q k^T``
    (float32, correctly rounded, for ``"exact"``; float64 for ``"float64"``): the same
    result as :func:`scores` for a schedule that forms the product its own way (for
    example from operands prepared once per tensor)."""
    if precision == "exact":
        # an IEEE binary32 multiply: fl32(S * fl32(scale))
        s = qk * np.float32(problem.scale)
        rnd = lambda x: x.astype(np.float32)  # noqa: E731
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
        s = rnd(s.astype(np.float64) + problem.alibi_bias(rows, cols))
    out = s.astype(np.float32, copy=False) if precision == "exact" else s
    return out, vis, grad
