"""Conformance checks catch deliberately wrong implementations with a minimal
counterexample, and pass correct ones. The implementations checked here are written
independently of refimpl: a brute-force nearest-value E4M3 encoder over the value table
given by the OCP OFP8 formula."""
from __future__ import annotations

import sys
import textwrap

import numpy as np
import pytest

from oracle.cli import main
from oracle.conformance import (ConformanceError, check_decoder, check_encoder,
                                check_round_to)


def _e4m3_values() -> np.ndarray:
    """Magnitudes of codes 0..126 by the OFP8 formula (bias 7, subnormals at e=0)."""
    out = []
    for code in range(127):
        e, m = code >> 3, code & 7
        out.append((m / 8) * 2.0 ** -6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7))
    return np.array(out)


VALUES = _e4m3_values()


def brute_e4m3(x: np.ndarray, ties: str = "even") -> np.ndarray:
    """Round each |x| to the nearest E4M3 value by search; ties to even code or away."""
    x = np.asarray(x, dtype=np.float64)
    out = np.empty(x.shape, dtype=np.uint8)
    for i, v in np.ndenumerate(x):
        sign = 0x80 if np.signbit(v) else 0
        a = abs(v)
        if np.isnan(v) or np.isinf(v):
            out[i] = sign | 0x7F
            continue
        hi = int(np.searchsorted(VALUES, a))          # first value >= a
        if hi == 0:
            code = 0
        elif hi == len(VALUES):                       # above 448: the tie is 464
            code = 0x7E if a < 464.0 or (a == 464.0 and ties == "even") else 0x7F
        else:
            lo_v, hi_v = VALUES[hi - 1], VALUES[hi]
            if a - lo_v < hi_v - a:
                code = hi - 1
            elif a - lo_v > hi_v - a:
                code = hi
            else:
                code = (hi - 1 if (hi - 1) % 2 == 0 else hi) if ties == "even" else hi
        out[i] = sign | code
    return out


def ties_away(x):
    return brute_e4m3(x, "away")


def test_correct_independent_encoder_conforms() -> None:
    check_encoder(brute_e4m3, "e4m3", max_examples=30)


def test_ties_away_encoder_is_caught_with_minimal_counterexample() -> None:
    with pytest.raises(ConformanceError) as info:
        check_encoder(ties_away, "e4m3", max_examples=30)
    err = info.value
    # the smallest tie: 2^-10 lies halfway between 0 and the smallest subnormal 2^-9
    assert float(err.input) == 2.0 ** -10
    assert int(err.expected) == 0x00 and int(err.got) == 0x01
    assert "0x3A800000" in str(err) and "0x00 (0)" in str(err)


def test_double_rounding_is_caught_from_float64() -> None:
    def via_float32(x):
        return brute_e4m3(np.asarray(x).astype(np.float32))

    check_encoder(via_float32, "e4m3", max_examples=0)          # fine from float32 ...
    with pytest.raises(ConformanceError) as info:                # ... not from float64
        check_encoder(via_float32, "e4m3", dtype=np.float64, max_examples=0)
    x = float(info.value.input)
    assert x != float(np.float32(x))                             # a float64-only input


def test_wrong_shapes_and_dtypes_are_reported() -> None:
    with pytest.raises(ConformanceError, match="float32 values"):
        check_encoder(lambda x: x, "e4m3", max_examples=0)
    with pytest.raises(ConformanceError, match="shape"):
        check_encoder(lambda x: brute_e4m3(x)[:-1], "e4m3", max_examples=0)


def test_decoder_checks() -> None:
    def decode(c):
        c = np.asarray(c).astype(np.int64)
        mag = VALUES[np.minimum(c & 0x7F, 126)]
        v = np.where((c & 0x7F) == 0x7F, np.nan, mag)
        return np.where(c & 0x80, -v, v).astype(np.float32)

    check_decoder(decode, "e4m3")

    def nan_as_480(c):          # mlx #4135: E4M3 NaN codes decoded as 480
        v = decode(c)
        return np.where(np.isnan(v), np.copysign(np.float32(480), v), v)

    with pytest.raises(ConformanceError) as info:
        check_decoder(nan_as_480, "e4m3")
    assert int(info.value.input) == 0x7F


