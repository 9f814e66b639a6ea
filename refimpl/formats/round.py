"""``round_to``: the value a format gives a real number, ``decode(encode(x))``."""
from __future__ import annotations

from typing import Any, Optional, Union

import numpy as np

from .decode import decode
from .encode import as_float_array, encode
from .registry import FP32, FormatLike, get
from .rounding import RandomBits


# encode()'s keyword options, repeated on purpose: each public function states the
# options it takes (also reference.encode_exact).
def round_to(
    x: Any, fmt: FormatLike,
    *,
    rounding: str = "nearest_even", saturate: bool = False,
    nan: Optional[Union[str, int]] = None, random_bits: RandomBits = None,
) -> np.ndarray:
    """``decode(encode(x, fmt, **options), fmt)``: ``x`` rounded once to ``fmt``.

    Same options and special-value policy as :func:`refimpl.formats.encode`.

    Returns:
        float32 array of the shape of ``x``; float64 when ``x`` is float64 and ``fmt`` is
        FP32 (so float64 code paths stay float64), or when the format's values need it.
    """
    f = get(fmt)
    arr = as_float_array(x)
    codes = encode(
        arr, f, rounding=rounding, saturate=saturate, nan=nan, random_bits=random_bits
    )
    out = decode(codes, f)
    if f == FP32 and arr.dtype == np.float64:
        return out.astype(np.float64)
    return out
