"""``python -m oracle bench scaling`` with a stand-in peer (torchao is never a dependency):
the peer's calls are timed in turns with ours, and the ratio and goal come from those
two times."""
from __future__ import annotations

import argparse

import pytest

import oracle.bench.scaling as bench


def test_peer_timed_in_turns_and_ratio_from_both(monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    calls = []
    peer = {key: (lambda key=key: calls.append(key))
            for key in [("e4m3", "float32"), ("e2m1", "bf16 values"), ("nvfp4", "float32")]}
    monkeypatch.setattr(bench, "_peer_quantizers", lambda peer_mods, x, xbf: peer)
    monkeypatch.setattr(bench, "import_peer", lambda *mods: None)
    turns = []

    def interleaved(fns, repeat):
        turns.append((sorted(fns), dict(repeat)))
        for fn in fns.values():
            fn()
        # ours 1 s; the peer 3 s for FP8 (goal met), 1.5 s otherwise (missed)
        slow = 3.0 if calls[-1] == ("e4m3", "float32") else 1.5
        return {"ours": 1.0, "peer": slow}

    monkeypatch.setattr(bench, "best_of_interleaved", interleaved)
    monkeypatch.setattr(bench, "best_of", lambda fn, repeat=3: (fn(), 2.0)[1])
    assert bench.run(argparse.Namespace(quick=True)) == 0
    out = capsys.readouterr().out
    # one interleaved measurement per operation the peer has, three calls of each
    assert turns == [(["ours", "peer"], {"ours": 3, "peer": 3})] * 3
    # the peer's warm-up and measured calls, in the order of the table
    assert calls == [("e4m3", "float32")] * 2 + [("e2m1", "bf16 values")] * 2 \
        + [("nvfp4", "float32")] * 2
    def line(op: str, label: str) -> str:
        (found,) = [ln for ln in out.splitlines()
                    if ln.startswith(op) and ln[len(op):].lstrip().startswith(label)]
        return found

    assert "3.0x" in line("MX e4m3 quantize", "float32")
    assert "met" in line("MX e4m3 quantize", "float32")
    assert "1.5x" in line("MX e2m1 quantize", "bf16 values")
    assert "MISSED" in line("MX e2m1 quantize", "bf16 values")
    # operations without the peer: no ratio, no goal against it
    assert "torchao" not in line("MX e4m3 quantize", "bf16 values")
    assert "x " not in line("MX e4m3 quantize", "bf16 values").split("bf16 values")[1]
    assert "in turns" in out
