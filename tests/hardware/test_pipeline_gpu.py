"""The whole-GPU attention model (hardware.pipeline.simulate) and its calibration.

Oracles: the FA3 launch template's tiles (flash-attention hopper/, 2024: 192 x 128 at
d = 64, 128 x 176 at d = 128 (128 x 128 causal), 128 x 80 at d = 256) against the
register/shared-memory rule; FLOP counts and register budgets by hand; list-scheduling
makespans worked by hand; the published figures (hardware.measurements, the FA3 paper)
for the calibration; structural facts (causal skips work, more SMs never hurt, the
HBM floor).
"""
from __future__ import annotations

import dataclasses
import math

import pytest

from hardware import pipeline as pl
from hardware import specs
from hardware.measurements import PUBLISHED
from hardware.pipeline.gpu import _makespan


# ---------------------------------------------------------------- tiles


@pytest.mark.parametrize("d, causal, expected", [
    (64, False, (192, 128, 3)), (64, True, (192, 128, 3)),
    (128, False, (128, 176, 2)), (128, True, (128, 128, 2)),
    (256, False, (128, 80, 2)), (256, True, (128, 80, 2)),
])
def test_fa3_tile_reproduces_the_launch_template(d, causal, expected):
    t = pl.fa3_tile(d, "fp16", causal)
    assert (t.b_r, t.b_c, t.warpgroups) == expected
    # setmaxnreg: (65536 - 128 x 32 producer registers) / (128 x consumers)
    assert t.register_budget == {2: 240, 3: 160}[t.warpgroups]
    assert t.registers_per_thread == d // 2 + t.b_c <= t.register_budget
    assert t.smem_bytes <= 227 * 1024


def test_what_limits_each_fp16_tile():
    """d = 64 and 128 are register-bound (16 more keys would not fit the budget);
    d = 256 is shared-memory-bound (Q + 2 stages of K and V at B_c = 96 exceed 227 KB)."""
    for d in (64, 128):
        t = pl.fa3_tile(d)
        assert d // 2 + t.b_c + 16 > t.register_budget
    t = pl.fa3_tile(256)
    assert 128 + 96 <= t.register_budget
    assert (128 * 256 + 4 * 96 * 256) * 2 > 227 * 1024


def test_fp8_tiles_keep_the_fp8_wgmma_granularity():
    for d in (64, 128, 256):
        t = pl.fa3_tile(d, "fp8")
        assert t.b_c % 32 == 0 and d // 2 + t.b_c <= t.register_budget
    assert pl.fa3_tile(128, "fp8").b_c == 160          # 176 rounded down to 32s


def test_kernel_tiles_and_custom_blocks():
    assert pl.kernel_tile("standard", 128) is None
    fa2 = pl.kernel_tile("fa2", 256)
    assert (fa2.b_r, fa2.b_c) == pl.FA2_TILES[256] == (64, 64)
    t = pl.kernel_tile("fa3", 128, block=(128, 64))
    assert (t.b_r, t.b_c, t.warpgroups) == (128, 64, 2)
    with pytest.raises(ValueError, match="multiple of 64"):
        pl.kernel_tile("fa3", 128, block=(96, 64))
    with pytest.raises(ValueError, match="B_c"):
        pl.kernel_tile("fa2", 128, block=(128, 0))
    assert pl.simulate("fa2", seq_len=1024, head_dim=128, block=(64, 64)).tile.b_r == 64


# ---------------------------------------------------------------- scheduling and FLOPs


def test_attention_flops_as_the_papers_count():
    assert pl.attention_flops(2, 16, 8192, 128, False) == 4 * 2 * 16 * 8192 ** 2 * 128
    assert pl.attention_flops(2, 16, 8192, 128, True) == 2 * 2 * 16 * 8192 ** 2 * 128


@pytest.mark.parametrize("durations, slots, expected", [
    ([3.0, 3.0, 3.0], 2, 6.0),           # the tail wave: one tile alone
    ([1.0, 1.0, 4.0], 2, 5.0),           # in order: the long tile starts at 1
    ([4.0, 1.0, 1.0], 2, 4.0),           # longest first: balanced
    ([2.0] * 264, 132, 4.0),             # exactly two waves
    ([2.0] * 265, 132, 6.0),             # one tile more: a third wave
    ([], 4, 0.0),
])
def test_makespan_by_hand(durations, slots, expected):
    assert _makespan(durations, slots) == expected


