"""Implementation-defined choices in the golden suite: which cases carry which variant,
the option written into their params, the expected codes of the variant cases (tables
written out by hand), and ``--variant`` on the command line (an unknown choice or option
is an error, never a silent keep-all or skip-all)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import oracle
from oracle.cases import registry
from oracle.cli import main
from oracle.generation import generate
from oracle.random_stream import CaseRandom
from oracle.suite import variant_pairs
from oracles import built_case

ROOT = Path(__file__).resolve().parents[2]


def _variants(spec) -> dict[str, str]:
    return dict(variant_pairs(spec.variant))


# --- E8M0 of zero and of negative numbers -------------------------------------------

#: x -> code, by hand: E8M0 code = exponent + 127; 0xFF NaN; nearest-even, no ties here
E8M0_ZERO_CODES = {
    "min": {0.0: 0x00, -0.0: 0x00, 1.0: 0x7F, 0.5: 0x7E, 2.0 ** -127: 0x00,
            2.0 ** 127: 0xFE, 2.0 ** -126: 0x01},
    "nan": {0.0: 0xFF, -0.0: 0xFF, 1.0: 0x7F, 0.5: 0x7E, 2.0 ** -127: 0x00,
            2.0 ** 127: 0xFE, 2.0 ** -126: 0x01},
}
#: -3.5 -> |x| rounds to 4 (3.5 is above the 2..4 midpoint 3); -2^-140 -> |x| rounds to
#: the smallest code; -3e38 -> |x| is above 2^127 and overflows to NaN
E8M0_NEGATIVE_CODES = {
    "nan": [0xFF] * 7 + [0x7F, 0x81],
    "magnitude": [0x7F, 0x7E, 0x81, 0x00, 0xFE, 0xFF, 0x00, 0x7F, 0x81],
}


@pytest.mark.parametrize("option", ["min", "nan"])
def test_e8m0_zero_variant(option: str) -> None:
    spec, inputs, out = built_case(f"formats.encode.e8m0.f32.nearest_even.zero={option}")
    assert _variants(spec) == {"e8m0_zero": option}
    assert spec.params["e8m0_zero"] == option
    for x, code in zip(inputs["x"], out["codes"]):
        assert code == E8M0_ZERO_CODES[option][float(x)], x
    assert np.signbit(inputs["x"]).any()                       # -0.0 is among them


@pytest.mark.parametrize("option", ["nan", "magnitude"])
def test_e8m0_negative_variant(option: str) -> None:
    spec, inputs, out = built_case(f"formats.encode.e8m0.f32.nearest_even.negative={option}")
    assert _variants(spec) == {"e8m0_negative": option}
    assert spec.params["e8m0_negative"] == option
    assert inputs["x"].tolist()[:3] == [-1.0, -0.5, -3.5]
    assert out["codes"].tolist() == E8M0_NEGATIVE_CODES[option]


def test_general_e8m0_cases_do_not_depend_on_zero_or_sign() -> None:
    for spec in registry().cases("full"):
        if spec.operation == "formats.encode" and spec.params["fmt"] == "e8m0" \
                and not ({"e8m0_zero", "e8m0_negative"} & set(_variants(spec))):
            x = spec.build(CaseRandom(1, spec.id))["x"]
            assert not (x == 0).any() and not ((x < 0) & np.isfinite(x)).any(), spec.id
            assert (x > 0).sum() > 100                          # still a real sweep


def test_e8m0_options_are_refused_elsewhere() -> None:
    op = registry().operations["formats.encode"]
    params = {"fmt": "e2m1", "rounding": "nearest_even", "saturate": False, "nan": None,
              "e8m0_zero": "nan"}
    with pytest.raises(ValueError, match="e8m0 only"):
        op.compute({"x": np.zeros(2, np.float32)}, params)
    with pytest.raises(ValueError, match="e8m0_negative"):
        op.compute({"x": np.zeros(2, np.float32)},
                   {**params, "fmt": "e8m0", "e8m0_negative": "abs"})


# --- NaN into FP4/FP6: its sign -----------------------------------------------------

#: by hand: sign bit 0x8 (FP4) / 0x20 (FP6); 1.0 = exponent field = bias: E2M1 0b0_01_0,
#: E2M3 0b0_01_000, E3M2 0b0_011_00
ONE = {"e2m1": (0x2, 0x8), "e2m3": (0x08, 0x20), "e3m2": (0x0C, 0x20)}


@pytest.mark.parametrize("fmt", ["e2m1", "e2m3", "e3m2"])
def test_nan_sign_variants(fmt: str) -> None:
    one, sign = ONE[fmt]
    rest = [one, one | sign, 0x00]                   # 1.0, -1.0, 0.0
    for option, nan_codes in (("zero", [0x0, 0x0]), ("signed_zero", [0x0, sign]),
                              ("0x8", [0x8, 0x8])):
        spec, inputs, out = built_case(f"formats.encode.{fmt}.f32.nearest_even.nan={option}")
        x = inputs["x"]
        assert np.isnan(x[:2]).all() and not np.signbit(x[0]) and np.signbit(x[1])
        assert _variants(spec) == {f"nan_to_{fmt}": option}
        assert spec.params["nan"] == {"zero": "zero", "signed_zero": "signed_zero",
                                      "0x8": 0x8}[option]
        assert out["codes"].tolist() == nan_codes + rest, option


# --- causal alignment ---------------------------------------------------------------

def _depends_on_alignment(spec) -> bool:
    reg = registry()
    op = reg.operations[spec.operation]
    x = spec.build(CaseRandom(1, spec.id))
    p = dict(spec.params)
    other = "top_left" if p.get("causal_alignment", "bottom_right") == "bottom_right" \
        else "bottom_right"
    with np.errstate(all="ignore"):
        a, b = op.compute(x, p), op.compute(x, {**p, "causal_alignment": other})
    return any(not np.array_equal(a[k], b[k], equal_nan=True) for k in a)


@pytest.mark.slow
def test_every_alignment_dependent_case_carries_the_variant() -> None:
    dependent = []
    for spec in registry().cases("default"):
        if not (spec.operation.startswith("attention.")
                or spec.operation == "kvcache.paged_attention") \
                or spec.operation == "attention.merge_attention_states":
            continue
        if _depends_on_alignment(spec):
            dependent.append(spec.id)
            v = _variants(spec)
            assert "causal_alignment" in v, spec.id
            assert spec.params.get("causal_alignment") == v["causal_alignment"], spec.id
    # the known ones, so the sweep above cannot pass by finding nothing
    for cid in ("attention.flash_v2.causal.8x32", "attention.attention.window_padding",
                "attention.attention.empty_rows", "attention.backward.causal",
                "kvcache.paged_attention.decode_and_prefill",
                "attention.attention.long_kv.bf16.d128"):
        assert cid in dependent


def test_empty_rows_carries_both_of_its_choices() -> None:
    spec, _, _ = built_case("attention.attention.empty_rows")
    assert _variants(spec) == {"lse_of_empty_row": "-inf", "causal_alignment": "bottom_right"}


def _attention_f64(q, k, v, mask):
    """Softmax attention in float64 with an explicit mask (numpy only)."""
    s = np.einsum("...qd,...kd->...qk", q, k) / np.sqrt(q.shape[-1])
    s = np.where(mask, s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return np.einsum("...qk,...kd->...qd", p / p.sum(axis=-1, keepdims=True), v)


@pytest.mark.slow
def test_long_bf16_case_against_a_float64_reference() -> None:
    spec, x, out = built_case("attention.attention.long_kv.bf16.d128")
    b, hq, sq, d = x["q"].shape
    sk = x["k"].shape[-2]
    assert (b, d) == (1, 128) and sk >= 1024 and spec.params["naive_dtype"] == "bf16"
    assert spec.level == 1 and spec.params["causal"] is True
    i, j = np.arange(sq)[:, None], np.arange(sk)[None, :]
    k = np.repeat(x["k"], hq // x["k"].shape[1], axis=1).astype(np.float64)
    v = np.repeat(x["v"], hq // x["v"].shape[1], axis=1).astype(np.float64)
    want = _attention_f64(x["q"].astype(np.float64), k, v, j <= i + (sk - sq))
    assert np.abs(out["out"] - want).max() < 1e-5         # float32 scores, exact sums
    top_left = _attention_f64(x["q"].astype(np.float64), k, v, j <= i)
    assert np.abs(out["out"] - top_left).max() > 1e-2          # the alignment matters
    # the BF16 naive result is a real low-precision computation, within its own rule
    naive_err = np.abs(out["naive"].astype(np.float64) - want).max()
    assert 1e-3 < naive_err < 1.0      # BF16 (8-bit significand) logits near 5 and more


# --- --variant on the command line ---------------------------------------------------

def test_generate_variant_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "g"
    assert main(["generate", "--out", str(out), "--quiet", "--only", "scaling.mx.*",
                 "--variant", "mx_scale_rul=floor"]) == 2
    err = capsys.readouterr().err
    assert "unknown choice 'mx_scale_rul'" in err and "mx_scale_rule" in err \
        and "causal_alignment" in err
    assert main(["generate", "--out", str(out), "--quiet", "--only", "scaling.mx.*",
                 "--variant", "mx_scale_rule=flor"]) == 2
    err = capsys.readouterr().err
    assert "unknown option 'flor'" in err and "floor, ceil, even, rceil" in err
    assert main(["generate", "--list", "--variant", "mx_scale_rule"]) == 2
    assert "CHOICE=OPTION" in capsys.readouterr().err
    assert not out.exists()                                       # nothing written


def test_generate_variant_selects_and_verifies(capsys, tmp_path: Path) -> None:
    out = tmp_path / "g"
    assert main(["generate", "--out", str(out), "--quiet", "--only", "scaling.mx.e2m1.*",
                 "--variant", "mx_scale_rule=rceil"]) == 0
    m = json.loads((out / "manifest.json").read_text())
    ids = [c["id"] for c in m["cases"]]
    assert "scaling.mx.e2m1.rceil.tiny_amax" in ids and "scaling.mx.e2m1.rceil" in ids
    assert not any(".floor" in i and "inf_block" not in i for i in ids)
    assert "scaling.mx.e2m1.floor.inf_block=max" not in ids        # a full-suite case
    assert m["generation"]["variants"] == {"mx_scale_rule": "rceil"}
    capsys.readouterr()
    assert main(["verify", str(out), "--quiet"]) == 0, capsys.readouterr().out
    assert main(["generate", "--list", "--only", "attention.attention.empty_rows",
                 "--variant", "causal_alignment=top_left"]) == 0
    assert "0 cases" in capsys.readouterr().out                   # skipped: bottom_right


def test_check_variant_errors_and_skips(capsys, tmp_path: Path) -> None:
    golden = tmp_path / "g"
    generate(golden, only="formats.encode.e8m0.*", progress=None)
    res = tmp_path / "res"
    for case in oracle.load(golden):
        for name, arr in case.expected.items():
            (res / case.files[name]).parent.mkdir(parents=True, exist_ok=True)
            np.save(res / case.files[name], arr)
    args = ["check", str(golden), "--results", str(res)]
    assert main(args + ["--variant", "e8m0_zeros=nan"]) == 2
    err = capsys.readouterr().err
    assert "unknown choice 'e8m0_zeros'" in err and "e8m0_zero," in err
    assert main(args + ["--variant", "e8m0_zero=NaN"]) == 2
    assert "allowed: min, nan" in capsys.readouterr().err
    # a choice of this oracle version that the suite does not hold is accepted
    assert main(args + ["--variant", "causal_alignment=top_left"]) == 0
    capsys.readouterr()
    assert main(args + ["--variant", "e8m0_zero=nan", "--variant", "e8m0_tie=up"]) == 0
    assert "6/6 outputs pass, 2 cases of other variants skipped" in capsys.readouterr().out
    # an implementation giving NaN for zero fails the min case unless it says so
    zmin = res / "formats.encode.e8m0.f32.nearest_even.zero=min" / "codes.npy"
    np.save(zmin, np.load(res / "formats.encode.e8m0.f32.nearest_even.zero=nan"
                          / "codes.npy"))
    assert main(args) == 1
    assert "zero=min" in capsys.readouterr().out
    assert main(args + ["--variant", "e8m0_zero=nan"]) == 0
    assert "1 case of other variants skipped" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.parametrize("command", [
    ["generate", "--list", "--variant", "causal_alignmnt=top_left"],
    ["generate", "--list", "--variant", "causal_alignment=top-left"],
])
def test_variant_errors_through_python_m_oracle(command: list[str]) -> None:
    r = subprocess.run([sys.executable, "-m", "oracle", *command], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    key, _, value = command[-1].partition("=")
    if key == "causal_alignmnt":
        assert "known choices:" in r.stderr and "causal_alignment" in r.stderr
    else:
        assert "allowed: bottom_right, top_left" in r.stderr


def test_manifest_variant_forms() -> None:
    from oracle.generation import build_case, header
    from oracle.suite import validate_manifest

    reg = registry()
    (spec,) = [c for c in reg.all_cases if c.id == "attention.attention.empty_rows"]
    entry, _ = build_case(spec, reg, 1)
    assert entry["variant"] == [{"choice": "lse_of_empty_row", "option": "-inf"},
                                {"choice": "causal_alignment", "option": "bottom_right"}]
    m = header(reg, "default", 1, None, None, False)
    m["cases"], m["content_sha256"] = [entry], "0" * 64

    def variant_problems(v) -> list[str]:
        entry["variant"] = v
        return [p for p in validate_manifest(m) if "variant" in p]

    assert not variant_problems(entry["variant"])
    assert not variant_problems({"choice": "a", "option": "b"})
    assert not variant_problems(None)
    for bad in ([{"choice": "a", "option": "b"}],                        # a list of one
                [{"choice": "a", "option": "b"}, {"choice": "a", "option": "c"}],
                [{"choice": "a", "option": "b"}, {"choice": "c"}],
                {"choice": "a", "option": 1}, "a=b", []):
        assert variant_problems(bad), bad


def test_casespec_refuses_a_malformed_variant() -> None:
    from oracle.cases import CaseSpec

    def spec(v):
        return CaseSpec("demo.x", "formats.decode", {}, lambda r: {}, variant=v)

    assert spec(({"choice": "a", "option": "b"}, {"choice": "c", "option": "d"})).variant
    for bad in (({"choice": "a", "option": "b"}, {"choice": "a", "option": "d"}),
                {"choice": "a"}, ({"choice": "a", "option": "b"},)):
        with pytest.raises(ValueError, match="variant"):
            spec(bad)
