"""Single instructions against exact references: fma/add/mul/div/sqrt in every rounding
mode against fractions.Fraction, cvt with every modifier, integer and bit operations
against Python integers, shfl.sync with clamp/segment operands against the PTX ISA
pseudocode, vote/activemask under divergence."""

from __future__ import annotations

import math
import zlib
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from simt_harness import load, run_elementwise
from simt_reference import (MODES, c_div, f16_codes, float_to_int, round_code, round_fraction,
                            value, wrap, zero_sign)

from hardware.simt import GlobalMemory
from hardware.simt.errors import SyncError


def f32(bits):
    return np.asarray(bits, np.uint32).view(np.float32)


finite32 = st.floats(width=32, allow_nan=False, allow_infinity=False)


def _check_float(got_bits, exact_values, mode, zero_sign=None):
    got = f32(got_bits)
    for i, x in enumerate(exact_values):
        if x is None:
            continue
        want = round_fraction(x, mode)
        assert float(got[i]) == want, (i, mode, x, float(got[i]), want)
        if x == 0 and zero_sign is not None:
            assert np.signbit(got[i]) == zero_sign[i], (i, mode)


# Double-rounding cases for fma through float64: a*b = 1 + 2**-11 + 2**-24 is exactly
# halfway between two float32; a tiny c decides the direction.
_A = float(np.float32(1 + 2**-12))


@settings(max_examples=60)
@given(st.lists(st.tuples(finite32, finite32, finite32), min_size=1, max_size=40),
       st.sampled_from(MODES))
@example([(_A, _A, 2.0**-60), (_A, _A, -2.0**-60), (_A, _A, 0.0), (1.0, 1.0, -1.0),
          (3.0e38, 2.0, -3.0e38), (2.0**-75, 2.0**-75, 0.0), (-0.0, 1.0, 0.0)], "rn")
@example([(_A, _A, 2.0**-60), (_A, _A, -2.0**-60), (1.0, 1.0, -1.0), (-0.0, 1.0, -0.0)], "rm")
@example([(3.4e38, 3.4e38, -1.0), (-3.4e38, 3.4e38, 1.0), (1.0, 2.0**-149, 1.0)], "rz")
def test_fma_f32_single_rounding(triples, mode):
    a, b, c = (np.array([t[i] for t in triples], np.float32) for i in range(3))
    got = run_elementwise(f"fma.{mode}.f32 {{d}}, {{a}}, {{b}}, {{c}}",
                          [a.view(np.uint32), b.view(np.uint32), c.view(np.uint32)], np.uint32)
    exact = [Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z))
             for x, y, z in zip(a, b, c)]
    # exact zero: +0 except in rm (-0); a product and addend of the same zero sign keep it
    zs = [zero_sign(float(x), float(y), float(z), mode) for x, y, z in zip(a, b, c)]
    _check_float(got, exact, mode, zs)


@pytest.mark.parametrize("c_hex,c", [("0f00000000", 0.0), ("0f21800000", 2.0**-60),
                                     ("0fA1800000", -2.0**-60), ("0f3F800000", 1.0)])
def test_fma_rn_f32_with_a_literal_addend_rounds_once(c_hex, c):
    """fma.rn.f32 d, a, b, <literal>: products a float32 midpoint away from a value
    (1 + 2^-11 + 2^-24) go the way the exact sum says (the tie to even without an
    addend), as with a register addend; expected values by exact Fraction rounding."""
    a = np.array([_A, -_A, _A, 1.5, 3.0e38, 2.0**-75], np.float32)
    b = np.array([_A, _A, -_A, 2.0**-23 + 1, 2.0, 2.0**-75], np.float32)
    got = run_elementwise(f"fma.rn.f32 {{d}}, {{a}}, {{b}}, {c_hex}",
                          [a.view(np.uint32), b.view(np.uint32)], np.uint32)
    exact = [Fraction(float(x)) * Fraction(float(y)) + Fraction(c) for x, y in zip(a, b)]
    zs = [zero_sign(float(x), float(y), c, "rn") for x, y in zip(a, b)]
    _check_float(got, exact, "rn", zs)


@settings(max_examples=40)
@given(st.lists(st.tuples(finite32, finite32), min_size=1, max_size=40),
       st.sampled_from(MODES), st.sampled_from(["add", "sub", "mul", "div"]))
@example([(1.0, 2.0**-30), (1.0, -2.0**-30), (3.0e38, 3.0e38), (1.0, 3.0), (2.0, 3.0)],
         "rz", "add")
@example([(1.0, 3.0), (-1.0, 3.0), (1.0, 0.0), (0.0, 0.0), (1e-45, 3.0)], "rp", "div")
def test_arith_f32_modes(pairs, mode, op):
    a = np.array([p[0] for p in pairs], np.float32)
    b = np.array([p[1] for p in pairs], np.float32)
    got = run_elementwise(f"{op}.{mode}.f32 {{d}}, {{a}}, {{b}}",
                          [a.view(np.uint32), b.view(np.uint32)], np.uint32)
    exact = []
    for x, y in zip(a, b):
        fx, fy = Fraction(float(x)), Fraction(float(y))
        if op == "div" and fy == 0:
            exact.append(None)  # inf/NaN: checked below
            continue
        exact.append({"add": fx + fy, "sub": fx - fy, "mul": fx * fy,
                      "div": fx / fy if fy else None}[op])
    _check_float(got, exact, mode)
    with np.errstate(all="ignore"):
        for i, (x, y) in enumerate(zip(a, b)):
            if op == "div" and y == 0:
                want = np.float32(x) / np.float32(y)
                g = f32(got)[i]
                assert (np.isnan(want) and np.isnan(g)) or g == want


@settings(max_examples=40)
@given(st.lists(st.floats(width=32, min_value=0, allow_infinity=False, allow_nan=False),
                min_size=1, max_size=40), st.sampled_from(MODES))
@example([2.0, 1e-45, 0.0, 3.4e38, 1.0 + 2.0**-23, 4.0], "rp")
def test_sqrt_f32_modes(xs, mode):
    a = np.array(xs, np.float32)
    got = f32(run_elementwise(f"sqrt.{mode}.f32 {{d}}, {{a}}", [a.view(np.uint32)], np.uint32))
    for x, g in zip(a, got):
        fx = Fraction(float(x))
        fg = Fraction(float(g))
        lo = Fraction(float(np.nextafter(g, np.float32(0))))
        hi = Fraction(float(np.nextafter(g, np.float32(np.inf))))
        if fg * fg == fx:
            continue  # exact root: every mode returns it
        if mode in ("rz", "rm"):
            assert fg * fg <= fx < hi * hi, (x, g)
        elif mode == "rp":
            assert lo * lo < fx <= fg * fg, (x, g)
        else:  # nearest: the midpoints around g bracket the root
            assert ((fg + lo) / 2) ** 2 <= fx <= ((fg + hi) / 2) ** 2, (x, g)


