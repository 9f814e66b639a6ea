"""Deterministic elementary functions in float64: ``exp``, ``expm1``, ``log``, ``tanh``.

Platform ``exp``/``log`` (libm, NumPy's SIMD loops) may differ in the last bit between
CPUs, so results built on them are not bit-reproducible. These functions use only
IEEE-754 operations whose result is fully specified (``+``, ``-``, ``*``, ``/``,
``rint``, ``ldexp``, ``frexp``, comparisons) in a fixed order, so they give the same bytes
on every machine.

Method (written from the papers, not from any library's code):

- ``exp(x)``, table-driven (Tang 1989, "Table-driven implementation of the exponential
  function in IEEE floating-point arithmetic", ACM TOMS 15(2)), N = 128:
  ``k = rint(x N / ln 2) = N m + j``; ``r = (x - k*L_HI) - k*L_LO`` where ``L_HI``
  (ln2/N to 35 bits) makes ``k*L_HI`` and ``x - k*L_HI`` exact (|k| < 2^18), so ``r``
  is rounded once, |r| < 0.00271; ``q = r (1 + r/2! + ... + r^4/5!)`` (truncation
  < 5.4e-19); ``e^x = 2^m (T_hi[j] + (T_lo[j] + T_hi[j] q))`` with
  ``T_hi + T_lo = 2^(j/N)`` to 2^-106; the scaling by ``2^m`` is exact for normal
  results. Error bound: everything before the last addition carries an absolute error
  below 2^-57.9 against a result of at least ``T_hi >= 1`` (or, for ``j = 0``, of
  ulp 2^-53 with error below 2^-59.3), so **exp is within 0.52 ulp** (0.5 for the last
  rounding + 0.02). Measured maximum (10^6 random samples, hill-climbing and
  hypothesis ``target`` against a 45-digit ``decimal`` reference): 0.512 ulp.
  Subnormal results are rounded a second time from the 53-bit value, by one multiply by
  a power of two: **within 0.77 * 2^-1074** (0.5 + 0.52/2 units; measured 0.750);
  results below 2^-1075 may become 0.
  Overflow gives ``+inf`` (for ``x`` within 0.52 ulp of the threshold possibly one
  rounding early).
- ``expm1(x)``: for ``|x| <= ln2/4``, ``x + x^2 (1/2! + ... + x^11/13!)`` (x is exact,
  the correction is below 0.1 of the result); elsewhere from the parts of ``exp``:
  ``(2^m T_hi - 1)`` as an exact pair (TwoSum) plus ``2^m (T_lo + T_hi q)``, rounded
  once. **Within 0.7 ulp** (measured maximum 0.644 ulp; no cancellation anywhere: the
  table branch has ``|result| >= 0.159``).
- ``log(x)``: ``x = 2^e (1 + f)`` with ``1 + f`` in ``[sqrt(1/2), sqrt(2))`` (``f``
  exact); ``s = f/(2+f)``, ``log(1+f) = f - (f^2/2 - s (f^2/2 + R(s^2)))`` (the
  atanh series, ``R`` through ``s^22``; the correction term is at most 0.21 |f|, so its
  rounding errors are scaled down), ``e ln2_hi + f`` as an exact pair (TwoSum) and one
  final rounding. **Within 1 ulp** (measured maximum 0.83 ulp).
- ``tanh(x) = -expm1(-2|x|) / (2 + expm1(-2|x|))`` with the sign of ``x``. **Within
  3 ulp** (measured maximum 2.50 ulp; the relative-error analysis gives 4.2 ulp).

All constants are exactly representable float64 values derived at import time from exact
rational or 60-digit ``decimal`` arithmetic (which is software and platform
independent), never from the platform's libm.

Special values: ``exp(-inf) = 0``, ``exp(+inf) = +inf``, overflow gives ``+inf``,
``log(0) = -inf``, ``log(x < 0) = nan``, ``log(+inf) = +inf``, ``tanh(+-inf) = +-1``;
NaN propagates everywhere.
"""
from __future__ import annotations

import decimal
from fractions import Fraction
from math import factorial

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["exp", "expm1", "log", "tanh", "LN2"]


