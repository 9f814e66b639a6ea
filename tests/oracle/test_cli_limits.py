"""``python -m oracle pipeline`` and ``kvcache``: sizes outside the documented limits
of ``oracle/limits.py`` (pipeline: seq_len <= 2**17, at most 4096 key blocks, head_dim
<= 1024, 1..16 stages; kvcache: memory_slots <= 2**20, max_len <= 2**16, block_size in
[1, 4096], at most 4096 requests) are a usage error at once, not hours of simulation,
a MemoryError or a ZeroDivisionError."""
from __future__ import annotations

import time

import pytest

from oracle.cli import main


@pytest.mark.parametrize("argv, says", [
    (["--seq-len", "99999999999"], "--seq-len = 99999999999 is outside the limit [1, 131072]"),
    (["--seq-len", "131072", "--block", "128", "16"], "--seq-len / --block = 131072 / 16"),
    (["--head-dim", "2048"], "--head-dim = 2048 is outside the limit [1, 1024]"),
    (["--stages", "17"], "--stages = 17 is outside the limit [1, 16]"),
])
def test_pipeline_sizes_outside_the_limits_are_refused_at_once(argv, says, capsys) -> None:
    t0 = time.monotonic()
    assert main(["pipeline", *argv]) == 2
    assert time.monotonic() - t0 < 5
    err = capsys.readouterr().err
    assert says in err and "oracle/limits.py" in err


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