# ------------------------------------------------------------------------------ cvt


@settings(max_examples=40)
@given(st.lists(st.integers(-2**63, 2**63 - 1), min_size=1, max_size=40),
       st.sampled_from(MODES))
@example([2**63 - 1, -2**63, 2**24 + 1, 2**24 + 3, -(2**25 + 3), 2**53 + 1, 0], "rn")
def test_cvt_s64_to_f32_and_f64(vals, mode):
    v = np.array(vals, np.int64)
    got = f32(run_elementwise(f"cvt.{mode}.f32.s64 {{d}}, {{a}}", [v.view(np.uint64)], np.uint32))
    for x, g in zip(vals, got):
        assert float(g) == round_fraction(Fraction(x), mode), (x, mode)
    got64 = run_elementwise(f"cvt.{mode}.f64.s64 {{d}}, {{a}}", [v.view(np.uint64)],
                            np.uint64).view(np.float64)
    for x, g in zip(vals, got64):
        assert float(g) == round_fraction(Fraction(x), mode, np.float64), (x, mode)


@settings(max_examples=30)
@given(st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=30), st.sampled_from(MODES))
@example([2**64 - 1, 2**63, 2**24 + 1], "rn")
def test_cvt_u64_to_f32(vals, mode):
    v = np.array(vals, np.uint64)
    got = f32(run_elementwise(f"cvt.{mode}.f32.u64 {{d}}, {{a}}", [v], np.uint32))
    for x, g in zip(vals, got):
        assert float(g) == round_fraction(Fraction(x), mode), (x, mode)


@settings(max_examples=30)
@given(st.lists(st.floats(width=64, allow_nan=False), min_size=1, max_size=30),
       st.sampled_from(MODES))
@example([3.4028235677973366e38, 3.4028235e38 * 1.0000001, 1.0 + 2.0**-24,
          1.0 + 2.0**-24 + 2.0**-50, 2.0**-150, 2.0**-149 * 1.5, -1e300], "rn")
def test_cvt_f64_to_f32(vals, mode):
    v = np.array(vals, np.float64)
    got = f32(run_elementwise(f"cvt.{mode}.f32.f64 {{d}}, {{a}}", [v.view(np.uint64)], np.uint32))
    for x, g in zip(vals, got):
        if np.isinf(x):
            assert g == x
            continue
        assert float(g) == round_fraction(Fraction(x), mode), (x, mode)


@pytest.mark.parametrize("mode", ["rni", "rzi", "rmi", "rpi"])
@pytest.mark.parametrize("dst", ["s32", "u32", "s64", "u64", "s16", "u8"])
def test_cvt_float_to_int_saturates(mode, dst):
    x = np.array([0.5, 1.5, -0.5, -1.5, 2.5, -2.5, 1e20, -1e20, np.nan, np.inf, -np.inf,
                  255.5, 65535.7, -129.2, 2.0**31, 2.0**63, 2.0**64], np.float64)
    bits = int(dst[1:])
    wide = max(bits, 16) // 8
    out_dt = np.dtype(f"uint{8 * wide}")
    tmpl = f"cvt.{mode}.{dst}.f64 {{d}}, {{a}}"
    got = run_elementwise(tmpl, [x.view(np.uint64)], out_dt)
    for xv, g in zip(x, got):
        want = float_to_int(float(xv), mode[:2], bits, signed=dst[0] == "s")
        g = int(np.asarray(g).astype(out_dt))
        # a narrow destination in a wider register: the value sign- or zero-extended
        gv = g - (1 << (8 * wide)) if (dst[0] == "s" and g >> (8 * wide - 1)) else g
        assert gv == want, (xv, dst, mode, g)


def test_cvt_integer_sat_and_extension():
    v = np.array([-5, 300, 70000, -70000, 2**31 - 1], np.int32)
    got = run_elementwise("cvt.sat.u8.s32 {d}, {a}", [v.view(np.uint32)], np.uint32)
    np.testing.assert_array_equal(got, [0, 255, 255, 0, 255])
    got = run_elementwise("cvt.sat.s16.s32 {d}, {a}", [v.view(np.uint32)], np.uint32)
    np.testing.assert_array_equal(got.view(np.int32), [-5, 300, 32767, -32768, 32767])
    got = run_elementwise("cvt.s64.s32 {d}, {a}", [v.view(np.uint32)], np.uint64)
    np.testing.assert_array_equal(got.view(np.int64), v.astype(np.int64))
    got = run_elementwise("cvt.u64.u32 {d}, {a}", [v.view(np.uint32)], np.uint64)
    np.testing.assert_array_equal(got, v.view(np.uint32).astype(np.uint64))


def test_cvt_sat_float():
    x = np.array([-1.0, 0.25, 2.0, np.nan, -0.0], np.float32)
    got = f32(run_elementwise("cvt.sat.f32.f32 {d}, {a}", [x.view(np.uint32)], np.uint32))
    np.testing.assert_array_equal(got, [0.0, 0.25, 1.0, 0.0, 0.0])


# -------------------------------------------------------------------------- integers

i32s = st.lists(st.integers(-2**31, 2**31 - 1), min_size=1, max_size=40)
i64s = st.lists(st.integers(-2**63, 2**63 - 1), min_size=1, max_size=40)


@settings(max_examples=30)
@given(i64s, i64s)
@example([-2**63, -1, 2**63 - 1, 12345678901234], [-1, -1, 2**63 - 1, -98765432109])
def test_mul_hi_and_wide_64(xs, ys):
    n = min(len(xs), len(ys))
    a = np.array(xs[:n], np.int64)
    b = np.array(ys[:n], np.int64)
    got = run_elementwise("mul.hi.s64 {d}, {a}, {b}", [a.view(np.uint64), b.view(np.uint64)],
                          np.uint64).view(np.int64)
    assert [int(g) for g in got] == [(x * y) >> 64 for x, y in zip(a.tolist(), b.tolist())]
    ua, ub = a.view(np.uint64), b.view(np.uint64)
    got = run_elementwise("mul.hi.u64 {d}, {a}, {b}", [ua, ub], np.uint64)
    assert [int(g) for g in got] == [(x * y) >> 64 for x, y in zip(ua.tolist(), ub.tolist())]


