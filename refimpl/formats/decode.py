"""Decoding: the value of every code, a pure function of the code.

For a code with sign s, exponent field E and mantissa field M (IEEE 754-2019 section 3.4;
OCP OFP8 rev 1.0 section 5; OCP MX v1.0 section 5.4 for E8M0):
normal ``(-1)^s 2^(E - bias) (1 + M/2^m)``, subnormal (E = 0) ``(-1)^s 2^(1 - bias) M/2^m``;
E8M0 has no subnormals, so 0x00 is ``2^-127``, never zero. Special codes per the format's
NaN layout: "ieee" (all-ones exponent: Inf or NaN), "fn" (all-ones magnitude is NaN),
"fnuz" (the negative-zero code is NaN), "none".

:func:`decode_formula` evaluates this for any format with integer bit manipulation and
an exact ``ldexp``; :func:`decode` uses a cached table of every value for formats of 16
bits or fewer.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

from .registry import FP32, FormatLike, get
from .types import Format
from ..validation import check_elements

__all__ = ["decode", "decode_formula", "as_codes"]

#: elements per chunk of the table lookup
_CHUNK = 1 << 16


def as_codes(codes: Any, fmt: Format, name: str = "codes") -> np.ndarray:
    """``codes`` as an integer array, checked to fit in ``fmt.bits`` bits.

    Raises:
        ValueError: a non-integer dtype, a negative code or one wider than the format
            (the message names the first offending index), or more codes than
            :func:`refimpl.validation.check_elements` allows (checked first).
    """
    arr = np.asarray(codes)
    check_elements(name, arr)
    if arr.dtype.kind not in "ui":
        if arr.size == 0 and arr.dtype.kind == "f":
            arr = arr.astype(np.uint8)
        else:
            raise ValueError(f"{name} must be an integer array, got dtype {arr.dtype}")
    if arr.size == 0:
        return arr
    limit = 1 << fmt.bits
    # integer dtypes that cannot hold an out-of-range code need no scan
    if arr.dtype.kind == "u" and arr.dtype.itemsize * 8 <= fmt.bits:
        return arr
    lo, hi = arr.min(), arr.max()
    if lo < 0 or int(hi) >= limit:
        bad = (arr < 0) | (arr >= limit) if arr.dtype.itemsize < 8 else _out_of_range(arr, limit)
        first = np.unravel_index(int(np.argmax(bad)), arr.shape)
        raise ValueError(
            f"{name}[{', '.join(str(int(i)) for i in first)}] = {int(arr[first])} is not a "
            f"{fmt.bits}-bit code of format {fmt.name!r} (expected 0 <= code < {limit})"
        )
    return arr


def _out_of_range(arr: np.ndarray, limit: int) -> np.ndarray:
    if arr.dtype.kind == "u":
        return arr >= np.uint64(limit)
    return (arr < 0) | (arr >= np.int64(limit))


def decode_formula(codes: np.ndarray, fmt: Format) -> np.ndarray:
    """Values of in-range integer ``codes`` by the format's formula, as ``fmt.value_dtype``.

    Exact: the significand (< 2^53) and the power of two are combined by ``ldexp``.
    """
    c = codes.astype(np.int64)
    m = fmt.man_bits
    mag = c & fmt.magnitude_mask
    neg = (c & fmt.sign_mask) != 0 if fmt.signed else np.zeros(c.shape, bool)
    e_field = mag >> m
    m_field = mag & ((1 << m) - 1)
    if fmt.subnormals:
        sub = e_field == 0
        sig = np.where(sub, m_field, m_field | (1 << m))
        exp = np.where(sub, fmt.emin, e_field - fmt.bias) - m
    else:
        sig = m_field | (1 << m)
        exp = e_field - fmt.bias - m
    with np.errstate(over="ignore"):  # only the Inf/NaN field of an emax-1023 format
        val = np.ldexp(sig.astype(np.float64), exp.astype(np.int32))
    val = np.where(neg, -val, val)
    if fmt.nan == "ieee":
        top = e_field == (1 << fmt.exp_bits) - 1
        val = np.where(top & (m_field == 0), np.where(neg, -np.inf, np.inf), val)
        val = np.where(top & (m_field != 0), np.nan, val)
    elif fmt.nan == "fn":
        val = np.where(mag == fmt.magnitude_mask, np.nan, val)
    elif fmt.nan == "fnuz":
        val = np.where(c == fmt.sign_mask, np.nan, val)
    # NaN codes decode to NaN with the code's sign bit, so a round trip keeps it
    if fmt.has_nan and fmt.nan != "fnuz":
        val = np.where(np.isnan(val) & neg, -np.abs(val), val)
    return val.astype(fmt.value_dtype)


@lru_cache(maxsize=64)
def decode_table(fmt: Format) -> np.ndarray:
    """Read-only array of the value of every code of a format of 16 bits or fewer."""
    if fmt.bits > 16:
        raise ValueError(f"format {fmt.name!r} has {fmt.bits} bits; tables stop at 16")
    table = decode_formula(np.arange(1 << fmt.bits, dtype=np.int64), fmt)
    table.setflags(write=False)
    return table


def decode(codes: Any, fmt: FormatLike) -> np.ndarray:
    """Values of ``codes`` in ``fmt``, as float32 (float64 for a user format whose values
    float32 cannot hold exactly). Special values per the format's NaN layout; E8M0 0x00 is
    2^-127 and 0xFF NaN; NaN codes give NaN with the code's sign bit, except the single
    FNUZ NaN (0x80, the negative-zero pattern), which gives +NaN.

    Args:
        codes: integer array (or scalar/list) of codes, any shape.
        fmt: a Format or its name.

    Returns:
        Array of the same shape as ``codes``.

    Raises:
        ValueError: a non-integer array or a code outside the format's width (names the
            first offending index).
    """
    f = get(fmt)
    arr = as_codes(codes, f)
    if f.is_binary32_top_half:
        return _decode_bf16(arr)
    if f.bits <= 16:
        table = decode_table(f)
        flat = arr.reshape(-1)
        out = np.empty(flat.size, dtype=table.dtype)
        # chunks keep numpy's index conversion to intp in cache
        for start in range(0, flat.size, _CHUNK):
            stop = min(start + _CHUNK, flat.size)
            np.take(table, flat[start:stop], out=out[start:stop], mode="clip")
        return out.reshape(arr.shape)
    if f == _fp32():
        return arr.astype(np.uint32).view(np.float32)
    return decode_formula(arr, f)


def _decode_bf16(arr: np.ndarray) -> np.ndarray:
    """float32 values of bfloat16-layout codes: the code shifted into the top half of a
    float32 (exact for every finite value, Inf and zero), then each NaN made the quiet
    NaN 0x7FC00000 with the code's sign, as :func:`decode_formula` gives it (the table's
    bytes): fewer passes than the 65536-entry lookup."""
    flat = arr.reshape(-1)
    out = np.empty(flat.size, dtype=np.uint32)
    for start in range(0, flat.size, _CHUNK):
        o = out[start:start + _CHUNK]
        # codes were checked to lie in 0..65535: the cast to uint32 is exact
        np.left_shift(flat[start:start + _CHUNK], 16, out=o, dtype=np.uint32,
                      casting="unsafe")
        nan = np.isnan(o.view(np.float32))
        if nan.any():
            o[nan] = (o[nan] & np.uint32(0x8000_0000)) | np.uint32(0x7FC0_0000)
    return out.view(np.float32).reshape(arr.shape)


def _fp32() -> Format:
    return FP32
