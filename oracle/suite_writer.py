"""Writing a suite directory safely (:func:`oracle.generation.generate` and
:func:`~oracle.generation.merge`): the suite is written into a staged sibling directory
and swapped in only when complete, and only if ``out`` is still the empty folder or the
suite checked before the work began (Linux ``renameat2`` exchange or no-replace where
the platform and filesystem have them, a portable rename otherwise). A SIGINT or SIGTERM
while writing removes the stage and leaves ``out`` as it was; the swap and the clean-up
run to their end before one is raised."""
from __future__ import annotations

import ctypes
import errno
import os
import platform
import shutil
import signal
import stat
import sys
import tempfile
import threading
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator, Sequence

from oracle import suite as fmt

__all__ = ["Interrupted", "SuiteWriteError"]


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived while a suite was being written: the partial suite has
    been removed and the previous one (if any) is intact. ``signum`` is the signal."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(f"interrupted by {signal.Signals(signum).name}")


_SIGNALS = (signal.SIGINT, signal.SIGTERM)
#: while ``defer`` > 0 a signal is recorded in ``pending`` and raised when it drops to 0
_DEFER: dict[str, Any] = {"defer": 0, "pending": None}


@contextmanager
def _signals_raise() -> Iterator[None]:
    """While writing, SIGINT and SIGTERM raise :class:`Interrupted` (so the clean-up in
    ``finally`` blocks runs); the previous handlers are restored afterwards. Handlers can
    only be set in the main thread; elsewhere nothing changes. An ignored signal stays
    ignored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        if _DEFER["defer"]:
            _DEFER["pending"] = signum
            return
        raise Interrupted(signum)

    # a signal the process ignores (e.g. SIGINT under nohup) stays ignored
    previous = {s: signal.signal(s, handler) for s in _SIGNALS
                if signal.getsignal(s) is not signal.SIG_IGN}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


@contextmanager
def _signals_deferred() -> Iterator[None]:
    """Run a critical section (the swap, the clean-up) to its end: a SIGINT or SIGTERM
    arriving meanwhile is raised as :class:`Interrupted` when the section ends."""
    _DEFER["defer"] += 1
    try:
        yield
    finally:
        _DEFER["defer"] -= 1
        pending = _DEFER["pending"]
        if pending is not None and not _DEFER["defer"]:
            _DEFER["pending"] = None
            raise Interrupted(pending)


def _within(path: str, root: str) -> bool:
    return os.path.commonpath([path, root]) == root


class SuiteWriteError(OSError):
    """A suite could not be written or swapped in: the disk is full, a quota or a
    read-only filesystem refused a write, or ``out`` appeared or changed while the suite
    was being written. The message names what failed and where; ``out`` holds what it
    held before and no partial file is left beside it."""


class _Stranded(SuiteWriteError):
    """What was at ``out`` could not be put back and lies in the stage: keep it."""


#: an existing ``out`` as checked before the work: (device, inode, sha256 of its
#: manifest.json, or "" for an empty folder); None when ``out`` did not exist
Identity = tuple[int, int, str]


def _plan_out(out: Path, sources: Sequence[Path] = ()) -> tuple[Path, Identity | None]:
    """Check, before any work, that a suite can be written to ``out`` and swapped in by
    rename; return the directory that will be replaced (``out`` with links resolved:
    a symlinked ``out`` keeps its link and the suite is written where it points) and
    the identity of what is there now (None when nothing is), which the swap checks
    again (:func:`_swap_in`).

    Refused (ValueError, nothing touched): a filesystem root or mount point; the
    working directory or one of its parents; a directory holding or inside a
    ``sources`` directory; a path that exists and is not a directory, or lies under a
    file; an unwritable parent; an existing directory that is neither empty nor a
    suite written by this tool (a valid manifest, only the folders and files it lists,
    no links, FIFOs or devices)."""
    real = os.path.realpath(out)
    if os.path.dirname(real) == real:
        raise ValueError(f"--out {out}: is a filesystem root; refusing to replace it")
    cwd = os.path.realpath(os.getcwd())
    if _within(cwd, real):
        raise ValueError(f"--out {out}: is the working directory or one of its parents; "
                         "a suite is swapped in by rename, which would move it away")
    for src in sources:
        rs = os.path.realpath(src)
        if _within(rs, real) or _within(real, rs):
            raise ValueError(f"--out {out}: overlaps the input {src}")
    if os.path.lexists(real) and not os.path.isdir(real):
        raise ValueError(f"--out {out}: exists and is not a directory")
    ancestor = os.path.dirname(real)
    while not os.path.lexists(ancestor):
        ancestor = os.path.dirname(ancestor)
    if not os.path.isdir(ancestor):
        raise ValueError(f"--out {out}: {ancestor} is not a directory")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise ValueError(f"--out {out}: {ancestor} is not writable")
    if not os.path.isdir(real):
        return Path(real), None
    if os.path.ismount(real):
        raise ValueError(f"--out {out}: is a mount point, which cannot be replaced by "
                         "rename; use a folder inside it")
    if os.stat(real).st_dev != os.stat(os.path.dirname(real)).st_dev:
        raise ValueError(f"--out {out}: lies on another device than its parent "
                         "(cannot be swapped by rename)")
    return Path(real), _identity(Path(real), out)


def _identity(real: Path, out: Path) -> Identity:
    """The identity of a directory that may be replaced (:func:`_check_replaceable`)."""
    st = os.lstat(real)
    if not stat.S_ISDIR(st.st_mode):
        raise ValueError(f"--out {out}: is not a directory")
    return st.st_dev, st.st_ino, _check_replaceable(real, out)


def _check_replaceable(real: Path, out: Path) -> str:
    """An existing ``out`` may be replaced only when empty or a suite this tool wrote.
    Returns the sha256 of its manifest.json ("" for an empty folder)."""
    try:
        children = sorted(os.listdir(real))
    except OSError as exc:
        raise ValueError(f"--out {out}: cannot be listed ({exc.strerror})") from None
    if not children:
        return ""
    try:
        data = fmt.read_checked(real, fmt.MANIFEST, limit=fmt.MAX_MANIFEST_BYTES)
        m = fmt.parse_json(data, fmt.MANIFEST)
    except fmt.MissingFile:
        raise ValueError(f"--out {out}: is not empty and not a suite written by this tool "
                         f"(no {fmt.MANIFEST}); refusing to replace it") from None
    except fmt.SuiteError as exc:
        raise ValueError(f"--out {out}: is not empty and not a suite written by this tool "
                         f"({exc}); refusing to replace it") from None
    structure, _ = fmt.manifest_problems(m)
    if structure:
        raise ValueError(f"--out {out}: is not empty and not a suite written by this tool "
                         f"(its manifest.json: {structure[0]}); refusing to replace it")
    foreign = fmt.unexpected_entries(real, fmt.listed_files(m))
    if foreign:
        shown = "; ".join(f"{rel} {what}" for rel, what in foreign[:5])
        raise ValueError(f"--out {out}: holds entries that are not part of its suite "
                         f"({shown}{' ...' if len(foreign) > 5 else ''}); refusing to "
                         "replace it (links are never followed)")
    return fmt.sha256(data)


def _remove_tree(path: Path) -> None:
    """Remove a directory tree this tool wrote, making read-only folders writable first
    (a read-only entry must not leave half a tree behind). Never follows links."""
    top = os.path.abspath(path)

    def onerror(func: Any, p: str, exc_info: Any) -> None:
        parent = os.path.dirname(os.path.abspath(p))
        try:
            if _within(parent, top):       # never change permissions outside the tree
                os.chmod(parent, 0o700)
            if os.path.isdir(p) and not os.path.islink(p):
                os.chmod(p, 0o700)
                shutil.rmtree(p, onerror=None)
            else:
                func(p)
        except OSError:
            pass

    if os.path.lexists(path):
        shutil.rmtree(path, onerror=onerror)


# --- atomic renames: Linux renameat2(2) (RENAME_NOREPLACE, RENAME_EXCHANGE), with a
# portable fallback where the platform or the filesystem lacks them

_RENAME_NOREPLACE = 1
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100
#: renameat2's system call number by machine, for a libc without the wrapper (glibc
#: before 2.28); Linux's asm-generic table (aarch64, riscv64) and the per-arch tables
_SYS_RENAMEAT2 = {"x86_64": 316, "aarch64": 276, "riscv64": 276, "i386": 353,
                  "i686": 353, "armv7l": 382, "ppc64le": 357, "ppc64": 357, "s390x": 347}
#: errors meaning "not supported here" (kernel, filesystem): the fallback is used
_UNSUPPORTED = {errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP}


@lru_cache(maxsize=1)
def _renameat2_call() -> Any:
    """A callable ``(olddirfd, old, newdirfd, new, flags) -> int`` for renameat2, or
    None where there is none."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    fn = getattr(libc, "renameat2", None)
    if fn is not None:
        fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                       ctypes.c_uint]
        fn.restype = ctypes.c_int
        return fn
    nr, syscall = _SYS_RENAMEAT2.get(platform.machine()), getattr(libc, "syscall", None)
    if nr is None or syscall is None:
        return None
    syscall.restype = ctypes.c_long

    def call(olddirfd: int, old: bytes, newdirfd: int, new: bytes, flags: int) -> int:
        return syscall(ctypes.c_long(nr), ctypes.c_int(olddirfd), ctypes.c_char_p(old),
                       ctypes.c_int(newdirfd), ctypes.c_char_p(new), ctypes.c_uint(flags))
    return call


