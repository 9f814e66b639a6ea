"""Independent oracles shared by the tests.

Nothing here imports the code under test: values come from exact rational arithmetic
(``fractions.Fraction``) and from the sign/exponent/mantissa layouts written out below
from the specifications, so a test that compares the package with these functions
compares it with something it could disagree with.

- :func:`round_binary` / :func:`round_rational`: an exact rational rounded onto an IEEE
  754 binary grid (IEEE 754-2019 sections 4.3 and 7.4: 4 rounding-direction attributes,
  gradual underflow, overflow to infinity or to the largest finite value).
- :func:`element_table` / :func:`nearest_magnitude` / :func:`code_value`: the values of a
  small float format enumerated from its layout, and round-to-nearest (or directed,
  or stochastic) onto that table with saturation, as the OCP MX v1.0 section 5 element
  formats and NVFP4 use them.
- :func:`same_bits` / :func:`assert_same_bits`: bit-pattern equality of float arrays.
- :func:`built_case`: a golden-suite case built and computed the way the generator does.
- :data:`SHARP_FP32_PRODUCTS` with :func:`with_examples`: float32 products pinned as
  hypothesis examples.

The tests directory is on ``sys.path`` (pytest's rootdir conftest), so a test module
imports this as ``from oracles import ...``.
"""
from __future__ import annotations

import bisect
import math
from fractions import Fraction

import numpy as np
from hypothesis import example

from oracle.cases import registry
from oracle.random_stream import CaseRandom

TWO = Fraction(2)

#: the IEEE 754 binary interchange formats as (precision p including the implicit bit,
#: emin, emax); IEEE 754-2019 table 3.5.  bfloat16 keeps binary32's exponent range.
BINARY = {
    np.dtype(np.float16): (11, -14, 15),
    np.dtype(np.float32): (24, -126, 127),
    np.dtype(np.float64): (53, -1022, 1023),
}
BFLOAT16 = (8, -126, 127)

MODES = ("nearest_even", "nearest_away", "toward_zero", "toward_positive", "toward_negative")


def floor_log2(a: Fraction) -> int:
    """The integer e with 2^e <= a < 2^(e+1), for a > 0."""
    e = a.numerator.bit_length() - a.denominator.bit_length()
    while TWO**e > a:
        e -= 1
    while TWO ** (e + 1) <= a:
        e += 1
    return e


def _rounds_away(mode: str, negative: bool, below, above, odd: bool) -> bool:
    """Whether a value strictly between two neighbours, ``below`` above the lower (odd:
    its last bit is 1) and ``above`` below the upper, rounds to the upper one (away from
    zero, magnitudes) in rounding direction ``mode``; its sign is ``negative``."""
    if mode == "toward_zero":
        return False
    if mode == "toward_positive":
        return not negative
    if mode == "toward_negative":
        return negative
    if mode not in ("nearest_even", "nearest_away"):
        raise ValueError(f"unknown rounding mode {mode!r}; expected one of {MODES}")
    if below != above:
        return above < below
    return mode == "nearest_away" or odd


def _round_integer(n: Fraction, mode: str, negative: bool) -> int:
    """A non-negative rational rounded to an integer (the magnitude of a value whose sign
    is ``negative``) in rounding direction ``mode``."""
    lo = n.numerator // n.denominator
    rest = n - lo
    if rest == 0:
        return lo
    return lo + 1 if _rounds_away(mode, negative, rest, 1 - rest, lo % 2 == 1) else lo


