"""Golden-vector suites on disk: the manifest schema, writing and safe loading.

A suite is a directory::

    DIR/manifest.json
    DIR/<case id>/<array name>.npy      inputs, expected outputs, reference arrays
    DIR/<case id>/<array name>.txt      with --text: every array as text (oracle.text_arrays)
    DIR/<case id>/vectors.txt           with --text: TestFloat-style hex lines of
                                        scalar-format cases

``manifest.json`` (schema ``gpu-numerics-oracle/suite``, version 1) holds the oracle
version, the Python and NumPy versions that wrote the suite (``runtime``; informative:
the bytes do not depend on them, and suites written before it was recorded lack it),
the versions of the specifications implemented, the generation parameters and
seed, and for every case its id, operation, parameters, variant (for an
implementation-defined choice: ``{"choice": C, "option": O}``, or a list of such objects
when the answer depends on several choices), and for every array its file, sha256, dtype, shape and,
for low-precision data, the format whose unsigned codes it holds. Every expected output
carries a typed tolerance (:mod:`oracle.tolerance`). ``content_sha256`` is the SHA-256 of
the canonical JSON of everything else, so an edit by hand is detected. There are no
timestamps: the same generation parameters give the same bytes.

Arrays are ``.npy`` version 1.0, little-endian, C order; low-precision values travel as
unsigned integer codes plus the format's name, never as extension dtypes. Every array is
read with ``allow_pickle=False`` after its sha256 has been checked.

One path policy (:func:`checked_path`) covers every file a manifest or a results folder
names, for loading, ``verify``, ``check`` and ``generate --merge``: a plain regular file
inside its root, no symbolic link anywhere below the root, never a FIFO, socket, device
or directory; anything else is a problem and is never opened. A file's size is compared
with what the manifest's dtype and shape give before it is read. The manifest is strict
JSON: no ``NaN``/``Infinity``, nesting at most :data:`MAX_JSON_DEPTH` deep.

The vocabulary and argument checks are :mod:`oracle.suite_schema`, the path policy and
arrays :mod:`oracle.suite_files`, the manifest :mod:`oracle.suite_manifest`; their names
are importable from here.
"""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import numpy as np

from oracle import tolerance as tol
# the vocabulary, the files and the manifest of a suite, importable from here
from oracle.suite_schema import (  # noqa: F401
    ARRAY_NAME, CASE_ID, DTYPES, MANIFEST, MAX_ARRAY_BYTES, MAX_JSON_DEPTH,
    MAX_MANIFEST_BYTES, MissingFile, OLD_PARAM_NAMES, OLD_ROUNDING_NAMES, SCHEMA,
    SCHEMA_VERSION, SuiteError, TEXT_FILE, as_path, check_pattern, check_variants,
    current_params, valid_variant, variant_pairs,
)
from oracle.suite_files import (  # noqa: F401
    array_bytes, checked_path, npy_size, parse_array, read_array, read_checked,
    read_text_file, sha256, unexpected_entries,
)
from oracle.suite_manifest import (  # noqa: F401
    GENERATION, RUNTIME, array_path, array_text_path, canonical_json, content_hash,
    finish_manifest, listed_files, manifest_problems, parse_json, read_manifest,
    runtime_versions, validate_manifest,
)


# ---------------------------------------------------------------------------------
# the loaded form


@dataclass
class Case:
    """One golden case: arrays by name, each output's typed tolerance (with interval
    bounds and naive results resolved to arrays), and the format of each array that
    holds codes."""

    id: str
    operation: str
    params: dict[str, Any]
    inputs: dict[str, np.ndarray]
    expected: dict[str, np.ndarray]
    reference: dict[str, np.ndarray]
    tolerance: dict[str, tol.Tolerance]
    formats: dict[str, str]
    variant: dict[str, str] | list[dict[str, str]] | None = None
    description: str = ""
    files: dict[str, str] = field(default_factory=dict)

    def check(self, outputs: Mapping[str, Any]) -> dict[str, tol.Comparison]:
        """Compare an implementation's outputs (by name) with this case's: one
        :class:`~oracle.tolerance.Comparison` per expected output, and one per unknown
        name. Never a silent pass: an expected output missing from ``outputs`` is a
        failed comparison ("missing"), and so is a name this case has no output of (a
        misspelling would otherwise compare nothing).

        Raises:
            TypeError: ``outputs`` is not a mapping of output names to arrays.
        """
        if not isinstance(outputs, Mapping):
            raise TypeError(f"case {self.id}: outputs must be a mapping of output names "
                            f"to arrays, got {type(outputs).__name__}")
        out: dict[str, tol.Comparison] = {}
        for name in self.expected:
            if name in outputs:
                out[name] = self.tolerance[name].compare(outputs[name], self.expected[name],
                                                         fmt=self.formats.get(name))
            else:
                out[name] = tol.Comparison(False, self.tolerance[name], problem=(
                    f"case {self.id}: output {name!r} is missing (nothing was compared)"))
        for name in outputs:
            if name not in self.expected:
                out[name] = tol.Comparison(False, tol.ExactTolerance(), problem=(
                    f"case {self.id}: {name!r} is not an output of this case; its outputs "
                    f"are {list(self.expected)}"))
        if not out:
            out["-"] = tol.Comparison(False, tol.ExactTolerance(), problem=(
                f"case {self.id}: has no expected output: nothing was compared"))
        return out

    def assert_matches(self, outputs: Mapping[str, Any]) -> None:
        """AssertionError with a failure table unless ``outputs`` holds exactly this
        case's outputs and every one matches.

        Raises:
            TypeError: ``outputs`` is not a mapping of output names to arrays.
            AssertionError: an expected output is missing or a name is unknown (a
                misspelling would otherwise compare nothing: both lists are named), or
                an output does not match within its tolerance.
        """
        if not isinstance(outputs, Mapping):
            raise TypeError(f"case {self.id}: outputs must be a mapping of output names "
                            f"to arrays, got {type(outputs).__name__}")
        if not self.expected:
            raise AssertionError(f"case {self.id}: has no expected output: nothing "
                                 "would be compared")
        missing = [name for name in self.expected if name not in outputs]
        unknown = [name for name in outputs if name not in self.expected]
        if missing or unknown:
            parts = ([f"missing output(s) {missing}"] if missing else []) + (
                [f"unknown output(s) {unknown}"] if unknown else [])
            raise AssertionError(f"case {self.id}: {'; '.join(parts)}; this case's outputs "
                                 f"are {list(self.expected)}")
        for name in self.expected:
            if name in outputs:
                try:
                    tol.assert_matches(outputs[name], self.expected[name],
                                       self.tolerance[name], fmt=self.formats.get(name),
                                       inputs=self.inputs)
                except AssertionError as exc:
                    raise AssertionError(f"case {self.id}, output {name}: {exc}") from None


