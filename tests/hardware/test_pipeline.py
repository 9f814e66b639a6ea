"""Tests for hardware.pipeline (the FA3 main-loop schedule model) and
``python -m oracle pipeline``.

Oracles: unit costs recomputed from the catalogue figures; totals derived by hand for
free loads (the compute bound) and free compute (the load bound) with rates chosen so
every duration is a small dyadic number (exact in float64); an independent replay of
the buffer protocol written in the test; a hand-drawn Gantt chart.
"""
from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hardware import pipeline as pl
from hardware import specs
from oracle.cli import main

NAMES = list(pl.SCHEDULES)
PRODUCER = [n for n in NAMES if pl.SCHEDULES[n].producer]
NO_PRODUCER = [n for n in NAMES if not pl.SCHEDULES[n].producer]
TWO_WG = [n for n in NAMES if pl.SCHEDULES[n].warpgroups == 2]
ONE_WG = [n for n in NAMES if pl.SCHEDULES[n].warpgroups == 1]

# Dyadic rates for B_r = 128, B_c = 64, d = 128, fp16 (exact float64 durations):
# GEMM of 128 rows: 2*128*64*128 / 2**20 = 2.0 (1.0 for a 64-row warpgroup);
# softmax of 128 rows: 8192 / 2**14 + (4*8192 + 128*128) / 2**17 = 0.5 + 0.375 = 0.875;
# one K or V tile: 64*128*2 bytes / 2**14 B/s = 1.0.
DYADIC = dict(block=(128, 64), head_dim=128, tensor_flops=2.0**20, exp_rate=2.0**14,
              fp32_rate=2.0**17)
G_FULL, S_FULL, G_HALF, S_HALF, X = 2.0, 0.875, 1.0, 0.4375, 1.0


def _sim(name, **kw):
    return pl.simulate_block(name, **kw)


# ---------------------------------------------------------------- unit costs


def test_unit_costs_from_the_h100_entry():
    g = specs.get("H100")
    c = pl.unit_costs("H100", seq_len=8192, block=(128, 64))
    assert c.tensor_flops == pytest.approx(989e12 / 132, rel=1e-15)
    assert c.exp_rate == pytest.approx(16 * 1830e6, rel=1e-15)      # 3.9 TFLOPS / 132 SMs
    assert c.exp_rate * 132 == pytest.approx(3.9e12, rel=0.01)        # the paper's figure
    assert c.fp32_rate == pytest.approx(67e12 / 2 / 132, rel=1e-15)
    # 64 query tiles of 128 rows share each K/V tile through L2
    assert c.bandwidth == pytest.approx(3350e9 / 132 * 64, rel=1e-15)
    assert c.load_latency == pytest.approx(200 / 1830e6, rel=1e-15)
    assert c.bytes_per_element == 2
    # the paper's 3.3 ratio: a d = 128 GEMM pair takes twice the exp time of its scores
    exp_only = dataclasses.replace(c, fp32_rate=math.inf)
    two_gemms = 2 * exp_only.gemm(128, 64, 128)
    assert two_gemms / exp_only.softmax(128, 64, 128) == pytest.approx(2.0, rel=0.02)
    assert g.sm_count == 132


def test_unit_cost_formulas():
    c = pl.UnitCosts(tensor_flops=2.0**20, exp_rate=2.0**14, fp32_rate=2.0**17,
                     bandwidth=2.0**14, load_latency=0.5, bytes_per_element=2)
    assert c.gemm(128, 64, 128) == G_FULL and c.gemm(64, 64, 128) == G_HALF
    assert c.softmax(128, 64, 128) == S_FULL and c.softmax(64, 64, 128) == S_HALF
    assert c.load(64, 128) == X and c.load(32, 128) == 0.5
    assert c.latency == 0.5
    assert dataclasses.replace(c, bandwidth=math.inf).latency == 0.0


