"""cvt to and from packed FP8/FP6/FP4/UE8M0 (hardware/simt/lowprec.py) against references
written from the formats' definitions in simt_reference (OCP OFP8 / OCP MX v1.0 section
5.3: sign, exponent, mantissa and bias; E4M3 without Inf, FP6/FP4 without Inf or NaN),
rounded with fractions.Fraction by exhaustive search of each format's values, and
numpy.float16 / bfloat16 bit patterns for the wide side."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from simt_reference import nearest_code, round_code, value

from hardware.simt import ExecutionError, UnsupportedPtxError


def f16_bits(v) -> int:
    """binary16 code of a value of :func:`simt_reference.value` (NaN: 0x7FFF)."""
    if v == "nan":
        return 0x7FFF
    if isinstance(v, str):
        return 0x7C00 if v == "inf" else 0xFC00
    return int(np.array(float(v), np.float16).view(np.uint16))


# ------------------------------------------------------------------- widening


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
@pytest.mark.parametrize("relu", [False, True])
def test_fp8_pairs_to_f16x2_exhaustive(simt_lanes, fmt, relu):
    codes = np.arange(256, dtype=np.uint32)
    pairs = (codes | (codes[::-1] << 8)).astype(np.uint16)      # every code in each half
    r = ".relu" if relu else ""
    out = np.concatenate([simt_lanes(f"cvt.rn{r}.f16x2.{fmt}x2 {{d0}}, {{a0}}",
                                     {"a": pairs[i:i + 32, None]},
                                     {"d": (1, np.uint32)})["d"][:, 0]
                          for i in range(0, 256, 32)])

    def want(c):
        v = value(fmt, int(c))
        if relu and ((not isinstance(v, str) and v < 0) or v == "-inf"):
            return 0
        return f16_bits(v)
    np.testing.assert_array_equal([int(x) & 0xFFFF for x in out], [want(c) for c in codes])
    np.testing.assert_array_equal([int(x) >> 16 for x in out], [want(c) for c in codes[::-1]])


@pytest.mark.parametrize("fmt", ["e2m3", "e3m2", "e2m1"])
def test_fp6_fp4_pairs_to_f16x2_exhaustive(simt_lanes, fmt):
    width = 4 if fmt == "e2m1" else 8
    n = 16 if fmt == "e2m1" else 64
    lo, hi = np.meshgrid(np.arange(n), np.arange(n))
    packed = (lo.ravel() | (hi.ravel() << width))
    dt = np.uint8 if fmt == "e2m1" else np.uint16
    res = []
    for i in range(0, packed.size, 256):
        chunk = packed[i:i + 256]
        res.append(simt_lanes(f"cvt.rn.f16x2.{fmt}x2 {{d0}}, {{a0}}",
                              {"a": chunk.astype(dt)[:, None]}, {"d": (1, np.uint32)},
                              threads=len(chunk), target="sm_100a")["d"][:, 0])
    out = np.concatenate(res)
    np.testing.assert_array_equal([int(x) & 0xFFFF for x in out], [f16_bits(value(fmt, int(c))) for c in lo.ravel()])
    np.testing.assert_array_equal([int(x) >> 16 for x in out], [f16_bits(value(fmt, int(c))) for c in hi.ravel()])


def bf16_bits(v) -> int:
    """bfloat16 code of a value of :func:`simt_reference.value` (exact: every FP8, FP6 and
    FP4 value is a bfloat16 value; the float32 bits' top half); NaN: 0x7FFF."""
    if v == "nan":
        return 0x7FFF
    if isinstance(v, str):
        return 0x7F80 if v == "inf" else 0xFF80
    return int(np.array(float(v), np.float32).view(np.uint32)) >> 16


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2", "e2m3", "e3m2", "e2m1"])
@pytest.mark.parametrize("relu", [False, True])
def test_packed_pairs_to_bf16x2_exhaustive(simt_lanes, fmt, relu):
    """cvt.rn{.relu}.bf16x2.<f8/f6/f4>x2 (PTX ISA 9.2): each element widened exactly,
    the upper source element into the upper half."""
    width = 4 if fmt == "e2m1" else 8
    n = {"e2m1": 16, "e2m3": 64, "e3m2": 64}.get(fmt, 256)
    codes = np.arange(n, dtype=np.uint32)
    packed = (codes | (codes[::-1] << width))
    dt = np.uint8 if fmt == "e2m1" else np.uint16
    r = ".relu" if relu else ""
    out = np.concatenate([simt_lanes(f"cvt.rn{r}.bf16x2.{fmt}x2 {{d0}}, {{a0}}",
                                     {"a": packed[i:i + 32].astype(dt)[:, None]},
                                     {"d": (1, np.uint32)}, threads=len(packed[i:i + 32]),
                                     target="sm_100a")["d"][:, 0]
                          for i in range(0, n, 32)])

    def want(c):
        v = value(fmt, int(c))
        if relu and ((not isinstance(v, str) and v < 0) or v == "-inf"):
            return 0
        return bf16_bits(v)
    np.testing.assert_array_equal([int(x) & 0xFFFF for x in out], [want(c) for c in codes])
    np.testing.assert_array_equal([int(x) >> 16 for x in out], [want(c) for c in codes[::-1]])


def test_scaled_widening_to_bf16x2_is_refused(simt_lanes):
    z = np.zeros((32, 1), np.uint16)
    with pytest.raises(UnsupportedPtxError, match="scaled"):
        simt_lanes("cvt.rn.scaled::n2::ue8m0.bf16x2.e4m3x2 {d0}, {a0}, {b0}",
                   {"a": z, "b": z}, {"d": (1, np.uint32)}, target="sm_100a")


def test_fp6_padding_bits_are_refused(simt_lanes):
    with pytest.raises(ExecutionError, match="padding"):
        simt_lanes("cvt.rn.f16x2.e2m3x2 {d0}, {a0}", {"a": np.full((32, 1), 0x40, np.uint16)},
                   {"d": (1, np.uint32)}, target="sm_100a")


def test_ue8m0_pairs_to_bf16x2_exhaustive(simt_lanes):
    codes = np.arange(256, dtype=np.uint32)
    pairs = (codes | (codes[::-1] << 8)).astype(np.uint16)
    out = np.concatenate([simt_lanes("cvt.rn.bf16x2.ue8m0x2 {d0}, {a0}",
                                     {"a": pairs[i:i + 32, None]}, {"d": (1, np.uint32)},
                                     target="sm_100a")["d"][:, 0] for i in range(0, 256, 32)])

    def bf16(k):  # 2**(k - 127); 0xFF is NaN
        k = int(k)
        if k == 255:
            return 0x7FFF
        f = np.array(2.0 ** (k - 127), np.float32).view(np.uint32)
        return int(f) >> 16
    np.testing.assert_array_equal([int(x) & 0xFFFF for x in out], [bf16(k) for k in codes])
    np.testing.assert_array_equal([int(x) >> 16 for x in out], [bf16(k) for k in codes[::-1]])


# ------------------------------------------------------------------ narrowing

EDGE = [0.0, -0.0, 1.0, -1.0, 1e-30, -1e-30, 448.0, 464.0, 480.0, -500.0, 57344.0, 61440.0,
        1e9, float("inf"), float("-inf"), float("nan"), 6.0, 7.0, 5.0, 0.25, 0.75, 2.5,
        -3.5, 7.5, 28.0, 30.0, 0.0625, 2.0**-9, 2.0**-10, 3 * 2.0**-10, 2.0**-16, 2.0**-17,
        1.0625, 1.1875, 0.1, 3.14159]


def _f32_cases(rng, n=224):
    x = np.concatenate([np.array(EDGE, np.float32),
                        (rng.standard_normal(n) * np.exp2(rng.integers(-12, 12, n)))
                        .astype(np.float32)])
    return x[: 32 * (len(x) // 32)]


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2", "e2m3", "e3m2", "e2m1"])
@pytest.mark.parametrize("relu", [False, True])
def test_f32_pairs_to_packed(simt_lanes, fmt, relu):
    rng = np.random.default_rng(4)
    x = _f32_cases(rng)
    y = np.roll(x, 7)
    r = ".relu" if relu else ""
    target = "sm_100a" if fmt in ("e2m3", "e3m2", "e2m1") else "sm_90"
    cbits = 8 if fmt == "e2m1" else 16
    dt = np.uint8 if cbits == 8 else np.uint16
    out = simt_lanes(f"cvt.rn.satfinite{r}.{fmt}x2.f32 {{d0}}, {{a0}}, {{b0}}",
                     {"a": x.view(np.uint32)[:, None], "b": y.view(np.uint32)[:, None]},
                     {"d": (1, dt)}, threads=len(x), target=target)["d"][:, 0]

    def want(v):
        if relu and v < 0:
            v = 0.0
        return nearest_code(fmt, float(v))
    half = cbits // 2
    np.testing.assert_array_equal([int(o) >> half for o in out], [want(v) for v in x])  # a: high
    np.testing.assert_array_equal([int(o) & ((1 << half) - 1) for o in out], [want(v) for v in y])


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
@pytest.mark.parametrize("src", ["f16x2", "bf16x2"])
def test_packed_halves_to_fp8(simt_lanes, fmt, src):
    rng = np.random.default_rng(9)
    bits = rng.integers(0, 1 << 16, (64, 2)).astype(np.uint32)
    bits[:8] = [[0x7C00, 0xFC00], [0x7E00, 0x0001], [0x5BFF, 0xDC00], [0x0000, 0x8000],
                [0x7F80, 0xFF80], [0x43E0, 0x43E8], [0x3C00, 0x3C10], [0x1400, 0x0400]]
    packed = (bits[:, 0] | (bits[:, 1] << 16)).astype(np.uint32)
    out = simt_lanes(f"cvt.rn.satfinite.{fmt}x2.{src} {{d0}}, {{a0}}", {"a": packed[:, None]},
                     {"d": (1, np.uint16)}, threads=64,
                     target="sm_100a" if src == "bf16x2" else "sm_90")["d"][:, 0]

    def wide(b):
        if src == "f16x2":
            return float(np.array(b, np.uint16).view(np.float16))
        return float(np.array(b << 16, np.uint32).view(np.float32))
    np.testing.assert_array_equal([int(o) & 0xFF for o in out], [nearest_code(fmt, wide(b)) for b in bits[:, 0]])
    np.testing.assert_array_equal([int(o) >> 8 for o in out], [nearest_code(fmt, wide(b)) for b in bits[:, 1]])


def _ue8m0(x: float, mode: str, sat: bool) -> int:
    """PTX cvt .ue8m0: |x| to a power of two, rz down / rp up, from 2**-127 to 2**127."""
    if x != x:
        return 0xFF
    a = abs(Fraction(x)) if abs(x) != float("inf") else None
    if a is None:
        return 0xFE if sat else 0xFF
    k = -127
    while Fraction(2) ** (k + 1) <= a and k < 128:
        k += 1
    if mode == "rp" and Fraction(2) ** k < a:
        k += 1
    code = max(k, -127) + 127
    if code >= 255:
        return 0xFE if sat else 0xFF
    return code


@pytest.mark.parametrize("mode", ["rz", "rp"])
@pytest.mark.parametrize("sat", [False, True])
def test_f32_pairs_to_ue8m0(simt_lanes, mode, sat):
    rng = np.random.default_rng(6)
    x = np.concatenate([np.array([0.0, -0.0, 1.0, 1.5, -3.0, 2.0**-127, 2.0**-126, 1e-45,
                                  3e-39, 2.0**127, 1.5 * 2.0**127, 3.4e38, float("inf"),
                                  float("-inf"), float("nan"), 0.75], np.float32),
                        (rng.standard_normal(48) * np.exp2(rng.integers(-140, 128, 48)))
                        .astype(np.float32)])
    y = np.roll(x, 5)
    s = ".satfinite" if sat else ""
    out = simt_lanes(f"cvt.{mode}{s}.ue8m0x2.f32 {{d0}}, {{a0}}, {{b0}}",
                     {"a": x.view(np.uint32)[:, None], "b": y.view(np.uint32)[:, None]},
                     {"d": (1, np.uint16)}, threads=len(x), target="sm_100a")["d"][:, 0]
    np.testing.assert_array_equal([int(o) >> 8 for o in out], [_ue8m0(float(v), mode, sat) for v in x])
    np.testing.assert_array_equal([int(o) & 0xFF for o in out], [_ue8m0(float(v), mode, sat) for v in y])


def test_tf32_rna_ties_away(simt_lanes):
    base = np.float32(1.0).view(np.uint32)
    # 1 + 2**-11 is the tie between 1 and 1 + 2**-10: away from zero gives the latter
    x = np.array([base + (1 << 12), base + (3 << 12), base + (1 << 12) - 1, 0x7F7FFFFF,
                  0x7FC00001, 0xBF801000] + [0] * 26, np.uint32)
    out = simt_lanes("cvt.rna.tf32.f32 {d0}, {a0}", {"a": x[:, None]},
                     {"d": (1, np.uint32)}, target="sm_80")["d"][:, 0]

    def rna(bits):
        v = float(np.array(bits, np.uint32).view(np.float32))
        return 0x7FFFFFFF if v != v else round_code("tf32", v, "rna") << 13
    np.testing.assert_array_equal([int(o) for o in out], [rna(b) for b in x])


@pytest.mark.parametrize("text", [
    "cvt.rz.satfinite.e4m3x2.f32 {d0}, {a0}, {b0}",       # FP8 needs .rn
    "cvt.rn.e4m3x2.f32 {d0}, {a0}, {b0}",                 # and .satfinite
    "cvt.rn.satfinite.ue8m0x2.f32 {d0}, {a0}, {b0}",      # UE8M0 takes .rz/.rp
    "cvt.rs.satfinite.e4m3x4.f32 {d0}, {{{a0}, {b0}, {a0}, {b0}}}, {a0}",
    "cvt.rn.f32.e4m3x2 {d0}, {a0}",                       # FP8 widens to f16x2/bf16x2
])
def test_malformed_forms_are_refused(simt_lanes, text):
    z = np.zeros((32, 1), np.uint32)
    with pytest.raises(UnsupportedPtxError):
        simt_lanes(text, {"a": z, "b": z}, {"d": (1, np.uint32)}, target="sm_100a")
