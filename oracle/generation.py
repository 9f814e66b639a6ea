"""Writing golden-vector suites: select cases, build them, write them reproducibly.

Reproducibility is by construction: each case's inputs come from its own random stream
keyed by (seed, case id) (:mod:`oracle.random_stream`), outputs are computed by the
bit-faithful reference implementation, arrays are written as canonical ``.npy`` bytes and
the manifest as canonical JSON without timestamps. So the bytes do not depend on the run,
the machine, the BLAS, the thread count, ``--jobs`` (cases are assembled in registry
order whatever order the workers finish in) or ``--shard`` (a shard is a contiguous
slice of the case list; :func:`merge` concatenates shards into the unsharded suite).
"""
from __future__ import annotations

import fnmatch
import hashlib
import json
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from functools import lru_cache
from pathlib import Path
from typing import IO, Any, Mapping, Sequence

import numpy as np

import hardware
import refimpl
from oracle import suite as fmt
from oracle._version import __version__
from oracle.cases import SUITES, CaseSpec, Registry, registry as default_registry
from oracle.random_stream import CaseRandom
from oracle.suite_writer import (Interrupted, SuiteWriteError,  # noqa: F401 (importable from here)
                                 _staged, _write)
from oracle.text_arrays import array_text
from oracle.tolerance import ExactTolerance
from oracle.variants import validate
from refimpl.validation import check_bool, check_int

DEFAULT_SEED = 1


def parse_shard(text: str | None) -> tuple[int, int] | None:
    """``"I/N"`` with 1 <= I <= N -> (I, N)."""
    if text is None:
        return None
    try:
        i, n = (int(p) for p in text.split("/"))
    except ValueError:
        raise ValueError(f"--shard must look like I/N (e.g. 1/4), got {text!r}") from None
    if not 1 <= i <= n:
        raise ValueError(f"--shard {text}: need 1 <= I <= N")
    return i, n


def select(reg: Registry, suite: str, only: str | None,
           variants: Mapping[str, str] | None = None) -> list[CaseSpec]:
    """Cases of ``suite`` whose id matches ``only`` (a glob such as ``formats.*``; a
    pattern without wildcards matches ids containing it) and that are not marked with
    another option of a choice in ``variants`` (choice -> option; an unknown choice or
    option is a ValueError listing the known ones)."""
    cases = reg.cases(suite)
    if variants:
        validate(variants, reg.variant_options())
        cases = [c for c in cases if not any(
            ch in variants and variants[ch] != o for ch, o in fmt.variant_pairs(c.variant))]
    if only:
        if any(ch in only for ch in "*?["):
            cases = [c for c in cases if fnmatch.fnmatchcase(c.id, only)]
        else:
            cases = [c for c in cases if only in c.id]
    return cases


def _check_shard(shard: object) -> tuple[int, int] | None:
    """None or (I, N) with integers 1 <= I <= N (:func:`parse_shard` reads ``"I/N"``)."""
    if shard is None:
        return None
    if not (isinstance(shard, tuple) and len(shard) == 2):
        raise TypeError(f"shard must be None or a pair (I, N), got {shard!r} (parse_shard "
                        "reads the 'I/N' text form)")
    i, n = (check_int("shard", v) for v in shard)
    if not 1 <= i <= n:
        raise ValueError(f"shard {i}/{n}: need 1 <= I <= N")
    return i, n