def test_unit_cost_defaults_follow_the_options():
    no_reuse = pl.unit_costs("H100", seq_len=128, block=(128, 64))
    assert no_reuse.bandwidth == pytest.approx(3350e9 / 132)           # one query tile
    assert no_reuse.load_latency == pytest.approx(500 / 1830e6)         # HBM, ~500 cycles
    capped = pl.unit_costs("H100", seq_len=10**6, block=(128, 64))
    assert capped.bandwidth == pytest.approx(3350e9)                   # all 132 SMs
    fp8 = pl.unit_costs("H100", seq_len=8192, block=(128, 64), dtype="fp8")
    assert fp8.tensor_flops == pytest.approx(1979e12 / 132) and fp8.bytes_per_element == 1
    a100 = pl.unit_costs("A100", seq_len=8192, block=(128, 64), dtype="bf16")
    assert a100.tensor_flops == pytest.approx(312e12 / 108)


@pytest.mark.parametrize("kwargs, match", [
    (dict(dtype="fp4"), "dtype"),
    (dict(gpu="V100", dtype="bf16"), "no dense bf16"),
    (dict(gpu="B200"), "sm_count"),
    (dict(bandwidth=0.0), "bandwidth must be positive"),
    (dict(tensor_flops=float("nan")), "tensor_flops must be positive"),
    (dict(load_latency=-1.0), "load_latency"),
    (dict(l2_reuse=0), "l2_reuse"),
])
def test_unit_cost_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        pl.unit_costs(kwargs.pop("gpu", "H100"), seq_len=1024, block=(128, 64), **kwargs)


def test_a_gpu_without_per_sm_figures_runs_with_explicit_rates():
    t = pl.simulate_block("fa3", gpu="B200", seq_len=512, head_dim=128, tensor_flops=1e13,
                    exp_rate=3e10, fp32_rate=3e11, bandwidth=1e12, load_latency=1e-7)
    assert t.gpu == "B200" and t.total_time > 0


# ---------------------------------------------------------------- bounds


@pytest.mark.parametrize("blocks", [1, 2, 3, 8])
@pytest.mark.parametrize("name", NAMES)
def test_infinite_bandwidth_gives_the_compute_bound(name, blocks):
    """With free loads: the one-warpgroup schedules run GEMM0, softmax, GEMM1 back to
    back, T (2G + S); with two warpgroups whose softmax (S/2) fits in one of their GEMMs
    (G/2), ping-pong keeps the tensor cores busy from the first GEMM to the last, so
    the time is the tensor work alone, T * 2 GEMMs * G."""
    t = _sim(name, seq_len=64 * blocks, bandwidth=math.inf, **DYADIC)
    if pl.SCHEDULES[name].warpgroups == 1:
        assert t.total_time == blocks * (2 * G_FULL + S_FULL)
    else:
        assert S_HALF <= G_HALF
        assert t.total_time == blocks * 2 * G_FULL
        assert t.tensor_utilization == 1.0
    assert t.tensor_busy == blocks * 2 * G_FULL


@pytest.mark.parametrize("blocks", [1, 2, 5])
@pytest.mark.parametrize("name", NAMES)
def test_infinite_compute_gives_the_load_bound(name, blocks):
    """With free compute and no latency the memory unit streams the 2T tiles."""
    t = _sim(name, seq_len=64 * blocks, compute=math.inf, bandwidth=2.0**14,
             load_latency=0.0, block=(128, 64), head_dim=128)
    assert t.total_time == 2 * blocks * X
    assert t.tensor_busy == 0.0 and t.tensor_utilization == 0.0


@pytest.mark.parametrize("blocks", [1, 3, 6])
@pytest.mark.parametrize("name", NAMES)
def test_latency_is_hidden_only_by_the_producer(name, blocks):
    """Free compute, transfers X = 1 and latency 0.5: a producer with enough stages
    streams the tiles and exposes the latency once (2 T X + latency); consumers that
    load for themselves wait for K_j, V_j before asking for the next block,
    T (2 X + latency)."""
    lat = 0.5
    t = _sim(name, seq_len=64 * blocks, compute=math.inf, bandwidth=2.0**14,
             load_latency=lat, stages=4, block=(128, 64), head_dim=128)
    if pl.SCHEDULES[name].producer:
        assert t.total_time == 2 * blocks * X + lat
    else:
        assert t.total_time == blocks * (2 * X + lat)


def test_both_infinite_is_refused():
    with pytest.raises(ValueError, match="both be infinite"):
        pl.simulate_block("fa3", seq_len=256, head_dim=64, compute=math.inf, bandwidth=math.inf)