@settings(max_examples=30)
@given(i32s, i32s)
@example([-2**31, 7, -7, 7, 0], [-1, -2, 2, 3, 5])
def test_int32_ops(xs, ys):
    n = min(len(xs), len(ys))
    xs, ys = xs[:n], [y if y != 0 else 1 for y in ys[:n]]
    a = np.array(xs, np.int32).view(np.uint32)
    b = np.array(ys, np.int32).view(np.uint32)
    def run(t):
        return [int(v) for v in run_elementwise(t, [a, b], np.uint32).view(np.int32)]
    assert run("div.s32 {d}, {a}, {b}") == [c_div(x, y, 32)[0] for x, y in zip(xs, ys)]
    assert run("rem.s32 {d}, {a}, {b}") == [c_div(x, y, 32)[1] for x, y in zip(xs, ys)]
    assert run("mul.hi.s32 {d}, {a}, {b}") == [wrap((x * y) >> 32, 32, True) for x, y in zip(xs, ys)]
    assert run("mul.lo.s32 {d}, {a}, {b}") == [wrap(x * y, 32, True) for x, y in zip(xs, ys)]
    assert run("add.sat.s32 {d}, {a}, {b}") == [min(max(x + y, -2**31), 2**31 - 1) for x, y in zip(xs, ys)]
    assert run("min.s32 {d}, {a}, {b}") == [min(x, y) for x, y in zip(xs, ys)]
    assert run("max.u32 {d}, {a}, {b}") == [wrap(max(x % 2**32, y % 2**32), 32, True)
                                            for x, y in zip(xs, ys)]
    assert run("div.u32 {d}, {a}, {b}") == [wrap((x % 2**32) // (y % 2**32), 32, True)
                                            for x, y in zip(xs, ys)]
    wide = run_elementwise("mul.wide.s32 {d}, {a}, {b}", [a, b], np.uint64).view(np.int64)
    assert [int(w) for w in wide] == [x * y for x, y in zip(xs, ys)]
    mad = run_elementwise("mad.wide.u32 {d}, {a}, {b}, {c}",
                          [a, b, np.arange(n, dtype=np.uint64) * np.uint64(2**40)], np.uint64)
    assert [int(w) for w in mad] == [((x % 2**32) * (y % 2**32) + i * 2**40) % 2**64
                                     for i, (x, y) in enumerate(zip(xs, ys))]


@settings(max_examples=30)
@given(st.lists(st.tuples(st.integers(0, 2**32 - 1), st.integers(0, 300), st.integers(0, 300)),
                min_size=1, max_size=40))
@example([(0x80000000, 31, 1), (0xF0F0F0F0, 4, 8), (0xFFFFFFFF, 0, 0), (0x12345678, 28, 10),
          (0x80000000, 0, 40), (0x7, 255, 3)])
def test_bfe_bfi(cases):
    a = np.array([c[0] for c in cases], np.uint32)
    pos = np.array([c[1] for c in cases], np.uint32)
    ln = np.array([c[2] for c in cases], np.uint32)
    def bfe(x, p, l, signed):
        p, l = p & 0xFF, l & 0xFF
        msb = min(p + l - 1, 31)
        sbit = ((x >> msb) & 1 if l else 0) if signed else 0
        r = 0
        for i in range(32):
            bit = ((x >> (p + i)) & 1) if (i < l and p + i <= 31) else sbit
            r |= bit << i
        return r
    got = run_elementwise("bfe.u32 {d}, {a}, {b}, {c}", [a, pos, ln], np.uint32)
    assert got.tolist() == [bfe(x, p, l, False) for x, p, l in zip(a.tolist(), pos.tolist(), ln.tolist())]
    got = run_elementwise("bfe.s32 {d}, {a}, {b}, {c}", [a, pos, ln], np.uint32)
    assert got.tolist() == [bfe(x, p, l, True) for x, p, l in zip(a.tolist(), pos.tolist(), ln.tolist())]
    base = a[::-1].copy()
    def bfi(x, y, p, l):
        p, l = p & 0xFF, l & 0xFF
        r = y
        for i in range(l):
            if p + i > 31:
                break
            r = (r & ~(1 << (p + i))) | (((x >> i) & 1) << (p + i))
        return r & 0xFFFFFFFF
    got = run_elementwise("bfi.b32 {d}, {a}, {b}, {c}, {e}", [a, base, pos, ln], np.uint32)
    assert got.tolist() == [bfi(x, y, p, l) for x, y, p, l in
                            zip(a.tolist(), base.tolist(), pos.tolist(), ln.tolist())]


@pytest.mark.parametrize("sh", [0, 1, 31, 32, 33, 63, 64, 65, 2**32 - 1])
def test_shifts_by_a_literal_amount(sh):
    """shl/shr with the amount written in the instruction (a compile-time clamp): amounts
    past the width give 0 (shr.s: the sign's copies), as with a register amount."""
    xs = [0, 1, 0x80000001, 0xFFFFFFFF, 0x12345678]
    a = np.array(xs, np.uint32)
    assert run_elementwise(f"shl.b32 {{d}}, {{a}}, {sh}", [a], np.uint32).tolist() == [
        (x << sh) & 0xFFFFFFFF if sh < 32 else 0 for x in xs]
    assert run_elementwise(f"shr.u32 {{d}}, {{a}}, {sh}", [a], np.uint32).tolist() == [
        x >> sh if sh < 32 else 0 for x in xs]
    signed = [x - 2**32 if x >> 31 else x for x in xs]
    assert run_elementwise(f"shr.s32 {{d}}, {{a}}, {sh}", [a], np.uint32).view(
        np.int32).tolist() == [x >> min(sh, 31) for x in signed]
    w = np.array([0, 1, 2**63 + 5, 2**64 - 1, 0x0123456789ABCDEF], np.uint64)
    assert run_elementwise(f"shl.b64 {{d}}, {{a}}, {sh}", [w], np.uint64).tolist() == [
        (int(x) << sh) & (2**64 - 1) if sh < 64 else 0 for x in w]
    assert run_elementwise(f"shr.u64 {{d}}, {{a}}, {sh}", [w], np.uint64).tolist() == [
        int(x) >> sh if sh < 64 else 0 for x in w]


@settings(max_examples=30)
@given(st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=40), st.integers(0, 40))
def test_bit_counts_and_shifts(xs, sh):
    a = np.array(xs, np.uint32)
    s = np.full(a.shape, sh, np.uint32)
    assert run_elementwise("popc.b32 {d}, {a}", [a], np.uint32).tolist() == [bin(x).count("1") for x in xs]
    assert run_elementwise("clz.b32 {d}, {a}", [a], np.uint32).tolist() == [32 - x.bit_length() for x in xs]
    assert run_elementwise("brev.b32 {d}, {a}", [a], np.uint32).tolist() == [
        int(f"{x:032b}"[::-1], 2) for x in xs]
    assert run_elementwise("shl.b32 {d}, {a}, {b}", [a, s], np.uint32).tolist() == [
        (x << sh) & 0xFFFFFFFF if sh < 32 else 0 for x in xs]
    assert run_elementwise("shr.u32 {d}, {a}, {b}", [a, s], np.uint32).tolist() == [
        x >> sh if sh < 32 else 0 for x in xs]
    signed = [x - 2**32 if x >> 31 else x for x in xs]
    assert run_elementwise("shr.s32 {d}, {a}, {b}", [a, s], np.uint32).view(np.int32).tolist() == [
        x >> min(sh, 31) for x in signed]
    b = a[::-1].copy()
    def prmt(x, y, c):
        src = x | (y << 32)
        r = 0
        for k in range(4):
            nib = (c >> (4 * k)) & 0xF
            byte = (src >> (8 * (nib & 7))) & 0xFF
            if nib & 8:
                byte = 0xFF if byte & 0x80 else 0
            r |= byte << (8 * k)
        return r
    for c in (0x3210, 0x7654, 0x0123, 0x8888, 0xBA98, 0x5140):
        sel = np.full(a.shape, c, np.uint32)
        got = run_elementwise("prmt.b32 {d}, {a}, {b}, {c}", [a, b, sel], np.uint32)
        assert got.tolist() == [prmt(x, y, c) for x, y in zip(a.tolist(), b.tolist())]