def test_waves_and_tiles():
    r = pl.simulate("fa3", seq_len=8192, head_dim=128, batch=2, heads=16)
    assert r.tiles == 2 * 16 * math.ceil(8192 / 128)
    assert r.waves == pytest.approx(r.tiles / 132)
    assert r.tflops == pytest.approx(r.flops / r.time / 1e12, rel=1e-15)
    assert r.utilization == pytest.approx(r.tflops / 989, rel=1e-12)
    assert r.block is not None and r.block.schedule.name == "fa3"


def test_causal_skips_the_blocks_above_the_diagonal():
    """Half the FLOPs, a little more than half the time (diagonal tiles are masked,
    the first query tiles are short)."""
    full = pl.simulate("fa3", seq_len=16384, head_dim=128, heads=16)
    causal = pl.simulate("fa3", seq_len=16384, head_dim=128, heads=16, causal=True)
    assert causal.flops == full.flops / 2
    assert 0.5 * full.time < causal.time < 0.6 * full.time


def test_time_is_never_below_the_hbm_floor():
    for name in pl.KERNELS:
        r = pl.simulate(name, seq_len=512, head_dim=64, batch=32, heads=32)
        assert r.time >= r.parts.get("HBM floor", 0.0)
    r = pl.simulate("fa3", seq_len=512, head_dim=64, batch=32, heads=32)
    traffic = 32 * 32 * 512 * 64 * (3 * 2 + 2) + 32 * 32 * 512 * 4
    assert r.parts["HBM floor"] == pytest.approx(traffic / (3350e9 * 0.68), rel=1e-12)


def test_determinism():
    a = pl.simulate("fa3", seq_len=3000, head_dim=96, batch=3, heads=5, causal=True)
    pl.simulate("fa2", seq_len=1024, head_dim=64)
    b = pl.simulate("fa3", seq_len=3000, head_dim=96, batch=3, heads=5, causal=True)
    assert a.time.hex() == b.time.hex() and a.parts == b.parts


def test_more_sms_never_hurt():
    g = specs.get("H100")
    fewer = dataclasses.replace(g, sm_count=66)
    for causal in (False, True):
        kw = dict(seq_len=4096, head_dim=128, batch=4, heads=16, causal=causal)
        assert pl.simulate("fa3", gpu=g, **kw).time < pl.simulate("fa3", gpu=fewer, **kw).time


# ---------------------------------------------------------------- against the paper


def test_the_kernels_keep_the_papers_order():
    for m in PUBLISHED:
        if m.kernel != "fa3" or m.dtype != "fp16" or m.seq_len > 8192:
            continue
        kw = dict(seq_len=m.seq_len, head_dim=m.head_dim, batch=m.batch, heads=m.heads,
                  causal=m.causal)
        t = {k: pl.simulate(k, **kw).tflops for k in ("standard", "fa2", "fa3")}
        assert t["fa3"] > t["fa2"] > t["standard"]


def test_table2_ablation():
    """FA3 Table 2: removing intra-warpgroup overlap costs 12%, warp specialisation 14%;
    each modelled figure within 10% of the published one and each loss at least 5%."""
    kw = dict(seq_len=8448, head_dim=128, batch=4, heads=16)
    t = {k: pl.simulate(k, **kw).tflops
         for k in ("fa3", "fa3_no_intra_overlap", "fa3_no_warp_specialization")}
    for k, paper in (("fa3", 661), ("fa3_no_intra_overlap", 582),
                     ("fa3_no_warp_specialization", 570)):
        assert t[k] == pytest.approx(paper, rel=0.10)
    assert t["fa3_no_intra_overlap"] < 0.95 * t["fa3"]
    assert t["fa3_no_warp_specialization"] < 0.95 * t["fa3"]


def test_fa3_is_far_from_the_ideal_block_model():
    """The block model at the catalogue's ideal rates keeps the tensor cores ~100% busy;
    the calibrated whole-GPU model gives the paper's two thirds at d = 128, 8K."""
    ideal = pl.simulate_block("fa3", seq_len=8192, head_dim=128)
    assert ideal.tensor_utilization > 0.99
    r = pl.simulate("fa3", seq_len=8192, head_dim=128, batch=2, heads=16)
    assert 0.55 < r.utilization < 0.75
    assert r.tflops == pytest.approx(646, rel=0.10)


