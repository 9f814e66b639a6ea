"""Trust in suites on disk: writing never loses a user's files or the previous suite,
every file named by a manifest or a results folder is a plain file inside its root,
recomputation stays inside documented limits, and nothing passes silently.

Expected values are independent of the code under test: numpy.float16 casting for the
demonstration registry, bit patterns written by hand (0x0000 is +0, 0x8000 is -0 in
binary16), file trees compared byte for byte before and after."""
from __future__ import annotations

import errno
import io
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import oracle
from oracle import generation, suite_writer
from oracle import suite as fmt
from oracle.cases import Area, CaseSpec, Operation, Registry
from oracle.cli import main
from oracle.generation import generate, merge
from oracle.tolerance import ExactNaNClass
from oracle.verification import check, verify

CALLS = {"n": 0}


def _to_fp16(inputs, params):
    CALLS["n"] += 1
    with np.errstate(over="ignore"):
        return {"codes": np.asarray(inputs["x"]).astype(np.float16).view(np.uint16)}


def _zeros(r):
    return {"x": np.array([0.0, -0.0, 1.0, -2.0, 0.0, 65504.0], np.float32)}


def _cases():
    return [
        CaseSpec("demo.to_fp16.uniform", "demo.to_fp16", {},
                 lambda r: {"x": r.uniform(32, -1000, 1000)},
                 tolerance={"codes": ExactNaNClass()}, formats={"codes": "fp16"}, level=0),
        CaseSpec("demo.to_fp16.zeros", "demo.to_fp16", {}, _zeros,
                 tolerance={"codes": ExactNaNClass()}, formats={"codes": "fp16"}, level=0),
        CaseSpec("demo.to_fp16.normal", "demo.to_fp16", {},
                 lambda r: {"x": r.normal(40, 100.0)}, formats={"codes": "fp16"}, level=0),
    ]


DEMO = Registry([Area("demo", {"IEEE 754": "2019"},
                      [Operation("demo.to_fp16", _to_fp16, "float32 -> fp16 codes")],
                      _cases)])


def _gen(path: Path, **kw) -> dict:
    kw.setdefault("suite", "full")
    return generate(path, registry=DEMO, progress=None, **kw)


def _tree(root: Path) -> dict[str, bytes]:
    out = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if p.is_symlink():
            out[rel] = b"->" + os.readlink(p).encode()
        elif p.is_file():
            out[rel] = p.read_bytes()
        else:
            out[rel] = b"<dir>"
    return out


def _problems(root: Path, registry: Registry = DEMO) -> list[str]:
    rep = verify(root, registry=registry, progress=None)
    return [f"{p.case} {p.file} {p.message}" for p in rep.problems]


def _rewrite(root: Path, edit) -> dict:
    m = json.loads((root / "manifest.json").read_text())
    edit(m)
    (root / "manifest.json").write_bytes(fmt.finish_manifest(m))
    return m


@pytest.fixture()
def golden(tmp_path: Path) -> Path:
    _gen(tmp_path / "g")
    return tmp_path / "g"


def _results_from(golden: Path, dest: Path) -> Path:
    for case in oracle.load(golden):
        for name, arr in case.expected.items():
            path = dest / case.files[name]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(fmt.array_bytes(arr))
    return dest


# --- generate --out: never a lost folder, never a half suite -----------------------

def test_a_folder_with_a_manifest_json_is_not_a_suite(tmp_path: Path) -> None:
    d = tmp_path / "mydata"
    (d / "train").mkdir(parents=True)
    np.save(d / "train" / "x.npy", np.arange(3))
    (d / "val").mkdir()
    (d / "val" / "notes.txt").write_text("mine")
    (d / "manifest.json").write_text('{"files": ["train/x.npy"]}')
    before = _tree(d)
    with pytest.raises(ValueError, match="not a suite"):
        _gen(d)
    assert _tree(d) == before
    assert main(["generate", "--out", str(d), "--suite", "smoke", "--quiet"]) == 2
    assert _tree(d) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mydata"]


def test_a_suite_with_foreign_files_in_a_case_folder_is_refused(golden: Path) -> None:
    (golden / "demo.to_fp16.zeros" / "notes.txt").write_text("mine")
    before = _tree(golden)
    with pytest.raises(ValueError, match="notes.txt"):
        _gen(golden)
    assert _tree(golden) == before


