"""Tests for hardware.roofline and ``python -m oracle roofline``: the worked tables and
answers, every number computed by hand from the datasheet figures (ridge = peak /
bandwidth, decode bound = weight bytes / bandwidth, prefill bound = 2 params tokens /
(0.5 peak), compute-bound batch = ridge x bytes per weight / 2)."""
from __future__ import annotations

import re

import numpy as np
import pytest

from hardware import roofline as rl
from hardware import specs
from oracle.cli import main

# the generation table (whitespace-separated tokens of each printed row)
TABLE_GENERATIONS = """\
V100 2017 125 - 0.90 TB/s - 139 125 FP16 139
A100 2020 312 2.5x 2.04 TB/s 2.3x 153 312 BF16 153
H100 2022 989 3.2x 3.35 TB/s 1.6x 295 1979 FP8 591
B200 2024 2250 2.3x 8.00 TB/s 2.4x 281 9000 FP4 1125"""

TABLE_BOUNDS = """\
V100 17.8 ms 1049 ms 122K
A100 7.8 ms 420 ms 488K
H100 4.8 ms 133 ms 488K
B200 2.0 ms 58 ms 1251K"""

TABLE_BATCH = """\
A100 153 153 77 38
H100 295 295 148 74
H100 FP8 591 591 295 148
B200 281 281 141 70
B200 FP4 1125 1125 562 281"""

TABLE_ATTENTION = """\
1 1 295x
8 8 37x
128 128 2x"""


def _rows(text: str) -> list[str]:
    return [" ".join(line.split()) for line in text.splitlines()]


def _body(out: str, first: str, n: int) -> list[str]:
    lines = out.splitlines()
    i = next(k for k, line in enumerate(lines) if line.split()[:1] == [first])
    return [" ".join(line.split()) for line in lines[i:i + n]]


@pytest.fixture(scope="module")
def cli_output():
    import contextlib
    import io
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["roofline"]) == 0
    return buf.getvalue()


def test_cli_generation_table(cli_output):
    assert _body(cli_output, "V100", 4) == _rows(TABLE_GENERATIONS)


def test_cli_bounds_table(cli_output):
    section = cli_output.split("Lower bounds")[1]
    assert _body(section, "V100", 4) == _rows(TABLE_BOUNDS)


def test_cli_batch_table(cli_output):
    section = cli_output.split("compute-bound")[1]
    assert _body(section, "A100", 5) == _rows(TABLE_BATCH)


def test_cli_attention_table(cli_output):
    section = cli_output.split("Decode attention")[1]
    got = [" ".join(r.split()[:3]) for r in _body(section, "1", 3)]
    assert got == _rows(TABLE_ATTENTION)


def test_cli_compare(capsys):
    assert main(["roofline", "--gpu", "H20", "--gpu", "H100"]) == 0
    out = capsys.readouterr().out
    h20 = next(line for line in out.splitlines() if line.strip().startswith("H20"))
    h100 = next(line for line in out.splitlines() if line.strip().startswith("H100"))
    assert h20.split()[6] == "37" and h20.split()[-1] == "37"   # ridge, batch
    assert h100.split()[6] == "295" and h100.split()[-1] == "295"


def test_cli_unknown_gpu(capsys):
    assert main(["roofline", "--gpu", "X1"]) == 2
    assert "known: V100" in capsys.readouterr().err


# --------------------------------------------------------------------------- functions


@pytest.mark.parametrize("name, half, low", [("V100", 139, 139), ("A100", 153, 153),
                                             ("H100", 295, 591), ("B200", 281, 1125)])
def test_ridge_points(name, half, low):
    g = specs.get(name)
    assert round(rl.gpu_ridge(name)) == half
    assert round(rl.gpu_ridge(g, g.lowest_precision)) == low


def test_generation_ratios():
    # V100 -> B200: BF16 compute x18, bandwidth x~9
    v, b = specs.get("V100"), specs.get("B200")
    assert b.dense_tflops["bf16"] / v.dense_tflops["fp16"] == 18
    assert round(b.memory_bandwidth_gbs / v.memory_bandwidth_gbs) == 9


