"""The one registry of scalar number formats and the lookup by common spellings.

Sources: IEEE 754-2019 (binary32, binary16), NVIDIA TF32 and BF16, OCP OFP8 rev 1.0
(E4M3 "fn", E5M2), AMD MI300 FNUZ variants, OCP MX v1.0 section 5 (E3M2, E2M3, E2M1
element formats and the E8M0 scale).
"""
from __future__ import annotations

from types import MappingProxyType
from typing import Mapping, Union

from .types import Format

FP32 = Format("fp32", 8, 23)
TF32 = Format("tf32", 8, 10, storage_bits=32)
BF16 = Format("bf16", 8, 7)
FP16 = Format("fp16", 5, 10)
E4M3 = Format("e4m3", 4, 3, bias=7, has_inf=False, nan="fn")
E5M2 = Format("e5m2", 5, 2, bias=15)
E4M3FNUZ = Format("e4m3fnuz", 4, 3, bias=8, has_inf=False, nan="fnuz")
E5M2FNUZ = Format("e5m2fnuz", 5, 2, bias=16, has_inf=False, nan="fnuz")
E3M2 = Format("e3m2", 3, 2, bias=3, has_inf=False, nan="none")
E2M3 = Format("e2m3", 2, 3, bias=1, has_inf=False, nan="none")
E2M1 = Format("e2m1", 2, 1, bias=1, has_inf=False, nan="none")
E8M0 = Format("e8m0", 8, 0, bias=127, signed=False, has_inf=False, nan="fn", subnormals=False)

#: canonical name -> Format, in a stable order (widest first).
REGISTRY: Mapping[str, Format] = MappingProxyType(
    {
        f.name: f
        for f in (FP32, TF32, BF16, FP16, E4M3, E5M2, E4M3FNUZ, E5M2FNUZ, E3M2, E2M3, E2M1, E8M0)
    }
)

# Common spellings (compared after lowercasing and dropping "_", "-", " " and ".").
_ALIASES: dict[str, str] = {
    "fp32": "fp32", "float32": "fp32", "f32": "fp32", "binary32": "fp32", "single": "fp32",
    "tf32": "tf32", "tensorfloat32": "tf32",
    "bf16": "bf16", "bfloat16": "bf16",
    "fp16": "fp16", "float16": "fp16", "f16": "fp16", "half": "fp16", "binary16": "fp16",
    "e4m3": "e4m3", "e4m3fn": "e4m3", "fp8e4m3": "e4m3", "fp8e4m3fn": "e4m3",
    "float8e4m3fn": "e4m3", "ocpe4m3": "e4m3",
    "e5m2": "e5m2", "fp8e5m2": "e5m2", "float8e5m2": "e5m2", "ocpe5m2": "e5m2",
    "e4m3fnuz": "e4m3fnuz", "fp8e4m3fnuz": "e4m3fnuz", "float8e4m3fnuz": "e4m3fnuz",
    "e5m2fnuz": "e5m2fnuz", "fp8e5m2fnuz": "e5m2fnuz", "float8e5m2fnuz": "e5m2fnuz",
    "e3m2": "e3m2", "e3m2fn": "e3m2", "fp6e3m2": "e3m2", "float6e3m2": "e3m2",
    "float6e3m2fn": "e3m2",
    "e2m3": "e2m3", "e2m3fn": "e2m3", "fp6e2m3": "e2m3", "float6e2m3": "e2m3",
    "float6e2m3fn": "e2m3",
    "e2m1": "e2m1", "e2m1fn": "e2m1", "fp4": "e2m1", "fp4e2m1": "e2m1", "float4e2m1": "e2m1",
    "float4e2m1fn": "e2m1",
    "e8m0": "e8m0", "e8m0fnu": "e8m0", "ue8m0": "e8m0", "fp8e8m0": "e8m0",
    "float8e8m0": "e8m0", "float8e8m0fnu": "e8m0",
}

# Names people reach for that are not scalar formats: refused with a hint.
_NOT_SCALAR: dict[str, str] = {
    "mxfp8": "a block-scaled format (OCP MX v1.0): E4M3 or E5M2 elements sharing an E8M0 "
    "scale per 32; use get('e4m3') / get('e5m2') for the elements and block scaling for "
    "the blocks",
    "mxfp6": "a block-scaled format (OCP MX v1.0): E2M3 or E3M2 elements sharing an E8M0 "
    "scale per 32; use get('e2m3') / get('e3m2') for the elements",
    "mxfp4": "a block-scaled format (OCP MX v1.0): E2M1 elements sharing an E8M0 scale per "
    "32; use get('e2m1') for the elements and get('e8m0') for the scale",
    "mxint8": "a block-scaled integer format (OCP MX v1.0), not a floating-point format",
    "nvfp4": "a block-scaled format (NVIDIA): E2M1 elements sharing an E4M3 scale per 16 "
    "plus an FP32 tensor scale; use get('e2m1') and get('e4m3')",
    "fp8": "ambiguous: say 'e4m3' or 'e5m2' (or their fnuz variants)",
    "float8": "ambiguous: say 'e4m3' or 'e5m2' (or their fnuz variants)",
    "float8e4m3": "ambiguous: ml_dtypes and IEEE P3109 name float8_e4m3 an IEEE-like E4M3 "
    "with Inf (largest finite 240), which differs from OCP E4M3 from code 0x78 up; say "
    "'e4m3' or 'float8_e4m3fn' for OCP E4M3, or build the IEEE-like one as "
    "Format('e4m3_ieee', 4, 3)",
    "fp6": "ambiguous: say 'e2m3' or 'e3m2'",
    "float6": "ambiguous: say 'e2m3' or 'e3m2'",
}

FormatLike = Union[Format, str]


def _key(name: str) -> str:
    return "".join(ch for ch in name.strip().lower() if ch not in "_- .")


def get(fmt: FormatLike) -> Format:
    """The :class:`Format` named ``fmt`` (case-insensitive, common spellings such as
    ``"e4m3"``, ``"fp8_e4m3"``, ``"float8_e4m3fn"``, ``"bfloat16"``); a Format is returned
    unchanged, so every ``fmt`` argument of this package accepts either.

    Raises:
        ValueError: an unknown name, or the name of a block-scaled or ambiguous format
            (``"mxfp4"``, ``"nvfp4"``, ``"fp8"``), with a hint.
        TypeError: ``fmt`` is neither a Format nor a string.
    """
    if isinstance(fmt, Format):
        return fmt
    if not isinstance(fmt, str):
        raise TypeError(f"fmt must be a Format or a format name, got {type(fmt).__name__}")
    key = _key(fmt)
    if key in _ALIASES:
        return REGISTRY[_ALIASES[key]]
    if key in _NOT_SCALAR:
        raise ValueError(f"{fmt!r} is not a scalar number format: it is {_NOT_SCALAR[key]}")
    raise ValueError(
        f"unknown number format {fmt!r}; known: {', '.join(REGISTRY)} "
        "(or build a user-defined refimpl.formats.Format)"
    )


def all_formats() -> list[Format]:
    """Every registered format, in registry order."""
    return list(REGISTRY.values())