def test_float_min_max_abs_neg():
    a = np.array([1.0, -0.0, np.nan, np.nan, 2.0, -3.0], np.float32)
    b = np.array([2.0, 0.0, 1.0, np.nan, np.nan, -np.inf], np.float32)
    got = f32(run_elementwise("min.f32 {d}, {a}, {b}", [a.view(np.uint32), b.view(np.uint32)], np.uint32))
    assert got[0] == 1.0 and got[1] == 0 and np.signbit(got[1]) and got[2] == 1.0
    assert np.isnan(got[3]) and got[4] == 2.0 and got[5] == -np.inf
    got = f32(run_elementwise("max.f32 {d}, {a}, {b}", [a.view(np.uint32), b.view(np.uint32)], np.uint32))
    assert got[1] == 0 and not np.signbit(got[1])
    got = run_elementwise("neg.f32 {d}, {a}", [a.view(np.uint32)], np.uint32)
    np.testing.assert_array_equal(got, a.view(np.uint32) ^ np.uint32(0x80000000))
    got = run_elementwise("abs.f32 {d}, {a}", [a.view(np.uint32)], np.uint32)
    np.testing.assert_array_equal(got, a.view(np.uint32) & np.uint32(0x7FFFFFFF))


def test_approx_within_documented_error():
    x = np.array([0.5, 1.0, 2.0, 3.0, 10.0, 0.1, -1.5, 100.0], np.float32)
    pos = np.abs(x)
    ex2 = f32(run_elementwise("ex2.approx.f32 {d}, {a}", [x.view(np.uint32)], np.uint32))
    np.testing.assert_allclose(ex2, np.exp2(x.astype(np.float64)), rtol=2 * 2.0**-23)
    lg2 = f32(run_elementwise("lg2.approx.f32 {d}, {a}", [pos.view(np.uint32)], np.uint32))
    np.testing.assert_allclose(lg2, np.log2(pos.astype(np.float64)), atol=2.0**-21, rtol=2.0**-21)
    rcp = f32(run_elementwise("rcp.approx.f32 {d}, {a}", [x.view(np.uint32)], np.uint32))
    np.testing.assert_allclose(rcp, 1.0 / x.astype(np.float64), rtol=2.0**-23)
    sin = f32(run_elementwise("sin.approx.f32 {d}, {a}", [x.view(np.uint32)], np.uint32))
    np.testing.assert_allclose(sin, np.sin(x.astype(np.float64)), atol=2.0**-20.5)
    tanh = f32(run_elementwise("tanh.approx.f32 {d}, {a}", [x.view(np.uint32)], np.uint32))
    np.testing.assert_allclose(tanh, np.tanh(x.astype(np.float64)), rtol=2.0**-11)


def test_approx_sharp_cases():
    # tanh x = x (1 - x^2/3 + ...): for 0 < |x| <= 2^-20 the relative deviation from x is
    # below 2^-41, far inside half a binary32 ulp, so the float32 x itself is the answer
    # (signed zeros keep their sign); 2^k and log2(2^k) = k are exact
    tiny = np.array([1e-10, -1e-10, 2.0**-20, -(2.0**-126), 1e-30, 0.0, -0.0], np.float32)
    got = run_elementwise("tanh.approx.f32 {d}, {a}", [tiny.view(np.uint32)], np.uint32)
    np.testing.assert_array_equal(got, tiny.view(np.uint32))
    k = np.arange(-126, 128).astype(np.float32)
    ex2 = f32(run_elementwise("ex2.approx.f32 {d}, {a}", [k.view(np.uint32)], np.uint32))
    np.testing.assert_array_equal(ex2, [np.float32(2.0**int(v)) for v in k])
    lg2 = f32(run_elementwise("lg2.approx.f32 {d}, {a}", [ex2.view(np.uint32)], np.uint32))
    np.testing.assert_array_equal(lg2, k)


# ------------------------------------------------------------------- warp collectives


def _shfl_ref(vals, mode, b, c):
    """PTX ISA 9.7.9.6 shfl.sync pseudocode for one warp (all lanes active):
    bval = b[4:0], cval = c[4:0], segmask = c[12:8]."""
    b &= 0x1F
    out, valid = [], []
    for lane in range(32):
        seg = (c >> 8) & 0x1F
        maxlane = (lane & seg) | (c & 0x1F & ~seg)
        minlane = lane & seg
        if mode == "up":
            j, ok = lane - b, lane - b >= maxlane
        elif mode == "down":
            j, ok = lane + b, lane + b <= maxlane
        elif mode == "bfly":
            j, ok = lane ^ b, (lane ^ b) <= maxlane
        else:
            j = minlane | (b & 0x1F & ~seg)
            ok = j <= maxlane
        out.append(vals[j] if ok else vals[lane])
        valid.append(ok)
    return out, valid


@pytest.mark.parametrize("mode", ["up", "down", "bfly", "idx"])
@pytest.mark.parametrize("width", [32, 16, 8])
@pytest.mark.parametrize("b", [0, 1, 3, 5])
def test_shfl_sync_segments(mode, width, b):
    # CUDA's __shfl_*_sync(mask, v, b, width) passes c = ((32 - width) << 8) | clamp,
    # clamp = 31 for idx/down/bfly and 0 for up
    clamp = 0 if mode == "up" else 31
    c = ((32 - width) << 8) | clamp
    vals = (np.arange(64, dtype=np.uint32) * 7 + 3)
    bb = np.full(64, b, np.uint32)
    cc = np.full(64, c, np.uint32)
    got, valid = run_elementwise(f"shfl.sync.{mode}.b32 {{d}}|%p1, {{a}}, {{b}}, {{c}}, -1;\n"
                                 "\tselp.u32 {d1}, 1, 0, %p1",
                                 [vals, bb, cc], np.uint32, block=64, extra_outputs=1)
    for w in range(2):
        ref, ok = _shfl_ref(vals[32 * w: 32 * w + 32].tolist(), mode, b, c)
        assert got[32 * w: 32 * w + 32].tolist() == ref
        assert valid[32 * w: 32 * w + 32].tolist() == [int(o) for o in ok]


