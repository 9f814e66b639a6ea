"""Hopper and Blackwell ``mma.sync.m16n8k32`` with FP8 operands: the presets H100-E4M3-MMA,
H100-E5M2-MMA (H200 is an alias), B200-E4M3 and B200-E5M2, pinned with probes whose
expected values are derived here by hand, in exact rational arithmetic.

The model, as the published real-GPU outputs of Khattak and Mikaitis fix it (their
repository's ``model_validation/<GPU>/<E4M3|E5M2>``, 5000 dot products per GPU, format
and accumulator, taken with ``model_validation/CUDA/mma_fp8_output_fp32.cu`` and
``_fp16.cu``; their paper arXiv:2512.07004 and MATLAB models ``H100TC.m``, ``B200TC.m``,
``models/tools/GEMM.m``):

- every product a_k b_k is exact, with the exponent e(a_k) + e(b_k) (a subnormal reads
  its format's minimum exponent, E4M3 -6, E5M2 -14);
- a block FMA aligns its non-zero terms to the largest exponent eta and truncates each
  toward zero to a multiple of 2^(eta - F), adds them exactly and rounds the sum into the
  accumulator;
- H100/H200, FP32 accumulator: one block of all 32 products, F = 13, C a term of the
  block (its FP32 exponent), the sum truncated to 13 fraction bits (E8M13);
- H100/H200 with an FP16 accumulator, and B200 with either: two interleaved halves of
  16 products, first k = 0, 1, 4, 5, ... (0 or 1 modulo 4), then k = 2, 3, 6, 7, ...;
  F = 25; the first half from +0, its sum rounded into the accumulator (FP16: to nearest
  even; FP32: toward zero) and taken as a term of the second half, whose sum is rounded
  the same way; then C is added with one round to nearest even.
"""
from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from refimpl import formats
from refimpl.matmul import PRESETS, BlockFMA, matmul

Q = Fraction
H100_MMA = ("H100-E4M3-MMA", "H100-E5M2-MMA", "H200-E4M3-MMA", "H200-E5M2-MMA")
B200_MMA = ("B200-E4M3", "B200-E5M2")
EMIN = {"e4m3": -6, "e5m2": -14}


def fmt_of(name: str) -> str:
    return "e4m3" if "E4M3" in name else "e5m2"


def run(name: str, a, b, c=0.0, out: str = "fp32", k: int = 32) -> Fraction:
    """One dot product of length ``k`` (the operands padded with zeros) through preset
    ``name``; the operands are checked to be values of the preset's format."""
    a = np.array(list(a) + [0.0] * (k - len(a)), np.float64)
    b = np.array(list(b) + [0.0] * (k - len(b)), np.float64)
    for x in (a, b):
        assert np.array_equal(np.asarray(formats.round_to(x, fmt_of(name)), np.float64), x)
    cc = np.array([[c]], np.float32 if out == "fp32" else np.float16)
    d = matmul(a[None, :].astype(np.float32), b[:, None].astype(np.float32), cc,
               accumulate=name, out_format=out)[0, 0]
    return Q(float(d))


def placed(pairs: dict, k: int = 32) -> tuple[list, list]:
    """Operands with the products ``{index: (a, b)}`` and zeros elsewhere."""
    a, b = [0.0] * k, [0.0] * k
    for i, (x, y) in pairs.items():
        a[i], b[i] = x, y
    return a, b


# ------------------------------------------------------------ rounding, by hand


def _exponent(x: Fraction) -> int:
    """floor(log2 |x|) of a non-zero rational."""
    m = abs(x)
    e = m.numerator.bit_length() - m.denominator.bit_length()
    return e - 1 if Q(2) ** e > m else e


