"""MX block quantisation against a slow per-block reference in exact arithmetic.

The reference below is written from OCP MX v1.0 sections 5 and 6.3 (and, for the Inf
policies, the behaviour of torchao and TransformerEngine): element values are
enumerated from each format's sign/exponent/mantissa layout with ``Fraction`` (not
from the codec under test), scale
exponents come from integer comparisons with powers of two, and elements round to the
nearest enumerated value with ties to the even code.
"""
from __future__ import annotations

import math
import struct
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from oracles import element_table, floor_log2, nearest_magnitude
from refimpl.scaling import (
    INT8,
    MXArray,
    mx_quantize,
    mx_scale_exponent,
)
from refimpl.scaling.mx_reference import quantize_block

# ----- independent element tables -------------------------------------------------------

#: name -> (exp_bits, man_bits, bias, largest finite value, emax)   (OCP MX v1.0 section 5.3)
LAYOUT = {
    "e4m3": (4, 3, 7, Fraction(448), 8),
    "e5m2": (5, 2, 15, Fraction(57344), 15),
    "e2m3": (2, 3, 1, Fraction(15, 2), 2),
    "e3m2": (3, 2, 3, Fraction(28), 4),
    "e2m1": (2, 1, 1, Fraction(6), 2),
}
ELEMENTS = list(LAYOUT) + ["int8"]
RULES = ["floor", "ceil", "even", "rceil"]


def magnitudes(name):
    """Sorted list of (value, magnitude code) of finite non-negative values."""
    if name == "int8":
        return [(Fraction(k, 64), k) for k in range(128)]
    e, m, bias, vmax, _ = LAYOUT[name]
    return element_table(e, m, bias, vmax)


TABLES = {name: magnitudes(name) for name in ELEMENTS}


def ref_encode(v: Fraction, negative: bool, name: str, mode: str = "nearest_even",
               r: int = 0, nbits: int = 8) -> int:
    """Round onto the enumerated values (saturating at the largest), in ``mode``;
    ``"stochastic"`` rounds away when floor(frac * 2**nbits) + r >= 2**nbits (P3109)."""
    mag = nearest_magnitude(abs(v), TABLES[name], mode, negative, random=r, random_bits=nbits)
    if name == "int8":
        k = -mag if negative else mag
        return k & 0xFF
    sign_bit = 1 << (LAYOUT[name][0] + LAYOUT[name][1])
    return mag | (sign_bit if negative else 0)


def ceil_log2(a: Fraction) -> int:
    k = floor_log2(a)
    return k if Fraction(2) ** k == a else k + 1


def emax_of(name):
    return 0 if name == "int8" else LAYOUT[name][4]


def max_of(name):
    return Fraction(127, 64) if name == "int8" else LAYOUT[name][3]


def mbits_of(name):
    return 6 if name == "int8" else LAYOUT[name][1]


def ref_exponent(amax: Fraction, name: str, rule: str) -> int:
    if rule == "floor":
        return floor_log2(amax) - emax_of(name)
    if rule == "ceil":
        return ceil_log2(amax) - emax_of(name)
    if rule == "even":
        # round the significand to mbits fraction bits, half to even, then floor
        k = floor_log2(amax)
        ulp = Fraction(2) ** (k - mbits_of(name))
        q, r = divmod(amax, ulp)
        q = int(q)
        if r > ulp / 2 or (r == ulp / 2 and q % 2 == 1):
            q += 1
        return floor_log2(q * ulp) - emax_of(name)
    # rceil: smallest e with amax <= max * 2**e
    e = -400
    while amax > max_of(name) * Fraction(2) ** e:
        e += 1
    return e


def ref_block(values, name, rule, inf_policy="nan", inf_exp=128, mode="nearest_even"):
    """(scale code, [element codes]) for one block of Python floats."""
    if any(math.isnan(v) for v in values):
        return 0xFF, [0] * len(values)
    has_inf = any(math.isinf(v) for v in values)
    if has_inf and inf_policy == "nan":
        return 0xFF, [0] * len(values)
    finite = [Fraction(v) for v in values if not math.isinf(v)]
    amax = max((abs(f) for f in finite), default=Fraction(0))
    if has_inf and inf_policy == "exponent":
        amax = max(amax, Fraction(2) ** inf_exp)
    if has_inf and inf_policy == "max":
        e = 127
    elif amax == 0:
        e = -127
    else:
        e = max(-127, min(127, ref_exponent(amax, name, rule)))
    codes = []
    for v in values:
        neg = math.copysign(1.0, v) < 0
        if math.isinf(v):
            codes.append(ref_encode(max_of(name) * 2, neg, name))
        else:
            codes.append(ref_encode(Fraction(v) / Fraction(2) ** e, neg, name, mode))
    return e + 127, codes


