"""Verifying a suite, and checking another implementation's results against it.

``verify`` trusts nothing on disk: it validates the manifest's schema and content hash,
checks every file's size and sha256 under one path policy (:func:`oracle.suite.
checked_path`: plain regular files inside the suite, links never followed), refuses
pickles, reports files that are missing or not listed and any extra folder, link, FIFO
or device, and recomputes every expected and reference output from the recorded inputs
and parameters with this version's reference implementation, bit for bit, within the
documented limits of :mod:`oracle.limits`.

``check`` compares the result files of another implementation (same relative paths as
the expected outputs) with the golden outputs under each case's typed tolerance.
Neither passes silently: a suite without cases, a selection without cases, a check
that compared nothing, or (unless allowed with a reason) a missing result fails.
"""
from __future__ import annotations

import difflib
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Mapping, Sequence

import numpy as np

from oracle import limits
from oracle import suite as fmt
from oracle._version import __version__
from oracle.cases import Registry, registry as default_registry
from oracle.extension_dtypes import opaque_npy
from oracle.schema import schema_problems
from oracle.text_arrays import parse_array_text
from oracle.generation import (
    definition_differences, parse_shard, select, shard_slice, sources_hash,
)
from oracle.random_stream import CaseRandom
from oracle.tolerance import Comparison, ExactTolerance, as_values, failure_rows
from oracle.variant_match import failure_notes
from oracle.variants import known, validate
from refimpl.validation import check_bool


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


