"""Tests for hardware.fusion: the worked fusion and recomputation counts, by hand."""
from __future__ import annotations

from fractions import Fraction

import pytest

from hardware.fusion import (
    Graph,
    Op,
    sin2_plus_cos2,
    stacked_sigmoids,
    traffic,
    training_traffic,
)


def test_sin2_cos2_unfused_and_fused():
    g = sin2_plus_cos2()
    unfused = traffic(g)
    # five kernels: sin(x), cos(x), s^2, c^2, s2 + c2 each read inputs, write output
    assert unfused.kernels == 5
    assert unfused.reads == ("x", "x", "s", "c", "s2", "c2")
    assert unfused.writes == ("s", "c", "s2", "c2", "y")
    assert unfused.accesses == 11
    fused = traffic(g, fused=True)
    # seed: one read of x, one write
    assert (fused.reads, fused.writes, fused.kernels) == (("x",), ("y",), 1)
    assert fused.bytes(1 << 20, 4) == 2 * 4 * (1 << 20)


def test_stacked_sigmoids_stored_costs_8():
    t = training_traffic(stacked_sigmoids())  # save every intermediate: S1, S2
    # forward: read x, write S1, S2 and the output
    assert t.forward.reads == ("x",)
    assert sorted(t.forward.writes) == ["S1", "S2", "out"]
    # backward: three reads (dout, S1, S2), one write (dx)
    assert sorted(t.backward.reads) == ["S1", "S2", "dout"]
    assert t.backward.writes == ("dx",) and t.backward.recomputed == ()
    assert t.accesses == 8


def test_stacked_sigmoids_recomputed_costs_5():
    t = training_traffic(stacked_sigmoids(), saved=())
    assert (t.forward.reads, t.forward.writes) == (("x",), ("out",))
    assert sorted(t.backward.reads) == ["dout", "x"]
    assert t.backward.writes == ("dx",)
    assert set(t.backward.recomputed) == {"S1", "S2"}
    assert t.accesses == 5
    assert Fraction(t.accesses, training_traffic(stacked_sigmoids()).accesses) == Fraction(5, 8)


def test_partial_saving_and_depth():
    # saving only S1: backward recomputes S2 from S1 (or reads out), never reads x
    t = training_traffic(stacked_sigmoids(), saved=("S1",))
    assert t.forward.accesses == 3
    assert "x" not in t.backward.reads and t.backward.accesses == 3
    # depth d, all saved: forward reads x and writes d tensors; each sigmoid's derivative
    # needs its input or its output, so the backward reads dout plus a smallest vertex
    # cover of the path x - S1 - ... - out (ceil(d / 2) tensors), and writes dx
    for depth in (1, 2, 3, 5, 6):
        stored = training_traffic(stacked_sigmoids(depth))
        assert stored.accesses == (1 + depth) + (1 + -(-depth // 2)) + 1
        assert training_traffic(stacked_sigmoids(depth), saved=()).accesses == 5


def test_mul_backward_needs_both_inputs():
    g = Graph(inputs=("a", "b"), ops=(Op("p", "mul", ("a", "b")),), outputs=("p",))
    t = training_traffic(g)
    assert sorted(t.backward.reads) == ["a", "b", "dp"]
    assert t.backward.writes == ("da", "db")


def test_graph_errors():
    with pytest.raises(ValueError, match="unknown kind"):
        Op("y", "gelu2", ("x",))
    with pytest.raises(ValueError, match="takes 2 inputs"):
        Op("y", "add", ("x",))
    with pytest.raises(ValueError, match="input 'z'"):
        Graph(inputs=("x",), ops=(Op("y", "sin", ("z",)),), outputs=("y",))
    with pytest.raises(ValueError, match="defined twice"):
        Graph(inputs=("x",), ops=(Op("x", "sin", ("x",)),), outputs=("x",))
    with pytest.raises(ValueError, match="not produced"):
        Graph(inputs=("x",), ops=(Op("y", "sin", ("x",)),), outputs=("w",))
    with pytest.raises(ValueError, match="saved tensor 'q'"):
        training_traffic(stacked_sigmoids(), saved=("q",))


def test_fused_is_a_bool():
    with pytest.raises(TypeError, match="fused must be True or False"):
        traffic(sin2_plus_cos2(), "false")        # a truthy string once meant fused
