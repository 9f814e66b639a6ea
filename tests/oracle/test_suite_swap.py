"""``generate --out DIR``: the finished suite is swapped in only if DIR is still what was
checked at the start, a failed write (disk full, quota, read-only filesystem) is a
message and exit 1, and the suite's folders and files follow the umask.

What happens between generation and the swap is injected deterministically: the
generation step is wrapped so that, once it has written the whole suite into its
hidden stage, it creates or changes DIR as another process would. Expected outcomes
are file trees compared byte for byte before and after, and permission bits written
by hand from the umask (0o777 & ~umask for folders, 0o666 & ~umask for files)."""
from __future__ import annotations

import ctypes
import errno
import os
import platform
import stat
import sys
from pathlib import Path

import numpy as np
import pytest

from oracle import generation, suite_writer
from oracle.cases import Area, CaseSpec, Operation, Registry
from oracle.cli import main
from oracle.generation import SuiteWriteError, generate


def _double(inputs, params):
    return {"y": np.asarray(inputs["x"]) * 2}


def _cases():
    return [CaseSpec(f"demo.double.c{i}", "demo.double", {},
                     lambda r: {"x": r.normal(8)}, level=0) for i in range(3)]


DEMO = Registry([Area("demo", {}, [Operation("demo.double", _double, "")], _cases)])
#: a few cases of the real registry, for the command line
ONLY = "formats.encode.e2m1.f32.*"


def _gen(path: Path) -> dict:
    return generate(path, registry=DEMO, progress=None, suite="full")


def _tree(root: Path) -> dict[str, bytes]:
    out = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        out[rel] = p.read_bytes() if p.is_file() else b"<dir>"
    return out


@pytest.fixture(params=["renameat2", "portable"])
def swap(request, monkeypatch) -> str:
    """Both swap implementations: Linux renameat2 and the portable fallback."""
    if request.param == "portable":
        monkeypatch.setattr(suite_writer, "_renameat2", lambda src, dst, flags: False)
    elif suite_writer._renameat2_call() is None:
        pytest.skip("renameat2 is not available here")
    return request.param


def _meanwhile(monkeypatch, action) -> list[Path]:
    """Run ``action()`` after the suite is written into its stage, before the swap;
    returns the stages seen."""
    real, stages = generation._generate_into, []

    def generate_then_act(out, *args, **kwargs):
        result = real(out, *args, **kwargs)
        stages.append(out)
        action()
        return result
    monkeypatch.setattr(generation, "_generate_into", generate_then_act)
    return stages


def _mine(d: Path) -> None:
    d.mkdir()
    (d / "a.txt").write_text("x")


