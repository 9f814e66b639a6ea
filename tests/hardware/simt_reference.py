"""Independent references shared by the SIMT tests, written from the number formats'
definitions and exact arithmetic only (``fractions.Fraction``, Python integers,
``numpy.float16`` conversion); nothing here calls the code under test.

- :func:`round_fraction`: an exact rational to binary32/binary64 in the four IEEE 754
  rounding directions (IEEE 754-2019 section 4.3) named by their PTX modifiers; the
  rounding itself is the shared :func:`oracles.round_rational`.
- :func:`fma32`: single-rounded binary32 ``a*b + c``; :func:`zero_sign`: the sign of
  an exact zero result.
- :data:`FORMATS`, :func:`value` (finite codes decoded by :func:`oracles.code_value`),
  :func:`nearest_code`, :func:`round_code`, :func:`decode_table`: the small binary formats by sign, exponent, mantissa and bias
  (IEEE 754 binary16; bfloat16; TF32; OCP OFP8 E4M3/E5M2; OCP MX v1.0 section 5.3
  FP6/FP4), rounded by exact search of the sorted list of each format's values.
- :func:`f16_codes`, :func:`bf16_codes`: binary16 (through ``numpy.float16``) and
  bfloat16 codes with the PTX canonical NaN 0x7FFF.
- :func:`float_to_int`: PTX ISA ``cvt`` float-to-integer (round, saturate, NaN -> 0);
  :func:`c_div`, :func:`wrap`: C integer division and wrap-around.
"""
from __future__ import annotations

import bisect
import math
from fractions import Fraction
from functools import lru_cache

import numpy as np
from oracles import code_value, round_rational

MODES = ("rn", "rz", "rm", "rp")

# ------------------------------------------------------------- binary32 / binary64

#: PTX rounding modifiers (PTX ISA, "Rounding modifiers") -> IEEE 754-2019 section 4.3
#: rounding directions as :mod:`oracles` names them
PTX_ROUNDING = {"rn": "nearest_even", "rz": "toward_zero", "rm": "toward_negative",
                "rp": "toward_positive"}


def round_fraction(x: Fraction, mode: str, dtype=np.float32) -> float:
    """The exact rational ``x`` rounded to ``dtype`` (float32 or float64) with the PTX
    rounding modifier ``mode``: :func:`oracles.round_rational` under the PTX names.
    Overflow follows IEEE 754: rn gives +-inf from MAX + ulp/2 on; rz gives +-MAX; rm/rp
    give inf on their side and MAX on the other."""
    if mode not in PTX_ROUNDING:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    return float(round_rational(x, dtype, PTX_ROUNDING[mode]))


def zero_sign(a: float, b: float, c: float, mode: str) -> bool:
    """The sign bit of ``a*b + c`` when its exact value is zero (IEEE 754-2019 section
    6.3): a zero product and a zero addend of the same sign keep that sign; any other
    exact zero sum is +0, or -0 when rounding toward negative ("rm")."""
    psign = math.copysign(1.0, a) * math.copysign(1.0, b) < 0
    if (a == 0 or b == 0) and c == 0 and psign == (math.copysign(1.0, c) < 0):
        return psign
    return mode == "rm"


def fma32(a, b, c) -> np.ndarray:
    """Single-rounded float32 ``a*b + c`` elementwise (broadcast): the float64 product
    of two float32 values is exact and the float64 sum is correctly rounded, so its
    rounding to float32 is right unless the float64 sum lies exactly halfway between two
    float32 values (a possible double rounding); those elements are rounded from the
    exact Fraction sum."""
    a64, b64, c64 = np.broadcast_arrays(*(np.asarray(v, np.float32).astype(np.float64)
                                          for v in (a, b, c)))
    s = a64 * b64 + c64
    r = s.astype(np.float32)
    with np.errstate(over="ignore"):
        up = np.nextafter(r, np.float32(np.inf)).astype(np.float64)
        dn = np.nextafter(r, np.float32(-np.inf)).astype(np.float64)
    r64 = r.astype(np.float64)
    halfway = (s == (r64 + up) / 2) | (s == (r64 + dn) / 2)
    for i in zip(*np.nonzero(halfway)):
        exact = Fraction(float(a64[i])) * Fraction(float(b64[i])) + Fraction(float(c64[i]))
        r[i] = np.float32(round_fraction(exact, "rn"))
    return r


