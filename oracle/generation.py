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
import json
import multiprocessing
import shutil
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import IO, Any, Iterator, Sequence

import numpy as np

from oracle import suite as fmt
from oracle._version import __version__
from oracle.cases import SUITES, CaseSpec, Registry, registry as default_registry
from oracle.random_stream import CaseRandom
from oracle.tolerance import Exact

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


def select(reg: Registry, suite: str, only: str | None) -> list[CaseSpec]:
    """Cases of ``suite`` whose id matches ``only`` (a glob such as ``formats.*``; a
    pattern without wildcards matches ids containing it)."""
    cases = reg.cases(suite)
    if only:
        if any(ch in only for ch in "*?["):
            cases = [c for c in cases if fnmatch.fnmatchcase(c.id, only)]
        else:
            cases = [c for c in cases if only in c.id]
    return cases


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


def _definition(spec: CaseSpec) -> dict[str, Any]:
    """The manifest fields a case's definition fixes, in the order written: operation,
    parameters (JSON-safe, canonical), variant and description."""
    return {"operation": spec.operation,
            "params": json.loads(fmt.canonical_json(dict(spec.params))),
            "variant": dict(spec.variant) if spec.variant else None,
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
        entry[group][name] = item
        return item

    for name in sorted(inputs):
        put("inputs", name, inputs[name])
    for name in sorted(outputs):
        if name in spec.reference:
            put("reference", name, outputs[name])
        else:
            item = put("expected", name, outputs[name])
            item["tolerance"] = spec.tolerance.get(name, Exact()).to_json()
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
                tol = spec.tolerance.get(name, Exact()).to_json()
                if item.get("tolerance") != tol:
                    diffs.append(f"expected.{name}: tolerance {item.get('tolerance')}, the "
                                 f"definition says {tol}")
    if bool(entry.get("text")) != bool(text and spec.text is not None):
        diffs.append("text form present/absent contrary to the generation parameters")
    return diffs


@lru_cache(maxsize=None)
def sources_hash() -> str:
    """SHA-256 over the sources of the three packages (relative path and bytes), so a
    suite records which code made it (WebGPU CTS practice for stale expectations).
    Computed once per process."""
    import hashlib

    import hardware
    import oracle
    import refimpl

    h = hashlib.sha256()
    for pkg in (refimpl, hardware, oracle):
        base = Path(pkg.__file__).parent
        for p in sorted(base.rglob("*")):
            if p.is_file() and p.suffix in (".py", ".ptx", ".cu", ".json") \
                    and "__pycache__" not in p.parts:
                rel = f"{pkg.__name__}/{p.relative_to(base).as_posix()}"
                h.update(rel.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


# --- worker state for --jobs: case specifications hold closures, which do not pickle, so
# each worker rebuilds the same case list from the registry (spawned workers, default
# registry) or inherits it (forked workers, any registry)
_WORK: dict[str, Any] = {}


def _init_worker(suite: str, only: str | None, shard: tuple[int, int] | None, seed: int,
                 text: bool) -> None:
    if not _WORK:
        reg = default_registry()
        cases = select(reg, suite, only)
        _WORK.update(cases=cases[shard_slice(len(cases), shard)], registry=reg, seed=seed,
                     text=text)


def _work(index: int) -> tuple[int, dict[str, Any], dict[str, bytes]]:
    entry, files = build_case(_WORK["cases"][index], _WORK["registry"], _WORK["seed"],
                              _WORK["text"])
    return index, entry, files


@contextmanager
def _staged(out: Path) -> Iterator[Path]:
    """Write into a hidden sibling directory; on success replace ``out``'s previous suite
    with it, on failure remove it, so ``out`` never holds half a suite."""
    _prepare_out(out, clear=False)
    out.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    try:
        yield stage
        _prepare_out(out, clear=True)
        for child in sorted(stage.iterdir()):
            child.rename(out / child.name)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _prepare_out(out: Path, clear: bool = True) -> None:
    """Check that ``out`` is absent, empty or a previous suite (a directory holding
    anything else is refused, and nothing is removed); with ``clear``, create it or
    remove the previous suite."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out}: exists and is not a directory")
    if clear:
        out.mkdir(parents=True, exist_ok=True)
    children = list(out.iterdir()) if out.is_dir() else []
    if not children:
        return
    if not (out / fmt.MANIFEST).is_file():
        raise ValueError(f"--out {out}: directory is not empty and holds no suite; "
                         "refusing to write into it")
    def ours(child: Path) -> bool:
        return child.name == fmt.MANIFEST or (
            child.is_dir() and bool(fmt.CASE_ID.match(child.name)) and all(
                f.is_file() and f.suffix in (".npy", ".txt") for f in child.iterdir()))

    foreign = sorted(c.name for c in children if not ours(c))
    if foreign:   # checked before anything is removed: a refusal changes nothing
        raise ValueError(f"--out {out}: holds files that are not part of a suite "
                         f"({', '.join(foreign[:5])}); refusing to overwrite")
    if not clear:
        return
    for child in children:
        if child.is_dir():
            shutil.rmtree(child)
        else:
            child.unlink()


def _write(out: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def header(reg: Registry, suite: str, seed: int, only: str | None,
           shard: tuple[int, int] | None, text: bool) -> dict[str, Any]:
    return {
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


def generate(out: str | Path, *, suite: str = "default", only: str | None = None,
             seed: int = DEFAULT_SEED, jobs: int = 1, shard: tuple[int, int] | None = None,
             text: bool = False, registry: Registry | None = None,
             progress: IO[str] | None = sys.stderr) -> dict[str, Any]:
    """Write a suite to ``out`` and return its manifest.

    Args:
        suite: "smoke", "default" or "full".
        only: restrict to case ids matching this pattern (see :func:`select`).
        seed: the seed of every case's random stream (default 1, as in TestFloat).
        jobs: worker processes; the bytes written do not depend on it.
        shard: (I, N) writes the I-th of N contiguous slices of the case list.
        text: also write TestFloat-style hex lines for scalar-format cases.
        registry: the case registry (default: this version's).
        progress: stream for progress lines (None for silence).
    """
    if suite not in SUITES:
        raise ValueError(f"unknown suite {suite!r}; known: {', '.join(SUITES)}")
    if jobs < 1:
        raise ValueError(f"--jobs must be at least 1, got {jobs}")
    reg = registry or default_registry()
    cases = select(reg, suite, only)
    if only and not cases:
        raise ValueError(f"--only {only!r} matches no case of the {suite} suite")
    cases = cases[shard_slice(len(cases), shard)]
    with _staged(Path(out)) as stage:
        return _generate_into(stage, reg, cases, suite, only, seed, jobs, shard, text,
                              registry is None, progress)


def _generate_into(out: Path, reg: Registry, cases: list[CaseSpec], suite: str,
                   only: str | None, seed: int, jobs: int, shard: tuple[int, int] | None,
                   text: bool, default: bool, progress: IO[str] | None) -> dict[str, Any]:
    manifest = header(reg, suite, seed, only, shard, text)
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
        if jobs == 1 or len(cases) <= 1:
            for i, spec in enumerate(cases):
                _, entries[i], files = _work(i)
                _write(out, files)
                report(i + 1, spec.id)
        else:
            # spawn for the default registry (no fork of a threaded BLAS process); a
            # custom registry can only reach the workers by fork
            if default:
                ctx = multiprocessing.get_context("spawn")
            elif "fork" in multiprocessing.get_all_start_methods():
                ctx = multiprocessing.get_context("fork")
            else:
                raise ValueError("--jobs > 1 with a custom registry needs the fork start "
                                 "method")
            with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx,
                                     initializer=_init_worker,
                                     initargs=(suite, only, shard, seed, text)) as pool:
                futures = [pool.submit(_work, i) for i in range(len(cases))]
                for done, fut in enumerate(as_completed(futures), 1):
                    i, entries[i], files = fut.result()
                    _write(out, files)
                    report(done, cases[i].id)
    finally:
        _WORK.clear()
    manifest["cases"] = entries
    (out / fmt.MANIFEST).write_bytes(fmt.finish_manifest(manifest))
    report(len(cases), "done", final=True)
    return manifest


def merge(shards: Sequence[str | Path], out: str | Path) -> dict[str, Any]:
    """Concatenate the suites written by ``--shard 1/N`` ... ``N/N`` into ``out``: the
    result is byte-for-byte the unsharded suite."""
    pairs = []
    for d in shards:
        m = fmt.read_manifest(Path(d))
        problems = fmt.validate_manifest(m)
        if problems:
            raise ValueError(f"shard {d}: {problems[0]}")
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
    with _staged(Path(out)) as stage:
        for src, m in pairs:
            for rel in fmt.listed_files(m):
                (stage / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src / rel, stage / rel)
            merged["cases"].extend(m["cases"])
        (stage / fmt.MANIFEST).write_bytes(fmt.finish_manifest(merged))
    return merged
