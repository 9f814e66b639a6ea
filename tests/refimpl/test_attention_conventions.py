"""Attention conventions pinned on small hand-derived cases: alignment of causal masks,
windows and ALiBi; the order softcap -> masks -> ALiBi; GQA head mapping; padding masks
and per-entry offsets; fully masked rows; closed-form gradients; log-sum-exp of NaN and
+inf rows; the naive low-precision reference's ALiBi promotion. Every expected value is
written here from the formulas (float64, math.exp/log), never taken from the code."""
from __future__ import annotations

import math

import numpy as np
import pytest

from refimpl.attention import (
    attention, attention_backward, flash_v1, flash_v2, flash_v2_backward,
    merge_attention_states, naive_attention, split_kv,
)
from refimpl.softmax import logsumexp, online_state, softmax

U = 2.0**-24


def all_schedules(q, k, v, **opts):
    """(name, out, lse or None) of every forward schedule, small blocks."""
    out, lse = attention(q, k, v, return_lse=True, **opts)
    o64, l64 = attention(q, k, v, return_lse=True, precision="float64", **opts)
    o2, l2, _ = flash_v2(q, k, v, block=(2, 2), **opts)
    o2p, l2p, _ = flash_v2(q, k, v, block=(1, 3), implementation="plain", **opts)
    o1, _ = flash_v1(q, k, v, block=(2, 2), **opts)
    os_, ls, _ = split_kv(q, k, v, num_splits=3, block=(2, 1), **opts)
    return [("exact", out, lse), ("float64", o64, l64), ("flash_v2", o2, l2),
            ("flash_v2 plain", o2p, l2p), ("flash_v1", o1, None), ("split_kv", os_, ls)]


def softmax64(xs):
    fin = [x for x in xs if x != -math.inf]
    if not fin:
        return [0.0] * len(xs), -math.inf
    m = max(fin)
    es = [0.0 if x == -math.inf else math.exp(x - m) for x in xs]
    z = sum(es)
    return [e / z for e in es], m + math.log(z)


# ------------------------------------------------------------------ ALiBi alignment
@pytest.mark.parametrize("align,dists", [("bottom_right", [2, 1, 0]), ("top_left", [0, 1, 2])])
def test_alibi_distance_uses_the_alignment(align, dists):
    # q = 0: every score is 0 before the bias; v = I reads the weights off directly.
    # Sq = 1, Sk = 3: row 0 is aligned with key 2 (bottom-right) or key 0 (top-left).
    q = np.zeros((1, 1, 4), np.float32)
    k = np.arange(12, dtype=np.float32).reshape(1, 3, 4)
    v = np.eye(3, dtype=np.float32)[None]
    slope = 0.5
    w, lse = softmax64([-slope * dd for dd in dists])
    for name, out, l_ in all_schedules(q, k, v, alibi_slopes=np.array([slope], np.float32),
                                       causal_alignment=align):
        assert np.allclose(out[0, 0], w, atol=4 * U, rtol=0), name
        if l_ is not None:
            assert abs(float(l_[0, 0]) - lse) <= 4 * U, name


def test_causal_alibi_lse_keeps_the_row_term():
    # Sq = 2, Sk = 3, causal bottom-right: row 0 (aligned key 1) sees keys 0, 1 with bias
    # -s, 0; row 1 (aligned key 2) sees 0, 1, 2 with -2s, -s, 0. flash-attention's kernel
    # would add +s*j instead (its LSE is larger by s*(i + 1)); here the bias is -s|a - j|.
    q = np.zeros((1, 2, 4), np.float32)
    k = np.ones((1, 3, 4), np.float32)
    v = np.eye(3, dtype=np.float32)[None]
    s = 0.25
    w0, l0 = softmax64([-s, 0.0, -math.inf])
    w1, l1 = softmax64([-2 * s, -s, 0.0])
    for name, out, lse in all_schedules(q, k, v, causal=True,
                                        alibi_slopes=np.array([s], np.float32)):
        assert np.allclose(out[0], [w0, w1], atol=4 * U, rtol=0), name
        if lse is not None:
            assert abs(float(lse[0, 0]) - l0) <= 4 * U, name
            assert abs(float(lse[0, 1]) - l1) <= 4 * U, name


