"""Scalar number formats: the registry, encode (rounding once, from the input's own
precision), decode, round_to, value tables and FP4/FP6 packing.

Sources: IEEE 754-2019, OCP OFP8 rev 1.0, OCP MX v1.0 section 5, IEEE P3109 interim
report (stochastic rounding), NVIDIA PTX ISA ``cvt``.

- ``Format``: frozen descriptor (exponent/mantissa widths, bias, Inf, NaN layout
  "ieee"/"fn"/"fnuz"/"none") with derived ``bits``, ``max``, ``min_normal``,
  ``min_subnormal``, ``eps``, ``emax``, ``emin``. ``Format("e3m4", 3, 4)`` defines an
  IEEE-like user format; anything up to 32 bits runs through the same code.
- ``REGISTRY`` / ``all_formats()`` / ``get(name)``: FP32, TF32, BF16, FP16, E4M3, E5M2,
  E4M3FNUZ, E5M2FNUZ, E3M2, E2M3, E2M1, E8M0; ``get`` takes common spellings
  ("float8_e4m3fn") and refuses block formats ("mxfp4") with a hint.
- ``encode(x, fmt, rounding=, saturate=, nan=, random_bits=)`` -> uint codes;
  ``decode(codes, fmt)`` -> float32; ``round_to(x, fmt, ...)`` = decode(encode(x)).
- ``value_table(fmt)``; ``pack(codes, fmt, order=)`` / ``unpack(packed, fmt, count)``.

Defaults: round to nearest even; no saturation (E4M3 overflows to NaN, E5M2 to Inf, the
MX FP6/FP4 element formats saturate); NaN input keeps the format's NaN, or raises for a
format without NaN; E8M0 ties to the even code (``rounding="nearest_away"`` rounds ties up).

>>> from refimpl import formats
>>> int(formats.encode(1.0625 + 2**-40, "e4m3"))
57
>>> float(formats.decode(0x7E, formats.E4M3))
448.0
"""
from .decode import decode
from .encode import encode
from .packing import pack, unpack
from .registry import (
    BF16,
    E2M1,
    E2M3,
    E3M2,
    E4M3,
    E4M3FNUZ,
    E5M2,
    E5M2FNUZ,
    E8M0,
    FP16,
    FP32,
    REGISTRY,
    TF32,
    FormatLike,
    all_formats,
    get,
)
from .round import round_to
from .tables import ValueTable, value_table
from .rounding import NAN_POLICIES, ROUNDING_MODES
from ..rounding_modes import RoundingMode
from .types import CLASSES, NAN_KINDS, Format

__all__ = [
    "Format",
    "FormatLike",
    "REGISTRY",
    "all_formats",
    "get",
    "encode",
    "decode",
    "round_to",
    "value_table",
    "pack",
    "unpack",
    "ValueTable",
    "ROUNDING_MODES",
    "RoundingMode",
    "NAN_POLICIES",
    "NAN_KINDS",
    "CLASSES",
    "FP32",
    "TF32",
    "BF16",
    "FP16",
    "E4M3",
    "E5M2",
    "E4M3FNUZ",
    "E5M2FNUZ",
    "E3M2",
    "E2M3",
    "E2M1",
    "E8M0",
]
