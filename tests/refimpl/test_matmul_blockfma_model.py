"""BlockFMA against the published tensor-core model (Khattak and Mikaitis, "Accurate
models of NVIDIA tensor cores", arXiv:2512.07004, section 4.1 and Table 3).

The hand-derived cases isolate each feature of that model where a plausible alternative
gives a different answer: the unnormalised product exponent e(a) + e(b), the exponent a
subnormal input is read with, c's FP32 exponent field, the alignment floor, and the
13-bit accumulator of the H100 FP8 path. A randomised test compares every preset with a
transcription of the model written here in integer significands and shifts (the module
under test works with rationals and float64 scaling).
"""
from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refimpl.matmul import BlockFMA, matmul

TINY = 2.0**-149  # the smallest FP32 subnormal


def dot(a, b, model) -> np.float32:
    a = np.array(a, np.float32)[None, :]
    b = np.array(b, np.float32)[:, None]
    return matmul(a, b, accumulate=model)[0, 0]


def custom(model: BlockFMA, **changes) -> BlockFMA:
    return replace(model, name="", **changes)


# -------------------------------------------------------------- unnormalised exponents
#: per preset, s and (x, y): 1.5 * 2^s is a value of the input format and x * y = 2^(2s - F)
#: with x, y values of the format (FP16 normals, BF16/TF32 normals, E4M3 values)
UNNORM = {
    "V100-FP16": (0, (2.0**-12, 2.0**-11)),
    "A100-FP16": (0, (2.0**-12, 2.0**-12)),
    "A100-BF16": (0, (2.0**-12, 2.0**-12)),
    "A100-TF32": (0, (2.0**-12, 2.0**-12)),
    "H100-FP16": (0, (2.0**-12, 2.0**-13)),
    "H100-BF16": (0, (2.0**-12, 2.0**-13)),
    "H100-FP8": (0, (2.0**-6, 2.0**-7)),
    "B200-FP8": (8, (2.0**-6, 2.0**-3)),
}


@pytest.mark.parametrize("name", sorted(UNNORM))
def test_alignment_on_the_unnormalised_product_exponent(name):
    f = BlockFMA.preset(name).fraction_bits
    s, (x, y) = UNNORM[name]
    # 1.5 * 1.5 = 2.25 * 2^(2s): significand 2.25 in [1, 4), exponent 2s (normalised:
    # 1.125 * 2^(2s + 1)). The grid is 2^(2s - F), so x * y = 2^(2s - F) is one whole
    # unit and survives; +2.25 and -2.25 cancel, leaving exactly 2^(2s - F).
    big = 1.5 * 2.0**s
    a, b = [big, -big, x], [big, big, y]
    if BlockFMA.preset(name).interleave:  # index 4 is in the half of indices 0 and 1
        a, b = [big, -big, 0.0, 0.0, x], [big, big, 0.0, 0.0, y]
    want = 2.0 ** (2 * s - f)
    assert x * y == want
    assert dot(a, b, name) == np.float32(want)
    assert dot(a, b, "exact") == np.float32(want)
    # aligned on the normalised exponent 2s + 1 the grid is 2^(2s + 1 - F): x * y is half
    # a unit and is truncated away
    assert dot(a, b, custom(BlockFMA.preset(name), product_exponent="normalised")) == 0.0


def test_unnormalised_grid_keeps_a_bit_the_output_can_hold():
    # V100 (F = 23): 2.25 + 2^-23 - 1.25 = 1 + 2^-23, an FP32 value; the normalised
    # alternative aligns on exponent 1, grid 2^-22, and drops the 2^-23
    a, b = [1.5, 2.0**-12, -1.25, 0.0], [1.5, 2.0**-11, 1.0, 0.0]
    assert dot(a, b, "V100-FP16") == np.float32(1 + 2.0**-23)
    normalised = custom(BlockFMA.preset("V100-FP16"), product_exponent="normalised")
    assert dot(a, b, normalised) == np.float32(1.0)


