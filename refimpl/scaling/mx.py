"""OCP Microscaling (MX v1.0) block quantisation: MXFP8, MXFP6, MXFP4 and MXINT8.

A block of ``k`` (default 32) consecutive elements along one axis shares one E8M0 scale
``X = 2**e`` (OCP MX v1.0 section 5); each element ``V`` is stored as ``P = V / X`` rounded
to the element format, saturating to its largest finite value (section 6.3).

Scale rules (``scale_rule``), with ``amax`` the block's largest magnitude and ``emax`` the
exponent of the element format's largest normal value (E4M3 8, E5M2 15, E2M3 2, E3M2 4,
E2M1 2, INT8 0):

- ``"floor"`` (default, OCP MX v1.0 section 6.3): ``e = floor(log2(amax)) - emax``, with
  ``floor(log2)`` read from the exponent bits (float32 ``log2(7.9999995)`` is 3.0; the bits
  say 2). A block maximum can clip: E4M3 amax 960 gets 2**1 and 957 saturates to 448*2.
- ``"ceil"``: ``e = ceil(log2(amax)) - emax`` (one more when any mantissa bit of amax is set).
- ``"even"``: round amax to the element's mantissa width first (round-half-even on the
  significand; it only matters when that carries into the exponent), then floor.
- ``"rceil"`` (cuBLAS / TransformerEngine MXFP8): the smallest power of two with
  ``amax / X <= max_elem``, i.e. ``e = ceil(log2(amax / max_elem))``, computed exactly.
  TransformerEngine forms ``amax * float32(1/max)`` in float32 and rounds that up to a
  power of two; for the maxima of every MX floating-point element format the reciprocal
  rounds up and both give the same exponent for every float32 amax (a test checks this)
  but one per format: the float32 just above ``max_elem * 2**-127`` (E4M3, E3M2, E2M3,
  E2M1), where the float32 product is subnormal and rounds down onto ``2**-127``, so the
  float32 form picks 2**-127 (and the block maximum saturates) while the exact rule picks
  2**-126. For MXINT8's 127/64 they differ just above ``127/64 * 2**k``.

The exponent is clamped to [-127, 127] (scale codes 0x00..0xFE).

Special blocks (the spec leaves them to the implementation; the choices are named):

- All-zero block: scale code 0x00 (2**-127) and zero elements (-0.0 keeps its negative-zero
  code), as the public libraries do.
- A block containing NaN: scale 0xFF (NaN) and element codes 0; the whole block decodes to
  NaN (OCP MX v1.0 section 5: a NaN scale makes every element of its block NaN).
- A block containing +-Inf but no NaN follows ``inf_block``: ``"nan"`` (default: scale
  0xFF, element codes 0, as for NaN: no finite scale describes the block, and the spec's
  NaN scale is the one code that says so), ``"max"`` (scale 0xFE = 2**127, Inf elements
  saturate: TransformerEngine's satfinite path) or ``"exponent"`` (Inf counts as 2**128 for
  float32 input, 2**1024 for float64, its exponent field's value, then the rule applies and
  Inf elements saturate: torchao's FLOOR gives 0xF7 for E4M3).

MXINT8 (OCP MX v1.0 section 5): the element is an 8-bit two's complement integer with an implicit
scale of 2**-6 (values k/64). Quantisation rounds to the symmetric range k in [-127, 127]
(the code 0x80 = -2.0 is decoded when given, never produced).

Non-multiple lengths: ``pad=True`` treats the last block as zero-padded; zeros never change
a block's amax, and the padding is not stored (``codes`` has x's shape). A ``block_size``
larger than the axis makes the whole axis one block; its padding is never materialised
(``block_size=10**9`` costs no more memory than the axis itself).

Two implementations, one definition: float32 input rounded to nearest or toward zero
(the default case) runs in cache-sized chunks on the bit patterns
(:mod:`refimpl.scaling.float32_blocks`); float64 input, the directed and stochastic modes
take the plain whole-array path. Tests check both against each other and against the
per-block ``Fraction`` reference (:mod:`refimpl.scaling.mx_reference`). ``dequantize`` to
float32 moves each element's bits into a float32 and multiplies once by the block's
power of two (exact, then one rounding).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Tuple, Union

import numpy as np

from refimpl import formats
from refimpl.deprecation import REMOVED_IN, renamed_arguments
from refimpl.formats import Format
from refimpl.formats.encode import float32_lookup
from refimpl.formats.rounding import resolve_rounding
from refimpl.validation import as_float_array, check_axis, check_bool, check_positive_int

from . import float32_blocks
from .exponent import ceil_log2, ceil_log2_ratio, floor_log2, round_log2

__all__ = [
    "SCALE_RULES",
    "INF_BLOCK_POLICIES",
    "MX_ELEMENTS",
    "MXInt8",
    "INT8",
    "MXArray",
    "element_format",
    "mx_scale_exponent",
    "mx_quantize",
]

SCALE_RULES = ("floor", "ceil", "even", "rceil")
INF_BLOCK_POLICIES = ("nan", "max", "exponent")
#: element format names accepted by ``mx_quantize`` (OCP MX v1.0 table 1)
MX_ELEMENTS = ("e4m3", "e5m2", "e2m3", "e3m2", "e2m1", "int8")

SCALE_NAN = 0xFF
SCALE_BIAS = 127
SCALE_EXP_MIN = -127
SCALE_EXP_MAX = 127


@dataclass(frozen=True)
class MXInt8:
    """The MXINT8 element (OCP MX v1.0 section 5): two's complement int8 ``k`` meaning
    ``k * 2**-6``. The fields mirror the parts of ``Format`` that block scaling reads."""

    name: str = "int8"
    bits: int = 8
    emax: int = 0  # largest value 127/64 is below 2**1
    man_bits: int = 6  # fraction bits of k/64
    max: float = 127 / 64
    quantum_exp: int = -6

    def __str__(self) -> str:
        return self.name


INT8 = MXInt8()
ElementLike = Union[Format, MXInt8, str]
Element = Union[Format, MXInt8]


@renamed_arguments({"elem": "fmt"})
def element_format(fmt: ElementLike) -> Element:
    """The MX element format for ``fmt`` (a Format, a format name, or ``"int8"``).

    Raises:
        ValueError: not one of the MX element formats E4M3, E5M2, E2M3, E3M2, E2M1, INT8.
    """
    if isinstance(fmt, MXInt8):
        return fmt
    if isinstance(fmt, str) and fmt.strip().lower().replace("_", "") in ("int8", "mxint8"):
        return INT8
    f = formats.get(fmt)
    if f.name not in MX_ELEMENTS:
        raise ValueError(
            f"fmt: {f.name!r} is not an MX element format; expected one of "
            f"{', '.join(MX_ELEMENTS)}"
        )
    if f != formats.get(f.name):
        # a user Format that merely borrows a registered name has other values
        raise ValueError(
            f"fmt: {f!r} is named {f.name!r} but differs from the MX element format "
            f"{formats.get(f.name)!r}"
        )
    return f


def _quantum_exp(fmt: Element) -> int:
    """Exponent of the element format's smallest positive step (its smallest subnormal)."""
    if isinstance(fmt, MXInt8):
        return fmt.quantum_exp
    return fmt.emin - fmt.man_bits