def _renameat2(src: Path, dst: Path, flags: int) -> bool:
    """renameat2(src, dst, flags): True when done, False where the platform or the
    filesystem does not support it; any other failure is an OSError."""
    call = _renameat2_call()
    if call is None:
        return False
    if call(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), flags) == 0:
        return True
    err = ctypes.get_errno()
    if err in _UNSUPPORTED:
        return False
    raise OSError(err, os.strerror(err), os.fspath(src), None, os.fspath(dst))


def _rename_noreplace(src: Path, dst: Path) -> bool:
    """Rename ``src`` to ``dst`` only if ``dst`` does not exist; False (nothing
    changed) if it does. Without renameat2 the check and the rename are two steps, but
    POSIX rename(2) never replaces a non-empty directory or a file by a directory, so
    no one's data can be lost in between."""
    try:
        if _renameat2(src, dst, _RENAME_NOREPLACE):
            return True
    except FileExistsError:
        return False
    if os.path.lexists(dst):
        return False
    try:
        os.rename(src, dst)
    except OSError as exc:
        if exc.errno in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR):
            return False
        raise
    return True


def _exchange(a: Path, b: Path) -> bool:
    """Swap ``a`` and ``b`` atomically (RENAME_EXCHANGE); False where unsupported.
    FileNotFoundError when one of them does not exist."""
    return _renameat2(a, b, _RENAME_EXCHANGE)