# -------------------------------------------------------------- subnormal inputs
def test_subnormal_input_aligns_at_the_format_minimum_exponent():
    # FP16: 2^-24 is the smallest subnormal; its exponent field reads -14, so the product
    # 2^-24 * 1 has exponent -14 + 0 and the grid (F = 23) is 2^-37. The second product
    # (1.5 * 2^-14) * 2^-24 = 0.75 * 2^-37 is below one unit: truncated away.
    a, b = [2.0**-24, 1.5 * 2.0**-14, 0.0, 0.0], [1.0, 2.0**-24, 0.0, 0.0]
    assert dot(a, b, "V100-FP16") == np.float32(2.0**-24)
    # read with the value's own exponent (-24) the grid is 2^-47 and both survive
    own = custom(BlockFMA.preset("V100-FP16"), input_emin=None)
    assert dot(a, b, own) == np.float32(2.0**-24 + 1.5 * 2.0**-38)
    assert dot(a, b, "exact") == np.float32(2.0**-24 + 1.5 * 2.0**-38)


# -------------------------------------------------------------- c's exponent field
def test_subnormal_c_aligns_at_exponent_minus_126():
    # A100-BF16 (n = 8, F = 24). Block 1 gives c = 2^-75 * 2^-74 = 2^-149 (an FP32
    # subnormal). Block 2: c and three products 1.5 * 2^-150 (exponents -75 + -75).
    # c's exponent field reads -126, so eta = -126 and the grid is 2^-150: c = 2 units,
    # each product 1.5 -> 1 unit; sum 5 units = 2.5 * 2^-149 -> toward zero 2 * 2^-149.
    a = [2.0**-75] + [0.0] * 7 + [1.5 * 2.0**-75] * 3
    b = [2.0**-74] + [0.0] * 7 + [2.0**-75] * 3
    assert dot(a, b, "A100-BF16") == np.float32(2 * TINY)
    # exactly: 2^-149 + 4.5 * 2^-150 = 3.25 * 2^-149 -> 3 * 2^-149 (nearest or toward 0)
    assert dot(a, b, "exact") == np.float32(3 * TINY)
    normalised = custom(BlockFMA.preset("A100-BF16"), product_exponent="normalised")
    assert dot(a, b, normalised) == np.float32(3 * TINY)


# -------------------------------------------------------------- alignment floor
def test_alignment_floor_coarsens_the_grid_of_tiny_blocks():
    # A100-BF16 (F = 24, floor -132). Products (BF16 normals):
    #   t1 = (1 + 2^-5)^2 2^-150              = 2^-150 + 2^-154 + 2^-160  (exp -150)
    #   t2 = (2 - 2^-4) 2^-76 (1 + 2^-5) 2^-75 = 2^-150 - 2^-160           (exp -151)
    #   t3 = -2^-77 2^-77                     = -2^-154                   (exp -154)
    # sum exactly 2^-149. eta = -150 is raised to -132: grid 2^-156, where t1 -> 68 units,
    # t2 -> 63 units (63.9375 truncated), t3 = -4 units: 127 units < 2^-149 -> 0.
    t, u = (1 + 2.0**-5) * 2.0**-75, 2.0**-77
    a, b = [t, (2 - 2.0**-4) * 2.0**-76, -u], [t, t, u]
    assert dot(a, b, "A100-BF16") == 0.0
    assert dot(a, b, "exact") == np.float32(TINY)
    # without the floor the grid is 2^-174 and nothing is lost
    assert dot(a, b, custom(BlockFMA.preset("A100-BF16"), align_floor=None)) == np.float32(TINY)


