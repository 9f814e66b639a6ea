"""``bench simt`` prints a ratio to numba's CUDA simulator only from a run of it made in
the same bench run; otherwise it says the peer was not measured."""
from __future__ import annotations

import os
import stat
import sys

import pytest

from oracle.bench import simt


def _fake(tmp_path, body: str) -> str:
    exe = tmp_path / "fake-python"
    exe.write_text("#!/bin/sh\n" + body + "\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return str(exe)


@pytest.mark.skipif(os.name != "posix", reason="a shell script stands in for the peer")
def test_a_measured_peer_is_parsed(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("ORACLE_BENCH_PEER_PYTHON", _fake(tmp_path, 'echo "2.5 6.5e-06"'))
    secs, note = simt.numba_simulator_seconds()
    assert secs == 2.5 and "measured now" in note


@pytest.mark.skipif(os.name != "posix", reason="a shell script stands in for the peer")
@pytest.mark.parametrize("body, why", [
    ("exit 3", "not importable"),
    ('echo "2.5 0.75"', "product is wrong"),
    ('echo "Traceback"; echo "boom" >&2; exit 1', "child failed: boom"),
])
def test_an_unmeasured_peer_says_so(tmp_path, monkeypatch, body, why) -> None:
    monkeypatch.setenv("ORACLE_BENCH_PEER_PYTHON", _fake(tmp_path, body))
    secs, note = simt.numba_simulator_seconds()
    assert secs is None and "not measured" in note and why in note


def test_a_missing_interpreter_says_so(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("ORACLE_BENCH_PEER_PYTHON", str(tmp_path / "no-such-python"))
    secs, note = simt.numba_simulator_seconds()
    assert secs is None and "not measured" in note


def test_this_interpreter_without_numba(monkeypatch) -> None:
    pytest.importorskip("numpy")
    try:
        import numba  # noqa: F401
        pytest.skip("numba is installed here: the peer would be run (seconds)")
    except ImportError:
        pass
    monkeypatch.delenv("ORACLE_BENCH_PEER_PYTHON", raising=False)
    secs, note = simt.numba_simulator_seconds()
    assert secs is None and "not importable by " + sys.executable in note


def test_importing_the_peer_module_changes_nothing() -> None:
    before = os.environ.get("NUMBA_ENABLE_CUDASIM")
    import oracle.bench._numba_peer  # noqa: F401
    assert os.environ.get("NUMBA_ENABLE_CUDASIM") == before
