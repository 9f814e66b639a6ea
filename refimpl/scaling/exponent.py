"""Exact binary exponents of floating-point values.

Block scaling is mostly a question of which power of two a block gets. Every rule here is
computed from the exponent field (``numpy.frexp``, which is exact by definition), never
from a floating-point ``log2``: float32 ``log2(7.9999995)`` returns 3.0, while the exponent
bits say 2 (OCP MX v1.0 section 6.3 takes ``floor(log2(amax))`` from the exponent).

All functions take finite, nonzero magnitudes; callers deal with zero, Inf and NaN first.
"""
from __future__ import annotations

import numpy as np

__all__ = ["floor_log2", "ceil_log2", "ceil_log2_ratio", "round_log2"]


def floor_log2(a: np.ndarray) -> np.ndarray:
    """``floor(log2(|a|))`` exactly, as int64, for finite nonzero ``a`` (subnormals too).

    ``frexp`` writes ``a = m * 2**e`` with ``0.5 <= |m| < 1``, so ``floor(log2|a|) = e - 1``.
    """
    _, e = np.frexp(np.asarray(a))
    return e.astype(np.int64) - 1


def ceil_log2(a: np.ndarray) -> np.ndarray:
    """``ceil(log2(|a|))`` exactly, as int64: one more than ``floor_log2`` unless ``|a|`` is
    a power of two (the "any mantissa bit set" test)."""
    m, e = np.frexp(np.abs(np.asarray(a)))
    return e.astype(np.int64) - 1 + (m != 0.5)


def round_log2(a: np.ndarray, mbits: int) -> np.ndarray:
    """``floor(log2(r))`` where ``r`` is ``|a|`` rounded to ``mbits`` fraction bits of its
    significand with round-half-to-even.

    Rounding only changes the exponent when it carries the significand up to 2; that
    happens exactly when the significand is at least ``2 - 2**-(mbits+1)`` (the tie there
    rounds to 2.0, the even neighbour, as it would under ties-away).
    """
    m, e = np.frexp(np.abs(np.asarray(a)))
    threshold = 1.0 - 2.0 ** -(mbits + 2)  # m = significand / 2
    return e.astype(np.int64) - 1 + (m.astype(np.float64) >= threshold)


def ceil_log2_ratio(a: np.ndarray, b: float) -> np.ndarray:
    """The smallest integer ``k`` with ``|a| <= b * 2**k``, exactly (``ceil(log2(|a|/b))``
    without forming the rounded quotient). ``b`` is a positive finite float.

    With ``|a| = ma * 2**ea`` and ``b = mb * 2**eb`` (``frexp``, both ``m`` in [0.5, 1)),
    ``ma / mb`` lies in (1/2, 2), so ``k = ea - eb`` when ``ma <= mb`` and one more otherwise.
    """
    ma, ea = np.frexp(np.abs(np.asarray(a)))
    mb, eb = np.frexp(float(b))
    return ea.astype(np.int64) - int(eb) + (ma.astype(np.float64) > mb)
