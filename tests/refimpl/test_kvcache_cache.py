"""Deterministic tests of the paged KV cache: allocation order, copy-on-write, errors,
atomic failure, stats and FlashInfer's CSR export (hand-derived expectations)."""
from __future__ import annotations

import numpy as np
import pytest

from refimpl.kvcache import BlockPool, OutOfBlocksError, PagedKVCache


def kv(n: int, heads: int = 2, dim: int = 3, start: int = 0, dtype=np.float32):
    """Distinct exact values per (token, head, lane)."""
    k = (np.arange(start * heads * dim, (start + n) * heads * dim)
         .reshape(n, heads, dim).astype(dtype))
    return k, -k - 1


def snapshot(c: PagedKVCache):
    return ({s: c.block_table(s) for s in c.sequences()},
            {s: c.length(s) for s in c.sequences()},
            list(c.pool.ref_counts), c.pool.free_queue(), c.stats(), c.kv.copy())


def assert_same(a, b) -> None:
    assert a[:-1] == b[:-1]
    assert np.array_equal(a[-1], b[-1])


# -- block pool ------------------------------------------------------------------------
def test_pool_allocates_from_head_and_frees_to_tail() -> None:
    p = BlockPool(5, 16)
    assert p.allocate(2) == [0, 1]
    assert p.allocate(1) == [2]
    p.release([1, 0])
    assert p.free_queue() == [3, 4, 1, 0]
    assert p.allocate(3) == [3, 4, 1]
    with pytest.raises(OutOfBlocksError):
        p.allocate(2)
    assert p.free_queue() == [0]


def test_pool_release_errors_are_atomic() -> None:
    p = BlockPool(3, 4)
    p.allocate(2)
    with pytest.raises(ValueError, match="block 1 released more times"):
        p.release([0, 1, 1])
    assert p.ref_counts == [1, 1, 0] and p.free_queue() == [2]
    with pytest.raises(ValueError, match="out of range"):
        p.release([3])
    with pytest.raises(ValueError, match="positive int"):
        BlockPool(0, 16)
    with pytest.raises(ValueError, match="block_size"):
        BlockPool(4, 0)


# -- basic cache behaviour ---------------------------------------------------------------
@pytest.mark.parametrize("layout", ["NHD", "HND"])
def test_append_fills_pages_in_order_and_gathers(layout: str) -> None:
    c = PagedKVCache(8, 4, 2, 3, layout=layout)
    c.add_sequence("a")
    k, v = kv(10)
    c.append("a", k[:3], v[:3])
    c.append("a", k[3:4], v[3:4])
    c.append("a", k[4:], v[4:])
    assert c.block_table("a") == [0, 1, 2]
    assert c.length("a") == 10
    gk, gv = c.gather("a")
    assert np.array_equal(gk, k) and np.array_equal(gv, v)
    # token 9 is slot 1 of logical block 2 = physical block 2
    if layout == "NHD":
        assert c.kv.shape == (8, 2, 4, 2, 3)
        assert np.array_equal(c.kv[2, 0, 1], k[9]) and np.array_equal(c.kv[2, 1, 1], v[9])
    else:
        assert c.kv.shape == (8, 2, 2, 4, 3)
        assert np.array_equal(c.kv[2, 0, :, 1], k[9])
        assert np.array_equal(c.kv[2, 1, :, 1], v[9])


