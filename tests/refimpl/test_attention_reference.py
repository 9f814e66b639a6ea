"""Reference attention and the forward schedules against an independent float64 oracle
written here from the definitions (FlashAttention papers, PyTorch SDPA and flash-attention
conventions; masks built index by index), with error bounds derived from float32 rounding;
the sharp cases of those conventions pinned."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings, target
from hypothesis import strategies as st
from attention_draws import mask_options

from refimpl.attention import (
    attention, flash_v1, flash_v2, merge_attention_states, naive_attention, split_kv,
    standard_attention, within_naive_tolerance,
)

U = 2.0**-24


# ---------------------------------------------------------------- independent oracle
def oracle(q, k, v, *, scale=None, causal=False, causal_alignment="bottom_right",
           window=None, softcap=None, alibi_slopes=None, key_padding_mask=None,
           query_padding_mask=None):
    """float64 attention from the doc: returns out, lse, |s| max per row (visible)."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    batch = q.shape[:-3]
    hq, sq, d = q.shape[-3:]
    hkv, sk = k.shape[-3:-1]
    nb = int(np.prod(batch, dtype=np.int64))
    q = q.reshape(nb, hq, sq, d)
    k = np.repeat(k.reshape(nb, hkv, sk, d), hq // hkv, axis=1)
    v = np.repeat(v.reshape(nb, hkv, sk, v.shape[-1]), hq // hkv, axis=1)
    scale = 1 / math.sqrt(d) if scale is None else scale
    s = np.einsum("bhid,bhjd->bhij", q, k) * scale
    if softcap is not None:
        s = softcap * np.tanh(s / softcap)
    kpm = None if key_padding_mask is None else np.asarray(key_padding_mask).reshape(nb, sk)
    qpm = None if query_padding_mask is None else np.asarray(query_padding_mask).reshape(nb, sq)
    vis = np.zeros((nb, sq, sk), dtype=bool)
    bias = np.zeros((nb, hq, sq, sk))
    slopes = None if alibi_slopes is None else np.broadcast_to(
        np.asarray(alibi_slopes, dtype=np.float64), batch + (hq,)).reshape(nb, hq)
    for b in range(nb):
        n_k = sk if kpm is None else int(kpm[b].sum())
        n_q = sq if qpm is None else int(qpm[b].sum())
        off = n_k - n_q if causal_alignment == "bottom_right" else 0
        for i in range(sq):
            for j in range(sk):
                ok = True
                if kpm is not None and not kpm[b, j]:
                    ok = False
                if qpm is not None and not qpm[b, i]:
                    ok = False
                if causal and j > i + off:
                    ok = False
                if window is not None:
                    wl, wr = window
                    if wl is not None and j < i + off - wl:
                        ok = False
                    if wr is not None and j > i + off + wr:
                        ok = False
                vis[b, i, j] = ok
                if slopes is not None:
                    bias[b, :, i, j] = -slopes[b] * abs(i + off - j)
    s = s + bias
    s = np.where(vis[:, None], s, -np.inf)
    out = np.zeros(s.shape[:-1] + (v.shape[-1],))
    lse = np.full(s.shape[:-1], -np.inf)
    smax = np.zeros(s.shape[:-1])
    for idx in np.ndindex(*s.shape[:-1]):
        row = s[idx]
        if np.isfinite(row).any():
            m = row[np.isfinite(row)].max()
            e = np.exp(row - m)
            out[idx] = (e / e.sum()) @ v[idx[:2]]
            lse[idx] = m + np.log(e.sum())
            smax[idx] = np.abs(row[np.isfinite(row)]).max()
    rs = lambda x: x.reshape(batch + x.shape[1:])  # noqa: E731
    return rs(out), rs(lse), rs(smax)


def bound(v, smax, tiles=1):
    """Per-row error bound of a float32 pipeline: scores carry <= 3u|s| each, so the
    weights move by <= ~12u max|s| relative; P, l, the division and the product add a few
    u, and each online rescaling step one more."""
    vmax = np.max(np.abs(v)) if np.size(v) else 0.0
    return U * vmax * (16 + 4 * tiles + 16 * smax)[..., None] + 1e-30


def ulp_error(got, ref, v):
    """max |got - ref| in float32 ulps of max|v| (outputs are convex combinations of v
    rows, so that is the scale of every output; elementwise ulps of near-zero outputs
    that cancel would say nothing)."""
    if got.size == 0:
        return 0.0
    sp = float(np.spacing(np.float32(max(float(np.abs(v).max(initial=0)), 2.0**-100))))
    return float(np.max(np.abs(got.astype(np.float64) - ref))) / sp


# ---------------------------------------------------------------- drawn problems
@st.composite
def problems(draw, d_choices=(1, 8, 64, 128), max_s=24):
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    batch = draw(st.sampled_from([(), (1,), (2,)]))
    hkv = draw(st.integers(1, 2))
    g = draw(st.integers(1, 3))
    hq = hkv * g
    sq = draw(st.integers(1, max_s))
    sk = draw(st.integers(0, max_s))
    d = draw(st.sampled_from(d_choices))
    q = rng.standard_normal(batch + (hq, sq, d)).astype(np.float32)
    k = rng.standard_normal(batch + (hkv, sk, d)).astype(np.float32)
    v = rng.standard_normal(batch + (hkv, sk, d)).astype(np.float32)
    opts = mask_options(draw, rng, batch, hq, sq, sk)
    if draw(st.booleans()):
        # every logit + 1e4: an extra coordinate 100 * 100 with scale 1
        extra = np.full(batch + (hq, sq, 1), 100.0, np.float32)
        q = np.concatenate([q * np.float32(1 / math.sqrt(d)), extra], axis=-1)
        k = np.concatenate([k, np.full(batch + (hkv, sk, 1), 100.0, np.float32)], axis=-1)
        v = np.concatenate([v, np.zeros(batch + (hkv, sk, 1), np.float32)], axis=-1)
        opts["scale"] = 1.0
    block = (draw(st.integers(3, 16)), draw(st.integers(3, 16)))
    return q, k, v, opts, block


def check_close(got, q, k, v, opts, tiles=1, label=""):
    ref, _, smax = oracle(q, k, v, **opts)
    assert got.shape == ref.shape
    assert not np.isnan(got).any()
    err = np.abs(got.astype(np.float64) - ref)
    b = bound(v, smax, tiles)
    target(float(np.max(err / b)) if err.size else 0.0, label=f"error/bound {label}")
    assert np.all(err <= b)
    masked = ~np.isfinite(oracle(q, k, v, **opts)[1])
    assert np.all(got[masked] == 0)


@pytest.mark.slow
@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow])
@given(problems())
def test_reference_within_float32_bound(p):
    q, k, v, opts, _ = p
    out, lse = attention(q, k, v, return_lse=True, **opts)
    assert out.dtype == np.float32
    check_close(out, q, k, v, opts, label="reference")
    _, ref_lse, smax = oracle(q, k, v, **opts)
    fin = np.isfinite(ref_lse)
    assert np.array_equal(np.isfinite(lse), fin)
    assert np.all(lse[~fin] == -np.inf)
    assert np.all(np.abs(lse[fin] - ref_lse[fin]) <= 8 * U * (1 + smax[fin] + np.abs(ref_lse[fin])))
    o64 = attention(q, k, v, precision="float64", **opts)
    tol64 = 1e-9 * (1 + np.max(smax, initial=0))
    assert np.allclose(o64, oracle(q, k, v, **opts)[0], rtol=0, atol=tol64)


