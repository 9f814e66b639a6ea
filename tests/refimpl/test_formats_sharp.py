"""Sharp cases of the formats (ties, subnormals, overflow, NaN, E8M0 tie rules), pinned
(expected codes derived by hand from the format definitions of IEEE 754-2019, OCP OFP8
rev 1.0 and OCP MX v1.0 section 5, not from running the codec)."""
from __future__ import annotations

import numpy as np
import pytest

from refimpl import formats as F

# (format, input, options, expected code)
SHARP = [
    # E2M1 midpoints (ties to even) and saturation
    ("e2m1", 0.25, {}, 0x0),
    ("e2m1", 0.75, {}, 0x2),
    ("e2m1", 1.25, {}, 0x2),
    ("e2m1", 1.75, {}, 0x4),
    ("e2m1", 2.5, {}, 0x4),
    ("e2m1", 3.5, {}, 0x6),
    ("e2m1", 5.0, {}, 0x6),
    ("e2m1", float(np.float32(0.25000003)), {}, 0x1),
    ("e2m1", 7.0, {}, 0x7),
    ("e2m1", 7.0, {"saturate": True}, 0x7),
    ("e2m1", 1e30, {}, 0x7),
    ("e2m1", -np.inf, {}, 0xF),
    # E4M3 subnormals
    ("e4m3", 2.0**-10, {}, 0x00),
    ("e4m3", 1.5 * 2.0**-9, {}, 0x02),
    ("e4m3", 2.5 * 2.0**-9, {}, 0x02),
    ("e4m3", 3.5 * 2.0**-9, {}, 0x04),
    # E4M3 overflow: 464 ties down to 448, above gives NaN; Inf -> NaN or max
    ("e4m3", 448.0, {}, 0x7E),
    ("e4m3", 464.0, {}, 0x7E),
    ("e4m3", 464.00000000000006, {}, 0x7F),
    ("e4m3", -465.0, {}, 0xFF),
    ("e4m3", 1e6, {"saturate": True}, 0x7E),
    ("e4m3", np.inf, {}, 0x7F),
    ("e4m3", -np.inf, {}, 0xFF),
    ("e4m3", np.inf, {"saturate": True}, 0x7E),
    ("e4m3", -np.inf, {"saturate": True}, 0xFE),
    ("e4m3", np.nan, {}, 0x7F),
    ("e4m3", -np.nan, {}, 0xFF),
    # E5M2 overflow to Inf at 61440
    ("e5m2", float(np.float32(61439.996)), {}, 0x7B),
    ("e5m2", 61440.0, {}, 0x7C),
    ("e5m2", 61440.0, {"saturate": True}, 0x7B),
    ("e5m2", -61440.0, {}, 0xFC),
    ("e5m2", np.inf, {}, 0x7C),
    ("e5m2", np.inf, {"saturate": True}, 0x7B),
    # double rounding: float64 input rounded once
    ("e4m3", 1.0625 + 2.0**-40, {}, 0x39),
    ("e4m3", -431.99999999999994, {}, 0xFD),
    # negative zero
    ("e4m3", -0.0, {}, 0x80),
    ("e4m3", -(2.0**-12), {}, 0x80),
    ("e2m1", -0.0, {}, 0x8),
    ("e2m1", -0.1, {}, 0x8),
    ("e4m3fnuz", -0.0, {}, 0x00),
    ("e4m3fnuz", -(2.0**-13), {}, 0x00),
    ("e5m2fnuz", -0.0, {}, 0x00),
    ("e4m3fnuz", np.nan, {}, 0x80),
    ("e4m3fnuz", 240.0, {}, 0x7F),
    ("e4m3fnuz", 1000.0, {}, 0x80),
    ("e4m3fnuz", 1000.0, {"saturate": True}, 0x7F),
    ("e5m2fnuz", 57344.0, {}, 0x7F),
    # E8M0: 0x00 = 2^-127, 0xFF NaN; tie rules
    ("e8m0", 1.0, {}, 0x7F),
    ("e8m0", 3.0, {"rounding": "nearest_away"}, 0x81),
    ("e8m0", 3.0, {"rounding": "nearest_even"}, 0x80),
    ("e8m0", 6.0, {"rounding": "nearest_even"}, 0x82),  # 4 (0x81) vs 8 (0x82): even code
    ("e8m0", 3.0, {"rounding": "toward_negative"}, 0x80),
    ("e8m0", 3.0, {"rounding": "toward_positive"}, 0x81),
    ("e8m0", 2.0**-127, {}, 0x00),
    ("e8m0", 2.0**127, {}, 0xFE),
    ("e8m0", 2.0**128, {}, 0xFF),
    ("e8m0", np.nan, {}, 0xFF),
    # FP4 NaN policies used by the libraries
    ("e2m1", np.nan, {"nan": 0x8}, 0x8),
    ("e2m1", np.nan, {"nan": 0x3}, 0x3),
    ("e2m1", np.nan, {"nan": "zero"}, 0x0),
]


