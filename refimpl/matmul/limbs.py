"""Exact sums of products by integer accumulation in limbs: the last resort of the
correctly rounded matrix product (:mod:`refimpl.matmul.screening`, step 4).

A finite float32 value is a = m_a 2^e_a with an integer |m_a| < 2^24, so a product of two
is an integer M < 2^48 times 2^E. The products of one output are accumulated exactly into
int64 limbs of 24 bits (positional, relative to the smallest exponent), carries are
propagated, and the leading 53 bits are taken with round-to-odd (the sticky bit ORs
everything below), so that one final round-to-nearest-even to any format of at most 51
bits is correct (Boldo and Melquiond, IEEE TC 57(4), 2008, Theorem 1; see
:mod:`refimpl.eft`). No floating-point addition takes part: the bytes cannot depend on
any summation order.
"""
from __future__ import annotations

import numpy as np

__all__ = ["exact_row_sums"]

_LIMB = 24
_LIMB_MASK = (1 << _LIMB) - 1
_PAD = 3  # low limbs kept free so that the top four limbs always exist
#: k processed per slice of limb accumulation: 2^14 terms below 2^47 sum below 2^61
_K_SLICE = 1 << 14


def exact_row_sums(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The exact sums ``sum_k a[r, k] b[r, k]`` of each row ``r`` of the float64 arrays
    ``a`` and ``b`` (rows x k, holding finite float32 values), rounded to odd at float64
    precision (module docstring). An exact zero sum is +0, or -0 when every product is
    -0 (and there is at least one: IEEE 754-2019 section 6.3)."""
    ma, ea = _significands(a)
    mb, eb = _significands(b)
    return _exact_sums(ma, ea, np.signbit(a), mb, eb, np.signbit(b))


def _significands(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """x = m * 2^e with int64 m, |m| < 2^24 (x finite float32 values held in float64)."""
    frac, exp = np.frexp(x)
    return (frac * (1 << 24)).astype(np.int64), exp.astype(np.int64) - 24



def _exact_sums(
    ma: np.ndarray, ea: np.ndarray, sa: np.ndarray,
    mb: np.ndarray, eb: np.ndarray, sb: np.ndarray,
) -> np.ndarray:
    """Exact sums of rows of products, as float64 rounded to odd (signed zeros per IEEE).

    ``ma, ea, sa`` (rows x k): significand, exponent, sign bit of the left factors;
    ``mb, eb, sb`` the right factors, already gathered to the same rows.
    """
    rows, k = ma.shape
    m = ma * mb
    e = ea + eb
    nz = m != 0
    big = np.int64(1 << 40)
    emin = np.min(np.where(nz, e, big), axis=1, initial=big)
    off = np.where(nz, e - emin[:, None], 0)
    absm = np.abs(m)
    limb = off // _LIMB + _PAD
    shift = off % _LIMB
    neg = m < 0
    lo = np.where(neg, -((absm & _LIMB_MASK) << shift), (absm & _LIMB_MASK) << shift)
    hi = np.where(neg, -((absm >> _LIMB) << shift), (absm >> _LIMB) << shift)
    nl = int(limb.max(initial=_PAD)) + 4
    acc = np.zeros((rows, nl), dtype=np.int64)
    flat = acc.reshape(-1)
    base = (np.arange(rows, dtype=np.int64) * nl)[:, None]
    for k0 in range(0, k, _K_SLICE):
        sl = slice(k0, k0 + _K_SLICE)
        np.add.at(flat, (base + limb[:, sl]).ravel(), lo[:, sl].ravel())
        np.add.at(flat, (base + limb[:, sl] + 1).ravel(), hi[:, sl].ravel())
        _carry(acc)
    negative = acc[:, -1] < 0
    acc[negative] = -acc[negative]
    _carry(acc)
    nonzero = acc != 0
    any_nz = nonzero.any(axis=1)
    h = nl - 1 - np.argmax(nonzero[:, ::-1], axis=1)  # highest non-zero limb (>= _PAD)
    h = np.where(any_nz, h, _PAD)
    r = np.arange(rows)
    d = [acc[r, h - i] for i in range(4)]
    below = np.cumsum(nonzero, axis=1)
    sticky = np.where(h >= 4, below[r, np.maximum(h - 4, 0)] > 0, False)
    xh = (d[0] << _LIMB) | d[1]  # 25..48 bits (d[0] >= 1)
    zl = (d[2] << _LIMB) | d[3]  # 48 bits
    nbits = np.frexp(np.maximum(xh, 1).astype(np.float64))[1].astype(np.int64)
    drop = nbits - 5  # 96-bit window (xh, zl) minus 53 kept bits
    t = (xh << (48 - drop)) | (zl >> drop)
    inexact = ((zl & ((np.int64(1) << drop) - 1)) != 0) | sticky
    t = t | inexact.astype(np.int64)  # round to odd
    scale = drop + _LIMB * (h - _PAD - 3) + emin
    val = np.ldexp(t.astype(np.float64), np.where(any_nz, scale, 0).astype(np.int32))
    val = np.where(negative, -val, val)
    # exact zero: -0 only when every product is -0 (and there is at least one)
    all_neg_zero = (k > 0) & np.all(~nz & (sa ^ sb), axis=1)
    zero = np.where(all_neg_zero, -0.0, 0.0)
    return np.where(any_nz, val, zero)



def _carry(acc: np.ndarray) -> None:
    """Propagate carries so that every limb but the top lies in [0, 2^24)."""
    for i in range(acc.shape[1] - 1):
        c = acc[:, i] >> _LIMB  # floor division: works for negative limbs
        acc[:, i] -= c << _LIMB
        acc[:, i + 1] += c