@pytest.mark.slow
@settings(max_examples=30, suppress_health_check=[HealthCheck.too_slow])
@given(problems(d_choices=(1, 8, 64, 128)))
@example((np.ones((1, 3, 4), np.float32), np.ones((1, 0, 4), np.float32),
          np.ones((1, 0, 4), np.float32), {}, (4, 4)))  # Sk = 0
def test_schedules_agree_with_reference(p):
    q, k, v, opts, block = p
    exact = attention(q, k, v, **opts)
    sk = k.shape[-2]
    tiles = max(1, math.ceil(sk / block[1]))
    o2, lse2, st2 = flash_v2(q, k, v, block=block, **opts)
    check_close(o2, q, k, v, opts, tiles, "flash_v2")
    target(ulp_error(o2, exact, v), label="flash_v2 ulp vs exact")
    o2p, lse2p, st2p = flash_v2(q, k, v, block=block, implementation="plain", **opts)
    assert np.array_equal(o2p, o2) and np.array_equal(lse2p, lse2)
    assert st2p == st2
    o1, st1 = flash_v1(q, k, v, block=block, **opts)
    check_close(o1, q, k, v, opts, tiles, "flash_v1")
    target(ulp_error(o1, exact, v), label="flash_v1 ulp vs exact")
    ns = 1 + (sk % 3)
    os_, lses, sts = split_kv(q, k, v, num_splits=ns, block=block, **opts)
    check_close(os_, q, k, v, opts, tiles + ns, "split_kv")
    target(ulp_error(os_, exact, v), label="split_kv ulp vs exact")
    o0, st0 = standard_attention(q, k, v, **opts)
    assert np.array_equal(o0, exact)
    for st_ in (st1, st2, sts):      # peak on-chip sizes are pinned in test_attention_io
        assert st_.hbm_accesses > 0


