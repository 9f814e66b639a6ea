"""Rounding an exact dyadic rational ``t * 2**exp`` (Python int ``t``) to float16, float32
or float64 once, with round-to-nearest-even (IEEE 754-2019 section 4.3.1): the last step of
every computation here that is first carried out exactly in integers.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["round_dyadic"]

#: dtype -> (precision p, exponent of the smallest subnormal, overflow exponent)
_FLOAT_PARAMS = {
    np.dtype(np.float16): (11, -24, 16),
    np.dtype(np.float32): (24, -149, 128),
    np.dtype(np.float64): (53, -1074, 1024),
}


def round_dyadic(t: int, exp: int, dtype: Any = np.float32) -> float:
    """``t * 2**exp`` (Python int ``t``) rounded to nearest-even in ``dtype`` (float16,
    float32 or float64), with gradual underflow and overflow to +-Inf (IEEE 754-2019 section 4.3.1).

    Returns a Python float holding the exactly representable result.
    """
    p, qmin, over = _FLOAT_PARAMS[np.dtype(dtype)]
    if t == 0:
        return 0.0
    sign = -1.0 if t < 0 else 1.0
    m = -t if t < 0 else t
    top = m.bit_length() - 1 + exp  # floor(log2 |value|)
    q = max(top - (p - 1), qmin)  # exponent of the last kept bit
    if q > exp:
        r = q - exp
        rem = m & ((1 << r) - 1)
        m >>= r
        half = 1 << (r - 1)
        if rem > half or (rem == half and (m & 1)):
            m += 1
        exp = q
    if m.bit_length() + exp > over:
        return sign * math.inf
    return sign * math.ldexp(m, exp)
