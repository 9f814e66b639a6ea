"""The published H100 attention figures (hardware.measurements).

Oracles: the FlashAttention-3 paper's own statements, independent of the transcribed
bars: Table 2's times and FLOP rates (recomputed from the shape), the abstract's
"FP16 up to 740 TFLOPs/s (75% utilization)" and "FP8 close to 1.2 PFLOPs/s", and the
benchmark setting of section 4.1 (16K tokens, heads x head dimension = 2048).
"""
from __future__ import annotations

import pytest

from hardware.measurements import PUBLISHED, SEQ_LENS, figure_shape


def test_table2_rates_follow_from_the_times():
    """Table 2: batch 4, 8448 tokens, 16 heads of 128; 3.538 / 4.021 / 4.105 ms."""
    flops = 4 * 4 * 16 * 8448 * 8448 * 128
    assert flops == 2 ** 15 * 8448 ** 2 == 2_338_609_692_672
    rows = {m.kernel: m for m in PUBLISHED if m.ref == "Table 2"}
    assert {k: m.tflops for k, m in rows.items()} == {
        "fa3": 661.0, "fa3_no_intra_overlap": 582.0, "fa3_no_warp_specialization": 570.0}
    for m, ms in zip(rows.values(), (3.538, 4.021, 4.105)):
        assert m.tflops == pytest.approx(flops / (ms * 1e-3) / 1e12, abs=0.5)
        assert (m.batch, m.seq_len, m.heads, m.head_dim, m.causal) == (4, 8448, 16, 128,
                                                                       False)
        assert not m.approximate


def test_figures_use_the_papers_setting():
    for m in PUBLISHED:
        if m.ref == "Table 2":
            continue
        assert m.approximate and m.seq_len in SEQ_LENS
        assert m.batch * m.seq_len == 16384 and m.heads * m.head_dim == 2048
        assert (m.batch, m.heads) == figure_shape(m.seq_len, m.head_dim)
        assert m.ref == ("Fig. 5" if m.dtype == "fp16" else "Fig. 7")
        assert m.ref.replace("Fig.", "Figure") in m.source


def test_abstract_peaks():
    fp16 = max(m.tflops for m in PUBLISHED if m.dtype == "fp16")
    fp8 = max(m.tflops for m in PUBLISHED if m.dtype == "fp8")
    assert fp16 == pytest.approx(740, rel=0.03)          # "up to 740 TFLOPs/s"
    assert fp16 / 989 == pytest.approx(0.75, abs=0.02)   # "75% utilization"
    assert fp8 == pytest.approx(1200, rel=0.03)          # "close to 1.2 PFLOPs/s"


def test_standard_attention_runs_out_of_memory_at_16k():
    std = [m for m in PUBLISHED if m.kernel == "standard"]
    assert std and max(m.seq_len for m in std) == 8192
    assert {m.head_dim for m in std} == {64, 128}


def test_each_series_grows_with_the_sequence_length_to_a_plateau():
    """A property of every published series (a check on the transcription): speed
    never drops by more than 2% from one sequence length to the next."""
    series: dict[tuple, list] = {}
    for m in PUBLISHED:
        if m.ref != "Table 2":
            series.setdefault((m.kernel, m.dtype, m.head_dim, m.causal), []).append(m)
    assert len(series) == 21
    for key, ms in series.items():
        speeds = [m.tflops for m in sorted(ms, key=lambda m: m.seq_len)]
        for a, b in zip(speeds, speeds[1:]):
            assert b >= 0.98 * a, key
