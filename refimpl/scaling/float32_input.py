"""Inputs of the rules defined in float32 arithmetic (NVFP4, block and tensor FP8).

Those rules are sequences of float32 operations, so their input must already be float32:
float16 is widened exactly, and float64 (or wider) is accepted only when every value is a float32,
never rounded silently (the caller rounds explicitly, choosing how).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from refimpl.validation import as_float32

__all__ = ["float32_values"]


def float32_values(x: Any, name: str = "x") -> np.ndarray:
    """``x`` as float32 without changing any value (float16 widened; float64 and wider
    floats accepted only when every value is a float32, since the rules here are
    float32 arithmetic): :func:`refimpl.validation.as_float32`.

    Raises:
        ValueError: a value that float32 cannot hold, or a non-float dtype.
    """
    return as_float32(x, name, hint="these rules are defined in float32: round explicitly "
                      "first, e.g. with refimpl.formats.round_to")
