"""Tiles of an attention computation: the ``block = (B_r, B_c)`` argument of every
schedule, the index ranges of the tiles and which tile pairs a mask lets through.

``block`` names the tile of the computation everywhere in :mod:`refimpl.attention`
(``B_r`` query rows by ``B_c`` keys, FlashAttention Algorithm 1, Dao et al. 2022,
arXiv 2205.14135; FlashAttention-2 Algorithm 1, Dao 2023, arXiv 2307.08691). The
elements that share one quantisation scale are a different thing, ``block_size``
(:mod:`refimpl.scaling`).
"""
from __future__ import annotations

import numpy as np

from refimpl.attention.problem import Problem
from refimpl.validation import check_positive_int

__all__ = ["DEFAULT_BLOCK", "check_block", "tile_ranges", "computed_tiles"]

#: ``(B_r, B_c)`` of FlashAttention-2 (and split-KV, paged attention, the backward pass)
#: when none is given
DEFAULT_BLOCK = (128, 128)


def check_block(block: object) -> tuple[int, int]:
    """Validate ``block = (B_r, B_c)``: two positive ints.

    Raises:
        TypeError: not a sequence (a string is not one), or a size that is not an int.
        ValueError: a sequence of another length than 2, a size below 1.
    """
    if isinstance(block, (str, bytes)) or not hasattr(block, "__len__"):
        raise TypeError(f"block must be a pair (B_r, B_c), got {block!r}")
    if len(block) != 2:  # type: ignore[arg-type]
        raise ValueError(f"block must be a pair (B_r, B_c), got {block!r}")
    br, bc = block  # type: ignore[misc]
    return check_positive_int("block B_r", br), check_positive_int("block B_c", bc)


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
