"""Arrays of ML extension dtypes (ml_dtypes: ``float8_e4m3fn``, ``float4_e2m1fn``,
``float8_e8m0fnu``, ``bfloat16``, ...) read as the codes they hold.

Such an array stores one code per element, in one byte (two for ``bfloat16``), FP4 and
FP6 codes in the low bits, which is the oracle's own layout of codes. Wherever codes
are expected (``conform``, ``check``, ``run``), an array whose dtype is the expected
format is read as its codes; an extension dtype of another format is refused with both
names. The dtype is recognised by its name and size; ml_dtypes itself is never imported
(it is not a dependency).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from refimpl import formats as F

__all__ = ["extension_format", "as_codes_of"]


def extension_format(dtype: Any) -> str | None:
    """The oracle's name of the format an extension dtype holds (``"e4m3"`` for
    ml_dtypes' ``float8_e4m3fn``), ``""`` for an extension dtype the oracle does not
    know (``int4``, ``float8_e4m3b11fnuz``), None for an ordinary NumPy dtype."""
    dt = np.dtype(dtype)
    # ml_dtypes' types are scalars without fields of 1 or 2 bytes, of kind "V" (most) or
    # "f" (float8_e5m2); NumPy's own types (float16, void) are not extension dtypes
    if dt.kind not in "Vf" or dt.fields is not None or dt.itemsize not in (1, 2) \
            or dt.type.__module__ == "numpy":
        return None
    try:
        f = F.get(dt.name)
    except (ValueError, KeyError, TypeError):
        return ""
    return f.name if f.bits <= 8 * dt.itemsize else ""


def as_codes_of(a: Any, fmt: Any, what: str = "the result") -> np.ndarray:
    """``a`` itself, or, when it is an extension-dtype array of ``fmt``, its codes as
    unsigned integers (uint8 or uint16) of the same shape.

    Raises:
        ValueError: ``a`` is an extension-dtype array of another format (or of one the
            oracle does not know), naming both.
    """
    arr = np.asarray(a)
    name = extension_format(arr.dtype)
    if name is None:
        return arr
    want = F.get(fmt)
    if name != want.name:
        held = f"{name} values" if name else "values of a format the oracle does not know"
        raise ValueError(f"{what} is an array of {arr.dtype.name} ({held}); expected "
                         f"{want.name} codes (an array of {want.name}'s own extension "
                         f"dtype, or unsigned integer codes)")
    return arr.view(np.uint8 if arr.dtype.itemsize == 1 else np.uint16)