def test_round_to_check() -> None:
    def fake_quant(x):
        c = brute_e4m3(x) & 0x7F
        mag = np.where(c == 0x7F, np.nan, VALUES[np.minimum(c, 126)])
        return np.copysign(mag, x).astype(np.float32)

    check_round_to(fake_quant, "e4m3", max_examples=20)

    def saturating(x):
        y = fake_quant(x)
        return np.where(np.isnan(y) & ~np.isnan(x), np.copysign(np.float32(448), x), y)

    with pytest.raises(ConformanceError) as info:     # overflow must give NaN, not 448
        check_round_to(saturating, "e4m3", max_examples=0)
    assert float(info.value.input) > 448


def test_conform_cli(tmp_path, monkeypatch, capsys) -> None:
    mod = tmp_path / "user_fp8.py"
    mod.write_text(textwrap.dedent("""
        from test_conformance import brute_e4m3, ties_away
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["conform", "formats.encode", "--impl", "user_fp8:ties_away",
                 "--format", "e4m3", "--max-examples", "10"]) == 1
    out = capsys.readouterr().out
    assert "FAILED" in out and "0x3A800000" in out and "got      0x01" in out
    assert main(["conform", "formats.encode", "--impl", "user_fp8:brute_e4m3",
                 "--format", "e4m3", "--max-examples", "10"]) == 0
    assert main(["conform", "formats.encode", "--impl", "user_fp8:nope",
                 "--format", "e4m3"]) == 2
    assert main(["conform", "formats.encode", "--impl", "no_such_mod:f",
                 "--format", "e4m3"]) == 2
    del sys.modules["user_fp8"]


def test_mx_quantizer_check() -> None:
    from oracle.conformance import check_mx_quantize
    from refimpl.scaling import mx_quantize

    def rceil(x):                       # a different, documented rule: caught as floor
        q = mx_quantize(x, "e4m3", scale_rule="rceil")
        return q.codes, q.scales

    check_mx_quantize(rceil, "e4m3", scale_rule="rceil", max_examples=10)
    with pytest.raises(ConformanceError) as info:
        check_mx_quantize(rceil, "e4m3", max_examples=10)
    assert "amax 7.99999952" in str(info.value)        # FLOOR reads exponent bits: 2^-6


def test_matmul_check() -> None:
    from oracle.conformance import check_matmul

    check_matmul(lambda a, b: a @ b, "bf16", max_examples=5)      # BLAS, any order
    with pytest.raises(ConformanceError, match="outside the acceptance interval"):
        check_matmul(lambda a, b: (a.astype(np.float16) @ b.astype(np.float16))
                     .astype(np.float32), "bf16", max_examples=0)


def _np_sdpa(q, k, v, **_):
    g = q.shape[1] // k.shape[1]
    s = q.astype(np.float64) @ np.swapaxes(np.repeat(k, g, 1), -1, -2) / np.sqrt(q.shape[-1])
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True) @ np.repeat(v, g, 1)).astype(np.float32)


def test_attention_check() -> None:
    from oracle.conformance import check_attention

    check_attention(_np_sdpa, max_examples=10)
    with pytest.raises(ConformanceError, match="2.0x-naive-fp16"):
        check_attention(lambda q, k, v: _np_sdpa(q, k, v) * np.float32(1.01), max_examples=10)


def test_conform_cli_other_targets(capsys) -> None:
    assert main(["conform", "attention.attention", "--impl",
                 "test_conformance:_np_sdpa", "--max-examples", "5"]) == 0
    assert main(["conform", "formats.encode", "--impl", "test_conformance:brute_e4m3"]) == 2
    assert "needs --format" in capsys.readouterr().err


def test_hypothesis_phase_finds_what_the_sweep_cannot() -> None:
    """Wrong only for float32 inputs whose low four significand bits are 0101: no placed
    input (values, ties, their float32 neighbours) has them, random ones often do."""
    def wrong_off_grid(x):
        x = np.asarray(x, dtype=np.float32)
        codes = brute_e4m3(x)
        odd = (x.view(np.uint32) & 0xF) == 0x5
        return np.where(odd, codes ^ np.uint8(1), codes).astype(np.uint8)

    check_encoder(wrong_off_grid, "e4m3", max_examples=0)        # the sweep passes
    with pytest.raises(ConformanceError, match="hypothesis, shrunk") as info:
        check_encoder(wrong_off_grid, "e4m3", max_examples=200)
    x = np.float32(info.value.input)
    assert int(x.view(np.uint32)) & 0xF == 0x5
    assert int(info.value.got) == int(info.value.expected) ^ 1
