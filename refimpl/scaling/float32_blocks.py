"""Block-scaled quantisation kernels for float32 arrays, one cache-sized chunk at a time.

The MX and NVFP4 quantisers (:mod:`refimpl.scaling.mx`, :mod:`refimpl.scaling.nvfp4`)
use these on their common path: float32 input laid out as consecutive blocks of ``bs``
elements, rounded to nearest or toward zero. They compute exactly what the quantisers
define; only the arrangement differs:

- Block maxima come from the float32 bit patterns: ``bits << 1`` drops the sign bit and
  keeps the order of magnitudes (IEEE 754-2019 section 3.4: for non-negative values the
  encoding is monotonic; NaN patterns sort above Inf, Inf above every finite value), so
  an unsigned integer maximum per block is ``max |x|`` with NaN winning, as
  ``numpy.max(numpy.abs(x))`` propagates it.
- Each element is divided by its block's scale with one float32 operation (the
  quantiser's own: a multiply by a power of two for MX, exact except below float32's
  normal range, far under half the smallest step of any element format).
- The element code is read from the codec's lookup table (:mod:`refimpl.formats.encode`):
  index ``(b | ((b & low) + low)) >> k`` is the high bits of ``b`` with input bit ``k``
  replaced by the "sticky" OR of bits ``0..k`` (the addition carries into bit ``k`` exactly
  when a low bit is set). Four integer operations and one ``take``, no float detour.
- The work runs in chunks of :data:`CHUNK` elements whose scratch buffers are reused,
  so no temporary larger than a chunk is ever made and each pass stays in cache.

The functions trust their callers (checked arguments, contiguous arrays); the public
quantisers do the checking.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

__all__ = ["CHUNK", "block_max_bits", "float32_table", "encode_blocks", "decode_fields",
           "decode_int8"]

#: Elements per chunk: its float32 and uint32 scratch (256 KiB each) stay in L2.
CHUNK = 1 << 16

_U32 = np.uint32


def _chunk(bs: int, n: int) -> int:
    """A whole number of blocks near :data:`CHUNK` elements (at least one block)."""
    return min(max(1, CHUNK // bs) * bs, n)


def _chunks(n: int, bs: int) -> tuple[int, list[tuple[int, int]]]:
    """The chunk length (:func:`_chunk`) and the (start, stop) of each chunk of ``n``
    elements in blocks of ``bs`` (none when ``n`` is 0)."""
    chunk = _chunk(bs, n)
    return chunk, [(s, min(s + chunk, n)) for s in range(0, n, chunk)] if n else []


def block_max_bits(bits: np.ndarray, bs: int) -> np.ndarray:
    """Per block of ``bs`` consecutive elements, the largest ``bits << 1`` (uint32).

    ``bits`` is the 1-D uint32 view of float32 data, its length a multiple of ``bs``. The
    result shifted right by one is the bit pattern of the block's ``max |x|`` (a NaN
    pattern when the block holds NaN).
    """
    n = bits.size
    out = np.empty(n // bs, dtype=_U32)
    chunk, spans = _chunks(n, bs)
    tmp = np.empty(chunk, dtype=_U32)
    starts = np.arange(0, chunk, bs, dtype=np.intp)
    for s, e in spans:
        t = tmp[: e - s]
        np.left_shift(bits[s:e], _U32(1), out=t)
        # reduceat over the flat chunk: one call, no per-row loop of a 2-D reduction
        np.maximum.reduceat(t, starts[: (e - s) // bs], out=out[s // bs:e // bs])
    return out


def float32_table(encoder: Callable[[np.ndarray], np.ndarray], k: int) -> np.ndarray:
    """The lookup table of an encoder of float32 values for the index scheme above.

    Entry ``i`` is ``encoder`` applied to the float32 whose bits are ``i << k`` (bit ``k``
    set stands for "some low bit set"; NaN patterns are replaced by 0, their blocks never
    read the table). Exact when every rounding boundary of the encoder lies at input bit
    ``k + 1`` or above (the condition of ``refimpl.formats.encode``'s table path).
    """
    reps = (np.arange(1 << (32 - k), dtype=np.uint64) << np.uint64(k)).astype(_U32)
    vals = reps.view(np.float32).copy()
    vals[np.isnan(vals)] = 0
    table = np.ascontiguousarray(encoder(vals), dtype=np.uint8)
    table.setflags(write=False)
    return table


def encode_blocks(
    x: np.ndarray,
    divisor: np.ndarray,
    bs: int,
    table: np.ndarray,
    k: int,
    *,
    divide: bool = False,
) -> np.ndarray:
    """uint8 codes of ``x * divisor[block]`` (or ``x / divisor[block]`` with ``divide``),
    each product rounded once to float32, then looked up in ``table`` (index scheme of the
    module docstring with ``k`` low bits).

    ``x`` is 1-D float32 (length a multiple of ``bs``); ``divisor`` float32, one per block.
    """
    n = x.size
    out = np.empty(n, dtype=np.uint8)
    chunk, spans = _chunks(n, bs)
    scaled = np.empty(chunk, dtype=np.float32)
    idx = np.empty(chunk, dtype=_U32)
    low = _U32((1 << k) - 1)
    ks = _U32(k)
    op = np.divide if divide else np.multiply
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        for s, e in spans:
            c = e - s
            sc = scaled[:c]
            # the divisor repeated per element: one flat pass (a broadcast over rows of
            # bs elements runs NumPy's inner loop once per block, about 4x slower)
            op(x[s:e], np.repeat(divisor[s // bs:e // bs], bs), out=sc)
            b = sc.view(_U32)
            i = idx[:c]
            np.bitwise_and(b, low, out=i)
            np.add(i, low, out=i)
            np.bitwise_or(i, b, out=i)
            np.right_shift(i, ks, out=i)
            # indices are always in range; "wrap" is numpy's fastest take mode
            np.take(table, i, out=out[s:e], mode="wrap")
    return out


def decode_fields(
    codes: np.ndarray,
    bits: int,
    man_bits: int,
    mult: np.ndarray,
    bs: int,
    special_mag: int,
    values: np.ndarray,
) -> np.ndarray:
    """float32 ``value(code) * mult[block]`` for 1-D uint8 codes of a sign-exponent-
    mantissa format with ``bits`` bits and ``man_bits`` mantissa bits, without a lookup.

    The code's magnitude bits are moved into a float32 with the mantissa's top bit at
    float32 bit 22 and the sign to bit 31. That float32 is the element value times
    ``2**(bias - 127)`` for normal and subnormal codes alike (an element subnormal lands on
    a float32 subnormal with the same ratio), so ``mult`` must hold ``2**(s + 127 - bias)``
    for a scale ``2**s``: one exact float32 multiply then rounds the product once. Codes
    whose magnitude is ``special_mag`` or more (Inf and NaN; 256 when there are none) take
    their float32 from ``values`` instead.
    """
    n = codes.size
    out = np.empty(n, dtype=np.float32)
    chunk, spans = _chunks(n, bs)
    placed = np.empty(chunk, dtype=np.int32)
    up = 32 - bits
    down = (32 - bits) - (23 - man_bits)
    mask = np.uint32(0x8000_0000 | ((1 << (22 + bits - man_bits)) - 1)).view(np.int32)
    mag_mask = np.uint8((1 << (bits - 1)) - 1)
    mags = np.empty(chunk, dtype=np.uint8) if special_mag < 256 else None
    vbits = values.view(np.int32)
    with np.errstate(over="ignore", invalid="ignore"):
        for s, e in spans:
            c = codes[s:e]
            p = placed[: e - s]
            np.copyto(p, c)
            np.left_shift(p, up, out=p)     # sign to bit 31
            np.right_shift(p, down, out=p)  # arithmetic: magnitude into place
            np.bitwise_and(p, mask, out=p)  # drop the sign's copies
            if mags is not None:
                m = mags[: e - s]
                np.bitwise_and(c, mag_mask, out=m)
                if m.max() >= special_mag:
                    sel = np.flatnonzero(m >= special_mag)
                    p[sel] = vbits[c[sel]]
            np.multiply(p.view(np.float32), np.repeat(mult[s // bs:e // bs], bs), out=out[s:e])
    return out


def decode_table(codes: np.ndarray, values: np.ndarray, mult: np.ndarray,
                 bs: int) -> np.ndarray:
    """float32 ``values[code] * mult[block]`` for 1-D uint8 codes: a lookup of the exact
    float32 element value, then one multiply by the block's power of two, which rounds the
    product once. For formats with two exponent bits (E2M1, E2M3), where a quarter of the
    codes are subnormal: :func:`decode_fields` would place those on float32 subnormals,
    and a multiply with a subnormal operand is many times slower on x86 processors (a
    microcode assist) than this lookup."""
    n = codes.size
    out = np.empty(n, dtype=np.float32)
    _, spans = _chunks(n, bs)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        for s, e in spans:
            o = out[s:e]
            # indices are always in range; "wrap" is numpy's fastest take mode
            np.take(values, codes[s:e], out=o, mode="wrap")
            np.multiply(o, np.repeat(mult[s // bs:e // bs], bs), out=o)
    return out


def decode_int8(codes: np.ndarray, mult: np.ndarray, bs: int) -> np.ndarray:
    """float32 ``int8(code) * mult[block]`` for 1-D uint8 codes (two's complement bytes):
    the integer converts to float32 exactly, and one multiply rounds the product once."""
    n = codes.size
    out = np.empty(n, dtype=np.float32)
    chunk, spans = _chunks(n, bs)
    signed = codes.view(np.int8)
    with np.errstate(over="ignore", invalid="ignore"):
        for s, e in spans:
            o = out[s:e]
            np.copyto(o, signed[s:e])
            np.multiply(o, np.repeat(mult[s // bs:e // bs], bs), out=o)
    return out