def _gap_category(m) -> str | None:
    """The documented gaps: unfused causal attention (the broadcast mask add) and FP8
    at N <= 2K (a per-tile cost of the FP8 kernel the model lacks)."""
    if m.kernel == "standard" and m.causal:
        return "standard causal"
    if m.dtype == "fp8" and m.seq_len <= 2048:
        return "fp8 short"
    return None


def test_sweep_meets_the_goal_outside_the_documented_gaps():
    rows = pl.sweep()
    assert len(rows) == len(PUBLISHED) == 121
    within = [r for r in rows if abs(r.error) <= 0.10]
    assert len(within) >= 99
    for r in rows:
        if _gap_category(r.measurement) is None:
            assert abs(r.error) <= 0.13, (r.measurement, r.modelled)
    # the long-sequence figures (N >= 4K) outside the gaps: within 11%
    for r in rows:
        m = r.measurement
        if m.seq_len >= 4096 and _gap_category(m) is None:
            assert abs(r.error) <= 0.11, (m, r.modelled)


def test_sweep_row_error():
    m = PUBLISHED[0]
    row = pl.SweepRow(m, m.tflops * 1.25)
    assert row.error == pytest.approx(0.25, rel=1e-12)


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(schedule="fa4"), ValueError, "unknown kernel"),
    (dict(schedule=3), TypeError, "kernel name"),
    (dict(seq_len=0), ValueError, "seq_len"),
    (dict(batch=-1), ValueError, "batch"),
    (dict(heads=1.5), TypeError, "heads"),
    (dict(causal=1), TypeError, "causal"),
    (dict(dtype="fp4"), ValueError, "dtype"),
    (dict(gpu="B200"), ValueError, "sm_count"),
    (dict(gpu="V100", dtype="bf16"), ValueError, "no dense bf16"),
    (dict(calibration="H100"), TypeError, "Calibration"),
    (dict(block=128), ValueError, "block must be"),
    (dict(block=(128, 64, 1)), ValueError, "block must be"),
])
def test_simulate_errors(kwargs, exc, match):
    args = dict(schedule="fa3", seq_len=1024, head_dim=128)
    args.update(kwargs)
    with pytest.raises(exc, match=match):
        pl.simulate(args.pop("schedule"), **args)


@pytest.mark.parametrize("field, value", [
    ("clock_fraction", 0.0), ("clock_fraction", 1.5), ("hbm_efficiency", float("nan")),
    ("sync_cycles", -1.0), ("tile_overhead_cycles", math.inf),
    ("exp_tensor_coupling", 1.5), ("smem_bytes_per_clk", 0.0),
    ("producer_registers", 0), ("producer_registers", 24.0),
])
def test_calibration_validation(field, value):
    with pytest.raises(ValueError, match=field):
        dataclasses.replace(pl.H100_CALIBRATION, **{field: value})


def test_every_calibration_figure_has_a_source():
    cal = pl.H100_CALIBRATION
    for f in dataclasses.fields(cal):
        if f.name not in ("sources", "split_softmax_pipes"):
            assert f.name in cal.sources, f.name


def test_a100_runs():
    r = pl.simulate("fa2", gpu="A100", seq_len=2048, head_dim=128, batch=8, heads=16,
                    dtype="bf16")
    assert 0 < r.utilization < 1


# ---------------------------------------------------------------- CLI


@pytest.mark.slow
def test_cli_sweep(capsys):
    from oracle.cli import main

    assert main(["pipeline", "--sweep"]) == 0
    out = capsys.readouterr().out
    # Figure 5: standard 4 series x 5 lengths, FA2 and FA3 6 series x 6 lengths each;
    # Figure 7: 4 series x 6 lengths and 2 bars; Table 2: 3 rows
    assert out.count("Fig. 5 ~") == 4 * 5 + 2 * 6 * 6
    assert out.count("Fig. 7 ~") == 4 * 6 + 2
    assert out.count("Table 2") == 3
    assert "of 121 figures within 10%" in out and "Largest error" in out
    rows = pl.sweep()
    worst = max(rows, key=lambda r: abs(r.error))
    assert f"{worst.error:+.1%}" in out.split("Largest error")[1]


def test_cli_whole_gpu_table(capsys):
    from oracle.cli import main

    assert main(["pipeline", "--seq-len", "4096", "--head-dim", "64", "--causal"]) == 0
    out = capsys.readouterr().out
    assert "Whole GPU, calibrated (H100, fp16, N=4096, d=64, batch 4, heads 32, causal)" in out
    for name in pl.KERNELS:
        assert name in out
