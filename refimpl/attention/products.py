"""The matrix products of the attention schedules, in one place.

Every product of two float32-valued matrices in :mod:`refimpl.attention` goes through
:func:`matmul_f32`: the exact sum of the exact products rounded once to float32 with
round-to-nearest-even (a correctly rounded dot product), so it depends on no summation
order, BLAS kernel or thread count. It is :func:`refimpl.matmul.matmul` with
``accumulate="exact"``.

:func:`matmul_f64` is the product of the float64 reference: products rounded to float64
and summed in the fixed order of :func:`refimpl.summation.fold_sum` (so it is also the
same bytes everywhere, but not correctly rounded).
"""
from __future__ import annotations

import math

import numpy as np

from refimpl.matmul.screening import exact_col_norms, exact_product_fp32, exact_row_bounds
from refimpl.summation import fold_sum

__all__ = ["matmul_f32", "matmul_f64"]

#: products materialised per chunk in matmul_f64 (bounds temporary memory)
_CHUNK = 1 << 22


def matmul_f32(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` for float32-valued ``a`` (..., M, K) and ``b`` (..., K, N), correctly
    rounded to float32 (batched like ``np.matmul``).

    Finite operands with the same leading shape (every product of the schedules) take
    the lean entry :func:`refimpl.matmul.exact.exact_product_fp32`; anything else goes
    through :func:`refimpl.matmul.matmul`. Same bytes either way."""
    a = np.asarray(a, dtype=np.float32)
    b = np.asarray(b, dtype=np.float32)
    if (a.ndim >= 2 and a.ndim == b.ndim and a.shape[:-2] == b.shape[:-2]
            and a.shape[-1] == b.shape[-2] and np.isfinite(a).all() and np.isfinite(b).all()):
        a64 = a.astype(np.float64)
        b64 = b.astype(np.float64)
        return exact_product_fp32(a64, b64, exact_row_bounds(a64), exact_col_norms(b64))
    from refimpl.matmul import matmul

    return matmul(a, b)


def matmul_f64(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` in float64: each product rounded to float64, summed over k in the fixed
    folding order of :func:`refimpl.summation.fold_sum`."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = np.broadcast_to(a, batch + a.shape[-2:])
    b = np.broadcast_to(b, batch + b.shape[-2:])
    m, k = a.shape[-2:]
    n = b.shape[-1]
    out = np.empty(batch + (m, n))
    bt = np.swapaxes(b, -1, -2)[..., None, :, :]  # (..., 1, N, K)
    rows = max(1, _CHUNK // max(1, n * k * max(1, math.prod(batch))))
    for r0 in range(0, m, rows):
        prod = a[..., r0:r0 + rows, None, :] * bt  # (..., r, N, K)
        out[..., r0:r0 + rows, :] = fold_sum(prod, axis=-1)
    return out