_SHFL_PTX = """
.version 9.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 p0, .param .u64 p1)
{
    .reg .pred %p<2>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [p0];
    ld.param.u64 %rd2, [p1];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.u32 %r2, [%rd4];
    shfl.sync.MODE.b32 %r3|%p1, %r2, BVAL, CVAL, -1;
    selp.u32 %r4, 65536, 0, %p1;
    or.b32 %r5, %r3, %r4;
    add.s64 %rd5, %rd2, %rd3;
    st.global.u32 [%rd5], %r5;
    ret;
}
"""


@pytest.mark.parametrize("mode,b,c", [
    ("down", 32, 31), ("down", 33, 31), ("up", 34, 0), ("bfly", 35, 31), ("idx", 37, 31),
    ("down", 40, 0x181F), ("up", 65, 0x1800), ("bfly", 0x7FFFFFFF, 0x1C1F),
    ("idx", 0xFFFFFFE3, 0x1C1F)])
def test_shfl_lane_operand_uses_low_five_bits(mode, b, c):
    x = np.arange(32, dtype=np.uint32) * 10 + 1
    ptx = _SHFL_PTX.replace("MODE", mode).replace("BVAL", str(b)).replace("CVAL", str(c))
    mem = GlobalMemory()
    px, po = mem.to_device(x), mem.alloc(128)
    load(ptx).launch("k", 1, 32, [px, po], mem)
    got = mem.from_device(po, np.uint32, 32)
    ref, ok = _shfl_ref(x.tolist(), mode, b, c)
    np.testing.assert_array_equal(got, np.array([v | (o << 16) for v, o in zip(ref, ok)],
                                                np.uint32))


def test_vote_and_activemask_under_divergence():
    # odd lanes branch away; the even lanes vote among themselves
    ptx = """
.version 9.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 out)
{
    .reg .pred %p<5>;
    .reg .b32 %r<10>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 8;
    add.s64 %rd3, %rd1, %rd2;
    and.b32 %r2, %r1, 1;
    setp.ne.u32 %p1, %r2, 0;
    @%p1 bra $L_odd;
    activemask.b32 %r3;
    setp.lt.u32 %p2, %r1, 8;
    vote.sync.ballot.b32 %r4, %p2, %r3;
    st.global.v2.u32 [%rd3], {%r3, %r4};
    bra.uni $L_end;
$L_odd:
    activemask.b32 %r3;
    vote.sync.all.pred %p3, %p1, %r3;
    selp.u32 %r4, 1, 0, %p3;
    st.global.v2.u32 [%rd3], {%r3, %r4};
$L_end:
    ret;
}
"""
    mod = load(ptx)
    mem = GlobalMemory()
    out = mem.alloc(8 * 32)
    st_ = mod.launch("k", 1, 32, [out], mem)
    r = mem.from_device(out, np.uint32, (32, 2))
    even = 0x55555555
    odd = 0xAAAAAAAA
    assert (r[0::2, 0] == even).all()
    assert (r[0::2, 1] == 0b1010101).all()   # lanes 0, 2, 4, 6
    assert (r[1::2, 0] == odd).all()
    assert (r[1::2, 1] == 1).all()
    assert st_.divergent_branches == 1


finite64 = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e300, max_value=1e300)


@settings(max_examples=20)
@given(st.lists(st.tuples(finite64, finite64, finite64), min_size=1, max_size=10),
       st.sampled_from(MODES), st.sampled_from(["fma", "add", "div", "mul"]))
@example([(1.0 + 2.0**-30, 1.0 + 2.0**-30, -1.0), (0.1, 3.0, 1e-17)], "rn", "fma")
def test_f64_modes(triples, mode, op):
    cols = [np.array([t[i] for t in triples], np.float64) for i in range(3)]
    if op == "div":
        cols[1] = np.where(cols[1] == 0, 1.0, cols[1])
    tmpl = {"fma": "fma.{m}.f64 {{d}}, {{a}}, {{b}}, {{c}}", "add": "add.{m}.f64 {{d}}, {{a}}, {{b}}",
            "div": "div.{m}.f64 {{d}}, {{a}}, {{b}}", "mul": "mul.{m}.f64 {{d}}, {{a}}, {{b}}"}[op]
    nin = 3 if op == "fma" else 2
    got = run_elementwise(tmpl.format(m=mode), [c.view(np.uint64) for c in cols[:nin]],
                          np.uint64).view(np.float64)
    for i in range(len(triples)):
        a, b, c = (Fraction(float(col[i])) for col in cols)
        exact = {"fma": lambda: a * b + c, "add": lambda: a + b, "div": lambda: a / b,
                 "mul": lambda: a * b}[op]()
        want = round_fraction(exact, mode, np.float64)
        if exact == 0:
            assert got[i] == 0
            continue
        assert float(got[i]) == want, (op, mode, i, float(got[i]), want)


def test_f32_nan_results_are_canonical():
    payload = np.array([0x7FC01234, 0xFFC00001, 0x7F800000, 0xFF800000], np.uint32)
    one = np.float32([1.0, 1.0, -1.0, 0.0]).view(np.uint32)
    got = run_elementwise("add.f32 {d}, {a}, {b}", [payload, one], np.uint32)
    # NaN payloads are not propagated; inf + (-1) = inf; -inf + 0 = -inf
    np.testing.assert_array_equal(got, [0x7FFFFFFF, 0x7FFFFFFF, 0x7F800000, 0xFF800000])
    inf = np.array([0x7F800000] * 4, np.uint32)
    ninf = np.array([0xFF800000] * 4, np.uint32)
    got = run_elementwise("fma.rn.f32 {d}, {a}, {b}, {c}", [inf, one, ninf], np.uint32)
    np.testing.assert_array_equal(got[:2], [0x7FFFFFFF, 0x7FFFFFFF])  # inf - inf


@settings(max_examples=20)
@given(i64s, i64s, st.integers(0, 70))
@example([-2**63, 5], [-1, -3], 63)
def test_int64_div_rem_mad_shift(xs, ys, sh):
    n = min(len(xs), len(ys))
    xs, ys = xs[:n], [y if y != 0 else 7 for y in ys[:n]]
    a = np.array(xs, np.int64).view(np.uint64)
    b = np.array(ys, np.int64).view(np.uint64)
    s = np.full(n, sh, np.uint32)
    def run(t, ins):
        return [int(v) for v in run_elementwise(t, ins, np.uint64).view(np.int64)]
    assert run("div.s64 {d}, {a}, {b}", [a, b]) == [c_div(x, y, 64)[0] for x, y in zip(xs, ys)]
    assert run("rem.s64 {d}, {a}, {b}", [a, b]) == [c_div(x, y, 64)[1] for x, y in zip(xs, ys)]
    assert run("mad.hi.s64 {d}, {a}, {b}, {a}", [a, b]) == [wrap(((x * y) >> 64) + x, 64, True)
                                                           for x, y in zip(xs, ys)]
    assert run("mad.lo.s64 {d}, {a}, {b}, {b}", [a, b]) == [wrap(x * y + y, 64, True)
                                                           for x, y in zip(xs, ys)]
    assert run("shl.b64 {d}, {a}, {b}", [a, s]) == [wrap(x << sh, 64, True) if sh < 64 else 0
                                                   for x in xs]
    assert run("shr.s64 {d}, {a}, {b}", [a, s]) == [x >> min(sh, 63) for x in xs]
    assert run("shr.u64 {d}, {a}, {b}", [a, s]) == [wrap((x % 2**64) >> sh, 64, True)
                                                   if sh < 64 else 0 for x in xs]


