"""The MX scaled dot product and matrix product (OCP MX v1.0 section 6.2).

For two MX vectors split into blocks ``j`` with scales ``X_j``, ``Y_j`` and elements
``P_ji``, ``Q_ji``: ``Dot(A, B) = sum_j X_j Y_j sum_i P_ji Q_ji``. The spec leaves the
internal precision to the implementation; this oracle declares the strongest one:

- every product ``P * Q`` is exact, every block sum is exact, and the sum over blocks
  is exact (unbounded integers: each element is an integer multiple of its format's
  smallest step, each scale a power of two);
- the exact result is rounded once, to nearest-even, to float32 (default) or float64.

So the result is the correctly rounded value of the real-number formula, independent of
BLAS, thread count and summation order: a hardware result may differ from it by its own
accumulation error, which a caller bounds with a tolerance, never the other way round.

Special values: a NaN scale (0xFF) makes its whole block NaN; NaN and Inf element codes
(E4M3 0x7F, E5M2 Inf/NaN) propagate with IEEE rules (Inf * 0 and Inf - Inf give NaN).
An exact zero sum gives +0.
"""
from __future__ import annotations

from typing import Any, Tuple

import numpy as np

from .dyadic import round_dyadic
from .mx import SCALE_NAN, MXArray, _element_table, _quantum_exp, block_span

__all__ = ["mx_dot", "mx_matmul", "round_dyadic"]

def _integer_elements(a: MXArray) -> Tuple[np.ndarray, np.ndarray, int]:
    """Element values as exact integers ``n`` (value ``n * 2**q``), their finite mask, q."""
    vals = _element_table(a.fmt)[a.codes]
    finite = np.isfinite(vals)
    q = _quantum_exp(a.fmt)
    n = np.ldexp(np.where(finite, vals, 0.0), -q).astype(np.int64)
    return n, finite, q


def _block_dots(na: np.ndarray, nb: np.ndarray) -> np.ndarray:
    """Exact ``S[m, j, n] = sum_i na[m, j, i] * nb[j, i, n]`` as an object array of ints.

    int64 when it cannot overflow; otherwise each operand is split into 16-bit halves so
    that every partial sum fits int64, and the halves are recombined as Python ints.
    """
    bs = na.shape[-1]
    amax = int(np.abs(na).max()) if na.size else 0
    bmax = int(np.abs(nb).max()) if nb.size else 0
    if amax * bmax * max(bs, 1) < (1 << 62):
        return np.einsum("mji,jin->mjn", na, nb).astype(object)
    ah, al = na >> 16, na & 0xFFFF  # na = ah * 2**16 + al, 0 <= al < 2**16
    bh, bl = nb >> 16, nb & 0xFFFF
    hh = np.einsum("mji,jin->mjn", ah, bh).astype(object)
    mid = (np.einsum("mji,jin->mjn", ah, bl) + np.einsum("mji,jin->mjn", al, bh)).astype(object)
    ll = np.einsum("mji,jin->mjn", al, bl).astype(object)
    return hh * (1 << 32) + mid * (1 << 16) + ll


def _check_pair(a: MXArray, b: MXArray) -> None:
    if not isinstance(a, MXArray) or not isinstance(b, MXArray):
        raise ValueError("a, b: expected MXArray operands (from mx_quantize)")
    if a.block_size != b.block_size:
        raise ValueError(
            f"b: block_size {b.block_size} differs from a's {a.block_size}; blocks must pair"
        )


def mx_matmul(a: MXArray, b: MXArray, *, out_dtype: Any = np.float32) -> np.ndarray:
    """``A @ B`` for MX matrices, each output the MX dot product of a row of ``a`` and a
    column of ``b`` (module docstring: exact, then rounded once).

    Args:
        a: MXArray of shape (M, K) with blocks along axis 1 (K).
        b: MXArray of shape (K, N) with blocks along axis 0 (K), the same block size.
        out_dtype: float32 (default) or float64.

    Returns:
        (M, N) array of ``out_dtype``.

    Raises:
        ValueError: operands not 2-D, blocks not along K, K or block sizes differ.
    """
    _check_pair(a, b)
    dt = np.dtype(out_dtype)
    if dt not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise ValueError(f"out_dtype: expected float32 or float64, got {dt}")
    if a.codes.ndim != 2 or b.codes.ndim != 2:
        raise ValueError(f"a, b: expected 2-D operands, got shapes {a.shape} and {b.shape}")
    if a.axis != 1:
        raise ValueError("a: blocks must run along axis 1 (the K axis of an (M, K) operand)")
    if b.axis != 0:
        raise ValueError("b: blocks must run along axis 0 (the K axis of a (K, N) operand)")
    (m, k), (k2, n) = a.shape, b.shape
    if k != k2:
        raise ValueError(f"b: K = {k2} does not match a's K = {k}")
    nblk = a.scales.shape[1]
    bs = block_span(k, a.block_size)  # a block wider than K: K elements, no padding

    na, fa, qa = _integer_elements(a)
    nb, fb, qb = _integer_elements(b)
    pad = nblk * bs - k
    if pad:
        na = np.concatenate([na, np.zeros((m, pad), np.int64)], axis=1)
        nb = np.concatenate([nb, np.zeros((pad, n), np.int64)], axis=0)
    s = _block_dots(na.reshape(m, nblk, bs), nb.reshape(nblk, bs, n))

    ea = a.scale_exponents()  # (M, nblk)
    eb = b.scale_exponents()  # (nblk, N)
    term_exp = ea[:, :, None] + eb[None, :, :]  # (M, nblk, N)
    out = np.zeros((m, n), dtype=dt)
    if nblk and m and n:
        base = int(term_exp.min())
        shifts = term_exp - base
        weights = np.frompyfunc(lambda e: 1 << int(e), 1, 1)(shifts)
        totals = (s * weights).sum(axis=1)
        flat = [round_dyadic(int(t), base + qa + qb, dt) for t in totals.reshape(-1)]
        out = np.array(flat, dtype=np.float64).astype(dt).reshape(m, n)

    # special values: NaN scales, NaN/Inf elements. Finite products are below 2**290, so
    # the float64 sum below is NaN/Inf exactly when the true result is, in any order.
    nan_a = a.scales == SCALE_NAN
    nan_b = b.scales == SCALE_NAN
    if nan_a.any() or nan_b.any() or not fa.all() or not fb.all():
        da = a.dequantize(np.float64)
        db = b.dequantize(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            f = np.einsum("mk,kn->mn", da, db)
        special = ~np.isfinite(f)
        out[special] = f[special].astype(dt)
    return out


def mx_dot(a: MXArray, b: MXArray, *, out_dtype: Any = np.float32) -> np.floating:
    """The MX dot product of two 1-D MX vectors (OCP MX v1.0 section 6.2), exact and then
    rounded once to ``out_dtype`` (float32 by default).

    Raises:
        ValueError: operands not 1-D, lengths or block sizes differ.
    """
    _check_pair(a, b)
    if a.codes.ndim != 1 or b.codes.ndim != 1:
        raise ValueError(f"a, b: expected 1-D operands, got shapes {a.shape} and {b.shape}")
    if a.shape != b.shape:
        raise ValueError(f"b: length {b.shape[0]} does not match a's length {a.shape[0]}")
    row = MXArray(a.codes[None, :], a.scales[None, :], a.fmt, a.block_size, 1)
    col = MXArray(b.codes[:, None], b.scales[:, None], b.fmt, b.block_size, 0)
    return mx_matmul(row, col, out_dtype=out_dtype)[0, 0]