# ----- strategies: tensors with drawn special blocks ------------------------------------

F32 = np.float32


def f32_from_bits(b: int) -> float:
    return struct.unpack("<f", struct.pack("<I", b))[0]


@st.composite
def special_block(draw, bs):
    kind = draw(
        st.sampled_from(
            ["random", "random", "zero", "pow2", "below_pow2", "outlier", "subnormal",
             "nan", "inf", "wide"]
        )
    )
    rnd = draw(
        st.lists(
            st.floats(-4.0, 4.0, width=32, allow_subnormal=False), min_size=bs, max_size=bs
        )
    )
    k = draw(st.integers(-20, 20))
    vals = [v * 2.0 ** k for v in rnd]
    pos = draw(st.integers(0, bs - 1))
    if kind == "zero":
        vals = [draw(st.sampled_from([0.0, -0.0])) for _ in range(bs)]
    elif kind == "pow2":
        vals = [max(-1.0, min(1.0, v)) * 2.0 ** k for v in rnd]
        vals[pos] = draw(st.sampled_from([1.0, -1.0])) * 2.0 ** k
    elif kind == "below_pow2":
        # one ulp (float32) below a power of two, e.g. 7.9999995 = 0x40FFFFFF
        vals = [max(-1.0, min(1.0, v)) * 2.0 ** k for v in rnd]
        vals[pos] = float(np.nextafter(F32(2.0 ** k), F32(0)))
    elif kind == "outlier":
        vals = [v * 2.0 ** -30 for v in rnd]
        vals[pos] = draw(st.floats(1e3, 2.0 ** 100, width=32))
    elif kind == "subnormal":
        vals = [f32_from_bits(draw(st.integers(0, 0x007FFFFF))) * draw(st.sampled_from([1, -1]))
                for _ in range(bs)]
    elif kind == "nan":
        vals[pos] = float("nan")
    elif kind == "inf":
        vals[pos] = draw(st.sampled_from([math.inf, -math.inf]))
    elif kind == "wide":
        vals = [draw(st.floats(width=32, allow_nan=False, allow_infinity=False))
                for _ in range(bs)]
    return [float(F32(v)) for v in vals]


@st.composite
def mx_tensor(draw, bs=32, max_rows=3, max_blocks=3):
    rows = draw(st.integers(1, max_rows))
    nblk = draw(st.integers(1, max_blocks))
    data = [[x for _ in range(nblk) for x in draw(special_block(bs))] for _ in range(rows)]
    return np.array(data, dtype=np.float32)


