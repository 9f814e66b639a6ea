"""Structural properties of the pipeline model, worked by hand from its unit costs.

Oracles: the unit costs rebuilt from the H100 SXM5 datasheet and whitepaper figures
(989 dense FP16 TFLOP/s, 67 FP32 TFLOP/s, 132 SMs, 16 exp2 per SM per clock, 1830 MHz,
3.35 TB/s) and the calibration's figures; steady-state periods of the block model
derived from which units each step holds (FA3, arXiv 2407.08608, section 3.1-3.2:
ping-pong, intra-warpgroup overlap; FA2's forward loop, arXiv 2307.08691: the load of
K_{j+1} issued after GEMM0(j), V_j before it); the co-resident CTA formula of
:func:`hardware.pipeline.coresident_tile_time` in its limits and at one worked value;
the published figures of the three gaps FA3's authors' numbers expose (Table 2's
warp-specialisation ablation, FA2 at d = 64 and N = 512, FP8 at d = 256 and N <= 1K)
with the tolerance each is held to.
"""
from __future__ import annotations

import dataclasses
import math

import pytest

from hardware import pipeline as pl
from hardware.measurements import PUBLISHED
from hardware.pipeline.gpu import _block_costs
from hardware import specs

# H100 SXM5 figures (datasheet, whitepaper Table 3) and H100_CALIBRATION's values
SMS, BOOST, FP16, FP32, HBM, SFU = 132, 1830e6, 989e12, 67e12, 3.35e12, 16
CAL = pl.H100_CALIBRATION
CLOCK = BOOST * 0.97                      # clock_fraction


