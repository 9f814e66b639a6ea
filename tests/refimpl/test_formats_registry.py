"""The format registry, lookup by name, derived properties (hand-derived values from the
reference table) and option/argument validation."""
from __future__ import annotations

import dataclasses
from fractions import Fraction

import numpy as np
import pytest

from oracles import round_binary
from refimpl import formats as F

# name: (bits, max, min_normal, min_subnormal, eps, emax, emin), from the format definitions
PROPS = {
    "fp32": (32, (2 - 2.0**-23) * 2.0**127, 2.0**-126, 2.0**-149, 2.0**-23, 127, -126),
    "tf32": (19, (2 - 2.0**-10) * 2.0**127, 2.0**-126, 2.0**-136, 2.0**-10, 127, -126),
    "bf16": (16, (2 - 2.0**-7) * 2.0**127, 2.0**-126, 2.0**-133, 2.0**-7, 127, -126),
    "fp16": (16, 65504.0, 2.0**-14, 2.0**-24, 2.0**-10, 15, -14),
    "e4m3": (8, 448.0, 2.0**-6, 2.0**-9, 0.125, 8, -6),
    "e5m2": (8, 57344.0, 2.0**-14, 2.0**-16, 0.25, 15, -14),
    "e4m3fnuz": (8, 240.0, 2.0**-7, 2.0**-10, 0.125, 7, -7),
    "e5m2fnuz": (8, 57344.0, 2.0**-15, 2.0**-17, 0.25, 15, -15),
    "e3m2": (6, 28.0, 0.25, 0.0625, 0.25, 4, -2),
    "e2m3": (6, 7.5, 1.0, 0.125, 0.125, 2, 0),
    "e2m1": (4, 6.0, 1.0, 0.5, 0.5, 2, 0),
    "e8m0": (8, 2.0**127, 2.0**-127, 2.0**-127, 1.0, 127, -127),
}


def test_registry_lists_every_format_once() -> None:
    assert list(F.REGISTRY) == list(PROPS)
    assert [f.name for f in F.all_formats()] == list(PROPS)
    assert F.E4M3 is F.REGISTRY["e4m3"] and F.E8M0.name == "e8m0"


@pytest.mark.parametrize("name", list(PROPS))
def test_derived_properties(name: str) -> None:
    f = F.get(name)
    bits, mx, mn, ms, eps, emax, emin = PROPS[name]
    assert (f.bits, f.max, f.min_normal, f.min_subnormal, f.eps, f.emax, f.emin) == (
        bits, mx, mn, ms, eps, emax, emin)
    assert f.code_dtype == (np.uint8 if bits <= 8 else np.uint16 if bits <= 16 else np.uint32)
    assert F.decode(np.array([f.max_code_magnitude]), f)[0] == np.float32(mx)


def test_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        F.E4M3.bias = 8  # type: ignore[misc]


@pytest.mark.parametrize("spelling,name", [
    ("e4m3", "e4m3"), ("E4M3", "e4m3"), ("fp8_e4m3", "e4m3"), ("float8_e4m3fn", "e4m3"),
    ("FP8-E5M2", "e5m2"), ("float8_e5m2", "e5m2"), ("float8_e4m3fnuz", "e4m3fnuz"),
    ("bfloat16", "bf16"), ("float16", "fp16"), ("half", "fp16"), ("float32", "fp32"),
    ("tf32", "tf32"), ("fp4", "e2m1"), ("float4_e2m1fn", "e2m1"), ("fp6_e2m3", "e2m3"),
    ("float6_e3m2fn", "e3m2"), ("float8_e8m0fnu", "e8m0"), ("UE8M0", "e8m0"),
])
def test_get_spellings(spelling: str, name: str) -> None:
    assert F.get(spelling) is F.REGISTRY[name]
    assert F.get(F.REGISTRY[name]) is F.REGISTRY[name]


@pytest.mark.parametrize("name,hint", [
    ("mxfp4", "e2m1"), ("MXFP8", "e4m3"), ("nvfp4", "e2m1"), ("fp8", "ambiguous"),
    ("mxfp6", "e2m3"),
])
def test_block_formats_refused_with_hint(name: str, hint: str) -> None:
    with pytest.raises(ValueError, match=hint):
        F.get(name)


def test_unknown_name() -> None:
    with pytest.raises(ValueError, match="unknown number format"):
        F.get("e9m9")
    with pytest.raises(TypeError):
        F.get(3)  # type: ignore[arg-type]


