"""The plain, spec-like MX quantiser: one block at a time, in exact rational arithmetic.

This reads like OCP MX v1.0 section 6.3 and is the definition the vectorised
:func:`refimpl.scaling.mx_quantize` is tested against. For one block:

1. a NaN anywhere: scale NaN (0xFF), element codes 0; an Inf (no NaN): the
   ``inf_block`` policy of :mod:`refimpl.scaling.mx`;
2. ``amax = max |V_i|``; an all-zero block gets the smallest scale 2**-127;
3. otherwise ``e`` from the scale rule, by exact comparisons with powers of two, clamped
   to [-127, 127];
4. every element ``V_i / 2**e`` rounded once to the element format, saturating
   (``refimpl.formats.reference.encode_exact``; MXINT8: ``round(64 v)`` clamped to
   [-127, 127]).

Slow by design: Python loops and ``Fraction``.
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import List, Sequence, Tuple

from refimpl import formats
from refimpl.deprecation import renamed_arguments
from refimpl.formats.reference import encode_exact
from refimpl.rational import floor_log2, round_rational
from refimpl.formats.rounding import resolve_rounding

from .mx import INF_BLOCK_POLICIES, SCALE_RULES, ElementLike, MXInt8, element_format

__all__ = ["scale_exponent_exact", "quantize_block"]


def _ceil_log2(a: Fraction) -> int:
    k = floor_log2(a)
    return k if Fraction(2) ** k == a else k + 1


@renamed_arguments({"elem": "fmt"})
def scale_exponent_exact(amax: Fraction, fmt: ElementLike, scale_rule: str = "floor") -> int:
    """The unclamped scale exponent of a block with finite positive ``amax``.

    - floor: ``floor(log2 amax) - emax``;
    - ceil: ``ceil(log2 amax) - emax``;
    - even: amax rounded to the element's mantissa width (half to even), then floor;
    - rceil: the smallest ``e`` with ``amax <= max_elem * 2**e``.
    """
    el = element_format(fmt)
    if scale_rule not in SCALE_RULES:
        raise ValueError(f"scale_rule: expected one of {', '.join(SCALE_RULES)}")
    if amax <= 0:
        raise ValueError("amax: expected a positive value")
    if scale_rule == "floor":
        return floor_log2(amax) - el.emax
    if scale_rule == "ceil":
        return _ceil_log2(amax) - el.emax
    if scale_rule == "even":
        # amax rounded to the element's significand width within its own binade (ties to
        # even): the exponent goes up by one exactly when that rounding reaches 2^(k+1)
        k = floor_log2(amax)
        carry = round_rational(amax / Fraction(2) ** k, el.man_bits + 1, 0) == 2.0
        return k + int(carry) - el.emax
    top = Fraction(el.max) if isinstance(el, MXInt8) else el.max_exact
    e = floor_log2(amax) - floor_log2(top) - 1
    while amax > top * Fraction(2) ** e:
        e += 1
    return e


def _int8_code(v: Fraction, rounding: str) -> int:
    mode = resolve_rounding(rounding, formats.E4M3)
    t = v * 64
    lo = t.numerator // t.denominator  # floor
    frac = t - lo
    if frac == 0:
        k = lo
    elif mode == "nearest_even":
        k = lo + (1 if frac > Fraction(1, 2) or (frac == Fraction(1, 2) and lo % 2) else 0)
    elif mode == "nearest_away":
        k = lo + (1 if frac > Fraction(1, 2) or (frac == Fraction(1, 2) and t > 0) else 0)
    elif mode == "toward_zero":
        k = lo if t > 0 else lo + 1
    elif mode == "toward_positive":
        k = lo + 1
    elif mode == "toward_negative":
        k = lo
    else:
        raise ValueError(f"rounding={rounding!r} is not offered for MXINT8 elements")
    return max(-127, min(127, k)) & 0xFF


@renamed_arguments({"elem": "fmt"})
def quantize_block(
    values: Sequence[float],
    fmt: ElementLike,
    *,
    scale_rule: str = "floor",
    rounding: str = "nearest_even",
    inf_block: str = "nan",
    inf_exponent: int = 128,
) -> Tuple[int, List[int]]:
    """``(E8M0 scale code, element codes)`` of one block of Python floats.

    ``inf_exponent`` is the exponent an Inf counts as under ``inf_block="exponent"``
    (128 for float32 input, 1024 for float64).
    """
    el = element_format(fmt)
    if inf_block not in INF_BLOCK_POLICIES:
        raise ValueError(f"inf_block: expected one of {', '.join(INF_BLOCK_POLICIES)}")
    vals = [float(v) for v in values]
    if any(math.isnan(v) for v in vals):
        return 0xFF, [0] * len(vals)
    has_inf = any(math.isinf(v) for v in vals)
    if has_inf and inf_block == "nan":
        return 0xFF, [0] * len(vals)
    amax = max((abs(Fraction(v)) for v in vals if not math.isinf(v)), default=Fraction(0))
    if has_inf and inf_block == "max":
        e = 127
    else:
        if has_inf:  # "exponent": Inf counts as 2**inf_exponent
            amax = max(amax, Fraction(2) ** inf_exponent)
        if amax == 0:
            e = -127
        else:
            e = max(-127, min(127, scale_exponent_exact(amax, el, scale_rule)))
    scale = Fraction(2) ** e
    codes = []
    for v in vals:
        if isinstance(el, MXInt8):
            x = Fraction(math.copysign(10 ** 9, v)) if math.isinf(v) else Fraction(v) / scale
            codes.append(_int8_code(x, rounding))
        elif math.isinf(v) or v == 0:
            codes.append(encode_exact(v, el, rounding=rounding, saturate=True))
        else:
            codes.append(encode_exact(Fraction(v) / scale, el, rounding=rounding, saturate=True))
    return e + 127, codes