def _hand_costs(seq_len: int, b_r: int, operand_per_flop: float = 0.0) -> pl.UnitCosts:
    """The calibrated per-SM costs from the figures above (FP16)."""
    reuse = min(-(-seq_len // b_r), SMS)
    return pl.UnitCosts(
        tensor_flops=FP16 / SMS * 0.97, exp_rate=SFU * CLOCK,
        fp32_rate=FP32 / 2 / SMS * 0.97, bandwidth=HBM / SMS * reuse * 0.68,
        load_latency=(200 if reuse > 1 else 500) / CLOCK, bytes_per_element=2,
        gemm_latency=850 / CLOCK, sync_latency=10 / CLOCK, softmax_fp32_ops=3.25,
        split_pipes=True, exp_tensor_coupling=1.0,
        operand_seconds_per_flop=operand_per_flop)


def _period(schedule: pl.Schedule, costs: pl.UnitCosts, head_dim: int,
            block: tuple[int, int], n: int = 8) -> float:
    """Steady-state seconds per K/V block: the slope between n and 2n blocks."""
    t = [pl.simulate_block(schedule, seq_len=k * block[1], head_dim=head_dim, block=block,
                           costs=costs, check=False).total_time for k in (n, 2 * n)]
    return (t[1] - t[0]) / n


# ---------------------------------------------------------------- Table 2's problem

D, BR, BC = 128, 128, 176          # the FA3 d = 128 tile (fa3_tile), two consumer groups
ROWS = BR // 2


@pytest.fixture(scope="module")
def table2_costs() -> pl.UnitCosts:
    return _hand_costs(8448, BR)


def test_hand_costs_are_the_models(table2_costs):
    k = pl.KERNELS["fa3"]
    tile = pl.kernel_tile(k, D)
    assert (tile.b_r, tile.b_c) == (BR, BC)
    model = _block_costs(specs.get("H100"), CAL, k, "fp16", 8448, D, tile)
    for f in dataclasses.fields(pl.UnitCosts):
        a, b = getattr(model, f.name), getattr(table2_costs, f.name)
        assert a == pytest.approx(b, rel=1e-12, abs=0.0) if isinstance(a, float) else a == b


def _schedules() -> dict[str, pl.Schedule]:
    return {k: dataclasses.replace(pl.KERNELS[k].schedule, warpgroups=2)
            for k in ("fa3", "fa3_no_warp_specialization", "fa3_no_pingpong",
                      "fa3_no_intra_overlap")}


def test_fa3_period_is_the_tensor_units_occupancy(table2_costs):
    """Per K/V block each of the two warpgroups holds the tensor cores for GEMM0, GEMM1
    and its exp2 stream (exp_tensor_coupling 1): period 2 (2 g + e)."""
    g = 2.0 * ROWS * BC * D / table2_costs.tensor_flops
    e = ROWS * BC / table2_costs.exp_rate
    assert g * CLOCK == pytest.approx(704.3, abs=0.1)      # 2 64 176 128 / (4096 0.97)
    assert e * CLOCK == pytest.approx(704.0, abs=1e-9)     # 64 176 / 16
    s = _schedules()
    assert _period(s["fa3"], table2_costs, D, (BR, BC)) == pytest.approx(2 * (2 * g + e),
                                                                          rel=1e-9)
    # so the ping-pong order buys nothing here: the free-running groups settle to the
    # same occupancy
    assert _period(s["fa3_no_pingpong"], table2_costs, D, (BR, BC)) == pytest.approx(
        2 * (2 * g + e), rel=1e-9)


def test_no_warp_specialization_costs_the_lockstep_exposure(table2_costs):
    """Without a producer the consumers meet at block-wide barriers for K_j and V_{j-1}
    every iteration (lockstep): the tensor cores wait, once per period, for the later
    warpgroup's FP32 work after its exp2 (row sum, P conversion, O rescale) and for
    five barrier hand-overs (two barrier arrivals, three consumer-side waits)."""
    post = (0.5 * 3.25 * ROWS * BC + ROWS * D) / table2_costs.fp32_rate
    assert post * CLOCK == pytest.approx(191.05, abs=0.01)
    s = _schedules()
    p_ws = _period(s["fa3"], table2_costs, D, (BR, BC))
    p_no = _period(s["fa3_no_warp_specialization"], table2_costs, D, (BR, BC))
    assert p_no - p_ws == pytest.approx(post + 5 * table2_costs.sync_latency, rel=1e-9)
    # the whole-GPU gain of warp specialisation is that per-iteration ratio (the
    # tiles' fill, drain and overhead move it by under 0.1%)
    kw = dict(seq_len=8448, head_dim=D, batch=4, heads=16)
    gain = pl.simulate("fa3", **kw).tflops / pl.simulate("fa3_no_warp_specialization",
                                                         **kw).tflops
    assert gain == pytest.approx(p_no / p_ws, rel=1e-3)
    assert 1.05 < gain < 1.06          # the paper's Table 2: 661 / 570 = 1.16 (a gap)


# ---------------------------------------------------------------- co-resident CTAs


def test_coresident_tile_time_by_hand():
    # worked: 10 + 3 (2 - 10 / 6) = 11
    assert pl.coresident_tile_time(10.0, 6.0, 3.0) == pytest.approx(11.0, rel=1e-15)
    # nothing shared (each CTA as fast together as alone): the fixed part is paid
    assert pl.coresident_tile_time(6.0, 6.0, 3.0) == 9.0
    # everything shared (together = twice alone) or more: the fixed part is hidden
    assert pl.coresident_tile_time(12.0, 6.0, 3.0) == 12.0
    assert pl.coresident_tile_time(15.0, 6.0, 3.0) == 15.0
    assert pl.coresident_tile_time(5.0, 0.0, 3.0) == 8.0


def test_fa2_tiles_overlap_their_fixed_part_with_the_other_cta():
    """FA2 d = 64, N = 512, one head: 4 tiles on 264 slots, so the time is one tile's
    slot time plus the launch; the slot time from the block model's two-CTA and
    one-CTA main loops and the tile's Q load, O store and overhead, by hand."""
    n, d, b_r, b_c = 512, 64, 128, 128
    operand = (4.0 * 2 / (2.0 * b_r)) / 128.0 / CLOCK   # ldmatrix bytes per FLOP / 128 B/clk
    costs = _hand_costs(n, b_r, operand)
    sched = pl.KERNELS["fa2"].schedule
    shared = pl.simulate_block(dataclasses.replace(sched, warpgroups=2), seq_len=n,
                               head_dim=d, block=(2 * b_r, b_c), costs=costs,
                               check=False).total_time
    alone = pl.simulate_block(dataclasses.replace(sched, warpgroups=1), seq_len=n,
                              head_dim=d, block=(b_r, b_c), costs=costs,
                              check=False).total_time
    assert alone < shared < 2 * alone
    per_sm = HBM * 0.68 / SMS
    fixed = (650 / CLOCK + 500 / CLOCK + b_r * d * 2 / per_sm
             + (b_r * d * 2 + b_r * 4) / per_sm)
    slot = shared + fixed * (2.0 - shared / alone)
    r = pl.simulate("fa2", seq_len=n, head_dim=d, batch=1, heads=1)
    assert r.time == pytest.approx(slot + 4e-6, rel=1e-12)
    assert shared < slot < shared + fixed


# ---------------------------------------------------------------- FA2's load order


def test_prefetch_hides_the_loads_an_on_demand_block_waits_for():
    """One consumer group, free latencies, loads shorter than a GEMM: on demand, each
    block waits for K_j (transfer + latency) before GEMM0; with FA2's order (K_{j+1}
    issued after GEMM0(j), V_j before GEMM0(j)) the period is GEMM0 + softmax + GEMM1."""
    rates = dict(tensor_flops=1e12, exp_rate=1e10, fp32_rate=1e11, bandwidth=1e11,
                 load_latency=1e-7)
    d, b_c, rows = 64, 64, 128
    g = 2.0 * rows * b_c * d / 1e12                     # 1.048576 us
    sm = rows * b_c / 1e10 + (4 * rows * b_c + rows * d) / 1e11
    load = b_c * d * 2 / 1e11                           # 0.08192 us
    assert load + 1e-7 < g
    on_demand = pl.Schedule("od", producer=False, warpgroups=1, pingpong=False,
                            intra_overlap=False)
    ahead = dataclasses.replace(on_demand, name="pf", prefetch=True)
    costs = pl.unit_costs("H100", seq_len=1024, block=(rows, b_c), **rates)
    assert _period(ahead, costs, d, (rows, b_c)) == pytest.approx(2 * g + sm, rel=1e-9)
    assert _period(on_demand, costs, d, (rows, b_c)) == pytest.approx(
        2 * g + sm + load + 1e-7, rel=1e-9)
    # the buffer protocol holds with one stage too
    for stages in (1, 2, 3):
        pl.simulate_block(ahead, seq_len=1024, head_dim=d, block=(rows, b_c),
                          stages=stages, **rates)


def test_prefetch_is_refused_where_it_means_nothing():
    for kw in (dict(producer=True, intra_overlap=False),
               dict(producer=False, intra_overlap=True)):
        with pytest.raises(ValueError, match="prefetch"):
            pl.Schedule("x", warpgroups=1, pingpong=False, prefetch=True, **kw)


# ---------------------------------------------------------------- the published gaps


def _row(kernel: str, dtype: str, d: int, n: int, causal: bool = False) -> pl.SweepRow:
    ms = [m for m in PUBLISHED if (m.kernel, m.dtype, m.head_dim, m.seq_len, m.causal)
          == (kernel, dtype, d, n, causal)]
    assert len(ms) == 1
    return pl.sweep(measurements=ms)[0]


def test_fa2_short_sequence_within_ten_percent():
    """FA2 d = 64, N = 512 (Fig. 5: 282 TFLOP/s): -10.5% before the co-resident CTAs
    overlapped their fixed tile costs, -9.5% with it; held within 10%."""
    r = _row("fa2", "fp16", 64, 512)
    assert -0.10 <= r.error < 0.0


def test_table2_within_six_percent():
    for kernel, paper in (("fa3", 661), ("fa3_no_intra_overlap", 582),
                          ("fa3_no_warp_specialization", 570)):
        (r,) = [x for x in pl.sweep() if x.measurement.ref == "Table 2"
                and x.measurement.kernel == kernel]
        assert r.measurement.tflops == paper
        assert abs(r.error) <= 0.06, (kernel, r.modelled)


@pytest.mark.parametrize("n, causal", [(512, False), (1024, False), (512, True),
                                       (1024, True)])
def test_fp8_d256_short_sequences_stay_a_documented_gap(n, causal):
    """FP8 d = 256, N <= 1K: the model is 24-51% optimistic (a per-tile cost of the FP8
    kernel that the model lacks; the module docstring of hardware.pipeline.gpu).
    Pinned so that a change that closes or widens it updates this bound."""
    r = _row("fa3", "fp8", 256, n, causal)
    assert 0.20 < r.error < 0.55
    assert math.isfinite(r.modelled)


# ---------------------------------------------------------------- the gallery kernel


def test_block_protocol_counts_are_the_fa3_gallery_kernels():
    """hardware/simt/gallery/fa3_forward.cu, one CTA of Sq = 128, Sk = 256, d = 64 FP16
    run in the interpreter: 64 wgmma, 8388608 FLOPs, TMA bytes K 32768 and V 32768,
    2308 completed mbarrier waits. The block model of the same tile (two consumer
    groups of 64 rows, B_c = 64, two stages) runs the same protocol: 16 GEMMs of
    64 x 64 x 64, each four m64n64k16 wgmma; four K and four V tiles of 64 x 64 x 2
    bytes; each of the 256 consumer threads waits once for Q and for every K_j and V_j
    (9 x 256), the producer thread for the empty stage of K_j and V_j with j >= 2 (4)."""
    t = pl.simulate_block("fa3", seq_len=256, head_dim=64, block=(128, 64), stages=2)
    gemms = [e for e in t.events if e.unit == "tensor"]
    assert len(gemms) == 16
    wgmma_flops = 2 * 64 * 64 * 16                       # one m64n64k16
    assert len(gemms) * (2 * 64 * 64 * 64) // wgmma_flops == 64
    assert t.flops == 4 * 128 * 256 * 64 == 8388608
    loads = [e for e in t.events if e.op == "load"]
    for buf in "KV":
        assert sum(64 * 64 * 2 for e in loads if e.buffer == buf) == 32768
    full = [e for e in t.events if e.op == "full"]
    assert len(full) == 8                                 # K_j, V_j, j = 0..3
    producer_waits = sum(1 for e in loads if e.j >= 2)    # the stage of block j - 2
    assert producer_waits == 4
    assert 256 * (1 + len(full)) + producer_waits == 2308
