"""Correctly rounded float32/float64 arithmetic and conversions for PTX instructions.

PTX ISA 9.7.3 (floating-point instructions) and 9.7.9.21 (``cvt``): the rounding
modifiers are ``.rn`` (nearest, ties to even), ``.rz`` (toward zero), ``.rm`` (toward
-inf) and ``.rp`` (toward +inf); integer-result conversions use ``.rni/.rzi/.rmi/.rpi``.
The kernels here take the canonical names of :mod:`refimpl.rounding_modes`
(``"nearest_even"``, ``"toward_zero"``, ``"toward_negative"``, ``"toward_positive"``:
the values of :class:`~refimpl.rounding_modes.RoundingMode`, compared as plain
strings); the instruction compilers map a PTX modifier to its name once, through
:data:`refimpl.rounding_modes.PTX_MODIFIERS`. Any other name, a PTX modifier included,
is refused with a ``ValueError``.

Method (IEEE 754-2019 section 4.3): a float32 operation is first evaluated in float64,
giving ``y = rn64(x)`` for the exact result ``x``, together with the *side* of the exact
result, ``sign(x - y)``, obtained without rounding error (the TwoSum error term for sums;
0 for products of two float32, which are exact; the sign of the exact residual
``a - r*b`` or ``a - r*r`` for quotients and square roots, where ``r*b`` is exact).
Because every float32 number and every midpoint between two float32 numbers is a float64
number and ``rn64`` is monotone, ``rn32(y)`` can differ from ``rn32(x)`` only when ``y``
is itself a float32 midpoint, and a directed rounding of ``x`` is decided by comparing
``x`` with the nearest float32 ``r``; both cases are settled by the side. This gives
single-rounded ``fma.rn.f32`` (never double-rounded through float64) and every directed
mode with NumPy vector arithmetic only. Float64 results in a directed mode (and
``fma.f64``) go through :class:`fractions.Fraction`, element by element.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from refimpl.eft import two_product, two_sum
from refimpl.rational import round_rational
from refimpl.rounding_modes import RoundingMode

__all__ = [
    "MODES",
    "round64_to32",
    "add_f32",
    "mul_f32",
    "fma_f32",
    "div_f32",
    "sqrt_f32",
    "exact_to_float",
    "fraction_op_f64",
    "fma_f64_rn",
    "float_to_int",
    "int_to_float",
]

#: the rounding modes of the float arithmetic kernels (IEEE 754-2019 section 4.3)
MODES = (RoundingMode.NEAREST_EVEN.value, RoundingMode.TOWARD_ZERO.value,
         RoundingMode.TOWARD_NEGATIVE.value, RoundingMode.TOWARD_POSITIVE.value)


def _bad_mode(mode: object) -> ValueError:
    return ValueError(f"rounding mode must be one of {MODES}, got {mode!r}")


def _check_mode(mode: str) -> None:
    if mode not in MODES:
        raise _bad_mode(mode)

_F32_MAX = float(np.finfo(np.float32).max)
_LOW29 = np.uint64((1 << 29) - 1)
_HALF29 = np.uint64(1 << 28)
_EXP64 = np.uint64(0x7FF << 52)
_TINY32 = np.uint64((1023 - 126) << 52)  # below 2**-126: float32 subnormal range
_OVERFLOW_MID = 2.0**128 - 2.0**103  # midpoint between FLT_MAX and 2**128


def round64_to32(y: np.ndarray, side: np.ndarray | int, mode: str) -> np.ndarray:
    """Round the exact value ``x`` to float32, given ``y = rn64(x)`` and ``sign(x - y)``.

    Args:
        y: float64 array, the exact result rounded to nearest float64.
        side: sign of (exact - y): -1, 0 or +1 per element (0 when y is exact).
        mode: one of :data:`MODES` ("nearest_even", "toward_zero", "toward_negative",
            "toward_positive").

    Raises:
        ValueError: ``mode`` is not one of :data:`MODES`.
    """
    y = np.asarray(y, dtype=np.float64)
    side = np.broadcast_to(np.sign(np.asarray(side, dtype=np.float64)), y.shape)
    r = y.astype(np.float32)
    r64 = r.astype(np.float64)
    finite = np.isfinite(y)
    # d = sign(x - r): from y when y != r (monotonicity), from side when y == r
    d = np.where(y != r64, np.sign(y - r64), side)
    d = np.where(finite, d, 0.0)
    if mode == "nearest_even":
        # y on a float32 midpoint (or the overflow threshold) with x off it: go to x's side
        lo = np.where(y > r64, r, np.nextafter(r, np.float32(-np.inf)))
        hi = np.where(y > r64, np.nextafter(r, np.float32(np.inf)), r)
        lo64, hi64 = lo.astype(np.float64), hi.astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            mid = np.where(np.isinf(hi64), np.sign(hi64) * _OVERFLOW_MID,
                           np.where(np.isinf(lo64), np.sign(lo64) * _OVERFLOW_MID,
                                    (lo64 + hi64) * 0.5))
        at_mid = finite & (y == mid) & (side != 0)
        r = np.where(at_mid & (side > 0), hi, np.where(at_mid & (side < 0), lo, r))
        return r.astype(np.float32)
    if mode == "toward_negative":
        step = d < 0
        return np.where(step, np.nextafter(r, np.float32(-np.inf)), r).astype(np.float32)
    if mode == "toward_positive":
        step = d > 0
        return np.where(step, np.nextafter(r, np.float32(np.inf)), r).astype(np.float32)
    if mode == "toward_zero":
        step = ((d < 0) & (r > 0)) | ((d > 0) & (r < 0))
        return np.where(step, np.nextafter(r, np.float32(0)), r).astype(np.float32)
    raise _bad_mode(mode)


def _zero_sign_rm(res: np.ndarray, exact_zero: np.ndarray, same_sign_zeros: np.ndarray,
                  mode: str) -> np.ndarray:
    # IEEE 754 section 6.3: an exact zero sum is -0 in roundTowardNegative, else +0,
    # except that the sum of two zeros of the same sign keeps that sign in every mode
    if mode != "toward_negative":
        return res
    return np.where(exact_zero & ~same_sign_zeros, np.float32(-0.0), res)


def _sum_to32(x: np.ndarray, y: np.ndarray, mode: str) -> np.ndarray:
    """The exact ``x + y`` of two float64 values rounded once to float32 in ``mode``:
    TwoSum gives ``rn64`` of the sum and the side of the exact value (IEEE 754-2019 6.3
    for the sign of an exact zero)."""
    s, e = two_sum(x, y)               # x + y = s + e exactly while s is finite
    e = np.where(np.isfinite(s), e, 0.0)
    r = round64_to32(s, e, mode)
    same = (x == 0) & (y == 0) & (np.signbit(x) == np.signbit(y))
    return _zero_sign_rm(r, (s == 0) & (e == 0), same, mode)


def add_f32(a: np.ndarray, b: np.ndarray, mode: str = "nearest_even") -> np.ndarray:
    """``add{.rnd}.f32``: correctly rounded a + b."""
    a = np.asarray(a, np.float32)
    b = np.asarray(b, np.float32)
    if mode == "nearest_even":
        return (a + b).astype(np.float32)
    return _sum_to32(a.astype(np.float64), b.astype(np.float64), mode)


def mul_f32(a: np.ndarray, b: np.ndarray, mode: str = "nearest_even") -> np.ndarray:
    """``mul{.rnd}.f32``: the float64 product of two float32 is exact, so one rounding."""
    a = np.asarray(a, np.float32)
    b = np.asarray(b, np.float32)
    if mode == "nearest_even":
        return (a * b).astype(np.float32)
    return round64_to32(a.astype(np.float64) * b.astype(np.float64), 0, mode)


_F32 = np.dtype(np.float32)


def fma_f32(a: np.ndarray, b: np.ndarray, c: np.ndarray,
            mode: str = "nearest_even") -> np.ndarray:
    """``fma.rnd.f32``: a*b + c computed exactly and rounded once (PTX ISA 9.7.3.6)."""
    if mode == "nearest_even" and getattr(a, "dtype", None) == _F32 and \
            getattr(b, "dtype", None) == _F32 and getattr(c, "dtype", None) == _F32:
        # float32 operands (the interpreter's registers): widen inside the ufuncs
        p = np.multiply(a, b, dtype=np.float64)   # exact: 24 + 24 bits
        s = np.add(p, c, dtype=np.float64)
        r = s.astype(np.float32)
        sv = s.view(np.uint64) if s.ndim else np.atleast_1d(s).view(np.uint64)
        if not (((sv & _LOW29) == _HALF29) | ((sv & _EXP64) < _TINY32)).any():
            return r
    a64 = np.asarray(a, np.float32).astype(np.float64)
    b64 = np.asarray(b, np.float32).astype(np.float64)
    c64 = np.asarray(c, np.float32).astype(np.float64)
    p = a64 * b64                      # exact: 24 + 24 bits
    if mode == "nearest_even":
        # fast path: rn32(rn64(x)) == rn32(x) unless rn64(x) is a float32 midpoint
        # (its 29 low significand bits are 1000...0) or lies in float32's subnormal
        # range, where midpoints sit elsewhere; only those elements need the error term
        s = p + c64
        r = s.astype(np.float32)
        sv = np.atleast_1d(s).view(np.uint64)
        suspect = ((sv & _LOW29) == _HALF29) | ((sv & _EXP64) < _TINY32)
        if not suspect.any():
            return r
        idx = np.flatnonzero(suspect.ravel())
        pf, cf = np.broadcast_to(p, s.shape).ravel()[idx], np.broadcast_to(c64, s.shape).ravel()[idx]
        out = np.atleast_1d(r).copy()
        out.ravel()[idx] = _sum_to32(pf, cf, mode)
        return out.reshape(np.shape(r))
    return _sum_to32(p, c64, mode)


def div_f32(a: np.ndarray, b: np.ndarray, mode: str = "nearest_even") -> np.ndarray:
    """``div.rnd.f32`` (IEEE division). In .rn, float64 division then rounding to float32
    is already correct (53 >= 2*24 + 2, Figueroa 1995); directed modes use the sign of
    the exact residual ``a - r*b`` (``r*b`` is exact in float64)."""
    a64 = np.asarray(a, np.float32).astype(np.float64)
    b64 = np.asarray(b, np.float32).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        y = a64 / b64
    if mode == "nearest_even":
        return y.astype(np.float32)
    r = y.astype(np.float32).astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        resid = a64 - r * b64
        side = np.where(np.isfinite(y) & np.isfinite(r), np.sign(resid) * np.sign(b64), 0.0)
    # side is sign(x - r); y == r there, so it is also sign(x - y)
    side = np.where(y == r, side, 0.0)
    return round64_to32(y, side, mode)


def sqrt_f32(a: np.ndarray, mode: str = "nearest_even") -> np.ndarray:
    """``sqrt.rnd.f32``: correctly rounded square root (same method as :func:`div_f32`)."""
    a64 = np.asarray(a, np.float32).astype(np.float64)
    with np.errstate(invalid="ignore"):
        y = np.sqrt(a64)
    if mode == "nearest_even":
        return y.astype(np.float32)
    r = y.astype(np.float32).astype(np.float64)
    with np.errstate(invalid="ignore"):
        side = np.where(np.isfinite(y) & (y == r), np.sign(a64 - r * r), 0.0)
    return round64_to32(y, side, mode)


# ------------------------------------------------------------------ exact (Fraction) path


def exact_to_float(x: Fraction, mantissa_bits: int, emin: int, emax: int,
                   mode: str) -> float:
    """Round the rational ``x`` (nonzero) to a binary float with ``mantissa_bits``
    significand bits (including the hidden one) and normal exponent range [emin, emax];
    returns a Python float (float32 values are exactly representable in it), overflow
    as IEEE 754-2019 section 7.4 gives it.

    Raises:
        ValueError: ``mode`` is not one of :data:`MODES`.
    """
    _check_mode(mode)
    return round_rational(x, mantissa_bits, emin, emax, mode)


def fma_f64_rn(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``fma.rn.f64``: a*b + c rounded once to nearest even.

    a*b + c = r + d exactly, with r = fl(sh + th) and d = (sh + th - r) + tl from
    error-free transformations (TwoProduct, TwoSum). When |d| is below half the gap
    from r to its neighbour on d's side, r is the correctly rounded result; the
    remaining elements (near a rounding boundary, non-finite, or outside the range where
    the transformations are exact) go through :func:`fraction_op_f64`."""
    a, b, c = np.broadcast_arrays(*(np.atleast_1d(np.asarray(x, np.float64)) for x in (a, b, c)))
    with np.errstate(all="ignore"):
        uh, ul = two_product(a, b)
        sh, sl = two_sum(uh, c)
        th, tl = two_sum(sl, ul)
        r, e = two_sum(sh, th)
        # x - r = e + tl; r is RN(x) when that lies strictly inside half the gap to the
        # neighbour of r on its side (the bound is inflated for its own rounding)
        up = np.where(np.abs(e) >= np.abs(tl), e, tl) > 0
        gap = np.where(up, np.nextafter(r, np.inf) - r, r - np.nextafter(r, -np.inf))
        bound = (np.abs(e) + np.abs(tl)) * (1 + 2.0**-50)
        safe = (bound < 0.5 * gap) & np.isfinite(r) & np.isfinite(gap)
        # exactness of TwoProduct: no overflow in the splits, no underflow in the parts
        big = 2.0**995
        safe &= (np.abs(a) < big) & (np.abs(b) < big) & (np.abs(c) < big)
        tiny = 2.0**-960
        safe &= ((np.abs(uh) > tiny) | (uh == 0) & ((a == 0) | (b == 0)))
        normal = 2.0**-1022  # Veltkamp splitting of subnormal inputs: slow path
        safe &= ((np.abs(a) >= normal) | (a == 0)) & ((np.abs(b) >= normal) | (b == 0))
        safe &= (np.abs(c) > tiny) | (c == 0)
        safe &= r != 0  # the sign of an exact zero needs the IEEE rules: slow path
    out = r.copy()
    bad = np.flatnonzero(~safe)
    if bad.size:
        out[bad] = fraction_op_f64("fma", [a[bad], b[bad], c[bad]], "nearest_even")
    return out


