"""One parameter vocabulary in manifests: a format is ``fmt`` in every case type and a
rounding mode is its canonical name (``refimpl.rounding_modes``); suites written before
(``format`` / ``elem`` for ``fmt``, E8M0's ``rounding: "up"``) are still read.

``data/suite_before_fmt`` was written by the generator before the change (two cases:
``formats.encode.e8m0.f32.up`` with ``format`` and ``rounding: "up"``, and
``scaling.mx.e2m1.floor`` with ``elem``); its bytes are kept as they were written."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import oracle
from oracle import suite as S
from oracle.cases import registry
from oracle.cli import main
from refimpl import formats as F
from refimpl import scaling as Q
from refimpl.rounding_modes import ROUNDING_MODES

OLD = Path(__file__).parent / "data" / "suite_before_fmt"


def old_manifest() -> dict:
    return json.loads((OLD / "manifest.json").read_text())


def test_the_fixture_holds_the_old_names() -> None:
    params = {c["id"]: c["params"] for c in old_manifest()["cases"]}
    assert params["formats.encode.e8m0.f32.up"]["format"] == "e8m0"
    assert params["formats.encode.e8m0.f32.up"]["rounding"] == "up"
    assert params["scaling.mx.e2m1.floor"]["elem"] == "e2m1"


def test_every_case_definition_uses_fmt_and_canonical_rounding_names() -> None:
    seen_fmt = set()
    for spec in registry().all_cases:
        assert not set(spec.params) & set(S.OLD_PARAM_NAMES), spec.id
        if "rounding" in spec.params:
            assert spec.params["rounding"] in ROUNDING_MODES, spec.id
        if "fmt" in spec.params:
            seen_fmt.add(spec.operation)
    # every case type that names a format names it fmt
    assert {"formats.encode", "formats.decode", "formats.round_to", "formats.pack",
            "formats.unpack", "scaling.mx_quantize", "scaling.mx_matmul",
            "scaling.block_fp8_quantize", "scaling.tensor_quantize"} <= seen_fmt


def test_the_e8m0_ties_up_case_stores_nearest_away_and_keeps_its_id(tmp_path: Path) -> None:
    oracle.generate(tmp_path / "g", only="formats.encode.e8m0.f32.up", progress=None)
    new = json.loads((tmp_path / "g" / "manifest.json").read_text())["cases"][0]
    old = next(c for c in old_manifest()["cases"] if c["id"] == new["id"])
    assert new["params"] == {"fmt": "e8m0", "nan": None, "rounding": "nearest_away",
                             "saturate": False}
    assert new["variant"] == old["variant"] == {"choice": "e8m0_tie", "option": "up"}
    # the arrays are byte-identical: only the names changed
    for group in ("inputs", "expected"):
        for name, item in new[group].items():
            assert item["sha256"] == old[group][name]["sha256"]
    # nearest_away is E8M0's ties up: 3 is the midpoint of 2 (code 128) and 4 (129),
    # 0.75 of 0.5 (126) and 1 (127); ties up take the larger, ties to even the even code
    x = np.float32([3.0, 0.75])
    assert F.encode(x, "e8m0", rounding="nearest_away").tolist() == [129, 127]
    assert F.encode(x, "e8m0", rounding="nearest_even").tolist() == [128, 126]


def test_current_params_translates_old_names_only() -> None:
    assert S.current_params({"format": "e8m0", "rounding": "up", "saturate": False}) == \
        {"fmt": "e8m0", "rounding": "nearest_away", "saturate": False}
    assert S.current_params({"elem": "e2m1", "scale_rule": "floor"}) == \
        {"fmt": "e2m1", "scale_rule": "floor"}
    cur = {"fmt": "e4m3", "rounding": "toward_zero", "in_format": "fp8"}
    assert S.current_params(cur) == cur and S.current_params(cur) is not cur
    with pytest.raises(S.SuiteError, match="'format' and 'fmt'"):
        S.current_params({"format": "e4m3", "fmt": "e4m3"})


def test_an_old_suite_loads_in_the_current_vocabulary() -> None:
    s = S.load(OLD)
    params = {c.id: c.params for c in s.cases}
    assert params["formats.encode.e8m0.f32.up"] == {
        "fmt": "e8m0", "nan": None, "rounding": "nearest_away", "saturate": False}
    assert params["scaling.mx.e2m1.floor"]["fmt"] == "e2m1"
    assert "elem" not in params["scaling.mx.e2m1.floor"]


def test_verify_recomputes_an_old_suite_and_notes_no_parameter_difference() -> None:
    r = oracle.verify(OLD)
    assert r.ok and r.recomputed == 2, r.problems
    assert not [n for n in r.notes if "params" in n], r.notes
    assert main(["verify", str(OLD)]) == 0


def _results(root: Path, wrong: bool) -> Path:
    s = S.load(OLD)
    out = root / "res"
    for case in s.cases:
        for name, a in case.expected.items():
            a = a.copy()
            if wrong and case.id == "formats.encode.e8m0.f32.up" and name == "codes":
                a[:] = F.encode(case.inputs["x"], "e8m0", rounding="nearest_even")
            path = out / case.files[name]
            path.parent.mkdir(parents=True, exist_ok=True)
            np.save(path, a)
    return out


def test_check_reads_an_old_suite(tmp_path: Path) -> None:
    assert oracle.check(OLD, _results(tmp_path / "ok", False)).ok
    bad = oracle.check(OLD, _results(tmp_path / "bad", True))
    assert not bad.ok
    assert [p.case for p in bad.problems] == ["formats.encode.e8m0.f32.up"]


def test_run_passes_fmt_and_nearest_away_for_an_old_suite() -> None:
    calls = []

    def encode(x, *, fmt, rounding, saturate, nan):
        calls.append((fmt, rounding))
        return F.encode(x, fmt, rounding=rounding, saturate=saturate, nan=nan)

    def mx(x, *, fmt, block_size, axis, scale_rule, inf_block):
        q = Q.mx_quantize(x, fmt, block_size=block_size, axis=axis, scale_rule=scale_rule,
                          inf_block=inf_block)
        return {"codes": q.codes, "scales": q.scales, "dequantized": q.dequantize()}

    r = oracle.run(OLD, {"formats.encode": encode, "scaling.mx_quantize": mx})
    assert r.ok and r.compared == r.passed == 4, r.summary()
    assert calls == [("e8m0", "nearest_away")]


def test_a_manifest_with_an_old_name_beside_its_new_one_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "s"
    shutil.copytree(OLD, root)
    m = old_manifest()
    m["cases"][0]["params"]["fmt"] = "e8m0"
    (root / "manifest.json").write_bytes(S.finish_manifest(m))
    problems = S.validate_manifest(json.loads((root / "manifest.json").read_text()))
    assert any("both 'format'" in p for p in problems), problems
    with pytest.raises(S.SuiteError, match="both 'format'"):
        S.load(root)
    assert main(["verify", str(root)]) == 1
