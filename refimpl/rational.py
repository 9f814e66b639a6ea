"""Exact rationals rounded once to a binary floating-point grid.

The plain versions of every model in this package (the Fraction references the fast paths
are tested against) end by rounding an exact rational to some binary format: FP32 or
FP16 with or without an exponent limit, a tensor-core accumulator of 13 or 23 fraction
bits, a float64 result in a directed mode, a number format of the registry.
:func:`round_rational` is that one rounding (IEEE 754-2019 sections 4.3 and 7.4;
stochastic rounding as in the IEEE P3109 interim report).

The grid of precision ``p`` (significand bits, the implicit one included) and minimum
normal exponent ``emin``: the values ``n 2^(e - p + 1)`` with ``2^(p-1) <= n < 2^p``
for ``e >= emin`` (normal) and, with ``subnormals``, ``n 2^(emin - p + 1)`` for
``0 <= n < 2^(p-1)`` (zero and the subnormals: gradual underflow, IEEE 754-2019 3.3).
Without an ``emax`` the grid goes on above; with it, the largest finite value is
``(2 - 2^(1-p)) 2^emax``.

"Even" in a tie means the candidate with an even *index* in the grid, counted from its
smallest element (0 with subnormals, ``2^emin`` without): for ``p >= 2`` the usual even
last significand bit; for ``p = 1`` (E8M0) the even exponent field, as the format codecs
count codes.
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Optional, Union

__all__ = ["ROUNDINGS", "OVERFLOWS", "floor_log2", "round_rational"]

#: the rounding modes of :func:`round_rational` (IEEE 754-2019 4.3; P3109 stochastic)
ROUNDINGS = ("nearest_even", "nearest_away", "toward_zero", "toward_positive",
             "toward_negative", "stochastic")

#: what a result beyond the largest finite value gives (with ``emax``): ``"ieee"`` Inf
#: for round-to-nearest and for a directed mode that rounds away from zero, the largest
#: finite value otherwise (IEEE 754-2019 7.4); ``"inf"`` Inf in every mode (the tensor
#: cores' exponent overflow); ``"saturate"`` the largest finite value in every mode
OVERFLOWS = ("ieee", "inf", "saturate")

Real = Union[Fraction, int, float]


def floor_log2(a: Union[Fraction, int]) -> int:
    """``floor(log2 a)`` of a positive rational (or int), exactly.

    With ``nb`` and ``db`` the bit lengths of numerator and denominator,
    ``2^(nb-1-db) < a < 2^(nb-db+1)``: ``e = nb - db`` is the answer or one more than it.

    Raises:
        ValueError: ``a <= 0``.
    """
    num, den = int(a.numerator), int(a.denominator)
    if num <= 0:
        raise ValueError(f"floor_log2 needs a positive value, got {a}")
    return _floor_log2(num, den)


def _floor_log2(num: int, den: int) -> int:
    e = num.bit_length() - den.bit_length()
    return e - 1 if (den << e if e >= 0 else den) > (num if e >= 0 else num << -e) else e


def round_rational(
    x: Real,
    precision: int,
    emin: int,
    emax: Optional[int] = None,
    rounding: str = "nearest_even",
    *,
    overflow: str = "ieee",
    subnormals: bool = True,
    random_bits: Optional[int] = None,
    nbits: int = 0,
) -> float:
    """``x`` rounded once to the binary grid of ``precision`` bits and minimum normal
    exponent ``emin`` (module docstring), as a Python float.

    Special values: ``x == 0`` gives +0.0 (-0.0 for the float -0.0); a non-zero ``x``
    that rounds to zero gives the zero of its sign. With ``emax``, a result beyond the
    largest finite value follows ``overflow`` (:data:`OVERFLOWS`); without it, results
    past float64's range are Inf of the sign of ``x``. Without ``subnormals`` a
    magnitude below ``2^emin`` becomes ``2^emin`` (the grid's smallest element: E8M0 has
    no zero) in every mode.

    Args:
        x: a finite rational (Fraction, int or float: a float is taken exactly).
        precision: significand bits ``p``, 1..53.
        emin: exponent of the smallest normal value; ``emin - p + 1 >= -1074`` (the grid
            must lie in float64, so that the returned float is the rounded value).
        emax: exponent of the largest finite binade, or None (no upper limit).
        rounding: one of :data:`ROUNDINGS`.
        overflow: one of :data:`OVERFLOWS` (used only with ``emax``).
        subnormals: whether the grid continues below ``2^emin`` down to zero.
        random_bits, nbits: stochastic rounding only: the magnitude is rounded away from
            zero when ``floor(v 2^nbits) + random_bits >= 2^nbits``, ``v`` the dropped
            fraction of an ulp (checked only for an inexact ``x``).

    Returns:
        the rounded value (exact in float64), or +-Inf.

    Raises:
        ValueError: a non-finite ``x``, a grid float64 cannot hold, an unknown rounding
            mode or overflow rule, random bits out of range.
    """
    if rounding not in ROUNDINGS:
        raise ValueError(f"rounding must be one of {ROUNDINGS}, got {rounding!r}")
    if overflow not in OVERFLOWS:
        raise ValueError(f"overflow must be one of {OVERFLOWS}, got {overflow!r}")
    if not 1 <= precision <= 53 or emin - precision + 1 < -1074:
        raise ValueError(f"the grid of precision {precision} and emin {emin} does not lie "
                         "in float64 (need 1 <= precision <= 53, emin - precision + 1 "
                         ">= -1074)")
    if isinstance(x, float):
        if not math.isfinite(x):
            raise ValueError(f"round_rational needs a finite x, got {x}")
        if x == 0:
            return float(x)
        num, den = x.as_integer_ratio()
    elif isinstance(x, (Fraction, int)) and not isinstance(x, bool):
        num, den = int(x.numerator), int(x.denominator)
    else:
        num, den = Fraction(x).as_integer_ratio()
    num, den = int(num), int(den)
    if num == 0:
        return 0.0
    negative = num < 0
    num = -num if negative else num
    e = _floor_log2(num, den)
    if not subnormals and e < emin:
        n, qe, eb = 1 << (precision - 1), emin - precision + 1, emin
    else:
        eb = max(e, emin)  # the binade whose spacing applies
        qe = eb - precision + 1  # the quantum is 2^qe
        if qe >= 0:
            n, rem = divmod(num, den << qe)
            d = den << qe
        else:
            n, rem = divmod(num << -qe, den)
            d = den
        if rem:
            n += _round_up(rounding, negative, 2 * rem, d, n, eb - emin, precision,
                           subnormals, random_bits, nbits, rem)
    if emax is not None and (eb > emax or (eb == emax and n >> precision)):
        away = {"nearest_even": True, "nearest_away": True, "toward_zero": False,
                "toward_positive": not negative, "toward_negative": negative,
                "stochastic": False}[rounding]
        if overflow == "inf" or (overflow == "ieee" and away):
            return -math.inf if negative else math.inf
        n, qe = (1 << precision) - 1, emax - precision + 1
    try:
        value = math.ldexp(n, qe)
    except OverflowError:
        value = math.inf
    return -value if negative else value


def _round_up(rounding: str, negative: bool, twice_rem: int, d: int, n: int, binade: int,
              precision: int, subnormals: bool, random_bits: Optional[int], nbits: int,
              rem: int) -> int:
    """1 when the magnitude rounds up from ``n`` quanta (the dropped part is
    ``twice_rem / (2 d)`` of a quantum, non-zero), else 0."""
    if rounding == "nearest_even":
        if twice_rem != d:
            return int(twice_rem > d)
        # a tie: the neighbour with the even grid index (module docstring)
        index = (binade << (precision - 1)) + n - (0 if subnormals else 1 << (precision - 1))
        return index & 1
    if rounding == "nearest_away":
        return int(twice_rem >= d)
    if rounding == "toward_zero":
        return 0
    if rounding == "toward_positive":
        return int(not negative)
    if rounding == "toward_negative":
        return int(negative)
    if random_bits is None or not 0 <= random_bits < (1 << nbits):
        raise ValueError("stochastic rounding needs 0 <= random_bits < 2^nbits")
    return int(((rem << nbits) // d) + random_bits >= (1 << nbits))