def test_shfl_from_inactive_lane_is_flagged():
    ptx = """
.version 9.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 out)
{
    .reg .pred %p<3>;
    .reg .b32 %r<10>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    setp.ge.u32 %p1, %r1, 16;
    @%p1 bra $L_end;
    shfl.sync.idx.b32 %r2, %r1, 20, 31, 65535;
    st.global.u32 [%rd3], %r2;
$L_end:
    ret;
}
"""
    mem = GlobalMemory()
    out = mem.alloc(128)
    # undefined (PTX ISA, shfl.sync): a synccheck error by default, or a warning
    with pytest.raises(SyncError, match="inactive"):
        load(ptx).launch("k", 1, 32, [out], mem)
    st_ = load(ptx).launch("k", 1, 32, [out], mem, sanitize={"synccheck": "warn"})
    assert st_.warnings and "inactive" in st_.warnings[0] and "thread (0, 0, 0)" in st_.warnings[0]


def _atomic_kernel(space: str, op: str, typ: str, cas: bool) -> str:
    src = "%r3, %r4" if cas else "%r3"
    if space == "shared":
        addr = """    mov.u32 %r6, buf;
    and.b32 %r7, %r1, 3;
    shl.b32 %r7, %r7, 2;
    add.u32 %r6, %r6, %r7;
    ld.global.u32 %r8, [%rd5];
    st.shared.u32 [%r6], %r8;
    bar.sync 0;
    atom.shared.{op}.{typ} %r5, [%r6], {src};
    bar.sync 0;
    ld.shared.u32 %r8, [%r6];
    st.global.u32 [%rd5], %r8;"""
    else:
        addr = """    atom.global.{op}.{typ} %r5, [%rd5], {src};"""
    body = addr.format(op=op, typ=typ, src=src)
    return f"""
.version 9.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 cells, .param .u64 vals, .param .u64 olds)
{{
    .shared .align 4 .b8 buf[16];
    .reg .pred %p<3>;
    .reg .b32 %r<10>;
    .reg .b64 %rd<12>;
    ld.param.u64 %rd1, [cells];
    ld.param.u64 %rd2, [vals];
    ld.param.u64 %rd3, [olds];
    mov.u32 %r1, %tid.x;
    and.b32 %r2, %r1, 3;
    mul.wide.u32 %rd4, %r2, 4;
    add.s64 %rd5, %rd1, %rd4;
    mul.wide.u32 %rd6, %r1, 8;
    add.s64 %rd7, %rd2, %rd6;
    ld.global.v2.u32 {{%r3, %r4}}, [%rd7];
{body}
    mul.wide.u32 %rd8, %r1, 4;
    add.s64 %rd9, %rd3, %rd8;
    st.global.u32 [%rd9], %r5;
    ret;
}}
"""


@pytest.mark.parametrize("space", ["global", "shared"])
@pytest.mark.parametrize("op,typ", [("add", "u32"), ("add", "f32"), ("min", "s32"),
                                    ("max", "u32"), ("exch", "b32"), ("cas", "b32"),
                                    ("and", "b32"), ("or", "b32"), ("xor", "b32"),
                                    ("inc", "u32"), ("dec", "u32")])
def test_atomics_in_thread_order(space, op, typ):
    # 64 threads, 4 cells: thread t updates cell t % 4; the interpreter applies the
    # lanes in thread order, so a sequential Python loop is the reference
    rng = np.random.default_rng(zlib.crc32(f"{space}{op}{typ}".encode()))
    n = 64
    if typ == "f32":
        vals = rng.standard_normal((n, 2)).astype(np.float32).view(np.uint32)
        cells = rng.standard_normal(4).astype(np.float32).view(np.uint32)
    else:
        vals = rng.integers(0, 12, (n, 2)).astype(np.uint32)
        if op in ("min", "max"):
            vals[:, 0] = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
        cells = rng.integers(0, 12, 4).astype(np.uint32)
    mod = load(_atomic_kernel(space, op, typ, op == "cas"))
    mem = GlobalMemory()
    pc, pv, po = mem.to_device(cells), mem.to_device(vals), mem.alloc(4 * n)
    mod.launch("k", 1, n, [pc, pv, po], mem)
    got_cells = mem.from_device(pc, np.uint32, 4)
    got_old = mem.from_device(po, np.uint32, n)
    ref = [int(c) for c in cells]
    old = []
    for t in range(n):
        c = t % 4
        cur = ref[c]
        a, b = int(vals[t, 0]), int(vals[t, 1])
        old.append(cur)
        if typ == "f32":
            fc, fa = np.uint32(cur).view(np.float32), np.uint32(a).view(np.float32)
            ref[c] = int(np.float32(fc + fa).view(np.uint32))  # add (.min/.max: no .f32)
            continue
        if typ == "s32":
            sc, sa = (cur ^ 2**31) - 2**31, (a ^ 2**31) - 2**31
            ref[c] = min(sc, sa) % 2**32
            continue
        ref[c] = {"add": (cur + a) % 2**32, "max": max(cur, a), "exch": a,
                  "cas": b if cur == a else cur, "and": cur & a, "or": cur | a,
                  "xor": cur ^ a, "inc": 0 if cur >= a else cur + 1,
                  "dec": a if (cur == 0 or cur > a) else cur - 1}[op]
    np.testing.assert_array_equal(got_cells, ref)
    np.testing.assert_array_equal(got_old, old)


def test_cvt_f16x2_packs_first_operand_high():
    a = np.float32([1.0, -2.5, 65520.0, np.nan])
    b = np.float32([0.333, 3.0, -1e-8, 7.0])
    got = run_elementwise("cvt.rn.f16x2.f32 {d}, {a}, {b}", [a.view(np.uint32), b.view(np.uint32)],
                          np.uint32)
    hi, lo = (f16_codes(v).astype(np.uint32) for v in (a, b))
    np.testing.assert_array_equal(got, (hi << 16) | lo)