# ------------------------------------------------------------------ pipeline order
def test_softcap_applies_to_scaled_scores_before_alibi_and_masks():
    # D = 1, scale 0.5: raw products 8 and 2, scaled 4 and 1; cap 2: 2 tanh(2), 2 tanh(0.5);
    # then ALiBi (slope 1) is added uncapped. Key 2 is padding, so bottom-right alignment
    # counts 2 valid keys: row 0 is aligned with key 1 and the distances are 1, 0. A cap
    # applied after the bias, or before the scale, gives other weights.
    q = np.array([[[2.0]]], np.float32)
    k = np.array([[[4.0], [1.0], [3.0]]], np.float32)
    v = np.eye(3, dtype=np.float32)[None]
    kpm = np.array([True, True, False])
    s0 = 2 * math.tanh(4 / 2) - 1
    s1 = 2 * math.tanh(1 / 2) - 0
    w, lse = softmax64([s0, s1, -math.inf])
    for name, out, l_ in all_schedules(q, k, v, scale=0.5, softcap=2.0, key_padding_mask=kpm,
                                       alibi_slopes=np.array([1.0], np.float32)):
        assert np.allclose(out[0, 0], w, atol=8 * U, rtol=0), name
        if l_ is not None:
            assert abs(float(l_[0, 0]) - lse) <= 8 * U, name


# ------------------------------------------------------------------ windows
WINDOW_CASES = [
    # (sq, sk, alignment, window, visible keys per row), by hand from
    # a = i + (Sk - Sq or 0); a - w_left <= j <= a + w_right
    (2, 6, "bottom_right", (1, 1), [[3, 4, 5], [4, 5]]),
    (2, 6, "top_left", (1, 1), [[0, 1], [0, 1, 2]]),
    (3, 5, "bottom_right", (2, 0), [[0, 1, 2], [1, 2, 3], [2, 3, 4]]),
    (3, 5, "bottom_right", (None, 1), [[0, 1, 2, 3], [0, 1, 2, 3, 4], [0, 1, 2, 3, 4]]),
    (3, 5, "bottom_right", (0, None), [[2, 3, 4], [3, 4], [4]]),
    (4, 2, "bottom_right", (0, 1), [[], [0], [0, 1], [1]]),
]


@pytest.mark.parametrize("sq,sk,align,window,rows", WINDOW_CASES)
def test_window_bounds_inclusive_around_aligned_key(sq, sk, align, window, rows):
    q = np.zeros((1, sq, 4), np.float32)
    k = np.ones((1, sk, 4), np.float32)
    v = np.eye(sk, dtype=np.float32)[None]
    want = np.zeros((sq, sk))
    for i, vis in enumerate(rows):
        want[i, vis] = 1.0 / len(vis) if vis else 0.0
    for name, out, lse in all_schedules(q, k, v, window=window, causal_alignment=align):
        assert np.allclose(out[0], want, atol=2 * U, rtol=0), name
        if lse is not None:
            for i, vis in enumerate(rows):
                if vis:
                    assert abs(float(lse[0, i]) - math.log(len(vis))) <= 4 * U, name
                else:
                    assert lse[0, i] == -np.inf and np.all(out[0, i] == 0), name