def round_binary(x: Fraction, precision: int, emin: int, emax: int,
                 mode: str = "nearest_even") -> Fraction | float:
    """``x`` rounded onto the binary grid with ``precision`` significant bits, normal
    exponents ``emin..emax`` and subnormals below (IEEE 754-2019 section 4.3).

    Overflow (section 7.4): round-to-nearest gives an infinity from max + ulp(max)/2 on
    (that tie goes to the even side, 2^(emax+1)); a directed mode gives an infinity when
    it rounds away from zero and the largest finite value otherwise. Returns a signed
    ``Fraction`` (``Fraction(0)`` for zero, whose sign the caller decides) or a float
    infinity.
    """
    x = Fraction(x)
    if x == 0:
        return Fraction(0)
    negative = x < 0
    a = abs(x)
    ulp_max = TWO ** (emax - precision + 1)
    largest = TWO ** (emax + 1) - ulp_max
    if a > largest:
        if mode in ("nearest_even", "nearest_away"):
            over = a >= largest + ulp_max / 2
        else:
            over = mode == ("toward_negative" if negative else "toward_positive")
        if over:
            return -math.inf if negative else math.inf
        return -largest if negative else largest
    quantum = TWO ** (max(floor_log2(a), emin) - precision + 1)
    mag = _round_integer(a / quantum, mode, negative) * quantum  # <= largest
    return -mag if negative else mag


def round_rational(x: Fraction, dtype=np.float32, mode: str = "nearest_even"):
    """``x`` rounded to a NumPy binary float type (float16, float32 or float64) in
    ``mode``; a negative value that rounds to zero gives -0.0. Returns a ``dtype`` scalar.
    """
    dtype = np.dtype(dtype)
    r = round_binary(Fraction(x), *BINARY[dtype], mode=mode)
    value = float(r)  # exact: at most 53 significant bits inside float64's range
    if value == 0 and x < 0:
        value = -0.0
    return dtype.type(value)


# ----- small float formats from their layouts -------------------------------------------

#: name -> (exponent bits, mantissa bits, bias, largest finite value): OCP MX v1.0
#: section 5.3 (FP8 E4M3/E5M2, FP6 E2M3/E3M2, FP4 E2M1).
ELEMENT_LAYOUTS = {
    "e4m3": (4, 3, 7, Fraction(448)),
    "e5m2": (5, 2, 15, Fraction(57344)),
    "e2m3": (2, 3, 1, Fraction(15, 2)),
    "e3m2": (3, 2, 3, Fraction(28)),
    "e2m1": (2, 1, 1, Fraction(6)),
}


def code_value(code: int, exp_bits: int, man_bits: int, bias: int) -> Fraction:
    """The value of a sign/exponent/mantissa code with no special encodings (the caller
    excludes NaN and infinity codes): subnormal when the exponent field is 0."""
    sign = -1 if code >> (exp_bits + man_bits) & 1 else 1
    ef, mf = (code >> man_bits) & ((1 << exp_bits) - 1), code & ((1 << man_bits) - 1)
    if ef == 0:
        return sign * Fraction(mf, 1 << man_bits) * TWO ** (1 - bias)
    return sign * (1 + Fraction(mf, 1 << man_bits)) * TWO ** (ef - bias)


def element_table(exp_bits: int, man_bits: int, bias: int,
                  largest: Fraction) -> list[tuple[Fraction, int]]:
    """Sorted ``(value, magnitude code)`` of every non-negative finite value up to
    ``largest``, enumerated from the layout."""
    out = []
    for code in range(1 << (exp_bits + man_bits)):
        v = code_value(code, exp_bits, man_bits, bias)
        if v <= largest:
            out.append((v, code))
    return sorted(out)


def nearest_magnitude(a: Fraction, table: list[tuple[Fraction, int]],
                      mode: str = "nearest_even", negative: bool = False,
                      random: int = 0, random_bits: int = 8) -> int:
    """The magnitude code of ``a >= 0`` rounded onto ``table`` (saturating at its largest
    value) in ``mode``, for a value whose sign is ``negative``; ties to the even code.
    ``"stochastic"`` rounds away from zero when floor(frac * 2^random_bits) + random >=
    2^random_bits, frac being the position of ``a`` between its two neighbours (IEEE
    P3109 stochastic rounding)."""
    vals = [t[0] for t in table]
    if a >= vals[-1]:
        return table[-1][1]
    i = bisect.bisect_left(vals, a)
    if vals[i] == a:
        return table[i][1]
    lo, hi = table[i - 1], table[i]
    if mode == "stochastic":
        frac = (a - lo[0]) / (hi[0] - lo[0])
        away = math.floor(frac * 2**random_bits) + random >= 2**random_bits
    else:
        away = _rounds_away(mode, negative, a - lo[0], hi[0] - a, lo[1] % 2 == 1)
    return hi[1] if away else lo[1]


