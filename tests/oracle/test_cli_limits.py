"""``python -m oracle pipeline`` and ``kvcache``: sizes outside the documented limits
of ``oracle/limits.py`` (pipeline: seq_len <= 2**20, at most 2**14 key blocks, head_dim
<= 1024, 1..16 stages; kvcache: memory_slots <= 2**20, max_len <= 2**16, block_size in
[1, 4096], at most 4096 requests) are a usage error at once, not hours of simulation,
a MemoryError or a ZeroDivisionError."""
from __future__ import annotations

import time

import pytest

from oracle.cli import main


@pytest.mark.parametrize("argv, says", [
    (["--seq-len", "99999999999"], "--seq-len = 99999999999 is outside the limit [1, 1048576]"),
    (["--seq-len", "1048577"], "--seq-len = 1048577 is outside the limit [1, 1048576]"),
    (["--seq-len", "1048576", "--block", "128", "32"], "--seq-len / --block = 1048576 / 32"),
    (["--head-dim", "2048"], "--head-dim = 2048 is outside the limit [1, 1024]"),
    (["--stages", "17"], "--stages = 17 is outside the limit [1, 16]"),
])
def test_pipeline_sizes_outside_the_limits_are_refused_at_once(argv, says, capsys) -> None:
    t0 = time.monotonic()
    assert main(["pipeline", *argv]) == 2
    assert time.monotonic() - t0 < 5
    err = capsys.readouterr().err
    assert says in err and "oracle/limits.py" in err


@pytest.mark.parametrize("seq_len", [262144, 2 ** 20])
def test_long_context_lengths_are_within_the_limits(seq_len: int) -> None:
    """256K- and 1M-token contexts (documented uses of long-context models) pass the
    limits with the default blocks (128 x 64: 2**14 key blocks at 1M); the simulation
    itself takes seconds there (measured with python -m oracle pipeline)."""
    from oracle import limits

    assert limits.problems("hardware.pipeline.simulate",
                           {"seq_len": seq_len, "head_dim": 128, "block": [128, 64],
                            "stages": 2}, {}) == []


@pytest.mark.parametrize("argv, says", [
    (["--block-size", "0"], "--block-size = 0 is outside the limit [1, 4096]"),
    (["--memory-slots", "99999999999999"], "--memory-slots = 99999999999999 is outside "
                                           "the limit [1, 1048576]"),
    (["--max-len", "70000"], "--max-len = 70000 is outside the limit [1, 65536]"),
    (["--requests", "4097"], "--requests must be in [1, 4096], got 4097"),
    (["--mean-gap", "nan"], "--mean-gap must be a number in [0, 8], got nan"),
    (["--mean-gap", "inf"], "--mean-gap must be a number in [0, 8], got inf"),
])
def test_kvcache_sizes_outside_the_limits_are_refused_at_once(argv, says, capsys) -> None:
    t0 = time.monotonic()
    assert main(["kvcache", *argv]) == 2
    assert time.monotonic() - t0 < 5
    assert says in capsys.readouterr().err