@settings(max_examples=30)
@given(name=st.sampled_from(NAMES), blocks=st.integers(1, 12),
       head_dim=st.sampled_from([32, 64, 128, 256]), b_c=st.sampled_from([32, 64, 128]),
       stages=st.integers(1, 4), bw_scale=st.sampled_from([0.05, 0.3, 1.0, 20.0]),
       lat=st.sampled_from([0.0, 1e-7, 5e-7]))
def test_time_is_at_least_every_resource_bound(name, blocks, head_dim, b_c, stages,
                                               bw_scale, lat):
    seq_len = blocks * b_c - (b_c // 3 if blocks > 1 else 0)   # a partial last block
    base = pl.unit_costs("H100", seq_len=seq_len, block=(128, b_c))
    t = pl.simulate_block(name, seq_len=seq_len, head_dim=head_dim, block=(128, b_c),
                    stages=stages, bandwidth=base.bandwidth * bw_scale, load_latency=lat)
    busy = {u: math.fsum(e.end - e.start for e in t.events if e.unit == u)
            for u in pl.UNITS}
    for u, b in busy.items():
        assert t.total_time >= b * (1 - 1e-12), u
    cols = [min(b_c, seq_len - j * b_c) for j in range(blocks)]
    c, wg = t.costs, pl.SCHEDULES[name].warpgroups
    assert busy["tensor"] == pytest.approx(
        sum(2 * wg * c.gemm(128 // wg, n, head_dim) for n in cols), rel=1e-12)
    assert busy["softmax"] == pytest.approx(
        sum(wg * c.softmax(128 // wg, n, head_dim) for n in cols), rel=1e-12)
    assert busy["memory"] == pytest.approx(sum(2 * c.load(n, head_dim) for n in cols),
                                           rel=1e-12)
    # the first K tile's transfer and latency always come before the first GEMM
    first_gemm = c.gemm(128 // wg, cols[0], head_dim)
    assert t.total_time >= c.load(cols[0], head_dim) + c.latency + first_gemm
    assert 0 < t.tensor_utilization <= 1
    assert t.flops == 4 * 128 * seq_len * head_dim


# ---------------------------------------------------------------- more stages


@settings(max_examples=40)
@given(name=st.sampled_from(NAMES), stages=st.integers(1, 5), blocks=st.integers(1, 24),
       head_dim=st.sampled_from([32, 64, 128, 256]), b_c=st.sampled_from([32, 64, 128]),
       b_r=st.sampled_from([64, 128, 192]), bw_scale=st.sampled_from([0.02, 0.2, 1.0, 10.0]),
       lat=st.sampled_from([0.0, 1e-7, 1e-6]))
def test_more_stages_are_never_slower(name, stages, blocks, head_dim, b_c, b_r, bw_scale,
                                      lat):
    seq_len = blocks * b_c
    base = pl.unit_costs("H100", seq_len=seq_len, block=(b_r, b_c))
    kw = dict(seq_len=seq_len, head_dim=head_dim, block=(b_r, b_c),
              bandwidth=base.bandwidth * bw_scale, load_latency=lat)
    fewer = pl.simulate_block(name, stages=stages, **kw)
    more = pl.simulate_block(name, stages=stages + 1, **kw)
    assert more.total_time <= fewer.total_time


def test_stages_matter_for_the_producer():
    kw = dict(seq_len=8192, head_dim=128)
    one, two = (pl.simulate_block("fa3", stages=s, **kw) for s in (1, 2))
    assert two.total_time < one.total_time
    serial = [pl.simulate_block("serial", stages=s, **kw).total_time for s in (1, 2, 4)]
    assert serial[0] == serial[1] == serial[2]   # a serial loop never runs ahead


# ---------------------------------------------------------------- the paper's ordering


@pytest.mark.parametrize("seq_len, head_dim, dtype", [
    (8192, 128, "fp16"), (16384, 128, "fp16"), (2048, 128, "fp16"), (8192, 64, "fp16"),
    (8192, 256, "fp16"), (512, 64, "fp16"), (8192, 128, "bf16"), (8192, 128, "fp8"),
    (8192, 256, "fp8")])
def test_fa3_beats_each_ablation_which_beats_serial(seq_len, head_dim, dtype):
    u = {n: pl.simulate_block(n, seq_len=seq_len, head_dim=head_dim, dtype=dtype).tensor_utilization
         for n in NAMES}
    assert u["fa3"] > u["warp_specialized"] > u["serial"]
    assert u["fa3"] > u["pingpong"] > u["serial"]


def test_when_the_softmax_is_the_bottleneck_overlap_cannot_beat_it():
    """FP8 at d = 64: the GEMMs take 70 ns per 128 rows but the softmax 441 ns, so both
    two-warpgroup schedules are bound by the softmax unit and tie."""
    t = {n: pl.simulate_block(n, seq_len=8192, head_dim=64, dtype="fp8") for n in TWO_WG}
    for x in t.values():
        busy = math.fsum(e.end - e.start for e in x.events if e.unit == "softmax")
        assert busy / x.total_time > 0.98
    assert t["fa3"].total_time == pytest.approx(t["pingpong"].total_time, rel=0.01)


def test_paper_configuration_figures():
    """FA3 Table 2's setting (d 128, 8K): the softmax (exp plus FP32 work) of a 128-row
    block is ~1.7 GEMMs, so a single warpgroup that never overlaps it keeps the tensor
    cores busy at most 2G / (2G + S); FA3 hides all of it.

    G and S from the H100 SXM datasheet figures per SM (132 SMs): 989 TFLOPS dense FP16
    tensor, 16 MUFU exp2 per clock at 1830 MHz, 67 TFLOPS FP32 (FMA = 2 flops); the
    softmax of a 128 x 64 block is 8192 exp2 plus 4 x 8192 + 128 x 128 FP32 operations
    (the max/subtract before the exp, the sum/rescale after: FA3 section 3.1)."""
    t = {n: pl.simulate_block(n, seq_len=8192, head_dim=128) for n in NAMES}
    g = 2 * 128 * 64 * 128 / (989e12 / 132)
    s = 8192 / (16 * 1830e6) + (4 * 8192 + 128 * 128) / (67e12 / 2 / 132)
    assert s / g == pytest.approx(1.69, abs=0.01)
    bound = 2 * g / (2 * g + s)
    assert t["warp_specialized"].tensor_utilization <= bound * (1 + 1e-9)
    assert t["warp_specialized"].tensor_utilization > 0.99 * bound
    assert t["fa3"].tensor_utilization > 0.99


# ---------------------------------------------------------------- the buffer invariant


def _replay(events, stages, warpgroups):
    """An independent statement of the protocol, checked pairwise over the log."""
    loads = {(e.buffer, e.j): e for e in events if e.op == "load"}
    fulls = {(e.buffer, e.j): e for e in events if e.op == "full"}
    rel = {(e.buffer, e.j, e.wg): e for e in events if e.op == "release"}
    reads = [e for e in events if e.op in ("gemm0", "gemm1")]
    for (buf, j), ld in loads.items():
        assert ld.stage == j % stages
        assert fulls[(buf, j)].start >= ld.end
        if (buf, j - stages) in loads:
            for w in range(warpgroups):
                assert rel[(buf, j - stages, w)].start <= ld.start
    for r in reads:
        assert r.buffer == ("K" if r.op == "gemm0" else "V")
        assert fulls[(r.buffer, r.j)].start <= r.start
        assert r.end <= rel[(r.buffer, r.j, r.wg)].start
    assert len(rel) == 2 * len(loads) // 2 * warpgroups


@pytest.mark.parametrize("stages", [1, 2, 3])
@pytest.mark.parametrize("name", NAMES)
def test_every_schedule_keeps_the_buffer_protocol(name, stages):
    t = pl.simulate_block(name, seq_len=1000, head_dim=64, stages=stages)
    pl.check_buffer_invariant(t.events, stages=stages, warpgroups=t.schedule.warpgroups)
    _replay(t.events, stages, t.schedule.warpgroups)
    blocks = math.ceil(1000 / 64)
    ops = [e.op for e in t.events]
    assert ops.count("load") == ops.count("full") == 2 * blocks
    assert ops.count("gemm0") == ops.count("gemm1") == blocks * t.schedule.warpgroups
    assert ops.count("release") == 2 * blocks * t.schedule.warpgroups


@pytest.mark.parametrize("name", PRODUCER)
def test_producer_that_ignores_empty_is_caught(name):
    broken = dataclasses.replace(pl.SCHEDULES[name], name="broken", wait_empty=False)
    # loads far faster than compute, so an unchecked producer laps the consumers
    with pytest.raises(pl.BufferInvariantError, match="overwritten|before it is full"):
        pl.simulate_block(broken, seq_len=2048, head_dim=128, stages=2, bandwidth=1e15,
                    load_latency=0.0)
    t = pl.simulate_block(broken, seq_len=2048, head_dim=128, stages=2, bandwidth=1e15,
                    load_latency=0.0, check=False)
    with pytest.raises(AssertionError):      # the independent replay agrees
        _replay(t.events, 2, t.schedule.warpgroups)


@pytest.mark.parametrize("name", NO_PRODUCER)
def test_consumers_that_load_never_lap_themselves(name):
    """Without a producer a stage is reloaded only when a consumer needs the next
    block, after it released the previous one, so skipping the empty wait changes
    nothing: the same timeline, and it keeps the protocol."""
    broken = dataclasses.replace(pl.SCHEDULES[name], wait_empty=False)
    a = pl.simulate_block(broken, seq_len=2048, head_dim=128, stages=2)
    b = pl.simulate_block(name, seq_len=2048, head_dim=128, stages=2)
    assert a.events == b.events


@pytest.mark.parametrize("name", NAMES)
def test_consumer_that_ignores_full_is_caught(name):
    broken = dataclasses.replace(pl.SCHEDULES[name], name="broken", wait_full=False)
    with pytest.raises(pl.BufferInvariantError, match="read before it is full"):
        pl.simulate_block(broken, seq_len=1024, head_dim=128)
    t = pl.simulate_block(broken, seq_len=1024, head_dim=128, check=False)
    with pytest.raises(AssertionError):
        _replay(t.events, 2, t.schedule.warpgroups)


def _edit(events, pick, **changes):
    out = list(events)
    k = next(i for i, e in enumerate(out) if pick(e))
    out[k] = dataclasses.replace(out[k], **changes)
    return out


@pytest.fixture(scope="module")
def fa3_log():
    return pl.simulate_block("fa3", seq_len=512, head_dim=64, stages=2).events


def test_checker_catches_a_load_moved_before_the_release(fa3_log):
    rel = next(e for e in fa3_log if e.op == "release" and e.buffer == "V" and e.j == 0)
    bad = _edit(fa3_log, lambda e: e.op == "load" and e.buffer == "V" and e.j == 2,
                start=rel.start - 1e-9)
    with pytest.raises(pl.BufferInvariantError, match="overwritten while V_0"):
        pl.check_buffer_invariant(bad, stages=2, warpgroups=2)


def test_checker_catches_an_early_full(fa3_log):
    load = next(e for e in fa3_log if e.op == "load" and e.buffer == "K" and e.j == 1)
    mid = (load.start + load.end) / 2
    bad = _edit(fa3_log, lambda e: e.op == "full" and e.buffer == "K" and e.j == 1,
                start=mid, end=mid)
    with pytest.raises(pl.BufferInvariantError, match="before the transfer ended"):
        pl.check_buffer_invariant(bad, stages=2, warpgroups=2)


def test_checker_catches_a_release_during_a_read(fa3_log):
    read = next(e for e in fa3_log if e.op == "gemm1" and e.j == 3 and e.wg == 1)
    bad = _edit(fa3_log, lambda e: e.op == "release" and e.buffer == "V" and e.j == 3
                and e.wg == 1, start=read.start, end=read.start)
    with pytest.raises(pl.BufferInvariantError, match="released before"):
        pl.check_buffer_invariant(bad, stages=2, warpgroups=2)


def test_checker_catches_a_wrong_stage_and_a_missing_full(fa3_log):
    bad = _edit(fa3_log, lambda e: e.op == "gemm0" and e.j == 2, stage=1)
    with pytest.raises(pl.BufferInvariantError, match="belongs in stage 0"):
        pl.check_buffer_invariant(bad, stages=2, warpgroups=2)
    missing = [e for e in fa3_log if not (e.op == "full" and e.buffer == "K" and e.j == 4)]
    with pytest.raises(pl.BufferInvariantError, match="read before it is full"):
        pl.check_buffer_invariant(missing, stages=2, warpgroups=2)
    twice = list(fa3_log) + [next(e for e in fa3_log if e.op == "release")]
    with pytest.raises(pl.BufferInvariantError, match="twice"):
        pl.check_buffer_invariant(twice, stages=2, warpgroups=2)


# ---------------------------------------------------------------- schedule structure


def test_intra_overlap_runs_softmax_during_the_pv_gemm():
    t = pl.simulate_block("fa3", seq_len=8192, head_dim=128)
    ev = {(e.op, e.j, e.wg): e for e in t.events if e.unit in ("tensor", "softmax")}
    for j in range(1, 10):
        g0, g1, sm = ev[("gemm0", j, 0)], ev[("gemm1", j - 1, 0)], ev[("softmax", j, 0)]
        assert g0.end <= g1.start            # GEMM0(j) issued before GEMM1(j-1)
        assert sm.start < g1.end and sm.start >= g0.end   # softmax(j) overlaps GEMM1(j-1)


def test_pingpong_alternates_warpgroups_on_the_tensor_cores():
    for name in TWO_WG:
        t = pl.simulate_block(name, seq_len=2048, head_dim=128)
        turns = [e.wg for e in t.events if e.unit == "tensor"]
        # turns: each warpgroup issues one or two GEMMs, then the other
        runs = [turns[0]]
        for w in turns[1:]:
            if w != runs[-1]:
                runs.append(w)
        assert runs == [k % 2 for k in range(len(runs))]
        assert len(runs) == 2 * (2048 // 64 + 1)


def test_serial_does_one_thing_at_a_time():
    t = pl.simulate_block("serial", seq_len=2048, head_dim=128)
    spans = sorted((e.start, e.end) for e in t.events if e.end > e.start)
    for (s0, e0), (s1, e1) in zip(spans, spans[1:]):
        assert s1 >= e0 - 1e-18


def test_determinism():
    a = pl.simulate_block("fa3", seq_len=4000, head_dim=96, block=(128, 64), stages=3)
    pl.simulate_block("pingpong", seq_len=1234, head_dim=64)           # unrelated run between
    b = pl.simulate_block("fa3", seq_len=4000, head_dim=96, block=(128, 64), stages=3)
    assert a == b and repr(a.events) == repr(b.events)
    assert a.total_time.hex() == b.total_time.hex()


@pytest.mark.parametrize("kwargs, match", [
    (dict(schedule="v2"), "unknown schedule"),
    (dict(seq_len=0), "seq_len"),
    (dict(head_dim=0), "head_dim"),
    (dict(stages=0), "stages"),
    (dict(block=(128,)), "block"),
    (dict(block=(127, 64), schedule="fa3"), "divisible"),
    (dict(dtype="int8"), "dtype"),
    (dict(compute=1e12, exp_rate=1e9), "do not also pass exp_rate"),
    (dict(compute=-1.0), "tensor_flops must be positive"),
])
def test_simulate_errors(kwargs, match):
    args = dict(schedule="fa3", seq_len=512, head_dim=64)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        pl.simulate_block(args.pop("schedule"), **args)


def test_counts_must_be_ints():
    with pytest.raises(TypeError, match="head_dim must be an int"):
        pl.simulate_block("fa3", seq_len=512, head_dim=1.5)
    with pytest.raises(TypeError, match="seq_len must be an int"):
        pl.simulate_block("fa3", seq_len=True, head_dim=64)
    with pytest.raises(TypeError, match="check must be True or False"):
        pl.simulate_block("fa3", seq_len=512, head_dim=64, check="no")
    with pytest.raises(TypeError, match="heads must be an int"):
        pl.simulate("fa3", seq_len=512, head_dim=64, heads=1.5)


def test_schedule_validation():
    with pytest.raises(ValueError, match="warpgroups"):
        pl.Schedule("x", producer=True, warpgroups=4, pingpong=False, intra_overlap=False)
    with pytest.raises(ValueError, match="ping-pong needs 2"):
        pl.Schedule("x", producer=True, warpgroups=1, pingpong=True, intra_overlap=False)
    with pytest.raises(TypeError):
        pl.simulate_block(3, seq_len=64, head_dim=64)


def test_custom_schedule_without_pingpong_runs():
    s = pl.Schedule("two_free", producer=True, warpgroups=2, pingpong=False,
                    intra_overlap=True)
    t = pl.simulate_block(s, seq_len=2048, head_dim=128)
    assert 0 < t.tensor_utilization <= 1


# ---------------------------------------------------------------- Gantt


def test_gantt_hand_drawn():
    """One block, free loads: GEMM0 [0, 2), softmax [2, 2.875), GEMM1 [2.875, 4.875);
    8 columns of 0.609375: midpoints 0.30, 0.91, 1.52, 2.13, 2.74, 3.35, 3.96, 4.57."""
    t = pl.simulate_block("serial", seq_len=64, bandwidth=math.inf, **DYADIC)
    rows = t.gantt(width=8).splitlines()
    assert rows[0] == "  memory |........|"
    assert rows[1] == "  tensor |SSS..OOO|"
    assert rows[2] == " softmax |...EE...|"
    assert rows[3].split() == ["0.000", "us", "4875000.000", "us"]   # seconds -> us


def test_gantt_two_warpgroups_and_window():
    t = pl.simulate_block("fa3", seq_len=256, bandwidth=math.inf, **DYADIC)
    text = t.gantt(width=16, start=0.0, end=4.0)     # tensor: s0 S0 | S1 O0 | ...
    tensor = text.splitlines()[1]
    assert tensor == "  tensor |SSSSssssSSSSOOOO|"
    with pytest.raises(ValueError, match="width"):
        t.gantt(width=0)
    with pytest.raises(ValueError, match="greater than start"):
        t.gantt(start=2.0, end=1.0)


# ---------------------------------------------------------------- CLI


def test_cli_table(capsys):
    assert main(["pipeline", "--seq-len", "2048"]) == 0
    out = capsys.readouterr().out
    for name in NAMES:
        assert name in out
    assert "ordering (fa3 > each ablation > serial): ok" in out
    assert "tensor util" in out


def test_cli_gantt_and_events(capsys):
    assert main(["pipeline", "--seq-len", "1024", "--head-dim", "64", "--gantt",
                 "--width", "60", "--events", "fa3", "--limit", "5"]) == 0
    out = capsys.readouterr().out
    assert out.count("  tensor |") == len(NAMES)
    assert "fa3: first 5 of" in out


def test_cli_usage_errors(capsys):
    assert main(["pipeline", "--gpu", "B200"]) == 2
    assert main(["pipeline", "--gantt-blocks", "0"]) == 2
    assert main(["pipeline", "--seq-len", "0"]) == 2


# ---------------------------------------------------------------- the calibrated costs


def _dyadic_costs(**extra):
    c = pl.UnitCosts(tensor_flops=2.0**20, exp_rate=2.0**14, fp32_rate=2.0**17,
                     bandwidth=math.inf, load_latency=0.0, bytes_per_element=2)
    return dataclasses.replace(c, **extra)


def _one_block(name="serial", **extra):
    return pl.simulate_block(name, seq_len=64, head_dim=128, block=(128, 64),
                             costs=_dyadic_costs(**extra))


def test_gemm_latency_is_exposed_twice_in_a_serial_block():
    """GEMM0 [0, 2), +0.5 until its result is seen, softmax 0.875, GEMM1 2, +0.5."""
    assert _one_block().total_time == 2 * G_FULL + S_FULL
    assert _one_block(gemm_latency=0.5).total_time == 2 * G_FULL + S_FULL + 2 * 0.5


def test_split_pipes_sum_to_the_softmax_and_run_in_order():
    c = _dyadic_costs(split_pipes=True)
    pre, exp, post = c.softmax_parts(128, 64, 128)
    # FP32: 2 x 8192 before the exp2 (0.125 s), 2 x 8192 + 128 x 128 after (0.25 s)
    assert (pre, exp, post) == (0.125, 0.5, 0.25)
    assert pre + exp + post == S_FULL
    t = _one_block(split_pipes=True)
    assert t.total_time == 2 * G_FULL + S_FULL
    ops = [(e.unit, e.op) for e in t.events if e.end > e.start]
    assert ops == [("tensor", "gemm0"), ("fp32", "fp32"), ("sfu", "exp"),
                   ("fp32", "fp32"), ("tensor", "gemm1")]


def test_exp_tensor_coupling_holds_the_tensor_unit():
    t = _one_block(split_pipes=True, exp_tensor_coupling=1.0)
    stall = [e for e in t.events if e.op == "exp_stall"]
    assert len(stall) == 1 and stall[0].end - stall[0].start == 0.5
    assert t.tensor_busy == 2 * G_FULL                  # stalls are not GEMM work
    # two free warpgroups: the exp2 of one now delays the other's GEMM
    s = pl.Schedule("two", producer=True, warpgroups=2, pingpong=False,
                    intra_overlap=False)
    kw = dict(seq_len=256, head_dim=128, block=(128, 64))
    free = pl.simulate_block(s, costs=_dyadic_costs(split_pipes=True), **kw)
    held = pl.simulate_block(s, costs=_dyadic_costs(split_pipes=True,
                                                    exp_tensor_coupling=1.0), **kw)
    assert held.total_time > free.total_time


def test_operand_copies_precede_each_gemm():
    """2^-21 s per FLOP of ldmatrix copies: half the tensor time again, on "ldsm"."""
    t = _one_block(operand_seconds_per_flop=2.0**-21)
    assert t.total_time == 2 * (G_FULL + G_FULL / 2) + S_FULL
    assert [e.op for e in t.events if e.unit == "ldsm"] == ["ldsm", "ldsm"]
    assert "ldsm |" in t.gantt(width=20)


def test_v_transpose_lengthens_the_v_loads():
    """Free compute, transfers of 1 s, transposes of 0.25 s on the producer."""
    c = dataclasses.replace(_dyadic_costs(v_transpose=0.25), bandwidth=2.0**14,
                            tensor_flops=math.inf, exp_rate=math.inf, fp32_rate=math.inf)
    t = pl.simulate_block("fa3", seq_len=64 * 3, head_dim=128, block=(128, 64), costs=c)
    assert t.total_time == 3 * (2 * X + 0.25)


def test_block_barrier_without_a_producer_keeps_the_protocol():
    s = dataclasses.replace(pl.SCHEDULES["pingpong"], name="barrier", block_barrier=True)
    base = pl.unit_costs("H100", seq_len=2048, block=(128, 64))
    costs = dataclasses.replace(base, sync_latency=1e-8, gemm_latency=1e-7)
    t = pl.simulate_block(s, seq_len=2048, head_dim=128, costs=costs)
    _replay(t.events, 2, 2)
    free = pl.simulate_block(pl.SCHEDULES["pingpong"], seq_len=2048, head_dim=128,
                             costs=costs)
    assert t.total_time >= free.total_time


def test_more_sync_latency_is_never_faster():
    base = pl.unit_costs("H100", seq_len=2048, block=(128, 64))
    times = [pl.simulate_block("fa3", seq_len=2048, head_dim=128,
                               costs=dataclasses.replace(base, sync_latency=s)).total_time
             for s in (0.0, 1e-8, 1e-7)]
    assert times[0] <= times[1] <= times[2]


def test_costs_and_rates_are_exclusive():
    c = pl.unit_costs("H100", seq_len=1024, block=(128, 64))
    with pytest.raises(ValueError, match="given whole"):
        pl.simulate_block("fa3", seq_len=1024, head_dim=128, costs=c, bandwidth=1e12)
    with pytest.raises(TypeError, match="UnitCosts"):
        pl.simulate_block("fa3", seq_len=1024, head_dim=128, costs={"x": 1})


def test_three_warpgroups_take_turns():
    s = pl.Schedule("three", producer=True, warpgroups=3, pingpong=True, intra_overlap=True)
    t = pl.simulate_block(s, seq_len=1024, head_dim=64, block=(192, 128))
    assert 0 < t.tensor_utilization <= 1
    _replay(t.events, 2, 3)
    assert "Z" in t.gantt(width=200)                  # warpgroup 2's GEMM0
