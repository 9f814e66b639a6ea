"""Tile-wise FP8 quantisation with an FP32 scale per tile (DeepSeek-V3 style).

DeepSeek-V3 (technical report section 3.3.2) quantises activations in 1x128 tiles and
weights in 128x128 tiles, each with its own scale; FlashAttention-3's FP8 path uses the
same per-tile scheme on B_r x d and B_c x d tiles. Per tile, in float32 arithmetic:

- ``amax = max(max |x|, amax_floor)`` (``amax_floor`` 1e-4 by default, as DeepSeek's
  kernels do, so an all-zero tile gets a finite scale);
- ``s = amax / fmt.max`` (one float32 division), or with ``power_of_two=True`` the
  smallest power of two with ``amax / s <= fmt.max``, computed exactly (no float log2);
  a tile with ``amax = 0`` (all zeros with ``amax_floor=0``) gets ``s = 1``, as
  Transformer Engine's scale update keeps scale 1 when the amax is 0: its codes are
  zeros (of each element's sign) and dequantise to exact zeros, where ``s = 0`` would
  make ``0 / 0`` NaN;
- codes ``encode(x / s, fmt, saturate=True)`` (the quotient rounded to float32 first, as
  the reference kernels do, then to the format with round-to-nearest-even);
- dequantise ``decode(code) * s`` (one float32 rounding).

Tiles cover the last two axes; edge tiles may be partial (their missing elements count
as zero for the amax and are not stored). Non-finite tiles are not special-cased: a NaN
makes the scale NaN and every code of the tile NaN; an Inf makes the scale Inf, so finite
elements become 0 and Inf elements NaN (the formulas' own results, documented rather than
hidden).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence, Tuple

import numpy as np

from refimpl import formats
from refimpl.formats import Format
from refimpl.validation import as_float, check_bool, check_positive_int

from .exponent import ceil_log2_ratio
from .mx import block_span
from .float32_input import float32_values

__all__ = ["BlockFP8Array", "block_fp8_quantize", "tile_amax"]

_F32 = np.float32
FP8_FORMATS = ("e4m3", "e5m2")


def _fp8(fmt: Any) -> Format:
    f = formats.get(fmt)
    if f.name not in FP8_FORMATS:
        raise ValueError(f"fmt: expected 'e4m3' or 'e5m2', got {f.name!r}")
    return f


def _tile(block: Sequence[int]) -> Tuple[int, int]:
    try:
        r, c = block
    except (TypeError, ValueError):
        raise ValueError(f"block: expected (rows, cols) such as (1, 128), got {block!r}") from None
    # ints only: int(1.9) would silently give tiles of one row
    return check_positive_int("block[0]", r), check_positive_int("block[1]", c)


def _float32_input(x: Any) -> np.ndarray:
    arr = float32_values(x)
    if arr.ndim < 2:
        raise ValueError("x: expected at least 2 dimensions (tiles cover the last two axes); "
                         "use x[None, :] for a vector")
    return arr


def _padded_tiles(arr: np.ndarray, r: int, c: int) -> np.ndarray:
    """(..., R, C) -> (..., ceil(R/r), ceil(C/c), r, c), zero padded."""
    rows, cols = arr.shape[-2:]
    # a tile larger than the array is the whole array: its padding is never materialised
    r, c = block_span(rows, r), block_span(cols, c)
    tr, tc = -(-rows // r), -(-cols // c)
    pad = [(0, 0)] * (arr.ndim - 2) + [(0, tr * r - rows), (0, tc * c - cols)]
    if tr * r != rows or tc * c != cols:
        arr = np.pad(arr, pad)
    v = arr.reshape(arr.shape[:-2] + (tr, r, tc, c))
    return np.moveaxis(v, -3, -2)


def _untile(tiles: np.ndarray, shape: Tuple[int, ...]) -> np.ndarray:
    v = np.moveaxis(tiles, -2, -3)
    full = v.reshape(v.shape[:-4] + (v.shape[-4] * v.shape[-3], v.shape[-2] * v.shape[-1]))
    return full[..., : shape[-2], : shape[-1]]


def tile_amax(x: Any, block: Sequence[int] = (1, 128)) -> np.ndarray:
    """Per-tile ``max |x|`` (float32, NaN when the tile holds NaN) over the last two axes."""
    r, c = _tile(block)
    return np.max(np.abs(_padded_tiles(_float32_input(x), r, c)), axis=(-2, -1))


@dataclass(frozen=True, eq=False)
class BlockFP8Array:
    """FP8 codes with one float32 scale per tile.

    Attributes:
        codes: uint8 FP8 codes, shape of the source.
        scales: float32 scales ``s`` (value = decode(code) * s), shape
            ``(..., ceil(R / rows), ceil(C / cols))``.
        fmt: the FP8 format (E4M3 or E5M2).
        block: the tile ``(rows, cols)``.
    """

    codes: np.ndarray
    scales: np.ndarray
    fmt: Format
    block: Tuple[int, int] = (1, 128)

    def __post_init__(self) -> None:
        object.__setattr__(self, "fmt", _fp8(self.fmt))
        r, c = _tile(self.block)
        object.__setattr__(self, "block", (r, c))
        codes = np.asarray(self.codes)
        if codes.dtype != np.uint8 or codes.ndim < 2:
            raise ValueError("codes: expected a uint8 array of at least 2 dimensions")
        scales = np.asarray(self.scales, dtype=np.float32)
        expect = codes.shape[:-2] + (-(-codes.shape[-2] // r), -(-codes.shape[-1] // c))
        if scales.shape != expect:
            raise ValueError(f"scales: shape {scales.shape} does not match codes {codes.shape} "
                             f"with tiles {self.block} (expected {expect})")
        object.__setattr__(self, "scales", scales)

    @property
    def shape(self) -> Tuple[int, ...]:
        return tuple(self.codes.shape)

    def dequantize(self) -> np.ndarray:
        """``decode(code) * s`` per element, one float32 rounding (float32 output)."""
        r, c = self.block
        vals = formats.decode(self.codes, self.fmt).astype(np.float32)
        tiles = _padded_tiles(vals, r, c)
        with np.errstate(invalid="ignore", over="ignore"):
            out = tiles * self.scales[..., None, None]
        return np.ascontiguousarray(_untile(out, self.codes.shape))


def block_fp8_quantize(
    x: Any,
    *,
    block: Sequence[int] = (1, 128),
    fmt: Any = "e4m3",
    power_of_two: bool = False,
    amax_floor: float = 1e-4,
) -> BlockFP8Array:
    """Quantise ``x`` tile by tile to FP8 with float32 scales (module docstring).

    Args:
        x: float16/float32 array of at least 2 dimensions (float64 only when every
            value is a float32).
        block: tile ``(rows, cols)``: ``(1, 128)`` activations (default), ``(128, 128)``
            weights, or any tile (FlashAttention-3 uses ``(B_r, d)``).
        fmt: ``"e4m3"`` (default) or ``"e5m2"``.
        power_of_two: round each scale up to a power of two (exact, no clipping).
        amax_floor: lower bound of a tile's amax (float32), default 1e-4; 0 disables it
            (an all-zero tile then gets scale 1 and zero codes).

    Raises:
        ValueError: bad options or input.
    """
    f = _fp8(fmt)
    r, c = _tile(block)
    power_of_two = check_bool("power_of_two", power_of_two)
    arr = _float32_input(x)
    floor = _F32(as_float("amax_floor", amax_floor))
    if not np.isfinite(floor) or floor < 0:
        raise ValueError(f"amax_floor: expected a non-negative finite number, got {amax_floor!r}")
    tiles = _padded_tiles(arr, r, c)
    amax = np.max(np.abs(tiles), axis=(-2, -1)) if tiles.size else np.zeros(tiles.shape[:-2], _F32)
    amax = np.maximum(amax, floor)  # NaN stays NaN
    fmax = _F32(f.max)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        s = amax / fmax
        if power_of_two:
            ok = np.isfinite(amax) & (amax > 0)
            k = ceil_log2_ratio(np.where(ok, amax, _F32(1)), float(f.max))
            s = np.where(ok, np.ldexp(np.float64(1.0), k).astype(_F32), s).astype(_F32)
        s = np.where(amax == 0, _F32(1), s).astype(_F32)  # all zeros: 0 / 1, never 0 / 0
        y = tiles / s[..., None, None]
    codes = formats.encode(y.astype(_F32), f, saturate=True)
    codes = np.ascontiguousarray(_untile(codes, arr.shape))
    return BlockFP8Array(codes, s.astype(_F32), f, (r, c))