def check_against_reference(x, name, rule, inf_block="nan", bs=32, mode="nearest_even"):
    q = mx_quantize(x, name, block_size=bs, scale_rule=rule, inf_block=inf_block,
                    rounding=mode)
    rows, n = x.shape
    for r in range(rows):
        for j in range(n // bs):
            block = [float(v) for v in x[r, j * bs:(j + 1) * bs]]
            scale, codes = ref_block(block, name, rule, inf_block, mode=mode)
            got_codes = [int(c) for c in q.codes[r, j * bs:(j + 1) * bs]]
            assert int(q.scales[r, j]) == scale, (r, j, block)
            assert got_codes == codes, (r, j, block)
    return q


@pytest.mark.slow
@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("name", ELEMENTS)
@settings(max_examples=12)
@given(x=mx_tensor())
def test_matches_fraction_reference(name, rule, x):
    check_against_reference(x, name, rule)


@pytest.mark.slow
@pytest.mark.parametrize("name", ELEMENTS)
@settings(max_examples=8)
@given(x=mx_tensor(max_rows=2, max_blocks=2), rule=st.sampled_from(RULES),
       policy=st.sampled_from(["nan", "max", "exponent"]),
       mode=st.sampled_from(["nearest_even", "nearest_away", "toward_zero", "toward_negative"]))
def test_matches_plain_package_reference(name, x, rule, policy, mode):
    """The vectorised quantiser against the package's own plain per-block definition,
    and that definition against the independent Fraction reference of this file."""
    q = mx_quantize(x, name, scale_rule=rule, inf_block=policy, rounding=mode)
    for r in range(x.shape[0]):
        for j in range(x.shape[1] // 32):
            block = x[r, 32 * j:32 * (j + 1)].tolist()
            scale, codes = quantize_block(block, name, scale_rule=rule, rounding=mode,
                                          inf_block=policy)
            assert (scale, codes) == ref_block(block, name, rule, policy, mode=mode)
            assert int(q.scales[r, j]) == scale
            assert q.codes[r, 32 * j:32 * (j + 1)].tolist() == codes


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["nearest_away", "toward_zero", "toward_positive",
                                  "toward_negative"])
@pytest.mark.parametrize("name", ELEMENTS)
@settings(max_examples=6)
@given(x=mx_tensor(max_rows=2, max_blocks=3), dtype=st.sampled_from([np.float32, np.float64]))
def test_rounding_modes_match_reference(name, mode, x, dtype):
    # the outlier blocks put tiny elements far below float32's range after scaling: the
    # directed modes must still round them away from zero to the smallest step
    check_against_reference(x.astype(dtype), name, "floor", mode=mode)


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["nan", "max", "exponent"])
@pytest.mark.parametrize("name", ["e4m3", "e2m1", "int8"])
@settings(max_examples=10)
@given(x=mx_tensor(max_rows=2, max_blocks=2), rule=st.sampled_from(RULES))
def test_inf_block_policies_match_reference(policy, name, x, rule):
    check_against_reference(x, name, rule, inf_block=policy)


# ----- pinned sharp cases ---------------------------------------------------------------


def block_with(first, fill=1.0, bs=32, dtype=np.float32):
    x = np.full(bs, fill, dtype=dtype)
    x[: len(first)] = first
    return x


@pytest.mark.parametrize(
    "rule, scale_code, decoded",
    [
        # FLOOR: 2**(floor(log2 960) - 8) = 2**1; 957/2 and 960/2 saturate to 448 -> 896
        ("floor", 127 + 1, [896.0, 896.0]),
        # RCEIL: smallest 2**e with 960 / 2**e <= 448 is 2**2; 957/4 = 239.25 -> 240 -> 960
        ("rceil", 127 + 2, [960.0, 960.0]),
    ],
)
def test_pinned_957_960_e4m3(rule, scale_code, decoded):
    x = block_with([957.0, 960.0])
    q = mx_quantize(x, "e4m3", scale_rule=rule)
    assert int(q.scales[0]) == scale_code
    assert q.dequantize()[:2].tolist() == decoded


def test_pinned_exponent_bits_not_log2_for_7_9999995():
    v = f32_from_bits(0x40FFFFFF)
    assert v == pytest.approx(7.9999995, abs=1e-7)
    assert np.log2(F32(v)) == 3.0  # the float log2 trap the rule must avoid
    q = mx_quantize(block_with([v], 0.5), "e2m1", scale_rule="floor")
    assert int(q.scales[0]) == 127  # 2**(2 - 2) = 2**0
    assert int(q.codes[0]) == 0x7  # 7.9999995 saturates to 6.0


@pytest.mark.parametrize(
    "amax, rule, exponent",
    [
        (7.0, "floor", 0),  # floor(log2 7) = 2, minus emax 2
        (7.0, "even", 1),  # 1.75 * 4 rounds (1 mantissa bit, tie to even) to 2 * 4
        (6.5, "even", 0),  # 1.625 * 4 rounds to 1.5 * 4
        (4.0, "ceil", 0),  # a power of two: ceil = floor
        (4.5, "ceil", 1),
        (6.0, "rceil", 0),  # 6 / 2**0 <= 6
        (6.5, "rceil", 1),
    ],
)
def test_pinned_e2m1_scale_rules(amax, rule, exponent):
    q = mx_quantize(block_with([amax], 0.0), "e2m1", scale_rule=rule)
    assert int(q.scales[0]) == 127 + exponent