def _round(x: Fraction, bits: int, emin: int, nearest: bool) -> Fraction:
    """x rounded to ``bits`` fraction bits, spacing 2^(emin - bits) below 2^emin: to
    nearest even, or toward zero."""
    if x == 0:
        return Q(0)
    e = max(_exponent(x), emin)
    unit = Q(2) ** (e - bits)
    q = abs(x) / unit
    n = q.numerator // q.denominator
    if nearest and (q - n > Q(1, 2) or (q - n == Q(1, 2) and n % 2)):
        n += 1
    return (1 if x > 0 else -1) * n * unit


def rn16(x: Fraction) -> Fraction:
    return _round(x, 10, -14, True)


def rz32(x: Fraction) -> Fraction:
    return _round(x, 23, -126, False)


def ulps16(x: Fraction, y: Fraction) -> Fraction:
    """|x - y| in FP16 units in the last place of y."""
    return abs(x - y) / Q(2) ** (max(_exponent(y), -14) - 10)


# ------------------------------------------------------------ FP16: rounding inside


#: products 1 * 2 = 2 (k = 0), 2^-5 * 2^-5 = 2^-10 (k = 1): the first half; 2^-5 * 2^-6 =
#: 2^-11 (k = 2): the second half. FP8 values of both formats.
DOUBLE_TIE = {0: (1.0, 2.0), 1: (2.0**-5, 2.0**-5), 2: (2.0**-5, 2.0**-6)}


@pytest.mark.parametrize("name", H100_MMA + B200_MMA)
@pytest.mark.parametrize("c,ulps", [(0.0, 1), (-1.0, 2), (-1.5, 3)])
def test_fp16_accumulator_rounds_each_half(name, c, ulps):
    # First half: 2 (exponent 0 + 1 = 1) and 2^-10; eta = 1, grid 2^(1 - 25) = 2^-24 keeps
    # both: 2 + 2^-10, half an FP16 ulp (2^-9 at 2) above 2, a tie: even, d1 = 2.
    # Second half: d1 = 2 and 2^-11; eta = 1, exact 2 + 2^-11, a quarter ulp: d2 = 2.
    # C added with one round to nearest: d = RN16(2 + c) = 2, 1, 0.5 (exact).
    # One rounding of the exact sum 2 + 3 * 2^-11 + c instead: c = 0: 0.75 ulp at 2 rounds
    # up, 2 + 2^-9 (1 ulp away); c = -1: 1 + 1.5 * 2^-10, a tie, even: 1 + 2^-9 (2 ulps);
    # c = -1.5: 0.5 + 3 * 2^-11 is an FP16 value (ulp 2^-11 at 0.5): 3 ulps.
    a, b = placed(DOUBLE_TIE)
    d1 = rn16(Q(2) + Q(1, 2**10))
    d2 = rn16(d1 + Q(1, 2**11))
    want = rn16(d2 + Q(c))
    assert (d1, d2, want) == (2, 2, 2 + Q(c))
    once = rn16(Q(2) + Q(3, 2**11) + Q(c))
    assert ulps16(want, once) == ulps
    assert run(name, a, b, c, out="fp16") == want
    # the wgmma model (F = 13, C inside one block of 32, one rounding into FP16): every
    # term is a multiple of 2^(1 - 13), so the sum is exact and rounded once
    assert run(f"H100-{fmt_of(name).upper()}", a, b, c, out="fp16") == once


@pytest.mark.parametrize("name", H100_MMA + B200_MMA)
def test_the_halves_are_indices_0_1_then_2_3_modulo_4(name):
    # The same three products with 2^-11 moved to k = 0 (first half) and 2, 2^-10 to
    # k = 2, 3 (second half): d1 = 2^-11 (an FP16 value); the second half sums d1, 2 and
    # 2^-10 exactly (grid 2^-24): 2 + 3 * 2^-11, 0.75 ulp above 2: d2 = 2 + 2^-9.
    moved = {0: DOUBLE_TIE[2], 2: DOUBLE_TIE[0], 3: DOUBLE_TIE[1]}
    assert run(name, *placed(moved), out="fp16") == rn16(2 + Q(3, 2**11)) == 2 + Q(1, 2**9)
    # k = 4, 5 belong to the first half with k = 0, 1; k = 6 to the second: 2
    later = {4: DOUBLE_TIE[0], 5: DOUBLE_TIE[1], 6: DOUBLE_TIE[2]}
    assert run(name, *placed(later), out="fp16") == 2
    # k = 1 and 2 swapped: 2 and 2^-11 first (2 + 2^-11 rounds to 2), then 2 + 2^-10: a
    # tie, even: 2
    swapped = {0: DOUBLE_TIE[0], 1: DOUBLE_TIE[2], 2: DOUBLE_TIE[1]}
    assert run(name, *placed(swapped), out="fp16") == 2