def _refusal(out: Path) -> SuiteWriteError:
    return SuiteWriteError(
        f"--out {out}: appeared or changed while the suite was being written (it is no "
        "longer what was checked at the start); refusing to replace it: it is "
        "untouched and the new suite was discarded")


def _swap_in(stage: Path, real: Path, checked: Identity | None, out: Path) -> Path | None:
    """Put the finished suite ``stage`` at ``real`` only if ``real`` is still what
    :func:`_plan_out` checked: absent (rename without replacing) or the same directory,
    still empty or still the same suite (exchanged atomically, then what came out is
    checked and swapped back if it is something else). Returns where the previous
    suite now lies (to be removed), or None.

    Raises:
        SuiteWriteError: ``real`` appeared or changed; it is untouched, ``stage`` still
            holds the new suite.
    """
    if checked is None:
        if not _rename_noreplace(stage, real):
            raise _refusal(out)
        return None
    try:
        exchanged = _exchange(stage, real)
    except FileNotFoundError:          # removed meanwhile: nothing there to lose
        if not _rename_noreplace(stage, real):
            raise _refusal(out) from None
        return None
    if exchanged:
        if _same(stage, checked, out):
            aside = _aside(stage)
            try:                  # named as what it is, should its removal fail
                os.rename(stage, aside)
            except OSError:
                return stage
            return aside
        try:
            back = _exchange(stage, real)
        except OSError:
            back = False
        if not back:
            raise _Stranded(f"--out {out}: changed during the swap and could not be "
                            f"swapped back: what was there is now at {stage}")
        raise _refusal(out)
    return _swap_portable(stage, real, checked, out)