def shard_slice(total: int, shard: tuple[int, int] | None) -> slice:
    """The contiguous part of ``total`` cases that shard I of N gets."""
    if shard is None:
        return slice(0, total)
    i, n = shard
    return slice((i - 1) * total // n, i * total // n)


def _hex(a: np.ndarray) -> list[str]:
    a = np.ascontiguousarray(a).reshape(-1)
    width = 2 * a.dtype.itemsize
    bits = a.view(f"u{a.dtype.itemsize}") if a.dtype.kind in "fi" else a
    return [f"{int(b):0{width}X}" for b in bits]


def _text_lines(spec: CaseSpec, arrays: dict[str, np.ndarray]) -> bytes:
    """TestFloat-style lines: input bits and expected bits in hex, one element a line."""
    a_name, b_name = spec.text
    a, b = arrays[a_name], arrays[b_name]
    if a.shape != b.shape:
        raise ValueError(f"case {spec.id}: text form needs {a_name} and {b_name} of one shape")

    def label(name: str, arr: np.ndarray) -> str:
        f = spec.formats.get(name)
        return f"{name}: {f} codes" if f else f"{name}: {arr.dtype.name} bits"

    head = f"# {spec.id}: {label(a_name, a)}, {label(b_name, b)}\n"
    body = "".join(f"{x} {y}\n" for x, y in zip(_hex(a), _hex(b)))
    return (head + body).encode("ascii")


def _variant_json(variant: Any) -> Any:
    """A case's variant as written in the manifest: null, one ``{choice, option}``
    object, or a list of them."""
    if not variant:
        return None
    if isinstance(variant, Mapping):
        return dict(variant)
    return [dict(v) for v in variant]


def _definition(spec: CaseSpec) -> dict[str, Any]:
    """The manifest fields a case's definition fixes, in the order written: operation,
    parameters (JSON-safe, canonical), variant and description."""
    return {"operation": spec.operation,
            "params": json.loads(fmt.canonical_json(dict(spec.params))),
            "variant": _variant_json(spec.variant),
            "description": spec.description}


def build_case(spec: CaseSpec, reg: Registry, seed: int,
               text: bool = False) -> tuple[dict[str, Any], dict[str, bytes]]:
    """Build one case: its manifest entry and its files (relative path -> bytes)."""
    op = reg.operations[spec.operation]
    definition = _definition(spec)
    with np.errstate(all="ignore"):   # overflow to Inf etc. is part of what is pinned
        inputs = spec.build(CaseRandom(seed, spec.id))
        outputs = op.compute(inputs, definition["params"])
    files: dict[str, bytes] = {}
    entry: dict[str, Any] = {"id": spec.id, **definition,
                             "inputs": {}, "expected": {}, "reference": {}}
    unknown = (set(spec.tolerance) | set(spec.reference)) - set(outputs)
    clash = set(inputs) & set(outputs)
    if unknown or clash:
        raise ValueError(f"case {spec.id}: tolerance/reference names {sorted(unknown)} "
                         f"are not outputs; names {sorted(clash)} are inputs and outputs")
    if not set(outputs) - set(spec.reference):
        raise ValueError(f"case {spec.id}: every output is a reference array; a case "
                         "needs an expected output (otherwise it compares nothing)")

    def put(group: str, name: str, arr: np.ndarray) -> dict[str, Any]:
        if not fmt.ARRAY_NAME.match(name):
            raise ValueError(f"case {spec.id}: array name {name!r} is not valid")
        data = fmt.array_bytes(arr)
        path = fmt.array_path(spec.id, name)
        files[path] = data
        item: dict[str, Any] = {"file": path, "sha256": fmt.sha256(data),
                                "dtype": np.asarray(arr).dtype.name,
                                "shape": list(np.shape(arr))}
        if name in spec.formats:
            item["format"] = spec.formats[name]
        if text:
            if f"{name}.txt" == fmt.TEXT_FILE:
                raise ValueError(f"case {spec.id}: an array named {name!r} would collide "
                                 f"with {fmt.TEXT_FILE} in the text form")
            # every array also as text (oracle.text_arrays), so no .npy reader is needed
            tdata = array_text(arr, f"{spec.id}/{name}", spec.formats.get(name))
            tpath = fmt.array_text_path(spec.id, name)
            files[tpath] = tdata
            item["text"] = {"file": tpath, "sha256": fmt.sha256(tdata)}
        entry[group][name] = item
        return item

    for name in sorted(inputs):
        put("inputs", name, inputs[name])
    for name in sorted(outputs):
        if name in spec.reference:
            put("reference", name, outputs[name])
        else:
            item = put("expected", name, outputs[name])
            item["tolerance"] = spec.tolerance.get(name, ExactTolerance()).to_json()
    if text and spec.text is not None:
        data = _text_lines(spec, {**inputs, **outputs})
        path = f"{spec.id}/{fmt.TEXT_FILE}"
        files[path] = data
        entry["text"] = {"file": path, "sha256": fmt.sha256(data)}
    return entry, files


def definition_differences(entry: dict[str, Any], spec: CaseSpec, text: bool) -> list[str]:
    """How a manifest entry differs from what :func:`build_case` writes for ``spec``
    (operation, parameters, variant, description, formats, tolerances, which outputs are
    reference arrays, text form); empty when they agree."""
    diffs = []
    entry = {**entry, "params": fmt.current_params(entry["params"])}  # old names read
    for key, value in _definition(spec).items():
        if entry.get(key) != value:
            diffs.append(f"{key} is {entry.get(key)!r}, the definition says {value!r}")
    if set(entry["reference"]) != set(spec.reference):
        diffs.append(f"reference arrays {sorted(entry['reference'])}, the definition says "
                     f"{sorted(spec.reference)}")
    for group in ("inputs", "expected", "reference"):
        for name, item in entry[group].items():
            if item.get("format") != spec.formats.get(name):
                diffs.append(f"{group}.{name}: format {item.get('format')!r}, the "
                             f"definition says {spec.formats.get(name)!r}")
            if group == "expected":
                tol = spec.tolerance.get(name, ExactTolerance()).to_json()
                if item.get("tolerance") != tol:
                    diffs.append(f"expected.{name}: tolerance {item.get('tolerance')}, the "
                                 f"definition says {tol}")
    if bool(entry.get("text")) != bool(text and spec.text is not None):
        diffs.append("text form present/absent contrary to the generation parameters")
    for group in ("inputs", "expected", "reference"):
        for name, item in entry[group].items():
            if bool(item.get("text")) != bool(text):
                diffs.append(f"{group}.{name}: text form present/absent contrary to the "
                             "generation parameters")
    return diffs


@lru_cache(maxsize=None)
def sources_hash() -> str:
    """SHA-256 over the sources of the three packages (relative path and bytes), so a
    suite records which code made it (WebGPU CTS practice for stale expectations).
    Computed once per process."""
    h = hashlib.sha256()
    # this module's own folder is the oracle package's (importing the package here
    # would close an import circle: the package imports this module)
    for name, base in (("refimpl", Path(refimpl.__file__).parent),
                       ("hardware", Path(hardware.__file__).parent),
                       ("oracle", Path(__file__).parent)):
        for p in sorted(base.rglob("*")):
            if p.is_file() and p.suffix in (".py", ".ptx", ".cu", ".json") \
                    and "__pycache__" not in p.parts:
                rel = f"{name}/{p.relative_to(base).as_posix()}"
                h.update(rel.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


# --- worker state for --jobs: case specifications hold closures, which do not pickle, so
# each worker rebuilds the same case list from the registry (spawned workers, default
# registry) or inherits it (forked workers, any registry)
_WORK: dict[str, Any] = {}
#: with ``jobs > 1``, cases are built in the calling process for this many seconds before
#: worker processes are started for the rest: a worker costs about a second to start
#: (it imports the oracle anew), so a suite built within this time (the default suite
#: takes about one second) never pays for workers
SERIAL_SECONDS = 3.0


def _init_worker(suite: str, only: str | None, shard: tuple[int, int] | None, seed: int,
                 text: bool, variants: Mapping[str, str] | None = None) -> None:
    if not _WORK:
        reg = default_registry()
        cases = select(reg, suite, only, variants)
        _WORK.update(cases=cases[shard_slice(len(cases), shard)], registry=reg, seed=seed,
                     text=text)


def _work(index: int) -> tuple[int, dict[str, Any], dict[str, bytes]]:
    entry, files = build_case(_WORK["cases"][index], _WORK["registry"], _WORK["seed"],
                              _WORK["text"])
    return index, entry, files


def header(reg: Registry, suite: str, seed: int, only: str | None,
           shard: tuple[int, int] | None, text: bool,
           variants: Mapping[str, str] | None = None) -> dict[str, Any]:
    m = {
        "schema": fmt.SCHEMA,
        "schema_version": fmt.SCHEMA_VERSION,
        "oracle_version": __version__,
        "runtime": fmt.runtime_versions(),
        "spec_versions": reg.spec_versions,
        "generation": {
            "suite": suite, "seed": int(seed), "only": only,
            "shard": f"{shard[0]}/{shard[1]}" if shard else None,
            "text": bool(text), "sources_sha256": sources_hash(),
        },
        "cases": [],
    }
    if variants:
        m["generation"]["variants"] = dict(sorted(variants.items()))
    return m


def generate(out: str | Path, *, suite: str = "default", only: str | None = None,
             seed: int = DEFAULT_SEED, jobs: int = 1, shard: tuple[int, int] | None = None,
             text: bool = False, registry: Registry | None = None,
             progress: IO[str] | None = sys.stderr,
             variants: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Write a suite to ``out`` and return its manifest.

    Args:
        suite: "smoke", "default" or "full".
        only: restrict to case ids matching this pattern (see :func:`select`).
        seed: the seed of every case's random stream (default 1, as in TestFloat).
        jobs: worker processes; the bytes written do not depend on it.
        shard: (I, N) writes the I-th of N contiguous slices of the case list.
        text: also write every array as text (``<case id>/<array>.txt``, the layout of
            :mod:`oracle.text_arrays`) and TestFloat-style hex lines (``vectors.txt``)
            for scalar-format cases.
        registry: the case registry (default: this version's).
        progress: stream for progress lines (None for silence).
        variants: choice -> option: leave out the cases marked with another option of
            a named choice (an unknown choice or option is a ValueError).

    Raises:
        ValueError, TypeError: bad arguments, or an ``out`` that may not be replaced
            (checked before any work; nothing touched).
        SuiteWriteError: a write failed (disk full, quota, read-only filesystem), or
            ``out`` appeared or changed while the suite was being written; ``out``
            holds what it held before, no partial file is left.
        Interrupted: SIGINT or SIGTERM; likewise nothing partial is left.
    """
    if not isinstance(suite, str) or suite not in SUITES:
        raise ValueError(f"unknown suite {suite!r}; known: {', '.join(SUITES)}")
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"--jobs must be an integer of at least 1, got {jobs!r}")
    out = fmt.as_path("out", out)
    only = fmt.check_pattern("only", only)
    variants = fmt.check_variants("variants", variants)
    seed = check_int("seed", seed)
    text = check_bool("text", text)
    shard = _check_shard(shard)
    reg = registry or default_registry()
    cases = select(reg, suite, only, variants)
    if (only or variants) and not cases:
        raise ValueError(f"--only {only!r} with --variant {dict(variants or {})} selects "
                         f"no case of the {suite} suite")
    cases = cases[shard_slice(len(cases), shard)]
    with _staged(out) as stage:
        return _generate_into(stage, reg, cases, suite, only, seed, jobs, shard, text,
                              registry is None, progress, variants)


def _generate_into(out: Path, reg: Registry, cases: list[CaseSpec], suite: str,
                   only: str | None, seed: int, jobs: int, shard: tuple[int, int] | None,
                   text: bool, default: bool, progress: IO[str] | None,
                   variants: Mapping[str, str] | None = None) -> dict[str, Any]:
    manifest = header(reg, suite, seed, only, shard, text, variants)
    entries: list[dict[str, Any] | None] = [None] * len(cases)
    t0 = last = time.monotonic()

    def report(done: int, case_id: str, final: bool = False) -> None:
        nonlocal last
        now = time.monotonic()
        if progress is not None and (final or now - last >= 1.0):
            print(f"generate: {done}/{len(cases)} cases, {now - t0:.1f} s ({case_id})",
                  file=progress, flush=True)
            last = now

    _WORK.update(cases=cases, registry=reg, seed=seed, text=text)
    try:
        # cases are built here first; worker processes are started only for what is
        # left after SERIAL_SECONDS (each worker imports the oracle anew, about a second:
        # a suite that is built in a few seconds is faster in this process alone)
        t0 = time.perf_counter()
        start = 0
        for i, spec in enumerate(cases):
            if jobs > 1 and time.perf_counter() - t0 > SERIAL_SECONDS:
                break
            _, entries[i], files = _work(i)
            _write(out, files)
            report(i + 1, spec.id)
            start = i + 1
        if start < len(cases):
            # spawn for the default registry (no fork of a threaded BLAS process); a
            # custom registry can only reach the workers by fork
            if default:
                ctx = multiprocessing.get_context("spawn")
            elif "fork" in multiprocessing.get_all_start_methods():
                ctx = multiprocessing.get_context("fork")
            else:
                raise ValueError("--jobs > 1 with a custom registry needs the fork start "
                                 "method")
            # never more workers than cases: each would be a whole Python process
            with ProcessPoolExecutor(max_workers=min(jobs, len(cases) - start), mp_context=ctx,
                                     initializer=_init_worker,
                                     initargs=(suite, only, shard, seed, text,
                                               dict(variants or {}))) as pool:
                futures = [pool.submit(_work, i) for i in range(start, len(cases))]
                try:
                    for done, fut in enumerate(as_completed(futures), start + 1):
                        i, entries[i], files = fut.result()
                        _write(out, files)
                        report(done, cases[i].id)
                except BaseException:
                    pool.shutdown(wait=True, cancel_futures=True)
                    raise
    finally:
        _WORK.clear()
    manifest["cases"] = entries
    _write(out, {fmt.MANIFEST: fmt.finish_manifest(manifest)})
    report(len(cases), "done", final=True)
    return manifest


def merge(shards: Sequence[str | Path], out: str | Path) -> dict[str, Any]:
    """Concatenate the suites written by ``--shard 1/N`` ... ``N/N`` into ``out``: the
    result is byte-for-byte the unsharded suite.

    Every shard is checked as ``verify`` checks a suite's files (without
    recomputation): a valid manifest, no entry the manifest does not list, no link,
    FIFO or device, every file of the recorded size and sha256.

    Raises:
        ValueError: the shards do not form one set, or ``out`` cannot be written.
        SuiteError: a shard is damaged (names the shard and file).
        SuiteWriteError: as for :func:`generate`.
    """
    if isinstance(shards, (str, bytes, os.PathLike)) or not isinstance(shards, Sequence):
        raise TypeError(f"shards must be a list of shard folders, got "
                        f"{type(shards).__name__}")
    shards = [fmt.as_path(f"shards[{i}]", d) for i, d in enumerate(shards)]
    out = fmt.as_path("out", out)
    pairs = []
    for d in shards:
        m = fmt.read_manifest(Path(d))
        structure, content = fmt.manifest_problems(m)
        if structure or content:
            raise fmt.SuiteError(f"shard {d}: {(structure + content)[0]}")
        foreign = fmt.unexpected_entries(Path(d), fmt.listed_files(m))
        if foreign:
            rel, what = foreign[0]
            raise fmt.SuiteError(f"shard {d}: {rel} {what}")
        pairs.append((Path(d), m))
    n = len(pairs)
    got = sorted(str(m["generation"]["shard"]) for _, m in pairs)
    if n == 0 or got != sorted(f"{i}/{n}" for i in range(1, n + 1)):
        raise ValueError(f"shards must be 1/{n} .. {n}/{n} exactly once, got {got}")
    pairs.sort(key=lambda p: int(p[1]["generation"]["shard"].split("/")[0]))
    first = pairs[0][1]
    for _, m in pairs[1:]:
        for key in ("oracle_version", "spec_versions"):
            if m[key] != first[key]:
                raise ValueError(f"shards differ in {key}")
        if m.get("runtime") != first.get("runtime"):
            # the bytes would agree, but one manifest cannot say who wrote them all
            raise ValueError(f"shards were written by different Python/NumPy versions "
                             f"({first.get('runtime')} and {m.get('runtime')}); merge "
                             "shards written by one installation")
        a = {k: v for k, v in m["generation"].items() if k != "shard"}
        b = {k: v for k, v in first["generation"].items() if k != "shard"}
        if a != b:
            raise ValueError("shards were generated with different parameters")
    merged = {k: v for k, v in first.items() if k != "content_sha256"}
    merged["generation"] = dict(first["generation"], shard=None)
    merged["cases"] = []
    with _staged(Path(out), sources=[p for p, _ in pairs]) as stage:
        for src, m in pairs:
            for case in m["cases"]:
                files: dict[str, bytes] = {}
                for group in ("inputs", "expected", "reference"):
                    for name, item in case[group].items():
                        where = f"shard {src}: case {case['id']}: {group}.{name}"
                        # size, sha256 and canonical form checked; the bytes are the file's
                        files[item["file"]] = fmt.array_bytes(fmt.read_array(src, item, where))
                        if item.get("text"):
                            files[item["text"]["file"]] = fmt.read_text_file(
                                src, item["text"], where)
                if case.get("text"):
                    files[case["text"]["file"]] = fmt.read_text_file(
                        src, case["text"], f"shard {src}: case {case['id']}")
                _write(stage, files)
            merged["cases"].extend(m["cases"])
        _write(stage, {fmt.MANIFEST: fmt.finish_manifest(merged)})
    return merged
