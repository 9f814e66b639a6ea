"""MX dot product and matmul (OCP MX v1.0 section 6.2) against exact Fraction sums.

Element values are decoded here from each format's layout (not by the code under test);
the exact sum is rounded to float32 by the IEEE 754 definition in ``tests/oracles.py``
(integer arithmetic on the exact rational).
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oracles import code_value, round_rational
from refimpl.scaling import MXArray, mx_dot, mx_matmul, mx_quantize, round_dyadic

LAYOUT = {  # name -> (exp_bits, man_bits, bias, special-code test)
    "e4m3": (4, 3, 7, lambda c: (c & 0x7F) == 0x7F),
    "e5m2": (5, 2, 15, lambda c: (c & 0x7C) == 0x7C),
    "e2m3": (2, 3, 1, lambda c: False),
    "e3m2": (3, 2, 3, lambda c: False),
    "e2m1": (2, 1, 1, lambda c: False),
}
NAMES = list(LAYOUT) + ["int8"]


def value(code: int, name: str) -> Fraction:
    if name == "int8":
        return Fraction(code - 256 if code >= 128 else code, 64)
    return code_value(code, *LAYOUT[name][:3])


def bits(name: str) -> int:
    return 8 if name in ("e4m3", "e5m2", "int8") else 6 if name in ("e2m3", "e3m2") else 4


def to_f32(F: Fraction) -> float:
    """Nearest float32 to F, ties to even, overflow to Inf (independent of round_dyadic)."""
    return float(round_rational(F, np.float32))


def exact_dot(ca, sa, cb, sb, na, nb, bs):
    total = Fraction(0)
    for j in range(len(sa)):
        part = sum(value(int(ca[i]), na) * value(int(cb[i]), nb)
                   for i in range(j * bs, min((j + 1) * bs, len(ca))))
        total += Fraction(2) ** (int(sa[j]) - 127) * Fraction(2) ** (int(sb[j]) - 127) * part
    return total


@st.composite
def finite_codes(draw, name, n):
    c = draw(st.lists(st.integers(0, (1 << bits(name)) - 1), min_size=n, max_size=n))
    if name in LAYOUT:
        c = [0 if LAYOUT[name][3](v) else v for v in c]
    return np.array(c, dtype=np.uint8)


@st.composite
def mx_vector(draw, name, n, bs):
    codes = draw(finite_codes(name, n))
    nblk = -(-n // bs)
    wide = draw(st.booleans())
    lo, hi = (0, 254) if wide else (110, 144)
    scales = np.array(draw(st.lists(st.integers(lo, hi), min_size=nblk, max_size=nblk)), np.uint8)
    return codes, scales


@pytest.mark.slow
@settings(max_examples=25)
@given(data=st.data(), na=st.sampled_from(NAMES), nb=st.sampled_from(NAMES),
       n=st.integers(1, 100), bs=st.sampled_from([32, 8]))
def test_dot_is_correctly_rounded(data, na, nb, n, bs):
    ca, sa = data.draw(mx_vector(na, n, bs))
    cb, sb = data.draw(mx_vector(nb, n, bs))
    a, b = MXArray(ca, sa, na, bs), MXArray(cb, sb, nb, bs)
    F = exact_dot(ca, sa, cb, sb, na, nb, bs)
    got = mx_dot(a, b)
    assert got.dtype == np.float32
    assert float(got) == to_f32(F)
    assert float(mx_dot(a, b, out_dtype=np.float64)) == float(F)  # Python's int/int rounding


@settings(max_examples=10)
@given(data=st.data(), name=st.sampled_from(NAMES), m=st.integers(1, 4), n=st.integers(1, 4),
       k=st.integers(1, 70))
def test_matmul_matches_row_column_dots(data, name, m, n, k):
    bs = 32
    nblk = -(-k // bs)
    ca = np.stack([data.draw(finite_codes(name, k)) for _ in range(m)])
    cb = np.stack([data.draw(finite_codes(name, k)) for _ in range(n)], axis=1)
    sa = np.array(data.draw(st.lists(st.integers(100, 150), min_size=m * nblk, max_size=m * nblk)),
                  np.uint8).reshape(m, nblk)
    sb = np.array(data.draw(st.lists(st.integers(100, 150), min_size=n * nblk, max_size=n * nblk)),
                  np.uint8).reshape(nblk, n)
    c = mx_matmul(MXArray(ca, sa, name, bs, 1), MXArray(cb, sb, name, bs, 0))
    for i in range(m):
        for j in range(n):
            F = exact_dot(ca[i], sa[i], cb[:, j], sb[:, j], name, name, bs)
            assert float(c[i, j]) == to_f32(F)


def test_e5m2_large_products_take_the_split_path():
    # 57344 * 57344 * 32 overflows the int64 shortcut: the 16-bit split must stay exact
    ca = np.full(64, 0x7B, np.uint8)
    cb = np.full(64, 0x7B, np.uint8)
    cb[0] = 0x01  # smallest subnormal 2**-16, far below the rest
    sa = np.array([127, 127], np.uint8)
    sb = np.array([127, 127], np.uint8)
    F = 63 * Fraction(57344) ** 2 + Fraction(57344) * Fraction(1, 2 ** 16)
    got = mx_dot(MXArray(ca, sa, "e5m2"), MXArray(cb, sb, "e5m2"), out_dtype=np.float64)
    assert Fraction(float(got)) == Fraction(float(F))
    assert float(F) != float(63 * Fraction(57344) ** 2)  # the small term matters in float64


def test_scales_apply_per_block_pair():
    # block 0: 1 * 1 with scales 2**3 * 2**-1; block 1: 2 * 3 with scales 2**-2 * 2**0
    ca = np.zeros(64, np.uint8)
    cb = np.zeros(64, np.uint8)
    ca[0], cb[0] = 0x38, 0x38  # E4M3 1.0
    ca[32], cb[32] = 0x40, 0x44  # E4M3 2.0 and 3.0
    a = MXArray(ca, np.array([130, 125], np.uint8), "e4m3")
    b = MXArray(cb, np.array([126, 127], np.uint8), "e4m3")
    assert float(mx_dot(a, b)) == 1.0 * 2 ** 2 + 6.0 * 2 ** -2


def test_special_values():
    one = np.zeros(32, np.uint8)
    one[0] = 0x38  # E4M3 1.0
    s = np.array([127], np.uint8)
    a = MXArray(one, s, "e4m3")
    assert np.isnan(mx_dot(MXArray(one, np.array([255], np.uint8), "e4m3"), a))  # NaN scale
    nan_el = one.copy()
    nan_el[1] = 0x7F
    assert np.isnan(mx_dot(MXArray(nan_el, s, "e4m3"), a))  # NaN element (times 0)
    inf = np.zeros(32, np.uint8)
    inf[0] = 0x7C  # E5M2 +Inf
    b = MXArray(np.where(np.arange(32) == 0, 0x3C, 0).astype(np.uint8), s, "e5m2")  # 1.0
    assert mx_dot(MXArray(inf, s, "e5m2"), b) == np.inf
    zero_b = MXArray(np.zeros(32, np.uint8), s, "e5m2")
    assert np.isnan(mx_dot(MXArray(inf, s, "e5m2"), zero_b))  # Inf * 0
    both = inf.copy()
    both[1] = 0xFC  # -Inf
    ones = MXArray(np.full(32, 0x3C, np.uint8), s, "e5m2")
    assert np.isnan(mx_dot(MXArray(both, s, "e5m2"), ones))  # Inf - Inf


def test_overflow_to_inf_in_float32():
    c = np.full(32, 0x7E, np.uint8)  # 448
    s = np.array([254], np.uint8)  # 2**127
    got = mx_dot(MXArray(c, s, "e4m3"), MXArray(c, np.array([127], np.uint8), "e4m3"))
    assert got == np.inf
    got64 = mx_dot(MXArray(c, s, "e4m3"), MXArray(c, np.array([127], np.uint8), "e4m3"),
                   out_dtype=np.float64)
    assert got64 == 32 * 448.0 * 448.0 * 2.0 ** 127


def test_quantized_operands_and_padding():
    rng = np.random.default_rng(11)
    x = rng.standard_normal((3, 45)).astype(np.float32)
    w = rng.standard_normal((45, 2)).astype(np.float32)
    a = mx_quantize(x, "e4m3", axis=1, pad=True)
    b = mx_quantize(w, "e2m1", axis=0, pad=True)
    got = mx_matmul(a, b)
    da = [[Fraction(float(v)) for v in row] for row in a.dequantize(np.float64)]
    db = b.dequantize(np.float64)
    for i in range(3):
        for j in range(2):
            F = sum(da[i][k] * Fraction(float(db[k, j])) for k in range(45))
            assert float(got[i, j]) == to_f32(F)


@pytest.mark.parametrize(
    "t, exp, expected",
    [
        (1, -149, 2.0 ** -149),  # smallest float32 subnormal
        (1, -150, 0.0),  # half of it ties to even (zero)
        (3, -151, 2.0 ** -149),  # 0.75 of it rounds up
        ((1 << 24) + 1, 0, 2.0 ** 24),  # tie, even stays
        ((1 << 24) + 3, 0, 2.0 ** 24 + 4),  # tie, odd rounds up
        (-(1 << 25) - 3, 0, -(2.0 ** 25) - 4),
        ((1 << 24) - 1, 104, float(np.finfo(np.float32).max)),
        ((1 << 25) - 1, 103, math.inf),  # rounds up past the largest float32
    ],
)
def test_round_dyadic_float32(t, exp, expected):
    assert round_dyadic(t, exp, np.float32) == expected


def test_bad_operands():
    a = MXArray(np.zeros(32, np.uint8), np.array([127], np.uint8), "e4m3")
    b = MXArray(np.zeros(64, np.uint8), np.array([127, 127], np.uint8), "e4m3")
    with pytest.raises(ValueError, match="length"):
        mx_dot(a, b)
    c = MXArray(np.zeros(32, np.uint8), np.array([127, 127], np.uint8), "e4m3", 16)
    with pytest.raises(ValueError, match="block_size"):
        mx_dot(a, c)
    m = MXArray(np.zeros((2, 32), np.uint8), np.full((2, 1), 127, np.uint8), "e4m3", 32, 1)
    with pytest.raises(ValueError, match="axis 0"):
        mx_matmul(m, m)
