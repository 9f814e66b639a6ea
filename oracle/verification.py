"""Verifying a suite, and checking another implementation's results against it.

``verify`` trusts nothing on disk: it validates the manifest's schema and content hash,
checks every file's sha256, refuses pickles, reports files that are missing or not
listed, and recomputes every expected and reference output from the recorded inputs and
parameters with this version's reference implementation, bit for bit.

``check`` compares the result files of another implementation (same relative paths as
the expected outputs) with the golden outputs under each case's typed tolerance.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Mapping

import numpy as np

from oracle import suite as fmt
from oracle.cases import Registry, registry as default_registry
from oracle.tolerance import Comparison, Exact, failure_rows


@dataclass
class Problem:
    """One thing wrong, located by case (or "-" for the suite) and file."""

    case: str
    file: str
    message: str


@dataclass
class VerifyReport:
    cases: int = 0
    files: int = 0
    recomputed: int = 0
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def _unlisted_files(root: Path, listed: Mapping[str, str]) -> list[str]:
    found = []
    for p in sorted(root.rglob("*")):
        if p.is_file():
            rel = p.relative_to(root).as_posix()
            if rel != fmt.MANIFEST and rel not in listed:
                found.append(rel)
    return found


def verify(root: str | Path, *, registry: Registry | None = None,
           recompute: bool = True, progress: IO[str] | None = sys.stderr) -> VerifyReport:
    """Verify a suite directory; every problem found is in the report (never raised)."""
    from oracle.generation import definition_differences, sources_hash

    root = Path(root)
    reg = registry or default_registry()
    report = VerifyReport()
    try:
        m = fmt.read_manifest(root)
    except fmt.SuiteError as exc:
        report.problems.append(Problem("-", fmt.MANIFEST, str(exc)))
        return report
    schema_problems = fmt.validate_manifest(m, reg.operations)
    for text in schema_problems:
        report.problems.append(Problem("-", fmt.MANIFEST, text))
    if not isinstance(m, dict) or not isinstance(m.get("cases"), list):
        return report
    if any("content_sha256" not in p for p in schema_problems):
        # structure is broken: reading files named by it is not safe
        return report
    gen = m["generation"]
    same_sources = gen.get("sources_sha256") == sources_hash()
    if not same_sources:
        report.notes.append("the suite was generated from other sources than this "
                            "installation's (recomputation below decides what changed)")
    here = fmt.runtime_versions()
    if isinstance(m.get("runtime"), dict) and m["runtime"] != here:
        report.notes.append(
            "the suite was written with Python {} and NumPy {}; recomputed here with "
            "Python {} and NumPy {}".format(m["runtime"].get("python"),
                                            m["runtime"].get("numpy"),
                                            here["python"], here["numpy"]))
    from oracle._version import __version__

    for key, want in (("spec_versions", reg.spec_versions), ("oracle_version", __version__)):
        if m[key] != want:
            text = f"{key} is {m[key]!r}; this oracle writes {want!r}"
            if same_sources:
                report.problems.append(Problem("-", fmt.MANIFEST, text))
            else:
                report.notes.append(text)
    specs = {c.id: c for c in reg.all_cases}
    for entry in m["cases"]:
        spec = specs.get(entry["id"])
        if spec is None:
            report.notes.append(f"case {entry['id']} is not defined by this oracle version "
                                "(recomputed from its recorded operation and parameters)")
            continue
        for diff in definition_differences(entry, spec, gen["text"]):
            if same_sources:   # same code: the manifest must say what the code writes
                report.problems.append(Problem(entry["id"], fmt.MANIFEST,
                                               f"differs from the case definition: {diff}"))
            else:
                report.notes.append(f"case {entry['id']}: {diff}")
    listed = fmt.listed_files(m)
    for rel in _unlisted_files(root, listed):
        report.problems.append(Problem("-", rel, "file is not listed in the manifest "
                                       "(renamed, or left from something else?)"))
    report.cases = len(m["cases"])
    t0 = last = time.monotonic()
    if same_sources:
        # the case list must be exactly what the generation parameters select
        from oracle.generation import parse_shard, select, shard_slice

        try:
            shard = parse_shard(gen["shard"])
            chosen = select(reg, gen["suite"], gen["only"])
            want_ids = [c.id for c in chosen[shard_slice(len(chosen), shard)]]
        except (ValueError, KeyError) as exc:
            want_ids = None
            report.problems.append(Problem("-", fmt.MANIFEST, f"generation parameters "
                                           f"are not valid: {exc}"))
        got_ids = [e["id"] for e in m["cases"]]
        if want_ids is not None and got_ids != want_ids:
            report.problems.append(Problem("-", fmt.MANIFEST, (
                f"the case list ({len(got_ids)} cases) is not what suite={gen['suite']!r}, "
                f"only={gen['only']!r}, shard={gen['shard']!r} select ({len(want_ids)} "
                "cases): cases added, removed or reordered by hand?")))
    for n, entry in enumerate(m["cases"], 1):
        spec = specs.get(entry["id"]) if same_sources else None
        _verify_case(root, entry, reg, recompute, report, spec, gen["seed"])
        now = time.monotonic()
        if progress is not None and now - last >= 1.0:
            print(f"verify: {n}/{report.cases} cases, {now - t0:.1f} s",
                  file=progress, flush=True)
            last = now
    return report


def _verify_case(root: Path, entry: dict[str, Any], reg: Registry, recompute: bool,
                 report: VerifyReport, spec: Any = None, seed: int = 0) -> None:
    cid = entry["id"]
    arrays: dict[str, dict[str, np.ndarray]] = {"inputs": {}, "expected": {}, "reference": {}}
    broken = False
    for group in arrays:
        for name, item in entry[group].items():
            report.files += 1
            try:
                arrays[group][name] = fmt.read_array(root, item, f"{group}.{name}")
            except fmt.SuiteError as exc:
                report.problems.append(Problem(cid, item["file"], str(exc)))
                broken = True
    text = entry.get("text")
    if text:
        report.files += 1
        path = root / text["file"]
        if not path.is_file():
            report.problems.append(Problem(cid, text["file"], "file is missing"))
        elif fmt.sha256(path.read_bytes()) != text["sha256"]:
            report.problems.append(Problem(cid, text["file"], "fails its sha256 check"))
    if broken or not recompute:
        return
    if spec is not None:
        # same sources: the inputs must be what the case's random stream gives
        from oracle.random_stream import CaseRandom

        with np.errstate(all="ignore"):
            want = spec.build(CaseRandom(seed, spec.id))
        for name in sorted(set(want) | set(arrays["inputs"])):
            a, b = want.get(name), arrays["inputs"].get(name)
            if a is None or b is None or fmt.array_bytes(a) != fmt.array_bytes(b):
                report.problems.append(Problem(cid, entry["inputs"].get(name, {}).get(
                    "file", name), f"input {name!r} is not what seed {seed} generates"))
    op = reg.operations[entry["operation"]]
    try:
        with np.errstate(all="ignore"):
            got = op.compute(arrays["inputs"], dict(entry["params"]))
    except Exception as exc:  # a report, never a traceback: the suite may be damaged
        report.problems.append(Problem(cid, "-", f"recomputation failed: "
                                       f"{type(exc).__name__}: {exc}"))
        return
    report.recomputed += 1
    stored = {**arrays["expected"], **arrays["reference"]}
    if set(got) != set(stored):
        report.problems.append(Problem(cid, "-", f"recomputation gives outputs "
                                       f"{sorted(got)}, the suite has {sorted(stored)}"))
    for name in sorted(set(got) & set(stored)):
        c = Exact().compare(np.asarray(got[name]), stored[name])
        if not c.ok:
            where = ""
            if c.mismatch is not None:
                first = tuple(int(i) for i in np.argwhere(c.mismatch)[0])
                where = f" (first at index {list(first)})"
            group = "expected" if name in arrays["expected"] else "reference"
            report.problems.append(Problem(cid, entry[group][name]["file"],
                                           f"differs from recomputation: {c.summary()}{where}"))


# ---------------------------------------------------------------------------------
# check


@dataclass
class CheckReport:
    checked: int = 0
    passed: int = 0
    missing: list[str] = field(default_factory=list)
    skipped: int = 0
    failures: list[list[str]] = field(default_factory=list)   # table rows
    problems: list[Problem] = field(default_factory=list)     # failed outputs, summaries

    @property
    def ok(self) -> bool:
        return not self.problems


def check(root: str | Path, results: str | Path, *, only: str | None = None,
          variants: Mapping[str, str] | None = None, strict: bool = False,
          rows_per_output: int = 5) -> CheckReport:
    """Compare result files under ``results`` (same relative paths as the expected
    outputs) with the suite at ``root``.

    Args:
        only: restrict to case ids matching this glob (or containing it).
        variants: choice -> option; cases marked with another option of a selected
            choice are skipped.
        strict: a missing result file is a failure (default: listed as missing).
        rows_per_output: failing elements tabulated per output.

    Raises:
        SuiteError: the golden suite itself fails validation or its hashes.
    """
    suite = fmt.load(root)
    results = Path(results)
    if not results.is_dir():
        raise FileNotFoundError(f"--results {results}: not a directory")
    report = CheckReport()
    chosen = suite.select(only)
    kept = {c.id for c in suite.select(only, variants)}
    report.skipped = len(chosen) - len(kept)
    for case in chosen:
        if case.id not in kept:
            continue
        for name, expected in case.expected.items():
            rel = case.files[name]
            path = results / rel
            if not path.is_file():
                report.missing.append(rel)
                if strict:
                    report.problems.append(Problem(case.id, rel, "result file is missing"))
                continue
            report.checked += 1
            try:
                got = fmt.parse_array(path.read_bytes(), f"result {rel}")
            except fmt.SuiteError as exc:
                report.problems.append(Problem(case.id, rel, str(exc)))
                continue
            fmt_name = case.formats.get(name)
            c: Comparison = case.tolerance[name].compare(got, expected, format=fmt_name)
            if c.ok:
                report.passed += 1
                continue
            report.problems.append(Problem(case.id, rel, f"{name}: {c.summary()}"))
            rows = failure_rows(c, got, expected, format=fmt_name, inputs=case.inputs,
                                input_formats=case.formats, limit=rows_per_output)
            if not rows:
                rows = [["-", "-", "-", "-", c.summary()]]
            for r in rows:
                report.failures.append([case.id, name] + r[:4] + [f"{r[4]} {c.error_label}"
                                                                  if r[0] != "-" else r[4]])
    return report
