"""HBM traffic of the schedules against closed forms derived by hand from the algorithms
as written (FlashAttention Algorithm 0 and 1, FlashAttention-2 Algorithms 1 and 2), and
the asymptotics of Theorem 2."""
from __future__ import annotations

import math

import numpy as np
import pytest

from refimpl.attention import (
    flash_v1, flash_v2, flash_v2_backward, split_kv, standard_attention, v1_block_sizes,
)


def qkv(n, d, heads=1, sk=None, seed=0):
    rng = np.random.default_rng(seed)
    sk = n if sk is None else sk
    return (rng.standard_normal((heads, n, d)).astype(np.float32),
            rng.standard_normal((heads, sk, d)).astype(np.float32),
            rng.standard_normal((heads, sk, d)).astype(np.float32))


@pytest.mark.parametrize("n,d", [(8, 4), (16, 8), (32, 8), (48, 16)])
def test_standard_attention_counts(n, d):
    _, st = standard_attention(*qkv(n, d, heads=2))
    # Q, K, V read and O written once (4Nd); S written, read, P written, read (4N^2)
    assert st.hbm_accesses == 2 * (4 * n * d + 4 * n * n)
    assert st.hbm_writes["S"] == st.hbm_reads["P"] == 2 * n * n


def test_standard_attention_grows_as_nd_plus_n2():
    d = 8
    acc = {n: standard_attention(*qkv(n, d))[1].hbm_accesses for n in (16, 32, 64)}
    for n, a in acc.items():
        assert 3 <= a / (n * d + n * n) <= 5


@pytest.mark.parametrize("n,d,block", [(16, 4, (4, 4)), (20, 8, (8, 3)), (9, 2, (2, 5))])
def test_flash_v1_counts_closed_form(n, d, block):
    _, st = flash_v1(*qkv(n, d), block=block)
    br, bc = block
    tc, tr = math.ceil(n / bc), math.ceil(n / br)
    # init O, l, m; K, V once; per key tile: read Q, O, l, m, write O, l, m
    want = (n * d + 2 * n) + 2 * n * d + tc * (3 * n * d + 4 * n)
    assert st.hbm_accesses == want
    assert st.hbm_reads["K"] == n * d
    assert st.hbm_reads["Q"] == tc * n * d
    assert st.blocks_computed == tr * tc and st.blocks_skipped == 0


@pytest.mark.slow
def test_flash_v1_accesses_follow_n2d2_over_m():
    n, d = 128, 8
    ms = [256, 512, 1024, 2048]
    acc, peaks = [], []
    for m in ms:
        _, st = flash_v1(*qkv(n, d), sram_elements=m)
        acc.append(st.hbm_accesses)
        peaks.append(st.peak_sram_elements)
        assert st.peak_sram_elements <= m
    # Theorem 2: Theta(N^2 d^2 / M); the M-dependent part scales exactly as 1/M here
    const = 3 * n * d + 2 * n
    var = np.array(acc, dtype=float) - const
    slope = np.polyfit(np.log(ms), np.log(var), 1)[0]
    assert abs(slope + 1) < 0.05
    ratio = np.array(acc) / (n * n * d * d / np.array(ms))
    assert ratio.max() / ratio.min() < 2.5


@pytest.mark.parametrize("m,d", [(256, 8), (1000, 16), (4096, 64), (100, 8), (131072, 128)])
def test_v1_block_sizes_fit(m, d):
    br, bc = v1_block_sizes(m, d)
    assert 1 <= br <= d and bc >= 1
    assert 2 * br * d + 2 * bc * d + br * bc + 2 * br <= m
    # not shrunk further than needed: the paper's B_c = ceil(M / 4d) when it fits with B_r
    assert bc <= math.ceil(m / (4 * d))


def test_v1_block_sizes_paper_values_when_they_fit():
    # M = 100000, d = 64: B_c = ceil(100000 / 256) = 391, B_r = min(391, 64) = 64;
    # working set 2*64*64 + 2*391*64 + 64*391 + 128 = 83392 <= M, so no shrinking
    assert v1_block_sizes(100000, 64) == (64, 391)
    with pytest.raises(ValueError, match="too small"):
        v1_block_sizes(10, 8)


@pytest.mark.parametrize("n,d,block", [(32, 8, (8, 8)), (30, 4, (7, 4)), (17, 8, (16, 5))])
def test_flash_v2_reads_kv_once_per_query_tile(n, d, block):
    _, _, st = flash_v2(*qkv(n, d, heads=3), block=block)
    tr = math.ceil(n / block[0])
    assert st.hbm_reads["K"] == st.hbm_reads["V"] == 3 * tr * n * d
    assert st.hbm_reads["Q"] == st.hbm_writes["O"] == 3 * n * d
    assert st.hbm_writes["LSE"] == 3 * n
    assert st.blocks_skipped == 0
    br, bc = min(block[0], n), min(block[1], n)
    assert st.peak_sram_elements == 2 * br * d + 2 * bc * d + br * bc + 2 * br


@pytest.mark.parametrize("t", [4, 8, 16])
def test_causal_flash_v2_skips_about_half(t):
    b = 4
    n = t * b
    _, _, st = flash_v2(*qkv(n, 4), block=(b, b), causal=True)
    # tiles strictly above the diagonal: t(t-1)/2 of t^2
    assert st.blocks_skipped == t * (t - 1) // 2
    assert st.blocks_computed == t * (t + 1) // 2
    assert st.hbm_reads["K"] == st.blocks_computed * b * 4


def test_window_skips_tiles_outside_the_band():
    n, b = 64, 8
    _, _, st = flash_v2(*qkv(n, 4), block=(b, b), window=(8, 0))
    # query tile i needs key tiles i-1 (partly) and i: 2 per tile except the first
    assert st.blocks_computed == 1 + 2 * (n // b - 1)


def test_split_kv_counts():
    n, d, s = 32, 4, 4
    _, _, st = split_kv(*qkv(4, d, sk=n), num_splits=s, block=(4, 4))
    assert st.hbm_reads["K"] == n * d  # each key read once by its part
    assert st.hbm_reads["Q"] == s * 4 * d  # every part reads the queries
    assert st.hbm_writes["O_partial"] == st.hbm_reads["O_partial"] == s * 4 * d
    assert st.hbm_writes["O"] == 4 * d


def test_flash_v2_backward_counts():
    n, d, br, bc = 24, 4, 8, 6
    q, k, v = qkv(n, d)
    o, lse, _ = flash_v2(q, k, v, block=(br, bc))
    do = np.ones_like(o)
    *_, st = flash_v2_backward(q, k, v, o, do, lse, block=(br, bc))
    tr, tc = n // br, n // bc
    assert st.hbm_reads["K"] == st.hbm_reads["V"] == n * d  # K/V outer: read once
    assert st.hbm_reads["Q"] == tc * n * d  # Q_i once per key tile
    assert st.hbm_reads["dQ"] == tc * n * d and st.hbm_writes["dQ"] == (tc + 1) * n * d
    assert st.hbm_writes["dK"] == st.hbm_writes["dV"] == n * d
    assert st.hbm_writes["D"] == n and st.blocks_computed == tr * tc
    _, _, _, stc = flash_v2_backward(q, k, v, o, do, lse, block=(br, br), causal=True)
    assert stc.blocks_skipped == (n // br) * (n // br - 1) // 2