def fraction_op_f64(op: str, args: list[np.ndarray], mode: str) -> np.ndarray:
    """Float64 add/sub/mul/fma/div/sqrt with any rounding mode of :data:`MODES`,
    exactly (slow path).

    Raises:
        ValueError: ``mode`` is not one of :data:`MODES`.
    """
    _check_mode(mode)
    cols = [np.asarray(a, np.float64).ravel() for a in args]
    n = max(c.size for c in cols)
    cols = [np.broadcast_to(c, (n,)) for c in cols]
    out = np.empty(n, np.float64)
    with np.errstate(all="ignore"):
        for i in range(n):
            v = [float(c[i]) for c in cols]
            approx = {"add": lambda: v[0] + v[1], "sub": lambda: v[0] - v[1],
                      "mul": lambda: v[0] * v[1], "div": lambda: _fdiv(v[0], v[1]),
                      "fma": lambda: v[0] * v[1] + v[2],
                      "sqrt": lambda: float(np.sqrt(v[0]))}[op]()
            if not all(np.isfinite(x) for x in v) or (op == "div" and v[1] == 0) or \
                    (op == "sqrt" and v[0] <= 0):
                out[i] = approx if op != "fma" else _fma_special(v)
                continue
            fr = [Fraction(x) for x in v]
            if op == "sqrt":
                out[i] = _sqrt_exact(fr[0], mode)
                continue
            exact = {"add": lambda: fr[0] + fr[1], "sub": lambda: fr[0] - fr[1],
                     "mul": lambda: fr[0] * fr[1], "div": lambda: fr[0] / fr[1],
                     "fma": lambda: fr[0] * fr[1] + fr[2]}[op]()
            if exact == 0:
                if op in ("mul", "div"):
                    out[i] = approx
                else:
                    terms = [v[0], -v[1] if op == "sub" else v[1]] if op != "fma" \
                        else [v[0] * v[1] if v[0] * v[1] != 0 else
                              (-0.0 if np.signbit(v[0]) != np.signbit(v[1]) else 0.0), v[2]]
                    zeros = all(t == 0 for t in terms)
                    if zeros and np.signbit(terms[0]) == np.signbit(terms[1]):
                        out[i] = terms[0]  # same-signed zeros keep their sign
                    else:
                        out[i] = -0.0 if mode == "toward_negative" else 0.0
                continue
            out[i] = exact_to_float(exact, 53, -1022, 1023, mode)
    return out.reshape(np.broadcast(*[np.asarray(a) for a in args]).shape)


