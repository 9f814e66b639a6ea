"""The plain, paper-like encoder: one real number at a time, in exact rational arithmetic.

This is the definition the vectorised :func:`refimpl.formats.encode` is tested against.
For a real ``x`` it finds the two neighbouring representable magnitudes ``lo <= |x| <
hi`` on the grid of the target format at ``|x|`` (quantum ``2^(max(floor(log2|x|), emin)
- man_bits)``), chooses one by the rounding mode (IEEE 754-2019 section 4.3; stochastic
rounding per the IEEE P3109 interim report), then applies the overflow, Inf, NaN and
zero rules listed in :mod:`refimpl.formats.encode`. Slow by design: no bit tricks.
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Optional, Union

from .registry import FormatLike, get
from .rounding import resolve_nan, resolve_rounding
from .types import Format
from ..rational import floor_log2, round_rational
from ..validation import check_bool

Real = Union[float, int, Fraction]


def magnitude_code(fmt: Format, value: Fraction) -> int:
    """The magnitude bits of a non-negative value on the format's grid (values above the
    largest finite one give codes above ``max_code_magnitude``)."""
    if value == 0:
        return 0
    e = floor_log2(value)
    m = fmt.man_bits
    if e < fmt.emin:
        n = value / Fraction(2) ** (fmt.emin - m)
        assert n.denominator == 1 and fmt.subnormals
        return int(n)
    n = value / Fraction(2) ** (e - m)  # in [2^m, 2^(m+1))
    assert n.denominator == 1
    field = e + fmt.bias
    return (field << m) | (int(n) - (1 << m))


# encode()'s keyword options (and the stochastic rounding bits), repeated on purpose:
# the definition takes the options of the vectorised encoder it checks.
def encode_exact(
    x: Real, fmt: FormatLike,
    *,
    rounding: str = "nearest_even", saturate: bool = False,
    nan: Optional[Union[str, int]] = None, random_bits: Optional[int] = None, nbits: int = 0,
) -> int:
    """The code of one real ``x`` (float, int or Fraction; a float keeps the sign of
    zero and may be NaN/Inf), by the definitions.

    ``random_bits`` is the integer R and ``nbits`` the N of stochastic rounding: round
    the magnitude away from zero when ``floor(v * 2^N) + R >= 2^N``.

    Raises:
        ValueError: NaN under the "error" policy; options as for ``encode``.
    """
    f = get(fmt)
    mode = resolve_rounding(rounding, f)
    policy = resolve_nan(nan, f)
    saturate = check_bool("saturate", saturate)
    sign_bit = f.sign_mask
    if isinstance(x, float) and math.isnan(x):
        if policy.error:
            raise ValueError(f"NaN cannot be encoded in format {f.name!r}")
        return policy.negative if math.copysign(1.0, x) < 0 else policy.positive
    negative = (math.copysign(1.0, x) < 0) if isinstance(x, float) else x < 0
    if not f.signed and negative and x != 0:
        if not f.has_nan:
            raise ValueError(f"negative input cannot be encoded in {f.name!r}")
        return f.nan_code()
    sign = sign_bit if (negative and f.signed) else 0
    max_mag = f.max_code_magnitude
    if isinstance(x, float) and math.isinf(x):
        if f.has_inf and not saturate:
            return f.inf_code(negative)
        if saturate or f.nan == "none":
            return sign | max_mag
        return f.nan_code(negative)

    if x == 0:
        mag = 0
    else:
        # one rounding on the format's grid, unbounded above; ties go to the even grid
        # index, which is the even code (a magnitude below the smallest value of a
        # format without zero becomes that value, code 0)
        r = abs(round_rational(x, f.man_bits + 1, f.emin, rounding=mode,
                               subnormals=f.subnormals, random_bits=random_bits,
                               nbits=nbits))
        if r > f.max_exact:
            directed_small = (mode == "toward_zero") or (
                mode == "toward_negative" and not negative
            ) or (mode == "toward_positive" and negative)
            if saturate or f.nan == "none" or directed_small:
                return sign | max_mag
            return f.inf_code(negative) if f.has_inf else f.nan_code(negative)
        mag = magnitude_code(f, Fraction(r))
    if mag == 0 and f.nan == "fnuz":
        return 0
    return sign | mag