@pytest.mark.parametrize("name,value,options,expected", SHARP)
def test_sharp_case(name: str, value: float, options: dict, expected: int) -> None:
    got = F.encode(np.float64(value), name, **options)
    assert int(got) == expected, f"{name} {value!r} {options}: {int(got):#x} != {expected:#x}"
    # float32 input gives the same code when the value is a float32
    with np.errstate(over="ignore"):
        is_f32 = float(np.float32(value)) == value
    if is_f32 or np.isnan(value):
        got32 = F.encode(np.float32(value), name, **options)
        assert int(got32) == expected


def test_double_rounding_through_float32_would_differ() -> None:
    # the pinned float64 cases are sharp: float32 pre-rounding changes the answer
    assert int(F.encode(np.float32(1.0625 + 2.0**-40), "e4m3")) == 0x38
    assert int(F.encode(np.float32(-431.99999999999994), "e4m3")) == 0xFE


@pytest.mark.parametrize("name", ["e2m1", "e2m3", "e3m2"])
def test_nan_into_format_without_nan_is_an_error(name: str) -> None:
    x = np.array([[1.0, 2.0], [np.nan, 3.0]], dtype=np.float32)
    with pytest.raises(ValueError, match=r"index \(1, 0\).*" + name):
        F.encode(x, name)
    with pytest.raises(ValueError, match=r"index \(1, 0\)"):
        F.encode(x.astype(np.float64), name, rounding="toward_zero")


def test_e8m0_values() -> None:
    vals = F.decode(np.array([0x00, 0x7F, 0xFE, 0xFF], np.uint8), "e8m0")
    assert vals[0] == np.float32(2.0**-127) and vals[0] != 0
    assert vals[1] == 1.0 and vals[2] == np.float32(2.0**127) and np.isnan(vals[3])


def test_e4m3_nan_codes() -> None:
    vals = F.decode(np.arange(256, dtype=np.uint8), "e4m3")
    nan_codes = {int(c) for c in np.flatnonzero(np.isnan(vals))}
    assert nan_codes == {0x7F, 0xFF}
    assert vals[0x7E] == 448 and vals[0xFE] == -448 and vals[0x78] == 256


def test_e5m2_specials() -> None:
    vals = F.decode(np.arange(256, dtype=np.uint8), "e5m2")
    assert {int(c) for c in np.flatnonzero(np.isnan(vals))} == {
        0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF
    }
    assert vals[0x7C] == np.inf and vals[0xFC] == -np.inf and vals[0x7B] == 57344


def test_e2m1_values() -> None:
    vals = F.decode(np.arange(16, dtype=np.uint8), "e2m1")
    expected = [0, 0.5, 1, 1.5, 2, 3, 4, 6]
    assert list(vals[:8]) == expected and list(vals[8:]) == [-v for v in expected]


def test_e8m0_tie_rules_on_every_binade() -> None:
    # 1.5 * 2^e lies midway between codes e+127 and e+128 (values 2^e and 2^(e+1))
    e = np.arange(-127, 127)
    x = 1.5 * np.ldexp(1.0, e)
    lower = e + 127
    even = np.where(lower % 2 == 0, lower, lower + 1)
    assert F.encode(x, "e8m0").tolist() == even.tolist()
    assert F.encode(x, "e8m0", rounding="nearest_away").tolist() == (lower + 1).tolist()
    assert F.encode(x, "e8m0", rounding="toward_negative").tolist() == lower.tolist()
    assert F.encode(x, "e8m0", rounding="toward_positive").tolist() == (lower + 1).tolist()
    # just off the tie both rules agree
    above = np.nextafter(x, np.inf)
    below = np.nextafter(x, -np.inf)
    for rule in ("nearest_even", "nearest_away"):
        assert F.encode(above, "e8m0", rounding=rule).tolist() == (lower + 1).tolist()
        assert F.encode(below, "e8m0", rounding=rule).tolist() == lower.tolist()


def test_nan_error_policy_for_format_with_nan() -> None:
    x = np.array([1.0, np.nan], dtype=np.float32)
    with pytest.raises(ValueError, match=r"index \(1,\)"):
        F.encode(x, "e4m3", nan="error")
    assert F.encode(x, "e4m3", nan="zero").tolist() == [0x38, 0x00]
    assert F.encode(x, "e5m2").tolist()[1] in (0x7D, 0x7E, 0x7F)


def test_float16_input_is_exact() -> None:
    h = np.arange(0, 0x7C00, dtype=np.uint16).view(np.float16)
    assert np.array_equal(F.encode(h, "fp16"), h.view(np.uint16))
    assert np.array_equal(F.encode(-h, "fp16"), (-h).view(np.uint16))