def _counting_gen(path: Path) -> None:
    CALLS["n"] = 0
    try:
        _gen(path)
    finally:
        assert CALLS["n"] == 0, "refused only after doing the work"


def test_cross_device_swap_is_refused_before_any_work(golden: Path, monkeypatch) -> None:
    before = _tree(golden)

    def exdev(src, dst):
        raise OSError(errno.EXDEV, "Invalid cross-device link")
    monkeypatch.setattr(os, "rename", exdev)
    with pytest.raises(ValueError, match="rename|device"):
        _counting_gen(golden)
    monkeypatch.undo()
    assert _tree(golden) == before
    assert sorted(p.name for p in golden.parent.iterdir()) == ["g"]


@pytest.mark.parametrize("which", [".", "..", "cwd-parent-abs"])
def test_out_that_holds_the_working_directory_is_refused(tmp_path: Path, monkeypatch,
                                                         which: str) -> None:
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    out = {"cwd-parent-abs": str(tmp_path / "a")}.get(which, which)
    with pytest.raises(ValueError, match="working directory"):
        _counting_gen(Path(out))
    assert main(["generate", "--out", out, "--suite", "smoke", "--quiet"]) == 2
    assert list(work.iterdir()) == [] and os.getcwd() == str(work)


def test_out_is_a_file_or_under_a_file(tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_text("mine")
    for out in (f, f / "sub"):
        with pytest.raises(ValueError):
            _counting_gen(out)
    assert f.read_text() == "mine" and sorted(p.name for p in tmp_path.iterdir()) == ["f"]


def test_unwritable_parent_is_refused_before_any_work(tmp_path: Path, monkeypatch) -> None:
    parent = tmp_path / "ro"
    parent.mkdir()
    real_access = os.access

    def access(path, mode, *a, **k):   # as root every folder is writable: simulate
        if os.path.realpath(path) == str(parent.resolve()) and mode & os.W_OK:
            return False
        return real_access(path, mode, *a, **k)
    monkeypatch.setattr(os, "access", access)
    with pytest.raises(ValueError, match="writable"):
        _counting_gen(parent / "g")
    assert list(parent.iterdir()) == []


def test_out_through_a_symlink_writes_where_it_points(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    _gen(tmp_path / "elsewhere" / "g")
    before = _tree(tmp_path / "elsewhere" / "g")
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere" / "g")
    _gen(tmp_path / "link")
    assert (tmp_path / "link").is_symlink()
    assert _tree(tmp_path / "elsewhere" / "g") == before
    assert sorted(p.name for p in (tmp_path / "elsewhere").iterdir()) == ["g"]


def test_old_suite_with_a_symlinked_entry_is_refused_untouched(golden: Path,
                                                             tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    (golden / "demo.to_fp16.zeros").rename(outside)
    (golden / "demo.to_fp16.zeros").symlink_to(outside)
    before, target = _tree(golden), _tree(outside)
    with pytest.raises(ValueError, match="link"):
        _counting_gen(golden)
    assert _tree(golden) == before and _tree(outside) == target


def test_old_suite_with_read_only_entries_is_replaced(golden: Path) -> None:
    case = golden / "demo.to_fp16.zeros"
    (case / "x.npy").chmod(0o444)
    case.chmod(0o555)
    try:
        _gen(golden)
    finally:
        if case.exists():
            case.chmod(0o755)
    assert _problems(golden) == []
    assert sorted(p.name for p in golden.parent.iterdir()) == ["g"]


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc (Linux)")
def test_a_removal_refused_once_is_retried_after_chmod(golden: Path, monkeypatch) -> None:
    """As root, read-only folders do not refuse removal: simulate the refusal a normal
    user meets, once per file, and check the previous suite is still removed whole."""
    real_unlink, refused = os.unlink, set()

    def unlink(path, *a, **k):
        if ".old-" in str(k.get("dir_fd") and os.readlink(f"/proc/self/fd/{k['dir_fd']}")
                          or path) and str(path) not in refused:
            refused.add(str(path))
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_unlink(path, *a, **k)
    monkeypatch.setattr(os, "unlink", unlink)
    _gen(golden)
    monkeypatch.undo()
    assert refused and _problems(golden) == []
    assert sorted(p.name for p in golden.parent.iterdir()) == ["g"]


@pytest.mark.parametrize("atomic", [True, False], ids=["renameat2", "portable"])
def test_failed_swap_keeps_the_old_suite(golden: Path, monkeypatch, atomic: bool) -> None:
    before = _tree(golden)
    real_rename, real_renameat2 = os.rename, suite_writer._renameat2
    failed = []

    def renameat2(src, dst, flags):
        if not atomic:
            return False
        if str(dst) == str(golden) and not failed:
            failed.append(1)
            raise OSError(errno.EIO, "simulated failure")
        return real_renameat2(src, dst, flags)

    def rename(src, dst):
        if str(dst) == str(golden) and ".partial-" in str(src) and not failed:  # stage -> DIR
            failed.append(1)
            raise OSError(errno.EIO, "simulated failure")
        return real_rename(src, dst)
    monkeypatch.setattr(suite_writer, "_renameat2", renameat2)
    monkeypatch.setattr(os, "rename", rename)
    with pytest.raises(generation.SuiteWriteError, match="simulated"):
        _gen(golden)
    monkeypatch.undo()
    assert failed and _tree(golden) == before
    assert sorted(p.name for p in golden.parent.iterdir()) == ["g"]


def test_signal_during_the_swap_leaves_one_whole_suite(golden: Path, monkeypatch) -> None:
    real = os.rename
    sent = []

    def rename(src, dst):
        if not sent and ".old-" in str(dst):
            sent.append(1)
            os.kill(os.getpid(), signal.SIGTERM)
        return real(src, dst)
    monkeypatch.setattr(os, "rename", rename)
    before = signal.getsignal(signal.SIGTERM)
    try:
        _gen(golden)
    except generation.Interrupted:
        pass
    monkeypatch.undo()
    assert sent and signal.getsignal(signal.SIGTERM) is before
    assert _problems(golden) == []
    assert sorted(p.name for p in golden.parent.iterdir()) == ["g"]


def test_keyboard_interrupt_removes_the_stage(golden: Path) -> None:
    before = _tree(golden)

    def interrupted(inputs, params):
        raise KeyboardInterrupt

    reg = Registry([Area("demo", {}, [Operation("demo.to_fp16", interrupted, "")], _cases)])
    sigint = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        generate(golden, registry=reg, progress=None)
    assert signal.getsignal(signal.SIGINT) is sigint
    assert _tree(golden) == before
    assert sorted(p.name for p in golden.parent.iterdir()) == ["g"]


SLOW_GEN = textwrap.dedent("""
    import signal, sys, time
    signal.signal(signal.SIGINT, signal.default_int_handler)   # even in a background job
    from pathlib import Path
    import numpy as np
    from oracle.cases import Area, CaseSpec, Operation, Registry
    from oracle.generation import generate

    def slow(inputs, params):
        Path(sys.argv[2]).touch()
        time.sleep(0.2)
        return {"y": np.asarray(inputs["x"]) * 2}

    cases = lambda: [CaseSpec(f"slow.c{i}", "slow.op", {}, lambda r: {"x": r.normal(4)},
                              level=0) for i in range(100)]
    reg = Registry([Area("slow", {}, [Operation("slow.op", slow, "")], cases)])
    generate(sys.argv[1], registry=reg, progress=None, suite="smoke")
""")


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_during_generation_removes_the_stage(tmp_path: Path, sig) -> None:
    out, marker = tmp_path / "g", tmp_path / "started"
    _gen(out)
    before = _tree(out)
    root = Path(__file__).resolve().parents[2]
    p = subprocess.Popen([sys.executable, "-c", SLOW_GEN, str(out), str(marker)], cwd=root,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    t0 = time.monotonic()
    while not marker.exists():
        assert p.poll() is None and time.monotonic() - t0 < 60, p.communicate()
        time.sleep(0.02)
    p.send_signal(sig)
    _, err = p.communicate(timeout=60)
    assert p.returncode != 0
    assert _tree(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g", "started"], err


@pytest.mark.slow
def test_sigterm_on_the_cli_exits_cleanly(tmp_path: Path) -> None:
    out = tmp_path / "g"
    root = Path(__file__).resolve().parents[2]
    p = subprocess.Popen([sys.executable, "-m", "oracle", "generate", "--out", str(out),
                          "--suite", "default"], cwd=root, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    t0 = time.monotonic()
    while not any(c.name.startswith(".g.partial-") for c in tmp_path.iterdir()):
        assert p.poll() is None and time.monotonic() - t0 < 60
        time.sleep(0.01)
    time.sleep(0.3)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 128 + signal.SIGTERM and "Traceback" not in err
    assert "interrupted" in err
    assert list(tmp_path.iterdir()) == []


# --- one path policy: plain regular files inside the root ------------------------------

class _OpenSpy:
    def __init__(self, monkeypatch):
        self.paths: list[str] = []
        real_os_open, real_io_open = os.open, io.open

        def os_open(path, *a, **k):
            self.paths.append(os.path.realpath(path))
            return real_os_open(path, *a, **k)

        def io_open(file, *a, **k):
            if isinstance(file, (str, os.PathLike)):
                self.paths.append(os.path.realpath(file))
            return real_io_open(file, *a, **k)
        monkeypatch.setattr(os, "open", os_open)
        monkeypatch.setattr(io, "open", io_open)


def test_npy_linked_outside_the_suite_is_refused(golden: Path, tmp_path: Path,
                                                monkeypatch) -> None:
    p = golden / "demo.to_fp16.zeros" / "x.npy"
    outside = tmp_path / "outside.npy"
    p.rename(outside)
    p.symlink_to(outside)
    spy = _OpenSpy(monkeypatch)
    msgs = _problems(golden)
    assert any("demo.to_fp16.zeros/x.npy" in m and "link" in m for m in msgs)
    with pytest.raises(fmt.SuiteError, match="link"):
        oracle.load(golden)
    assert str(outside.resolve()) not in spy.paths


def test_case_folder_linked_outside_the_suite_is_refused(golden: Path, tmp_path: Path) -> None:
    (golden / "demo.to_fp16.zeros").rename(tmp_path / "out")
    (golden / "demo.to_fp16.zeros").symlink_to(tmp_path / "out")
    msgs = _problems(golden)
    assert msgs and all("link" in m for m in msgs if "zeros" in m)
    with pytest.raises(fmt.SuiteError, match="link"):
        oracle.load(golden)


def test_fifo_in_place_of_an_array_is_reported_without_blocking(golden: Path) -> None:
    p = golden / "demo.to_fp16.zeros" / "x.npy"
    p.unlink()
    os.mkfifo(p)
    signal.alarm(20)          # opening a FIFO for reading would block: fail, never hang
    try:
        msgs = _problems(golden)
        with pytest.raises(fmt.SuiteError, match="regular file"):
            oracle.load(golden)
    finally:
        signal.alarm(0)
    assert any("x.npy" in m and "regular file" in m for m in msgs)


def test_extra_folders_links_and_fifos_are_reported(golden: Path, tmp_path: Path) -> None:
    (golden / "stray").mkdir()
    (golden / "demo.to_fp16.zeros" / "sub").mkdir()
    os.mkfifo(golden / "demo.to_fp16.zeros" / "pipe")
    (tmp_path / "t.npy").write_bytes(b"x")
    (golden / "demo.to_fp16.zeros" / "extra.npy").symlink_to(tmp_path / "t.npy")
    msgs = _problems(golden)
    for name in ("stray", "demo.to_fp16.zeros/sub", "demo.to_fp16.zeros/pipe",
                 "demo.to_fp16.zeros/extra.npy"):
        assert any(f" {name} " in m for m in msgs), (name, msgs)


def test_absolute_file_behind_an_injected_name_is_never_opened(golden: Path,
                                                               monkeypatch) -> None:
    def edit(m):
        case = m["cases"][0]
        case["inputs"]["content_sha256"] = dict(case["inputs"]["x"], file="/etc/passwd")
    _rewrite(golden, edit)
    spy = _OpenSpy(monkeypatch)
    msgs = _problems(golden)
    assert msgs and "/etc/passwd" not in spy.paths
    assert not any("root:" in m for m in msgs)
    with pytest.raises(fmt.SuiteError):
        oracle.load(golden)


def test_case_id_named_content_sha256_cannot_skip_the_early_stop(golden: Path) -> None:
    def edit(m):
        m["cases"][0]["id"] = "content_sha256"
        m["cases"][0]["inputs"] = []
    _rewrite(golden, edit)
    msgs = _problems(golden)                       # no AttributeError
    assert any("inputs must be an object" in m for m in msgs)
    main_code = main(["verify", str(golden), "--quiet", "--no-recompute"])
    assert main_code == 1


@pytest.mark.parametrize("bad", ["a/b", "..", "a..b", "x\n", "x/../../etc"])
def test_case_ids_that_are_not_single_safe_names(golden: Path, bad: str) -> None:
    def edit(m):
        m["cases"][0]["id"] = bad
    _rewrite(golden, edit)
    assert any("not a valid case id" in m for m in _problems(golden))


@pytest.mark.parametrize("bad", ["x\n", "a/b", "..", "X"])
def test_array_names_that_are_not_safe(golden: Path, bad: str) -> None:
    def edit(m):
        inputs = m["cases"][0]["inputs"]
        inputs[bad] = inputs.pop("x")
    _rewrite(golden, edit)
    assert any("array name" in m for m in _problems(golden))


@pytest.mark.parametrize("path,value", [
    (("cases", 0, "inputs"), []), (("cases", 0, "expected"), "x"),
    (("cases", 0, "params"), []), (("cases", 0, "inputs", "x"), []),
    (("cases", 0, "inputs", "x", "shape"), {}), (("cases",), {}),
    (("generation",), []), (("cases", 0, "variant"), [])])
def test_wrong_json_types_are_clean_problems(golden: Path, path, value) -> None:
    def edit(m):
        parent = m
        for k in path[:-1]:
            parent = parent[k]
        parent[path[-1]] = value
    _rewrite(golden, edit)
    assert _problems(golden)
    with pytest.raises(fmt.SuiteError):
        oracle.load(golden)


def test_size_is_checked_before_reading(golden: Path, monkeypatch) -> None:
    p = golden / "demo.to_fp16.zeros" / "x.npy"
    os.truncate(p, 2 ** 30)                 # sparse: a gigabyte never read
    read = []
    real = os.read

    def spy(fd, n):
        read.append(n)
        return real(fd, n)
    monkeypatch.setattr(os, "read", spy)
    msgs = _problems(golden)
    assert any("x.npy" in m and "bytes" in m and "size" in m for m in msgs)
    assert sum(read) < 2 ** 24


# --- merge ---------------------------------------------------------------------------

def _shards(tmp_path: Path) -> list[Path]:
    dirs = [tmp_path / f"s{i}" for i in (1, 2)]
    for i, d in enumerate(dirs, 1):
        _gen(d, shard=(i, 2))
    return dirs


def test_merge_refuses_a_linked_shard_file(tmp_path: Path) -> None:
    dirs = _shards(tmp_path)
    p = next(dirs[1].glob("*/x.npy"))
    (tmp_path / "secret").write_bytes(p.read_bytes())
    p.unlink()
    p.symlink_to(tmp_path / "secret")
    with pytest.raises(fmt.SuiteError, match="link"):
        merge(dirs, tmp_path / "m")
    assert not (tmp_path / "m").exists()
    assert main(["generate", "--out", str(tmp_path / "m"), "--merge", *map(str, dirs)]) == 1


def test_merge_detects_a_corrupted_shard(tmp_path: Path, capsys) -> None:
    dirs = _shards(tmp_path)
    p = next(dirs[0].glob("*/codes.npy"))
    data = bytearray(p.read_bytes())
    data[-1] ^= 1
    p.write_bytes(bytes(data))
    assert main(["generate", "--out", str(tmp_path / "m"), "--merge", *map(str, dirs)]) == 1
    assert "sha256" in capsys.readouterr().out
    assert not (tmp_path / "m").exists()


def test_merge_into_a_shard_is_refused(tmp_path: Path) -> None:
    dirs = _shards(tmp_path)
    before = _tree(dirs[0])
    with pytest.raises(ValueError):
        merge(dirs, dirs[0])
    assert _tree(dirs[0]) == before


# --- recomputation limits --------------------------------------------------------------

def _real_case(tmp_path: Path, only: str) -> Path:
    out = tmp_path / "g"
    assert main(["generate", "--out", str(out), "--only", only, "--quiet"]) == 0
    return out


@pytest.mark.parametrize("only,key,value", [
    ("hardware.pipeline.h100.fp8.n1000", "seq_len", 1e9),
    ("hardware.pipeline.h100.fp8.n1000", "seq_len", 10 ** 9),
    ("simt.vector_add.vector_add", "grid", [2147483647]),
    ("simt.vector_add.vector_add", "block", [1 << 20]),
])
def test_recomputation_refuses_parameters_outside_the_limits(tmp_path: Path, only: str,
                                                             key: str, value) -> None:
    out = _real_case(tmp_path, only)

    def edit(m):
        m["cases"][0]["params"][key] = value
    _rewrite(out, edit)
    from oracle.cases import registry
    t0 = time.monotonic()
    rep = verify(out, registry=registry(), progress=None)
    assert time.monotonic() - t0 < 20
    assert rep.recomputed == 0
    assert any("limit" in p.message and key in p.message for p in rep.problems)


def test_limits_are_documented_for_every_operation() -> None:
    from oracle import limits
    from oracle.cases import registry
    for name in registry().operations:
        assert name in limits.LIMITS, name
    assert "seq_len" in limits.__doc__ or "seq_len" in limits.describe()


def test_the_full_suite_is_inside_the_limits() -> None:
    from oracle import limits
    from oracle.cases import registry
    from oracle.random_stream import CaseRandom
    for spec in registry().cases("full"):
        params = json.loads(fmt.canonical_json(dict(spec.params)))
        with np.errstate(all="ignore"):
            inputs = spec.build(CaseRandom(1, spec.id))
        assert limits.problems(spec.operation, params, inputs) == [], spec.id


@pytest.mark.parametrize("op,params,inputs,word", [
    ("hardware.pipeline.simulate", {"seq_len": 2 ** 20, "block": [16, 64]}, {}, "16384"),
    ("simt.gallery_run", {"grid": [1024, 2], "block": [32]}, {}, "grid"),
    ("simt.gallery_run", {"grid": [512], "block": [256]}, {}, "threads"),
    ("simt.gallery_run", {"args": [{"int": 2 ** 17}]}, {}, "args[0].int"),
    ("kvcache.simulate", {}, {"trace": np.full((10, 3), 2.0 ** 17)}, "trace"),
    ("matmul.matmul", {}, {"a": np.zeros((2 ** 10, 2 ** 10), np.uint8),
                           "b": np.zeros((2 ** 10, 2 ** 11), np.uint8)}, "work"),
    ("attention.attention", {}, {"q": (1, 8, 2 ** 12, 128), "k": (1, 8, 2 ** 12, 128)},
     "work"),
    ("formats.encode", {"x": [[[[[1]]]]]}, {}, "nested"),
    ("formats.encode", {"x": list(range(65))}, {}, "items"),
    ("formats.encode", {"x": "y" * 201}, {}, "string"),
    ("formats.encode", {}, {"x": (2 ** 24 + 1,)}, "elements"),
])
def test_each_limit_refuses(op: str, params: dict, inputs: dict, word: str) -> None:
    from oracle import limits
    found = limits.problems(op, params, inputs)
    assert found and any(word in f for f in found), found


@pytest.mark.parametrize("op,params,inputs", [
    ("hardware.pipeline.simulate", {"seq_len": 2 ** 17, "block": [32, 64]}, {}),
    ("simt.gallery_run", {"grid": [1024], "block": [64], "args": [{"int": 2 ** 16}]}, {}),
    ("matmul.matmul", {}, {"a": (2 ** 10, 2 ** 10), "b": (2 ** 10, 2 ** 10)}),
    ("attention.attention", {}, {"q": (1, 2, 2 ** 12, 64), "k": (1, 2, 2 ** 12, 64)}),
])
def test_limits_accept_their_bounds(op: str, params: dict, inputs: dict) -> None:
    from oracle import limits
    assert limits.problems(op, params, inputs) == []


# --- no silent pass --------------------------------------------------------------------

def test_check_with_no_results_fails(golden: Path, tmp_path: Path, capsys) -> None:
    (tmp_path / "empty").mkdir()
    assert main(["check", str(golden), "--results", str(tmp_path / "empty")]) == 1
    assert "FAILED" in capsys.readouterr().out


def test_missing_results_fail_unless_allowed_with_a_reason(golden: Path, tmp_path: Path,
                                                           capsys) -> None:
    res = _results_from(golden, tmp_path / "res")
    (res / "demo.to_fp16.normal" / "codes.npy").unlink()
    assert main(["check", str(golden), "--results", str(res)]) == 1
    out = capsys.readouterr().out
    assert "demo.to_fp16.normal/codes.npy" in out
    assert main(["check", str(golden), "--results", str(res),
                 "--allow-missing", "normal inputs not supported yet"]) == 0
    out = capsys.readouterr().out
    assert "normal inputs not supported yet" in out and "1 result file missing" in out
    rep = check(golden, res)
    assert not rep.ok


def test_only_that_matches_nothing_fails(golden: Path, tmp_path: Path, capsys) -> None:
    res = _results_from(golden, tmp_path / "res")
    for extra in ([], ["--strict"]):
        assert main(["check", str(golden), "--results", str(res), "--only", "nosuchcase",
                     *extra]) == 1
        assert "nosuchcase" in capsys.readouterr().out


def test_empty_case_list_fails_verify_and_check(golden: Path, tmp_path: Path) -> None:
    res = _results_from(golden, tmp_path / "res")

    def edit(m):
        m["cases"] = []
    _rewrite(golden, edit)
    assert any("no cases" in m for m in _problems(golden))
    assert main(["verify", str(golden), "--quiet"]) == 1
    assert main(["check", str(golden), "--results", str(res)]) == 1


# --- clean errors ------------------------------------------------------------------------

@pytest.mark.parametrize("text", ["[" * 200000 + "]" * 200000,
                                  '{"a": NaN}', '{"a": Infinity}', '{"a": -Infinity}'])
def test_deep_or_non_finite_json_is_a_clean_problem(golden: Path, text: str, capsys) -> None:
    (golden / "manifest.json").write_text(text)
    assert _problems(golden)
    with pytest.raises(fmt.SuiteError):
        oracle.load(golden)
    assert main(["verify", str(golden), "--quiet"]) == 1
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err


def test_non_finite_numbers_inside_a_rehashed_manifest(golden: Path) -> None:
    m = json.loads((golden / "manifest.json").read_text())
    m["cases"][0]["params"]["scale"] = 1.0
    text = fmt.finish_manifest(m).decode().replace('"scale": 1.0', '"scale": NaN')
    (golden / "manifest.json").write_text(text)
    assert any("NaN" in m or "non-finite" in m for m in _problems(golden))


def test_directories_where_files_should_be(golden: Path, tmp_path: Path, capsys) -> None:
    res = _results_from(golden, tmp_path / "res")
    (res / "demo.to_fp16.zeros" / "codes.npy").unlink()
    (res / "demo.to_fp16.zeros" / "codes.npy").mkdir()
    assert main(["check", str(golden), "--results", str(res), "--allow-missing", "x"]) == 1
    assert "regular file" in capsys.readouterr().out
    (golden / "demo.to_fp16.zeros" / "x.npy").unlink()
    (golden / "demo.to_fp16.zeros" / "x.npy").mkdir()
    assert any("x.npy" in m and "regular file" in m for m in _problems(golden))
    shutil_manifest = golden / "manifest.json"
    shutil_manifest.rename(golden / "m.bak")
    shutil_manifest.mkdir()
    assert _problems(golden)
    assert main(["verify", str(golden), "--quiet"]) == 1
    assert main(["check", str(golden), "--results", str(res)]) == 1
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err


def test_unreadable_files_are_clean_problems(golden: Path, tmp_path: Path, monkeypatch,
                                             capsys) -> None:
    res = _results_from(golden, tmp_path / "res")
    denied = {str((golden / "manifest.json").resolve()),
              str((res / "demo.to_fp16.zeros" / "codes.npy").resolve())}
    real = os.open

    def os_open(path, *a, **k):   # root reads everything: simulate a permission error
        if os.path.realpath(path) in denied:
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real(path, *a, **k)
    monkeypatch.setattr(os, "open", os_open)
    assert main(["verify", str(golden), "--quiet"]) == 1
    out = capsys.readouterr().out
    assert "Permission denied" in out
    denied.pop() if False else denied.discard(str((golden / "manifest.json").resolve()))
    assert main(["check", str(golden), "--results", str(res)]) == 1
    captured = capsys.readouterr()
    assert "Permission denied" in captured.out and "Traceback" not in captured.err


def test_truncated_results_are_clean_problems(golden: Path, tmp_path: Path, capsys) -> None:
    res = _results_from(golden, tmp_path / "res")
    p = res / "demo.to_fp16.zeros" / "codes.npy"
    p.write_bytes(p.read_bytes()[:-3])
    q = res / "demo.to_fp16.normal" / "codes.npy"
    q.write_bytes(q.read_bytes()[:20])
    assert main(["check", str(golden), "--results", str(res)]) == 1
    out = capsys.readouterr().out
    assert "demo.to_fp16.zeros/codes.npy" in out and "demo.to_fp16.normal/codes.npy" in out
    assert "truncated" in out


def test_a_header_whose_element_count_wraps_int64_is_truncated() -> None:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "|u1", "fortran_order": False,
                                               "shape": (2 ** 32, 2 ** 32)})
    with pytest.raises(fmt.SuiteError, match="truncated"):   # 2**64 bytes, not 0
        fmt.parse_array(buf.getvalue(), "result x.npy")


# --- check reports -----------------------------------------------------------------------

def test_check_never_prints_a_file_outside_the_results(golden: Path, tmp_path: Path,
                                                      capsys) -> None:
    res = _results_from(golden, tmp_path / "res")
    secret = tmp_path / "secret"
    secret.write_bytes(b"TOPSECRET-" * 20)
    p = res / "demo.to_fp16.zeros" / "codes.npy"
    p.unlink()
    p.symlink_to(secret)
    assert main(["check", str(golden), "--results", str(res)]) == 1
    out = capsys.readouterr().out
    assert "TOPSECRET" not in out and "link" in out


def test_void_dtype_results_get_a_hint(golden: Path, tmp_path: Path, capsys) -> None:
    res = _results_from(golden, tmp_path / "res")
    p = res / "demo.to_fp16.zeros" / "codes.npy"
    codes = np.load(p)
    np.save(p, codes.view(np.dtype("V2")))       # what np.save of an ml_dtypes array gives
    assert main(["check", str(golden), "--results", str(res)]) == 1
    out = capsys.readouterr().out
    assert ".view(np.uint" in out


def test_failure_counts_per_output_and_signed_zero(golden: Path, tmp_path: Path,
                                                   capsys) -> None:
    res = _results_from(golden, tmp_path / "res")
    p = res / "demo.to_fp16.zeros" / "codes.npy"
    codes = np.load(p)
    # inputs [0, -0, 1, -2, 0, 65504]: binary16 codes written by hand
    assert codes.tolist() == [0x0000, 0x8000, 0x3C00, 0xC000, 0x0000, 0x7BFF]
    codes[[0, 1, 4]] ^= 0x8000                     # -0, +0, -0: three sign differences
    codes[2] = 0x3C01
    np.save(p, codes)
    q = res / "demo.to_fp16.uniform" / "codes.npy"
    u = np.load(q)
    u[:5] += 1
    np.save(q, u)
    rep = check(golden, res)
    counts = {pr.case: pr.message for pr in rep.problems}
    assert "4 of 6" in counts["demo.to_fp16.zeros"]
    assert "3 of them sign" in counts["demo.to_fp16.zeros"]
    assert "5 of 32" in counts["demo.to_fp16.uniform"]
    assert main(["check", str(golden), "--results", str(res), "--rows", "10"]) == 1
    out = capsys.readouterr().out
    lines = [ln for ln in out.splitlines() if "demo.to_fp16.zeros" in ln]
    signs = [ln for ln in lines if "sign: " in ln]
    assert len(signs) == 3 and sum("sign: -0 vs +0" in ln for ln in signs) == 1
    assert "demo.to_fp16.zeros" in out and "4 of 6" in out and "5 of 32" in out


def test_results_layout_is_documented(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["check", "--help"])
    out = capsys.readouterr().out
    assert "<case id>/<output>.npy" in out and ".view(np.uint8)" in out
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert "<case id>/<output>.npy" in readme and "--allow-missing" in readme