# ------------------------------------------------------------------ small formats

#: name -> (exponent bits, mantissa bits, bias, special values): "ieee" = the largest
#: exponent holds Inf and NaN; "fn" = only the all-ones magnitude is NaN (E4M3);
#: "none" = every code is finite (FP6, FP4)
FORMATS = {"fp16": (5, 10, 15, "ieee"), "bf16": (8, 7, 127, "ieee"), "tf32": (8, 10, 127, "ieee"),
           "e4m3": (4, 3, 7, "fn"), "e5m2": (5, 2, 15, "ieee"), "e2m3": (2, 3, 1, "none"),
           "e3m2": (3, 2, 3, "none"), "e2m1": (2, 1, 1, "none")}


def value(fmt: str, code: int):
    """The value of ``code``: a Fraction (-0.0 for negative zero), or "nan"/"inf"/"-inf"."""
    e, m, bias, kind = FORMATS[fmt]
    sign = -1 if code >> (e + m) & 1 else 1
    ef, mf = (code >> m) & ((1 << e) - 1), code & ((1 << m) - 1)
    if kind == "fn" and ef == (1 << e) - 1 and mf == (1 << m) - 1:
        return "nan"
    if kind == "ieee" and ef == (1 << e) - 1:
        return "nan" if mf else ("inf" if sign > 0 else "-inf")
    if ef == 0 and mf == 0:
        return -0.0 if sign < 0 else Fraction(0)
    return code_value(code, e, m, bias)


@lru_cache(maxsize=None)
def _positive(fmt: str) -> tuple[list, list]:
    """The non-negative finite values (exact floats, increasing with the code) and their
    codes."""
    e, m, bias, kind = FORMATS[fmt]
    codes = [c for c in range(1 << (e + m))
             if not (kind == "ieee" and c >> m == (1 << e) - 1 or kind == "fn" and
                     c == (1 << (e + m)) - 1)]
    vals = [math.ldexp(c, 1 - bias - m) if c >> m == 0 else
            math.ldexp((1 << m) | (c & ((1 << m) - 1)), (c >> m) - bias - m) for c in codes]
    return vals, codes


def decode_table(fmt: str) -> np.ndarray:
    """float64 value of every code (NaN where the format has NaN, +-inf for Inf)."""
    e, m, _, _ = FORMATS[fmt]
    vals = [value(fmt, c) for c in range(1 << (1 + e + m))]
    return np.array([{"nan": np.nan, "inf": np.inf, "-inf": -np.inf}[v] if isinstance(v, str)
                     else float(v) for v in vals])