#: 16 * 16 = 256 at k = 0 (exponent 8) and 2^-8 * 2^-9 = 2^-17 at k = 1 (exponent -12 in
#: E4M3, whose subnormals read -6; -17 in E5M2), and -256 at k = ``where``
def cancel(where: int) -> tuple[list, list]:
    return placed({0: (16.0, 16.0), 1: (2.0**-8, 2.0**-9), where: (-16.0, 16.0)})


@pytest.mark.parametrize("name", H100_MMA + B200_MMA)
def test_fp16_cancellation_after_a_rounded_half(name):
    # -256 at k = 31 (3 modulo 4): the first half, 256 + 2^-17 (grid 2^(8 - 25) keeps it),
    # rounds to 256 in FP16 (ulp 0.25); the second half 256 - 256 = 0; C = 0: +0. The exact
    # sum 2^-17 is an FP16 subnormal (a multiple of 2^-24): one rounding gives 2^-17.
    # -256 at k = 4 (first half): 256 + 2^-17 - 256 = 2^-17 exactly, then 2^-17.
    assert run(name, *cancel(31), out="fp16") == 0
    assert run(name, *cancel(4), out="fp16") == Q(1, 2**17)


# ------------------------------------------------------------ FP32: F and the halves


@pytest.mark.parametrize("name", H100_MMA + B200_MMA)
def test_fp32_accumulator_f13_on_hopper_f25_on_blackwell(name):
    # products 1 * 2 = 2 (exponent 1, the largest) and 2^-9 * 2^-5 = 2^-14 (exponent -11
    # in E4M3, where 2^-9 is subnormal, -14 in E5M2). H100 (F = 13): grid 2^-12 drops
    # 2^-14: 2. B200 (F = 25, both in the first half): grid 2^-24 keeps it, and 2 + 2^-14
    # is an FP32 value (truncation exact); the empty second half and C = 0 keep it.
    got = run(name, *placed({0: (1.0, 2.0), 1: (2.0**-9, 2.0**-5)}))
    assert rz32(2 + Q(1, 2**14)) == 2 + Q(1, 2**14)
    assert got == (2 if name.startswith("H") else 2 + Q(1, 2**14))


@pytest.mark.parametrize("name", H100_MMA + B200_MMA)
def test_fp32_cancellation(name):
    # B200: -256 at k = 31: first half 256 + 2^-17 (kept on the grid 2^-17) truncated into
    # FP32 (ulp 2^-15 at 256): 256; second half 0; RN(0 + C = 0) = +0. At k = 4: 2^-17.
    # (One block of 32 with F = 25 would keep 2^-17 both times.) H100, one block, F = 13:
    # grid 2^(8 - 13) = 2^-5 drops 2^-17 both times: 0.
    blackwell = name.startswith("B")
    assert run(name, *cancel(31)) == 0
    assert run(name, *cancel(4)) == (Q(1, 2**17) if blackwell else 0)