def _decimal_ln2() -> decimal.Decimal:
    with decimal.localcontext() as ctx:
        ctx.prec = 60
        return decimal.Decimal(2).ln()


def _split(value: decimal.Decimal, bits: int) -> tuple[float, float]:
    """``value`` as ``hi + lo``: ``hi`` truncated to ``bits`` significant bits, ``lo`` the
    rest rounded to float64 (60-digit decimal arithmetic, exact up to 2^-190 relative)."""
    m, e = np.frexp(float(value))
    hi = float(np.ldexp(np.floor(np.ldexp(m, bits)), int(e) - bits))
    with decimal.localcontext() as ctx:
        ctx.prec = 60
        return hi, float(value - decimal.Decimal(hi))


_LN2_DEC = _decimal_ln2()
#: ln 2 correctly rounded to float64
LN2 = float(_LN2_DEC)
# LN2_HI: ln 2 truncated to 32 significant bits, so e * LN2_HI is exact for |e| < 2^21.
LN2_HI, LN2_LO = _split(_LN2_DEC, 32)

# exp: x = k ln2/N + r, k = 2^7 m + j, e^x = 2^m 2^(j/N) e^r (Tang 1989, N = 128)
_N_BITS = 7
_N = 1 << _N_BITS
with decimal.localcontext() as _ctx:
    _ctx.prec = 60
    # |k| <= 746 N / ln 2 < 2^18: with 35 significant bits, k * _L_HI is exact
    _L_HI, _L_LO = _split(_LN2_DEC / _N, 35)
    _INV_L = float(_N / _LN2_DEC)  # any nearby value works: only k depends on it
    # 2^(j/N) = _T_HI[j] + _T_LO[j], _T_HI in [1, 2), |error| < 2^-106
    _T = [decimal.Decimal(2) ** (decimal.Decimal(j) / _N) for j in range(_N)]
_T_HI = np.array([float(t) for t in _T])
with decimal.localcontext() as _ctx:
    _ctx.prec = 60
    _T_LO = np.array([float(t - decimal.Decimal(float(t))) for t in _T])
del _T
# e^r - 1 = r (1 + r/2! + ... + r^4/5!) on |r| <= ln2/(2N) + tiny < 0.00271: the
# truncation r^6/6! < 5.4e-19 is below 2^-60
_EXPR_COEF = [float(Fraction(1, factorial(n + 1))) for n in range(5)]  # 1/(n+1)!, n = 0..4
# expm1 for |x| <= ln2/4: x + x^2 (1/2! + x/3! + ... + x^11/13!), truncation
# |x|^14/14! < 2.5e-22 against a result above 0.9 |x|
_EXPM1_COEF = [float(Fraction(1, factorial(n))) for n in range(2, 14)]  # n = 2..13
# log(1+f) = 2 atanh(s), s = f/(2+f): R = 2 s^2/3 + 2 s^4/5 + ... + 2 s^22/23
# (|s| <= 0.1716; truncation 2 s^25/25 < 6e-21)
_LOG_COEF = [float(Fraction(2, 2 * n + 1)) for n in range(1, 12)]
_SQRT_HALF = 0.7071067811865476  # float64 nearest sqrt(1/2); any fixed split point works
_EXP_MAX = 709.79  # above this exp overflows to +inf
_EXP_MIN = -746.0  # below this exp rounds to 0
# inside [_FAST_MIN, _FAST_MAX] the result is normal and 2^m (m in [-1022, 1023]) is a
# normal float64, so one multiply scales (exactly)
_FAST_MIN = -708.3
_FAST_MAX = 709.0


def _horner(coef: list[float], x: np.ndarray) -> np.ndarray:
    p = x * coef[-1]
    p += coef[-2]
    for c in reversed(coef[:-2]):
        p *= x
        p += c
    return p


# Adding 1.5 * 2^52 rounds a float64 of magnitude below 2^51 to an integer (nearest,
# ties to even) and leaves that integer (plus 2^51) in the low 52 bits of the sum.
_SHIFTER = 1.5 * 2.0**52
_SHIFTER_BITS = np.array(_SHIFTER).view(np.int64)


