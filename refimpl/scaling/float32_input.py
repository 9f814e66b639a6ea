"""Inputs of the rules defined in float32 arithmetic (NVFP4, block and tensor FP8).

Those rules are sequences of float32 operations, so their input must already be float32:
float16 is widened exactly, and float64 is accepted only when every value is a float32,
never rounded silently (the caller rounds explicitly, choosing how).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from refimpl.validation import as_float_array

__all__ = ["float32_values"]


def float32_values(x: Any, name: str = "x") -> np.ndarray:
    """``x`` as float32 without changing any value (float16 widened; float64 accepted
    only when every value is a float32, since the rules here are float32 arithmetic).

    Raises:
        ValueError: a float64 value that float32 cannot hold, or a non-float dtype.
    """
    arr = as_float_array(x, name, precision=np.float32)
    if arr.dtype == np.float64:
        with np.errstate(over="ignore"):
            as32 = arr.astype(np.float32)  # too large: Inf, caught below
        bad = ~((as32.astype(np.float64) == arr) | np.isnan(arr))
        if bad.any():
            first = np.unravel_index(int(np.argmax(bad)), arr.shape)
            raise ValueError(
                f"{name}: value {arr[first]!r} at index {tuple(int(i) for i in first)} is "
                "not a float32; these rules are defined in float32 (round explicitly first)"
            )
    return arr.astype(np.float32, copy=False)  # float32 input is read, never copied
