"""The manifest of a suite (:mod:`oracle.suite`): canonical JSON and the content
hash, the paths of arrays, the structural validation of every case, and strict
parsing (no ``NaN``/``Infinity``, nesting at most :data:`MAX_JSON_DEPTH` deep)."""
from __future__ import annotations

import json
import math
import platform
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from oracle import tolerance as tol
from oracle._version import __version__
from oracle.suite_schema import (ARRAY_NAME, CASE_ID, DTYPES, MANIFEST, MAX_JSON_DEPTH,
                                 MAX_MANIFEST_BYTES, MissingFile, OLD_PARAM_NAMES, SCHEMA,
                                 SCHEMA_VERSION, SuiteError, TEXT_FILE, _SHA, valid_variant)
from oracle.suite_files import read_checked, sha256
from refimpl.formats import get as get_format


# ---------------------------------------------------------------------------------
# manifest


def runtime_versions() -> dict[str, str]:
    """The versions of Python and NumPy running this process, as a manifest's
    ``runtime`` records them (``platform.python_version()``, ``numpy.__version__``)."""
    return {"python": platform.python_version(), "numpy": np.__version__}


def canonical_json(obj: Any, *, sort_keys: bool = True) -> bytes:
    """Deterministic JSON: fixed indentation and separators, ASCII, trailing newline;
    keys sorted (the form hashed) or in insertion order (the form written, which is
    deterministic too and reads schema first)."""
    return (json.dumps(obj, sort_keys=sort_keys, indent=1, ensure_ascii=True,
                       allow_nan=False) + "\n").encode("ascii")


def content_hash(manifest: Mapping[str, Any]) -> str:
    body = {k: v for k, v in manifest.items() if k != "content_sha256"}
    return sha256(canonical_json(body))


def finish_manifest(manifest: dict[str, Any]) -> bytes:
    """Add ``content_sha256`` and return the manifest's bytes."""
    manifest = dict(manifest)
    manifest.pop("content_sha256", None)
    manifest["content_sha256"] = content_hash(manifest)
    return canonical_json(manifest, sort_keys=False)


def array_text_path(case_id: str, name: str) -> str:
    """Where an array's text form lives in a suite (``generate --text``)."""
    return f"{case_id}/{name}.txt"


def array_path(case_id: str, name: str) -> str:
    return f"{case_id}/{name}.npy"


def _check_array_entry(entry: Any, case_id: str, name: str, where: str) -> list[str]:
    if not isinstance(entry, dict):
        return [f"{where}: must be an object"]
    problems = []
    allowed = {"file", "sha256", "dtype", "shape", "format", "tolerance", "text"}
    extra = set(entry) - allowed
    if extra:
        problems.append(f"{where}: unexpected fields {sorted(extra)}")
    for key in ("file", "sha256", "dtype", "shape"):
        if key not in entry:
            problems.append(f"{where}: missing field {key!r}")
    if problems:
        return problems
    if entry["file"] != array_path(case_id, name):
        problems.append(f"{where}: file must be {array_path(case_id, name)!r}, "
                        f"manifest says {entry['file']!r}")
    if not isinstance(entry["sha256"], str) or not _SHA.match(entry["sha256"]):
        problems.append(f"{where}: sha256 must be 64 lowercase hex digits")
    if not isinstance(entry["dtype"], str) or entry["dtype"] not in DTYPES:
        problems.append(f"{where}: dtype {entry['dtype']!r} is not allowed")
    shape = entry["shape"]
    if not (isinstance(shape, list) and all(isinstance(n, int) and not isinstance(n, bool)
                                            and n >= 0 for n in shape)):
        problems.append(f"{where}: shape must be a list of non-negative integers")
    if "text" in entry:
        t = entry["text"]
        want = array_text_path(case_id, name)
        if not (isinstance(t, dict) and set(t) == {"file", "sha256"} and t["file"] == want
                and isinstance(t["sha256"], str) and _SHA.match(t["sha256"])):
            problems.append(f"{where}: text must be {{file: {want!r}, sha256}}")
    fmt = entry.get("format")
    if "format" in entry and not (isinstance(fmt, str)
                                  and str(entry["dtype"]).startswith("uint")):
        problems.append(f"{where}: format must be a string naming the format of unsigned codes")
    elif "format" in entry and not _known_format(fmt):
        problems.append(f"{where}: format {fmt!r} is unknown to oracle {__version__}")
    return problems


def _known_format(name: str) -> bool:
    """Whether ``name`` is a format of the registry (or binary64, which tolerances know
    without it)."""
    if name.lower() in ("fp64", "float64", "binary64"):
        return True
    try:
        get_format(name)
    except (ValueError, TypeError):
        return False
    return True


def validate_manifest(m: Any, operations: Mapping[str, Any] | None = None) -> list[str]:
    """Schema problems of a parsed manifest (empty when valid). With ``operations``,
    unknown operation names are problems too."""
    structure, content = manifest_problems(m, operations)
    return structure + content