def _choice(name: str, value: str, allowed: Tuple[str, ...]) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name}: expected one of {', '.join(allowed)} (a string), "
                        f"got {value!r}")
    if value.strip().lower() not in allowed:
        raise ValueError(f"{name}: expected one of {', '.join(allowed)}, got {value!r}")
    return value.strip().lower()


def _rule_exponent(a: np.ndarray, fmt: Element, rule: str) -> np.ndarray:
    """Unclamped scale exponent for finite positive amax values ``a`` (int64)."""
    if rule == "floor":
        return floor_log2(a) - fmt.emax
    if rule == "ceil":
        return ceil_log2(a) - fmt.emax
    if rule == "even":
        return round_log2(a, fmt.man_bits) - fmt.emax
    return ceil_log2_ratio(a, float(fmt.max))


@renamed_arguments({"elem": "fmt"})
def mx_scale_exponent(
    amax: Any,
    fmt: ElementLike,
    *,
    scale_rule: str = "floor",
    inf_block: str = "nan",
) -> Tuple[np.ndarray, np.ndarray]:
    """The E8M0 scale of blocks with the given amax values.

    Args:
        amax: block maxima ``max |V_i|`` (float32 or float64; NaN marks a block containing
            NaN, Inf one containing Inf).
        fmt: the element format.
        scale_rule: ``"floor"`` (default), ``"ceil"``, ``"even"`` or ``"rceil"``.
        inf_block: ``"nan"`` (default), ``"max"`` or ``"exponent"`` (module docstring).

    Returns:
        ``(codes, exponents)``: uint8 E8M0 codes, and int64 exponents ``e`` (the scale
        is ``2**e``; 0 where the code is NaN).

    Raises:
        TypeError: an option that is not a string.
        ValueError: a bad option or a negative amax.
    """
    el = element_format(fmt)
    rule = _choice("scale_rule", scale_rule, SCALE_RULES)
    policy = _choice("inf_block", inf_block, INF_BLOCK_POLICIES)
    a = as_float_array(amax, "amax")  # floats in native byte order, or exact integers
    if a.dtype == np.float16:
        a = a.astype(np.float32)
    if np.any(a < 0):
        raise ValueError("amax: block maxima must be non-negative")
    nan = np.isnan(a)
    inf = np.isinf(a)
    zero = a == 0
    finite = ~(nan | inf | zero)
    safe = np.where(finite, a, np.ones((), dtype=a.dtype))
    e = _rule_exponent(safe, el, rule)
    if policy == "exponent":
        # Inf's exponent field is one past the largest finite exponent: 2**128 (float32) or
        # 2**1024 (float64); every rule commutes with multiplying by a power of two.
        inf_exp = 128 if a.dtype == np.float32 else 1024
        e_inf = inf_exp + _rule_exponent(np.ones(1, dtype=a.dtype), el, rule)[0]
        e = np.where(inf, e_inf, e)
    elif policy == "max":
        e = np.where(inf, SCALE_EXP_MAX, e)
    e = np.clip(e, SCALE_EXP_MIN, SCALE_EXP_MAX)
    e = np.where(zero, SCALE_EXP_MIN, e)
    nan_scale = nan | (inf & (policy == "nan"))
    e = np.where(nan_scale, 0, e)
    codes = (e + SCALE_BIAS).astype(np.uint8)
    codes = np.where(nan_scale, np.uint8(SCALE_NAN), codes).astype(np.uint8)
    return codes, e.astype(np.int64)


