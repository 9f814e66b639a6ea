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


@pytest.mark.slow
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


def test_mx_sweep_catches_a_scale_floored_at_the_smallest_normal() -> None:
    """A quantiser that stores scale code 0x00 (2^-127) but divides by
    max(scale, 2^-126) halves every element of a block whose scale is 2^-127: the fixed
    sweep alone (no random search) must catch it, in the tiny-amax blocks only."""
    from oracle.cases.scaling import special_blocks
    from oracle.conformance import check_mx_quantize
    from oracle.random_stream import CaseRandom
    from refimpl.formats import encode
    from refimpl.scaling import mx_quantize

    def floored(x):
        blocks = x.reshape(x.shape[0], -1, 32).astype(np.float64)
        amax = np.abs(blocks).max(axis=-1)
        _, ex = np.frexp(np.where(amax > 0, amax, 1.0))
        e = np.where(amax > 0, np.clip(ex - 1 - 8, -127, 127), -127)  # E4M3: emax 8
        scaled = blocks / np.ldexp(1.0, np.maximum(e, -126))[..., None]
        codes = encode(scaled, "e4m3", saturate=True).reshape(x.shape)
        return codes, (e + 127).astype(np.uint8)

    # the other special blocks do not tell it apart from a correct quantiser
    x = np.stack(special_blocks(CaseRandom(0, "conformance"), 32, "e4m3"))
    codes, scales = floored(x)
    q = mx_quantize(x, "e4m3")
    assert np.array_equal(codes, q.codes) and np.array_equal(scales, q.scales)
    with pytest.raises(ConformanceError) as info:
        check_mx_quantize(floored, "e4m3", max_examples=0)
    kinds = [f.kind for f in info.value.failures]
    # the tiny-amax blocks: amax below 2^-100, some of them float32 subnormals; this is
    # torchao's known behaviour, and the kind names it
    assert kinds and all(("tiny amax)" in k or "float32-subnormal amax)" in k)
                         and k.endswith("(torchao_mx_scale_0x00)") for k in kinds), kinds
    assert info.value.counts["scales"][0] == 0 and info.value.counts["codes"][0] > 0

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


@pytest.mark.slow
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


# ------------------------------------------------- every kind, counts, nothing silent


def _zero_sign_lost(x):
    """brute_e4m3, except that every zero result is +0 (a -0 input or a tiny negative
    value that rounds to zero gives 0x00, not 0x80)."""
    c = brute_e4m3(x)
    return np.where((c & 0x7F) == 0, np.uint8(0), c).astype(np.uint8)


def test_every_kind_of_failure_is_reported_with_counts() -> None:
    def two_bugs(x):                       # ties away from zero AND +0 for every zero
        c = ties_away(x)
        return np.where((c & 0x7F) == 0, np.uint8(0), c).astype(np.uint8)

    with pytest.raises(ConformanceError) as info:
        check_encoder(two_bugs, "e4m3", max_examples=0)
    err = info.value
    kinds = [f.kind for f in err.failures]
    assert "sign difference of zero (+0 vs -0) (zero input)" in kinds
    assert "one step off (at a rounding tie, subnormal range)" in kinds
    assert "one step off (at a rounding tie, normal range)" in kinds
    # 464 = 448 + ulp/2 is the overflow tie: nearest-even keeps 448 (0x7E, even), ties
    # away gives the NaN code
    assert "NaN where a number is expected (above the largest finite value)" in kinds
    failed, compared = err.counts["codes"]
    assert compared > 0 and failed == sum(f.count for f in err.failures) > len(kinds)
    text = str(err)
    assert f"{len(kinds)} kinds of failure" in text and f"codes {failed} of {compared}" in text
    # the simplest counterexample comes first: the zeros lead the sweep, +0 then -0
    assert float(err.input) == 0.0 and np.signbit(err.input)