def manifest_problems(m: Any, operations: Mapping[str, Any] | None = None
                      ) -> tuple[list[str], list[str]]:
    """(structure problems, content-hash problems) of a parsed manifest. With any
    structure problem, no file the manifest names may be read; a manifest whose
    structure is sound but whose content hash differs (edited by hand) still names
    only safe paths."""
    problems = _structure_problems(m, operations)
    if problems:
        return problems, []
    if m["content_sha256"] != content_hash(m):
        return [], ["manifest.json: content_sha256 does not match the manifest's "
                    "content (edited by hand? regenerate the suite instead)"]
    return [], []


def _structure_problems(m: Any, operations: Mapping[str, Any] | None) -> list[str]:
    if not isinstance(m, dict):
        return ["manifest.json: the top level must be an object"]
    problems = []
    required = {"schema": str, "schema_version": int, "oracle_version": str,
                "spec_versions": dict, "generation": dict, "cases": list,
                "content_sha256": str}
    for key, typ in required.items():
        if key not in m:
            problems.append(f"manifest.json: missing field {key!r}")
        elif not isinstance(m[key], typ) or isinstance(m[key], bool):
            problems.append(f"manifest.json: field {key!r} must be {typ.__name__}")
    optional = {"runtime": dict}   # absent from suites written before it was recorded
    for key, typ in optional.items():
        if key in m and not isinstance(m[key], typ):
            problems.append(f"manifest.json: field {key!r} must be {typ.__name__}")
    extra = set(m) - set(required) - set(optional)
    if extra:
        problems.append(f"manifest.json: unexpected fields {sorted(extra)}")
    if problems:
        return problems
    if m["schema"] != SCHEMA:
        problems.append(f"manifest.json: schema is {m['schema']!r}, expected {SCHEMA!r}")
    if m["schema_version"] != SCHEMA_VERSION:
        problems.append(f"manifest.json: schema_version {m['schema_version']} is not "
                        f"supported (this oracle reads {SCHEMA_VERSION})")
    problems += _check_header(m)
    seen: set[str] = set()
    for i, case in enumerate(m["cases"]):
        problems += _validate_case(case, i, seen, operations)
    return problems


#: generation parameters and their types (plus ``variants``, choice -> option, present
#: only when ``generate --variant`` left cases out)
GENERATION = {"suite": (str,), "seed": (int,), "only": (str, type(None)),
              "shard": (str, type(None)), "text": (bool,), "sources_sha256": (str,)}


#: what ``runtime`` records: the software that wrote the suite
RUNTIME = ("python", "numpy")


def _check_header(m: dict[str, Any]) -> list[str]:
    problems = []
    sv = m["spec_versions"]
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in sv.items()):
        problems.append("manifest.json: spec_versions must map names to version strings")
    rt = m.get("runtime")
    if rt is not None and not (set(rt) == set(RUNTIME) and all(
            isinstance(v, str) and v for v in rt.values())):
        problems.append(f"manifest.json: runtime must map exactly {sorted(RUNTIME)} to "
                        "version strings")
    gen = m["generation"]
    if set(gen) - {"variants"} != set(GENERATION):
        problems.append(f"manifest.json: generation must have exactly the fields "
                        f"{sorted(GENERATION)} (and optionally variants)")
    elif "variants" in gen and not (
            isinstance(gen["variants"], dict) and gen["variants"]
            and all(isinstance(k, str) and isinstance(v, str)
                    for k, v in gen["variants"].items())):
        problems.append("manifest.json: generation.variants must map choices to options")
    else:
        for key, types in GENERATION.items():
            v = gen[key]
            if not isinstance(v, types) or (isinstance(v, bool) and bool not in types):
                problems.append(f"manifest.json: generation.{key} has the wrong type")
    return problems