def test_pinned_special_blocks():
    bs = 32
    zeros = np.zeros(bs, np.float32)
    zeros[3] = -0.0
    q = mx_quantize(zeros, "e4m3")
    assert int(q.scales[0]) == 0x00
    assert int(q.codes[3]) == 0x80 and int(q.codes[0]) == 0x00
    nan_block = block_with([np.nan])
    q = mx_quantize(nan_block, "e2m1")
    assert int(q.scales[0]) == 0xFF and not q.codes.any()
    assert np.isnan(q.dequantize()).all()
    inf_block = block_with([np.inf])
    assert int(mx_quantize(inf_block, "e4m3").scales[0]) == 0xFF
    assert int(mx_quantize(inf_block, "e4m3", inf_block="max").scales[0]) == 0xFE
    # torchao's FLOOR on Inf: exponent field 255 -> 128 - 8 = 120 -> code 0xF7
    q = mx_quantize(inf_block, "e4m3", inf_block="exponent")
    assert int(q.scales[0]) == 0xF7 and int(q.codes[0]) == 0x7E


def test_scale_clamps_to_e8m0_range():
    tiny = block_with([2.0 ** -149], 0.0)  # floor: -149 - 8 = -157 -> clamp -127
    assert int(mx_quantize(tiny, "e4m3").scales[0]) == 0
    huge = block_with([1e300], 0.0, dtype=np.float64)  # 996 - 8 -> clamp 127
    q = mx_quantize(huge, "e4m3")
    assert int(q.scales[0]) == 254 and int(q.codes[0]) == 0x7E


def test_float64_input_rounds_once():
    # 1.0625 + 2**-40 is above the E4M3 midpoint 1.0625 between 1.0 and 1.125; via float32
    # it would be the midpoint itself and round to 1.0
    x = block_with([1.0625 + 2.0 ** -40, 1.5], 0.0, dtype=np.float64)
    q = mx_quantize(x, "e4m3")
    assert int(q.scales[0]) == 127 - 8  # amax 1.5: floor(log2) 0, minus emax 8
    assert q.dequantize(np.float64)[0] == 1.125


def test_subnormal_elements_e4m3():
    # scale 2**0 (amax 256..511 -> floor 8 - 8); elements land on E4M3 subnormals
    x = block_with([300.0, 2.0 ** -10, 1.5 * 2.0 ** -9, 2.5 * 2.0 ** -9, 3.5 * 2.0 ** -9], 0.0)
    q = mx_quantize(x, "e4m3")
    assert int(q.scales[0]) == 127
    assert [int(c) for c in q.codes[1:5]] == [0x00, 0x02, 0x02, 0x04]


def test_int8_symmetric_and_decode():
    x = block_with([-2.0, 1.0, 0.5 / 64, 1.5 / 64], 0.0)
    q = mx_quantize(x, "int8")
    # amax 2: floor(log2) = 1, emax 0 -> scale 2; -2/2 = -1 -> k = -64
    assert int(q.scales[0]) == 128
    # -2/2 -> k = -64; 1/2 -> 32; (0.5/64)/2 = 0.25/64 -> 0; (1.5/64)/2 = 0.75/64 -> 1
    assert q.codes.view(np.int8)[:4].tolist() == [-64, 32, 0, 1]
    rebuilt = MXArray(np.array([0x80] + [0] * 31, np.uint8), np.array([127], np.uint8), INT8)
    assert rebuilt.dequantize()[0] == -2.0


# ----- layout, padding, axis, round trips -----------------------------------------------


def test_axis_and_padding():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((40, 3)).astype(np.float32)
    with pytest.raises(ValueError, match="multiple of block_size"):
        mx_quantize(x, "e4m3", axis=0)
    q = mx_quantize(x, "e4m3", axis=0, pad=True)
    assert q.codes.shape == (40, 3) and q.scales.shape == (2, 3)
    # same as quantising the transposed, explicitly zero-padded tensor
    padded = np.concatenate([x.T, np.zeros((3, 24), np.float32)], axis=1)
    ref = mx_quantize(padded, "e4m3", axis=-1)
    assert np.array_equal(q.codes.T, ref.codes[:, :40])
    assert np.array_equal(q.scales.T, ref.scales)
    assert np.array_equal(q.dequantize().T, ref.dequantize()[:, :40])


