"""Tests for hardware.tiling.tile_utilization: the 257-column example and hand counts."""
from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hardware.tiling import tile_utilization


def test_257_column_example():
    # 256 x 256 with 128-tiles: a clean 2 x 2
    clean = tile_utilization(256, 256, 128, 128, 108)
    assert (clean.tiles, clean.padding_fraction, clean.partial_tiles) == (4, 0.0, 0)
    # one more column: six tiles, the two on the right one column wide
    u = tile_utilization(256, 257, 128, 128, 108)
    assert (u.tiles_m, u.tiles_n, u.tiles, u.waves) == (2, 3, 6, 1)
    assert u.partial_tiles == 2
    assert u.min_tile_fill == 1 / 128
    # padding: (6 * 128 * 128 - 256 * 257) / (6 * 128 * 128) = 32512 / 98304
    assert u.padding_fraction == pytest.approx(float(Fraction(32512, 98304)), abs=1e-15)
    assert u.idle_sm_fraction_last_wave == 102 / 108


def test_waves_and_last_wave():
    # 4096 x 4096 in 128-tiles = 1024 tiles on 132 SMs: 8 waves, last holds 100
    u = tile_utilization(4096, 4096, 128, 128, 132)
    assert (u.tiles, u.waves, u.last_wave_tiles) == (1024, 8, 100)
    assert u.idle_sm_fraction_last_wave == 32 / 132
    assert u.sm_utilization == pytest.approx(1024 / (8 * 132))
    # exactly full waves: nothing idle
    assert tile_utilization(1024, 1024, 128, 128, 64).idle_sm_fraction_last_wave == 0


def test_errors():
    with pytest.raises(ValueError, match="num_sms"):
        tile_utilization(256, 256, 128, 128, 0)
    with pytest.raises(TypeError, match="tile_m"):
        tile_utilization(256, 256, 128.0, 128, 4)


@given(st.integers(1, 5000), st.integers(1, 5000), st.sampled_from([16, 64, 128, 256]),
       st.sampled_from([16, 64, 128, 256]), st.integers(1, 200))
def test_properties(M, N, tm, tn, sms):
    u = tile_utilization(M, N, tm, tn, sms)
    # brute force: every tile's real elements, tiles dealt out to the SMs wave by wave
    fills = [min(tm, M - i) * min(tn, N - j)
             for i in range(0, M, tm) for j in range(0, N, tn)]
    waves = [fills[w:w + sms] for w in range(0, len(fills), sms)]
    area = tm * tn
    assert (u.tiles, u.waves, u.last_wave_tiles) == (len(fills), len(waves), len(waves[-1]))
    assert u.partial_tiles == sum(f < area for f in fills)
    assert u.min_tile_fill == pytest.approx(min(fills) / area, rel=1e-15)
    assert u.padding_fraction == pytest.approx(
        float(1 - Fraction(sum(fills), len(fills) * area)), abs=1e-12)
    assert u.idle_sm_fraction_last_wave == pytest.approx(
        float(Fraction(sms - len(waves[-1]), sms)), abs=1e-15)
    assert u.sm_utilization == pytest.approx(
        float(Fraction(sum(fills), len(waves) * sms * area)), rel=1e-12)