# -------------------------------------------------------------- H100 FP8 accumulator
def test_h100_fp8_accumulator_keeps_13_fraction_bits():
    # F = 13 and a 13-bit accumulator: 1.75 + 1.75 + 2^-6 * 2^-7 aligns at exponent 0
    # (grid 2^-13: the small product is one unit and is kept); the sum 3.5 + 2^-13 is
    # normalised to exponent 1, where 13 fraction bits step by 2^-12: truncated to 3.5
    a, b = [1.75, 1.75, 2.0**-6] + [0.0] * 29, [1.0, 1.0, 2.0**-7] + [0.0] * 29
    assert dot(a, b, "H100-FP8") == np.float32(3.5)
    fp32_out = custom(BlockFMA.preset("H100-FP8"), output_fraction_bits=23)
    assert dot(a, b, fp32_out) == np.float32(3.5 + 2.0**-13)
    # the accumulator carries 13 bits into the next block: 32 products of 2^-12 add
    # 2^-7 to c = 3.5 (c's exponent 1 sets the grid 2^(1 - 13) = 2^-12: each product is
    # one unit); 3.5 + 2^-7 fits 13 fraction bits at exponent 1
    a2, b2 = a + [2.0**-6] * 32, b + [2.0**-6] * 32
    assert dot(a2, b2, "H100-FP8") == np.float32(3.5 + 2.0**-7)


def test_narrow_accumulator_rounds_nearest_even_when_asked():
    # 13 fraction bits at exponent 0 step by 2^-13; 1 + 2^-14 + 2^-15 is 0.75 of a step
    # past 1 (toward zero: 1; nearest: 1 + 2^-13); 1 + 2^-14 is a tie (nearest even: 1)
    model = BlockFMA(4, 20, output_fraction_bits=13)
    row = [1.0, 2.0**-14, 2.0**-15, 0.0]
    assert dot(row, [1.0] * 4, model) == np.float32(1.0)
    rne = replace(model, output_rounding="nearest_even")
    assert dot(row, [1.0] * 4, rne) == np.float32(1 + 2.0**-13)
    assert dot([1.0, 2.0**-14, 0.0, 0.0], [1.0] * 4, rne) == np.float32(1.0)
    assert dot([1.0, 3 * 2.0**-14, 0.0, 0.0], [1.0] * 4, rne) == np.float32(1 + 2.0**-12)
    # 2^128 - 2^112 is a quarter step (2^114) below 2^128, past the largest 13-bit value
    # 2^128 - 2^114: toward zero gives that value, nearest gives 2^128, i.e. Inf
    big = [2.0**127, 2.0**127 * (1 - 2.0**-15), 0.0, 0.0]
    assert dot(big, [1.0] * 4, model) == np.float32((2 - 2.0**-13) * 2.0**127)
    assert dot(big, [1.0] * 4, rne) == np.inf


def test_presets_carry_the_published_options():
    want = {  # (input_emin, align_floor, output_fraction_bits)
        "V100-FP16": (-14, None, 23), "A100-FP16": (-14, -132, 23),
        "A100-BF16": (-126, -132, 23), "A100-TF32": (-126, -132, 23),
        "H100-FP16": (-14, -133, 23), "H100-BF16": (-126, -133, 23),
        "H100-FP8": (-6, -133, 13), "B200-FP8": (-6, -133, 23),
    }
    for name, opts in want.items():
        m = BlockFMA.preset(name)
        assert (m.input_emin, m.align_floor, m.output_fraction_bits) == opts, name
        assert m.product_exponent == "unnormalised"


def test_bad_new_arguments():
    with pytest.raises(ValueError, match="product_exponent"):
        BlockFMA(4, 23, product_exponent="sum")
    with pytest.raises(ValueError, match="input_emin"):
        BlockFMA(4, 23, input_emin=1.5)
    with pytest.raises(ValueError, match="align_floor"):
        BlockFMA(4, 23, align_floor=True)
    with pytest.raises(ValueError, match="output_fraction_bits"):
        BlockFMA(4, 23, output_fraction_bits=24)
    with pytest.raises(ValueError, match="c_placement"):
        BlockFMA(4, 23, c_placement="before")
    with pytest.raises(ValueError, match="overflow"):
        BlockFMA(4, 23, overflow="wrap")
    with pytest.raises(ValueError, match="input_emin"):
        BlockFMA(4, 23, input_emin=(-6, -14, 0))