# ----- element codecs -------------------------------------------------------------------


def _encode_int8(v: np.ndarray, rounding: str) -> np.ndarray:
    """MXINT8 element codes of ``v`` (already divided by the scale): k = round(64 v),
    saturated to [-127, 127], stored as the two's complement byte."""
    mode = resolve_rounding(rounding, formats.E4M3)  # names as for any signed format
    t = v.astype(np.float64) * 64.0  # exact: a power-of-two multiple
    if mode == "nearest_even":
        k = np.rint(t)
    elif mode == "nearest_away":
        r = np.trunc(t)
        with np.errstate(invalid="ignore"):  # Inf - Inf: the Inf is clamped below anyway
            k = r + np.where(np.abs(t - r) >= 0.5, np.sign(t), 0.0)
    elif mode == "toward_zero":
        k = np.trunc(t)
    elif mode == "toward_positive":
        k = np.ceil(t)
    elif mode == "toward_negative":
        k = np.floor(t)
    else:
        raise ValueError(f"rounding={rounding!r} is not offered for MXINT8 elements")
    k = np.clip(k, -127, 127)
    return k.astype(np.int8).view(np.uint8)


def _decode_int8(codes: np.ndarray) -> np.ndarray:
    return codes.astype(np.uint8).view(np.int8).astype(np.float64) * (1.0 / 64)


def decode_elements(codes: np.ndarray, fmt: Element) -> np.ndarray:
    """Element values (float64, exact) of element codes."""
    if isinstance(fmt, MXInt8):
        return _decode_int8(np.asarray(codes))
    return formats.decode(codes, fmt).astype(np.float64)


def _check_codes(codes: np.ndarray, fmt: Element, name: str = "codes") -> np.ndarray:
    arr = np.asarray(codes)
    if arr.dtype != np.uint8:
        if arr.dtype.kind not in "ui":
            raise ValueError(f"{name}: expected uint8 codes, got dtype {arr.dtype}")
        if arr.size and (arr.min() < 0 or arr.max() > 0xFF):
            raise ValueError(f"{name}: codes must lie in [0, 255]")
        arr = arr.astype(np.uint8)
    if fmt.bits < 8 and arr.size and int(arr.max()) >> fmt.bits:
        first = np.unravel_index(int(np.argmax((arr >> fmt.bits) != 0)), arr.shape)
        raise ValueError(
            f"{name}: code {int(arr[first]):#x} at index {tuple(int(i) for i in first)} "
            f"has bits above the {fmt.bits}-bit {fmt.name} code"
        )
    return arr