def test_zero_sign_is_a_sign_difference() -> None:
    with pytest.raises(ConformanceError, match=r"sign difference of zero \(\+0 vs -0\)"):
        check_encoder(_zero_sign_lost, "e4m3", max_examples=0)

    with pytest.raises(ConformanceError) as info:
        check_round_to(lambda x: np.where(np.asarray(x) == 0, np.float32(0),
                                          np.asarray(x, np.float32)), "fp16",
                       max_examples=0)
    assert info.value.failures[0].kind == "sign difference of zero (+0 vs -0) (zero input)"


@pytest.mark.slow
def test_the_search_continues_past_kinds_already_found() -> None:
    """Zero-sign bug (found by the sweep) plus a bug only random inputs show: the search
    must not stop at the first kind."""
    def both(x):
        x = np.asarray(x, dtype=np.float32)
        codes = _zero_sign_lost(x)
        odd = (x.view(np.uint32) & 0xF) == 0x5
        return np.where(odd, codes ^ np.uint8(1), codes).astype(np.uint8)

    with pytest.raises(ConformanceError) as info:
        check_encoder(both, "e4m3", max_examples=200)
    phases = {f.kind.split(" (")[0]: f.phase for f in info.value.failures}
    assert phases["sign difference of zero"].startswith("sweep")
    assert any(p == "hypothesis, shrunk" for p in phases.values())


def test_a_callable_that_raises_is_a_failure_with_its_text(capsys) -> None:
    def boom(x):
        raise RuntimeError("no kernel for this format")

    for run in (lambda: check_encoder(boom, "e4m3", max_examples=0),
                lambda: check_decoder(boom, "e4m3"),
                lambda: check_round_to(boom, "e4m3", max_examples=0)):
        with pytest.raises(ConformanceError, match="raised RuntimeError: no kernel"):
            run()
    assert main(["conform", "formats.encode", "--impl", "test_conformance:_raises",
                 "--format", "e4m3", "--max-examples", "0"]) == 1
    out, err = capsys.readouterr()
    assert "FAILED" in out and "raised ZeroDivisionError: integer division" in out
    assert "Traceback" not in out + err


def _raises(x):
    return 1 // 0


def test_max_examples_zero_says_what_was_compared(capsys) -> None:
    from oracle import placement
    from refimpl.formats import E4M3

    report = check_encoder(brute_e4m3, "e4m3", max_examples=0)
    n = placement.sharp_inputs(E4M3, np.float32).size
    assert report.placed == n and report.compared == {"codes": n} and report.examples == 0
    assert main(["conform", "formats.encode", "--impl", "test_conformance:brute_e4m3",
                 "--format", "e4m3", "--max-examples", "0"]) == 0
    out = capsys.readouterr().out
    assert f"{n} placed inputs swept ({n} codes compared), no random search" in out
    assert main(["conform", "formats.encode", "--impl", "test_conformance:brute_e4m3",
                 "--format", "e4m3", "--max-examples", "-1"]) == 2
    with pytest.raises(ValueError, match="max_examples"):
        check_encoder(brute_e4m3, "e4m3", max_examples=-1)
    # attention has a sweep of its own now: nothing random, still compared
    from oracle.conformance import check_attention

    report = check_attention(_np_sdpa, max_examples=0)
    assert report.placed >= 3 and report.compared["out"] > 0 and report.examples == 0


# ----------------------------------------------------------------------- MX and NVFP4


def _mx(policy, rule="floor"):
    from refimpl.scaling import mx_quantize

    def quantize(x):
        q = mx_quantize(x, "e4m3", scale_rule=rule, inf_block=policy)
        return q.codes, q.scales
    return quantize


def test_special_block_policies_cannot_all_pass() -> None:
    """OCP MX v1.0 leaves Inf blocks to the implementation; the three named policies
    give different scales for them (NaN 0xFF; 'max' a finite scale), so a quantiser
    following one of them must fail the other two, even with no random search."""
    from oracle.conformance import check_mx_quantize

    for impl_policy in ("nan", "max", "exponent"):
        passed = []
        for checked in ("nan", "max", "exponent"):
            try:
                check_mx_quantize(_mx(impl_policy), "e4m3", inf_block=checked,
                                  max_examples=0)
                passed.append(checked)
            except ConformanceError as exc:
                assert "block holding Inf" in str(exc)
        assert passed == [impl_policy]
    # without a named policy no Inf/NaN block is swept: any policy passes
    check_mx_quantize(_mx("max"), "e4m3", max_examples=0)