@pytest.mark.parametrize("kwargs,match", [
    ({"exp_bits": 0, "man_bits": 3}, "exp_bits"),
    ({"exp_bits": 9, "man_bits": 23}, "32 bits"),
    ({"exp_bits": 4, "man_bits": 3, "has_inf": False}, "has_inf"),
    ({"exp_bits": 4, "man_bits": 3, "nan": "weird"}, "nan"),
    ({"exp_bits": 12, "man_bits": 3}, "float64"),
])
def test_bad_user_formats(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        F.Format("user", **kwargs)


def test_bad_options() -> None:
    with pytest.raises(ValueError, match="unknown rounding"):
        F.encode(1.0, "e4m3", rounding="nearest")
    with pytest.raises(ValueError, match="unsigned"):
        F.encode(1.0, "e4m3", rounding="up")
    with pytest.raises(ValueError, match="nan policy"):
        F.encode(1.0, "e4m3", nan="drop")
    with pytest.raises(ValueError, match="has no NaN"):
        F.encode(1.0, "e2m1", nan="nan")
    with pytest.raises(ValueError, match="not a 4-bit code"):
        F.encode(1.0, "e2m1", nan=0x10)
    with pytest.raises(ValueError, match="dtype"):
        F.encode(np.array([1 + 1j]), "e4m3")
    with pytest.raises(TypeError, match="saturate"):
        F.encode(1.0, "e4m3", saturate="yes")


def test_decode_rejects_out_of_range_codes() -> None:
    with pytest.raises(ValueError, match=r"codes\[1\] = 16 .*e2m1"):
        F.decode(np.array([1, 16], dtype=np.uint8), "e2m1")
    with pytest.raises(ValueError, match=r"codes\[0, 1\]"):
        F.decode(np.array([[1, -1]]), "e4m3")
    with pytest.raises(ValueError, match=r"2\*\*19|524288"):
        F.decode(np.array([1 << 19], dtype=np.uint32), "tf32")
    with pytest.raises(ValueError, match="integer"):
        F.decode(np.array([1.0]), "e4m3")


def test_shapes_dtypes_and_scalars() -> None:
    x = np.linspace(-500, 500, 24, dtype=np.float32).reshape(2, 3, 4)
    for f in F.all_formats():
        if not f.signed:
            continue
        # independent: nearest-even on the layout's grid (man_bits + 1 significant bits,
        # normal exponents from 1 - bias, no upper limit), then saturated at the largest
        grid = [round_binary(Fraction(float(t)), f.man_bits + 1, 1 - f.bias, 64)
                for t in x.ravel()]
        want = np.array([float(min(max(r, -Fraction(f.max)), Fraction(f.max))) for r in grid],
                        np.float32).reshape(x.shape)
        c = F.encode(x, f, saturate=True)
        assert c.shape == x.shape and c.dtype == f.code_dtype
        v = F.decode(c, f)
        assert v.shape == x.shape and v.dtype == np.float32
        assert np.array_equal(v, want), f.name
        assert np.array_equal(F.round_to(x, f, saturate=True), want), f.name
    assert F.encode(1.0, "e4m3").shape == ()
    assert F.encode(np.float16(1.5), "e4m3").tolist() == 0x3C
    assert F.encode([1, 2], "e4m3").tolist() == [0x38, 0x40]
    assert F.encode(np.array([], np.float32), "e4m3").shape == (0,)
    # non-contiguous input
    y = np.arange(20, dtype=np.float64)[::3]
    assert np.array_equal(F.encode(y, "e5m2"), F.encode(y.copy(), "e5m2"))


def test_unsigned_negative_inputs() -> None:
    assert F.encode([-1.0, -np.inf, -0.0], "e8m0").tolist() == [0xFF, 0xFF, 0x00]
    u = F.Format("ue4m2", 4, 2, signed=False, has_inf=False, nan="none")
    with pytest.raises(ValueError, match=r"negative input at index \(1,\)"):
        F.encode([1.0, -2.0], u)


def test_float8_e4m3_is_refused_as_ambiguous() -> None:
    """ml_dtypes' float8_e4m3 is the IEEE-like E4M3 (bias 7, Inf at 0x78, largest 240),
    not OCP E4M3; the name must not silently select OCP E4M3 (largest 448)."""
    with pytest.raises(ValueError, match="float8_e4m3fn"):
        F.get("float8_e4m3")
    assert F.get("float8_e4m3fn") is F.E4M3
    ieee = F.Format("e4m3_ieee", 4, 3)  # the user format the hint names
    assert ieee.max == 240.0  # 1.875 * 2**(14 - 7)
    assert np.isinf(F.decode(0x78, ieee)) and F.decode(0x78, F.E4M3) == 256.0
