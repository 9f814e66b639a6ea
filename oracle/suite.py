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
"""
from __future__ import annotations

import fnmatch
import hashlib
import io
import json
import math
import os
import platform
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import numpy as np

from oracle import tolerance as tol
from oracle._version import __version__
from refimpl.formats import get as get_format

SCHEMA = "gpu-numerics-oracle/suite"
SCHEMA_VERSION = 1
MANIFEST = "manifest.json"
TEXT_FILE = "vectors.txt"

#: dtypes an array in a suite may have (no objects, no extension types)
DTYPES = frozenset({"bool", "uint8", "uint16", "uint32", "uint64", "int8", "int16",
                    "int32", "int64", "float16", "float32", "float64"})
_SHA = re.compile(r"^[0-9a-f]{64}$")
#: a case id is one file-name-safe path component: no separator, no ``..``, nothing
#: after the last character (``\\Z``, not ``$``, which would accept a trailing newline)
CASE_ID = re.compile(r"^(?!.*\.\.)[a-z0-9][a-z0-9._=+-]{0,150}\Z")
ARRAY_NAME = re.compile(r"^[a-z][a-z0-9_]{0,40}\Z")

#: the largest file of a suite or results folder that is read (bytes); the manifest's
#: own limit is smaller. Checked against the file's size before anything is read.
MAX_ARRAY_BYTES = 256 * 2 ** 20
MAX_MANIFEST_BYTES = 64 * 2 ** 20
#: JSON nesting deeper than this is refused (the schema needs six levels)
MAX_JSON_DEPTH = 32


#: parameter names of suites written before the parameters had one vocabulary: old
#: name -> current name (a format is ``fmt`` in every case type). Read, never written.
OLD_PARAM_NAMES = {"format": "fmt", "elem": "fmt"}
#: rounding names of suites written before: old name -> canonical name
#: (``refimpl.rounding_modes``; E8M0's ``up``, ties toward +Inf, is ``nearest_away`` for
#: the unsigned format)
OLD_ROUNDING_NAMES = {"up": "nearest_away"}


def current_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """A case's parameters in the current vocabulary: a suite written before it stored
    ``format`` or ``elem`` for ``fmt`` and ``rounding: "up"`` for ``nearest_away``
    (:data:`OLD_PARAM_NAMES`, :data:`OLD_ROUNDING_NAMES`); current parameters come back
    unchanged (as a new dict).

    Raises:
        SuiteError: an old name beside its current one (``format`` and ``fmt``), which
            cannot be read as one parameter.
    """
    out: dict[str, Any] = {}
    for name, value in params.items():
        key = OLD_PARAM_NAMES.get(name, name)
        if key in out or (key != name and key in params):
            raise SuiteError(f"params hold both {name!r} and {key!r} (one parameter)")
        if key == "rounding" and isinstance(value, str):
            value = OLD_ROUNDING_NAMES.get(value, value)
        out[key] = value
    return out


def variant_pairs(variant: Any) -> list[tuple[str, str]]:
    """The (choice, option) pairs of a case's variant field: none for ``None``, one for
    ``{"choice", "option"}``, one per item for a list of such objects."""
    if variant is None:
        return []
    items = [variant] if isinstance(variant, Mapping) else list(variant)
    return [(str(v["choice"]), str(v["option"])) for v in items]


def valid_variant(v: Any) -> bool:
    """Whether ``v`` is a well-formed manifest ``variant``: None, one ``{"choice",
    "option"}`` mapping of strings, or a list of two or more such mappings with distinct
    choices."""
    def one(x: Any) -> bool:
        return (isinstance(x, dict) and set(x) == {"choice", "option"}
                and all(isinstance(y, str) for y in x.values()))
    if v is None or one(v):
        return True
    return (isinstance(v, list) and len(v) > 1 and all(one(x) for x in v)
            and len({x["choice"] for x in v}) == len(v))


class SuiteError(Exception):
    """A suite that cannot be trusted: the message names the file and the problem."""


class MissingFile(SuiteError):
    """A file named by a manifest or expected in a results folder does not exist."""


# ---------------------------------------------------------------------------------
# arguments of the library calls (generate, merge, load, verify, check, select)


def as_path(name: str, value: object) -> Path:
    """``value`` (a str or os.PathLike naming a text path) as a Path.

    Raises:
        TypeError: anything else, naming the argument."""
    if isinstance(value, (str, os.PathLike)):
        try:
            path = os.fspath(value)
        except TypeError:
            path = None
        if isinstance(path, str):
            return Path(path)
    raise TypeError(f"{name} must be a path (str or os.PathLike), got "
                    f"{type(value).__name__}")


def check_pattern(name: str, value: object) -> str | None:
    """A case-id pattern (str) or None; TypeError naming the argument otherwise."""
    if value is None or isinstance(value, str):
        return value
    raise TypeError(f"{name} must be a case-id pattern (str) or None, got "
                    f"{type(value).__name__}")


def check_variants(name: str, value: object) -> Mapping[str, str] | None:
    """A mapping of choice -> option (strings) or None; TypeError otherwise."""
    if value is None:
        return None
    if isinstance(value, Mapping) and all(isinstance(k, str) and isinstance(v, str)
                                          for k, v in value.items()):
        return value
    raise TypeError(f"{name} must map choice names to option names (str -> str), got "
                    f"{value!r}")


# ---------------------------------------------------------------------------------
# the one path policy


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return name
    return "not a regular file"


def checked_path(root: str | Path, rel: str) -> tuple[Path, int]:
    """The path policy of every file a manifest or a results folder names: ``rel`` is a
    relative path of plain components (no ``..``, no absolute path, no empty part); no
    component below ``root`` is a symbolic link; the last one is a regular file (no
    directory, FIFO, socket or device); and, resolved, the file lies inside ``root``.
    Nothing is opened: only ``lstat`` is called.

    Returns:
        (path, size in bytes).

    Raises:
        MissingFile: a component does not exist.
        SuiteError: any other violation, naming ``rel`` and the reason.
    """
    if not isinstance(rel, str) or not rel or rel.startswith("/") or "\\" in rel \
            or "\0" in rel:
        raise SuiteError(f"{rel!r} is not a relative path inside the folder")
    parts = rel.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise SuiteError(f"{rel!r} is not a plain relative path (empty, '.' or '..' part)")
    real_root = os.path.realpath(root)
    cur = real_root
    st = None
    for i, part in enumerate(parts):
        cur = os.path.join(cur, part)
        here = "/".join(parts[:i + 1])
        try:
            st = os.lstat(cur)
        except FileNotFoundError:
            raise MissingFile(f"{rel} is missing") from None
        except OSError as exc:
            raise SuiteError(f"{rel}: cannot be examined ({exc.strerror})") from None
        if stat.S_ISLNK(st.st_mode):
            raise SuiteError(f"{rel}: {here} is a symbolic link; refused (suites and "
                             "results hold plain files, links are never followed)")
        if i < len(parts) - 1 and not stat.S_ISDIR(st.st_mode):
            raise SuiteError(f"{rel}: {here} is {_kind(st.st_mode)}, not a directory")
    assert st is not None
    if not stat.S_ISREG(st.st_mode):
        raise SuiteError(f"{rel}: is {_kind(st.st_mode)}, not a regular file; refused "
                         "without opening it")
    real = os.path.realpath(cur)
    if os.path.commonpath([real, real_root]) != real_root:
        raise SuiteError(f"{rel}: resolves outside its folder; refused")
    return Path(cur), int(st.st_size)


def read_checked(root: str | Path, rel: str, *, size: int | None = None,
                 limit: int = MAX_ARRAY_BYTES) -> bytes:
    """Read a file under :func:`checked_path`'s policy. Its size is compared with
    ``size`` (when given) and with ``limit`` before any byte is read; it is opened
    without following links and without blocking, and must still be a regular file
    of that size once open.

    Raises:
        MissingFile, SuiteError: as :func:`checked_path`; a size that differs or
        exceeds ``limit``; a file that cannot be opened or read (permissions).
    """
    path, nbytes = checked_path(root, rel)
    if size is not None and nbytes != size:
        raise SuiteError(f"{rel}: file size {nbytes} bytes, the manifest's dtype and shape "
                         f"need {size} (truncated, padded or replaced?); not read")
    if nbytes > limit:
        raise SuiteError(f"{rel}: file size {nbytes} bytes exceeds the limit of {limit} "
                         "bytes; not read")
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) \
        | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise SuiteError(f"{rel}: cannot be opened ({exc.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size != nbytes:
            raise SuiteError(f"{rel}: changed while being read; refused")
        chunks, left = [], nbytes
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 24))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
    except OSError as exc:
        raise SuiteError(f"{rel}: cannot be read ({exc.strerror})") from None
    finally:
        os.close(fd)
    if len(data) != nbytes:
        raise SuiteError(f"{rel}: changed while being read; refused")
    return data


def npy_size(dtype: str, shape: list[int]) -> int:
    """The size in bytes of the canonical ``.npy`` file (:func:`array_bytes`) of an
    array with this dtype and shape, computed without making the array.

    Raises:
        SuiteError: the array would be larger than :data:`MAX_ARRAY_BYTES`."""
    dt = np.dtype(dtype).newbyteorder("<")
    count = math.prod(int(n) for n in shape)
    if count * dt.itemsize > MAX_ARRAY_BYTES:
        raise SuiteError(f"shape {list(shape)} {dtype} is {count * dt.itemsize} bytes, over "
                         f"the limit of {MAX_ARRAY_BYTES}")
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {
        "descr": np.lib.format.dtype_to_descr(dt), "fortran_order": False,
        "shape": tuple(int(n) for n in shape)})
    return len(buf.getvalue()) + count * dt.itemsize


def unexpected_entries(root: str | Path, listed: Mapping[str, str]) -> list[tuple[str, str]]:
    """Entries of a suite directory that a suite written by this tool never holds:
    anything but ``manifest.json`` and the case folders and files the manifest lists,
    and any link, FIFO, socket or device (links are reported, never followed).
    Returns (relative path, what is wrong) in sorted order; missing files are not
    reported here."""
    folders = {rel.split("/", 1)[0] for rel in listed}
    out: list[tuple[str, str]] = []

    def entries(path: str) -> list[os.DirEntry]:
        try:
            with os.scandir(path) as it:
                return sorted(it, key=lambda e: e.name)
        except OSError as exc:
            out.append((os.path.relpath(path, root), f"cannot be listed ({exc.strerror})"))
            return []

    for e in entries(os.fspath(root)):
        rel = e.name
        if e.is_symlink():
            out.append((rel, "is a symbolic link (a suite holds none; not followed)"))
        elif e.is_dir(follow_symlinks=False):
            if rel not in folders:
                out.append((rel, "folder is not a case of the manifest"))
                continue
            for f in entries(e.path):
                frel = f"{rel}/{f.name}"
                if f.is_symlink():
                    out.append((frel, "is a symbolic link (a suite holds none; not followed)"))
                elif f.is_dir(follow_symlinks=False):
                    out.append((frel, "folder inside a case folder (a suite holds none)"))
                elif not f.is_file(follow_symlinks=False):
                    out.append((frel, "is not a regular file (FIFO, socket or device)"))
                elif frel not in listed:
                    out.append((frel, "file is not listed in the manifest (renamed, or "
                                      "left from something else?)"))
        elif not e.is_file(follow_symlinks=False):
            out.append((rel, "is not a regular file (FIFO, socket or device)"))
        elif rel != MANIFEST:
            out.append((rel, "file is not listed in the manifest (renamed, or left from "
                             "something else?)"))
    return out


# ---------------------------------------------------------------------------------
# arrays


def array_bytes(a: np.ndarray) -> bytes:
    """The canonical ``.npy`` bytes of an array: format 1.0, little-endian, C order."""
    a = np.asarray(a)
    if a.dtype.name not in DTYPES:
        raise ValueError(f"dtype {a.dtype} cannot be stored in a suite "
                         f"(allowed: {', '.join(sorted(DTYPES))})")
    a = np.asarray(a, dtype=a.dtype.newbyteorder("<"), order="C")
    buf = io.BytesIO()
    np.lib.format.write_array(buf, a, version=(1, 0), allow_pickle=False)
    return buf.getvalue()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def parse_array(data: bytes, where: str) -> np.ndarray:
    """Parse ``.npy`` bytes without ever unpickling; a damaged or pickled file is a
    SuiteError naming ``where``."""
    buf = io.BytesIO(data)
    try:
        version = np.lib.format.read_magic(buf)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(buf)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(buf)
        else:
            raise SuiteError(f"{where}: unsupported .npy version {version}")
    except SuiteError:
        raise
    except Exception as exc:  # the header parser raises ValueError/OSError variants
        raise SuiteError(f"{where}: not a valid .npy file ({exc})") from None
    if dtype.hasobject:
        raise SuiteError(f"{where}: holds a pickled object array; refused "
                         "(suites never contain pickles)")
    count = math.prod(int(n) for n in shape)     # exact: no int64 wrap-around
    body = len(data) - buf.tell()
    if body != count * dtype.itemsize:
        raise SuiteError(f"{where}: truncated or padded: {body} data bytes, expected "
                         f"{count * dtype.itemsize} for shape {shape} {dtype}")
    try:
        return np.load(io.BytesIO(data), allow_pickle=False)
    except Exception as exc:
        raise SuiteError(f"{where}: cannot be read ({exc})") from None


def read_array(root: Path, entry: Mapping[str, Any], where: str) -> np.ndarray:
    """Read one array of a suite: the file must pass the path policy
    (:func:`checked_path`), have the size its dtype and shape give (checked before
    reading), match its sha256, parse without pickles and have the dtype and shape the
    manifest records."""
    rel = entry["file"]
    try:
        size = npy_size(entry["dtype"], entry["shape"])
        data = read_checked(root, rel, size=size)
    except MissingFile:
        raise SuiteError(f"{where}: file {rel} is missing (deleted or renamed?)") from None
    except SuiteError as exc:
        raise SuiteError(f"{where}: {exc}") from None
    if sha256(data) != entry["sha256"]:
        raise SuiteError(f"{where}: file {rel} fails its sha256 check "
                         "(corrupted or modified)")
    a = parse_array(data, f"{where}: file {rel}")
    if a.dtype.name not in DTYPES:
        raise SuiteError(f"{where}: file {rel} holds dtype {a.dtype}, which "
                         "suites never contain")
    if array_bytes(a) != data:
        # generated files are canonical; anything else was rewritten by another tool
        raise SuiteError(f"{where}: file {rel} is not in the canonical .npy form "
                         "(version 1.0, little-endian, C order) the generator writes")
    if a.dtype.name != entry["dtype"] or list(a.shape) != list(entry["shape"]):
        raise SuiteError(f"{where}: file {rel} holds {a.dtype.name} "
                         f"{list(a.shape)}, manifest says {entry['dtype']} {entry['shape']}")
    return a


def read_text_file(root: Path, entry: Mapping[str, Any], where: str) -> bytes:
    """Read a text file of a case (``vectors.txt``, an array's ``.txt``) under the path
    policy and check its sha256."""
    try:
        data = read_checked(root, entry["file"])
    except MissingFile:
        raise SuiteError(f"{where}: file {entry['file']} is missing") from None
    except SuiteError as exc:
        raise SuiteError(f"{where}: {exc}") from None
    if sha256(data) != entry["sha256"]:
        raise SuiteError(f"{where}: file {entry['file']} fails its sha256 check")
    return data


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
