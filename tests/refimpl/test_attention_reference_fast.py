"""The fast exact forward of the reference attention (a row-chunk pipeline with its
float64 products on the helper thread, ``P V`` as partial products): the same bytes as
the plain loop (scores, ``_softmax_rows``, ``matmul_f32`` per chunk) on masks, GQA,
softcap, ALiBi, padding, ties and overflowing logits, with and without the helper
thread, with many chunks and short partial products; and the error bound of the
partial products against exact sums (``math.fsum``)."""
from __future__ import annotations

import importlib
import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from refimpl.attention import attention
from refimpl.attention.problem import prepare
from attention_draws import mask_options, maybe_large_logits, shapes

ref = importlib.import_module("refimpl.attention.reference")

NEVER = 1 << 62  # a work threshold no problem reaches: no helper thread


def same(a, b) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


@st.composite
def problems(draw):
    rng, batch, hq, hkv, sq, sk, d = shapes(draw)
    data = draw(st.sampled_from(["normal", "ties", "overflow"]))
    if data == "ties":  # integer-like data: exact ties, equal logits, zero products
        q = (rng.integers(-2, 3, batch + (hq, sq, d)) * 0.5).astype(np.float32)
        k = rng.integers(-2, 3, batch + (hkv, sk, d)).astype(np.float32)
        v = (rng.integers(-8, 9, batch + (hkv, sk, d)) * 2.0**-3).astype(np.float32)
    else:
        q = rng.standard_normal(batch + (hq, sq, d)).astype(np.float32)
        k = rng.standard_normal(batch + (hkv, sk, d)).astype(np.float32)
        v = rng.standard_normal(batch + (hkv, sk, d)).astype(np.float32)
    if data == "overflow":
        # some logits beyond float32's range: +inf (row NaN, LSE +inf) or -inf (weighs
        # nothing), in a few rows only
        rows = rng.random(batch + (hq, sq, 1)) < 0.3
        q = np.where(rows, q * np.float32(2.0**100), q).astype(np.float32)
        k = (k * np.float32(2.0**30)).astype(np.float32)
    opts = mask_options(draw, rng, batch, hq, sq, sk)
    q, k, v = maybe_large_logits(draw, q, k, v, opts)
    chunk = draw(st.sampled_from([1, 7, 64, 1 << 18]))  # scores per chunk
    pv_keys = draw(st.sampled_from([1, 3, 4, 512]))  # keys per partial product
    return q, k, v, opts, chunk, pv_keys


def plain(q, k, v, **opts):
    prob = prepare(q, k, v, **opts)
    out, lse, _, _ = ref._forward(prob, "exact", fast=False)
    return prob.restore(out), prob.restore(lse)


@settings(max_examples=80, deadline=None)
@given(problems(), st.booleans())
def test_fast_forward_gives_plain_bytes(p, overlap):
    q, k, v, opts, chunk, pv_keys = p
    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(ref, "_OVERLAP_MIN_WORK", 0 if overlap else NEVER)
        mp.setattr(ref, "_FAST_CHUNK_SCORES", chunk)
        mp.setattr(ref, "_PV_KEYS", pv_keys)
        got = attention(q, k, v, return_lse=True, **opts)
    finally:
        mp.undo()
    want = plain(q, k, v, **opts)
    assert same(got[0], want[0]) and same(got[1], want[1])


def test_fast_forward_meets_overflowing_rows_and_masked_rows():
    """A row with a +inf logit is NaN with LSE +inf, a fully masked row 0 with LSE
    -inf, the others are finite, and all of it equals the plain loop (a chunk with a
    +inf row is handed to it)."""
    rng = np.random.default_rng(3)
    q = rng.standard_normal((1, 6, 8)).astype(np.float32)
    k = rng.standard_normal((1, 9, 8)).astype(np.float32)
    v = rng.standard_normal((1, 9, 8)).astype(np.float32)
    q[0, 2] = 2.0**100
    k[0, 4] = 2.0**100  # q_2 . k_4 = 8 * 2^200: +inf
    kpm = np.ones(9, bool)
    qpm = np.ones(6, bool)
    qpm[5] = False
    out, lse = attention(q, k, v, return_lse=True, key_padding_mask=kpm,
                         query_padding_mask=qpm)
    assert np.isnan(out[0, 2]).all() and lse[0, 2] == np.inf
    assert (out[0, 5] == 0).all() and lse[0, 5] == -np.inf
    assert np.isfinite(np.delete(out[0], [2], axis=0)).all()
    want = plain(q, k, v, key_padding_mask=kpm, query_padding_mask=qpm)
    assert same(out, want[0]) and same(lse, want[1])