def test_block_taken_only_when_last_is_full() -> None:
    c = PagedKVCache(4, 4, 1, 1)
    c.add_sequence(0)
    for n in range(1, 13):
        c.append(0, *kv(1, 1, 1, n))
        assert len(c.block_table(0)) == -(-n // 4)
    assert c.stats().free_blocks == 1


def test_interleaved_sequences_get_blocks_in_request_order() -> None:
    c = PagedKVCache(6, 2, 1, 1)
    for s in "xy":
        c.add_sequence(s)
    c.append("x", *kv(3, 1, 1))  # blocks 0, 1
    c.append("y", *kv(1, 1, 1))  # block 2
    c.append("x", *kv(2, 1, 1))  # fills block 1, takes 3
    c.append("y", *kv(2, 1, 1))  # fills block 2, takes 4
    assert c.block_table("x") == [0, 1, 3] and c.block_table("y") == [2, 4]
    c.free("x")  # released last block first
    assert c.pool.free_queue() == [5, 3, 1, 0]


def test_fork_shares_and_copy_on_write_protects_sibling() -> None:
    c = PagedKVCache(8, 4, 2, 3)
    c.add_sequence("p")
    k, v = kv(6)
    c.append("p", k, v)                       # blocks [0, 1], block 1 holds 2 tokens
    c.fork("p", "c")
    assert c.block_table("c") == [0, 1]
    assert [c.ref_count(b) for b in (0, 1)] == [2, 2]
    assert c.stats().free_blocks == 6         # no block taken by fork
    ck, cv = kv(1, start=100)
    copies = c.append("c", ck, cv)            # shared partial block: copy first
    assert copies == [(1, 2)]
    assert c.block_table("c") == [0, 2] and c.block_table("p") == [0, 1]
    assert [c.ref_count(b) for b in (0, 1, 2)] == [2, 1, 1]
    gk, _ = c.gather("c")
    assert np.array_equal(gk[:6], k) and np.array_equal(gk[6], ck[0])
    pk, _ = c.gather("p")
    assert np.array_equal(pk, k)
    # the parent is now the only holder of block 1: it appends in place
    pk2, pv2 = kv(1, start=200)
    assert c.append("p", pk2, pv2) == []
    assert c.block_table("p") == [0, 1]
    assert np.array_equal(c.gather("c")[0][6], ck[0])  # no leak into the child
    assert np.array_equal(c.gather("p")[0][6], pk2[0])


def test_fork_on_full_last_block_needs_no_copy() -> None:
    c = PagedKVCache(8, 4, 1, 1)
    c.add_sequence(0)
    c.append(0, *kv(8, 1, 1))
    c.fork(0, 1)
    assert c.append(1, *kv(1, 1, 1)) == []
    assert c.block_table(1) == [0, 1, 2]


def test_free_returns_blocks_and_keeps_shared_ones() -> None:
    c = PagedKVCache(4, 4, 1, 1)
    c.add_sequence(0)
    c.append(0, *kv(5, 1, 1))
    c.fork(0, 1)
    c.free(0)
    assert c.stats().used_blocks == 2 and c.block_table(1) == [0, 1]
    c.free(1)
    assert c.stats().used_blocks == 0
    assert c.pool.free_queue() == [2, 3, 1, 0]


# -- errors and atomicity ------------------------------------------------------------
def test_out_of_blocks_is_atomic() -> None:
    c = PagedKVCache(3, 4, 2, 3)
    c.add_sequence(0)
    c.append(0, *kv(3))
    before = snapshot(c)
    assert not c.can_append(0, 10)           # 13 tokens need 4 blocks, 3 exist
    with pytest.raises(OutOfBlocksError) as info:
        c.append(0, *kv(10))
    assert (info.value.needed, info.value.free) == (3, 2)
    assert_same(before, snapshot(c))
    assert c.can_append(0, 9)
    c.append(0, *kv(9))
    assert c.length(0) == 12


def test_copy_on_write_needs_a_block() -> None:
    c = PagedKVCache(2, 4, 1, 1)
    c.add_sequence(0)
    c.append(0, *kv(5, 1, 1))
    c.fork(0, 1)
    before = snapshot(c)
    assert not c.can_append(1, 1)
    with pytest.raises(OutOfBlocksError):
        c.append(1, *kv(1, 1, 1))
    assert_same(before, snapshot(c))


@pytest.mark.parametrize("k, v, exc, msg", [
    (np.zeros((1, 2, 3), np.float64), np.zeros((1, 2, 3), np.float32), TypeError,
     "k has dtype float64"),
    (np.zeros((1, 2, 3), np.float32), np.zeros((1, 2, 3), np.float16), TypeError,
     "v has dtype float16"),
    (np.zeros((1, 3, 3), np.float32), np.zeros((1, 3, 3), np.float32), ValueError,
     r"k must have shape \(n, 2, 3\)"),
    (np.zeros((2, 3), np.float32), np.zeros((2, 3), np.float32), ValueError,
     "k must have shape"),
    (np.zeros((2, 2, 3), np.float32), np.zeros((1, 2, 3), np.float32), ValueError,
     "k has 2 tokens but v has 1"),
    ([[[0.0] * 3] * 2], np.zeros((1, 2, 3), np.float32), TypeError, "numpy array"),
])
def test_bad_kv_is_rejected_without_change(k, v, exc, msg) -> None:
    c = PagedKVCache(4, 4, 2, 3)
    c.add_sequence(0)
    c.append(0, *kv(2))
    before = snapshot(c)
    with pytest.raises(exc, match=msg):
        c.append(0, k, v)
    assert_same(before, snapshot(c))


def test_unknown_freed_and_duplicate_ids() -> None:
    c = PagedKVCache(4, 4, 1, 1)
    with pytest.raises(ValueError, match="unknown sequence 7"):
        c.append(7, *kv(1, 1, 1))
    c.add_sequence(7)
    with pytest.raises(ValueError, match="already exists"):
        c.add_sequence(7)
    c.free(7)
    for op in (lambda: c.free(7), lambda: c.length(7), lambda: c.block_table(7),
               lambda: c.gather(7), lambda: c.fork(7, 8), lambda: c.to_csr([7]),
               lambda: c.append(7, *kv(1, 1, 1))):
        with pytest.raises(ValueError, match="sequence 7 was freed"):
            op()
    c.add_sequence(7)  # a freed id may be reused
    c.add_sequence(8)
    with pytest.raises(ValueError, match="sequence 8 already exists"):
        c.fork(7, 8)
    with pytest.raises(TypeError, match="hashable"):
        c.add_sequence([1])


def test_bad_constructor_arguments() -> None:
    with pytest.raises(ValueError, match="layout"):
        PagedKVCache(4, 4, 1, 1, layout="HDN")
    with pytest.raises(TypeError, match="floating"):
        PagedKVCache(4, 4, 1, 1, dtype=np.int32)
    with pytest.raises(ValueError, match="num_kv_heads"):
        PagedKVCache(4, 4, 0, 1)
    with pytest.raises(ValueError, match="num_blocks"):
        PagedKVCache(0, 4, 1, 1)


def test_token_ids_must_agree_with_prompt() -> None:
    c = PagedKVCache(4, 4, 1, 1, enable_prefix_caching=True)
    c.add_sequence(0, [5, 6, 7])
    before = snapshot(c)
    with pytest.raises(ValueError, match="disagree"):
        c.append(0, *kv(2, 1, 1), token_ids=[5, 9])
    with pytest.raises(ValueError, match="2 ids for 1 tokens"):
        c.append(0, *kv(1, 1, 1), token_ids=[5, 6])
    with pytest.raises(TypeError, match=r"token_ids\[0\]"):
        c.append(0, *kv(1, 1, 1), token_ids=[5.0])
    assert_same(before, snapshot(c))


# -- stats ----------------------------------------------------------------------------
def test_stats_hand_derived() -> None:
    c = PagedKVCache(10, 16, 1, 1)
    s = c.stats()
    assert (s.used_blocks, s.free_blocks, s.tokens, s.internal_waste, s.utilization) == (
        0, 10, 0, 0, 1.0)
    c.add_sequence("a")
    c.append("a", *kv(45, 1, 1))     # 3 blocks, 48 slots, 45 written
    c.fork("a", "b")                  # shares all 3
    s = c.stats()
    assert s.used_blocks == 3 and s.free_blocks == 7 and s.shared_blocks == 3
    assert s.tokens == 90 and s.stored_tokens == 45 and s.internal_waste == 3
    assert s.utilization == 45 / 48
    c.append("b", *kv(1, 1, 1))       # copy-on-write: block 3 holds 13 + 1
    s = c.stats()
    assert s.used_blocks == 4 and s.shared_blocks == 2 and s.tokens == 91
    assert s.stored_tokens == 45 + 14 and s.internal_waste == 64 - 59
    assert s.sequences == 2 and s.cached_blocks == 0


def test_300_tokens_waste_4_slots() -> None:
    # 300 tokens in 16-token pages: ceil(300 / 16) = 19 pages = 304 slots
    c = PagedKVCache(32, 16, 1, 1)
    c.add_sequence("C")
    c.append("C", *kv(300, 1, 1))
    s = c.stats()
    assert len(c.block_table("C")) == 19
    assert s.internal_waste == 4 and s.used_blocks * 16 == 304


# -- CSR export -------------------------------------------------------------------------
def test_to_csr_flashinfer_convention() -> None:
    c = PagedKVCache(16, 16, 1, 1)
    for i, n in enumerate([45, 8, 25, 22, 32]):
        c.add_sequence(i)
        c.append(i, *kv(n, 1, 1))
    indptr, indices, last = c.to_csr([0, 1, 2, 3])
    for a in (indptr, indices, last):
        assert a.dtype == np.int32
    assert indptr.tolist() == [0, 3, 4, 6, 8]
    assert last.tolist() == [13, 8, 9, 6]
    assert indices.tolist() == sum((c.block_table(i) for i in range(4)), [])
    indptr, indices, last = c.to_csr([4])
    assert indptr.tolist() == [0, 2] and last.tolist() == [16]
    assert indices.tolist() == c.block_table(4)
    # seq_len = page_size * (pages - 1) + last_page_len, for any order of ids
    ids = [3, 4, 0]
    indptr, indices, last = c.to_csr(ids)
    pages = np.diff(indptr)
    assert (16 * (pages - 1) + last).tolist() == [c.length(i) for i in ids]


def test_to_csr_rejects_empty_sequences() -> None:
    c = PagedKVCache(4, 4, 1, 1)
    c.add_sequence(0)
    with pytest.raises(ValueError, match="no tokens"):
        c.to_csr([0])
    indptr, indices, last = c.to_csr([])
    assert indptr.tolist() == [0] and indices.size == 0 and last.size == 0


def test_can_add_counts_blocks_and_watermark() -> None:
    c = PagedKVCache(10, 16, 1, 1)
    assert c.can_add(160) and not c.can_add(161)
    assert c.can_add(144, watermark=0.1) and not c.can_add(145, watermark=0.1)
    with pytest.raises(ValueError, match="watermark"):
        c.can_add(1, watermark=1.0)


def test_can_append_refuses_a_negative_count() -> None:
    c = PagedKVCache(2, 2, 2, 3)
    c.add_sequence(0)
    assert c.can_append(0, 4) and not c.can_append(0, 5)
    with pytest.raises(ValueError, match="non-negative"):
        c.can_append(0, -1)


def test_watermark_is_rounded_down_to_whole_blocks_as_in_vllm_v0() -> None:
    # 150 blocks, 1%: int(1.5) = 1 block kept free
    c = PagedKVCache(150, 1, 1, 1)
    assert c.can_add(149, watermark=0.01)           # 150 - 149 = 1 >= 1
    assert not c.can_add(150, watermark=0.01)       # 0 < 1
    assert c.can_add(150, watermark=0.0)