@pytest.mark.slow
@pytest.mark.parametrize("name", ELEMENTS)
@settings(max_examples=15)
@given(x=mx_tensor(max_rows=2, max_blocks=2))
@example(x=np.array([[0.0] * 31 + [3.3895316e38]], np.float32))  # MXINT8 clips at 2**127
def test_round_trip_within_block_bound(name, x):
    """|x - dq| <= half a step of the element format at its largest binade, times the
    scale. RCEIL picks X with amax / X <= max, so nothing clips, except where that X
    would exceed E8M0's largest scale 2**127 (MXINT8 only: 127/64 * 2**127 is below
    float32's largest value): there an element beyond max * X comes back as +-max * X."""
    finite_rows = np.isfinite(x).all(axis=1)
    x = x[finite_rows]
    if x.size == 0:
        return
    q = mx_quantize(x, name, scale_rule="rceil")
    dq = q.dequantize(np.float64)
    mbits = mbits_of(name)
    e = q.scales.astype(np.int64) - 127
    # spacing of the element grid at its top binade is 2**(emax - mbits)
    bound = np.ldexp(1.0, e + emax_of(name) - mbits - 1)
    x64 = x.astype(np.float64).reshape(x.shape[0], -1, 32)
    err = np.abs(x64 - dq.reshape(x64.shape))
    top = np.ldexp(float(max_of(name)), e)[..., None]        # max * X per block
    clipped = np.abs(x64) > top
    assert not (clipped & (e[..., None] < 127)).any()       # only at the largest scale
    assert (dq.reshape(x64.shape)[clipped] == np.copysign(top, x64)[clipped]).all()
    assert (err[~clipped] <= np.broadcast_to(bound[..., None], err.shape)[~clipped]).all()


@pytest.mark.parametrize("rule", ["floor", "rceil"])
@pytest.mark.parametrize("name", ELEMENTS)
def test_exact_when_representable(name, rule):
    """Values that are P * X for some block scale come back exactly. One exception, kept
    as its own pinned test: under FLOOR an E4M3 block whose amax is 1.875 * 2**k (480 * X'
    for the scale FLOOR picks) clips, because E4M3 has no 480."""
    rng = np.random.default_rng(7)
    codes = rng.integers(0, 1 << (4 if name == "e2m1" else 6 if name in ("e2m3", "e3m2") else 8),
                         size=(4, 64)).astype(np.uint8)
    if name == "e4m3":
        codes[(codes & 0x7F) == 0x7F] = 0  # no NaN codes
    if name == "e5m2":
        codes[(codes & 0x7C) == 0x7C] = 0  # no Inf/NaN codes
    if name == "int8":
        codes[codes == 0x80] = 0  # -2.0 is outside the symmetric range
    scales = np.array([[120, 127], [130, 100], [127, 127], [140, 90]], np.uint8)
    if name == "e4m3" and rule == "floor":
        codes[(codes & 0x7) == 0x7] -= 1  # no significand 1.875 (480 * X' would clip)
    src = MXArray(codes, scales, name)
    x = src.dequantize(np.float64)
    q = mx_quantize(x, name, scale_rule=rule)
    assert np.array_equal(q.dequantize(np.float64), x)


def test_floor_clips_e4m3_top_binade():
    # 240 * 2**1 = 480 = 1.875 * 2**8: FLOOR gives 2**(8 - 8) = 1 and 480 saturates to 448
    x = block_with([480.0], 0.0)
    q = mx_quantize(x, "e4m3")
    assert int(q.scales[0]) == 127 and q.dequantize()[0] == 448.0
    assert mx_quantize(x, "e4m3", scale_rule="rceil").dequantize()[0] == 480.0


@pytest.mark.parametrize("name", ["e4m3", "e5m2", "e2m3", "e3m2", "e2m1"])
def test_rceil_equals_float32_reciprocal_form(name):
    """TransformerEngine's RCEIL: float32 ``amax * (1/max)`` rounded up to a power of two
    (exponent bits plus one when any mantissa bit is set), emulated in float32 here."""
    fmax = float(max_of(name))
    rng = np.random.default_rng(9)
    random = rng.integers(0x00800000, 0x7F7FFFFF, 200_000, dtype=np.uint32).view(F32)
    with np.errstate(over="ignore"):
        edges = np.array([fmax * 2.0 ** k for k in range(-118, 120)], F32)
    edges = edges[np.isfinite(edges)]
    amax = np.concatenate([random, edges, np.nextafter(edges, F32(np.inf)),
                           np.nextafter(edges, F32(0))])
    with np.errstate(over="ignore"):
        prod = amax * (F32(1) / F32(fmax))
    finite = np.isfinite(prod)
    m, e = np.frexp(prod[finite])
    te = np.clip(e.astype(np.int64) - 1 + (m != 0.5), -127, 127)
    _, ours = mx_scale_exponent(amax[finite], name, scale_rule="rceil")
    assert np.array_equal(ours, te)