# ------------------------------------------------------------------ GQA and padding
def test_gqa_query_head_h_reads_kv_head_h_div_group():
    # Hq = 6, Hkv = 3: group 2; v of KV head g is the constant g + 1, so output head h
    # is h // 2 + 1 (a convex combination of equal values; the weights sum to 1 up to
    # rounding, and any other head mapping is off by at least 1).
    rng = np.random.default_rng(0)
    q = rng.standard_normal((1, 6, 3, 4)).astype(np.float32)
    k = rng.standard_normal((1, 3, 5, 4)).astype(np.float32)
    v = np.broadcast_to(np.arange(1, 4, dtype=np.float32)[None, :, None, None],
                        (1, 3, 5, 2)).copy()
    for name, out, _ in all_schedules(q, k, v, causal=True):
        for h in range(6):
            assert np.allclose(out[0, h], h // 2 + 1, atol=8 * U, rtol=0), (name, h)


def test_padding_masks_set_per_entry_offsets():
    # entry 0: 4 valid keys of 5, 2 valid queries of 3 -> offset 2: row 0 sees keys 0..2,
    # row 1 keys 0..3, row 2 is padding. entry 1: no padding -> offset 2 as well, but
    # key 4 is valid: row 2 sees 0..4.
    q = np.zeros((2, 1, 3, 4), np.float32)
    k = np.ones((2, 1, 5, 4), np.float32)
    v = np.broadcast_to(np.eye(5, dtype=np.float32), (2, 1, 5, 5)).copy()
    kpm = np.array([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]], bool)
    qpm = np.array([[1, 1, 0], [1, 1, 1]], bool)
    rows = {0: [[0, 1, 2], [0, 1, 2, 3], []], 1: [[0, 1, 2], [0, 1, 2, 3], [0, 1, 2, 3, 4]]}
    for name, out, lse in all_schedules(q, k, v, causal=True, key_padding_mask=kpm,
                                        query_padding_mask=qpm):
        for b, rr in rows.items():
            for i, vis in enumerate(rr):
                want = np.zeros(5)
                if vis:
                    want[vis] = 1.0 / len(vis)
                assert np.allclose(out[b, 0, i], want, atol=2 * U, rtol=0), (name, b, i)
                if lse is not None:
                    ref = math.log(len(vis)) if vis else -math.inf
                    assert (lse[b, 0, i] == ref) if not vis else \
                        abs(float(lse[b, 0, i]) - ref) <= 4 * U, (name, b, i)


# ------------------------------------------------------------------ gradients
@pytest.mark.parametrize("softcap", [None, 1.5])
def test_gradients_closed_form_one_query_two_keys(softcap):
    # D = 1: x_j = c a k_j (c the scale); s_j = x_j or cap tanh(x_j / cap); p = softmax(s);
    # o = p0 v0 + p1 v1; with upstream g: dv_j = p_j g; ds_j = p_j g (v_j - o) * s'(x_j);
    # dq = c sum_j ds_j k_j; dk_j = c ds_j a.
    a, ks, vs, g, c = 0.75, [1.5, -0.5], [2.0, -1.0], 0.625, 0.5
    xs = [c * a * kj for kj in ks]
    if softcap is None:
        ss, ds_dx = xs, [1.0, 1.0]
    else:
        ss = [softcap * math.tanh(x / softcap) for x in xs]
        ds_dx = [1 - math.tanh(x / softcap) ** 2 for x in xs]
    p, lse = softmax64(ss)
    o = p[0] * vs[0] + p[1] * vs[1]
    ds = [p[j] * g * (vs[j] - o) * ds_dx[j] for j in range(2)]
    want_dq = c * (ds[0] * ks[0] + ds[1] * ks[1])
    want_dk = [c * ds[j] * a for j in range(2)]
    want_dv = [p[j] * g for j in range(2)]
    q = np.array([[[a]]], np.float32)
    k = np.array([[[ks[0]], [ks[1]]]], np.float32)
    v = np.array([[[vs[0]], [vs[1]]]], np.float32)
    do = np.array([[[g]]], np.float32)
    opts = dict(scale=c, softcap=softcap)
    o64, l64 = attention(q, k, v, return_lse=True, precision="float64", **opts)
    assert abs(float(o64[0, 0, 0]) - o) <= 1e-15 and abs(float(l64[0, 0]) - lse) <= 1e-15
    o32, l32 = attention(q, k, v, return_lse=True, **opts)
    o2, l2, _ = flash_v2(q, k, v, block=(1, 1), **opts)
    results = [
        ("float64", attention_backward(q, k, v, o64, do, l64, precision="float64", **opts),
         1e-14),
        ("exact", attention_backward(q, k, v, o32, do, l32, **opts), 32 * U),
        ("flash_v2_backward", flash_v2_backward(q, k, v, o2, do, l2, block=(1, 1),
                                                **opts)[:3], 32 * U),
    ]
    for name, (dq, dk, dv), tol in results:
        assert abs(float(dq[0, 0, 0]) - want_dq) <= tol, name
        assert np.allclose(dk[0, :, 0], want_dk, atol=tol, rtol=0), name
        assert np.allclose(dv[0, :, 0], want_dv, atol=tol, rtol=0), name