# ---------------------------------------------------------------- sharp cases
def one_hot_problem(sq, sk):
    """q = 0 (all scores equal) and v = I: output row = uniform weights on visible keys."""
    q = np.zeros((1, sq, 4), np.float32)
    k = np.random.default_rng(0).standard_normal((1, sk, 4)).astype(np.float32)
    v = np.eye(sk, dtype=np.float32)[None]
    return q, k, v


def uniform(rows, sk):
    out = np.zeros((len(rows), sk))
    for i, vis in enumerate(rows):
        if vis:
            out[i, vis] = 1.0 / len(vis)
    return out


ALIGNMENT_CASES = [
    # (sq, sk, alignment, visible keys per row) -- derived by hand from j <= i + Sk - Sq
    (2, 5, "bottom_right", [[0, 1, 2, 3], [0, 1, 2, 3, 4]]),
    (2, 5, "top_left", [[0], [0, 1]]),
    (5, 2, "bottom_right", [[], [], [], [0], [0, 1]]),
    (5, 2, "top_left", [[0], [0, 1], [0, 1], [0, 1], [0, 1]]),
]


@pytest.mark.parametrize("sq,sk,align,rows", ALIGNMENT_CASES)
@pytest.mark.parametrize("schedule", ["reference", "flash_v1", "flash_v2", "split_kv"])
def test_causal_alignment(sq, sk, align, rows, schedule):
    q, k, v = one_hot_problem(sq, sk)
    opts = dict(causal=True, causal_alignment=align)
    if schedule == "reference":
        out, lse = attention(q, k, v, return_lse=True, **opts)
    elif schedule == "flash_v1":
        out, _ = flash_v1(q, k, v, block=(2, 2), **opts)
        lse = None
    elif schedule == "flash_v2":
        out, lse, _ = flash_v2(q, k, v, block=(2, 2), **opts)
    else:
        out, lse, _ = split_kv(q, k, v, num_splits=2, block=(2, 1), **opts)
    want = uniform(rows, sk)
    assert np.allclose(out[0], want, atol=2 * U, rtol=0)
    if lse is not None:
        for i, vis in enumerate(rows):
            if vis:
                assert abs(lse[0, i] - math.log(len(vis))) <= 4 * U
            else:
                assert lse[0, i] == -np.inf and np.all(out[0, i] == 0)


@pytest.mark.parametrize("align", ["bottom_right", "top_left"])
@pytest.mark.parametrize("sq,sk", [(4, 4), (3, 7), (6, 6)])
def test_window_zero_returns_aligned_v_exactly(align, sq, sk):
    rng = np.random.default_rng(3)
    q = rng.standard_normal((2, sq, 8)).astype(np.float32)
    k = rng.standard_normal((2, sk, 8)).astype(np.float32)
    v = rng.standard_normal((2, sk, 8)).astype(np.float32)
    off = sk - sq if align == "bottom_right" else 0
    opts = dict(window=(0, 0), causal_alignment=align)
    outs = [attention(q, k, v, **opts), flash_v1(q, k, v, block=(2, 3), **opts)[0],
            flash_v2(q, k, v, block=(2, 3), **opts)[0],
            split_kv(q, k, v, num_splits=2, block=(2, 3), **opts)[0]]
    for out in outs:
        for i in range(sq):
            j = i + off
            if 0 <= j < sk:
                assert np.array_equal(out[:, i], v[:, j])
            else:
                assert np.all(out[:, i] == 0)


