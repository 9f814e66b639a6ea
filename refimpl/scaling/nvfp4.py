"""NVFP4 (NVIDIA Blackwell): E2M1 elements, an E4M3 scale per 16 elements (1x16 blocks,
or 16x16 tiles for weights) and one FP32 scale for the whole tensor.

Every step below is an IEEE float32 operation rounded to nearest-even, in the order
written, so the codes are a pure function of the input and the options.

Rule ``"te"`` (default; TransformerEngine's reference quantiser):

- ``S_enc = (448 * 6) / global_amax``; Inf (global_amax 0) becomes FLT_MAX; 0
  (global_amax Inf) becomes 1. ``global_scale`` stores ``S_enc``.
- block decode scale ``sf = E4M3_rne(clamp((block_amax / 6) * S_enc, <= FLT_MAX, <= 448))``;
  it may be an E4M3 subnormal or zero (an all-zero block gets 0x00).
- element ``q = E2M1_rne(clamp(x * min(S_enc / sf, FLT_MAX), -6, 6))`` (a zero ``sf`` gives
  the multiplier FLT_MAX: zeros stay zero, anything else saturates to +-6 and still
  decodes to 0).
- decode ``x ~= q * sf / S_enc`` (``q * sf`` is exact in float32; one rounding).

Rule ``"te_kernel"`` (TransformerEngine's CUDA quantisation kernel, which orders the
float32 operations differently and can differ from its reference in the last place of
the pre-rounding values, hence occasionally by one code):

- ``S_enc`` as for "te", except that a zero global amax gives 1 (not FLT_MAX);
- ``sf = E4M3_rne_satfinite(block_amax * (S_enc * float32(1/6)))``;
- ``q = E2M1_rne_satfinite(x * min(1 / (sf * float32(1 / S_enc)), FLT_MAX))``;
- decode as for "te": ``q * sf / S_enc``.

Rule ``"torchao"`` (torchao's two-level NVFP4):

- per-tensor decode scale ``p = global_amax / (448 * 6)`` (``global_scale`` stores ``p``).
- ``sf = E4M3_rne(clamp((block_amax / 6) / p, 2**-6, 448))``: the block scale is clamped
  below at E4M3's smallest normal, so an all-zero block gets 0x08, not 0x00.
- ``q = E2M1_rne(clamp(x / (p * sf), -6, 6))``; decode ``x ~= q * (p * sf)``, the scale
  ``p * sf`` rounded to float32 first, as torchao's ``NVFP4Tensor.to_dtype`` forms it.
- ``global_amax`` must be positive and finite (``p = 0`` leaves the rule undefined).

Choices for inputs the libraries leave undefined: NaN elements make their block's scale
the E4M3 NaN (0x7F) with element codes 0, so that block decodes to NaN; the default global
amax ignores NaN (it is the largest non-NaN magnitude), so one NaN does not poison the
whole tensor. float64 input is accepted only when every value is a float32 (the rules are
defined in float32 arithmetic).

Optional random Hadamard transform (``hadamard=True``, TransformerEngine's RHT for
gradient inputs): the 16-point transform of ``refimpl.scaling.hadamard`` is applied along
``axis`` before quantisation (global amax taken after it); ``dequantize`` undoes it by
default.

The block maxima and the element codes are computed in cache-sized chunks on the float32
bit patterns (:mod:`refimpl.scaling.float32_blocks`): the same float32 operations in the
same order, the E2M1 rounding read from the encoder's table (which saturates at +-6 as
the clamp does).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence, Tuple

import numpy as np

from refimpl import formats
from refimpl.formats.encode import float32_lookup
from refimpl.validation import check_bool, check_int

from . import float32_blocks
from .float32_input import float32_values
from .hadamard import TE_WGRAD_SIGNS, hadamard_transform

__all__ = ["NVFP4_RULES", "NVFP4_BLOCKS", "NVFP4Array", "nvfp4_quantize", "nvfp4_global_scale"]

NVFP4_RULES = ("te", "te_kernel", "torchao")
NVFP4_BLOCKS = ((1, 16), (16, 16))

_F32 = np.float32
_FP4_MAX = _F32(6.0)
_E4M3_MAX = _F32(448.0)
_ENC_NUM = _F32(448.0 * 6.0)  # 2688, exact
_FLT_MAX = _F32(np.finfo(np.float32).max)
_E4M3_MIN_NORMAL = _F32(2.0 ** -6)
_E4M3_NAN = 0x7F


def _rule(scale_rule: str) -> str:
    if not isinstance(scale_rule, str) or scale_rule.strip().lower() not in NVFP4_RULES:
        raise ValueError(
            f"scale_rule: expected one of {', '.join(NVFP4_RULES)}, got {scale_rule!r}"
        )
    return scale_rule.strip().lower()


def _block(block: Sequence[int]) -> Tuple[int, int]:
    try:
        b = tuple(int(v) for v in block)
    except TypeError:
        raise ValueError(f"block: expected (1, 16) or (16, 16), got {block!r}") from None
    if b not in NVFP4_BLOCKS:
        raise ValueError(f"block: expected (1, 16) or (16, 16), got {block!r}")
    return b  # type: ignore[return-value]


def nvfp4_global_scale(global_amax: float, scale_rule: str = "te") -> np.float32:
    """The stored FP32 tensor scale: ``S_enc`` for ``"te"`` and ``"te_kernel"``, ``p`` for
    ``"torchao"``
    (module docstring).

    Raises:
        ValueError: a negative or NaN amax; for ``"torchao"`` also 0 or Inf.
    """
    rule = _rule(scale_rule)
    ga = _F32(global_amax)
    if np.isnan(ga) or ga < 0:
        raise ValueError(f"global_amax: expected a non-negative number, got {global_amax!r}")
    if rule in ("te", "te_kernel"):
        with np.errstate(divide="ignore", over="ignore"):  # Inf: FLT_MAX below
            s = _ENC_NUM / ga
        s = np.minimum(s, _FLT_MAX)
        if s == 0 or (rule == "te_kernel" and ga == 0):
            return _F32(1.0)
        return _F32(s)
    if ga == 0 or not np.isfinite(ga):
        raise ValueError(
            f"global_amax: the torchao rule needs a positive finite global amax, got "
            f"{global_amax!r} (its per-tensor scale amax/2688 would be {float(ga) / 2688})"
        )
    return _F32(ga / _ENC_NUM)


def _tile_view(moved: np.ndarray, block: Tuple[int, int]) -> np.ndarray:
    """Blocks as trailing axes: 1x16 -> (..., C/16, 16); 16x16 -> (..., R/16, C/16, 16, 16)."""
    r, c = block
    if r == 1:
        return moved.reshape(moved.shape[:-1] + (moved.shape[-1] // c, c))
    lead = moved.shape[:-2]
    rows, cols = moved.shape[-2:]
    v = moved.reshape(lead + (rows // r, r, cols // c, c))
    return np.moveaxis(v, -3, -2)


def _untile(tiles: np.ndarray, block: Tuple[int, int], shape: Tuple[int, ...]) -> np.ndarray:
    if block[0] == 1:
        return tiles.reshape(shape)
    return np.moveaxis(tiles, -2, -3).reshape(shape)


@dataclass(frozen=True, eq=False)
class NVFP4Array:
    """An NVFP4 tensor.

    Attributes:
        codes: uint8 E2M1 codes (low 4 bits), shape of the source.
        scales: uint8 E4M3 block-scale codes: the source shape with the ``axis`` length
            divided by 16 (1x16 blocks), or the last two lengths divided by 16 (16x16).
        global_scale: float32: ``S_enc`` (rules "te", "te_kernel": decode divides) or ``p`` (rule
            "torchao", decode multiplies).
        scale_rule: ``"te"``, ``"te_kernel"`` or ``"torchao"``.
        block: ``(1, 16)`` or ``(16, 16)``.
        axis: the axis of 1x16 blocks and of the Hadamard groups (non-negative).
        hadamard_signs: the RHT sign diagonal when the transform was applied, else None.
    """

    codes: np.ndarray
    scales: np.ndarray
    global_scale: np.float32
    scale_rule: str = "te"
    block: Tuple[int, int] = (1, 16)
    axis: int = -1
    hadamard_signs: Optional[np.ndarray] = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "scale_rule", _rule(self.scale_rule))
        blk = _block(self.block)
        object.__setattr__(self, "block", blk)
        codes = np.asarray(self.codes)
        if codes.dtype.kind not in "ui":
            raise ValueError(f"codes: expected uint8 E2M1 codes, got dtype {codes.dtype}")
        if codes.ndim == 0:
            raise ValueError("codes: expected at least one dimension")
        if codes.size and (codes.min() < 0 or codes.max() > 0xF):
            first = np.unravel_index(int(np.argmax((codes < 0) | (codes > 0xF))), codes.shape)
            raise ValueError(
                f"codes: {int(codes[first]):#x} at index {tuple(int(i) for i in first)} is "
                "not a 4-bit E2M1 code"
            )
        codes = codes.astype(np.uint8)
        ax = _axis(self.axis, codes.ndim, blk)
        object.__setattr__(self, "axis", ax)
        scales = np.asarray(self.scales)
        out_of_range = scales.size and (scales.min() < 0 or scales.max() > 0xFF)
        if scales.dtype.kind not in "ui" or out_of_range:
            raise ValueError("scales: expected uint8 E4M3 codes")
        expect = _scale_shape(codes.shape, blk, ax)
        if scales.shape != expect:
            raise ValueError(
                f"scales: shape {scales.shape} does not match codes {codes.shape} "
                f"(expected {expect})"
            )
        object.__setattr__(self, "codes", codes)
        object.__setattr__(self, "scales", scales.astype(np.uint8))
        object.__setattr__(self, "global_scale", _F32(self.global_scale))
        if self.hadamard_signs is not None:
            s = np.asarray(self.hadamard_signs)
            if s.shape != (16,) or not np.all((s == 1) | (s == -1)):
                raise ValueError("hadamard_signs: expected 16 entries of +-1")
            object.__setattr__(self, "hadamard_signs", s.astype(np.int8))

    @property
    def shape(self) -> Tuple[int, ...]:
        return tuple(self.codes.shape)

    def dequantize(self, dtype: Any = np.float32, *, undo_hadamard: bool = True) -> np.ndarray:
        """Decoded values: ``q * sf / S_enc`` ("te", "te_kernel") or ``q * (p * sf)``
        ("torchao", the scale rounded to float32 first), each
        rounded once to ``dtype`` (float32 default, or float64). NaN block scales give NaN.

        Args:
            dtype: float32 or float64.
            undo_hadamard: when the RHT was applied, return values in the original domain
                (the inverse transform, rounded again to ``dtype``); False returns the
                transformed domain, as a GEMM on both transformed operands sees it.
        """
        dt = np.dtype(dtype)
        if dt not in (np.dtype(np.float32), np.dtype(np.float64)):
            raise ValueError(f"dtype: expected float32 or float64, got {dt}")
        undo_hadamard = check_bool("undo_hadamard", undo_hadamard)
        q = formats.decode(self.codes, formats.E2M1).astype(np.float32)
        sf = formats.decode(self.scales, formats.E4M3).astype(np.float32)
        moved_q = np.moveaxis(q, self.axis, -1)
        tiles = _tile_view(moved_q, self.block)
        sfb = np.moveaxis(sf, self.axis, -1) if self.block[0] == 1 else sf
        prod = tiles * sfb[..., None] if self.block[0] == 1 else tiles * sfb[..., None, None]
        g = self.global_scale
        if dt == np.float64:
            prod = prod.astype(np.float64)
            g = np.float64(g)
        with np.errstate(invalid="ignore", over="ignore"):
            if self.scale_rule == "torchao":
                # torchao forms the high-precision scale p * sf first (one float32
                # rounding) and multiplies the element by it: q * (p * sf), two roundings,
                # not (q * sf) * p; in float64 both are exact
                scale = sfb * g
                vals = tiles * (scale[..., None] if self.block[0] == 1
                                else scale[..., None, None])
            else:
                vals = prod / g
        out = np.moveaxis(_untile(vals.astype(dt), self.block, moved_q.shape), -1, self.axis)
        if self.hadamard_signs is not None and undo_hadamard:
            out = hadamard_transform(
                out, size=16, axis=self.axis, signs=self.hadamard_signs, inverse=True
            )
        return out

    def packed(self, order: str = "low_first") -> np.ndarray:
        """E2M1 codes two per byte, flattened in C order (``refimpl.formats.pack``)."""
        return formats.pack(self.codes.reshape(-1), formats.E2M1, order=order)

    @classmethod
    def from_packed(
        cls,
        packed: Any,
        scales: Any,
        global_scale: float,
        shape: Tuple[int, ...],
        *,
        scale_rule: str = "te",
        block: Tuple[int, int] = (1, 16),
        axis: int = -1,
        hadamard_signs: Optional[np.ndarray] = None,
        order: str = "low_first",
    ) -> "NVFP4Array":
        """Rebuild from packed codes (``packed()``), scale codes, the global scale and the
        shape."""
        shape = tuple(int(s) for s in shape)
        count = int(np.prod(shape, dtype=np.int64))
        packed = np.asarray(packed)
        if packed.size != (count + 1) // 2:
            # a longer buffer would be silently cut: it belongs to another shape
            raise ValueError(
                f"packed: {packed.size} bytes, but {count} E2M1 codes for shape {shape} "
                f"pack into {(count + 1) // 2}"
            )
        codes = formats.unpack(packed, formats.E2M1, count, order=order)
        return cls(codes.reshape(shape), scales, global_scale, scale_rule, block, axis,
                   hadamard_signs)


def _axis(axis: int, ndim: int, block: Tuple[int, int]) -> int:
    axis = check_int("axis", axis)
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis: {axis!r} is out of range for an array of {ndim} dimensions")
    ax = int(axis) % ndim
    if block[0] != 1:
        if ndim < 2:
            raise ValueError("x: 16x16 blocks need at least two dimensions")
        if ax != ndim - 1:
            raise ValueError("axis: 16x16 blocks tile the last two axes; axis must be -1")
    return ax


def _scale_shape(shape: Tuple[int, ...], block: Tuple[int, int], ax: int) -> Tuple[int, ...]:
    s = list(shape)
    if block[0] == 1:
        s[ax] //= 16
    else:
        s[-2] //= 16
        s[-1] //= 16
    return tuple(s)


def _block_amax(flat: np.ndarray, shape: Tuple[int, ...], block: Tuple[int, int]) -> np.ndarray:
    """float32 ``max |x|`` of each block (NaN where the block holds NaN) of contiguous
    ``flat`` laid out as ``shape`` (blocks along the last axis), from the bit patterns
    (``refimpl.scaling.float32_blocks``)."""
    a2 = float32_blocks.block_max_bits(flat.view(np.uint32), 16)
    if block[0] == 1:
        a2 = a2.reshape(shape[:-1] + (shape[-1] // 16,))
    else:
        rows, cols = shape[-2:]
        a2 = a2.reshape(shape[:-2] + (rows // 16, 16, cols // 16)).max(axis=-2)
    return (a2 >> np.uint32(1)).view(_F32)


def _block_divisors(sf: np.ndarray, gscale: np.float32, rule: str) -> np.ndarray:
    """Per block, the float32 the elements are multiplied by ("te", "te_kernel") or
    divided by ("torchao"), each formed as the rule writes it."""
    with np.errstate(divide="ignore", over="ignore"):
        if rule == "te":
            return np.minimum(gscale / sf, _FLT_MAX)
        if rule == "te_kernel":
            return np.minimum(_F32(1.0) / (sf * (_F32(1.0) / gscale)), _FLT_MAX)
        return gscale * sf


def _e2m1_table() -> Tuple[np.ndarray, int]:
    # without saturation, like the rule: E2M1 has neither Inf nor NaN, so anything
    # beyond +-6 (Inf included) gives +-6, as the rule's clamp to [-6, 6] does; NaN
    # entries are never read (a NaN makes its block's scale NaN)
    return float32_lookup(formats.E2M1, "nearest_even", nan="zero")


def _encode_elements(flat: np.ndarray, tiles: np.ndarray, sf: np.ndarray,
                     gscale: np.float32, rule: str, nan_block: np.ndarray,
                     block: Tuple[int, int], shape: Tuple[int, ...]) -> np.ndarray:
    """E2M1 codes (laid out as ``shape``) of ``clamp(x * enc, -6, 6)`` (or ``x / d``),
    chunked over the 1x16 rows of contiguous ``flat``; blocks holding NaN get code 0."""
    div = _block_divisors(sf, gscale, rule)
    if rule == "torchao" and not div.all():
        # a per-tensor scale that underflowed to 0: the plain whole-array form raises
        # the encoder's error for 0/0 as it always did
        return _untile(_encode_elements_plain(tiles, sf, gscale, rule, nan_block, block),
                       block, shape)
    if block[0] != 1:  # one divisor per 16x16 tile: repeat it for the tile's 16 rows
        div = np.repeat(div, 16, axis=-2)
        nan_block = np.repeat(nan_block, 16, axis=-2)
    table, k = _e2m1_table()
    codes = float32_blocks.encode_blocks(flat, np.ascontiguousarray(div).reshape(-1), 16,
                                         table, k, divide=rule == "torchao")
    nan_rows = np.flatnonzero(nan_block.reshape(-1))
    if nan_rows.size:
        codes.reshape(-1, 16)[nan_rows] = 0
    return codes.reshape(shape)


def _encode_elements_plain(tiles: np.ndarray, sf: np.ndarray, gscale: np.float32,
                           rule: str, nan_block: np.ndarray,
                           block: Tuple[int, int]) -> np.ndarray:
    """The whole-array form of :func:`_encode_elements` (codes in tile layout)."""
    sfx = sf[..., None] if block[0] == 1 else sf[..., None, None]
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        if rule == "te":
            enc = np.minimum(gscale / sfx, _FLT_MAX)
            scaled = tiles * enc
        elif rule == "te_kernel":
            enc = np.minimum(_F32(1.0) / (sfx * (_F32(1.0) / gscale)), _FLT_MAX)
            scaled = tiles * enc
        else:
            scaled = tiles / (gscale * sfx)
        np.maximum(scaled, -_FP4_MAX, out=scaled)
        np.minimum(scaled, _FP4_MAX, out=scaled)
    if nan_block.any():
        nanx = nan_block[..., None] if block[0] == 1 else nan_block[..., None, None]
        scaled = np.where(nanx, _F32(0), scaled)
    return formats.encode(scaled.astype(_F32, copy=False), formats.E2M1)


def nvfp4_quantize(
    x: Any,
    *,
    axis: int = -1,
    block: Tuple[int, int] = (1, 16),
    global_amax: Optional[float] = None,
    scale_rule: str = "te",
    hadamard: bool = False,
    hadamard_signs: Sequence[int] = TE_WGRAD_SIGNS,
) -> NVFP4Array:
    """Quantise ``x`` to NVFP4 (rules and special cases in the module docstring).

    Args:
        x: float16/float32 array (float64 only when every value is a float32).
        axis: the axis of 1x16 blocks (and of the Hadamard groups); 16x16 tiles always
            cover the last two axes.
        block: ``(1, 16)`` (activations, default) or ``(16, 16)`` (weights).
        global_amax: the tensor amax used for the FP32 scale (converted to float32);
            None (default) takes the largest non-NaN magnitude of x (after the RHT).
        scale_rule: ``"te"`` (default), ``"te_kernel"`` or ``"torchao"``.
        hadamard: apply the 16-point random Hadamard transform along ``axis`` first.
        hadamard_signs: its sign diagonal (default TransformerEngine's fixed vector).

    Raises:
        ValueError: bad options, lengths not multiples of 16, non-float32 values in a
            float64 input, a negative or NaN ``global_amax``.
    """
    rule = _rule(scale_rule)
    blk = _block(block)
    hadamard = check_bool("hadamard", hadamard)
    arr = float32_values(x)
    if arr.ndim == 0:
        raise ValueError("x: expected at least one dimension")
    ax = _axis(axis, arr.ndim, blk)
    need = [ax] if blk[0] == 1 else [arr.ndim - 2, arr.ndim - 1]
    for d in need:
        if arr.shape[d] % 16:
            raise ValueError(f"x: length {arr.shape[d]} along axis {d} is not a multiple of 16")
    signs = None
    if hadamard:
        signs = np.asarray(hadamard_signs)
        arr = hadamard_transform(arr, size=16, axis=ax, signs=signs)
    moved = np.moveaxis(arr, ax, -1)
    tiles = _tile_view(moved, blk)
    red = (-1,) if blk[0] == 1 else (-2, -1)
    flat = None
    if tiles.size:
        flat = np.ascontiguousarray(moved).reshape(-1)
        bamax = _block_amax(flat, moved.shape, blk)  # NaN marks a block holding NaN
    else:
        bamax = np.zeros(tiles.shape[: -len(red)], _F32)
    nan_block = np.isnan(bamax)
    if global_amax is None:
        # the largest non-NaN magnitude: fmax skips NaN
        ga = _F32(np.fmax.reduce(bamax, axis=None, initial=_F32(0))) if bamax.size else _F32(0)
        if nan_block.any():
            mags = np.abs(tiles[nan_block])
            ga = max(ga, _F32(np.fmax.reduce(mags, axis=None, initial=_F32(0))))
    else:
        ga = _F32(global_amax)
    gscale = nvfp4_global_scale(ga, rule)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        if rule == "te":
            ds = (bamax / _FP4_MAX) * gscale
            ds = np.minimum(ds, _FLT_MAX)
            ds = np.minimum(ds, _E4M3_MAX)
        elif rule == "te_kernel":
            ds = bamax * (gscale * (_F32(1.0) / _FP4_MAX))
            ds = np.minimum(ds, _E4M3_MAX)  # the satfinite conversion
        else:
            ds = (bamax / _FP4_MAX) / gscale
            ds = np.minimum(np.maximum(ds, _E4M3_MIN_NORMAL), _E4M3_MAX)
        ds = np.where(nan_block, _F32(0), ds)
        finite_codes = formats.encode(ds.astype(_F32), formats.E4M3)  # NaN blocks: 0x00
        sf = formats.decode(finite_codes, formats.E4M3).astype(_F32)
        sf_codes = np.where(nan_block, np.uint8(_E4M3_NAN), finite_codes).astype(np.uint8)
    if flat is None:
        codes = np.zeros(moved.shape, np.uint8)
    else:
        codes = _encode_elements(flat, tiles, sf, gscale, rule, nan_block, blk, moved.shape)
    scale_codes = np.moveaxis(sf_codes, -1, ax) if blk[0] == 1 else sf_codes
    return NVFP4Array(
        np.ascontiguousarray(np.moveaxis(codes, -1, ax)),
        np.ascontiguousarray(scale_codes),
        gscale,
        rule,
        blk,
        ax,
        signs,
    )
