"""Error-free transformations of binary64 arithmetic, and rounding to odd.

An error-free transformation returns the rounded result of an operation together with
its exact rounding error, both as float64 values, so that no information is lost:

- :func:`two_sum`: ``a + b = s + e`` exactly, ``s = fl(a + b)`` (Knuth, TAOCP vol. 2,
  3rd ed., section 4.2.2, Theorem B; Moller 1965). Six operations, no branch, any
  ordering of ``|a|`` and ``|b|``.
- :func:`split`: ``a = hi + lo`` exactly with ``hi`` holding the leading ``53 - s``
  bits and ``lo`` the rest, both with at most ``53 - s`` and ``s`` significant bits
  (Veltkamp's splitting, in Dekker, "A floating-point technique for extending the
  available precision", Numer. Math. 18, 1971, section 5).
- :func:`two_product`: ``a * b = p + e`` exactly, ``p = fl(a * b)`` (Dekker 1971,
  ``mul12``), from two Veltkamp splits, without a fused multiply-add.
- :func:`round_to_odd` and :func:`add_round_to_odd`: the float64 result rounded to
  *odd* (an inexact result takes the neighbour with an odd last bit). Boldo and
  Melquiond, "Emulation of FMA and correctly rounded sums: proved algorithms using
  rounding to odd", IEEE Trans. Computers 57(4), 2008, Theorem 1: for a target of
  precision ``p <= 51`` (``p + 2 <= 53``) and the same exponent range or a narrower one,
  ``RN_p(RO_53(x)) = RN_p(x)``: one round-to-odd at float64 followed by one rounding to
  the narrower format is a single correct rounding of the exact ``x``.

Special-value policy: the transformations are exact for finite operands whose results do
not overflow (and, for :func:`split` and :func:`two_product`, whose partial products
neither overflow nor underflow: see each function); outside that range the error terms
are meaningless (NaN or Inf) and the callers mask them. No function sets the floating-
point error state: callers that expect Inf or NaN wrap them in ``np.errstate``.
All functions are elementwise on NumPy arrays (or scalars) and use only IEEE 754 ``+``,
``-``, ``*`` and ``nextafter`` in a fixed order: the same bytes on every machine.
"""
from __future__ import annotations

import numpy as np

__all__ = ["VELTKAMP_SPLITTER", "two_sum", "split", "two_product", "round_to_odd",
           "add_round_to_odd"]

#: Veltkamp's constant for binary64, 2^27 + 1: ``split`` into two halves of 26 bits
VELTKAMP_SPLITTER = 134217729.0


def two_sum(a, b):
    """``(s, e)`` with ``s = fl(a + b)`` and ``a + b = s + e`` exactly (Knuth's TwoSum).

    Exact for finite ``a``, ``b`` whose sum does not overflow; ``e`` is then at most half
    an ulp of ``s``. Float64 arrays or scalars, broadcast together.
    """
    s = a + b
    bp = s - a
    return s, (a - (s - bp)) + (b - bp)


def split(a, bits: int = 27):
    """Veltkamp's split ``(hi, lo)``: ``a = hi + lo`` exactly, ``hi`` the value rounded to
    ``53 - bits`` significant bits and ``|lo| <= ulp(hi) / 2`` with at most ``bits - 1``
    significant bits besides its sign (Dekker 1971, section 5).

    The default ``bits = 27`` (the constant :data:`VELTKAMP_SPLITTER`) gives two halves
    whose products are exact in float64. Exact while ``(2^bits + 1) a`` does not
    overflow (``|a| < 2^(1023 - bits)``); ``lo`` may be subnormal without loss.
    """
    c = (VELTKAMP_SPLITTER if bits == 27 else float(2**bits + 1)) * a
    hi = c - (c - a)
    return hi, a - hi


def two_product(a, b):
    """``(p, e)`` with ``p = fl(a * b)`` and ``a * b = p + e`` exactly (Dekker's
    ``mul12``: two Veltkamp splits, four exact partial products).

    Exact when neither split overflows (``|a|, |b| < 2^996``) and no partial product
    underflows (the callers check the range: ``|a b|`` well above 2^-970, and normal
    ``a`` and ``b``).
    """
    p = a * b
    ah, al = split(a)
    bh, bl = split(b)
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def round_to_odd(s, e):
    """``RO_53(s + e)`` for ``s = fl(x)`` and the exact error ``e = x - s`` (as
    :func:`two_sum` or :func:`two_product` give them): ``s`` when ``e == 0``, otherwise
    whichever of ``s`` and its float64 neighbour on the side of ``e`` has an odd last
    bit (the exact ``x`` lies strictly between the two).

    Non-finite ``s`` passes through. Returns a new float64 array.
    """
    s = np.asarray(s, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        inexact = (e != 0) & np.isfinite(s)
    odd = (s.view(np.int64) & 1).astype(bool)
    toward = np.nextafter(s, np.where(e > 0, np.inf, -np.inf))
    return np.where(inexact & ~odd, toward, s)


def add_round_to_odd(x, y):
    """``RO_53(x + y)`` for float64 arrays: the float64 sum rounded to odd (TwoSum, then
    :func:`round_to_odd`). Rounding the result once more to a format of at most 51
    significand bits is one correct rounding of the exact ``x + y`` (module docstring);
    used to emulate an FMA, or any single rounding of ``a + b c`` with ``b c`` exact, in
    a narrower format without double rounding. NaN and Inf follow IEEE addition.
    """
    with np.errstate(invalid="ignore", over="ignore"):
        s, e = two_sum(np.asarray(x, dtype=np.float64), y)
        return round_to_odd(s, e)