def test_causal_is_window_inf_zero():
    rng = np.random.default_rng(4)
    q, k, v = (rng.standard_normal((2, n, 8)).astype(np.float32) for n in (5, 9, 9))
    assert np.array_equal(attention(q, k, v, causal=True), attention(q, k, v, window=(None, 0)))


def test_fully_masked_first_tile_no_nan():
    rng = np.random.default_rng(5)
    q = rng.standard_normal((1, 2, 12, 8)).astype(np.float32)
    k = rng.standard_normal((1, 2, 20, 8)).astype(np.float32)
    v = rng.standard_normal((1, 2, 20, 8)).astype(np.float32)
    kpm = np.ones((1, 20), bool)
    kpm[0, :8] = False  # first two key tiles of 4 are all padding
    opts = dict(key_padding_mask=kpm)
    ref = attention(q, k, v, **opts)
    for out in (flash_v2(q, k, v, block=(4, 4), **opts)[0],
                flash_v2(q, k, v, block=(4, 4), implementation="plain", **opts)[0],
                flash_v1(q, k, v, block=(4, 4), **opts)[0],
                split_kv(q, k, v, num_splits=3, block=(4, 4), **opts)[0]):
        assert not np.isnan(out).any()
        assert np.allclose(out, ref, atol=16 * U)
    o2, _, st2 = flash_v2(q, k, v, block=(4, 4), **opts)
    assert st2.blocks_skipped == 2 * 3 * 2  # heads x query tiles x padded key tiles


def test_all_masked_and_empty():
    rng = np.random.default_rng(6)
    q = rng.standard_normal((2, 3, 4)).astype(np.float32)
    k = rng.standard_normal((2, 5, 4)).astype(np.float32)
    v = rng.standard_normal((2, 5, 4)).astype(np.float32)
    kpm = np.zeros((5,), bool)
    for fn in (lambda **o: attention(q, k, v, return_lse=True, **o),
               lambda **o: flash_v2(q, k, v, block=(2, 2), **o)[:2],
               lambda **o: split_kv(q, k, v, num_splits=2, block=(2, 2), **o)[:2]):
        out, lse = fn(key_padding_mask=kpm)
        assert np.all(out == 0) and np.all(lse == -np.inf)
    e = np.zeros((2, 0, 4), np.float32)
    out, lse = attention(q, e, e, return_lse=True)
    assert out.shape == (2, 3, 4) and np.all(out == 0) and np.all(lse == -np.inf)
    out, lse, st_ = flash_v2(q, e, e)
    assert np.all(out == 0) and np.all(lse == -np.inf) and st_.blocks_computed == 0


def test_large_offset_does_not_change_output():
    rng = np.random.default_rng(7)
    q = rng.standard_normal((2, 6, 4)).astype(np.float32)
    k = rng.standard_normal((2, 9, 4)).astype(np.float32)
    v = rng.standard_normal((2, 9, 4)).astype(np.float32)
    base = attention(q, k, v, scale=0.5)
    # ALiBi with slope 0 adds nothing; a q/k extra coordinate adds 1e4 to every logit
    q2 = np.concatenate([q, np.full((2, 6, 1), 100, np.float32)], -1)
    k2 = np.concatenate([k, np.full((2, 9, 1), 100, np.float32)], -1)
    q2[..., :4] *= np.float32(0.5)
    for out in (attention(q2, k2, v, scale=1.0), flash_v2(q2, k2, v, scale=1.0, block=(4, 4))[0]):
        assert not np.isnan(out).any()
        # logits near 1e4 carry float32 spacing 2^-10: weights move by ~1e-3 relative
        assert np.allclose(out, base, atol=4e-3 * np.abs(v).max())


def test_gqa_equals_repeated_heads_bitwise():
    rng = np.random.default_rng(8)
    q = rng.standard_normal((1, 6, 7, 8)).astype(np.float32)
    k = rng.standard_normal((1, 2, 9, 8)).astype(np.float32)
    v = rng.standard_normal((1, 2, 9, 8)).astype(np.float32)
    kr, vr = np.repeat(k, 3, axis=1), np.repeat(v, 3, axis=1)
    assert np.array_equal(attention(q, k, v, causal=True), attention(q, kr, vr, causal=True))
    assert np.array_equal(flash_v2(q, k, v, block=(4, 4))[0], flash_v2(q, kr, vr, block=(4, 4))[0])
    mqa = attention(q, k[:, :1], v[:, :1])
    assert np.array_equal(mqa, attention(q, np.repeat(k[:, :1], 6, 1), np.repeat(v[:, :1], 6, 1)))