@pytest.mark.parametrize("name", H100_MMA + B200_MMA)
def test_c_inside_truncated_on_hopper_after_on_blackwell(name):
    # no products, C = 1 + 2^-20. H100: C is the block's only term, truncated to 13
    # fraction bits: 1. B200: the products' sum +0, then RN(C + 0) = C.
    got = run(name, [], [], 1 + 2.0**-20)
    assert got == (1 if name.startswith("H") else 1 + Q(1, 2**20))
    # B200: the previous test's products, sum 2 + 2^-14 (an FP32 value), then C = 2^-23 +
    # 2^-24 = 0.75 ulp (2^-22 at 2) added with round to nearest: up, 2 + 2^-14 + 2^-22
    # (C inside with truncation would give 2 + 2^-14)
    if name.startswith("B"):
        a, b = placed({0: (1.0, 2.0), 1: (2.0**-9, 2.0**-5)})
        c = 2.0**-23 + 2.0**-24
        assert run(name, a, b, c) == 2 + Q(1, 2**14) + Q(1, 2**22)


@pytest.mark.parametrize("name", ("H100-E4M3-MMA", "B200-E4M3"))
def test_a_longer_k_chains_instructions(name):
    # k = 64: the first 32 products (2 at k = 0) give D1 = 2 exactly; the second
    # instruction takes D1 as its C, with 2^-10 (k = 32) and 2^-11 (k = 33) in its first
    # half: FP16 3 * 2^-11 exactly, then RN16(2 + 3 * 2^-11) = 2 + 2^-9.
    a, b = placed({0: (1.0, 2.0), 32: (2.0**-5, 2.0**-5), 33: (2.0**-5, 2.0**-6)}, k=64)
    assert run(name, a, b, out="fp16", k=64) == rn16(2 + Q(3, 2**11)) == 2 + Q(1, 2**9)


# ------------------------------------------------------------ against a transcription


def transcribed(name: str, a, b, c: float, out: str) -> Fraction:
    """The model of the module docstring, written here in rationals: one instruction
    (k = 32)."""
    emin = EMIN[fmt_of(name)]

    def e(x: float) -> int:
        return max(_exponent(Q(x)), emin)

    def block(terms: list, f: int) -> Fraction:   # terms: (value, exponent)
        live = [(v, x) for v, x in terms if v != 0]
        if not live:
            return Q(0)
        unit = Q(2) ** (max(x for _, x in live) - f)
        return sum((int(v / unit) * unit for v, _ in live), Q(0))  # int(): toward zero

    prods = [(Q(x) * Q(y), e(x) + e(y)) for x, y in zip(a, b) if x != 0 and y != 0]
    if name.startswith("H") and out == "fp32":
        cterm = [(Q(c), max(_exponent(Q(c)), -126))] if c else []
        return _round(block(cterm + prods, 13), 13, -126, False)
    rnd = rn16 if out == "fp16" else rz32
    acc_emin = -14 if out == "fp16" else -126
    first = [(Q(x) * Q(y), e(x) + e(y)) for k, (x, y) in enumerate(zip(a, b))
             if k % 4 < 2 and x != 0 and y != 0]
    second = [(Q(x) * Q(y), e(x) + e(y)) for k, (x, y) in enumerate(zip(a, b))
              if k % 4 >= 2 and x != 0 and y != 0]
    d1 = rnd(block(first, 25))
    d1_term = [(d1, max(_exponent(d1), acc_emin))] if d1 else []
    d2 = rnd(block(d1_term + second, 25))
    return rn16(d2 + Q(c)) if out == "fp16" else _round(d2 + Q(c), 23, -126, True)


@pytest.mark.parametrize("name", ("H100-E4M3-MMA", "H100-E5M2-MMA") + B200_MMA)
@pytest.mark.parametrize("out", ["fp32", "fp16"])
def test_random_dot_products_match_the_transcription(name, out):
    # inputs like the published ones: normal(0, 1) draws rounded to the format, some
    # zeros, C uniform in [0, 1) in the accumulator's format
    rng = np.random.default_rng(29)
    fmt = fmt_of(name)
    a = np.asarray(formats.round_to(rng.standard_normal((60, 32)), fmt), np.float64)
    b = np.asarray(formats.round_to(rng.standard_normal((60, 32)) * 0.5, fmt), np.float64)
    a[rng.random(a.shape) < 0.1] = 0.0
    c = rng.random(60).astype(np.float32 if out == "fp32" else np.float16)
    got = matmul(a[:, None, :].astype(np.float32), b[:, :, None].astype(np.float32),
                 c[:, None, None], accumulate=name, out_format=out)[:, 0, 0]
    for i in range(len(a)):
        assert Q(float(got[i])) == transcribed(name, a[i], b[i], float(c[i]), out), i


