"""The default suite's MX cases against an MX quantiser written here from OCP MX v1.0
(section 6.3 and the scale rules named in ``refimpl.scaling.mx``), once correct and once
with a bug a widely used MX library shipped: it stores scale code 0x00 (2^-127) for a
clamped scale but divides the elements by max(scale, 2^-126), the float32 normal
minimum, so blocks with amax in about [2^-136, 2^-119] get elements half their size.

The check must catch the bug for every element format and pass the correct quantiser.
The quantiser uses Python integers and ``fractions.Fraction`` for the scale exponent
and ``refimpl.formats.encode`` (exhaustively tested on its own) for the element rounding.
"""
from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import oracle
from oracle.cli import main
from oracle.generation import generate
from oracle.verification import check
from refimpl import formats as F

#: element format -> (exponent of its largest normal, largest value, mantissa bits)
ELEMS = {"e4m3": (8, Fraction(448), 3), "e5m2": (15, Fraction(57344), 2),
         "e2m3": (2, Fraction(15, 2), 3), "e3m2": (4, Fraction(28), 2),
         "e2m1": (2, Fraction(6), 1), "int8": (0, Fraction(127, 64), 6)}
FLOAT_ELEMS = ("e4m3", "e5m2", "e2m3", "e3m2", "e2m1")


def _floor_log2(v: Fraction) -> int:
    e = v.numerator.bit_length() - v.denominator.bit_length()
    return e if Fraction(2) ** e <= v else e - 1


def _ceil_log2(v: Fraction) -> int:
    e = _floor_log2(v)
    return e if Fraction(2) ** e == v else e + 1


def _round_mantissa(v: Fraction, bits: int) -> Fraction:
    """v rounded to ``bits`` fraction bits of its significand, ties to even."""
    ulp = Fraction(2) ** (_floor_log2(v) - bits)
    q, r = divmod(v / ulp, 1)
    if r > Fraction(1, 2) or (r == Fraction(1, 2) and q % 2 == 1):
        q += 1
    return q * ulp


def scale_exponent(amax: Fraction, elem: str, rule: str) -> int:
    emax, vmax, man = ELEMS[elem]
    if amax == 0:
        return -127
    if rule == "floor":
        e = _floor_log2(amax) - emax
    elif rule == "ceil":
        e = _ceil_log2(amax) - emax
    elif rule == "even":
        e = _floor_log2(_round_mantissa(amax, man)) - emax
    elif rule == "rceil":
        e = _ceil_log2(amax / vmax)
    else:
        raise AssertionError(rule)
    return max(-127, min(127, e))


def _int8_codes(p: np.ndarray) -> np.ndarray:
    k = np.clip(np.rint(p * 64.0), -127, 127).astype(np.int64)    # rint: ties to even
    return (k & 0xFF).astype(np.uint8)