# -------------------------------------------------------------- an independent transcription
#: (mantissa bits, emin) of each preset's input format (FP8 presets: E4M3)
FORMATS = {"V100-FP16": (10, -14), "A100-FP16": (10, -14), "A100-BF16": (7, -126),
           "A100-TF32": (10, -126), "H100-FP16": (10, -14), "H100-BF16": (7, -126),
           "H100-FP8": (3, -6), "B200-FP8": (3, -6)}


def _decode(x: float, man: int, emin: int, clamp: bool) -> tuple[int, int, int]:
    """x = sign * M * 2^(e - man), M an integer below 2^(man + 1): (sign, M, e), with e
    the exponent field's reading (subnormals: emin) or, unclamped, M normalised."""
    v = Fraction(x)
    sign = -1 if v < 0 else 1
    v = abs(v)
    e = emin
    while v >= Fraction(2) ** (e + 1):
        e += 1
    if not clamp:
        while v < Fraction(2) ** e:
            e -= 1
    m = v / Fraction(2) ** (e - man)
    assert m.denominator == 1 and m < 2 ** (man + 1)
    return sign, int(m), e


def _shift(m: int, k: int) -> int:
    """m * 2^k for k >= 0, m // 2^-k (truncating a non-negative m) for k < 0."""
    return m << k if k >= 0 else m >> -k


def published_block(model: BlockFMA, c: float, pairs: list, man: int, emin: int) -> float:
    """One block FMA as [KM25] section 4.1 describes it, on integer significands; with
    C placed after the block, the products' block first and then one IEEE FP32 addition
    (float64 sum of two float32 values, rounded to float32 by numpy: exact then RNE
    whenever the float64 sum is exact, which it is here: both are within 2^60 of each
    other or the smaller is below half an ulp of the larger)."""
    if model.interleave:  # halves of indices 0, 1 mod 4, then 2, 3 mod 4, chained
        half = replace(model, n=model.n // 2, interleave=False, c_placement="inside")
        pairs = pairs + [(0.0, 0.0)] * (model.n - len(pairs))
        s = published_block(half, c if model.c_placement == "inside" else 0.0,
                            [p for i, p in enumerate(pairs) if i % 4 < 2], man, emin)
        s = published_block(half, s, [p for i, p in enumerate(pairs) if i % 4 >= 2],
                            man, emin)
        return s if model.c_placement == "inside" else float(np.float32(c + s))
    if model.c_placement == "after":
        s = published_block(replace(model, c_placement="inside"), 0.0, pairs, man, emin)
        return float(np.float32(np.float64(c) + np.float64(s)))
    clamp = model.input_emin is not None
    terms = []  # (sign, integer significand, exponent of its unit in the last place, eta)
    if c != 0:
        s, m, e = _decode(c, 23, -126, True)  # FP32: the exponent field, min -126
        terms.append((s, m, e - 23, e))
    for x, y in pairs:
        if x == 0 or y == 0:
            continue
        sx, mx, ex = _decode(x, man, emin, clamp)
        sy, my, ey = _decode(y, man, emin, clamp)
        terms.append((sx * sy, mx * my, ex + ey - 2 * man, ex + ey))
    if not terms:
        return 0.0
    eta = max(t[3] for t in terms)
    if model.align_floor is not None:
        eta = max(eta, model.align_floor)
    lsb = eta - model.fraction_bits
    acc = sum(s * _shift(m, ulp - lsb) for s, m, ulp, _ in terms)  # sign-magnitude trunc
    if acc == 0:
        return 0.0
    # normalise and truncate to the accumulator's fraction bits (FP32 exponent range)
    mag, bits = abs(acc), model.output_fraction_bits
    e = max(mag.bit_length() - 1 + lsb, -126)
    mag = _shift(mag, lsb - (e - bits))  # truncated, in units of 2^(e - bits)
    value = mag * 2.0 ** (e - bits)
    return -value if acc < 0 else value


def published_dot(model: BlockFMA, a, b, man: int, emin: int) -> float:
    c = 0.0
    for k0 in range(0, len(a), model.n):
        c = published_block(model, c, list(zip(a[k0:k0 + model.n], b[k0:k0 + model.n])),
                            man, emin)
    return c


def _format_value(man: int, emin: int, exp_bits: int):
    """A strategy of finite values of the binary format (man, emin), exponents near 0
    (so that blocks mix normal and subnormal operands only in the FP8 and FP16 cases).

    One integer per value, split into (significand, exponent, sign), uniform over those
    triples as three draws would be, but with a third of the entropy: two lists of up
    to 67 such values stay within what every supported hypothesis release generates
    (three draws per value made older releases overrun and fail a health check)."""
    top = min(emin + 2 ** exp_bits - 3, 12)  # keep products well inside FP32's range
    low = max(emin - 1, -30)
    span = top - low + 1

    def build(i):
        i, m = divmod(i, 2**man)
        neg, e = divmod(i, span)
        e += low
        sign = -1.0 if neg else 1.0
        if e < emin:  # a subnormal
            return sign * m * 2.0 ** (emin - man)
        return sign * (2**man + m) * 2.0 ** (e - man)
    return st.integers(0, 2 * span * 2**man - 1).map(build)


EXP_BITS = {"V100-FP16": 5, "A100-FP16": 5, "A100-BF16": 8, "A100-TF32": 8,
            "H100-FP16": 5, "H100-BF16": 8, "H100-FP8": 4, "B200-FP8": 4}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FORMATS))
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_presets_match_an_integer_transcription_of_the_published_model(name, data):
    model = BlockFMA.preset(name)
    man, emin = FORMATS[name]
    value = _format_value(man, emin, EXP_BITS[name]) | st.just(0.0)
    k = data.draw(st.integers(1, 2 * model.n + 3))
    a = data.draw(st.lists(value, min_size=k, max_size=k))
    b = data.draw(st.lists(value, min_size=k, max_size=k))
    want = published_dot(model, a, b, man, emin)
    got = dot(a, b, model)
    assert got == np.float32(want), (got, want)
    assert np.float32(model.dot_reference(np.array(a), np.array(b))) == np.float32(want)