@pytest.mark.parametrize("name", ("H100-E4M3-MMA", "B200-E5M2"))
@pytest.mark.parametrize("out", ["fp32", "fp16"])
def test_plain_reference_matches_the_vectorised_path(name, out):
    rng = np.random.default_rng(31)
    fmt = fmt_of(name)
    model = BlockFMA.preset(name)
    for k in (32, 45, 64):
        a = np.asarray(formats.round_to(rng.standard_normal((8, k)) * 4, fmt), np.float64)
        b = np.asarray(formats.round_to(rng.standard_normal((k, 3)), fmt), np.float64)
        c = rng.standard_normal((8, 3)).astype(np.float32 if out == "fp32" else np.float16)
        got = matmul(a.astype(np.float32), b.astype(np.float32), c, accumulate=name,
                     out_format=out)
        for i in range(8):
            for j in range(3):
                want = model.dot_reference(a[i], b[:, j], float(c[i, j]), out)
                assert float(got[i, j]) == want, (k, i, j)


# ------------------------------------------------------------ presets and validation


def test_presets_record_their_evidence():
    for name in ("H100-E4M3-MMA", "H100-E5M2-MMA", "B200-E4M3", "B200-E5M2"):
        p = PRESETS[name]
        assert p.evidence == "measured" and "KM25data" in p.sources, name
        assert "inferred" in p.note and "mma.sync" in p.instruction, name
    h = BlockFMA.preset("H100-E4M3-MMA")
    assert (h.n, h.fraction_bits, h.output_fraction_bits, h.c_placement) == (32, 13, 13,
                                                                              "inside")
    f16 = h.fp16_model
    assert (f16.n, f16.fraction_bits, f16.interleave, f16.c_placement) == (32, 25, True,
                                                                           "after")
    b = BlockFMA.preset("B200-E5M2")
    assert (b.n, b.fraction_bits, b.interleave, b.c_placement, b.fp16_model) == (
        32, 25, True, "after", None)


def test_bad_interleave_and_fp16_model_arguments():
    with pytest.raises(ValueError, match="interleave.*multiple of 4, got n=6"):
        BlockFMA(6, 25, interleave=True)
    with pytest.raises(ValueError, match="interleave must be True or False"):
        BlockFMA(8, 25, interleave="yes")
    with pytest.raises(ValueError, match="fp16_model must be None or a BlockFMA"):
        BlockFMA(8, 25, fp16_model="H100-FP16")
    inner = BlockFMA(8, 25, fp16_model=BlockFMA(8, 24))
    with pytest.raises(ValueError, match="fp16_model of its own"):
        BlockFMA(8, 25, fp16_model=inner)
    with pytest.raises(ValueError, match="fp16_model needs fp16_accumulator=True"):
        BlockFMA(8, 25, fp16_accumulator=False, fp16_model=BlockFMA(8, 24))