def test_codes_under_a_nan_scale_are_not_compared_and_counts_are_per_output() -> None:
    from oracle.conformance import check_mx_quantize

    def garbage_under_nan(x):
        codes, scales = _mx("nan")(x)
        codes = codes.copy()
        nan_block = np.repeat(scales == 0xFF, 32, axis=-1)
        codes[nan_block] = 0x55                 # no reader can use these
        return codes, scales

    report = check_mx_quantize(garbage_under_nan, "e4m3", inf_block="nan", max_examples=5)
    assert set(report.compared) == {"scales", "codes"} and report.examples == 5

    def one_code_off(x):
        codes, scales = _mx("nan")(x)
        codes = codes.copy()
        codes[..., 3] ^= 1
        return codes, scales

    with pytest.raises(ConformanceError) as info:
        check_mx_quantize(one_code_off, "e4m3", max_examples=0)
    counts = info.value.counts
    assert counts["scales"][0] == 0 and counts["codes"][0] > 0
    assert all(f.kind.startswith("codes differ") for f in info.value.failures)


def test_a_lost_sign_of_zero_in_block_codes_is_a_sign_difference() -> None:
    """OCP MX: a -0.0 element keeps its sign (E4M3 code 0x80); a quantiser writing
    +0 (0x00) instead differs only in the sign bit of a zero."""
    from oracle.conformance import check_mx_quantize

    def plus_zero(x):
        codes, scales = _mx("nan")(x)
        return np.where((codes & 0x7F) == 0, np.uint8(0), codes).astype(np.uint8), scales

    with pytest.raises(ConformanceError) as info:
        check_mx_quantize(plus_zero, "e4m3", max_examples=0)
    kinds = [f.kind for f in info.value.failures]
    assert "codes sign difference of zero (+0 vs -0) (all-zero block)" in kinds
    f = info.value.failures[kinds.index(
        "codes sign difference of zero (+0 vs -0) (all-zero block)")]
    assert int(f.expected) == 0x80 and int(f.got) == 0x00


def _nvfp4_te(x):
    from refimpl.scaling import nvfp4_quantize

    q = nvfp4_quantize(x, scale_rule="te")
    return q.codes, q.scales, q.global_scale


def test_nvfp4_target() -> None:
    from oracle.conformance import check_nvfp4_quantize

    report = check_nvfp4_quantize(_nvfp4_te, scale_rule="te", max_examples=5)
    assert report.compared["global_scale"] > 0
    # torchao clamps a block scale below at E4M3's smallest normal 2^-6 (code 0x08);
    # TransformerEngine's reference gives an all-zero block the scale 0x00
    with pytest.raises(ConformanceError) as info:
        check_nvfp4_quantize(_nvfp4_te, scale_rule="torchao", max_examples=0)
    zero = [f for f in info.value.failures if f.kind == "scales differ (all-zero block)"]
    assert zero and int(zero[0].expected) == 0x08 and int(zero[0].got) == 0x00
    with pytest.raises(ConformanceError, match="global_scale"):
        check_nvfp4_quantize(lambda x: _nvfp4_te(x)[:2] + (np.float32(1),),
                             max_examples=0)


# ------------------------------------------------------------------ CLI adapters


def quantize_any(x, *, elem, rule):
    """One adapter for every element format and scale rule."""
    from refimpl.scaling import mx_quantize

    q = mx_quantize(x, elem, scale_rule=rule)
    return q.codes, q.scales


