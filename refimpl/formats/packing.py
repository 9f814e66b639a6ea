"""Packing FP4 and FP6 codes into bytes.

There is no single standard (see the formats reference, "Packing"); the layouts and their
options:

- FP4 (4-bit formats, E2M1): two codes per byte. ``order="low_first"`` (default; torchao
  and most storage) puts element 2i in the low nibble and 2i+1 in the high nibble, so
  [1.0, -6.0] = codes [0x2, 0xF] packs to 0xF2. ``order="high_first"`` puts element 2i in
  the high nibble, as PTX ``cvt.rn.satfinite.e2m1x2.f32 d, a, b`` does with ``a``.
- FP6 (6-bit formats, E2M3/E3M2), ``dense=False`` (default, torchao): one code per byte in
  the low 6 bits, high 2 bits zero. ``dense=True``: four codes in three bytes.
  With ``order="low_first"`` the group is the 24-bit integer
  ``w = c0 | c1 << 6 | c2 << 12 | c3 << 18`` stored little-endian
  (byte0 = w & 0xFF, byte1 = (w >> 8) & 0xFF, byte2 = w >> 16);
  with ``order="high_first"`` it is ``w = c0 << 18 | c1 << 12 | c2 << 6 | c3`` stored
  big-endian (byte0 = w >> 16), i.e. an MSB-first bit stream.

Codes are taken in C order from any shape and packed into a 1-D uint8 array; a trailing
partial group is padded with zero codes, and ``unpack`` needs ``count`` to drop them.
A code with bits above the format's width is invalid input and raises ``ValueError``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .decode import as_codes
from .registry import FormatLike, get
from .types import Format
from ..validation import check_bool, check_elements, check_int

ORDERS = ("low_first", "high_first")


def _check(fmt: Format, order: str) -> None:
    if fmt.bits not in (4, 6):
        raise ValueError(
            f"packing is defined for 4-bit (FP4) and 6-bit (FP6) formats; "
            f"{fmt.name!r} has {fmt.bits} bits"
        )
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}, got {order!r}")


def pack(codes: Any, fmt: FormatLike, order: str = "low_first", *, dense: bool = False
         ) -> np.ndarray:
    """Pack FP4 (two per byte) or FP6 (one per byte, or four in three bytes with
    ``dense=True``) codes into a 1-D uint8 array; layouts in the module docstring.

    Raises:
        ValueError: not a 4- or 6-bit format, unknown order, non-integer codes or a code
            with stray high bits (names the first index), ``dense`` for FP4, or more
            codes than :func:`refimpl.validation.check_elements` allows (checked first).
    """
    f = get(fmt)
    _check(f, order)
    dense = check_bool("dense", dense)
    c = as_codes(codes, f).astype(np.uint8).reshape(-1)
    if f.bits == 4:
        if dense:
            raise ValueError("dense applies to 6-bit formats; FP4 is always two per byte")
        if c.size % 2:
            c = np.concatenate([c, np.zeros(1, np.uint8)])
        first, second = c[0::2], c[1::2]
        if order == "low_first":
            return (first | (second << np.uint8(4))).astype(np.uint8)
        return ((first << np.uint8(4)) | second).astype(np.uint8)
    if not dense:
        return c.copy()
    pad = (-c.size) % 4
    if pad:
        c = np.concatenate([c, np.zeros(pad, np.uint8)])
    g = c.reshape(-1, 4).astype(np.uint32)
    if order == "low_first":
        w = g[:, 0] | (g[:, 1] << 6) | (g[:, 2] << 12) | (g[:, 3] << 18)
        out = np.stack([w & 0xFF, (w >> 8) & 0xFF, w >> 16], axis=1)
    else:
        w = (g[:, 0] << 18) | (g[:, 1] << 12) | (g[:, 2] << 6) | g[:, 3]
        out = np.stack([w >> 16, (w >> 8) & 0xFF, w & 0xFF], axis=1)
    return out.astype(np.uint8).reshape(-1)


def unpack(packed: Any, fmt: FormatLike, count: int, order: str = "low_first", *,
           dense: bool = False) -> np.ndarray:
    """Inverse of :func:`pack`: the first ``count`` codes as a 1-D uint8 array.

    Raises:
        ValueError: not a 4- or 6-bit format, unknown order, ``packed`` not uint8 (or
            non-negative integers below 256), too short for ``count``, (one-per-byte
            FP6) a byte with its top two bits set, or more bytes than
            :func:`refimpl.validation.check_elements` allows (checked first).
    """
    f = get(fmt)
    _check(f, order)
    dense = check_bool("dense", dense)
    p = np.asarray(packed)
    check_elements("packed", p)
    if p.dtype.kind not in "ui":
        raise ValueError(f"packed must be a uint8 array, got dtype {p.dtype}")
    if p.size and (p.min() < 0 or p.max() > 255):
        raise ValueError("packed must hold bytes (0..255)")
    p = p.astype(np.uint8).reshape(-1)
    count = check_int("count", count, minimum=0)
    if f.bits == 4:
        if dense:
            raise ValueError("dense applies to 6-bit formats; FP4 is always two per byte")
        need = (count + 1) // 2
        _need(p, need, count, f)
        p = p[:need]
        lo, hi = p & np.uint8(0xF), p >> np.uint8(4)
        pair = (lo, hi) if order == "low_first" else (hi, lo)
        out = np.stack(pair, axis=1).reshape(-1)
        return out[:count].copy()
    if not dense:
        _need(p, count, count, f)
        out = p[:count].copy()
        return as_codes(out, f, name="packed").astype(np.uint8)
    groups = (count + 3) // 4
    _need(p, groups * 3, count, f)
    b = p[: groups * 3].reshape(-1, 3).astype(np.uint32)
    if order == "low_first":
        w = b[:, 0] | (b[:, 1] << 8) | (b[:, 2] << 16)
        out = np.stack([w & 63, (w >> 6) & 63, (w >> 12) & 63, w >> 18], axis=1)
    else:
        w = (b[:, 0] << 16) | (b[:, 1] << 8) | b[:, 2]
        out = np.stack([w >> 18, (w >> 12) & 63, (w >> 6) & 63, w & 63], axis=1)
    return out.astype(np.uint8).reshape(-1)[:count].copy()


def _need(p: np.ndarray, need: int, count: int, f: Format) -> None:
    if p.size < need:
        raise ValueError(
            f"packed holds {p.size} bytes; {count} {f.name} codes need {need}"
        )
