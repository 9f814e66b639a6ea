"""Golden cases for the scalar number formats (``refimpl.formats``).

- ``formats.decode``: value tables: every code of every format of 8 bits or fewer
  (default suite), every code of FP16 and BF16 (full suite), TestFloat-style samples of
  the wider ones. Decoded NaNs compare as one class (the payload is not specified).
- ``formats.encode``: conversions from float32 (and float64 for the double-rounding trap,
  float16) with inputs placed relative to the target format, for each rounding mode and
  saturation setting; stochastic rounding with its random bits as an input. What the
  specifications leave open is a named variant, its option written into the case's
  parameters, the general cases free of it:

  - ``nan_to_e2m1`` / ``nan_to_e2m3`` / ``nan_to_e3m2`` (parameter ``nan``): what a NaN
    becomes in a format without NaN, its sign included: ``zero`` (+0 for either sign,
    TransformerEngine; the default), ``signed_zero`` (the zero of the NaN's sign),
    ``0x8`` (ml_dtypes' E2M1 code, -0 even for +NaN), ``0x3`` (torchao, E2M1).
  - ``e8m0_tie``: E8M0's tie rule (``nearest_even`` on the exponent, the default, or
    ``up`` as ml_dtypes and RCEIL).
  - ``e8m0_zero`` (parameter ``e8m0_zero``): E8M0 has no zero. ``min`` (default: code
    0x00 = 2^-127, the nearest value; PyTorch's cast and ONNX's saturating cast) or
    ``nan`` (0xFF; ONNX's non-saturating cast).
  - ``e8m0_negative`` (parameter ``e8m0_negative``): E8M0 has no sign. ``nan`` (default:
    0xFF, no value describes a negative number) or ``magnitude`` (the code of ``|x|``:
    PyTorch's cast reads the exponent bits and drops the sign).
- ``formats.round_to``: decode(encode(x)) as float32, for fake-quantisation users.

Specs: IEEE 754-2019, OCP OFP8 rev 1.0, OCP MX v1.0 section 5, IEEE P3109 interim report
(stochastic rounding).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

import numpy as np

from oracle import placement
from oracle.cases import Area, CaseSpec, Operation
from oracle.random_stream import CaseRandom
from oracle.tolerance import ExactNaNClass
from refimpl import formats as F

SPECS = {
    "IEEE 754": "2019",
    "OCP OFP8": "1.0",
    "OCP MX": "1.0",
    "IEEE P3109": "interim report (stochastic rounding)",
}

SMALL = ("e4m3", "e5m2", "e4m3fnuz", "e5m2fnuz", "e3m2", "e2m3", "e2m1", "e8m0")
WIDE = ("fp16", "bf16", "tf32")
DETERMINISTIC = ("nearest_even", "nearest_away", "toward_zero", "toward_positive",
                 "toward_negative")
#: formats with every rounding mode in the default suite (the rest: nearest-even only)
ALL_MODES_DEFAULT = ("e4m3", "e5m2", "e2m1", "bf16", "fp16")
NO_NAN = ("e3m2", "e2m3", "e2m1")
#: NaN -> format-without-NaN policies in use (TE +0 for either sign, ml_dtypes 0x8,
#: torchao 0x3 for E2M1, or the zero of the NaN's sign): option name -> ``nan=`` value
NAN_OPTIONS = {"zero": "zero", "0x8": 0x8, "0x3": 0x3, "signed_zero": "signed_zero"}
#: E8M0 of zero and of negative inputs (the MX spec gives E8M0 neither): option names,
#: the default first
E8M0_ZERO = ("min", "nan")
E8M0_NEGATIVE = ("nan", "magnitude")


#: the rounding parameter a case of the e8m0_tie option ``up`` stores: E8M0's ties
#: toward +Inf are ``rounding="nearest_away"`` for the unsigned format (the canonical
#: name, refimpl.rounding_modes; the case id and the variant option keep ``up``)
CASE_ROUNDING = {"up": "nearest_away"}


def _encode(inputs: Mapping[str, np.ndarray], p: Mapping[str, Any]) -> dict[str, np.ndarray]:
    kw: dict[str, Any] = {"rounding": p["rounding"],
                          "saturate": p["saturate"],
                          "nan": p.get("nan")}
    if p["rounding"] == "stochastic":
        kw["random_bits"] = (inputs["random_bits"], int(p["random_bits"]))
    codes = F.encode(inputs["x"], p["fmt"], **kw)
    zero, negative = p.get("e8m0_zero", E8M0_ZERO[0]), p.get("e8m0_negative",
                                                               E8M0_NEGATIVE[0])
    if (zero, negative) != (E8M0_ZERO[0], E8M0_NEGATIVE[0]):
        codes = _e8m0_conventions(np.asarray(inputs["x"]), codes, p, kw, zero, negative)
    return {"codes": codes}


def _e8m0_conventions(x: np.ndarray, codes: np.ndarray, p: Mapping[str, Any],
                      kw: dict[str, Any], zero: str, negative: str) -> np.ndarray:
    """E8M0 of zero (``e8m0_zero``) and of negative numbers (``e8m0_negative``) under
    the non-default options; ``refimpl.formats.encode`` gives the defaults (0x00 and
    0xFF)."""
    return e8m0_conventions(x, codes, p["fmt"], zero=zero, negative=negative,
                            rounding=kw["rounding"], saturate=kw["saturate"])


def e8m0_conventions(x: Any, codes: np.ndarray, fmt: Any, *, zero: str = E8M0_ZERO[0],
                     negative: str = E8M0_NEGATIVE[0], rounding: str = "nearest_even",
                     saturate: bool = False) -> np.ndarray:
    """``codes`` (``refimpl.formats.encode(x, fmt, ...)``, which gives the default
    options, 0x00 for zero and 0xFF for negative numbers) under the options ``zero`` of
    ``e8m0_zero`` and ``negative`` of ``e8m0_negative``.

    Raises:
        ValueError: ``fmt`` is not E8M0 while an option is not the default, or an
            unknown option.
    """
    if zero not in E8M0_ZERO or negative not in E8M0_NEGATIVE:
        raise ValueError(f"e8m0_zero must be one of {E8M0_ZERO}, e8m0_negative one of "
                         f"{E8M0_NEGATIVE}; got {zero!r}, {negative!r}")
    if (zero, negative) == (E8M0_ZERO[0], E8M0_NEGATIVE[0]):
        return codes
    f = F.get(fmt)
    if f.name != "e8m0":
        raise ValueError(f"e8m0_zero / e8m0_negative apply to e8m0 only, not {fmt!r}")
    x = np.asarray(x)
    codes = np.array(codes, copy=True)
    if negative == "magnitude":
        neg = x < 0
        codes[neg] = F.encode(-x[neg], f, rounding=rounding, saturate=saturate)
    if zero == "nan":
        codes[x == 0] = f.nan_code()
    return codes


def _decode(inputs: Mapping[str, np.ndarray], p: Mapping[str, Any]) -> dict[str, np.ndarray]:
    return {"values": F.decode(inputs["codes"], p["fmt"])}


def _round_to(inputs: Mapping[str, np.ndarray], p: Mapping[str, Any]) -> dict[str, np.ndarray]:
    return {"y": F.round_to(inputs["x"], p["fmt"],
                            rounding=p["rounding"],
                            saturate=p["saturate"])}


def _pack(inputs: Mapping[str, np.ndarray], p: Mapping[str, Any]) -> dict[str, np.ndarray]:
    return {"packed": F.pack(inputs["codes"], p["fmt"], p["order"], dense=p["dense"])}


def _unpack(inputs: Mapping[str, np.ndarray], p: Mapping[str, Any]) -> dict[str, np.ndarray]:
    return {"codes": F.unpack(inputs["packed"], p["fmt"], p["count"], p["order"],
                              dense=p["dense"])}


OPERATIONS = [
    Operation("formats.pack", _pack,
              "packed = refimpl.formats.pack(codes, fmt, order, dense=)"),
    Operation("formats.unpack", _unpack,
              "codes = refimpl.formats.unpack(packed, fmt, count, order, dense=)"),
    Operation("formats.encode", _encode,
              "codes = refimpl.formats.encode(x, fmt, rounding=, saturate=, nan=, "
              "random_bits=(random_bits, N))"),
    Operation("formats.decode", _decode, "values = refimpl.formats.decode(codes, fmt)"),
    Operation("formats.round_to", _round_to,
              "y = refimpl.formats.round_to(x, fmt, rounding=, saturate=)"),
]

_DT = {"f16": np.float16, "f32": np.float32, "f64": np.float64}


def _drop_nan(x: np.ndarray, fmt: str) -> np.ndarray:
    """The inputs of a general case: without NaN for a format without NaN, and for
    E8M0 without zeros and finite negative numbers (their codes are variants)."""
    if F.get(fmt).name == "e8m0":
        x = x[~((x == 0) | ((x < 0) & np.isfinite(x)))]
    return x if F.get(fmt).has_nan else x[~np.isnan(x)]


def _encode_inputs(fmt: str, src: str, exhaustive: bool | None, n_random: int):
    dt = _DT[src]

    def build(rng: CaseRandom) -> dict[str, np.ndarray]:
        sharp = placement.sharp_inputs(fmt, dt, exhaustive=exhaustive)
        rand = placement.random_inputs(fmt, rng, n_random, dt)
        return {"x": _drop_nan(np.concatenate([sharp, rand]), fmt)}
    return build


def _encode_case(fmt: str, rounding: str, saturate: bool, *, src: str = "f32",
                 level: int = 1, exhaustive: bool | None = None, n_random: int = 256,
                 nan: Any = None, variant: dict | None = None, build=None,
                 suffix: str = "") -> CaseSpec:
    sat = ".satfinite" if saturate else ""
    params: dict[str, Any] = {"fmt": fmt, "rounding": CASE_ROUNDING.get(rounding, rounding),
                              "saturate": saturate, "nan": nan}
    return CaseSpec(
        id=f"formats.encode.{fmt}.{src}.{rounding}{sat}{suffix}",
        operation="formats.encode", params=params,
        build=build or _encode_inputs(fmt, src, exhaustive, n_random),
        tolerance={"codes": ExactNaNClass()}, formats={"codes": fmt}, level=level,
        variant=variant, text=("x", "codes"),
        description=f"{src} -> {fmt}, {rounding}, saturate={saturate}: inputs placed "
                    f"relative to {fmt} (values, ties, tie neighbours, overflow)")


def _decode_case(fmt: str, level: int, exhaustive: bool) -> CaseSpec:
    f = F.get(fmt)

    def build(rng: CaseRandom) -> dict[str, np.ndarray]:
        if exhaustive:
            codes = np.arange(1 << f.bits, dtype=np.int64)
        else:
            mags = placement.target_codes(f, exhaustive=False)
            # the special magnitudes above max (Inf, NaNs): the first and last few
            first = np.arange(f.max_code_magnitude + 1,
                              min(f.max_code_magnitude + 9, f.magnitude_mask + 1))
            specials = np.concatenate([first, np.arange(max(f.magnitude_mask - 7,
                                                            first[-1] + 1 if first.size
                                                            else f.magnitude_mask + 1),
                                                        f.magnitude_mask + 1)])
            mags = np.concatenate([mags, specials])
            codes = np.concatenate([mags, mags | f.sign_mask]) if f.signed else mags
            codes = np.unique(codes)
        return {"codes": codes.astype(f.code_dtype)}

    kind = "every code" if exhaustive else "TestFloat-style sample of codes"
    return CaseSpec(
        id=f"formats.decode.{fmt}" + ("" if exhaustive else ".sample"),
        operation="formats.decode", params={"fmt": fmt}, build=build,
        tolerance={"values": ExactNaNClass()}, formats={"codes": fmt}, level=level,
        text=("codes", "values"), description=f"decode {fmt}: {kind}")


def _stochastic_case(fmt: str, level: int) -> CaseSpec:
    def build(rng: CaseRandom) -> dict[str, np.ndarray]:
        sharp = placement.sharp_inputs(fmt, np.float32, specials=False)
        x = _drop_nan(np.concatenate([sharp, placement.random_inputs(fmt, rng, 256)]), fmt)
        return {"x": x, "random_bits": rng.bits(x.shape, np.uint8)}

    spec = _encode_case(fmt, "stochastic", False, level=level, build=build)
    return replace(spec, params={**spec.params, "random_bits": 8}, text=None,
                   description=f"f32 -> {fmt}, stochastic rounding with 8 random bits per "
                               "element (IEEE P3109 rule)")


def _nan_variant_case(fmt: str, option: str) -> CaseSpec:
    def build(rng: CaseRandom) -> dict[str, np.ndarray]:
        x = np.array([np.nan, -np.nan, 1.0, -1.0, 0.0], dtype=np.float32)
        x[1] = np.copysign(x[1], np.float32(-1))
        return {"x": x}

    return _encode_case(fmt, "nearest_even", False, level=1, nan=NAN_OPTIONS[option],
                        build=build, variant={"choice": f"nan_to_{fmt}", "option": option},
                        suffix=f".nan={option}")


def _e8m0_case(rounding: str, level: int) -> CaseSpec:
    variant = None
    if rounding in ("nearest_even", "up"):
        variant = {"choice": "e8m0_tie", "option": rounding}
    spec = _encode_case("e8m0", rounding, False, level=level)
    return replace(spec, variant=variant)


def _e8m0_variant_case(choice: str, option: str) -> CaseSpec:
    """E8M0 of zero or of negative numbers, nearest-even, inputs free of E8M0 ties."""
    if choice == "e8m0_zero":
        values = [0.0, -0.0, 1.0, 0.5, 2.0 ** -127, 2.0 ** 127, 2.0 ** -126]
    else:
        values = [-1.0, -0.5, -3.5, -2.0 ** -127, -2.0 ** 127, -3.0e38, -2.0 ** -140,
                  1.0, 4.0]

    def build(rng: CaseRandom) -> dict[str, np.ndarray]:
        return {"x": np.array(values, dtype=np.float32)}

    spec = _encode_case("e8m0", "nearest_even", False, build=build,
                        variant={"choice": choice, "option": option},
                        suffix=f".{choice[5:]}={option}")
    what = "zero" if choice == "e8m0_zero" else "negative numbers"
    return replace(spec, params={**spec.params, choice: option},
                   description=f"f32 -> e8m0 of {what}: option {option!r} of {choice}")


def _round_to_case(fmt: str, level: int) -> CaseSpec:
    return CaseSpec(
        id=f"formats.round_to.{fmt}.f32.nearest_even",
        operation="formats.round_to",
        params={"fmt": fmt, "rounding": "nearest_even", "saturate": False},
        build=_encode_inputs(fmt, "f32", None, 256),
        tolerance={"y": ExactNaNClass()}, level=level, text=("x", "y"),
        description=f"float32 rounded to {fmt} and back (fake quantisation)")


def _pack_cases() -> list[CaseSpec]:
    """FP4/FP6 packing: the layout is a convention no specification fixes (torchao puts
    element 0 in the low nibble, PTX ``cvt...e2m1x2`` the first source in the high one,
    PTX ISA 9.7.9.21), so each case is a
    variant of the choice ``fp4_packing`` / ``fp6_packing``."""
    out = []
    for fmt, dense, order, level in (("e2m1", False, "low_first", 1),
                                     ("e2m1", False, "high_first", 1),
                                     ("e2m3", True, "low_first", 1),
                                     ("e3m2", True, "high_first", 1),
                                     ("e2m3", False, "low_first", 2)):
        f = F.get(fmt)
        layout = f"{order}{'.dense' if dense else ''}"
        variant = {"choice": "fp4_packing" if f.bits == 4 else "fp6_packing",
                   "option": layout}

        def build(rng: CaseRandom, f=f) -> dict[str, np.ndarray]:
            every = np.arange(1 << f.bits, dtype=np.uint8)       # every code, odd count
            return {"codes": np.concatenate([every, rng.bits(1 << f.bits, np.uint8)
                                             >> np.uint8(8 - f.bits), every[:3]])}

        count = 2 * (1 << f.bits) + 3
        params = {"fmt": fmt, "order": order, "dense": dense}
        out.append(CaseSpec(f"formats.pack.{fmt}.{layout}", "formats.pack", params, build,
                            formats={"codes": fmt}, level=level, variant=variant,
                            description=f"pack {count} {fmt} codes, {layout}"))

        def build_packed(rng: CaseRandom, fmt=fmt, params=params, build=build):
            return {"packed": _pack(build(rng), params)["packed"]}

        out.append(CaseSpec(f"formats.unpack.{fmt}.{layout}", "formats.unpack",
                            {**params, "count": count}, build_packed,
                            formats={"codes": fmt}, level=level, variant=variant,
                            description=f"unpack {count} {fmt} codes, {layout}"))
    return out


SMOKE_ENCODES = {("e4m3", "nearest_even", False), ("e2m1", "nearest_even", False),
                 ("bf16", "nearest_even", False)}


def _encode_level(fmt: str, rounding: str, saturate: bool) -> int:
    """The default suite has nearest-even (saturating or not) for every format and every
    mode for ALL_MODES_DEFAULT (the 16-bit ones without their saturating directed modes);
    the full suite has every combination."""
    if rounding == "nearest_even":
        return 1
    if fmt not in ALL_MODES_DEFAULT or (fmt in WIDE and saturate):
        return 2
    return 1


def cases() -> list[CaseSpec]:
    out: list[CaseSpec] = []
    # smoke: one of each kind
    out.append(_decode_case("e4m3", 0, True))
    for fmt, rounding, sat in sorted(SMOKE_ENCODES):
        out.append(_encode_case(fmt, rounding, sat, level=0))
    # value tables
    for fmt in SMALL:
        if fmt != "e4m3":
            out.append(_decode_case(fmt, 1, True))
    for fmt in ("fp16", "bf16"):
        out.append(_decode_case(fmt, 2, True))
    for fmt in WIDE + ("fp32",):
        out.append(_decode_case(fmt, 1, False))
    # conversions from float32
    for fmt in SMALL + WIDE:
        if fmt == "e8m0":
            for r in ("nearest_even", "up", "toward_zero", "toward_positive"):
                out.append(_e8m0_case(r, 1))
            out.append(_e8m0_case("toward_negative", 2))
            continue
        for rounding in DETERMINISTIC:
            for sat in (False, True):
                if (fmt, rounding, sat) in SMOKE_ENCODES:
                    continue
                out.append(_encode_case(fmt, rounding, sat,
                                        level=_encode_level(fmt, rounding, sat)))
        # full suite: every code of the 16-bit formats, not a sample
        if fmt in ("fp16", "bf16"):
            out.append(_encode_case(fmt, "nearest_even", False, level=2, exhaustive=True,
                                    suffix=".every_code"))
    # conversions from float64 (double-rounding trap) and float16
    for fmt in ("e4m3", "e5m2", "e2m1", "e2m3", "e3m2", "bf16", "fp16", "fp32"):
        out.append(_encode_case(fmt, "nearest_even", False, src="f64", level=1))
        out.append(_encode_case(fmt, "nearest_even", True, src="f64", level=2))
    for fmt in ("e4m3", "e5m2", "e2m1"):
        out.append(_encode_case(fmt, "nearest_even", False, src="f16", level=1))
    # stochastic rounding
    for fmt in ("e4m3", "e2m1", "bf16"):
        out.append(_stochastic_case(fmt, 1))
    for fmt in ("e5m2", "fp16", "e2m3", "e3m2"):
        out.append(_stochastic_case(fmt, 2))
    # implementation-defined: NaN into formats without NaN
    for fmt in NO_NAN:
        for option in NAN_OPTIONS:
            if option != "0x3" or fmt == "e2m1":
                out.append(_nan_variant_case(fmt, option))
    for choice, options in (("e8m0_zero", E8M0_ZERO), ("e8m0_negative", E8M0_NEGATIVE)):
        for option in options:
            out.append(_e8m0_variant_case(choice, option))
    # fake quantisation
    for fmt in ("e4m3", "e5m2", "e2m1", "bf16", "fp16"):
        out.append(_round_to_case(fmt, 1))
    return out + _pack_cases()


AREA = Area("formats", SPECS, OPERATIONS, cases)
