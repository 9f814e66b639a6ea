"""Every code of every registered format of 16 bits or fewer: decode against the format's
formula evaluated with ``fractions.Fraction`` (written here from the definitions, not
taken from the codec), and encode(decode(c)) == c for every non-NaN code."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from refimpl import formats as F

SMALL = [f for f in F.all_formats() if f.bits <= 16]


def formula(code: int, *, sign_bit: bool, e: int, m: int, bias: int, specials: str,
            subnormals: bool) -> Fraction | str:
    """The value of ``code`` as a Fraction, or "nan"/"+inf"/"-inf" (IEEE 754 s3.4,
    OCP OFP8 s5, OCP MX s5)."""
    width = int(sign_bit) + e + m
    s = (code >> (width - 1)) & 1 if sign_bit else 0
    mag = code & ((1 << (e + m)) - 1)
    ef, mf = mag >> m, mag & ((1 << m) - 1)
    if specials == "ieee" and ef == (1 << e) - 1:
        return "nan" if mf else ("-inf" if s else "+inf")
    if specials == "fn" and mag == (1 << (e + m)) - 1:
        return "nan"
    if specials == "fnuz" and s == 1 and mag == 0:
        return "nan"
    if subnormals and ef == 0:
        v = Fraction(mf, 2**m) * Fraction(2) ** (1 - bias)
    else:
        v = (1 + Fraction(mf, 2**m)) * Fraction(2) ** (ef - bias)
    return -v if s else v


# the defining parameters, restated from the reference table (not read from the registry)
PARAMS = {
    "fp16": (True, 5, 10, 15, "ieee", True),
    "bf16": (True, 8, 7, 127, "ieee", True),
    "e4m3": (True, 4, 3, 7, "fn", True),
    "e5m2": (True, 5, 2, 15, "ieee", True),
    "e4m3fnuz": (True, 4, 3, 8, "fnuz", True),
    "e5m2fnuz": (True, 5, 2, 16, "fnuz", True),
    "e3m2": (True, 3, 2, 3, "none", True),
    "e2m3": (True, 2, 3, 1, "none", True),
    "e2m1": (True, 2, 1, 1, "none", True),
    "e8m0": (False, 8, 0, 127, "fn", False),
}


def test_every_small_format_is_covered() -> None:
    assert {f.name for f in SMALL} == set(PARAMS)


def _expected_values(name: str, codes: range) -> list:
    sign_bit, e, m, bias, specials, subnormals = PARAMS[name]
    return [formula(c, sign_bit=sign_bit, e=e, m=m, bias=bias, specials=specials,
                    subnormals=subnormals) for c in codes]


@pytest.mark.slow
@pytest.mark.parametrize("fmt", SMALL, ids=lambda f: f.name)
def test_decode_matches_fraction_formula(fmt: F.Format) -> None:
    codes = range(1 << fmt.bits)
    got = F.decode(np.arange(1 << fmt.bits, dtype=fmt.code_dtype), fmt)
    assert got.dtype == np.float32
    expected = _expected_values(fmt.name, codes)
    for c, v, g in zip(codes, expected, got.tolist()):
        if v == "nan":
            assert g != g, f"{fmt.name} {c:#x}: {g} is not NaN"
        elif v == "+inf":
            assert g == float("inf"), c
        elif v == "-inf":
            assert g == float("-inf"), c
        else:
            assert Fraction(g) == v, f"{fmt.name} {c:#x}: {g} != {v}"
            if v == 0:
                sign_bit = PARAMS[fmt.name][0]
                negative = sign_bit and (c >> (fmt.bits - 1)) & 1
                assert np.signbit(np.float32(g)) == bool(negative), f"{fmt.name} {c:#x}"


@pytest.mark.parametrize("fmt", SMALL, ids=lambda f: f.name)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_encode_decode_round_trip(fmt: F.Format, dtype: type) -> None:
    codes = np.arange(1 << fmt.bits, dtype=np.int64)
    values = F.decode(codes, fmt).astype(dtype)
    keep = ~np.isnan(values)
    back = F.encode(values[keep], fmt)
    assert back.dtype == fmt.code_dtype
    bad = np.flatnonzero(back != codes[keep])
    assert bad.size == 0, f"{fmt.name}: codes {codes[keep][bad][:5]} -> {back[bad][:5]}"


@pytest.mark.parametrize("fmt", SMALL, ids=lambda f: f.name)
@pytest.mark.parametrize(
    "rounding", ["nearest_away", "toward_zero", "toward_positive", "toward_negative"]
)
def test_exact_values_are_fixed_points_in_every_mode(fmt: F.Format, rounding: str) -> None:
    codes = np.arange(1 << min(fmt.bits, 12), dtype=np.int64)
    if fmt.bits > 12:  # a spread sample of the 16-bit formats
        codes = np.arange(0, 1 << 16, 7, dtype=np.int64)
    values = F.decode(codes, fmt).astype(np.float64)
    keep = np.isfinite(values)
    back = F.encode(values[keep], fmt, rounding=rounding)
    assert np.array_equal(back, codes[keep])


@pytest.mark.slow
@pytest.mark.parametrize("fmt", SMALL, ids=lambda f: f.name)
def test_value_table(fmt: F.Format) -> None:
    table = F.value_table(fmt)
    assert len(table) == 1 << fmt.bits
    assert np.array_equal(table.codes, np.arange(1 << fmt.bits))
    expected = _expected_values(fmt.name, range(1 << fmt.bits))
    for c, v, cls, val in zip(range(len(table)), expected, table.classes, table.values):
        if v == "nan":
            assert cls == "nan" and np.isnan(val)
        elif v in ("+inf", "-inf"):
            assert cls == "inf"
        elif v == 0:
            assert cls == "zero"
        else:
            assert Fraction(float(val)) == v
            e_field = (c & ((1 << (fmt.exp_bits + fmt.man_bits)) - 1)) >> fmt.man_bits
            want = "subnormal" if (e_field == 0 and fmt.subnormals) else "normal"
            assert cls == want, f"{fmt.name} {c:#x}"