def test_impl_kwargs(capsys) -> None:
    for elem, rule in (("e2m1", "floor"), ("e5m2", "even")):
        kw = f'{{"elem": "{elem}", "rule": "{rule}"}}'
        assert main(["conform", "scaling.mx_quantize", "--impl",
                     "test_conformance:quantize_any", "--format", elem, "--scale-rule",
                     rule, "--impl-kwargs", kw, "--max-examples", "3"]) == 0
    assert main(["conform", "scaling.mx_quantize", "--impl",
                 "test_conformance:quantize_any", "--format", "e2m1", "--impl-kwargs",
                 '{"elem": "e2m1", "rule": "ceil"}', "--max-examples", "0"]) == 1
    for bad in ("{elem: 1}", "[1, 2]"):
        assert main(["conform", "scaling.mx_quantize", "--impl",
                     "test_conformance:quantize_any", "--impl-kwargs", bad]) == 2
    assert "--impl-kwargs" in capsys.readouterr().err


def top_left_sdpa(q, k, v, *, causal=False, causal_alignment="bottom_right", window=None,
                  key_padding_mask=None):
    """PyTorch SDPA's semantics: is_causal is top-left aligned; no sliding window."""
    if window is not None:
        raise NotImplementedError("no sliding window")
    g = q.shape[1] // k.shape[1]
    kk, vv = np.repeat(k, g, 1).astype(np.float64), np.repeat(v, g, 1).astype(np.float64)
    s = q.astype(np.float64) @ np.swapaxes(kk, -1, -2) / np.sqrt(q.shape[-1])
    sq, sk = s.shape[-2:]
    keep = np.ones(s.shape, dtype=bool)
    if causal:
        keep &= np.arange(sk)[None, :] <= np.arange(sq)[:, None]
    if key_padding_mask is not None:
        keep &= key_padding_mask[:, None, None, :]
    s = np.where(keep, s, -np.inf)
    m = np.max(s, -1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    p = np.where(keep, np.exp(s - m), 0)
    d = p.sum(-1, keepdims=True)
    out = np.where(d > 0, p / np.where(d > 0, d, 1), 0) @ vv
    return out.astype(np.float32)


@pytest.mark.slow
def test_attention_restrictions(capsys) -> None:
    from oracle.conformance import check_attention

    check_attention(top_left_sdpa, masks=True, alignment="top_left", window=False,
                    max_examples=10)
    with pytest.raises(ConformanceError, match="causal_alignment=bottom_right"):
        check_attention(top_left_sdpa, masks=True, window=False, max_examples=0)
    with pytest.raises(ConformanceError, match="raised NotImplementedError"):
        check_attention(top_left_sdpa, masks=True, alignment="top_left", max_examples=0)
    args = ["conform", "attention.attention", "--impl", "test_conformance:top_left_sdpa",
            "--masks", "--max-examples", "3"]
    assert main(args + ["--alignment", "top_left", "--no-window", "--dtype", "bf16"]) == 0
    assert "attention.attention" in capsys.readouterr().out
    assert main(args + ["--no-window"]) == 1
    assert main(args + ["--dtype", "float64"]) == 2          # not an attention dtype
    assert main(["conform", "formats.encode", "--impl", "test_conformance:brute_e4m3",
                 "--format", "e4m3", "--dtype", "bf16"]) == 2
    with pytest.raises(ConformanceError, match="2.0x-naive-bf16"):
        check_attention(lambda q, k, v: _np_sdpa(q, k, v) * np.float32(1.05),
                        dtype="bf16", max_examples=0)


def test_the_collector_keeps_a_new_kind_only_from_the_sweep() -> None:
    """Collector.keep (the one place the targets record a new kind of failure): a
    sweep's failure is recorded and counted by later sightings; the random search's is
    returned for hypothesis to shrink but not recorded."""
    from oracle.conformance.report import Collector, Failure

    col = Collector("t", "formats.encode")
    f = col.keep(Failure("k", "sweep", "text", count=1), True)
    assert col.kinds == {"k": f} and col.seen("k", True) and f.count == 2
    g = col.keep(Failure("other", "hypothesis", "text"), False)
    assert g.kind == "other" and "other" not in col.kinds