def test_gqa_gradients_sum_the_group():
    # Hq = 2, Hkv = 1, every score 0 (q = 0): p = 1/2 on both keys for both heads;
    # dv_j = sum_h p_hj g_h = (g_0 + g_1) / 2.
    q = np.zeros((1, 2, 1, 1), np.float32)
    k = np.array([[[[1.0], [2.0]]]], np.float32)
    v = np.array([[[[3.0], [5.0]]]], np.float32)
    do = np.array([[[[0.5]], [[1.25]]]], np.float32)
    o, lse = attention(q, k, v, return_lse=True)
    assert np.all(o == 4.0)
    for dq, dk, dv in (attention_backward(q, k, v, o, do, lse),
                       flash_v2_backward(q, k, v, o, do, lse, block=(1, 1))[:3]):
        assert np.array_equal(dv[0, 0, :, 0], [0.875, 0.875])
        # ds_hj = p (g_h (v_j - o)) = 0.5 g_h (-1, +1); dq_h = c sum_j ds_hj k_j = 0.5 g_h c
        assert np.allclose(dq[0, :, 0, 0], [0.25, 0.625], atol=4 * U, rtol=0)
        # dk_j = c sum_h ds_hj q_h = 0 (q = 0)
        assert np.all(dk == 0)


# ------------------------------------------------------------------ softmax specials
def test_logsumexp_nan_and_posinf_rows():
    x = np.array([[np.nan, 1.0], [np.inf, 1.0], [np.inf, -np.inf], [np.inf, np.nan],
                  [-np.inf, -np.inf], [0.0, 0.0]], np.float32)
    got = logsumexp(x)
    assert np.isnan(got[0]) and np.isnan(got[3])
    assert got[1] == np.inf and got[2] == np.inf
    assert got[4] == -np.inf
    assert got[5] == np.float32(math.log(2))
    for block in (1, 2):
        st_ = online_state(x.astype(np.float64), block=block)
        lse = st_.lse
        assert np.isnan(lse[0]) and np.isnan(lse[3]), block
        assert lse[1] == np.inf and lse[2] == np.inf and lse[4] == -np.inf, block
    # softmax keeps NaN for both (inf / inf)
    assert np.isnan(softmax(x[:4])).all()


def test_merge_of_no_parts_is_a_clear_error():
    with pytest.raises(ValueError, match="at least one part"):
        merge_attention_states([], [])


# ------------------------------------------------------------------ naive reference
def test_naive_alibi_scores_stay_float32():
    # fp16: q k = 1000 and 999.5 (fp16 values), slope 0.3 at distances 1 and 0
    # (bottom-right, Sq = 1, Sk = 2). Framework code adds the float32 bias to the half
    # scores and the sum is float32: s0 = fl32(1000 - fl32(0.3)) = 999.7, s1 = 999.5, so
    # p0 = 1 / (1 + e^(s1 - s0)) ~ 0.5498. Rounding s0 back to fp16 would give 999.5 and
    # p0 = 0.5.
    q = np.array([[[1.0]]], np.float32)
    k = np.array([[[1000.0], [999.5]]], np.float32)
    v = np.array([[[1.0], [0.0]]], np.float32)
    slope = np.float32(0.3)
    s0 = float(np.float32(1000.0 - float(slope)))
    p0 = 1.0 / (1.0 + math.exp(999.5 - s0))
    want = float(np.float16(np.float32(p0)))
    got = naive_attention(q, k, v, dtype="fp16", scale=1.0, alibi_slopes=np.array([slope]))
    assert float(got[0, 0, 0]) == want
    assert want != 0.5