def test_a_folder_created_at_out_meanwhile_is_kept(tmp_path: Path, monkeypatch,
                                                   swap: str) -> None:
    out = tmp_path / "victim"
    stages = _meanwhile(monkeypatch, lambda: _mine(out))
    with pytest.raises(SuiteWriteError, match="appeared or changed.*untouched"):
        _gen(out)
    assert stages and _tree(out) == {"a.txt": b"x"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["victim"]   # stage removed


@pytest.mark.parametrize("what", ["file", "empty folder"])
def test_a_file_or_empty_folder_created_meanwhile_is_kept(tmp_path: Path, monkeypatch,
                                                          swap: str, what: str) -> None:
    out = tmp_path / "victim"
    make = (lambda: out.write_text("mine")) if what == "file" else out.mkdir
    _meanwhile(monkeypatch, make)
    with pytest.raises(SuiteWriteError, match="appeared or changed"):
        _gen(out)
    assert out.read_text() == "mine" if what == "file" else list(out.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["victim"]


def _replace_by_mine(out: Path) -> None:
    suite_writer._remove_tree(out)
    _mine(out)


@pytest.mark.parametrize("change", ["replaced by a folder", "a file added",
                                    "replaced by another suite"])
def test_a_suite_changed_meanwhile_is_kept(tmp_path: Path, monkeypatch, swap: str,
                                           change: str) -> None:
    out, other = tmp_path / "g", tmp_path / "elsewhere" / "other"
    _gen(out)
    _gen(other)
    if change == "replaced by another suite":
        # the same bytes but another folder: not the one that was checked
        action = lambda: (suite_writer._remove_tree(out), other.rename(out))  # noqa: E731
    elif change == "a file added":
        action = lambda: (out / "demo.double.c0" / "notes.txt").write_text("mine")  # noqa
    else:
        action = lambda: _replace_by_mine(out)  # noqa: E731
    theirs = _tree(other)
    _meanwhile(monkeypatch, action)
    with pytest.raises(SuiteWriteError, match="appeared or changed"):
        _gen(out)
    after = _tree(out)
    if change == "a file added":
        assert after["demo.double.c0/notes.txt"] == b"mine"
    elif change == "replaced by a folder":
        assert after == {"a.txt": b"x"}
    else:
        assert after == theirs
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere", "g"]


def test_an_empty_folder_filled_meanwhile_is_kept(tmp_path: Path, monkeypatch,
                                                  swap: str) -> None:
    out = tmp_path / "g"
    out.mkdir()
    _meanwhile(monkeypatch, lambda: (out / "a.txt").write_text("x"))
    with pytest.raises(SuiteWriteError):
        _gen(out)
    assert _tree(out) == {"a.txt": b"x"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g"]


def test_a_suite_removed_meanwhile_is_replaced(tmp_path: Path, monkeypatch,
                                               swap: str) -> None:
    out = tmp_path / "g"
    _gen(out)
    before = _tree(out)
    _meanwhile(monkeypatch, lambda: suite_writer._remove_tree(out))
    _gen(out)
    assert _tree(out) == before       # nothing of anyone's lost: the new suite is there
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g"]


def test_an_unchanged_suite_is_replaced_by_either_swap(tmp_path: Path, swap: str) -> None:
    out = tmp_path / "g"
    _gen(out)
    ino = os.stat(out).st_ino
    (out / "demo.double.c1" / "y.npy").write_bytes(b"damaged")   # a listed file
    _gen(out)
    assert (out / "demo.double.c1" / "y.npy").read_bytes().startswith(b"\x93NUMPY")
    assert os.stat(out).st_ino != ino
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g"]


def test_the_cli_refuses_with_exit_1(tmp_path: Path, monkeypatch, capsys) -> None:
    out = tmp_path / "victim"
    _meanwhile(monkeypatch, lambda: _mine(out))
    assert main(["generate", "--out", str(out), "--only", ONLY, "--quiet"]) == 1
    err = capsys.readouterr().err
    assert f"--out {out}: appeared or changed" in err and "Traceback" not in err
    assert _tree(out) == {"a.txt": b"x"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["victim"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="renameat2 is Linux's")
def test_renameat2_primitives(tmp_path: Path) -> None:
    a, b, f = tmp_path / "a", tmp_path / "b", tmp_path / "f"
    a.mkdir()
    (a / "1").write_text("a")
    b.mkdir()
    (b / "1").write_text("b")
    f.write_text("f")
    assert suite_writer._renameat2_call() is not None
    if not suite_writer._exchange(a, b):
        pytest.skip("this filesystem has no RENAME_EXCHANGE (the portable swap is used)")
    assert (a / "1").read_text() == "b" and (b / "1").read_text() == "a"
    for dst in (b, f, tmp_path / "empty"):
        if dst.name == "empty":
            dst.mkdir()
        assert not suite_writer._rename_noreplace(a, dst)
        assert (a / "1").read_text() == "b"
    assert suite_writer._rename_noreplace(a, tmp_path / "new")
    assert (tmp_path / "new" / "1").read_text() == "b" and not a.exists()
    with pytest.raises(FileNotFoundError):
        suite_writer._exchange(a, b)


# --- a full disk, a quota, a read-only filesystem: a message, the old suite kept ------

@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES])
def test_a_failed_write_keeps_the_old_suite(tmp_path: Path, monkeypatch, code: int) -> None:
    out = tmp_path / "g"
    _gen(out)
    before = _tree(out)
    real, calls = Path.write_bytes, []

    def write_bytes(self, data):
        calls.append(self)
        if len(calls) == 2:
            raise OSError(code, os.strerror(code))
        return real(self, data)
    monkeypatch.setattr(Path, "write_bytes", write_bytes)
    with pytest.raises(SuiteWriteError) as info:
        _gen(out)
    monkeypatch.undo()
    text = str(info.value)
    assert os.strerror(code) in text and errno.errorcode[code] in text
    assert str(calls[1]) in text          # the file that failed
    assert _tree(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g"]


def test_a_full_disk_on_the_cli_is_exit_1_without_a_traceback(tmp_path: Path, monkeypatch,
                                                              capsys) -> None:
    out = tmp_path / "g"
    assert main(["generate", "--out", str(out), "--only", ONLY, "--quiet"]) == 0
    before = _tree(out)
    capsys.readouterr()

    def full(self, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(Path, "write_bytes", full)
    assert main(["generate", "--out", str(out), "--only", ONLY, "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "No space left on device (ENOSPC)" in err and "Traceback" not in err
    assert "holds what it held before" in err
    monkeypatch.undo()
    assert _tree(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g"]


def test_a_full_disk_at_the_manifest_of_a_merge(tmp_path: Path, monkeypatch) -> None:
    shards = [tmp_path / f"s{i}" for i in (1, 2)]
    for i, d in enumerate(shards, 1):
        generate(d, registry=DEMO, progress=None, suite="full", shard=(i, 2))
    real = Path.write_bytes

    def write_bytes(self, data):
        if self.name == "manifest.json":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(self, data)
    monkeypatch.setattr(Path, "write_bytes", write_bytes)
    with pytest.raises(SuiteWriteError, match="manifest.json: No space left"):
        generation.merge(shards, tmp_path / "m")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s1", "s2"]


def test_an_unwritable_stage_directory_is_a_message(tmp_path: Path, monkeypatch) -> None:
    def refuse(*args, **kwargs):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(tmp_path))
    monkeypatch.setattr(suite_writer.tempfile, "mkdtemp", refuse)
    with pytest.raises(SuiteWriteError, match="Read-only file system"):
        _gen(tmp_path / "g")
    assert list(tmp_path.iterdir()) == []


# --- permissions follow the umask -----------------------------------------------------

@pytest.mark.parametrize("mask, folder, file", [(0o022, 0o755, 0o644), (0o027, 0o750, 0o640),
                                                (0o002, 0o775, 0o664), (0o077, 0o700, 0o600)])
def test_modes_follow_the_umask(tmp_path: Path, mask: int, folder: int, file: int) -> None:
    old = os.umask(mask)
    try:
        _gen(tmp_path / "g")
    finally:
        os.umask(old)
    root = tmp_path / "g"
    assert stat.S_IMODE(os.stat(root).st_mode) == folder
    for p in root.rglob("*"):
        want = folder if p.is_dir() else file
        assert stat.S_IMODE(os.stat(p).st_mode) == want, p


def test_umask_is_read_without_changing_it() -> None:
    old = os.umask(0o037)
    try:
        assert suite_writer._umask() == 0o037
        assert os.umask(0o037) == 0o037
    finally:
        os.umask(old)


@pytest.mark.skipif(not sys.platform.startswith("linux")
                    or platform.machine() not in suite_writer._SYS_RENAMEAT2,
                    reason="the raw system call is numbered for Linux machines")
def test_the_raw_system_call_serves_a_libc_without_renameat2(tmp_path: Path,
                                                             monkeypatch) -> None:
    real_cdll = ctypes.CDLL

    class NoWrapper:
        def __init__(self, *args, **kwargs):
            self._lib = real_cdll(*args, **kwargs)

        def __getattr__(self, name):
            if name == "renameat2":
                raise AttributeError(name)
            return getattr(self._lib, name)
    monkeypatch.setattr(ctypes, "CDLL", NoWrapper)
    suite_writer._renameat2_call.cache_clear()
    try:
        call = suite_writer._renameat2_call()
        assert call is not None and not isinstance(call, ctypes._CFuncPtr)
        (tmp_path / "a").mkdir()
        (tmp_path / "b").mkdir()
        with pytest.raises(FileExistsError):      # the kernel's answer, no fallback
            suite_writer._renameat2(tmp_path / "a", tmp_path / "b",
                                  suite_writer._RENAME_NOREPLACE)
        assert suite_writer._renameat2(tmp_path / "a", tmp_path / "c",
                                     suite_writer._RENAME_NOREPLACE)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["b", "c"]
    finally:
        monkeypatch.undo()
        suite_writer._renameat2_call.cache_clear()


def test_a_failed_swap_back_keeps_their_folder_where_it_is_named(tmp_path: Path,
                                                                 monkeypatch) -> None:
    if suite_writer._renameat2_call() is None:
        pytest.skip("renameat2 is not available here")
    out = tmp_path / "g"
    _gen(out)
    real, calls = suite_writer._exchange, []

    def exchange(a, b):
        calls.append((a, b))
        if len(calls) == 2:                 # the swap back
            raise OSError(errno.EIO, "simulated failure")
        return real(a, b)
    monkeypatch.setattr(suite_writer, "_exchange", exchange)
    _meanwhile(monkeypatch, lambda: _replace_by_mine(out))
    with pytest.raises(SuiteWriteError) as info:
        _gen(out)
    stage = calls[0][0]
    assert f"what was there is now at {stage}" in str(info.value)
    assert _tree(stage) == {"a.txt": b"x"}          # kept, not removed with the stage
