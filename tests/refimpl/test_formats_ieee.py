"""FP16 against numpy.float16 (an exact IEEE binary16 oracle) and BF16 against a
Fraction round-to-nearest-even written from IEEE 754-2019 section 4.3.1
(``tests/oracles.py``)."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from oracles import BFLOAT16, round_binary
from refimpl import formats as F


def _numpy_fp16_codes(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        return x.astype(np.float16).view(np.uint16)


def _same_codes(got: np.ndarray, want: np.ndarray) -> None:
    """Equal codes, with all NaN codes one class (numpy keeps NaN payloads)."""
    nan_got = (got & 0x7C00 == 0x7C00) & (got & 0x3FF != 0)
    nan_want = (want & 0x7C00 == 0x7C00) & (want & 0x3FF != 0)
    assert np.array_equal(nan_got, nan_want)
    bad = np.flatnonzero((got != want) & ~nan_got)
    assert bad.size == 0, f"first mismatches at {bad[:5]}: {got[bad[:5]]} vs {want[bad[:5]]}"


def _fp16_midpoints() -> np.ndarray:
    """Every FP16 rounding midpoint (between consecutive finite magnitudes, plus max +
    half an ulp), exactly, in float64."""
    mags = np.arange(0, 0x7C00, dtype=np.uint16).view(np.float16).astype(np.float64)
    mids = (mags[:-1] + mags[1:]) / 2  # exact: one more bit than FP16
    return np.concatenate([mids, [65504.0 + 16.0]])


def test_fp16_every_float32_within_two_ulps_of_every_midpoint() -> None:
    mids = _fp16_midpoints().astype(np.float32)  # exact: midpoints need 12 bits
    assert np.array_equal(mids.astype(np.float64), _fp16_midpoints())
    xs = [mids]
    up, down = mids.copy(), mids.copy()
    for _ in range(2):
        up = np.nextafter(up, np.float32(np.inf))
        down = np.nextafter(down, np.float32(-np.inf))
        xs += [up, down]
    x = np.concatenate(xs)
    x = np.concatenate([x, -x])
    _same_codes(F.encode(x, "fp16"), _numpy_fp16_codes(x))


def test_fp16_float64_near_midpoints() -> None:
    mids = _fp16_midpoints()
    xs = [mids]
    up, down = mids.copy(), mids.copy()
    for _ in range(2):
        up = np.nextafter(up, np.inf)
        down = np.nextafter(down, -np.inf)
        xs += [up, down]
    x = np.concatenate(xs)
    x = np.concatenate([x, -x])
    _same_codes(F.encode(x, "fp16"), _numpy_fp16_codes(x))


def test_fp16_every_code_and_specials() -> None:
    codes = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    h = codes.view(np.float16)
    got = F.decode(codes, "fp16")
    same = (got == h.astype(np.float32)) | (np.isnan(got) & np.isnan(h))
    assert same.all()
    x = np.array([np.inf, -np.inf, np.nan, 65519.99, 65520.0, 1e-8, -2.0**-25,
                  2.0**-25, 3 * 2.0**-26], dtype=np.float32)
    _same_codes(F.encode(x, "fp16"), _numpy_fp16_codes(x))


@settings(max_examples=50)
@given(bits=st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=200))
@example(bits=[0x477FF000, 0x477FEFFF, 0x33000000, 0x33000001, 0xB3000000])
def test_fp16_from_float32_matches_numpy(bits: list[int]) -> None:
    x = np.array(bits, dtype=np.uint32).view(np.float32)
    _same_codes(F.encode(x, "fp16"), _numpy_fp16_codes(x))


@settings(max_examples=50)
@given(bits=st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=200),
       scale=st.integers(-30, 17))
def test_fp16_from_float64_matches_numpy(bits: list[int], scale: int) -> None:
    raw = np.array(bits, dtype=np.uint64)
    # keep the mantissa and sign, place the exponent near FP16's range
    exp = np.uint64(1023 + scale) << np.uint64(52)
    x = ((raw & np.uint64(0x800F_FFFF_FFFF_FFFF)) | exp).view(np.float64)
    _same_codes(F.encode(x, "fp16"), _numpy_fp16_codes(x))


# ---- BF16 --------------------------------------------------------------------------

def _check_bf16(x: np.ndarray) -> None:
    got = F.decode(F.encode(x, "bf16"), "bf16")
    for xi, gi in zip(x.tolist(), got.tolist()):
        if xi != xi:
            assert gi != gi
            continue
        if xi in (float("inf"), float("-inf")):
            assert gi == xi
            continue
        want = round_binary(Fraction(xi), *BFLOAT16)
        assert (gi == want) if isinstance(want, float) else Fraction(gi) == want, (xi, gi)
        if xi == 0:
            assert np.signbit(gi) == np.signbit(xi)


@settings(max_examples=50)
@given(bits=st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=100))
@example(bits=[0x3F808000, 0x3F818000, 0x3F808001, 0x7F7FFFFF, 0x7F7F8000, 0x7F7F7FFF,
               0x00008000, 0x00018000, 0x80000001, 0x7FC00001])
def test_bf16_from_float32_matches_fraction_rne(bits: list[int]) -> None:
    _check_bf16(np.array(bits, dtype=np.uint32).view(np.float32))


@settings(max_examples=50)
@given(bits=st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=100))
@example(bits=[0x3FF0100000000000, 0x3FF0100000000001, 0x3FF02FFFFFFFFFFF,
               0x47EFF00000000000, 0x47EFEFFFFFFFFFFF, 0x3800000000000000,
               0x37F0000000000000, 0x3690000000000000])
def test_bf16_from_float64_matches_fraction_rne(bits: list[int]) -> None:
    raw = np.array(bits, dtype=np.uint64)
    # squeeze exponents into and around the float32 range
    e = (raw >> np.uint64(52)) & np.uint64(0x7FF)
    e = np.uint64(1023 - 160) + e % np.uint64(320)
    x = ((raw & np.uint64(0x800F_FFFF_FFFF_FFFF)) | (e << np.uint64(52))).view(np.float64)
    _check_bf16(x)


def test_bf16_midpoints_near_every_binade() -> None:
    # ties with even and odd last bits in every float32 exponent, +-1 float32 ulp
    exps = np.arange(1, 255, dtype=np.uint32) << np.uint32(23)
    mant = np.array([0x8000, 0x18000, 0x7F8000, 0x10000 + 0x8000], dtype=np.uint32)
    base = (exps[:, None] | mant[None, :]).reshape(-1)
    x = np.concatenate([base, base + 1, base - 1]).view(np.float32)
    x = np.concatenate([x, -x])
    _check_bf16(x)


@pytest.mark.parametrize("bits,code", [
    (0x3F808000, 0x3F80),    # a tie below an even code stays
    (0x3F818000, 0x3F82),    # a tie above an odd code rounds up to the even one
    (0x3F808001, 0x3F81),    # just above a tie rounds up
    (0x3F807FFF, 0x3F80),    # just below a tie rounds down
    (0x7F7F7FFF, 0x7F7F),    # below the midpoint to Inf: the largest finite value
    (0x7F7F8000, 0x7F80),    # the midpoint ties to even, which is Inf
    (0xFF7FFFFF, 0xFF80),    # -max float32 rounds to -Inf
    (0x00008000, 0x0000),    # a subnormal tie to the even zero
    (0x00018000, 0x0002),    # a subnormal tie up to the even neighbour
    (0x807F8000, 0x8080),    # the largest negative subnormal ties up into the normals
    (0x80000000, 0x8000),    # -0 keeps its sign
    (0x7F800000, 0x7F80), (0xFF800000, 0xFF80),
])
def test_bf16_from_float32_sharp_cases(bits: int, code: int) -> None:
    """Round to nearest even from float32 on the bit pattern: expected codes by hand."""
    x = np.array([bits], np.uint32).view(np.float32)
    assert int(F.encode(x, "bf16")[0]) == code


@pytest.mark.parametrize("nan,pos,neg", [(None, 0x7FC0, 0xFFC0), ("zero", 0, 0),
                                         ("signed_zero", 0, 0x8000), (5, 5, 5)])
def test_bf16_nan_inputs_follow_the_policy(nan, pos: int, neg: int) -> None:
    x = np.array([0x7F800001, 0x7FFFFFFF, 0xFF800001, 0xFFFFFFFF, 0x7FC00000],
                 np.uint32).view(np.float32)
    assert F.encode(x, "bf16", nan=nan).tolist() == [pos, pos, neg, neg, pos]


@pytest.mark.parametrize("dtype", [np.uint16, np.int64])
def test_bf16_decode_of_every_code_is_the_top_half_of_its_float32(dtype: type) -> None:
    """bfloat16 is the top 16 bits of a binary32: every non-NaN code shifted left by 16 is
    its float32 (zeros, subnormals, Inf included); NaN codes give the quiet NaN with the
    code's sign, the value-table convention of every format."""
    codes = np.arange(1 << 16, dtype=np.uint32)
    got = F.decode(codes.astype(dtype), "bf16")
    assert got.dtype == np.float32
    bits = codes << 16
    nan = (codes & 0x7FFF) > 0x7F80
    want = np.where(nan, (bits & 0x8000_0000) | 0x7FC0_0000, bits).astype(np.uint32)
    assert np.array_equal(got.view(np.uint32), want)
    assert F.decode(np.array([[0x3F80, 0xBF80]], np.uint16), "bf16").tolist() == [[1.0, -1.0]]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fp32_is_identity_on_float32(dtype: type) -> None:
    rng = np.random.default_rng(7)
    bits = rng.integers(0, 2**32, 10000, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    x = x[~np.isnan(x)]
    got = F.encode(x.astype(dtype), "fp32")
    assert np.array_equal(got, x.view(np.uint32))
    assert got.dtype == np.uint32
    assert F.round_to(x.astype(np.float64), "fp32").dtype == np.float64


def test_fp32_from_float64_matches_numpy_cast() -> None:
    rng = np.random.default_rng(3)
    raw = rng.integers(0, 2**63, 20000, dtype=np.int64).astype(np.uint64)
    e = np.uint64(1023 - 160) + ((raw >> np.uint64(52)) % np.uint64(320))
    x = ((raw & np.uint64(0x800F_FFFF_FFFF_FFFF)) | (e << np.uint64(52))).view(np.float64)
    with np.errstate(over="ignore"):
        want = x.astype(np.float32).view(np.uint32)  # IEEE correctly rounded cast
    assert np.array_equal(F.encode(x, "fp32"), want)


def test_tf32_codes_are_19_bits() -> None:
    x = np.array([1.0, -1.0 - 2.0**-10, 1.0 + 2.0**-11 + 2.0**-20, 1.0 + 2.0**-11],
                 dtype=np.float32)
    codes = F.encode(x, "tf32")
    assert codes.dtype == np.uint32
    assert codes.tolist() == [127 << 10, (1 << 18) | (127 << 10) | 1, (127 << 10) | 1, 127 << 10]
    assert F.round_to(x, "tf32").tolist() == [1.0, -1.0 - 2.0**-10, 1.0 + 2.0**-10, 1.0]


@pytest.mark.parametrize("order", ["<", ">"])
@pytest.mark.parametrize("kind", ["f2", "f4", "f8"])
def test_byte_order_of_the_input_does_not_matter(order: str, kind: str) -> None:
    """Byte-swapped input (e.g. loaded from a big-endian file) is read by value: it once
    gave zeros or a broadcasting error, because the bits were viewed as native."""
    vals = [1.0, 3.0, -0.5, 448.0, 1.25, -0.0, 65504.0, 2.0 ** -24]
    x = np.array(vals, dtype=order + kind)
    _same_codes(F.encode(x, F.FP16), _numpy_fp16_codes(np.array(vals)))
    # hand-derived E4M3 codes (OCP OFP8): 1 = 0x38, 3 = 0x44, -0.5 = 0xB0, 448 = 0x7E,
    # 1.25 = 0x3A, -0 = 0x80, 65504 overflows to NaN 0x7F, 2**-24 rounds to 0
    want = [0x38, 0x44, 0xB0, 0x7E, 0x3A, 0x80, 0x7F, 0x00]
    assert F.encode(x, F.E4M3).tolist() == want
    assert F.encode(x, F.E4M3, rounding="toward_zero").tolist()[:6] == want[:6]
    assert F.round_to(x, F.E4M3)[:4].tolist() == [1.0, 3.0, -0.5, 448.0]