def _fdiv(a: float, b: float) -> float:
    return float(np.float64(a) / np.float64(b))


def _fma_special(v: list[float]) -> float:
    return float(np.float64(v[0]) * np.float64(v[1]) + np.float64(v[2]))


def _sqrt_exact(x: Fraction, mode: str) -> float:
    # the float64 square root is correctly rounded to nearest; settle directed modes by
    # squaring the candidate exactly
    r = float(np.sqrt(float(x)))
    fr = Fraction(r)
    if mode == "nearest_even" or fr * fr == x:
        return r
    below = fr * fr < x
    if mode in ("toward_negative", "toward_zero") and not below:
        return float(np.nextafter(r, 0.0))
    if mode == "toward_positive" and below:
        return float(np.nextafter(r, np.inf))
    return r


# ------------------------------------------------------------------------- conversions

_INT_RANGE = {
    ("s", 8): (-2**7, 2**7 - 1), ("s", 16): (-2**15, 2**15 - 1),
    ("s", 32): (-2**31, 2**31 - 1), ("s", 64): (-2**63, 2**63 - 1),
    ("u", 8): (0, 2**8 - 1), ("u", 16): (0, 2**16 - 1), ("u", 32): (0, 2**32 - 1),
    ("u", 64): (0, 2**64 - 1),
}