# hand-encoded (OCP FP8: E4M3 bias 7, max 448 = 0x7E; E5M2 bias 15, max 57344 = 0x7B):
# 1.0625 and 1.1875 (E4M3), 1.125 and 1.375 (E5M2) are ties to even; 2**-9 and 2**-16
# are the smallest subnormals; .satfinite clamps +-1000 / +-1e6 to +-max
_FP8X2_CASES = {
    "e4m3x2": ([1.0, -2.0, 1000.0, 1.0625], [0.5, 2.0**-9, -1000.0, 1.1875],
               [0x38, 0xC0, 0x7E, 0x38], [0x30, 0x01, 0xFE, 0x3A]),
    "e5m2x2": ([1.0, -2.0, 1e6, 1.125], [0.5, 2.0**-16, -1e6, 1.375],
               [0x3C, 0xC0, 0x7B, 0x3C], [0x38, 0x01, 0xFB, 0x3E]),
}


@pytest.mark.parametrize("fmt", sorted(_FP8X2_CASES))
@pytest.mark.parametrize("relu", [False, True])
def test_cvt_fp8x2_packs_first_operand_high(fmt, relu):
    a, b, hi, lo = _FP8X2_CASES[fmt]
    if relu:  # negative inputs become +0 before encoding
        hi = [0 if x < 0 else h for x, h in zip(a, hi)]
        lo = [0 if x < 0 else h for x, h in zip(b, lo)]
    text = f"cvt.rn.satfinite{'.relu' if relu else ''}.{fmt}.f32 {{d}}, {{a}}, {{b}}"
    got = run_elementwise(text, [np.float32(a).view(np.uint32), np.float32(b).view(np.uint32)],
                          np.uint16)
    assert got.tolist() == [(h << 8) | lo_ for h, lo_ in zip(hi, lo)]


def test_cvt_f16x2_relu():
    a = np.float32([-1.0, 2.0, np.nan])
    b = np.float32([3.0, -0.5, -7.0])
    got = run_elementwise("cvt.rn.relu.f16x2.f32 {d}, {a}, {b}",
                          [a.view(np.uint32), b.view(np.uint32)], np.uint32)
    # PTX .relu: negative -> +0, NaN stays NaN (canonical f16 NaN 0x7FFF)
    assert got.tolist() == [(0x0000 << 16) | 0x4200, (0x4000 << 16) | 0x0000,
                            (0x7FFF << 16) | 0x0000]


@pytest.mark.parametrize("text", ["ex2.approx.f16 {d}, {a}", "setp.lt.f16x2 %p1, {a}, {b}",
                                  "min.xorsign.abs.f16 {d}, {a}, {b}", "div.rn.f16 {d}, {a}, {b}"])
def test_unsupported_half_forms_are_refused(text):
    from hardware.simt import UnsupportedPtxError
    with pytest.raises(UnsupportedPtxError, match="not supported"):
        run_elementwise(text, [np.zeros(2, np.uint32), np.zeros(2, np.uint32)], np.uint32)


# ---------------------------------------------------------------- 16-bit floats


def _finite_codes(fmt: str):
    e_bits, m_bits = (5, 10) if fmt == "fp16" else (8, 7)
    inf_exp = ((1 << e_bits) - 1) << m_bits
    return st.integers(0, 0xFFFF).filter(lambda c: (c & inf_exp) != inf_exp)


@pytest.mark.slow
@pytest.mark.parametrize("fmt,tname", [("fp16", "f16"), ("bf16", "bf16")])
@settings(max_examples=15)
@given(data=st.data())
def test_half_arithmetic_single_rounding(fmt, tname, data):
    codes = st.lists(st.tuples(_finite_codes(fmt), _finite_codes(fmt), _finite_codes(fmt)),
                     min_size=1, max_size=12)
    triples = data.draw(codes)
    a, b, c = (np.array([t[i] for t in triples], np.uint16) for i in range(3))
    for op, tmpl in (("add", "add.{t} {{d}}, {{a}}, {{b}}"), ("mul", "mul.{t} {{d}}, {{a}}, {{b}}"),
                     ("sub", "sub.{t} {{d}}, {{a}}, {{b}}"),
                     ("fma", "fma.rn.{t} {{d}}, {{a}}, {{b}}, {{c}}")):
        got = run_elementwise(tmpl.format(t=tname), [a, b, c], np.uint16)
        for i, (x, y, z) in enumerate(triples):
            fx, fy, fz = (Fraction(value(fmt, v)) for v in (x, y, z))
            exact = {"add": fx + fy, "sub": fx - fy, "mul": fx * fy, "fma": fx * fy + fz}[op]
            if exact == 0:
                assert int(got[i]) & 0x7FFF == 0, (op, i)
                continue
            assert int(got[i]) == round_code(fmt, exact), (op, fmt, x, y, z, hex(got[i]))


@pytest.mark.parametrize("fmt,tname", [("fp16", "f16"), ("bf16", "bf16")])
def test_half_arithmetic_exact_zero_signs(fmt, tname):
    """Every combination of +-0 and +-1: an exact zero result has the sign IEEE 754-2019
    section 6.3 gives it (a product of zeros: the exclusive or of the signs)."""
    vals = [0.0, -0.0, 1.0, -1.0]
    combos = [(x, y, z) for x in vals for y in vals for z in vals]
    a, b, c = (np.array([round_code(fmt, t[i]) for t in combos], np.uint16) for i in range(3))
    for op in ("add", "sub", "mul", "fma"):
        text = (f"fma.rn.{tname} {{d}}, {{a}}, {{b}}, {{c}}" if op == "fma" else
                f"{op}.{tname} {{d}}, {{a}}, {{b}}")
        got = run_elementwise(text, [a, b, c], np.uint16)
        for (x, y, z), g in zip(combos, got.tolist()):
            exact, sign = {"add": (x + y, zero_sign(x, 1.0, y, "rn")),
                           "sub": (x - y, zero_sign(x, 1.0, -y, "rn")),
                           "mul": (x * y, math.copysign(1, x) * math.copysign(1, y) < 0),
                           "fma": (x * y + z, zero_sign(x, y, z, "rn"))}[op]
            if exact == 0:
                assert g == (0x8000 if sign else 0), (op, x, y, z, hex(g))


def test_half2_packed_lanes_independent():
    a = np.array([0x3C00_4000, 0xC200_3800], np.uint32)   # (hi, lo) = (1, 2), (-3, 0.5)
    b = np.array([0x4000_3C00, 0x3C00_BC00], np.uint32)   # (2, 1), (1, -1)
    got = run_elementwise("mul.f16x2 {d}, {a}, {b}", [a, b], np.uint32)
    np.testing.assert_array_equal(got, [0x4000_4000, 0xC200_B800])  # (2, 2), (-3, -0.5)
    got = run_elementwise("max.f16x2 {d}, {a}, {b}", [a, b], np.uint32)
    np.testing.assert_array_equal(got, [0x4000_4000, 0x3C00_3800])


@settings(max_examples=15)
@given(st.lists(st.tuples(st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1),
                          st.integers(0, 2**32 - 1)), min_size=1, max_size=20),
       st.integers(0, 255))