# -------------------------------------------------------------- vectorised vs plain
options = st.builds(
    lambda n, f, r, pe, emin, floor, ob: BlockFMA(n, f, r, product_exponent=pe,
                                                  input_emin=emin, align_floor=floor,
                                                  output_fraction_bits=ob),
    st.integers(1, 9), st.integers(3, 30), st.sampled_from(["toward_zero", "nearest_even"]),
    st.sampled_from(["unnormalised", "normalised"]), st.sampled_from([None, -14, -6, -126]),
    st.sampled_from([None, -20, -132]), st.sampled_from([23, 13, 10, 3]))
wide = st.builds(lambda m, e: float(np.float32(m * 2.0**e)), st.floats(-2, 2, width=32),
                 st.integers(-40, 30))
edge = st.sampled_from([0.0, -0.0, 1.0, -1.0, 2.0**-24, 3e38, -3e38, 2.0**-140, 1.5])


@settings(max_examples=40, deadline=None)
@given(options, st.lists(st.tuples(st.one_of(wide, edge), st.one_of(wide, edge)),
                         min_size=0, max_size=30))
def test_vectorised_path_matches_plain_reference_with_every_option(model, pairs):
    a = np.array([p[0] for p in pairs], np.float32)
    b = np.array([p[1] for p in pairs], np.float32)
    got = matmul(a[None, :], b[:, None], accumulate=model)[0, 0]
    want = np.float32(model.dot_reference(a, b))
    assert got.tobytes() == want.tobytes() or (np.isnan(got) and np.isnan(want)), (got, want)
