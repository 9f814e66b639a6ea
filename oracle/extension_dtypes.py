"""Arrays of ML extension dtypes (ml_dtypes: ``float8_e4m3fn``, ``float4_e2m1fn``,
``float8_e8m0fnu``, ``bfloat16``, ...) read as the codes they hold.

Such an array stores one code per element, in one byte (two for ``bfloat16``), FP4 and
FP6 codes in the low bits, which is the oracle's own layout of codes. Wherever codes
are expected (``conform``, ``check``, ``run``), an array whose dtype is the expected
format is read as its codes; an extension dtype of another format is refused with both
names. The dtype is recognised by its name and size; ml_dtypes itself is never imported
(it is not a dependency).

A ``.npy`` file written by ``np.save`` of such an array (a results file for ``check``)
does not name the type: NumPy writes the descriptor ``'<V1'`` (one opaque byte, most
types), ``'<f1'`` (``float8_e5m2``) or ``'<V2'`` (``bfloat16``, little-endian), which
NumPy alone cannot even load in the ``'<f1'`` case. :func:`opaque_npy` reads such a
file as the unsigned codes it holds; ``check`` takes them as the codes of the output's
format when the output is codes of that width, and refuses them otherwise (the file
cannot say which format it holds, so it is taken to hold the expected one).
"""
from __future__ import annotations

import ast
import math
from typing import Any

import numpy as np

from refimpl import formats as F

__all__ = ["extension_format", "as_codes_of", "opaque_npy", "OPAQUE_DESCRS"]


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


#: .npy descriptors of opaque 1- and 2-byte elements -> the unsigned dtype of the codes
#: they hold (``np.save`` of ml_dtypes arrays: ``'<V1'``, ``float8_e5m2``'s ``'<f1'``,
#: ``bfloat16``'s ``'<V2'``; a 2-byte void of no byte order, ``'|V2'``, is not read)
OPAQUE_DESCRS = {"<V1": np.dtype(np.uint8), "|V1": np.dtype(np.uint8),
                 ">V1": np.dtype(np.uint8), "<f1": np.dtype(np.uint8),
                 "|f1": np.dtype(np.uint8), ">f1": np.dtype(np.uint8),
                 "<V2": np.dtype("<u2")}
#: the longest .npy header read (NumPy's own default limit)
MAX_HEADER = 10000


def opaque_npy(data: bytes, where: str = "the file") -> tuple[str, np.ndarray] | None:
    """``(descriptor, codes)`` of ``.npy`` bytes whose elements are opaque 1- or 2-byte
    values (:data:`OPAQUE_DESCRS`), the codes as unsigned integers of the file's shape;
    None for any other file, readable or not (``oracle.suite.parse_array`` reads and
    judges those). The header is parsed as Python literals only; nothing is unpickled.

    Raises:
        ValueError: an opaque descriptor with a malformed header or a body that is not
            exactly the shape's size, naming ``where``.
    """
    if data[:6] != b"\x93NUMPY" or len(data) < 10:
        return None
    major = data[6]
    size_bytes = 2 if major == 1 else 4 if major in (2, 3) else None
    if size_bytes is None:
        return None
    n = int.from_bytes(data[8:8 + size_bytes], "little")
    start = 8 + size_bytes
    if n > MAX_HEADER or start + n > len(data):
        return None
    raw = data[start:start + n]
    try:
        header = ast.literal_eval(raw.decode("utf-8" if major == 3 else "latin1"))
    except (ValueError, SyntaxError, UnicodeDecodeError, MemoryError, RecursionError):
        return None
    if not isinstance(header, dict) or header.get("descr") not in OPAQUE_DESCRS:
        return None
    descr = header["descr"]
    shape, fortran = header.get("shape"), header.get("fortran_order")
    if set(header) != {"descr", "fortran_order", "shape"} or not isinstance(fortran, bool) \
            or not isinstance(shape, tuple) \
            or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                       for d in shape):
        raise ValueError(f"{where}: a .npy header of descriptor {descr!r} that is not "
                         "{'descr', 'fortran_order', 'shape'}")
    dt = OPAQUE_DESCRS[descr]
    body = memoryview(data)[start + n:]
    want = math.prod(shape) * dt.itemsize
    if len(body) != want:
        raise ValueError(f"{where}: truncated or padded: {len(body)} data bytes, expected "
                         f"{want} for shape {list(shape)} of {descr!r}")
    codes = np.frombuffer(body, dtype=dt).reshape(shape, order="F" if fortran else "C")
    return descr, np.ascontiguousarray(codes).astype(dt.newbyteorder("="))
