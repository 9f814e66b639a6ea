"""The worked harnesses of docs/examples run as their headers say: the C++17 one (g++,
no library) and the Rust one (rustc, std only) read a golden suite's text form, write
their FP8 results in the text layout, and ``check`` passes them with ``--id`` (and with
``--allow-missing``); with the planted fault ("wrong": one code's lowest bit flipped)
``check`` fails and names the element. Skipped where the compiler is not on PATH."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

import oracle
from oracle.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "docs" / "examples"

#: (compiler, compile command, source, format)
CONSUMERS = {
    "cpp": ("g++", ["g++", "-std=c++17", "-O1", "-Wall", "-Werror", "-o"],
            "cpp_consumer.cpp", "e4m3"),
    "rust": ("rustc", ["rustc", "--edition", "2021", "-O", "-D", "warnings", "-o"],
             "rust_consumer.rs", "e5m2"),
}


def _ids(fmt: str) -> list[str]:
    base = f"formats.encode.{fmt}.f32.nearest_even"
    return [f"formats.decode.{fmt}", base, base + ".satfinite"]


@pytest.mark.parametrize("name", sorted(CONSUMERS))
def test_the_worked_consumer_passes_and_its_planted_fault_fails(name: str, tmp_path: Path,
                                                               capsys) -> None:
    compiler, command, source, fmt = CONSUMERS[name]
    if shutil.which(compiler) is None:
        pytest.skip(f"{compiler} is not on PATH")
    header = (EXAMPLES / source).read_text(encoding="utf-8")
    assert f"--only 'formats.*code*.{fmt}*'" in header    # the generate line it documents
    golden = tmp_path / "golden"
    oracle.generate(golden, only=f"formats.*code*.{fmt}*", text=True, progress=None)
    exe = tmp_path / name
    subprocess.run(command + [str(exe), str(EXAMPLES / source)], check=True,
                   capture_output=True, timeout=120)
    good, bad = tmp_path / "results", tmp_path / "wrong"
    subprocess.run([str(exe), str(golden), str(good)], check=True, timeout=60)
    subprocess.run([str(exe), str(golden), str(bad), "wrong"], check=True, timeout=60)
    assert sorted(p.name for p in good.rglob("*.npy")) == []      # text only
    ids = [a for i in _ids(fmt) for a in ("--id", i)]
    assert main(["check", str(golden), "--results", str(good), *ids]) == 0
    assert "ok: 3/3 outputs pass" in capsys.readouterr().out
    assert main(["check", str(golden), "--results", str(good),
                 "--allow-missing", f"{fmt} nearest-even only"]) == 0
    capsys.readouterr()
    assert main(["check", str(golden), "--results", str(bad), *ids]) == 1
    out = capsys.readouterr().out
    assert "FAILED: 2 problems; 1/3 outputs pass" in out
    assert f"{_ids(fmt)[1]}/codes.txt: codes: 1 of " in out
    assert "1 step apart" in out