def _aside(stage: Path) -> Path:
    """Where the previous suite goes once swapped out: a hidden sibling named after the
    (unique) stage."""
    return stage.with_name(stage.name.replace(".partial-", ".old-", 1))


def _same(path: Path, checked: Identity, out: Path) -> bool:
    try:
        return _identity(path, out) == checked
    except (OSError, ValueError):
        return False


def _swap_portable(stage: Path, real: Path, checked: Identity, out: Path) -> Path | None:
    """The swap without RENAME_EXCHANGE: move ``real`` aside, check what moved, put the
    stage in its place (each step undone if the next fails)."""
    aside = _aside(stage)
    try:
        os.rename(real, aside)
    except FileNotFoundError:
        if not _rename_noreplace(stage, real):
            raise _refusal(out) from None
        return None
    try:
        placed = _same(aside, checked, out) and _rename_noreplace(stage, real)
    except BaseException:
        placed = False
        _put_back(aside, real, out)
        raise
    if not placed:
        _put_back(aside, real, out)
        raise _refusal(out)
    return aside


def _put_back(aside: Path, real: Path, out: Path) -> None:
    if not _rename_noreplace(aside, real):
        raise SuiteWriteError(f"--out {out}: changed during the swap; what was there "
                              f"is now at {aside}")


def _umask() -> int:
    """The process's umask (read from /proc where it can be, without changing it)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def _write_failure(exc: OSError, out: Path) -> SuiteWriteError:
    name = errno.errorcode.get(exc.errno or 0, "")
    return SuiteWriteError(
        f"--out {out}: the suite could not be written: {exc.filename or out}: "
        f"{exc.strerror or exc}{f' ({name})' if name else ''}; {out} holds what it held "
        "before and the partial suite was removed")


@contextmanager
def _staged(out: Path, sources: Sequence[Path] = ()) -> Iterator[Path]:
    """Write into a fresh hidden sibling directory (mode from the umask, as a plain
    mkdir gives) and swap it in when the block succeeds, only if ``out`` is still what
    was checked (:func:`_swap_in`). On any failure, SIGINT or SIGTERM the stage is
    removed and ``out`` is left as it was. Every refusal of the arguments happens
    before the block runs; an OSError while writing or swapping (disk full, quota,
    read-only filesystem) becomes a :class:`SuiteWriteError`."""
    real, checked = _plan_out(out, sources)
    try:
        real.parent.mkdir(parents=True, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=f".{real.name}.partial-", dir=real.parent)
    except OSError as exc:
        raise _write_failure(exc, out) from None
    with _signals_raise():
        stage = Path(tmp + "w")
        try:
            os.rename(tmp, stage)       # the swap is by rename: prove it works here
        except OSError as exc:
            os.rmdir(tmp)
            raise ValueError(f"--out {out}: cannot rename inside {real.parent} "
                             f"({exc.strerror or exc}); a suite is swapped in by rename, "
                             "so it must be written where renaming works") from None
        keep = False
        try:
            os.chmod(stage, 0o777 & ~_umask())
            yield stage
            with _signals_deferred():
                old = _swap_in(stage, real, checked, out)
                if old is not None:
                    _remove_tree(old)
                    if os.path.lexists(old):
                        print(f"warning: the previous suite could not be removed entirely: "
                              f"{old}", file=sys.stderr)
        except _Stranded:
            keep = True                  # the stage holds what was at ``out``: keep it
            raise
        except SuiteWriteError:
            raise
        except OSError as exc:
            raise _write_failure(exc, out) from None
        finally:
            if not keep:
                with _signals_deferred():
                    _remove_tree(stage)
                    if os.path.lexists(stage):
                        print(f"warning: the partial suite could not be removed entirely: "
                              f"{stage}", file=sys.stderr)


def _write(out: Path, files: dict[str, bytes]) -> None:
    """Write files (relative path -> bytes) under ``out``; an OSError names the file."""
    for rel, data in files.items():
        path = out / rel
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror or str(exc), os.fspath(path)) from None
