"""What ``run`` and ``conform`` tell a new user: how a function that raised TypeError was
called, a function whose parameters are the inputs in another order, a function that
returned None, the listing limits of ``run``, ml_dtypes' known NaN behaviour named in a
golden case, the E8M0 variants of ``formats.round_to`` and a decoder's summary.

The libraries are simulated here from their documented behaviour: ml_dtypes' NaN to
E2M1 is the zero of the opposite sign (+NaN -> 0x8, -NaN -> 0x0); ml_dtypes' E8M0 ties
up and makes zero NaN (the encoder of test_conform_variants, written from the
definition with math.frexp), decoded as 2^(code - 127) with math.ldexp."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import oracle
from oracle.cli import main
from oracle.conformance import ConformanceError, conform
from refimpl import formats as F
from tests.oracle.test_conform_variants import ml_like

NAN_CASE = "formats.encode.e2m1.f32.nearest_even.nan=zero"
PLAIN = "formats.encode.e2m1.f32.nearest_even"


@pytest.fixture(scope="module")
def suite(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("run_reports") / "golden"
    oracle.generate(out, only="formats.encode.e2m1.f32.nearest_even*", progress=None)
    return out


def ml_dtypes_like(x, *, fmt, rounding, saturate, nan=None, **params):
    """E2M1 as ml_dtypes casts it: right for numbers, NaN -> the opposite sign's zero."""
    codes = F.encode(np.where(np.isnan(x), 0, x), fmt, rounding=rounding,
                     saturate=saturate).astype(np.uint8)
    return np.where(np.isnan(x), np.where(np.signbit(x), 0x0, 0x8), codes).astype(np.uint8)


def test_ml_dtypes_nan_behaviour_is_named_in_a_golden_case(suite: Path) -> None:
    r = oracle.run(suite, {"formats.encode": ml_dtypes_like}, ids=[NAN_CASE, PLAIN])
    assert r.compared == 2 and r.passed == 1
    ((case, message),) = r.failures
    assert case == NAN_CASE
    assert "(ml_dtypes_nan_to_opposite_zero)" in message
    assert message.endswith("becomes the zero of the opposite sign (the one failing "
                            "element)")


def test_a_plain_nan_bug_is_not_called_a_known_behaviour(suite: Path) -> None:
    def nan_to_max(x, **kw):
        return np.where(np.isnan(x), 0x7, ml_dtypes_like(x, **kw)).astype(np.uint8)

    r = oracle.run(suite, {"formats.encode": nan_to_max}, ids=[NAN_CASE])
    ((_, message),) = r.failures
    assert "known behaviour" not in message and "matches" not in message


def test_a_type_error_says_how_the_function_was_called(suite: Path) -> None:
    def encode(x, *, fmt):                    # forgets the other parameters
        return F.encode(x, fmt)

    r = oracle.run(suite, {"formats.encode": encode}, ids=[PLAIN])
    ((_, message),) = r.failures
    assert message.startswith("raised TypeError: ")
    assert message.endswith("; called as fn(x, fmt='e2m1', nan=None, "
                            "rounding='nearest_even', saturate=False)")


def test_parameters_in_another_order_than_the_inputs_are_named(tmp_path: Path) -> None:
    golden = tmp_path / "g"
    oracle.generate(golden, only="attention.attention.mha", progress=None)
    case = oracle.load(golden)["attention.attention.mha"]
    assert list(case.inputs) == ["k", "q", "v"]             # manifest order

    def attention(q, k, v, **params):
        return {"out": np.zeros_like(q)}

    r = oracle.run(golden, {"attention.attention": attention}, ids=[case.id],
                   allow_missing="no lse")
    ((_, message),) = r.failures
    assert message.endswith("the function's parameters (q, k, v) are this case's inputs "
                            "in another order: they are passed positionally in manifest "
                            "order (k, q, v); pass them by name with --inputs-as-keywords "
                            "(inputs='keywords')")
    # by name, no such note (the zeros still fail)
    r = oracle.run(golden, {"attention.attention": attention}, ids=[case.id],
                   allow_missing="no lse", inputs="keywords")
    assert "another order" not in r.failures[0][1]


def test_none_returned_is_named(suite: Path) -> None:
    r = oracle.run(suite, {"formats.encode": lambda *a, **k: None}, ids=[PLAIN])
    assert r.failures == [(PLAIN, "returned None; this case has outputs ['codes']: "
                                  "return one array, a tuple in that order or a mapping")]
    assert not r.ok and r.compared == 0