#: rounding to an integer in each mode (the float-to-integer and float-to-float
#: ``.rni/.rzi/.rmi/.rpi`` conversions)
INT_ROUND = {"nearest_even": np.rint, "toward_zero": np.trunc, "toward_negative": np.floor,
             "toward_positive": np.ceil}


def float_to_int(x: np.ndarray, kind: str, bits: int, mode: str) -> np.ndarray:
    """``cvt.{rni,rzi,rmi,rpi}.{s,u}N.fM``: round to an integer, saturate to the
    destination range (PTX ISA 9.7.9.21: float-to-integer conversions saturate), NaN -> 0.
    Returns the integer value as int64/uint64 bits of the destination width."""
    x = np.asarray(x, np.float64)
    rnd = INT_ROUND.get(mode)
    if rnd is None:
        raise _bad_mode(mode)
    with np.errstate(invalid="ignore"):
        r = rnd(x)
    lo, hi = _INT_RANGE[(kind, bits)]
    nan = np.isnan(r)
    if kind == "u" and bits == 64:
        big = r >= 2.0**64
        r = np.where(nan | (r < 0), 0.0, r)
        small = r < 2.0**63
        out = np.where(small, r, 0.0).astype(np.uint64)
        out = np.where(~small, (np.where(small, 0.0, r) - 2.0**63).astype(np.uint64)
                       + np.uint64(2**63), out)
        return np.where(big, np.uint64(2**64 - 1), out).astype(np.uint64)
    if kind == "s" and bits == 64:
        out = np.clip(np.where(nan, 0.0, r), -2.0**63, 2.0**63 - 1024)
        out = out.astype(np.int64)
        return np.where(r >= 2.0**63, np.int64(hi), out)
    r = np.where(nan, 0.0, np.clip(r, lo, hi))
    return r.astype(np.int64)