@pytest.mark.parametrize("k, kb", [(1, 512), (7, 3), (512, 512), (4096, 512), (5000, 512)])
@example(seed=0)
@given(seed=st.integers(0, 2**32 - 1))
@settings(max_examples=10, deadline=None)
def test_partial_products_within_their_bound(k, kb, seed):
    """The float64 product of float32 values formed as partial products of kb terms
    added one after the other is within ``_blocked_scale(k, kb) ||a|| ||b||`` of the
    exact sum (``math.fsum`` of the exact float64 products, correctly rounded, so
    within 2^-53 of it relatively): the width the screen of P V relies on. Data with
    heavy cancellation: the error is largest relative to the result there."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((4, k)).astype(np.float32)
    b = rng.standard_normal((k, 3)).astype(np.float32)
    a[1] = np.abs(a[1])
    b[:, 1] = np.where(np.arange(k) % 2 == 0, 1.0, -1.0).astype(np.float32)
    a[2] = (np.round(a[2] * 4096) * 2.0**-12 + 2.0**20).astype(np.float32)  # large, cancels
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    got = np.matmul(a64[:, :kb], b64[:kb])
    for j0 in range(kb, k, kb):
        got += np.matmul(a64[:, j0:j0 + kb], b64[j0:j0 + kb])
    scale = ref._blocked_scale(k, kb)
    na = np.sqrt(np.sum(a64 * a64, axis=1))
    nb = np.sqrt(np.sum(b64 * b64, axis=0))
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            exact = math.fsum((a64[i] * b64[:, j]).tolist())
            err = abs(got[i, j] - exact) + abs(exact) * 2.0**-53
            # the bound without the 3u of room for the screen's own rounding
            assert err <= scale * na[i] * nb[j]
            naive_len = (min(k, kb) + -(-k // kb)) * 2.0**-53 * float(
                np.sum(np.abs(a64[i] * b64[:, j])))
            assert err <= 1.01 * naive_len + 2.0**-1000


def test_blocked_scale_by_hand():
    """k = 4096 in partial products of 512: 8 sums, length 512 + 8 = 520 in the width
    (1.001 * 520 + 3) u, times 1 + (4 * 4096 + 16) u; a single block is the plain
    width of length k + 1."""
    u = 2.0**-53
    assert ref._blocked_scale(4096, 512) == (1 + 16400 * u) * ((1.001 * 520 + 3) * u)
    assert ref._blocked_scale(100, 512) == (1 + 416 * u) * ((1.001 * 101 + 3) * u)


class LazyHelper:
    """A ProductThread whose helper never starts a task: every task stays pending
    until the calling thread takes it over (the take-over path, deterministically)."""

    overlap = True
    submitted = 0

    def __init__(self, enabled=True):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def submit(self, fn):
        from concurrent.futures import Future
        LazyHelper.submitted += 1
        return Future()

    @staticmethod
    def wait(future):
        return future.result()


@pytest.mark.parametrize("module", ["refimpl.attention.reference", "refimpl.attention.flash_v2"])
def test_tasks_taken_over_by_the_caller_give_plain_bytes(monkeypatch, module):
    """Every product the helper has not started is run by the calling thread: for
    the reference all its tasks, for flash_v2 its Q K^T products (its P V products
    would wait forever here, so flash_v2 gets a helper that runs those at once)."""
    from refimpl.attention import flash_v2
    mod = importlib.import_module(module)
    rng = np.random.default_rng(5)
    q = rng.standard_normal((2, 2, 13, 8)).astype(np.float32)
    k = rng.standard_normal((2, 1, 11, 8)).astype(np.float32)
    v = rng.standard_normal((2, 1, 11, 8)).astype(np.float32)
    opts = dict(causal=True, softcap=5.0, alibi_slopes=np.float32([0.5, 0.25]))
    LazyHelper.submitted = 0
    if module.endswith("reference"):
        monkeypatch.setattr(mod, "ProductThread", LazyHelper)
        monkeypatch.setattr(mod, "_FAST_CHUNK_SCORES", 40)
        monkeypatch.setattr(mod, "_PV_KEYS", 4)
        got = attention(q, k, v, return_lse=True, **opts)
        want = plain(q, k, v, **opts)
    else:
        class QkLazy(LazyHelper):
            def submit(self, fn):
                from concurrent.futures import Future
                f = super().submit(fn)
                cells = [c.cell_contents for c in fn.__closure__ or ()]
                if any(getattr(c, "__name__", "") == "pv_product" for c in cells):
                    f.set_result(fn())
                return f
        monkeypatch.setattr(mod, "ProductThread", QkLazy)
        got = flash_v2(q, k, v, block=(4, 3), **opts)
        want = flash_v2(q, k, v, block=(4, 3), implementation="plain", **opts)
    assert LazyHelper.submitted > 2
    assert same(got[0], want[0]) and same(got[1], want[1])
