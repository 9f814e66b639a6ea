"""``check``, ``verify`` and their command lines against files that lie and I/O that
fails: a result of another dtype, decoded values where codes are expected, a misnamed
result file, a case that expects nothing, an I/O error at the top, negative counts.
Each ends in a clear problem or message, never a pass and never a traceback.

Expected values come from ``numpy.float16`` casting (IEEE binary16, round to nearest
even) and float32 neighbours counted by hand (0x3F800001 is one ulp above 1.0)."""
from __future__ import annotations

import errno
import json
from pathlib import Path

import numpy as np
import pytest

import oracle
from oracle import suite as fmt
from oracle import tolerance as T
from oracle.cases import Area, CaseSpec, Operation, Registry
from oracle.cli import main
from oracle.generation import build_case, generate, merge
from oracle.tolerance import ExactNaNClass, Ulp
from oracle.verification import check, verify


def _codes(inputs, params):
    return {"codes": np.asarray(inputs["x"]).astype(np.float16).view(np.uint16)}


def _halve(inputs, params):
    return {"y": np.asarray(inputs["x"]) / np.float32(2)}


def _cases():
    return [
        CaseSpec("demo.codes.c", "demo.codes", {}, lambda r: {"x": r.normal(16)},
                 tolerance={"codes": ExactNaNClass()}, formats={"codes": "fp16"}, level=0),
        CaseSpec("demo.halve.c", "demo.halve", {},
                 lambda r: {"x": np.float32([1.0, 2.0, 3.0, 4.0])},
                 tolerance={"y": Ulp(1, "fp32")}, level=0),
    ]


DEMO = Registry([Area("demo", {}, [Operation("demo.codes", _codes, ""),
                                   Operation("demo.halve", _halve, "")], _cases)])
HALF = np.float32([0.5, 1.0, 1.5, 2.0])          # x / 2, exact in float32


@pytest.fixture()
def golden(tmp_path: Path) -> Path:
    generate(tmp_path / "g", registry=DEMO, progress=None, suite="full")
    return tmp_path / "g"


def _results(golden: Path, dest: Path, y: np.ndarray = HALF) -> Path:
    case = oracle.load(golden)["demo.codes.c"]
    (dest / "demo.codes.c").mkdir(parents=True)
    np.save(dest / "demo.codes.c" / "codes.npy", case.expected["codes"])
    (dest / "demo.halve.c").mkdir()
    np.save(dest / "demo.halve.c" / "y.npy", y)
    return dest


def _messages(report) -> list[str]:
    return [f"{p.case} {p.file} {p.message}" for p in report.problems]


def test_the_golden_results_pass(golden: Path, tmp_path: Path) -> None:
    rep = check(golden, _results(golden, tmp_path / "r"))
    assert rep.ok and rep.checked == rep.passed == 2
    assert check(golden, golden).ok          # the suite's own files, inputs included


@pytest.mark.parametrize("order", ["<", ">"])
def test_big_endian_results_are_compared_by_value(golden: Path, tmp_path: Path,
                                                  order: str) -> None:
    assert check(golden, _results(golden, tmp_path / "r", HALF.astype(order + "f4"))).ok
    two_ulps = (HALF.view(np.uint32) + np.uint32([0, 2, 0, 0])).view(np.float32)
    rep = check(golden, _results(golden, tmp_path / "w", two_ulps.astype(order + "f4")))
    assert not rep.ok and any("1 of 4 elements outside ulp" in m for m in _messages(rep))


def test_a_result_of_another_dtype_fails_even_within_the_tolerance(golden: Path,
                                                                   tmp_path: Path) -> None:
    # the same values as float64 are inside 1 ulp; the layout asks for the dtype
    rep = check(golden, _results(golden, tmp_path / "r", HALF.astype(np.float64)))
    assert not rep.ok and rep.passed == 1
    assert any("y: dtype float64 differs from the expected float32" in m
               for m in _messages(rep))


def test_decoded_values_where_codes_are_expected_fail(golden: Path, tmp_path: Path) -> None:
    res = _results(golden, tmp_path / "r")
    codes = oracle.load(golden)["demo.codes.c"].expected["codes"]
    np.save(res / "demo.codes.c" / "codes.npy", codes.view(np.float16))
    rep = check(golden, res)
    assert any("dtype float16 differs from the expected uint16 (the fp16 codes, not "
               "decoded values)" in m for m in _messages(rep))


def test_a_misnamed_result_fails_even_with_allow_missing(golden: Path, tmp_path: Path,
                                                         capsys) -> None:
    res = _results(golden, tmp_path / "r")
    (res / "demo.halve.c" / "y.npy").rename(res / "demo.halve.c" / "Y.npy")
    rep = check(golden, res, allow_missing="not implemented yet")
    assert not rep.ok and rep.missing == ["demo.halve.c/y.npy"]
    assert _messages(rep) == ["demo.halve.c demo.halve.c/Y.npy result file is none of "
                              "its case's outputs (misnamed?); it was not compared"]
    assert main(["check", str(golden), "--results", str(res),
                 "--allow-missing", "later"]) == 1
    assert "demo.halve.c/Y.npy" in capsys.readouterr().out
    np.save(res / "demo.halve.c" / "x.npy", np.float32([1, 2, 3, 4]))   # an input copy
    (res / "other").mkdir()                          # outside any case folder: not ours
    (res / "demo.halve.c" / "Y.npy").rename(res / "other" / "Y.npy")
    assert check(golden, res, allow_missing="later").ok