def test_block_rows_do_not_change_bytes():
    rng = np.random.default_rng(9)
    q, k, v = (rng.standard_normal((2, n, 16)).astype(np.float32) for n in (13, 17, 17))
    outs = [flash_v2(q, k, v, block=(br, 5), causal=True)[0] for br in (1, 4, 13, 64)]
    assert all(np.array_equal(outs[0], o) for o in outs[1:])


def test_split_permutation_invariance():
    rng = np.random.default_rng(10)
    q, k, v = (rng.standard_normal((2, n, 8)).astype(np.float32) for n in (5, 40, 40))
    from refimpl.attention.flash_v2 import flash_v2_core
    from refimpl.attention.problem import prepare
    from refimpl.attention.split_kv import split_ranges
    prob = prepare(q, k, v, causal=True)
    parts = [flash_v2_core(prob, (4, 4), key_range=r)[:2] for r in split_ranges(40, 4, 5)]
    parts.append((np.zeros_like(parts[0][0]), np.full_like(parts[0][1], -np.inf)))  # empty
    ref_o, ref_l = merge_attention_states([p[0] for p in parts], [p[1] for p in parts])
    for perm in ([5, 4, 3, 2, 1, 0], [2, 0, 5, 1, 4, 3]):
        o, l_ = merge_attention_states([parts[i][0] for i in perm], [parts[i][1] for i in perm])
        assert np.allclose(o, ref_o, atol=4 * U * np.abs(v).max(), rtol=0)
        assert np.allclose(l_, ref_l, atol=4 * U * (1 + np.abs(ref_l).max()), rtol=0)
    full = attention(q, k, v, causal=True)
    assert np.allclose(ref_o[0], full, atol=32 * U)
    # an empty part alone weighs nothing: merging it with one part returns that part
    o1, l1 = merge_attention_states([parts[0][0], parts[-1][0]], [parts[0][1], parts[-1][1]])
    assert np.array_equal(o1, parts[0][0]) and np.array_equal(l1, parts[0][1])


def test_naive_low_precision_reference_and_rule():
    rng = np.random.default_rng(11)
    q, k, v = (rng.standard_normal((2, 16, 32)).astype(np.float32) for _ in range(3))
    ref64, _, _ = oracle(q, k, v)
    for dtype, eps in (("fp16", 2.0**-11), ("bf16", 2.0**-8)):
        nv = naive_attention(q, k, v, dtype=dtype)
        err = np.abs(nv - ref64).max()
        assert 0 < err < 64 * eps  # noticeably worse than float32, but sane
        exact = attention(q, k, v)
        assert within_naive_tolerance(exact, ref64, nv)
        assert not within_naive_tolerance(exact + 4 * err, ref64, nv)


@pytest.mark.parametrize("kwargs,error,match", [
    (dict(causal_alignment="diagonal"), ValueError, "causal_alignment"),
    (dict(window=(-1, 0)), ValueError, "w_left"),
    (dict(window=5), TypeError, "pair"),
    (dict(softcap=0.0), ValueError, "softcap"),
    (dict(alibi_slopes=np.ones(3)), ValueError, "alibi_slopes"),
    (dict(key_padding_mask=np.ones(3, bool)), ValueError, "key_padding_mask"),
    (dict(key_padding_mask=np.ones(4)), TypeError, "boolean"),
])
def test_bad_options_are_clear_errors(kwargs, error, match):
    q = np.zeros((2, 3, 4), np.float32)
    k = np.zeros((2, 4, 4), np.float32)
    with pytest.raises(error, match=match):
        attention(q, k, k, **kwargs)


def test_bad_inputs_are_clear_errors():
    q = np.zeros((3, 2, 4), np.float32)
    k = np.zeros((2, 2, 4), np.float32)
    with pytest.raises(ValueError, match="multiple"):
        attention(q, k, k)
    bad = np.zeros((2, 2, 4), np.float32)
    bad[1, 0, 3] = np.nan
    with pytest.raises(ValueError, match=r"q holds a non-finite value at index \(1, 0, 3\)"):
        attention(bad, k, k)
    with pytest.raises(ValueError, match="not a float32"):
        attention(np.full((2, 2, 4), 0.1), k, k)
    with pytest.raises(ValueError, match="block"):
        flash_v2(k, k, k, block=(0, 4))
    with pytest.raises(ValueError, match="exactly one"):
        flash_v1(k, k, k)
    with pytest.raises(ValueError, match="precision"):
        attention(k, k, k, precision="fp8")