def test_scale_exponent_function():
    codes, e = mx_scale_exponent(np.array([0.0, np.nan, 1.0, 448.0, 449.0], np.float32), "e4m3",
                                 scale_rule="rceil")
    assert codes.tolist() == [0, 255, 127 - 8, 127, 128]


def test_bad_inputs():
    x = np.ones(32, np.float32)
    with pytest.raises(ValueError, match="scale_rule"):
        mx_quantize(x, "e4m3", scale_rule="nearest")
    with pytest.raises(ValueError, match="not an MX element"):
        mx_quantize(x, "bf16")
    with pytest.raises(ValueError, match="inf_block"):
        mx_quantize(x, "e4m3", inf_block="zero")
    with pytest.raises(ValueError, match="axis"):
        mx_quantize(x, "e4m3", axis=1)
    with pytest.raises(ValueError, match="bits above"):
        MXArray(np.full(32, 0x10, np.uint8), np.array([127], np.uint8), "e2m1")
    with pytest.raises(ValueError, match="scales"):
        MXArray(np.zeros(32, np.uint8), np.array([127, 127], np.uint8), "e2m1")


@settings(max_examples=10)
@given(x=mx_tensor(max_rows=2, max_blocks=2), order=st.sampled_from(["low_first", "high_first"]),
       dense_fp6=st.booleans())
