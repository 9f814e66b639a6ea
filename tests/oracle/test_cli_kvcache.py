"""``python -m oracle kvcache``: the table agrees with refimpl.kvcache.simulate."""
from __future__ import annotations

from oracle.cli import main
from refimpl.kvcache.simulate import paged_example_trace, simulate


def test_paged_example_table(capsys):
    assert main(["kvcache", "--example"]) == 0
    out = capsys.readouterr().out
    # 1452 tokens in 3 x 2048 reserved slots vs 1456 paged slots
    assert f"{1452 / (3 * 2048):.1%}" in out and f"{1452 / 1456:.1%}" in out
    assert simulate(paged_example_trace(), "paged").utilization == 1452 / 1456
    assert "contiguous" in out and "paged" in out


def test_usage_errors(capsys):
    assert main(["kvcache", "--requests", "0"]) == 2
    assert main(["kvcache", "--memory-slots", "100"]) == 2