def _validate_case(case: Any, i: int, seen: set[str],
                   operations: Mapping[str, Any] | None) -> list[str]:
    where = f"manifest.json: cases[{i}]"
    if not isinstance(case, dict):
        return [f"{where}: must be an object"]
    keys = {"id", "operation", "params", "variant", "description", "inputs",
            "expected", "reference", "text"}
    missing = keys - set(case) - {"text"}
    if missing or set(case) - keys:
        return [f"{where}: missing fields {sorted(missing)}, "
                f"unexpected fields {sorted(set(case) - keys)}"]
    cid = case["id"]
    if not isinstance(cid, str) or not CASE_ID.match(cid):
        return [f"{where}: id {cid!r} is not a valid case id"]
    where = f"case {cid}"
    problems = []
    if cid in seen:
        problems.append(f"{where}: duplicate case id")
    seen.add(cid)
    if not isinstance(case["operation"], str):
        problems.append(f"{where}: operation must be a string")
    elif operations is not None and case["operation"] not in operations:
        problems.append(f"{where}: operation {case['operation']!r} is unknown to oracle "
                        f"{__version__}")
    if not isinstance(case["params"], dict):
        problems.append(f"{where}: params must be an object")
    else:
        for old_name, name in OLD_PARAM_NAMES.items():
            if old_name in case["params"] and name in case["params"]:
                problems.append(f"{where}: params hold both {old_name!r} (the name of "
                                f"suites written before) and {name!r}")
    if not isinstance(case["description"], str):
        problems.append(f"{where}: description must be a string")
    v = case["variant"]
    if not valid_variant(v):
        problems.append(f"{where}: variant must be null, {{choice, option}} or a list of "
                        "them with distinct choices")
    names: set[str] = set()
    for group in ("inputs", "expected", "reference"):
        arrays = case[group]
        if not isinstance(arrays, dict):
            problems.append(f"{where}: {group} must be an object")
            continue
        for name, entry in arrays.items():
            if not isinstance(name, str) or not ARRAY_NAME.match(name):
                problems.append(f"{where}: array name {name!r} is not valid")
                continue
            if name in names:
                problems.append(f"{where}: array name {name!r} used twice")
            names.add(name)
            problems += _check_array_entry(entry, cid, name, f"{where}: {group}.{name}")
            has_tol = isinstance(entry, dict) and "tolerance" in entry
            if group == "expected" and not has_tol:
                problems.append(f"{where}: expected.{name} has no tolerance")
            elif group != "expected" and has_tol:
                problems.append(f"{where}: {group}.{name} must not carry a tolerance")
    if isinstance(case["expected"], dict) and not case["expected"]:
        problems.append(f"{where}: expected holds no output (a case that expects "
                        "nothing would compare nothing)")
    if not problems:
        for name, entry in case["expected"].items():
            try:
                t = tol.from_json(entry["tolerance"])
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                problems.append(f"{where}: expected.{name}: {exc}")
                continue
            for attr in ("fmt", "scale_format"):
                named = getattr(t, attr, None)
                if named is not None and not _known_format(named):
                    problems.append(f"{where}: expected.{name}: tolerance format "
                                    f"{named!r} is unknown to oracle {__version__}")
            for ref in t.references():
                if ref not in case["reference"]:
                    problems.append(f"{where}: expected.{name}: tolerance refers to "
                                    f"{ref!r}, which is not a reference array of the case")
            for ref in t.output_references():
                if ref not in case["expected"] or ref == name:
                    problems.append(f"{where}: expected.{name}: tolerance refers to "
                                    f"{ref!r}, which is not another expected output")
    text = case.get("text")
    if text is not None:
        if not (isinstance(text, dict) and set(text) == {"file", "sha256"}
                and text.get("file") == f"{cid}/{TEXT_FILE}"
                and isinstance(text.get("sha256"), str) and _SHA.match(text["sha256"])):
            problems.append(f"{where}: text must be {{file: '{cid}/{TEXT_FILE}', sha256}}")
    return problems


def listed_files(m: Mapping[str, Any]) -> dict[str, str]:
    """Relative path -> sha256 of every file a (valid) manifest lists."""
    out = {}
    for case in m["cases"]:
        for group in ("inputs", "expected", "reference"):
            for entry in case[group].values():
                out[entry["file"]] = entry["sha256"]
                if isinstance(entry.get("text"), dict):
                    out[entry["text"]["file"]] = entry["text"]["sha256"]
        if case.get("text"):
            out[case["text"]["file"]] = case["text"]["sha256"]
    return out


def _refuse_constant(token: str) -> Any:
    raise ValueError(f"the non-finite number {token} is not JSON (manifests hold "
                     "finite numbers only)")


def parse_json(data: bytes, where: str) -> Any:
    """Strict JSON: UTF-8, no ``NaN``/``Infinity`` tokens, no number that overflows to
    infinity, nesting at most :data:`MAX_JSON_DEPTH` deep. Any violation is a
    SuiteError naming ``where``."""
    try:
        obj = json.loads(data.decode("utf-8"), parse_constant=_refuse_constant)
    except RecursionError:
        raise SuiteError(f"{where}: JSON nested too deeply") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise SuiteError(f"{where}: not valid JSON ({exc})") from None
    stack = [(obj, 1)]
    while stack:           # iterative: a deep document cannot exhaust the stack here
        o, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise SuiteError(f"{where}: JSON nested more than {MAX_JSON_DEPTH} levels deep")
        if isinstance(o, float) and not math.isfinite(o):
            raise SuiteError(f"{where}: holds a number that overflows to {o} (manifests "
                             "hold finite numbers only)")
        if isinstance(o, dict):
            stack.extend((v, depth + 1) for v in o.values())
        elif isinstance(o, list):
            stack.extend((v, depth + 1) for v in o)
    return obj


def read_manifest(root: Path) -> dict[str, Any]:
    """Parse ``manifest.json`` (no validation) under the path policy of
    :func:`checked_path` and the rules of :func:`parse_json`; a missing, unreadable or
    unparsable one is a SuiteError."""
    if not Path(root).is_dir():
        raise SuiteError(f"{root}: not a directory")
    try:
        data = read_checked(root, MANIFEST, limit=MAX_MANIFEST_BYTES)
    except MissingFile:
        raise SuiteError(f"{root}: no {MANIFEST} (not a golden-vector suite)") from None
    return parse_json(data, MANIFEST)