def _norm_axis(axis: int, ndim: int, name: str = "axis") -> int:
    return check_axis(name, axis, ndim)


def block_span(n: int, block_size: int) -> int:
    """Elements a block of an axis of length ``n`` is laid out with: ``block_size``, or
    ``n`` when one block covers the whole axis (its zero padding is never stored, so a
    huge ``block_size`` costs no memory)."""
    return n if 0 < n <= block_size else block_size


def _check_block_size(block_size: int) -> int:
    return check_positive_int("block_size", block_size)


# ----- the block-scaled array -----------------------------------------------------------


@dataclass(frozen=True, eq=False)
class MXArray:
    """An MX tensor: element codes, one E8M0 scale code per block, and the layout.

    Attributes:
        codes: uint8 element codes, the shape of the source tensor (FP4/FP6 codes in the
            low bits; MXINT8 as two's complement bytes).
        scales: uint8 E8M0 codes; the source shape with the ``axis`` length replaced by
            the number of blocks ``ceil(n / block_size)``.
        fmt: the element format (a ``Format`` or ``INT8``).
        block_size: elements per block along ``axis`` (32 in OCP MX v1.0).
        axis: the (non-negative) axis the blocks run along.
    """

    codes: np.ndarray
    scales: np.ndarray
    fmt: Element
    block_size: int = 32
    axis: int = -1

    def __post_init__(self) -> None:
        fmt = element_format(self.fmt)
        object.__setattr__(self, "fmt", fmt)
        bs = _check_block_size(self.block_size)
        object.__setattr__(self, "block_size", bs)
        codes = _check_codes(self.codes, fmt)
        if codes.ndim == 0:
            raise ValueError("codes: expected at least one dimension")
        ax = _norm_axis(self.axis, codes.ndim)
        object.__setattr__(self, "axis", ax)
        scales = _check_codes(self.scales, formats.E8M0, "scales")
        expect = list(codes.shape)
        expect[ax] = -(-codes.shape[ax] // bs)
        if scales.shape != tuple(expect):
            raise ValueError(
                f"scales: shape {scales.shape} does not match codes {codes.shape} with "
                f"block_size {bs} along axis {ax} (expected {tuple(expect)})"
            )
        object.__setattr__(self, "codes", codes)
        object.__setattr__(self, "scales", scales)

    @property
    def shape(self) -> Tuple[int, ...]:
        return tuple(self.codes.shape)

    def scale_exponents(self) -> np.ndarray:
        """int64 scale exponents ``e`` (scale ``2**e``); NaN scales (0xFF) give 0."""
        s = self.scales.astype(np.int64)
        return np.where(s == SCALE_NAN, 0, s - SCALE_BIAS)

    def dequantize(self, dtype: Any = np.float32) -> np.ndarray:
        """``X * P`` for every element (OCP MX v1.0 section 5), rounded once to ``dtype``.

        The product is formed exactly in float64 (every element times every E8M0 scale is
        a float64), so float32 output is the correctly rounded value: it overflows to
        +-Inf beyond float32's range (E5M2 elements with scales near 2**127) and rounds
        below its normal range. Blocks with a NaN scale decode to NaN.

        Args:
            dtype: float32 (default) or float64 (always exact).
        """
        dt = np.dtype(dtype)
        if dt not in (np.dtype(np.float32), np.dtype(np.float64)):
            raise ValueError(f"dtype: expected float32 or float64, got {dt}")
        n = self.codes.shape[self.axis]
        nblk = self.scales.shape[self.axis]
        bs = block_span(n, self.block_size)
        if self.axis == self.codes.ndim - 1 and n == nblk * bs and dt == np.float32:
            out = _dequantize_chunked(self.codes.reshape(-1), self.scales.reshape(-1),
                                      self.fmt, bs)
            return out.reshape(self.codes.shape)
        vals = _element_table(self.fmt)[self.codes]
        moved = np.moveaxis(vals, self.axis, -1)
        n = moved.shape[-1]
        nblk = self.scales.shape[self.axis]
        bs = block_span(n, self.block_size)
        if n != nblk * bs:
            moved = np.concatenate(
                [moved, np.zeros(moved.shape[:-1] + (nblk * bs - n,), dtype=moved.dtype)],
                axis=-1,
            )
        blocks = moved.reshape(moved.shape[:-1] + (nblk, bs))
        s = np.moveaxis(self.scales, self.axis, -1)
        mult = np.where(
            s == SCALE_NAN, np.nan, np.ldexp(1.0, s.astype(np.int64) - SCALE_BIAS)
        )
        with np.errstate(over="ignore"):  # beyond float32's range: +-Inf, as documented
            out = (blocks * mult[..., None]).reshape(moved.shape)[..., :n].astype(dt)
        return np.moveaxis(out, -1, self.axis)

    def packed(self, order: str = "low_first", *, dense: bool = False) -> np.ndarray:
        """The element codes packed for storage, flattened in C order
        (``refimpl.formats.pack``): FP4 two codes per byte (element 0 in the low nibble
        with the default ``order="low_first"``), FP6 one code per byte (or four in three
        bytes with ``dense=True``), FP8 and INT8 one code per byte as they are."""
        flat = self.codes.reshape(-1)
        if self.fmt.bits == 8:
            return flat.copy()
        return formats.pack(flat, self.fmt, order=order, dense=dense)

    @property
    def elem(self) -> Element:
        """Deprecated spelling of :attr:`fmt`."""
        warnings.warn(f"MXArray.elem is deprecated and will be removed in {REMOVED_IN}; "
                      "use MXArray.fmt", DeprecationWarning, stacklevel=2)
        return self.fmt

    @classmethod
    @renamed_arguments({"elem": "fmt"})
    def from_packed(
        cls,
        packed: Any,
        scales: Any,
        fmt: ElementLike,
        shape: Tuple[int, ...],
        *,
        block_size: int = 32,
        axis: int = -1,
        order: str = "low_first",
        dense: bool = False,
    ) -> "MXArray":
        """Rebuild an MXArray from packed codes (``packed()``), scale codes and the shape.

        Raises:
            ValueError: the packed data does not hold ``prod(shape)`` codes, stray high
                bits, or scales that do not match the layout.
        """
        el = element_format(fmt)
        shape = tuple(int(s) for s in shape)
        count = int(np.prod(shape, dtype=np.int64))
        if el.bits == 8:
            flat = np.asarray(packed)
            if flat.dtype != np.uint8 or flat.size != count:
                raise ValueError(
                    f"packed: expected {count} uint8 codes for shape {shape}, got "
                    f"{flat.size} of dtype {flat.dtype}"
                )
            flat = flat.reshape(-1)
        else:
            packed = np.asarray(packed)
            need = (count + 1) // 2 if el.bits == 4 else (-(-count // 4) * 3 if dense else count)
            if packed.size != need:
                # a longer buffer would be silently cut: it belongs to another shape
                raise ValueError(
                    f"packed: {packed.size} bytes, but {count} {el.name} codes for shape "
                    f"{shape} pack into {need}"
                )
            flat = formats.unpack(packed, el, count, order=order, dense=dense)
        return cls(flat.reshape(shape), np.asarray(scales), el, block_size, axis)


# the keyword spelling MXArray(elem=...) of the constructor
MXArray.__init__ = renamed_arguments(  # type: ignore[method-assign]
    {"elem": "fmt"})(MXArray.__init__)

_TABLES: dict = {}


def _element_table(fmt: Element) -> np.ndarray:
    """Value of every element code (float64, 256 entries; codes above the format's width
    are rejected before lookup)."""
    key = fmt  # the format itself (frozen, hashable), never just its name
    if key not in _TABLES:
        codes = np.arange(1 << fmt.bits, dtype=np.uint8)
        table = np.zeros(256, dtype=np.float64)
        table[: codes.size] = decode_elements(codes, fmt)
        table.setflags(write=False)
        _TABLES[key] = table
    return _TABLES[key]


def _element_table32(elem: Element) -> np.ndarray:
    """``_element_table`` in float32 (exact: every MX element value is a float32)."""
    key = (elem, "float32")
    if key not in _TABLES:
        table = _element_table(elem).astype(np.float32)
        table.setflags(write=False)
        _TABLES[key] = table
    return _TABLES[key]


def _dequantize_chunked(codes: np.ndarray, scales: np.ndarray, el: Element,
                        bs: int) -> np.ndarray:
    """float32 ``X * P`` of 1-D codes (blocks of ``bs``) and their E8M0 scale codes,
    each product formed exactly and rounded once (``refimpl.scaling.float32_blocks``).

    The element value reaches float32 without a lookup (its bits moved into place, or
    the int8 converted), off by a power of two that the per-block multiplier takes
    back: ``2**(s - 127 + 127 - bias)`` (``2**(s - 127 - 6)`` for MXINT8). Where that
    multiplier leaves float32's range (scales above ``2**bias``, rare), those blocks use
    the value table and ``2**(s - 127)`` instead. Formats with two exponent bits (E2M1,
    E2M3) take the value table and ``2**(s - 127)`` for every block
    (:func:`refimpl.scaling.float32_blocks.decode_table`).
    """
    s = scales.astype(np.int32) - SCALE_BIAS
    nan = scales == SCALE_NAN
    if isinstance(el, MXInt8):
        mult = np.ldexp(np.float32(1), s + el.quantum_exp)
        mult[nan] = np.nan
        return float32_blocks.decode_int8(codes, mult, bs)
    if el.bits - 1 - el.man_bits <= 2:
        # two exponent bits: a quarter of the codes are subnormal (decode_table says why)
        with np.errstate(over="ignore"):
            mult = np.ldexp(np.float32(1), s)
        mult[nan] = np.nan
        return float32_blocks.decode_table(codes, _element_table32(el), mult, bs)
    shift = 127 - el.bias
    with np.errstate(over="ignore"):
        mult = np.ldexp(np.float32(1), s + shift)
    mult[nan] = np.nan
    big = np.flatnonzero(~nan & (s + shift > 127))
    mult[big] = 1.0  # recomputed below
    values = _element_table32(el)
    special = el.max_code_magnitude + 1 if el.nan != "none" else 256
    out = float32_blocks.decode_fields(codes, el.bits, el.man_bits, mult, bs, special,
                                       values)
    if big.size:
        sub = codes.reshape(-1, bs)[big]
        m = np.ldexp(np.float32(1), s[big])
        with np.errstate(over="ignore"):
            out.reshape(-1, bs)[big] = values[sub] * m[:, None]
    return out


# ----- quantisation ---------------------------------------------------------------------

#: element rounding modes of the chunked float32 path (a float32 quotient below float32's
#: normal range is rounded there, which only modes that can round such a value up notice)
_CHUNKED_MODES = ("nearest_even", "nearest_away", "toward_zero")


def _encoder_table(elem: Element, mode: str) -> Tuple[np.ndarray, int]:
    """(table, k) of ``float32_blocks`` for saturating element encoding in ``mode``."""
    key = (elem, mode, "encode")
    if key not in _TABLES:
        if isinstance(elem, MXInt8):
            # k/64 rounds like a format with 6 fraction bits whose steps never get finer
            # than 2**-6: every boundary lies at input bit k + 1 = 16 or above
            k = 23 - elem.man_bits - 2
            table = float32_blocks.float32_table(lambda v: _encode_int8(v, mode), k)
        else:
            # NaN entries are never read (a NaN makes the block's scale NaN)
            table, k = float32_lookup(elem, mode, saturate=True, nan="zero")
        _TABLES[key] = (table, k)
    return _TABLES[key]


def _scales_from_bits(
    a2: np.ndarray, el: Element, rule: str, policy: str
) -> Tuple[np.ndarray, np.ndarray]:
    """``mx_scale_exponent`` of float32 block maxima given as ``bits << 1`` (uint32):
    (uint8 codes, int32 exponents). Normal maxima take the rule straight from the
    exponent and mantissa fields; zero, subnormal, Inf and NaN maxima (rare) go through
    ``mx_scale_exponent`` itself."""
    mag = a2 >> np.uint32(1)
    fld = (mag >> np.uint32(23)).astype(np.int32)
    e = fld - (127 + el.emax)  # floor(log2 amax) - emax
    if rule != "floor":
        man = mag & np.uint32(0x7F_FFFF)
        if rule == "ceil":
            e += man != 0
        elif rule == "even":
            # significand rounded to man_bits carries to 2: 1.m >= 2 - 2**-(man_bits+1)
            e += man >= (1 << 23) - (1 << (22 - el.man_bits))
        else:  # rceil: ceil(log2(amax / max)) from frexp's (m, e) pairs, both float32
            top = np.float32(el.max).view(np.uint32)
            e = fld - int(top >> np.uint32(23)) + (man > (top & np.uint32(0x7F_FFFF)))
    np.clip(e, SCALE_EXP_MIN, SCALE_EXP_MAX, out=e)
    codes = (e + SCALE_BIAS).astype(np.uint8)
    special = np.flatnonzero((fld == 0) | (fld == 255))
    if special.size:
        c, ex = mx_scale_exponent(mag[special].view(np.float32), el, scale_rule=rule,
                                  inf_block=policy)
        codes[special] = c
        e[special] = ex
    return codes, e


def _quantize_chunked(
    flat: np.ndarray, bs: int, el: Element, rule: str, policy: str, mode: str
) -> Tuple[np.ndarray, np.ndarray]:
    """(scale codes per block, element codes) of contiguous 1-D float32 ``flat``, blocks of
    ``bs`` consecutive elements: the same arithmetic as the general path of
    ``mx_quantize`` (a float32 multiply by ``2**-e``, then the encoder's table), chunked
    (``refimpl.scaling.float32_blocks``)."""
    bits = flat.view(np.uint32)
    scale_codes, e = _scales_from_bits(float32_blocks.block_max_bits(bits, bs), el, rule,
                                       policy)
    # 2**-e as float32 bits: exponent field 127 - e, except 2**-127 (a subnormal)
    mbits = (np.int32(127) - e).astype(np.uint32) << np.uint32(23)
    mbits[e == SCALE_EXP_MAX] = 0x0040_0000
    nan_blocks = np.flatnonzero(scale_codes == SCALE_NAN)
    mbits[nan_blocks] = 0x3F80_0000  # 1.0; these blocks' codes are zeroed below
    table, k = _encoder_table(el, mode)
    codes = float32_blocks.encode_blocks(flat, mbits.view(np.float32), bs, table, k)
    if nan_blocks.size:
        codes.reshape(-1, bs)[nan_blocks] = 0
    return scale_codes, codes


_EXACT_F32_MODES = ("nearest_even", "nearest_away", "toward_zero", "stochastic")
_TINY64 = 2.0 ** -1000  # far below half the smallest step of any element format


def _prepare_bits(
    random_bits: Any, shape: Tuple[int, ...], ax: int, nblk: int, bs: int
) -> Any:
    """Move and pad stochastic-rounding bits exactly as the data is moved and padded."""
    if random_bits is None:
        return None
    if isinstance(random_bits, tuple):
        arr, nbits = random_bits
    else:
        arr, nbits = random_bits, None
    arr = np.asarray(arr)
    try:
        arr = np.broadcast_to(arr, shape)
    except ValueError:
        raise ValueError(
            f"random_bits of shape {arr.shape} does not broadcast to x's shape {shape}"
        ) from None
    arr = np.moveaxis(arr, ax, -1)
    n = arr.shape[-1]
    if nblk * bs != n:
        arr = np.concatenate([arr, np.zeros(arr.shape[:-1] + (nblk * bs - n,), arr.dtype)], -1)
    arr = arr.reshape(arr.shape[:-1] + (nblk, bs))
    return arr if nbits is None else (arr, nbits)


def _quantize_general(
    blocks: np.ndarray, el: Element, rule: str, policy: str, mode: str, rb: Any
) -> Tuple[np.ndarray, np.ndarray]:
    """(scale codes, element codes) of ``blocks`` (..., nblk, bs) in any mode and float
    dtype: the plain vectorised form of OCP MX v1.0 section 6.3 (whole-array passes)."""
    amax = np.max(np.abs(blocks), axis=-1) if blocks.size else np.zeros(blocks.shape[:-1])
    scale_codes, e = mx_scale_exponent(amax, el, scale_rule=rule, inf_block=policy)

    # the division by 2**e: exact in float64 for every float32 input; float32 is exact too
    # except where the quotient falls below float32's normal range, which matters only to
    # modes that can round such a tiny value up (directed rounding)
    use_f32 = blocks.dtype == np.float32 and mode in _EXACT_F32_MODES
    work_dt = np.float32 if use_f32 else np.float64
    mult = np.ldexp(np.ones((), dtype=work_dt), -e).astype(work_dt)
    scaled = blocks.astype(work_dt, copy=False) * mult[..., None]
    if blocks.dtype == np.float64:
        # float64 input below float64's normal range after scaling: replace by a tiny
        # value of the same sign that every mode rounds alike (0 or the smallest step)
        tiny = (np.abs(scaled) < _TINY64) & (blocks != 0)
        if tiny.any():
            scaled = np.where(tiny, np.copysign(_TINY64, blocks), scaled)
    no_elems = scale_codes == SCALE_NAN
    if no_elems.any():
        scaled = np.where(no_elems[..., None], np.zeros((), dtype=work_dt), scaled)
    if isinstance(el, MXInt8):
        codes = _encode_int8(scaled, mode)
    else:
        codes = formats.encode(scaled, el, rounding=mode, saturate=True, random_bits=rb)
    return scale_codes, codes



@renamed_arguments({"elem": "fmt"})
def mx_quantize(
    x: Any,
    fmt: ElementLike,
    *,
    block_size: int = 32,
    axis: int = -1,
    scale_rule: str = "floor",
    rounding: str = "nearest_even",
    pad: bool = False,
    inf_block: str = "nan",
    random_bits: Any = None,
) -> MXArray:
    """Quantise ``x`` to an MX format (OCP MX v1.0 section 6.3).

    Special blocks and scale rules: see the module docstring. Elements always saturate.

    Args:
        x: float16, float32 or float64 array (integers exactly representable in float64
            are accepted); never pre-rounded: each element is rounded once, from its own
            precision, after an exact division by the power-of-two scale.
        fmt: element format: ``"e4m3"``, ``"e5m2"`` (MXFP8), ``"e2m3"``, ``"e3m2"``
            (MXFP6), ``"e2m1"`` (MXFP4), ``"int8"`` (MXINT8), or a Format.
        block_size: elements per block (32 in OCP MX v1.0).
        axis: the axis the blocks run along.
        scale_rule: ``"floor"`` (default), ``"ceil"``, ``"even"``, ``"rceil"``.
        rounding: element rounding, any mode of ``refimpl.formats.encode`` (default
            ``"nearest_even"``; MXINT8 takes the deterministic modes).
        pad: allow a length along ``axis`` that is not a multiple of ``block_size`` (the
            last block is zero-padded; padding is not stored).
        inf_block: policy for blocks holding Inf: ``"nan"`` (default), ``"max"``,
            ``"exponent"``.
        random_bits: stochastic rounding bits, as ``refimpl.formats.encode`` takes them,
            shaped like ``x``.

    Returns:
        An ``MXArray``.

    Raises:
        TypeError: an option of the wrong type (``block_size`` not an int, ``pad`` not a
            bool, ``scale_rule`` not a string).
        ValueError: bad options, a non-float input, a length not a multiple of
            ``block_size`` without ``pad``.
    """
    el = element_format(fmt)
    rule = _choice("scale_rule", scale_rule, SCALE_RULES)
    policy = _choice("inf_block", inf_block, INF_BLOCK_POLICIES)
    bs = _check_block_size(block_size)
    pad = check_bool("pad", pad)
    if not isinstance(el, MXInt8):
        mode = resolve_rounding(rounding, el)
    else:
        mode = resolve_rounding(rounding, formats.E4M3)
    arr = as_float_array(x, "x")
    if arr.dtype == np.float16:
        arr = arr.astype(np.float32)  # exact
    if arr.ndim == 0:
        raise ValueError("x: expected at least one dimension")
    ax = _norm_axis(axis, arr.ndim)
    moved = np.moveaxis(arr, ax, -1)
    n = moved.shape[-1]
    nblk = -(-n // bs)
    if n % bs and not pad:
        raise ValueError(
            f"x: length {n} along axis {axis} is not a multiple of block_size {bs} "
            "(pass pad=True to zero-pad the last block)"
        )
    bs = block_span(n, bs)  # the layout; the block size recorded below is block_size
    if n % bs:
        moved = np.concatenate(
            [moved, np.zeros(moved.shape[:-1] + (nblk * bs - n,), dtype=moved.dtype)], axis=-1
        )
    rb = _prepare_bits(random_bits, arr.shape, ax, nblk, bs)
    blocks = moved.reshape(moved.shape[:-1] + (nblk, bs))
    if blocks.dtype == np.float32 and mode in _CHUNKED_MODES and rb is None and blocks.size:
        scale_codes, codes = _quantize_chunked(
            np.ascontiguousarray(blocks).reshape(-1), bs, el, rule, policy, mode)
        scale_codes = scale_codes.reshape(blocks.shape[:-1])
    else:
        scale_codes, codes = _quantize_general(blocks, el, rule, policy, mode, rb)
    codes = codes.reshape(moved.shape)[..., :n]
    return MXArray(
        np.ascontiguousarray(np.moveaxis(codes, -1, ax)),
        np.ascontiguousarray(np.moveaxis(scale_codes, -1, ax)),
        el,
        _check_block_size(block_size),
        ax,
    )
