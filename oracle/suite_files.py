"""The files of a suite (:mod:`oracle.suite`): the one path policy every file a
manifest or a results folder names goes through (:func:`checked_path`, a plain regular
file inside its root, no link, never a FIFO, socket, device or directory; its size
checked before it is read), and arrays as ``.npy`` 1.0 bytes read back with
``allow_pickle=False`` after their sha256."""
from __future__ import annotations

import hashlib
import io
import math
import os
import stat
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from oracle.suite_schema import DTYPES, MANIFEST, MAX_ARRAY_BYTES, MissingFile, SuiteError


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
