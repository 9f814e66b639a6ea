"""paged_attention equals flash_v2 on the gathered K/V with B_c = page size, bit for
bit (out, LSE and the traffic counts), for scattered tables, ragged last pages, shared
(forked) pages, GQA/MQA, both layouts and every masking option."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refimpl.attention import attention, flash_v2
from refimpl.kvcache import PagedKVCache, paged_attention

OPTIONS = [
    {},
    {"causal": True},
    {"causal": True, "causal_alignment": "top_left"},
    {"window": (3, 0)},
    {"window": (2, 1), "causal_alignment": "top_left"},
    {"softcap": 2.5, "scale": 0.3},
    {"alibi": True, "causal": True},
]


def draw(rng, shape, dtype):
    """Normal values rounded to float32 (and to ``dtype``), so any cache dtype holds
    float32 values."""
    return rng.standard_normal(shape).astype(np.float32).astype(dtype)


def fill(rng, layout, page, hkv, d, lengths, dtype=np.float32, fork=False):
    """A cache whose sequences grow in random interleaved chunks, after other traffic
    scrambled the free queue, so tables are scattered; with ``fork``, sequence 0 is
    forked half way and both branches grow (copy-on-write, shared pages)."""
    total = sum(-(-n // page) for n in lengths) * 2 + 8
    c = PagedKVCache(total, page, hkv, d, dtype=dtype, layout=layout)
    c.add_sequence("noise")
    c.append("noise", *[draw(rng, (3 * page, hkv, d), dtype)] * 2)
    ids = list(range(len(lengths)))
    for i in ids:
        c.add_sequence(i)
    target = dict(zip(ids, lengths))
    if fork:
        half = lengths[0] // 2
        if half:
            c.append(0, *(draw(rng, (half, hkv, d), dtype) for _ in range(2)))
        c.fork(0, "fork")
        target["fork"] = lengths[0] + int(rng.integers(0, 5))
    c.free("noise")
    while any(c.length(s) < n for s, n in target.items()):
        s = [s for s, n in target.items() if c.length(s) < n]
        s = s[int(rng.integers(len(s)))]
        n = min(target[s] - c.length(s), int(rng.integers(1, page + 3)))
        c.append(s, *(draw(rng, (n, hkv, d), dtype) for _ in range(2)))
    return c, list(target)


def flash_on_gathered(q_b, c, sid, block_q, opts):
    k, v = c.gather(sid)
    k = k.transpose(1, 0, 2)[None].astype(np.float32)
    v = v.transpose(1, 0, 2)[None].astype(np.float32)
    return flash_v2(q_b, k, v, block=(block_q, c.block_size), **opts)


def check(c, seqs, q, block_q, opts):
    out, lse, stats = paged_attention(q, c, seqs, block_q=block_q, **opts)
    assert out.dtype == lse.dtype == np.float32
    assert out.shape == q.shape[:3] + (c.head_dim,) and lse.shape == q.shape[:3]
    total = None
    for b, sid in enumerate(seqs):
        o_opts = dict(opts)
        if "alibi_slopes" in opts and np.ndim(opts["alibi_slopes"]) == 2:
            o_opts["alibi_slopes"] = opts["alibi_slopes"][b]
        o, l_, st_ = flash_on_gathered(q[b:b + 1], c, sid, block_q, o_opts)
        assert out[b].tobytes() == o[0].tobytes(), f"sequence {sid!r}: out differs"
        assert lse[b].tobytes() == l_[0].tobytes(), f"sequence {sid!r}: lse differs"
        if total is None:
            total = st_
        else:
            total.add(st_)
    assert stats == total


@pytest.mark.slow
@settings(max_examples=60)
@given(seed=st.integers(0, 2**32 - 1), page=st.sampled_from([1, 2, 4, 8, 16]),
       hkv=st.sampled_from([1, 2]), group=st.sampled_from([1, 2, 3]),
       d=st.sampled_from([1, 4, 8]),
       lengths=st.lists(st.integers(1, 40), min_size=1, max_size=4),
       sq=st.integers(1, 5), block_q=st.sampled_from([1, 2, 128]),
       layout=st.sampled_from(["NHD", "HND"]), opt=st.sampled_from(OPTIONS),
       fork=st.booleans())
def test_paged_equals_flash_v2_bitwise(seed, page, hkv, group, d, lengths, sq, block_q,
                                        layout, opt, fork) -> None:
    rng = np.random.default_rng(seed)
    c, seqs = fill(rng, layout, page, hkv, d, lengths, fork=fork)
    hq = hkv * group
    q = rng.standard_normal((len(seqs), hq, sq, d)).astype(np.float32)
    opts = {k: v for k, v in opt.items() if k != "alibi"}
    if opt.get("alibi"):
        opts["alibi_slopes"] = rng.uniform(0, 1, (len(seqs), hq)).astype(np.float32)
    check(c, seqs, q, block_q, opts)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_ragged_last_pages_gqa_decode(dtype) -> None:
    # the CSR example's lengths: 3, 1, 2, 2 pages of 16 with last lengths 13, 8, 9, 6
    rng = np.random.default_rng(1)
    c, seqs = fill(rng, "NHD", 16, 2, 8, [45, 8, 25, 22], dtype=dtype)
    q = rng.standard_normal((4, 8, 1, 8)).astype(np.float32)   # decode, 4 q per kv head
    check(c, seqs, q, 128, {"causal": True})
    # against the exact reference too (an independent path through the definition)
    out, _ = paged_attention(q, c, seqs, return_lse=False)
    for b, sid in enumerate(seqs):
        k, v = c.gather(sid)
        ref = attention(q[b:b + 1], k.transpose(1, 0, 2)[None].astype(np.float32),
                        v.transpose(1, 0, 2)[None].astype(np.float32))
        np.testing.assert_allclose(out[b], ref[0], rtol=1e-5, atol=1e-6)


def test_decode_query_sees_all_keys_and_chunked_prefill_is_causal() -> None:
    # hand-made: one KV head, d = 1, K = 0 so every visible key has weight 1 / n
    c = PagedKVCache(8, 4, 1, 1)
    c.add_sequence("s")
    v = np.arange(1, 11, dtype=np.float32).reshape(10, 1, 1)
    c.append("s", np.zeros_like(v), v)
    q = np.ones((1, 1, 2, 1), np.float32)
    out, lse, _ = paged_attention(q, c, ["s"], causal=True)
    # bottom-right: row 0 sees keys 0..8 (mean 5), row 1 sees keys 0..9 (mean 5.5)
    assert out[0, 0, :, 0].tolist() == [5.0, 5.5]
    assert np.allclose(lse[0, 0], np.log([9.0, 10.0]), rtol=1e-6)


def test_errors() -> None:
    c = PagedKVCache(8, 4, 2, 4)
    c.add_sequence(0)
    c.append(0, *[np.ones((5, 2, 4), np.float32)] * 2)
    with pytest.raises(ValueError, match=r"len\(seq_ids\)=1"):
        paged_attention(np.ones((2, 2, 1, 4), np.float32), c, [0])
    with pytest.raises(ValueError, match="head dim"):
        paged_attention(np.ones((1, 2, 1, 8), np.float32), c, [0])
    with pytest.raises(ValueError, match="multiple of key/value heads"):
        paged_attention(np.ones((1, 3, 1, 4), np.float32), c, [0])
    with pytest.raises(ValueError, match="unknown sequence 5"):
        paged_attention(np.ones((1, 2, 1, 4), np.float32), c, [5])
    with pytest.raises(ValueError, match="alibi_slopes"):
        paged_attention(np.ones((1, 2, 1, 4), np.float32), c, [0], alibi_slopes=[1.0])
    with pytest.raises(ValueError, match="block_q"):
        paged_attention(np.ones((1, 2, 1, 4), np.float32), c, [0], block_q=0)
    c64 = PagedKVCache(4, 4, 1, 1, dtype=np.float64)
    c64.add_sequence(0)
    c64.append(0, np.full((2, 1, 1), 0.1), np.ones((2, 1, 1)))
    with pytest.raises(ValueError, match="not a float32 value at token 0"):
        paged_attention(np.ones((1, 1, 1, 1), np.float32), c64, [0])
    c64.append(0, np.ones((1, 1, 1)), np.full((1, 1, 1), np.inf))
    c64.free(0)
    c64.add_sequence(1)
    c64.append(1, np.ones((3, 1, 1)), np.array([[[1.0]], [[np.nan]], [[1.0]]]))
    with pytest.raises(ValueError, match="V of sequence 1 holds a non-finite value at "
                                         "token 1"):
        paged_attention(np.ones((1, 1, 1, 1), np.float32), c64, [1])