@pytest.mark.parametrize("name", ("H100-E4M3-MMA", "B200-E4M3"))
@pytest.mark.parametrize("out", ["fp32", "fp16"])
def test_special_values_follow_ieee_addition(name, out):
    # Inf operands (the FP32 interface carries them) and Inf/NaN in C: the IEEE sum of
    # the terms, as every block FMA model gives (+Inf + -Inf and 0 * Inf: NaN)
    inf, nan = float("inf"), float("nan")
    cases = [  # (a, b, c, want)
        ({0: (inf, 1.0)}, 1.0, inf), ({0: (inf, 1.0), 5: (-inf, 1.0)}, 0.0, nan),
        ({0: (inf, 0.0)}, 0.0, nan), ({0: (1.0, 2.0)}, inf, inf), ({0: (1.0, 2.0)}, -inf, -inf),
        ({0: (1.0, 2.0)}, nan, nan), ({0: (inf, 1.0)}, -inf, nan), ({3: (-inf, 2.0)}, 1.0, -inf),
    ]
    model = BlockFMA.preset(name)
    for pairs, c, want in cases:
        a, b = placed(pairs)
        cc = np.array([[c]], np.float32 if out == "fp32" else np.float16)
        got = float(matmul(np.array([a], np.float32), np.array(b, np.float32)[:, None], cc,
                           accumulate=name, out_format=out)[0, 0])
        plain = model.dot_reference(np.array(a), np.array(b), c, out)
        for v in (got, plain):
            assert (np.isnan(v) and np.isnan(want)) or v == want, (pairs, c, v, want)


# ------------------------------------------------------------ published GPU outputs

#: a sample of the published real-GPU outputs (the file names its source and licence):
#: per GPU, format and accumulator, dot products where one rounding of the exact sum (on
#: B200 also C inside the block) differs from the hardware
PUBLISHED = json.loads((Path(__file__).parent / "data" / "mma_fp8_published.json").read_text())
PRESET_OF = {"H100": "H100-{}-MMA", "H200": "H200-{}-MMA", "B200": "B200-{}",
             "Ada": "RTX1000ADA-{}", "L40S": "L40S-{}"}


def published_operands(case: dict) -> tuple[np.ndarray, np.ndarray, float, float]:
    a, b = (formats.decode(np.frombuffer(bytes.fromhex(case[x]), np.uint8), case["format"])
            for x in ("a", "b"))
    return (np.asarray(a, np.float64), np.asarray(b, np.float64), float.fromhex(case["c"]),
            float.fromhex(case["d"]))


@pytest.mark.parametrize("gpu", sorted(PRESET_OF))
def test_published_gpu_outputs_are_reproduced_bit_for_bit(gpu):
    cases = [x for x in PUBLISHED["cases"] if x["gpu"] == gpu]
    assert len(cases) >= 12
    for case in cases:
        a, b, c, d = published_operands(case)
        name = PRESET_OF[gpu].format(case["format"].upper())
        out = case["accumulator"]
        got = run(name, a, b, c, out=out)
        assert got == Q(d), (case["row"], name, out, float(got), d)
        assert BlockFMA.preset(name).dot_reference(a, b, c, out) == d, (case["row"], name)


@pytest.mark.parametrize("n", [4, 8, 12])
@pytest.mark.parametrize("place", ["inside", "after"])
@pytest.mark.parametrize("rounding", ["toward_zero", "nearest_even"])
def test_interleaved_option_vectorised_matches_plain(n, place, rounding):
    # any interleaved model, not only the presets: several blocks and a partial last one,
    # zeros, signed values over a wide range, FP32 and FP16 accumulators
    rng = np.random.default_rng(n * 7 + len(place) + len(rounding))
    for f in (5, 13, 25):
        model = BlockFMA(n, f, rounding, interleave=True, c_placement=place, input_emin=-14)
        for k in (n, 2 * n + 3):
            a = np.asarray(formats.round_to(rng.standard_normal((4, k)) *
                                            2.0 ** rng.integers(-8, 8, (4, k)), "fp16"))
            b = np.asarray(formats.round_to(rng.standard_normal((k, 3)), "fp16"))
            a[rng.random(a.shape) < 0.2] = 0.0
            for out, ct in (("fp32", np.float32), ("fp16", np.float16)):
                c = (rng.standard_normal((4, 3)) * 4).astype(ct)
                got = matmul(a.astype(np.float32), b.astype(np.float32), c,
                             accumulate=model, out_format=out)
                for i in range(4):
                    for j in range(3):
                        want = model.dot_reference(a[i].astype(np.float64),
                                                   b[:, j].astype(np.float64),
                                                   float(c[i, j]), out)
                        assert float(got[i, j]) == want, (f, k, out, i, j)
