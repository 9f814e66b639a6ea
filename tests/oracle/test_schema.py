"""``oracle/schema/manifest.schema.json``: the published JSON Schema of manifest.json.
Suites the oracle writes follow it, every tolerance kind is described in it, and
manifests broken in the ways a hand-written consumer would trip on are refused by both
the schema and the oracle's own validator."""
from __future__ import annotations

import copy
import json
from dataclasses import fields
from pathlib import Path

import pytest

import oracle
from oracle import tolerance as T
from oracle.schema import manifest_schema, schema_problems, validate
from oracle.suite import validate_manifest


@pytest.fixture(scope="module")
def manifest(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("schema") / "golden"
    # codes with formats, ulp, exact_nan_class, exact_unless_nan_scale, variants
    oracle.generate(out, only="*e2m1*", progress=None)
    return json.loads((out / "manifest.json").read_text())


def test_a_written_suite_follows_the_schema(manifest: dict) -> None:
    assert len(manifest["cases"]) > 5
    assert schema_problems(manifest) == []


def test_every_tolerance_kind_is_in_the_schema() -> None:
    defs = manifest_schema()["$defs"]
    for kind, cls in T.KINDS.items():
        d = defs[f"tolerance_{kind}"]
        keys = {"kind"} | {T._json_key(f) for f in fields(cls)}
        assert set(d["properties"]) == keys and set(d["required"]) == keys, kind
    assert len(defs["tolerance"]["oneOf"]) == len(T.KINDS)


def _first_expected(m: dict) -> dict:
    return next(iter(m["cases"][0]["expected"].values()))


MUTATIONS = {
    "missing schema_version": lambda m: m.pop("schema_version"),
    "extra top-level field": lambda m: m.__setitem__("extra", 1),
    "schema_version 2": lambda m: m.__setitem__("schema_version", 2),
    "seed not an integer": lambda m: m["generation"].__setitem__("seed", "1"),
    "case without params": lambda m: m["cases"][0].pop("params"),
    "bad case id": lambda m: m["cases"][0].__setitem__("id", "../x"),
    "bad sha256": lambda m: _first_expected(m).__setitem__("sha256", "ABC"),
    "bad dtype": lambda m: _first_expected(m).__setitem__("dtype", "object"),
    "negative shape": lambda m: _first_expected(m).__setitem__("shape", [-1]),
    "no tolerance": lambda m: _first_expected(m).pop("tolerance"),
    "unknown tolerance": lambda m: _first_expected(m).__setitem__("tolerance",
                                                                  {"kind": "close"}),
    "ulp without n": lambda m: _first_expected(m).__setitem__(
        "tolerance", {"kind": "ulp", "format": "fp32"}),
    "variant without option": lambda m: m["cases"][0].__setitem__("variant",
                                                                  {"choice": "x"}),
    "no expected output": lambda m: m["cases"][0].__setitem__("expected", {}),
}


@pytest.mark.parametrize("name", MUTATIONS)
def test_schema_and_validator_both_refuse(manifest: dict, name: str) -> None:
    m = copy.deepcopy(manifest)
    MUTATIONS[name](m)
    assert schema_problems(m), name
    assert validate_manifest(m), name


def test_the_validator_refuses_keywords_it_does_not_implement() -> None:
    with pytest.raises(ValueError, match="not implemented"):
        validate(1, {"maximum": 3})
    assert validate(True, {"type": "integer"})          # JSON: true is not an integer
    assert validate(1, {"const": True})
    assert not validate({"a": 1}, {"type": "object", "additionalProperties":
                                   {"type": "integer"}})


def test_the_schema_file_ships_in_the_package() -> None:
    import oracle.schema as S

    assert S.SCHEMA_FILE.parent == Path(S.__file__).parent
    assert manifest_schema()["properties"]["schema_version"]["const"] == 1
