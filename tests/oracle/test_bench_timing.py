"""The benchmarks' timing helper: calls in rounds, the best time of each function over
its own number of calls."""
from __future__ import annotations

import types

import pytest

import oracle.bench._timing as timing


def test_best_of_interleaved_rounds_and_minimum(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = {"now": 0.0}
    monkeypatch.setattr(timing, "time", types.SimpleNamespace(perf_counter=lambda: clock["now"]))
    log = []
    cost = {"a": iter([5.0, 2.0, 3.0]), "b": iter([4.0, 1.0])}

    def call(name):
        def fn():
            log.append(name)
            clock["now"] += next(cost[name])
        return fn

    got = timing.best_of_interleaved({"a": call("a"), "b": call("b")}, {"a": 3, "b": 2})
    assert got == {"a": 2.0, "b": 1.0}
    assert log == ["a", "b", "a", "b", "a"]  # rounds; b stops after its two calls