def test_run_lists_at_most_max_problems_lines_of_each_kind(suite: Path, tmp_path: Path,
                                                           capsys) -> None:
    mod = tmp_path / "refuse_all.py"
    mod.write_text("def encode(*a, **k):\n    raise NotImplementedError('none')\n")
    import sys
    sys.path.insert(0, str(tmp_path))
    try:
        argv = ["run", str(suite), "--impl", "formats.encode=refuse_all:encode"]
        assert main(argv + ["--max-problems", "1"]) == 1
        out = capsys.readouterr().out.splitlines()
        n = len(oracle.load(suite).cases)
        assert n >= 3
        assert out[1] == f"... and {n - 1} more not supported (--all lists them)"
        assert main(argv + ["--all"]) == 1
        out = capsys.readouterr().out.splitlines()
        assert sum(line.startswith("not supported: ") for line in out) == n
        assert main(argv + ["--max-problems", "-1"]) == 2
    finally:
        sys.path.remove(str(tmp_path))


def _e8m0_value(code: int) -> float:
    return math.nan if code == 0xFF else math.ldexp(1.0, code - 127)


def ml_like_round_to(x: np.ndarray) -> np.ndarray:
    return np.array([_e8m0_value(int(c)) for c in ml_like(x)], dtype=x.dtype)


def test_round_to_e8m0_names_and_takes_the_encoder_variants() -> None:
    with pytest.raises(ConformanceError) as err:
        conform("formats.round_to", ml_like_round_to, "e8m0", max_examples=10)
    assert err.value.explanation == (
        "every difference matches e8m0_tie=up, e8m0_zero=nan (documented variants, not "
        "a bug): add --variant e8m0_tie=up --variant e8m0_zero=nan")
    report = conform("formats.round_to", ml_like_round_to, "e8m0", max_examples=10,
                     variant={"e8m0_tie": "up", "e8m0_zero": "nan"})
    assert report.compared["values"] > 0


def test_a_decoder_summary_says_why_there_is_no_random_search() -> None:
    report = conform("formats.decode", lambda c: F.decode(c, "e4m3"), "e4m3")
    assert report.summary() == ("256 placed inputs swept (256 values compared), no random "
                                "search (a decoder's sweep is every code)")


def test_a_golden_attention_case_names_the_alignment_a_function_computes(
        tmp_path: Path) -> None:
    """The variant of a case held to a naive computation's error (relative_to_naive) is
    found too: the expectation and the naive result are recomputed under the sibling's
    option. The function is the reference attention computing top_left always (as
    SDPA's is_causal does); a plain error gets no such line."""
    from refimpl.attention import attention
    golden = tmp_path / "g"
    case = "attention.attention.gqa.causal_bottom_right.17x40"
    oracle.generate(golden, only=case, progress=None)

    def top_left(q, k, v, *, causal, causal_alignment, naive_dtype):
        return {"out": attention(q, k, v, causal=causal, causal_alignment="top_left")}

    def off(q, k, v, *, causal, causal_alignment, naive_dtype):
        out = attention(q, k, v, causal=causal, causal_alignment=causal_alignment)
        return {"out": out + np.float32(0.25)}

    for fn, note in ((top_left, True), (off, False)):
        r = oracle.run(golden, {"attention.attention": fn}, ids=[case],
                       inputs="keywords", allow_missing="no lse")
        ((_, message),) = r.failures
        assert message.startswith("out: ")
        assert message.endswith("; matches causal_alignment=top_left (a documented "
                                "variant, not a bug): add --variant "
                                "causal_alignment=top_left") == note


def test_round_to_names_ml_dtypes_nan_behaviour() -> None:
    def fake_quant(x):          # E2M1 as ml_dtypes rounds: NaN -> the opposite zero
        y = F.round_to(np.where(np.isnan(x), 0, x), "e2m1").astype(x.dtype)
        return np.where(np.isnan(x), np.where(np.signbit(x), 0.0, -0.0), y).astype(x.dtype)

    with pytest.raises(ConformanceError) as err:
        conform("formats.round_to", fake_quant, "e2m1", max_examples=10,
                variant={"nan_to_e2m1": "zero"})
    (kind,) = [f.kind for f in err.value.failures]
    assert kind == ("sign difference of zero (+0 vs -0) (NaN input), as ml_dtypes "
                    "(astype) does (ml_dtypes_nan_to_opposite_zero)")