#: elements per chunk: an elementwise pipeline of ~30 passes runs faster when its
#: temporaries stay in cache, but each pass also has a fixed cost (the results do not
#: depend on the chunking)
_CHUNK = 1 << 15


def exp(x: ArrayLike) -> np.ndarray:
    """``e**x`` in float64, bit-reproducible.

    Error (module docstring, tested): at most 0.52 ulp for normal results; below the
    normal range at most ``0.77 * 2^-1074`` absolute.

    Args:
        x: values (converted to float64).
    Returns:
        float64 array of the shape of ``x``.
    """
    return _elementwise(_exp, np.asarray(x, dtype=np.float64))


def _elementwise(fn, x: np.ndarray) -> np.ndarray:
    """``fn`` (elementwise on 1-D float64 arrays) applied to float64 ``x`` in cache-sized
    chunks. An array stored with its last two axes swapped (a transposed tile) is
    processed as it lies in memory, without a copy; the result has the layout of ``x``.
    The values do not depend on the chunking or the layout: every operation is
    elementwise."""
    if x.ndim >= 2 and not x.flags.c_contiguous and np.swapaxes(x, -1, -2).flags.c_contiguous:
        return np.swapaxes(_elementwise(fn, np.swapaxes(x, -1, -2)), -1, -2)
    flat = x.reshape(-1)
    if flat.size <= _CHUNK:
        return fn(flat).reshape(x.shape)
    out = np.empty_like(flat)
    step = -(-flat.size // -(-flat.size // _CHUNK))  # equal chunks of at most _CHUNK
    for i in range(0, flat.size, step):
        out[i:i + step] = fn(flat[i:i + step])
    return out.reshape(x.shape)


def _exp_parts(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``e^x = 2^m (t_hi + s)`` for x in [-746, 709.79] (no NaN): returns
    ``(m, t_hi, s, t)`` with m int64, ``t_hi = _T_HI[j]`` and ``s ~= t (e^r - 1) + t_lo``;
    ``t`` is the float64 array that held ``k`` (free for reuse)."""
    t = x * _INV_L
    t += _SHIFTER
    bits = t.view(np.int64)
    j = bits & (_N - 1)  # (k + 2^51) mod N = k mod N
    m = bits - _SHIFTER_BITS  # k
    m >>= _N_BITS  # floor(k / N)
    t -= _SHIFTER  # k as float64
    # r = x - k ln2/N: x - k*_L_HI is exact (k*_L_HI has <= 53 bits and the difference
    # is below 2^-8 with at most 53 bits), then one rounding with the low part
    r = np.multiply(t, _L_HI)
    np.subtract(x, r, out=r)
    t *= _L_LO
    r -= t
    q = _horner(_EXPR_COEF, r)
    q *= r  # e^r - 1
    t_hi = np.take(_T_HI, j)
    q *= t_hi
    q += np.take(_T_LO, j)
    return m, t_hi, q, t


def _exp(x: np.ndarray) -> np.ndarray:
    lo = np.min(x) if x.size else 0.0
    hi = np.max(x) if x.size else 0.0
    if lo >= _FAST_MIN and hi <= _FAST_MAX:  # False when x holds a NaN
        m, y, s, _ = _exp_parts(x)
        y += s
        m += 1023
        m <<= 52
        y *= m.view(np.float64)  # 2^m is normal and so is the result: exact
        return y
    # Clipping maps -inf to a value whose result rounds to 0 and +inf to one that
    # overflows to +inf; NaN passes through the clip and is restored at the end.
    xc = np.maximum(x, _EXP_MIN)
    np.minimum(xc, _EXP_MAX, out=xc)
    nan = np.isnan(xc)
    xc[nan] = 0.0
    m, y, s, _ = _exp_parts(xc)
    y += s
    # 2^m as two normal powers of two: the first multiply is exact, the second rounds
    # once (to a subnormal, to zero or to +inf)
    m1 = m >> 1
    m -= m1
    m1 += 1023
    m1 <<= 52
    y *= m1.view(np.float64)
    m += 1023
    m <<= 52
    with np.errstate(over="ignore"):
        y *= m.view(np.float64)
    y[nan] = np.nan
    return y


def expm1(x: ArrayLike) -> np.ndarray:
    """``e**x - 1`` in float64 without cancellation near 0, bit-reproducible; error
    at most 0.7 ulp (module docstring; tested)."""
    return _elementwise(_expm1, np.asarray(x, dtype=np.float64))


def _expm1(x: np.ndarray) -> np.ndarray:
    small = np.abs(x) <= 0.25 * LN2
    # |x| <= ln2/4: x + x^2 Q(x); x is exact, so only the small x^2 Q(x) (at most 0.1
    # of the result) carries error
    xs = np.where(small, x, 0.0)
    p = _horner(_EXPM1_COEF, xs)
    p *= xs
    p *= xs
    p += xs
    # elsewhere: e^x - 1 = (h - 1) + 2^m s with h = 2^m t_hi (exact); h - 1 = d + dl
    # exactly (TwoSum), then one rounding of d + (dl + 2^m s). Below -60, e^x - 1
    # rounds to -1; above 709, e^x >= 2^1022 and e^x - 1 rounds as e^x does.
    xb = np.where(small, 1.0, np.clip(x, -60.0, 709.0))
    nan = np.isnan(xb)
    xb[nan] = 1.0
    m, t_hi, s, _ = _exp_parts(xb)
    m += 1023
    m <<= 52
    scale = m.view(np.float64)  # 2^m, m in [-87, 1023]: normal
    h = t_hi * scale
    d = h - 1.0
    hv = d + 1.0
    dl = (h - hv) + (-1.0 - (d - hv))
    s *= scale
    dl += s
    d += dl
    d[nan] = np.nan
    out = np.where(small, p, d)
    huge = x > 709.0
    if huge.any():
        out[huge] = _exp(x[huge])
    # e^x - 1 has the sign of x, and no rounding changes a sign: this only gives
    # expm1(-0) = -0 (x + x^2 Q(x) would give +0)
    return np.copysign(out, x, out=out)


def log(x: ArrayLike) -> np.ndarray:
    """Natural logarithm in float64, bit-reproducible; error at most 1 ulp (module
    docstring; tested)."""
    x = np.asarray(x, dtype=np.float64)
    ok = np.isfinite(x) & (x > 0)
    xs = np.where(ok, x, 1.0)
    m, e = np.frexp(xs)  # m in [0.5, 1)
    low = m < _SQRT_HALF
    m = np.where(low, m * 2.0, m)  # exact
    e = np.where(low, e - 1, e).astype(np.float64)
    # log(1+f) = f - (hfsq - s (hfsq + R)), f = m - 1 exact (Sterbenz), hfsq = f^2/2,
    # s = f/(2+f): the correction term is at most 0.21 |f| (Tang; fdlibm's e_log.c)
    f = m - 1.0
    s = f / (2.0 + f)
    hfsq = 0.5 * f * f
    r = _horner(_LOG_COEF, s * s) * (s * s)
    corr = hfsq - (s * (hfsq + r) + e * LN2_LO)
    # e*LN2_HI + f as an exact pair (TwoSum), then one rounding of hi + (lo - corr)
    a = e * LN2_HI  # exact: <= 11 + 32 bits
    hi = a + f
    av = hi - f
    lo = (a - av) + (f - (hi - av))
    out = hi + (lo - corr)
    out = np.where(x == 0, -np.inf, out)
    out = np.where(x < 0, np.nan, out)
    out = np.where(x == np.inf, np.inf, out)
    return np.where(np.isnan(x), np.nan, out)


def tanh(x: ArrayLike) -> np.ndarray:
    """Hyperbolic tangent in float64, bit-reproducible; at most 3 ulp (tested)."""
    return _elementwise(_tanh, np.asarray(x, dtype=np.float64))


def _tanh(x: np.ndarray) -> np.ndarray:
    a = np.minimum(np.abs(x), 40.0)  # tanh(40) == 1 in float64
    u = _expm1(-2.0 * a)
    t = -u / (2.0 + u)
    return np.where(np.isnan(x), np.nan, np.copysign(t, x))