# ----- comparisons ----------------------------------------------------------------------

def same_bits(got, want) -> bool:
    """Same shape and the same bit pattern element by element (so +0 differs from -0);
    any NaN equals any NaN. ``want`` is converted to ``got``'s float dtype first."""
    got = np.asarray(got)
    want = np.asarray(want, dtype=got.dtype)
    if got.shape != want.shape:
        return False
    utype = np.dtype(f"u{got.dtype.itemsize}")
    gu, wu = np.ascontiguousarray(got).view(utype), np.ascontiguousarray(want).view(utype)
    return bool(np.all((gu == wu) | (np.isnan(got) & np.isnan(want))))


def assert_same_bits(got, want, dtype=None) -> None:
    """:func:`same_bits` as an assertion that names the first differing elements; with
    ``dtype``, also checks that ``got`` has that dtype."""
    got, want = np.asarray(got), np.asarray(want)
    if dtype is not None:
        assert got.dtype == np.dtype(dtype), (got.dtype, dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    if not same_bits(got, want):
        w = want.astype(got.dtype)
        utype = np.dtype(f"u{got.dtype.itemsize}")
        differ = (got.view(utype) != w.view(utype)) & ~(np.isnan(got) & np.isnan(w))
        bad = np.argwhere(differ)[:5]
        raise AssertionError([(tuple(i), float(got[tuple(i)]), float(w[tuple(i)]))
                              for i in bad])


# ----- pinned examples -------------------------------------------------------------------

_F32 = np.float32

#: float32 products ``(a, b)`` whose correctly rounded ``a @ b`` is sharp: a tie broken
#: by a tiny term of either sign, a tie to even, just past and just below the overflow
#: edge 2^128 - 2^103, exact zeros of both signs, exact cancellation, an empty sum, a
#: subnormal sum and subnormal products that underflow to zero or to 2^-149.
SHARP_FP32_PRODUCTS = [
    (np.array([[1.0, 2.0**-24, 2.0**-80]], _F32), np.ones((3, 1), _F32)),
    (np.array([[1.0, 2.0**-24, -2.0**-80]], _F32), np.ones((3, 1), _F32)),
    (np.array([[1.0, 3 * 2.0**-24]], _F32), np.ones((2, 1), _F32)),
    (np.array([[3.4028235e38, 2.0**103]], _F32), np.ones((2, 1), _F32)),
    (np.array([[3.4028235e38, 2.0**102]], _F32), np.ones((2, 1), _F32)),
    (np.array([[-0.0, 0.0]], _F32), np.array([[1.0], [-1.0]], _F32)),
    (np.array([[-0.0, 0.0]], _F32), np.array([[1.0], [1.0]], _F32)),
    (np.array([[1.0, -1.0]], _F32), np.array([[1.0], [1.0]], _F32)),
    (np.zeros((2, 0), _F32), np.zeros((0, 3), _F32)),
    (np.array([[2.0**-149, 2.0**-149]], _F32), np.array([[0.5], [0.5]], _F32)),
    (np.array([[2.0**-149, 2.0**-149]], _F32), np.array([[2.0**-20], [2.0**-30]], _F32)),
]


def with_examples(cases):
    """A decorator: ``hypothesis.example(case)`` for every case (place it under
    ``@given`` of a test that takes one argument)."""
    def apply(test):
        for case in reversed(cases):
            test = example(case)(test)
        return test
    return apply


# ----- golden-suite cases ---------------------------------------------------------------

def built_case(case_id: str):
    """``(spec, inputs, outputs)`` of the registry case ``case_id``, its inputs drawn
    from the case's own random stream (seed 1) as the generator draws them."""
    reg = registry()
    (spec,) = [c for c in reg.all_cases if c.id == case_id]
    inputs = spec.build(CaseRandom(1, spec.id))
    with np.errstate(all="ignore"):
        return spec, inputs, reg.operations[spec.operation].compute(inputs, dict(spec.params))
