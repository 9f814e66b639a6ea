"""Order-fixed float64 summation, independent of BLAS, SIMD width and thread count.

NumPy's ``sum`` and BLAS reductions choose their association order by memory layout,
CPU kernel and blocking, so their last bits are not portable. ``fold_sum`` defines the
order explicitly: the upper half of the axis is added onto the lower half, elementwise,
until one element is left (a binary tree whose shape depends only on the length).
Each level is a plain IEEE elementwise addition, so the result is the same bytes on
every machine. The error bound is that of pairwise summation:
``|fold_sum(x) - sum(x)| <= ceil(log2 n) * 2^-53 * sum|x|`` (to first order).
"""
from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from refimpl.validation import as_float64, check_bool

__all__ = ["fold_sum", "fold_sum_axis1"]


def fold_sum(x: ArrayLike, axis: int = -1, keepdims: bool = False) -> np.ndarray:
    """Sum of ``x`` along ``axis`` in float64 in a fixed folding order.

    At each level with ``n`` terms and ``h = ceil(n / 2)``: ``y[i] = x[i] + x[i + h]`` for
    ``i < n - h`` and ``y[h - 1] = x[h - 1]`` when ``n`` is odd. An empty axis sums to 0.

    Args:
        x: values, converted to float64.
        axis: the axis to reduce.
        keepdims: keep the reduced axis with length 1.
    Returns:
        float64 array.
    """
    keepdims = check_bool("keepdims", keepdims)
    x = as_float64(x)
    y = np.moveaxis(x, axis, -1)
    n = y.shape[-1]
    if n == 0:
        out = np.zeros(y.shape[:-1])
    else:
        while n > 1:
            h = (n + 1) // 2
            z = y[..., :h].copy()
            z[..., : n - h] += y[..., h:n]
            y, n = z, h
        out = y[..., 0]
    if keepdims:
        out = np.expand_dims(out, axis)
    return out


def fold_sum_axis1(x: np.ndarray, buf: np.ndarray | None = None) -> np.ndarray:
    """:func:`fold_sum` over axis 1 of a 3-D float64 array ``x`` (n, c, w): the same
    additions in the same order, halving in place in the scratch array ``buf``
    (n, ceil(c/2), w; new when None) and returning a view of it (n, w), with no other
    temporaries (for hot loops)."""
    n, c, w = x.shape
    if c <= 1:
        return x[:, 0].copy() if c else np.zeros((n, w))
    h = (c + 1) // 2
    if buf is None:
        buf = np.empty((n, h, w))
    np.add(x[:, :c - h], x[:, h:c], out=buf[:, :c - h])
    if c - h < h:  # odd: the middle element passes through
        buf[:, h - 1] = x[:, h - 1]
    m = h
    while m > 1:
        h = (m + 1) // 2
        buf[:, :m - h] += buf[:, h:m]
        m = h
    return buf[:, 0]