@pytest.mark.parametrize("group_rows", [1, 4, 8, 1000])
def test_fast_lockstep_grouping_does_not_change_bytes(monkeypatch, group_rows):
    import importlib

    fv2 = importlib.import_module("refimpl.attention.flash_v2")  # the module, not the function
    rng = np.random.default_rng(12)
    q, k, v = (rng.standard_normal((2, n, 8)).astype(np.float32) for n in (50, 40, 40))
    kpm = rng.random((1, 40)) < 0.7
    opts = dict(block=(4, 8), causal=True, window=(9, None), key_padding_mask=kpm)
    plain = flash_v2(q[None], k[None], v[None], implementation="plain", **opts)
    monkeypatch.setattr(fv2, "_LOCKSTEP_ROWS", group_rows)
    fast = flash_v2(q[None], k[None], v[None], **opts)
    assert np.array_equal(plain[0], fast[0]) and np.array_equal(plain[1], fast[1])
    assert plain[2] == fast[2]


@pytest.mark.slow
def test_bytes_do_not_depend_on_blas_threads():
    import os
    import subprocess
    import sys

    code = (
        "import hashlib, numpy as np\n"
        "from refimpl.attention import attention, flash_v2, flash_v1, attention_backward\n"
        "rng = np.random.default_rng(0)\n"
        "q, k, v = (rng.standard_normal((2, 40, 32)).astype(np.float32) for _ in range(3))\n"
        "o, l = attention(q, k, v, return_lse=True, softcap=4.0)\n"
        "parts = [o, l, flash_v2(q, k, v, block=(16, 8), causal=True)[0],\n"
        "         flash_v1(q, k, v, block=(8, 16))[0],\n"
        "         *attention_backward(q, k, v, o, o, l, softcap=4.0)]\n"
        "print(hashlib.sha256(b''.join(p.tobytes() for p in parts)).hexdigest())\n"
    )
    digests = set()
    for threads in ("1", "2"):
        env = dict(os.environ, OPENBLAS_NUM_THREADS=threads, OMP_NUM_THREADS=threads)
        res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, check=True)
        digests.add(res.stdout.strip())
    assert len(digests) == 1


def test_public_block_step_reproduces_flash_v2_from_shuffled_pages():
    from refimpl.attention import OnlineState, finalize, online_block_update, prepare, scores
    rng = np.random.default_rng(13)
    q = rng.standard_normal((1, 2, 10, 8)).astype(np.float32)
    k = rng.standard_normal((1, 2, 24, 8)).astype(np.float32)
    v = rng.standard_normal((1, 2, 24, 8)).astype(np.float32)
    page = 4
    table = rng.permutation(6)  # logical page j lives in physical slot table[j]
    pool_k = np.empty((6, 1, 2, page, 8), np.float32)
    pool_v = np.empty_like(pool_k)
    for j, slot in enumerate(table):
        pool_k[slot] = k[:, :, j * page:(j + 1) * page]
        pool_v[slot] = v[:, :, j * page:(j + 1) * page]
    opts = dict(causal=True, causal_alignment="top_left", softcap=3.0,
                alibi_slopes=np.array([0.5, 0.25], np.float32))
    prob = prepare(q, k, v, **opts)
    rows = np.arange(10)
    state = OnlineState.initial((1, 2, 10), 8)
    for j, slot in enumerate(table):
        cols = np.arange(j * page, (j + 1) * page)
        if not prob.visible(rows, cols).any():
            continue  # flash_v2 skips tiles the mask hides
        s, _, _ = scores(prob, prob.q, pool_k[slot], rows, cols)
        state = online_block_update(state, s, pool_v[slot])
    out, lse = finalize(state)
    ref_out, ref_lse, st_ = flash_v2(q, k, v, block=(16, page), **opts)
    assert np.array_equal(out, ref_out) and np.array_equal(lse, ref_lse)
    assert st_.blocks_skipped == 2 * 3  # key pages 3, 4, 5 lie above row 9's diagonal
    # computing the hidden tiles instead of skipping them changes no byte either
    state = OnlineState.initial((1, 2, 10), 8)
    for j, slot in enumerate(table):
        cols = np.arange(j * page, (j + 1) * page)
        s, _, _ = scores(prob, prob.q, pool_k[slot], rows, cols)
        state = online_block_update(state, s, -np.abs(pool_v[slot]))  # -0 products too
    ref_neg = flash_v2(q, k, -np.abs(v), block=(16, page), **opts)
    assert np.array_equal(finalize(state)[0], ref_neg[0])
    assert np.array_equal(finalize(state)[1], ref_neg[1])