def quantize(x: np.ndarray, elem: str, rule: str, inf_block: str,
             buggy: bool = False) -> dict[str, np.ndarray]:
    """MX quantisation of float32 rows of 32-element blocks (last axis)."""
    rows, n = x.shape
    codes = np.zeros(x.shape, np.uint8)
    scales = np.zeros((rows, n // 32), np.uint8)
    deq = np.zeros(x.shape, np.float32)
    for r in range(rows):
        for b in range(n // 32):
            blk = x[r, 32 * b:32 * b + 32].astype(np.float64)
            sl = slice(32 * b, 32 * b + 32)
            has_inf = bool(np.isinf(blk).any())
            if np.isnan(blk).any() or (has_inf and inf_block == "nan"):
                scales[r, b] = 0xFF                      # element codes: don't-care
                deq[r, sl] = np.nan
                continue
            if has_inf and inf_block == "max":
                e = 127
            elif has_inf:                                # "exponent": Inf counts as 2^128
                e = scale_exponent(Fraction(2) ** 128, elem, rule)
            else:
                e = scale_exponent(max(Fraction(float(abs(v))) for v in blk), elem, rule)
            scales[r, b] = e + 127
            divisor = max(e, -126) if buggy else e       # the library's max(X, 2^-126)
            p = np.ldexp(blk, -divisor)                  # exact in float64
            if elem == "int8":
                c = _int8_codes(np.clip(p, -2.0, 2.0))
                vals = c.view(np.int8).astype(np.float64) / 64.0
            else:
                c = F.encode(p, elem, saturate=True)
                vals = F.decode(c, elem).astype(np.float64)
            codes[r, sl] = c
            with np.errstate(over="ignore"):             # 448 * 2^127 -> inf
                deq[r, sl] = np.ldexp(vals, e).astype(np.float32)
    return {"codes": codes, "scales": scales, "dequantized": deq}


@pytest.fixture(scope="module")
def mx_suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("mx") / "golden"
    generate(out, only="scaling.mx.*", progress=None)
    return out


def _results(suite_dir: Path, dest: Path, buggy: bool) -> int:
    n = 0
    for case in oracle.load(suite_dir):
        p = case.params
        got = quantize(case.inputs["x"], p["fmt"], p["scale_rule"], p["inf_block"], buggy)
        for name in case.expected:
            path = dest / case.files[name]
            path.parent.mkdir(parents=True, exist_ok=True)
            np.save(path, got[name])
            n += 1
    return n


def test_the_quantiser_here_against_hand_values() -> None:
    assert scale_exponent(Fraction(960), "e4m3", "floor") == 1            # 957 clips
    assert scale_exponent(Fraction(960), "e4m3", "rceil") == 2            # 960/4 = 240
    assert scale_exponent(Fraction(7.9999995), "e2m1", "floor") == 0      # bits, not log2
    assert scale_exponent(Fraction(2) ** -130, "e2m1", "floor") == -127   # clamped
    assert scale_exponent(Fraction(15, 8), "e2m1", "even") == -1          # 1.875 -> 2.0
    x = np.zeros((1, 32), np.float32)
    x[0, 0], x[0, 1] = 3 * 2.0 ** -127, 2.0 ** -127     # amax 2^-125.4: E2M1 scale 2^-127
    good, bad = (quantize(x, "e2m1", "floor", "nan", b) for b in (False, True))
    assert good["scales"][0, 0] == bad["scales"][0, 0] == 0x00
    assert good["codes"][0, :2].tolist() == [0x5, 0x2]                  # 3.0 and 1.0
    assert bad["codes"][0, :2].tolist() == [0x3, 0x1]                   # 1.5 and 0.5


@pytest.mark.slow
def test_suite_passes_a_correct_mx_quantiser(mx_suite: Path, tmp_path: Path) -> None:
    n = _results(mx_suite, tmp_path / "res", buggy=False)
    report = check(mx_suite, tmp_path / "res")
    assert report.ok, report.failures[:5]
    assert report.checked == n == report.passed and not report.missing


def test_suite_catches_the_scale_divisor_bug_for_every_element_format(
        mx_suite: Path, tmp_path: Path) -> None:
    _results(mx_suite, tmp_path / "res", buggy=True)
    report = check(mx_suite, tmp_path / "res")
    assert not report.ok
    failing = {p.case for p in report.problems}
    for elem in FLOAT_ELEMS:
        caught = {c for c in failing if c.startswith(f"scaling.mx.{elem}.")}
        assert caught, f"the bug goes unnoticed for {elem}"
        for rule in ("floor", "ceil", "even", "rceil"):
            assert f"scaling.mx.{elem}.{rule}.tiny_amax" in failing
    assert "scaling.mx.int8.floor.tiny_amax" in failing
    # scales are right, only elements and dequantised values are wrong
    assert {p.file.rsplit("/", 1)[1] for p in report.problems} == {"codes.npy",
                                                                  "dequantized.npy"}
    # the command line says so too
    assert main(["check", str(mx_suite), "--results", str(tmp_path / "res"),
                 "--only", "scaling.mx.e2m1.*"]) == 1


def test_tiny_amax_blocks_span_the_clamped_range() -> None:
    suite_cases = {c.id: c for c in oracle.cases.registry().cases("default")}
    for elem in FLOAT_ELEMS:
        for rule in ("floor", "ceil", "even", "rceil"):
            assert f"scaling.mx.{elem}.{rule}.tiny_amax" in suite_cases
    from oracle.cases.scaling import TINY_AMAX_EXPONENTS
    assert min(TINY_AMAX_EXPONENTS) <= -136 and max(TINY_AMAX_EXPONENTS) >= -119
    assert TINY_AMAX_EXPONENTS == tuple(range(-137, -118))