def test_a_case_that_expects_nothing_is_refused(golden: Path) -> None:
    m = json.loads((golden / "manifest.json").read_text())
    case = m["cases"][1]
    case["reference"] = {"y": {k: v for k, v in case["expected"]["y"].items()
                               if k != "tolerance"}}
    case["expected"] = {}
    (golden / "manifest.json").write_bytes(fmt.finish_manifest(m))
    problems = [p.message for p in verify(golden, registry=DEMO, progress=None).problems]
    assert any("expected holds no output" in p for p in problems)
    with pytest.raises(fmt.SuiteError, match="expected holds no output"):
        oracle.load(golden)


def test_generation_refuses_a_case_that_expects_nothing() -> None:
    spec = CaseSpec("demo.halve.ref", "demo.halve", {}, lambda r: {"x": np.float32([1])},
                    reference=("y",), level=0)
    with pytest.raises(ValueError, match="needs an expected output"):
        build_case(spec, DEMO, 1)


def test_an_io_error_at_the_top_is_a_message_and_exit_1(golden: Path, monkeypatch,
                                                        capsys) -> None:
    import oracle.cli.verify as cli_verify

    def refuse(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied", str(golden / "x"))
    monkeypatch.setattr(cli_verify, "verify", refuse)
    assert main(["verify", str(golden)]) == 1
    err = capsys.readouterr().err
    assert f"Permission denied: '{golden / 'x'}'" in err and "Traceback" not in err


def test_negative_counts_are_usage_errors(golden: Path, tmp_path: Path, capsys) -> None:
    res = _results(golden, tmp_path / "r")
    assert main(["check", str(golden), "--results", str(res), "--rows", "-1"]) == 2
    assert "--rows must be >= 0" in capsys.readouterr().err
    assert main(["verify", str(golden), "--max-problems", "-1"]) == 2
    assert "--max-problems must be >= 0" in capsys.readouterr().err
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="rows_per_output"):
            check(golden, res, rows_per_output=bad)


@pytest.mark.parametrize("where", ["array", "tolerance"])
def test_a_format_this_oracle_does_not_know_is_refused(golden: Path, where: str) -> None:
    m = json.loads((golden / "manifest.json").read_text())
    if where == "array":
        m["cases"][0]["expected"]["codes"]["format"] = "fp17"
    else:
        m["cases"][1]["expected"]["y"]["tolerance"]["format"] = "fp17"
    (golden / "manifest.json").write_bytes(fmt.finish_manifest(m))
    problems = [p.message for p in verify(golden, registry=DEMO, progress=None).problems]
    assert any("'fp17' is unknown" in p for p in problems)
    with pytest.raises(fmt.SuiteError, match="'fp17' is unknown"):
        oracle.load(golden)


# --- arguments of the library calls: a TypeError or ValueError naming the argument ----

def _calls(golden: Path, tmp: Path) -> list:
    out = tmp / "new"
    gen = dict(registry=DEMO, progress=None)
    return [
        ("results", lambda: check(golden, None)),
        ("root", lambda: check(123, golden)),
        ("only", lambda: check(golden, golden, only=5)),
        ("variants", lambda: check(golden, golden, variants=["a"])),
        ("strict", lambda: check(golden, golden, strict="yes")),
        ("root", lambda: verify(123, progress=None)),
        ("recompute", lambda: verify(golden, recompute="no", progress=None)),
        ("root", lambda: oracle.load(None)),
        ("root", lambda: oracle.load(str(golden).encode())),
        ("out", lambda: generate(None, **gen)),
        ("only", lambda: generate(out, only=5, **gen)),
        ("seed", lambda: generate(out, seed=1.5, **gen)),
        ("seed", lambda: generate(out, seed="1", **gen)),
        ("suite", lambda: generate(out, suite=[], **gen)),
        ("shard", lambda: generate(out, shard=(0, 1), **gen)),
        ("shard", lambda: generate(out, shard="1/2", **gen)),
        ("text", lambda: generate(out, text="yes", **gen)),
        ("jobs", lambda: generate(out, jobs=2.0, **gen)),
        ("shards", lambda: merge(str(golden), out)),
        ("shards[0]", lambda: merge([None], out)),
        ("only", lambda: oracle.load(golden).select(only=5)),
        ("tolerance", lambda: T.assert_matches(np.zeros(1), np.zeros(1), None)),
    ]


def test_bad_arguments_are_named(golden: Path, tmp_path: Path) -> None:
    before = sorted(p.name for p in tmp_path.iterdir())
    for name, call in _calls(golden, tmp_path):
        with pytest.raises((TypeError, ValueError)) as info:
            call()
        assert str(info.value).startswith(name) or f"{name} " in str(info.value) \
            or f"--{name}" in str(info.value), (name, str(info.value))
    assert sorted(p.name for p in tmp_path.iterdir()) == before     # nothing written