def round_code(fmt: str, x, mode: str = "rn", *, saturate: bool = False) -> int:
    """The code of the finite or infinite number ``x`` (float or Fraction) rounded to
    ``fmt`` in ``mode`` ("rn": nearest, ties to the even code; "rna": nearest, ties away
    from zero; "rz"/"rm"/"rp"). A TF32 code is the top 19 bits of the binary32 code.
    ``saturate``: beyond the largest value gives +-MAX (the PTX ``.satfinite`` rule) and
    so does an infinite ``x``; otherwise overflow follows IEEE 754 (Inf where the format
    has one, in rn from MAX + ulp/2 on). Zero keeps its sign."""
    if mode not in MODES + ("rna",):
        raise ValueError(f"mode must be one of {MODES + ('rna',)}, got {mode!r}")
    e, m, _, kind = FORMATS[fmt]
    vals, codes = _positive(fmt)
    top = Fraction(vals[-1])
    negative = x < 0 or (x == 0 and np.signbit(float(x)))
    sign = 1 << (e + m) if negative else 0
    inf_code = ((1 << e) - 1) << m if kind == "ieee" else None
    if isinstance(x, float) and math.isinf(x):
        return sign | (codes[-1] if saturate or inf_code is None else inf_code)
    a = abs(Fraction(x))      # exact; comparisons of a Fraction with a float are exact
    away = mode == "rp" and not negative or mode == "rm" and negative
    toward = mode == "rz" or mode == "rm" and not negative or mode == "rp" and negative
    if a > top:
        ulp = top - Fraction(vals[-2])
        over = not toward and (mode not in ("rn", "rna") or a >= top + ulp / 2)
        if saturate or not over or inf_code is None:
            return sign | codes[-1]
        return sign | inf_code
    i = bisect.bisect_left(vals, a)          # vals[i - 1] < a <= vals[i]
    if vals[i] == a:
        return sign | codes[i]
    lo, hi = i - 1, i
    if toward:
        return sign | codes[lo]
    if away:
        return sign | codes[hi]
    d_lo, d_hi = a - Fraction(vals[lo]), Fraction(vals[hi]) - a
    if d_lo != d_hi:
        return sign | codes[lo if d_lo < d_hi else hi]
    if mode == "rna":
        return sign | codes[hi]
    return sign | codes[lo if codes[lo] % 2 == 0 else hi]


def nearest_code(fmt: str, x) -> int:
    """PTX ``cvt.rn.satfinite`` to ``fmt``: round to nearest even, +-MAX beyond the
    largest value and for +-Inf; NaN gives 0x7F for FP8 and +MAX for the formats
    without NaN."""
    if x != x:
        return 0x7F if fmt in ("e4m3", "e5m2") else _positive(fmt)[1][-1]
    return round_code(fmt, x, "rn", saturate=True)


def f16_codes(x) -> np.ndarray:
    """binary16 codes of ``x`` (float32 or float64, rounded once to nearest even by
    numpy's conversion; Inf beyond the range) with NaN as the canonical 0x7FFF."""
    x = np.asarray(x)
    with np.errstate(over="ignore"):
        h = x.astype(np.float16).view(np.uint16)
    return np.where(np.isnan(x), np.uint16(0x7FFF), h)


def bf16_codes(x) -> np.ndarray:
    """bfloat16 codes of ``x`` (any float array) rounded once to nearest even from the
    exact value (Inf beyond the range), with NaN as the canonical 0x7FFF."""
    x = np.asarray(x, np.float64)
    return np.array([0x7FFF if v != v else round_code("bf16", float(v)) for v in x.ravel()],
                    np.uint16).reshape(x.shape)


# -------------------------------------------------------------------------- integers


def float_to_int(v: float, mode: str, bits: int, signed: bool) -> int:
    """PTX ISA 9.7.9.21 (cvt) float to integer: round in ``mode`` ("rn" ties to even,
    "rz", "rm", "rp"), saturate to the destination range, NaN -> 0 (C's ``(int)x`` is
    cvt.rzi)."""
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    if math.isnan(v):
        return 0
    if math.isinf(v):
        return lo if v < 0 else hi
    f = Fraction(v)
    r = {"rz": math.trunc, "rn": round, "rm": math.floor, "rp": math.ceil}[mode](f)
    return min(max(int(r), lo), hi)


def c_div(x: int, y: int, bits: int) -> tuple[int, int]:
    """C99 6.5.5 ``x / y`` and ``x % y`` on ``bits``-bit signed integers: the quotient
    truncates toward zero and x == (x/y)*y + x%y; results wrap (INT_MIN / -1 wraps on
    the GPU)."""
    q = abs(x) // abs(y)
    q = q if (x < 0) == (y < 0) else -q
    return wrap(q, bits, True), wrap(x - q * y, bits, True)


def wrap(v: int, bits: int, signed: bool) -> int:
    """``v`` modulo 2**bits, as a signed or unsigned ``bits``-bit integer."""
    v &= (1 << bits) - 1
    return v - (1 << bits) if signed and v >> (bits - 1) else v