def int_to_float(v: np.ndarray, signed: bool, to_bits: int, mode: str) -> np.ndarray:
    """``cvt.rnd.f{32,64}.{s,u}N``: the integer rounded once to the float format.

    The magnitude is rounded to the format's significand (24 or 53 bits) in integer
    arithmetic, so that 64-bit integers are not double-rounded through float64. Mode
    "odd" rounds to odd (inexact results get a set last bit), which a later rounding to
    a format of at most 51 bits turns into the correctly rounded result."""
    v = np.asarray(v)
    if signed:
        vi = v.astype(np.int64)
        neg = vi < 0
        mag = np.where(neg, (~vi.astype(np.uint64)) + np.uint64(1), vi.astype(np.uint64))
    else:
        neg = np.zeros(v.shape, bool)
        mag = v.astype(np.uint64)
    p = 24 if to_bits == 32 else 53
    # bit length of each magnitude
    bl = np.zeros(mag.shape, np.int64)
    m = mag.copy()
    for s in (32, 16, 8, 4, 2, 1):
        big = m >= (np.uint64(1) << np.uint64(s))
        bl += np.where(big, s, 0)
        m = np.where(big, m >> np.uint64(s), m)
    bl += (m > 0).astype(np.int64)
    shift = np.maximum(bl - p, 0).astype(np.uint64)
    q = mag >> shift
    rem = mag - (q << shift)
    half = np.where(shift > 0, np.uint64(1) << (np.maximum(shift, np.uint64(1)) - np.uint64(1)),
                    np.uint64(0))
    inexact = rem != 0
    if mode == "nearest_even":
        up = inexact & ((rem > half) | ((rem == half) & ((q & np.uint64(1)) == 1)))
    elif mode == "toward_zero":
        up = np.zeros(q.shape, bool)
    elif mode == "toward_negative":
        up = inexact & neg
    elif mode == "toward_positive":
        up = inexact & ~neg
    elif mode == "odd":  # round to odd: sticky last bit, for a second rounding later
        q = q | inexact.astype(np.uint64)
        up = np.zeros(q.shape, bool)
    else:
        raise ValueError(f"rounding mode must be one of {MODES + ('odd',)}, got {mode!r}")
    q = q + up.astype(np.uint64)
    val = q.astype(np.float64) * np.exp2(shift.astype(np.float64))  # both exact
    val = np.where(neg, -val, val)
    return val.astype(np.float32) if to_bits == 32 else val
