"""``python -m oracle pipeline``: a simulated block outside the documented limits of
``oracle/limits.py`` (seq_len <= 2**17, at most 4096 key blocks, head_dim <= 1024,
1..16 stages) is a usage error at once, not hours of simulation."""
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
def test_sizes_outside_the_limits_are_refused_at_once(argv, says, capsys) -> None:
    t0 = time.monotonic()
    assert main(["pipeline", *argv]) == 2
    assert time.monotonic() - t0 < 5
    err = capsys.readouterr().err
    assert says in err and "oracle/limits.py" in err