def test_scores_beyond_float32_range():
    """A dot product whose correctly rounded float32 value overflows is +-inf in the
    exact pipeline (documented in refimpl.attention.reference.attention): a -inf score
    weighs nothing; a row with a +inf score gives NaN output and LSE +inf (as
    refimpl.softmax does for a row holding +inf), loudly, and no other row changes.
    In float64 the scores are finite and the limit softmax results."""
    k = np.array([[0.0, 1.0], [2.0**66, 0.0], [0.0, 2.0]], np.float32)[None, None]
    v = np.array([[1.0, 2.0], [3.0, 5.0], [7.0, 11.0]], np.float32)[None, None]
    # row 0: scores (0, 2^130, 0); row 1: scores (1, -2^130, 2); row 2: (0.5, 0, 1)
    q = np.array([[2.0**64, 0.0], [-2.0**64, 1.0], [0.0, 0.5]], np.float32)[None, None]
    out, lse = attention(q, k, v, scale=1.0, return_lse=True)
    assert np.isnan(out[0, 0, 0]).all() and lse[0, 0, 0] == np.inf
    w0, w2 = math.e / (math.e + math.e**2), math.e**2 / (math.e + math.e**2)
    want = w0 * np.array([1.0, 2.0]) + w2 * np.array([7.0, 11.0])
    assert np.allclose(out[0, 0, 1], want, rtol=4 * U, atol=0)
    assert abs(lse[0, 0, 1] - math.log(math.e + math.e**2)) <= 4 * U * 2.5
    # row 2 by hand: weights e^0.5, 1, e over v (rounded to float32 at the end)
    w = np.array([math.exp(0.5), 1.0, math.e]) / (math.exp(0.5) + 1.0 + math.e)
    assert np.allclose(out[0, 0, 2], w @ np.array([[1.0, 2.0], [3.0, 5.0], [7.0, 11.0]]),
                       rtol=4 * U, atol=0)
    # the rows with finite scores do not depend on the +inf row
    q_ok = q.copy()
    q_ok[0, 0, 0] = 0.0
    out_ok, lse_ok = attention(q_ok, k, v, scale=1.0, return_lse=True)
    assert np.array_equal(out[0, 0, 1:], out_ok[0, 0, 1:])
    assert np.array_equal(lse[0, 0, 1:], lse_ok[0, 0, 1:])
    out64, lse64 = attention(q, k, v, scale=1.0, return_lse=True, precision="float64")
    assert np.array_equal(out64[0, 0, 0], [3.0, 5.0]) and lse64[0, 0, 0] == 2.0**130
    assert np.allclose(out64[0, 0, 1], want, rtol=1e-14, atol=0)
    # the scale multiply overflowing gives the same +inf (S = 2^100 finite, scale 2^30)
    q2 = np.array([[2.0**34, 0.0]], np.float32)[None, None]
    out2, lse2 = attention(q2, k, v, scale=2.0**30, return_lse=True)
    assert np.isnan(out2[0, 0, 0]).all() and lse2[0, 0, 0] == np.inf
    # a row whose every score overflows to -inf is a fully masked row: out 0, LSE -inf
    q3 = np.array([[-2.0**64, 0.0]], np.float32)[None, None]
    k3 = np.array([[2.0**66, 0.0], [2.0**65, 0.0]], np.float32)[None, None]
    out3, lse3 = attention(q3, k3, v[:, :, :2], scale=1.0, return_lse=True)
    assert np.array_equal(out3[0, 0, 0], [0.0, 0.0]) and not np.signbit(out3).any()
    assert lse3[0, 0, 0] == -np.inf