def test_lop3_cnot_bfind(triples, lut):
    a, b, c = (np.array([t[i] for t in triples], np.uint32) for i in range(3))
    got = run_elementwise(f"lop3.b32 {{d}}, {{a}}, {{b}}, {{c}}, {lut}", [a, b, c], np.uint32)
    for g, (x, y, z) in zip(got.tolist(), triples):
        want = 0
        for bit in range(32):
            k = (((x >> bit) & 1) << 2) | (((y >> bit) & 1) << 1) | ((z >> bit) & 1)
            want |= ((lut >> k) & 1) << bit
        assert g == want
    got = run_elementwise("cnot.b32 {d}, {a}", [a], np.uint32)
    assert got.tolist() == [int(x == 0) for x in a.tolist()]
    def bfind(x, signed):
        if signed and x >> 31:
            x = ~x & 0xFFFFFFFF
        return x.bit_length() - 1 if x else 0xFFFFFFFF
    got = run_elementwise("bfind.u32 {d}, {a}", [a], np.uint32)
    assert got.tolist() == [bfind(x, False) for x in a.tolist()]
    got = run_elementwise("bfind.s32 {d}, {a}", [a], np.uint32)
    assert got.tolist() == [bfind(x, True) for x in a.tolist()]
    got = run_elementwise("bfind.shiftamt.u32 {d}, {a}", [a], np.uint32)
    assert got.tolist() == [31 - bfind(x, False) if x else 0xFFFFFFFF for x in a.tolist()]


def test_copysign_testp_isspacep():
    a = np.float32([1.0, -2.0, 0.0, -0.0, np.inf, np.nan, 1e-40, -3.0])
    b = np.float32([-5.0, 6.0, -1.0, 2.0, 1.0, -1.0, 1.0, np.nan])
    got = f32(run_elementwise("copysign.f32 {d}, {a}, {b}", [a.view(np.uint32), b.view(np.uint32)],
                              np.uint32))
    np.testing.assert_array_equal(np.signbit(got), np.signbit(a))
    np.testing.assert_array_equal(np.abs(got)[:7], np.abs(b)[:7])
    for op, fn in (("finite", np.isfinite), ("infinite", np.isinf), ("notanumber", np.isnan),
                   ("number", lambda v: ~np.isnan(v)),
                   ("normal", lambda v: np.isfinite(v) & (np.abs(v) >= np.finfo(np.float32).tiny)),
                   ("subnormal", lambda v: (v != 0) & (np.abs(v) < np.finfo(np.float32).tiny))):
        got = run_elementwise(f"testp.{op}.f32 %p1, {{a}};\n\tselp.u32 {{d}}, 1, 0, %p1",
                              [a.view(np.uint32)], np.uint32)
        np.testing.assert_array_equal(got, fn(a).astype(np.uint32), err_msg=op)
    from hardware.simt.memory import GLOBAL_BASE, LOCAL_WINDOW, SHARED_WINDOW
    addr = np.array([GLOBAL_BASE + 64, SHARED_WINDOW + 4, LOCAL_WINDOW + 8], np.uint64)
    for space, want in (("global", [1, 0, 0]), ("shared", [0, 1, 0]), ("local", [0, 0, 1])):
        got = run_elementwise(f"isspacep.{space} %p1, {{a}};\n\tselp.u32 {{d}}, 1, 0, %p1",
                              [addr], np.uint32)
        assert got.tolist() == want, space


def test_more_approx_within_documented_error():
    x = np.linspace(-3, 3, 41).astype(np.float32)
    for op, ref, tol in (("tanh", np.tanh, 2.0**-10.9), ("cos", np.cos, 2.0**-20.5),
                         ("rsqrt", lambda v: 1 / np.sqrt(np.abs(v) + 1), 2.0**-22)):
        src = np.abs(x) + np.float32(1) if op == "rsqrt" else x
        got = f32(run_elementwise(f"{op}.approx.f32 {{d}}, {{a}}", [src.view(np.uint32)], np.uint32))
        want = ref(x.astype(np.float64))
        with np.errstate(invalid="ignore"):  # 0/0 where want is 0 (masked below)
            err = np.abs(got - want) / (np.abs(want) if op in ("tanh", "rsqrt") else 1.0)
        assert np.nanmax(np.where(want == 0, 0, err)) <= tol, op


@pytest.mark.parametrize("mode", MODES)
def test_cvt_s64_to_bf16_single_rounding(mode):
    # 2**60 + 2**52 + 1: halfway between two bfloat16 values plus a tiny excess that a
    # rounding through float64 would lose (2**60 + 2**52 is a tie -> even)
    vals = [2**60 + 2**52 + 1, 2**60 + 2**52, -(2**60 + 2**52 + 1), 3, -(2**63), 2**62 + 1]
    v = np.array(vals, np.int64)
    got = run_elementwise(f"cvt.{mode}.bf16.s64 {{d}}, {{a}}", [v.view(np.uint64)], np.uint16)
    for x, g in zip(vals, got.tolist()):
        assert g == round_code("bf16", Fraction(x), mode), (x, mode, hex(g))


@settings(max_examples=20)
@given(st.lists(st.tuples(finite64, finite64, finite64), min_size=1, max_size=30))
@example([(1 + 2.0**-27, 1 + 2.0**-27, 2.0**-80), (1 + 2.0**-26, 1 - 2.0**-26, -1.0),
          (0.1, 10.0, -1.0), (3.0, 1 / 3, -1.0), (1e300, 1e10, -1e300), (0.0, 5.0, -0.0),
          (-0.0, 5.0, 0.0), (1e-300, 1e-300, 0.0), (2.0**-1022, 0.5, 0.0),
          (1 + 2.0**-52, 1 + 2.0**-52, -(1 + 2.0**-51))])
def test_fma_f64_rn_fast_path(triples):
    # cancellation-heavy and random triples: the error-free fast path, or its exact
    # fallback, against Fraction
    a, b, c = (np.array([t[i] for t in triples], np.float64) for i in range(3))
    with np.errstate(over="ignore"):  # huge triples: the negated product may be inf
        c = np.where(np.arange(len(c)) % 2 == 0, c, -(a * b) * (1 + 2.0**-40))
    got = run_elementwise("fma.rn.f64 {d}, {a}, {b}, {c}",
                          [a.view(np.uint64), b.view(np.uint64), c.view(np.uint64)],
                          np.uint64).view(np.float64)
    for i in range(len(triples)):
        if not np.isfinite(c[i]):
            continue
        fa, fb, fc = (Fraction(float(x[i])) for x in (a, b, c))
        exact = fa * fb + fc
        if exact == 0:
            want = zero_sign(float(a[i]), float(b[i]), float(c[i]), "rn")
            assert got[i] == 0 and np.signbit(got[i]) == want
            continue
        assert float(got[i]) == round_fraction(exact, "rn", np.float64), i
