"""``python -m oracle formats`` and ``python -m oracle bench formats`` (smoke)."""
from __future__ import annotations

import argparse

import pytest

from oracle.cli import main
from refimpl import formats as F


def test_listing_reads_the_registry(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["formats"]) == 0
    out = capsys.readouterr().out
    for f in F.all_formats():
        assert f"\n{f.name} " in out


def test_show_e2m1_with_value_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["formats", "float4_e2m1fn"]) == 0
    out = capsys.readouterr().out
    assert "0xF" in out and "-6.0" in out and "subnormal" in out
    assert len([ln for ln in out.splitlines() if ln.startswith("0x")]) == 16


def test_show_bf16_without_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["formats", "bfloat16"]) == 0
    out = capsys.readouterr().out
    assert "bf16" in out and "0x0000" not in out


def test_block_format_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["formats", "mxfp4"]) == 2
    assert "e2m1" in capsys.readouterr().err


def test_bench_runs(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
                    ) -> None:
    import oracle.bench.formats as bench

    monkeypatch.setattr(bench, "best_of", lambda fn, repeat=3: (fn(), 1.0)[1])
    assert bench.run(argparse.Namespace(quick=True)) == 0
    out = capsys.readouterr().out
    assert "e4m3" in out and "Melem/s" in out


def test_presets_listing_reads_the_registry(capsys: pytest.CaptureFixture[str]) -> None:
    from refimpl.matmul.presets import PRESETS, SOURCES

    assert main(["formats", "--presets"]) == 0
    out = capsys.readouterr().out
    for name, p in PRESETS.items():
        line = next(ln for ln in out.splitlines() if ln.startswith(name + " "))
        assert p.evidence in line and p.arch.split()[0] in line
    for key, text in SOURCES.items():
        assert f"[{key}] {text}" in out
    assert "after (FP32 RN)" in next(ln for ln in out.splitlines()
                                     if ln.startswith("B200-E4M3 "))


def test_one_preset_in_full(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["formats", "--presets", "h200-e4m3"]) == 0
    out = capsys.readouterr().out
    assert "H100-E4M3" in out and "E8M13" in out and "H100-FP8" in out
    assert main(["formats", "--presets", "X100-FP16"]) == 2
    assert "unknown tensor-core preset" in capsys.readouterr().err


def test_bench_tensorcore_lists_every_preset(monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    import oracle.bench.tensorcore as bench
    from refimpl.matmul.presets import PRESETS

    monkeypatch.setattr(bench, "best_of", lambda fn, repeat=3: (fn(), 1.0)[1])
    assert bench.run(argparse.Namespace(quick=True, size=8)) == 0
    out = capsys.readouterr().out
    for name in PRESETS:
        assert f"\n{name} " in out
    assert "not met by" in out  # 64 dot products in 1 s (the patched clock) is below 1 M/s
