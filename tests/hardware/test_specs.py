"""Tests for hardware.specs: the catalogue against the figures the vendors' datasheets
and whitepapers state, lookup and errors."""
from __future__ import annotations

import dataclasses

import pytest

from hardware import specs

# (name, year, FP16/BF16 TFLOPS, lowest TFLOPS, lowest format, HBM GB/s, memory GB),
# from the vendors' datasheets ("-" -> None)
CATALOGUE_TABLE = [
    ("V100", 2017, 125, 125, "fp16", 900, 32),
    ("A100", 2020, 312, 312, "bf16", 2039, 80),
    ("H100", 2022, 989, 1979, "fp8", 3350, 80),
    ("B200", 2024, 2250, 9000, "fp4", 8000, 180),
    ("H20", None, 148, None, None, 4000, None),
    ("H200", None, 989, 1979, "fp8", 4800, 141),
    ("MI300X", None, 1307, 2615, "fp8", 5300, 192),
]


@pytest.mark.parametrize("name, year, half, low, low_fmt, bw, mem", CATALOGUE_TABLE)
def test_catalogue_matches_reference_table(name, year, half, low, low_fmt, bw, mem):
    g = specs.get(name)
    if year is not None:
        assert g.year == year
    assert round(g.dense_tflops[g.half_precision]) == half
    if low is not None:
        assert g.lowest_precision == low_fmt
        assert round(g.dense_tflops[low_fmt]) == low
    assert g.memory_bandwidth_gbs == bw
    if mem is not None:
        assert g.memory_gb == mem


def test_a100_figures_from_the_whitepaper():
    g = specs.get("A100")
    assert dict(g.dense_tflops) == {"fp64": 19.5, "tf32": 156, "fp16": 312, "bf16": 312,
                                    "int8": 624, "int4": 1248}
    assert (g.sm_count, g.l1_smem_per_sm_kib, g.regfile_per_sm_kib, g.l2_mib) == (
        108, 192, 256, 40)
    assert g.warp_size == 32
    assert (g.fp32_cores_per_sm, g.tensor_cores_per_sm) == (64, 4)


def test_a100_memory_hierarchy_table():
    # the approximate A100 hierarchy: capacities from the A100 whitepaper, latencies of the
    # order measured by Abdelkhalik et al. (arXiv:2208.11174)
    KiB, MiB = 1024, 1024 * 1024
    levels = {lv.name: lv for lv in specs.get("A100").memory_hierarchy}
    assert list(levels) == ["registers", "shared/L1", "L2", "HBM2e", "constant"]
    r, s, l2, hbm, c = levels.values()
    assert (r.latency_cycles, r.capacity_bytes, r.bandwidth_bytes_per_s, r.per_sm) == (
        (1, 1), (256 * KiB,), 10e12, True)
    assert (s.latency_cycles, s.capacity_bytes, s.bandwidth_bytes_per_s, s.per_sm) == (
        (20, 40), (192 * KiB,), 1e12, True)
    assert (l2.latency_cycles, l2.capacity_bytes, l2.bandwidth_bytes_per_s) == (
        (200, 200), (40 * MiB,), 3e12)
    assert (hbm.latency_cycles, hbm.capacity_bytes, hbm.bandwidth_bytes_per_s) == (
        (500, 500), (40e9, 80e9), 2039e9)
    assert (c.latency_cycles, c.capacity_bytes) == ((5, 5), (64 * KiB,))
    assert "broadcast to 32 threads" in c.note and "on a cache hit" in c.note
    # the hierarchy is consistent with the catalogue's own fields
    g = specs.get("A100")
    assert r.capacity_bytes[0] == g.regfile_per_sm_kib * KiB
    assert s.capacity_bytes[0] == g.l1_smem_per_sm_kib * KiB
    assert l2.capacity_bytes[0] == g.l2_mib * MiB


def test_every_figure_has_a_source():
    for g in specs.CATALOGUE.values():
        for f in dataclasses.fields(g):
            if f.name in ("name", "vendor", "architecture", "compute_capability",
                          "form_factor", "sources", "dense_tflops"):
                continue
            if getattr(g, f.name) not in (None, ()):
                assert g.source(f.name), (g.name, f.name)
        for p in g.dense_tflops:
            assert g.source(f"dense_tflops.{p}"), (g.name, p)
        assert set(g.dense_tflops) <= set(specs.PRECISIONS)


def test_lookup_case_and_errors():
    assert specs.get(" h100 ") is specs.get("H100")
    with pytest.raises(ValueError, match="known: V100, A100, H100, H200, B200, H20, MI300X"):
        specs.get("H300")
    with pytest.raises(TypeError):
        specs.get(100)
    with pytest.raises(ValueError, match="no 'fp4' figure"):
        specs.get("H100").flops("fp4")
    with pytest.raises(ValueError, match="no source"):
        specs.get("H100").source("nonsense")


def test_required_entries_and_units():
    assert {"V100", "A100", "H100", "H200", "B200", "H20", "MI300X"} <= set(specs.names())
    g = specs.get("H100")
    assert g.flops("bf16") == 989e12 and g.bandwidth == 3350e9 and g.memory_bytes == 80e9
    assert specs.get("MI300X").warp_size == 64


def test_sfu_throughput_matches_flashattention3():
    # FA3: "989 TFLOPS of FP16 matmul but only 3.9 TFLOPS of special functions"
    g = specs.get("H100")
    assert g.sfu_ops_per_second == pytest.approx(3.9e12, rel=0.01)
    # the clock that gives the tensor peak: 132 SMs x 4096 FLOP/clk
    assert 132 * 4096 * g.boost_clock_mhz * 1e6 == pytest.approx(989e12, rel=1e-3)
    assert specs.get("B200").sfu_ops_per_second is None  # not published


def test_spec_is_immutable():
    g = specs.get("A100")
    assert {g: 1}[specs.get("a100")] == 1  # hashable, usable as a key
    with pytest.raises(dataclasses.FrozenInstanceError):
        g.sm_count = 1
    with pytest.raises(TypeError):
        g.dense_tflops["fp8"] = 1.0
    with pytest.raises(ValueError, match="unknown precisions"):
        dataclasses.replace(g, dense_tflops={"fp7": 1.0})