@dataclass
class Suite:
    """A loaded suite: the manifest and its cases, in manifest order."""

    root: Path
    manifest: dict[str, Any]
    cases: list[Case]

    def __iter__(self) -> Iterator[Case]:
        return iter(self.cases)

    def __len__(self) -> int:
        return len(self.cases)

    def __getitem__(self, case_id: str) -> Case:
        for c in self.cases:
            if c.id == case_id:
                return c
        raise ValueError(f"no case {case_id!r} in suite {self.root}")

    @property
    def seed(self) -> int:
        return self.manifest["generation"]["seed"]

    def select(self, only: str | None = None,
               variants: Mapping[str, str] | None = None,
               ids: Sequence[str] | None = None) -> list[Case]:
        """Cases whose id matches ``only`` (a glob, or a substring without wildcards),
        whose id is one of ``ids`` (exact ids; each must be a case of the suite) and
        that are not marked with another option of a choice in ``variants``
        (choice -> the option the caller implements). A case marked with several
        choices is kept only when none of them is selected with another option.

        Raises:
            ValueError: an id of ``ids`` that is no case of the suite.
        """
        only = check_pattern("only", only)
        variants = check_variants("variants", variants)
        wanted = None
        if ids is not None:
            if isinstance(ids, str) or not all(isinstance(i, str) for i in ids):
                raise TypeError(f"ids must be a list of case ids (str), got {ids!r}")
            names = {c.id for c in self.cases}
            unknown = [i for i in ids if i not in names]
            if unknown:
                raise ValueError(f"--id {unknown[0]!r}: no such case in the suite")
            wanted = set(ids)
        out = []
        for case in self.cases:
            if wanted is not None and case.id not in wanted:
                continue
            if only and not (fnmatch.fnmatchcase(case.id, only)
                             if any(ch in only for ch in "*?[") else only in case.id):
                continue
            if variants and any(c in variants and variants[c] != o
                                for c, o in variant_pairs(case.variant)):
                continue
            out.append(case)
        return out


def load_case(root: Path, entry: Mapping[str, Any]) -> Case:
    """Read one case's arrays (sha256-checked, no pickles) into a :class:`Case`."""
    cid = entry["id"]
    groups: dict[str, dict[str, np.ndarray]] = {}
    formats: dict[str, str] = {}
    files: dict[str, str] = {}
    for group in ("inputs", "expected", "reference"):
        groups[group] = {}
        for name, a in entry[group].items():
            groups[group][name] = read_array(root, a, f"case {cid}: {group}.{name}")
            files[name] = a["file"]
            if a.get("format"):
                formats[name] = a["format"]
    outputs = {**groups["expected"], **groups["reference"]}
    try:
        tolerances = {name: tol.from_json(a["tolerance"]).resolve(outputs)
                      for name, a in entry["expected"].items()}
    except (ValueError, TypeError, KeyError) as exc:
        raise SuiteError(f"case {cid}: a tolerance cannot be applied ({exc})") from None
    return Case(cid, entry["operation"], current_params(entry["params"]), groups["inputs"],
                groups["expected"], groups["reference"], tolerances, formats,
                entry["variant"], entry.get("description", ""), files)


def load(root: str | Path) -> Suite:
    """Load a suite: validate the manifest, check every file's sha256 and read every
    array with ``allow_pickle=False``. Any problem is a :class:`SuiteError` (a
    ``root`` that is not a path is a TypeError)."""
    root = as_path("root", root)
    m = read_manifest(root)
    problems = validate_manifest(m)
    if problems:
        raise SuiteError("; ".join(problems[:5]) + (
            f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""))
    return Suite(root, m, [load_case(root, c) for c in m["cases"]])
