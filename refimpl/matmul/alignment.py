"""Aligned sums: the fixed-point arithmetic of the truncated fused dot-product units.

The NVIDIA block FMA (:mod:`refimpl.matmul.blockfma`), the Blackwell block-scaled MMA
(:mod:`refimpl.matmul.blockscaled`) and the AMD CDNA3 matrix cores
(:mod:`refimpl.matmul.matrixcore`) share one arithmetic: every term gets an exponent
(the exponent field of its inputs, not renormalised), the terms are aligned to the
largest exponent eta, truncated toward zero on the grid 2^(eta - F), added exactly, and
the sum is rounded into an accumulator. This module holds those steps, each as a plain
version on exact rationals and a vectorised float64 one:

- exponents: :func:`exponent_of` (plain), :func:`exponents` (vectorised), with
  :data:`NO_EXPONENT` marking a term that has none (zero or not finite) and
  :func:`emin_pair` for operands of two formats;
- truncation: :func:`trunc_toward_zero` (plain), :func:`truncated_sum` (vectorised);
- the accumulator: :class:`AccumulatorFormat`, :func:`round_fraction` (plain) and
  :func:`round_into` (vectorised).
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Optional, Union

import numpy as np

from refimpl.rational import floor_log2, round_rational

#: the exponent of an input or input pair below its format's smallest normal: None (its
#: own floor(log2 |x|)), an int, or a pair (emin_a, emin_b) for operands of two formats
EminLike = Union[None, int, "tuple[Optional[int], Optional[int]]"]

#: the exponent of a term without one (zero, or not finite): far below every real
#: exponent, so that a sum of two of them stays below ``NO_EXPONENT // 2`` too
NO_EXPONENT = np.int64(-(1 << 20))


@dataclass(frozen=True)
class AccumulatorFormat:
    """The accumulator an aligned sum rounds into.

    Args:
        name: ``"fp32"`` or ``"fp16"``.
        bits: fraction bits kept (FP32 23, the E8M13 FP8 accumulator 13, FP16 10).
        emin: exponent of the smallest normal number (FP32 -126, FP16 -14); below it
            the spacing stays 2^(emin - bits).
        emax: exponent of the largest finite binade (FP32 127, FP16 15).
        rounding: ``"toward_zero"`` or ``"nearest_even"``.
        overflow: ``"inf"`` (a sum past the range gives Inf of its sign, also when
            rounding toward zero) or ``"saturate"`` (the largest finite value).
    """

    name: str
    bits: int
    emin: int
    emax: int
    rounding: str
    overflow: str = "inf"

    @property
    def fmax(self) -> float:
        return (2.0 - 2.0 ** -self.bits) * 2.0 ** self.emax


def emin_pair(v: EminLike) -> tuple[Optional[int], Optional[int]]:
    """``v`` as a pair (emin_a, emin_b): an int or None stands for both operands."""
    return tuple(v) if isinstance(v, tuple) else (v, v)  # type: ignore[return-value]


def trunc_toward_zero(x: Fraction) -> int:
    """The integer part of ``x``, toward zero (Python's // floors)."""
    return x.numerator // x.denominator if x >= 0 else -((-x.numerator) // x.denominator)


def round_fraction(x: Fraction, acc: AccumulatorFormat) -> float:
    """Exact rational ``x`` rounded into ``acc`` (plain version):
    :func:`refimpl.rational.round_rational` on the accumulator's grid and with its
    overflow rule. Returns a float (signed zero for a non-zero ``x`` that underflows, +0
    for ``x == 0``)."""
    return round_rational(x, acc.bits + 1, acc.emin, acc.emax, acc.rounding,
                          overflow=acc.overflow)


def exponent_of(x: float, emin: Optional[int]) -> int:
    """floor(log2 |x|) of a finite non-zero ``x``, raised to ``emin`` (the format's
    exponent field) when given: the plain counterpart of :func:`exponents`."""
    e = floor_log2(abs(Fraction(x)))
    return e if emin is None else max(e, emin)


def exponents(x: np.ndarray, emin: Optional[int]) -> np.ndarray:
    """floor(log2 |x|) of finite non-zero float64 ``x``, raised to ``emin`` (the format's
    exponent field); any value elsewhere (those terms are masked by the callers)."""
    mag = np.abs(x)
    _, ex = np.frexp(np.where(np.isfinite(mag), mag, 0.0))
    e = ex.astype(np.int64) - 1
    return e if emin is None else np.maximum(e, emin)


def truncated_sum(terms: np.ndarray, exps: np.ndarray, fraction_bits: int,
                  floor: Optional[int]) -> np.ndarray:
    """The exact sum of ``terms`` (..., m), each truncated toward zero to the grid
    2^(eta - F), eta the largest of ``exps`` (``NO_EXPONENT`` marks a term without an
    exponent: zero, or not finite) raised to ``floor``. Finite float64 in and out.

    Exactness: a term is below 2^(eta + 2 + g) with g = 0 for products of two values
    (significands below 2 each) and g <= 10 for the group sums of the block-scaled
    kinds, so the scaled terms are integers below 2^(F + 12) and m + 1 of them add
    exactly in float64 whenever (m + 1) 2^(F + 12) <= 2^53 (checked by the callers'
    parameter validation); the scalings are powers of two (exact, no overflow: the
    result is a float64 value of at most 53 bits above 2^(eta - F) >= 2^-1100 * ...).
    """
    eta = exps.max(axis=-1)
    none = eta == NO_EXPONENT
    if floor is not None:
        eta = np.where(none, eta, np.maximum(eta, floor))
    shift = np.where(none, 0, fraction_bits - eta).astype(np.int64)
    scaled = np.ldexp(terms, shift[..., None].astype(np.int32))
    total = np.trunc(scaled).sum(axis=-1)  # integers below 2^53: exact in any order
    total = np.where(total == 0, 0.0, total)  # an exact zero sum is +0
    return np.ldexp(total, (-shift).astype(np.int32))


def round_into(d: np.ndarray, acc: AccumulatorFormat) -> np.ndarray:
    """Float64 ``d`` (exact, or rounded to odd at 53 bits when ``acc`` rounds to
    nearest) rounded into ``acc``; +-0 stays, NaN and Inf pass through."""
    mag = np.abs(d)
    finite = np.isfinite(mag)
    m = np.where(finite, mag, 0.0)
    _, ex = np.frexp(m)
    e = np.maximum(ex.astype(np.int64) - 1, acc.emin)
    q = np.ldexp(m, (acc.bits - e).astype(np.int32))  # exact: a power-of-two scaling
    # np.rint rounds half to even
    q = np.trunc(q) if acc.rounding == "toward_zero" else np.rint(q)
    y = np.ldexp(q, (e - acc.bits).astype(np.int32))
    big = y >= 2.0 ** (acc.emax + 1)
    y = np.where(big, np.inf if acc.overflow == "inf" else acc.fmax, y)
    y = np.where(finite, y, mag)
    return np.copysign(y, d)