def test_packed_round_trip(x, order, dense_fp6):
    for name in ("e2m1", "e3m2", "e4m3", "int8"):
        q = mx_quantize(x, name)
        dense = dense_fp6 and name == "e3m2"  # the dense layout is FP6's
        packed = q.packed(order=order, dense=dense)
        expected_bytes = {"e2m1": (q.codes.size + 1) // 2,
                          "e3m2": (q.codes.size * 3 + 3) // 4 if dense else q.codes.size}
        assert packed.size == expected_bytes.get(name, q.codes.size)
        back = MXArray.from_packed(packed, q.scales, name, q.shape, order=order, dense=dense)
        assert np.array_equal(back.codes, q.codes)
        assert np.array_equal(back.dequantize(), q.dequantize(), equal_nan=True)


def test_fp4_packing_low_nibble_first():
    x = block_with([1.0, -6.0], 0.0)
    q = mx_quantize(x, "e2m1")
    assert int(q.scales[0]) == 127  # amax 6: floor(log2 6) = 2, minus emax 2
    assert int(q.packed()[0]) == 0xF2  # [1.0, -6.0] -> codes 0x2, 0xF


@pytest.mark.slow
@pytest.mark.parametrize("name", ["e4m3", "e2m1", "e3m2"])
@settings(max_examples=8)
@given(x=mx_tensor(max_rows=1, max_blocks=2), data=st.data())
def test_stochastic_rounding_matches_reference_through_axis_and_padding(name, x, data):
    x = x[:, :-5].T.copy()  # blocks along axis 0, last block padded
    x[~np.isfinite(x)] = 1.0
    bits = np.array(data.draw(st.lists(st.integers(0, 255), min_size=x.size, max_size=x.size)),
                    np.uint8).reshape(x.shape)
    q = mx_quantize(x, name, axis=0, pad=True, rounding="stochastic", random_bits=bits)
    n = x.shape[0]
    for j in range(-(-n // 32)):
        block = [float(v) for v in x[32 * j:32 * (j + 1), 0]]
        amax = max(abs(Fraction(v)) for v in block)
        e = -127 if amax == 0 else max(-127, min(127, floor_log2(amax) - emax_of(name)))
        assert int(q.scales[j, 0]) == e + 127
        for i, v in enumerate(block):
            want = ref_encode(Fraction(v) / Fraction(2) ** e, math.copysign(1, v) < 0, name,
                              "stochastic", int(bits[32 * j + i, 0]))
            assert int(q.codes[32 * j + i, 0]) == want


def test_stochastic_rounding_reproducible():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 64)).astype(np.float32)
    bits = rng.integers(0, 256, size=x.shape).astype(np.uint8)
    a = mx_quantize(x, "e2m1", rounding="stochastic", random_bits=bits)
    b = mx_quantize(x, "e2m1", rounding="stochastic", random_bits=bits)
    assert np.array_equal(a.codes, b.codes)
    # each element is one of its two neighbours (differs from RNE by at most one code step)
    rne = mx_quantize(x, "e2m1")
    assert np.array_equal(a.scales, rne.scales)
    assert (np.abs(a.dequantize() - rne.dequantize()) <= np.ldexp(1.0, rne.scales.astype(int) - 127 + 1)
            .repeat(32, axis=1)).all()


@pytest.mark.parametrize("name", ["e4m3", "e3m2", "e2m3", "e2m1"])
def test_rceil_exact_where_float32_product_underflows(name):
    """Just above max * 2**-127 the float32 product amax * (1/max) is subnormal and rounds
    onto 2**-127; the exact rule still needs 2**-126 (amax / 2**-127 > max)."""
    fmax = Fraction(float(max_of(name)))
    amax = np.nextafter(F32(float(fmax) * 2.0 ** -127), F32(np.inf))
    assert Fraction(float(amax)) > fmax * Fraction(2) ** -127
    assert Fraction(float(amax)) <= fmax * Fraction(2) ** -126
    _, e = mx_scale_exponent(np.array([amax]), name, scale_rule="rceil")
    assert int(e[0]) == -126


@pytest.mark.parametrize("order", ["<", ">"])
def test_byte_swapped_input_is_read_by_value(order):
    # Inf counts as 2**128 for float32 (0xF7 for E4M3, torchao's FLOOR value)
    codes, _ = mx_scale_exponent(np.array([np.inf, 448.0], order + "f4"), "e4m3",
                                 inf_block="exponent")
    assert codes.tolist() == [0xF7, 127]
    x = np.zeros(32, order + "f4")
    x[:3] = [448.0, -3.0, 0.5]  # scale 2**0: elements exact (0x7E, 0xC4, 0x30)
    q = mx_quantize(x, "e4m3")
    assert int(q.scales[0]) == 127 and q.codes[:3].tolist() == [0x7E, 0xC4, 0x30]


def test_user_format_borrowing_an_element_name_is_refused():
    """A Format named 'e2m1' with another bias has other values (its 0x7 is 3.0, not
    6.0); it once passed the name check and dequantised with the registered table."""
    from refimpl.formats import Format

    impostor = Format("e2m1", 2, 1, bias=2, has_inf=False, nan="none")
    assert impostor.max == 3.0  # 1.5 * 2**(3 - 2)
    x = np.full(32, 3.0, F32)
    with pytest.raises(ValueError, match="differs"):
        mx_quantize(x, impostor)
    with pytest.raises(ValueError, match="differs"):
        MXArray(np.zeros(32, np.uint8), np.zeros(1, np.uint8), impostor)
    # the registered element: 3.0 = 1.5 * 2**1 is exact, scale 2**(1 - 2)
    q = mx_quantize(x, "e2m1")
    assert int(q.scales[0]) == 126 and q.dequantize().tolist() == [3.0] * 32


def test_pad_flag_and_packed_length_are_checked():
    x = np.ones(33, F32)
    with pytest.raises(TypeError, match="pad"):
        mx_quantize(x, "e2m1", pad="no")  # a truthy string once padded
    q = mx_quantize(np.ones((2, 32), F32), "e2m1")
    packed = q.packed()
    assert packed.size == 32
    with pytest.raises(ValueError, match="packed"):
        MXArray.from_packed(packed, q.scales, "e2m1", (2, 31))  # 62 codes need 31 bytes
    q6 = mx_quantize(np.ones((1, 32), F32), "e3m2")
    dense = q6.packed(dense=True)
    assert dense.size == 24  # four FP6 codes in three bytes
    with pytest.raises(ValueError, match="packed"):
        MXArray.from_packed(np.concatenate([dense, dense[:3]]), q6.scales, "e3m2", (1, 32),
                            dense=True)
    r = MXArray.from_packed(dense, q6.scales, "e3m2", (1, 32), dense=True)
    assert np.array_equal(r.codes, q6.codes)