def verify(root: str | Path, *, registry: Registry | None = None,
           recompute: bool = True, progress: IO[str] | None = sys.stderr) -> VerifyReport:
    """Verify a suite directory; every problem found is in the report (never raised;
    arguments of the wrong type are a TypeError)."""
    root = fmt.as_path("root", root)
    recompute = check_bool("recompute", recompute)
    reg = registry or default_registry()
    report = VerifyReport()
    try:
        m = fmt.read_manifest(root)
    except fmt.SuiteError as exc:
        report.problems.append(Problem("-", fmt.MANIFEST, str(exc)))
        return report
    structure, content = fmt.manifest_problems(m, reg.operations)
    for text in structure + content:
        report.problems.append(Problem("-", fmt.MANIFEST, text))
    if structure:
        # structure is broken: reading files named by it is not safe
        return report
    # the published schema (oracle/schema/manifest.schema.json): what a consumer in another
    # language may rely on, checked on every suite verified
    for text in schema_problems(m)[:20]:
        report.problems.append(Problem("-", fmt.MANIFEST,
                                       f"does not follow manifest.schema.json: {text}"))
    if not m["cases"]:
        report.problems.append(Problem("-", fmt.MANIFEST, "the manifest lists no cases: "
                                       "nothing would be verified"))
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
    for rel, what in fmt.unexpected_entries(root, listed):
        report.problems.append(Problem("-", rel, what))
    report.cases = len(m["cases"])
    t0 = last = time.monotonic()
    if same_sources:
        # the case list must be exactly what the generation parameters select

        try:
            shard = parse_shard(gen["shard"])
            chosen = select(reg, gen["suite"], gen["only"], gen.get("variants"))
            want_ids = [c.id for c in chosen[shard_slice(len(chosen), shard)]]
        except (ValueError, KeyError) as exc:
            want_ids = None
            report.problems.append(Problem("-", fmt.MANIFEST, f"generation parameters "
                                           f"are not valid: {exc}"))
        got_ids = [e["id"] for e in m["cases"]]
        if want_ids is not None and got_ids != want_ids:
            report.problems.append(Problem("-", fmt.MANIFEST, (
                f"the case list ({len(got_ids)} cases) is not what suite={gen['suite']!r}, "
                f"only={gen['only']!r}, shard={gen['shard']!r}"
                + (f", variants={gen['variants']!r}" if gen.get("variants") else "")
                + f" select ({len(want_ids)} "
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
    for group in arrays:
        for name, item in entry[group].items():
            if not item.get("text") or name not in arrays[group]:
                continue
            report.files += 1
            try:
                data = fmt.read_text_file(root, item["text"], f"{group}.{name}")
                parsed, _, _ = parse_array_text(data, item["text"]["file"])
            except (fmt.SuiteError, ValueError) as exc:
                report.problems.append(Problem(cid, item["text"]["file"], str(exc)))
                continue
            if fmt.array_bytes(parsed) != fmt.array_bytes(arrays[group][name]):
                report.problems.append(Problem(cid, item["text"]["file"], (
                    f"the text form of {group}.{name} does not hold the values of its "
                    ".npy file")))
    text = entry.get("text")
    if text:
        report.files += 1
        try:
            fmt.read_text_file(root, text, "text")
        except fmt.SuiteError as exc:
            report.problems.append(Problem(cid, text["file"], str(exc)))
    if broken or not recompute:
        return
    params = fmt.current_params(entry["params"])     # suites written before: old names
    refused = limits.problems(entry["operation"], params, arrays["inputs"])
    if refused:
        for why in refused:
            report.problems.append(Problem(cid, "-", f"recomputation refused, outside the "
                                           f"documented limits: {why}"))
        return
    if spec is not None:
        # same sources: the inputs must be what the case's random stream gives

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
            got = op.compute(arrays["inputs"], params)
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
        c = ExactTolerance().compare(np.asarray(got[name]), stored[name])
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
    allow_missing: str | None = None                          # why missing results pass

    @property
    def ok(self) -> bool:
        return not self.problems


#: what ``check`` reads, for ``--help`` and the README
RESULTS_LAYOUT = (
    "RESULTS_DIR holds one .npy file per expected output, at the same relative path as "
    "in the suite: <case id>/<output>.npy (e.g. formats.encode.e4m3.f32.nearest_even/"
    "codes.npy), with the expected dtype and shape, or <case id>/<output>.txt in the "
    "text layout generate --text writes (docs/suite-format.md). Low-precision outputs are the "
    "format's unsigned integer codes (x.view(np.uint8)); a file np.save wrote from an "
    "ml_dtypes array (descriptor '<V1', '<f1' or '<V2': the element size, no format name) "
    "is read as the codes of the output's format when the output is codes of that width, "
    "refused otherwise. Plain files only: links, "
    "FIFOs and folders in their place are refused, never followed.")


def _sign_differences(c: Comparison, got: np.ndarray, expected: np.ndarray,
                      fmt_name: str | None) -> np.ndarray | None:
    """Failing elements where both values are zero and only the sign differs."""
    if c.mismatch is None or got.shape != expected.shape:
        return None
    try:
        a, e = as_values(got, fmt_name), as_values(expected, fmt_name)
    except Exception:  # codes a format cannot decode: no sign analysis
        return None
    with np.errstate(invalid="ignore"):
        return c.mismatch & (a == 0) & (e == 0) & (np.signbit(a) != np.signbit(e))


def _read_result(results: Path, rel: str, expected: np.ndarray,
                 fmt_name: str | None = None) -> np.ndarray:
    """A result file under the path policy: ``<case id>/<output>.npy``, or the same path
    ending in ``.txt`` in the text layout of :mod:`oracle.text_arrays` (both there is a
    SuiteError: which one holds the result?); its size is bounded by the expected
    array's (at most 16 bytes an element plus a header, 17 characters an element in
    text) before it is read. A text result's header must name ``<case id>/<output>``
    and, when it names a format, the output's. A ``.npy`` of opaque 1- or 2-byte
    elements (``np.save`` of an ml_dtypes array,
    :func:`oracle.extension_dtypes.opaque_npy`) is read as the codes of ``fmt_name``
    when the expected output is codes of that width; otherwise it is a SuiteError
    saying why."""
    limit = 16 * max(1, expected.size) + 2 ** 16
    trel = rel[:-4] + ".txt" if rel.endswith(".npy") else None
    try:
        data = fmt.read_checked(results, rel, limit=min(limit, fmt.MAX_ARRAY_BYTES))
    except fmt.MissingFile:
        if trel is None:
            raise
        tlimit = 17 * max(1, expected.size) + 2 ** 16
        try:
            data = fmt.read_checked(results, trel, limit=min(tlimit, fmt.MAX_ARRAY_BYTES))
        except fmt.MissingFile:
            raise fmt.MissingFile(f"result {rel} (or {trel}) is missing") from None
        return _text_result(data, trel, fmt_name)
    if trel is not None and os.path.lexists(results / trel):
        raise fmt.SuiteError(f"result {rel}: {Path(trel).name} is there too: keep the one "
                             "that holds the result (neither was compared)")
    try:
        opaque = opaque_npy(data, f"result {rel}")
    except ValueError as exc:
        raise fmt.SuiteError(str(exc)) from None
    if opaque is not None:
        return _opaque_codes(rel, *opaque, expected, fmt_name)
    return fmt.parse_array(data, f"result {rel}")


def _text_result(data: bytes, trel: str, fmt_name: str | None) -> np.ndarray:
    """A result in the text layout, whose header names the array it was written for."""
    try:
        arr, label, got_fmt = parse_array_text(data, f"result {trel}")
    except ValueError as exc:
        raise fmt.SuiteError(str(exc)) from None
    want = trel[:-4]
    if label != want:
        raise fmt.SuiteError(f"result {trel}: its header names {label!r}, not {want!r} "
                             "(a result written for another case or output?)")
    if got_fmt is not None and got_fmt != fmt_name:
        raise fmt.SuiteError(
            f"result {trel}: its header says {got_fmt} codes; this output is "
            + (f"{fmt_name} codes" if fmt_name else "values, not codes of a format"))
    return arr


def _read_name(results: Path, rel: str) -> str:
    """The result file read for ``rel``: the ``.npy``, or the ``.txt`` when only it
    exists (so that a problem names the file a harness wrote)."""
    trel = rel[:-4] + ".txt"
    if rel.endswith(".npy") and not (results / rel).exists() and (results / trel).exists():
        return trel
    return rel


def _opaque_codes(rel: str, descr: str, codes: np.ndarray, expected: np.ndarray,
                  fmt_name: str | None) -> np.ndarray:
    """The codes of an opaque-element ``.npy`` when the output is codes of that width."""
    width = codes.dtype.itemsize
    what = (f"result {rel} holds {width}-byte elements of no NumPy type (descriptor "
            f"{descr!r}, as np.save of an ml_dtypes array writes)")
    if fmt_name is None:
        raise fmt.SuiteError(
            f"{what}; this output is {expected.dtype.name} values, not codes of a format: "
            f"save them as {expected.dtype.name} (e.g. np.save(path, "
            f"x.astype(np.{expected.dtype.name})))")
    if expected.dtype.kind != "u" or expected.dtype.itemsize != width:
        raise fmt.SuiteError(
            f"{what}; this output is {fmt_name} codes of {expected.dtype.itemsize} "
            f"byte(s) ({expected.dtype.name}): an array of another format's type? save "
            f"{fmt_name} codes (e.g. np.save(path, x.view(np.{expected.dtype.name})))")
    return codes


def check(root: str | Path, results: str | Path, *, only: str | None = None,
          variants: Mapping[str, str] | None = None, strict: bool = False,
          allow_missing: str | None = None, rows_per_output: int = 5,
          ids: Sequence[str] | None = None) -> CheckReport:
    """Compare result files under ``results`` (layout: :data:`RESULTS_LAYOUT`) with the
    suite at ``root``. Never a silent pass: the report fails when no output was
    compared, when ``only`` selects no case, when an expected result is missing
    (unless ``allow_missing`` says why), when a result has another dtype than the
    expected output (byte order aside: values are compared), and when a case's result
    folder holds a ``.npy`` that is none of the case's arrays (misnamed).

    Args:
        only: restrict to case ids matching this glob (or containing it).
        variants: choice -> option; cases marked with another option of a selected
            choice are skipped. A choice or option that neither the suite nor this
            oracle version marks any case with is a ValueError (never a silent skip).
        strict: a missing result file is a failure even with ``allow_missing``.
        allow_missing: a reason, recorded in the report, for which missing result files
            are listed but do not fail the check.
        rows_per_output: failing elements tabulated per output.
        ids: restrict to these exact case ids (an id that is no case is a ValueError).

    Raises:
        SuiteError: the golden suite itself fails validation or its hashes.
        ValueError: an unknown variant choice or option.
        TypeError: an argument of the wrong type (named).
        FileNotFoundError: ``results`` is not a directory.
    """
    root, results = fmt.as_path("root", root), fmt.as_path("results", results)
    only = fmt.check_pattern("only", only)
    variants = fmt.check_variants("variants", variants)
    strict = check_bool("strict", strict)
    if isinstance(rows_per_output, bool) or not isinstance(rows_per_output, int) \
            or rows_per_output < 0:
        raise ValueError(f"rows_per_output must be a non-negative integer, got "
                         f"{rows_per_output!r}")
    if allow_missing is not None and not (isinstance(allow_missing, str)
                                          and allow_missing.strip()):
        raise ValueError("--allow-missing needs a reason (a non-empty string)")
    suite = fmt.load(root)
    results = Path(results)
    if not results.is_dir():
        raise FileNotFoundError(f"--results {results}: not a directory")
    if variants:
        validate(variants, known((c.variant for c in suite.cases),
                                 (s.variant for s in default_registry().all_cases)))
    report = CheckReport(allow_missing=allow_missing)
    chosen = suite.select(only, ids=ids)
    if not suite.cases:
        report.problems.append(Problem("-", fmt.MANIFEST, "the suite lists no cases"))
    elif only and not chosen:
        report.problems.append(Problem("-", "-", f"--only {only!r} matches no case of the "
                                       "suite"))
    kept = {c.id for c in suite.select(only, variants, ids=ids)}
    report.skipped = len(chosen) - len(kept)
    for case in chosen:
        if case.id not in kept:
            continue
        for name, expected in case.expected.items():
            rel = case.files[name]
            try:
                got = _read_result(results, rel, expected, case.formats.get(name))
            except fmt.MissingFile:
                report.missing.append(rel)
                if strict or allow_missing is None:
                    report.problems.append(Problem(case.id, rel, (
                        "result file is missing (neither .npy nor .txt)")))
                continue
            except fmt.SuiteError as exc:
                report.checked += 1
                shown = _read_name(results, rel)
                # the problem names the file: the message need not repeat it
                report.problems.append(Problem(case.id, shown, str(exc).removeprefix(
                    f"result {shown}: ")))
                continue
            rel = _read_name(results, rel)     # problems below name the file read
            report.checked += 1
            if got.dtype.kind == "V":
                hint = (f"x.view(np.{expected.dtype.name})" if expected.dtype.kind == "u"
                        else "x.view(np.uint8)")
                report.problems.append(Problem(case.id, rel, (
                    f"{name}: holds a structured/void dtype ({got.dtype}), as np.save of an "
                    f"extension dtype such as ml_dtypes writes; save the unsigned codes "
                    f"instead, e.g. np.save(path, {hint}) (expected {expected.dtype.name} "
                    f"{list(expected.shape)})")))
                continue
            if got.dtype.newbyteorder("=") != expected.dtype.newbyteorder("="):
                report.problems.append(Problem(case.id, rel, (
                    f"{name}: dtype {got.dtype.name} differs from the expected "
                    f"{expected.dtype.name}"
                    + (f" (the {case.formats[name]} codes, not decoded values)"
                       if name in case.formats else "")
                    + "; not compared")))
                continue
            fmt_name = case.formats.get(name)
            c: Comparison = case.tolerance[name].compare(got, expected, fmt=fmt_name)
            if c.ok:
                report.passed += 1
                continue
            signs = _sign_differences(c, got, expected, fmt_name)
            n_signs = int(np.count_nonzero(signs)) if signs is not None else 0
            notes = failure_notes(case, name, got, c.mismatch,
                                  lambda other: _other_result(results, case, other),
                                  variants)
            signs_note = [f"{n_signs} of them sign differences of zero (+0 vs -0)"
                          ] if n_signs else []
            message = "; ".join([f"{name}: {c.summary()}", *signs_note, *notes])
            report.problems.append(Problem(case.id, rel, message))
            rows = failure_rows(c, got, expected, fmt=fmt_name, inputs=case.inputs,
                                input_formats=case.formats, limit=rows_per_output)
            if not rows:
                rows = [["-", "-", "-", "-", c.summary()]]
            index = np.argwhere(c.mismatch)[:rows_per_output] if c.mismatch is not None \
                else []
            for k, r in enumerate(rows):
                label = c.error_label.replace("steps", "step") if str(r[4]) == "1" \
                    else c.error_label
                error = f"{r[4]} {label}" if r[0] != "-" else r[4]
                if signs is not None and k < len(index) and signs[tuple(index[k])]:
                    e_neg = bool(np.signbit(_as_float(expected, fmt_name)[tuple(index[k])]))
                    error = ("sign: -0 vs +0" if e_neg else "sign: +0 vs -0") + \
                        " (expected vs got)"
                report.failures.append([case.id, name] + r[:4] + [error])
    for rel in _unmatched_results(results, suite):
        report.problems.append(Problem(rel.split("/", 1)[0], rel, (
            "result file is none of its case's outputs (misnamed?); it was not "
            "compared")))
    for name, hint in _unknown_case_folders(results, suite):
        report.problems.append(Problem("-", f"{name}/", (
            f"no case of the suite has this id{hint}; nothing in this results folder was "
            "compared")))
    if report.checked == 0 and not report.problems:
        report.problems.append(Problem("-", "-", "no result was compared (nothing "
                                       "selected, or every result file missing)"))
    elif report.checked == 0:
        report.problems.append(Problem("-", "-", "no result was compared"))
    return report


def _other_result(results: Path, case: fmt.Case, name: str) -> np.ndarray | None:
    """Another output of the same case from the results folder, or None when it is
    missing or unreadable (used only to name a known behaviour)."""
    if name not in case.expected:
        return None
    try:
        return _read_result(results, case.files[name], case.expected[name],
                            case.formats.get(name))
    except fmt.SuiteError:
        return None


def _unmatched_results(results: Path, suite: fmt.Suite) -> list[str]:
    """``.npy`` files in the results folder of a case of the suite that are none of
    that case's arrays (a misspelt name would otherwise compare nothing)."""
    out = []
    for case in suite.cases:
        folder = results / case.id
        if not folder.is_dir() or folder.is_symlink():
            continue
        wanted = set(case.files.values())      # expected, input and reference files
        wanted |= {f[:-4] + ".txt" for f in case.files.values()}    # their text forms
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue           # unreadable: each expected file is reported on its own
        out += [f"{case.id}/{n}" for n in names
                if n.endswith((".npy", ".txt")) and f"{case.id}/{n}" not in wanted
                and n != fmt.TEXT_FILE]
    return out


def _unknown_case_folders(results: Path, suite: fmt.Suite) -> list[tuple[str, str]]:
    """(folder, hint) for each folder of the results directory named like a case of the
    suite (an operation's name and a dot first) that is no case id of it: its results
    would otherwise be ignored without a word. Other folders are not the oracle's."""
    ids = {c.id for c in suite.cases}
    ops = tuple(sorted({c.operation + "." for c in suite.cases}))
    try:
        names = sorted(os.listdir(results))
    except OSError:
        return []
    out = []
    for n in names:
        if n in ids or not n.startswith(ops) or not (results / n).is_dir() \
                or (results / n).is_symlink():
            continue
        close = difflib.get_close_matches(n, sorted(ids), n=1, cutoff=0.9)  # a typo
        out.append((n, f" (did you mean {close[0]}?)" if close
                    else " (results for another suite?)"))
    return out


def _as_float(a: np.ndarray, fmt_name: str | None) -> np.ndarray:
    return as_values(a, fmt_name)