def test_8b_bounds_hand_values():
    # 16e9 B / 900e9 B/s = 17.78 ms; 2*8e9*4096 / (0.5 * 125e12) = 1048.6 ms
    assert rl.decode_step_lower_bound(16e9, 900e9) == pytest.approx(16 / 900)
    assert rl.prefill_lower_bound(8e9, 4096, 125e12) == pytest.approx(65536e9 / 62.5e12)
    # (32 GB - 16 GB) / 128 KiB = 122070.3 tokens
    assert rl.kv_capacity_tokens(32e9, 16e9, 131072) == pytest.approx(16e9 / 131072)
    with pytest.raises(ValueError, match="exceed memory"):
        rl.kv_capacity_tokens(10e9, 16e9, 131072)


def test_batch_and_attention():
    assert rl.compute_bound_batch(295, 2) == 295
    assert rl.compute_bound_batch(295, 1) == 147.5
    assert rl.compute_bound_batch(295, 0.5) == 73.75
    assert rl.decode_intensity(295, 2) == 295
    assert [rl.attention_intensity(g) for g in (1, 8, 128)] == [1, 8, 128]
    assert rl.attention_intensity(8, kv_bytes_per_element=1) == 16  # FP8 KV doubles it
    # attention's intensity stays below every catalogue ridge: always bandwidth-bound
    for g in specs.CATALOGUE.values():
        assert not rl.is_compute_bound(rl.attention_intensity(8), rl.gpu_ridge(g))


def test_worked_answers():
    # exercise 1: H20 ridge 148 / 4.0 = 37; H100 295
    assert round(rl.gpu_ridge("H20")) == 37 and round(rl.gpu_ridge("H100")) == 295
    assert round(rl.compute_bound_batch(rl.gpu_ridge("H20"), 2)) == 37
    # exercise 2: 70B, 140 GB -> 35 GB at 4 bits: 3/4 fewer bytes, 4x faster decode
    bf16, q4 = rl.weight_bytes(70e9, 16), rl.weight_bytes(70e9, 4)
    assert (bf16, q4) == (140e9, 35e9)
    assert 1 - q4 / bf16 == 0.75
    assert rl.decode_step_lower_bound(bf16, 3350e9) / rl.decode_step_lower_bound(q4, 3350e9) \
        == pytest.approx(4)
    # prefill depends on the compute precision, not on the stored weight bytes: only a
    # native FP8 tensor core halves it
    h100 = specs.get("H100")
    bf16_prefill = rl.prefill_lower_bound(70e9, 4096, h100.flops("bf16"))
    assert rl.prefill_lower_bound(70e9, 4096, h100.flops("fp8")) == pytest.approx(
        bf16_prefill / 2, rel=1e-3)
    # exercise 3: 2x compute, 1.3x bandwidth
    c = rl.generation_change(2, 1.3)
    assert round(c.decode_latency_reduction, 2) == 0.23
    assert c.prefill_speedup == 2 and round(c.batch_factor, 2) == 1.54


def test_attainable_roofline():
    peak, bw = 989e12, 3350e9
    assert rl.attainable_flops(1.0, peak, bw) == bw
    assert rl.attainable_flops(1000.0, peak, bw) == peak
    ridge = rl.ridge_point(peak, bw)
    out = rl.attainable_flops(np.array([0.0, ridge / 2, ridge, 2 * ridge]), peak, bw)
    assert out.tolist() == pytest.approx([0.0, peak / 2, peak, peak], rel=1e-12)
    assert out[-1] == peak
    with pytest.raises(ValueError, match="intensity"):
        rl.attainable_flops(-1.0, peak, bw)
    with pytest.raises(ValueError, match="bandwidth"):
        rl.ridge_point(1e12, 0)


def test_memory_hierarchy_a100_figures():
    # A100 capacities and bandwidth (A100 whitepaper and 80GB datasheet)
    g = specs.get("A100")
    assert g.regfile_per_sm_kib == 256 and g.l1_smem_per_sm_kib == 192
    assert g.l2_mib == 40 and g.memory_bandwidth_gbs == 2039 and g.memory_gb in (40, 80)


def test_tables_follow_catalogue():
    rows = rl.generation_table()
    assert [r.name for r in rows] == list(rl.GENERATIONS)
    assert re.fullmatch(r"\d+", f"{rows[0].half_ridge:.0f}")


def test_cli_sources(capsys):
    assert main(["roofline", "--gpu", "H100", "--sources"]) == 0
    out = capsys.readouterr().out
    assert "dense_tflops.fp8" in out and "NVIDIA H100 datasheet" in out
    assert main(["roofline", "--sources"]) == 2
