"""Hostile inputs to the paged KV cache: counts that are not ints, keys without a UTF-8
encoding, pools beyond the size limit; each refused cleanly and leaving state alone."""
from __future__ import annotations

import time

import numpy as np
import pytest

from refimpl.kvcache import BlockPool, PagedKVCache, block_hash, hash_blocks
from refimpl.kvcache.prefix import ROOT_HASH, check_extra_keys


def cache_with_cached_blocks() -> PagedKVCache:
    """Two freed full blocks still holding prefix data (LRU: block 1 first, as the
    tail of the sequence is released first)."""
    c = PagedKVCache(4, 2, 1, 1, enable_prefix_caching=True)
    c.add_sequence("a", [1, 2, 3, 4])
    k = np.arange(4, dtype=np.float32).reshape(4, 1, 1)
    c.append("a", k, k)
    c.free("a")
    assert c.stats().cached_blocks == 2
    return c


@pytest.mark.parametrize("bad", [0.5, 1.0, True, np.bool_(True), "x", b"1", [1], 1 + 0j])
def test_evict_counts_are_ints(bad) -> None:
    c = cache_with_cached_blocks()
    before = c.pool.block_hashes.copy()
    with pytest.raises(TypeError, match="num_blocks must be an int"):
        c.evict(bad)
    with pytest.raises(TypeError, match="n must be an int"):
        c.pool.evict(bad)
    assert c.pool.block_hashes == before and c.stats().evictions == 0


def test_evict_negative_is_refused_and_ints_work() -> None:
    c = cache_with_cached_blocks()
    with pytest.raises(ValueError, match="num_blocks must be a non-negative int, got -1"):
        c.evict(-1)
    with pytest.raises(ValueError, match="n must be a non-negative int"):
        c.pool.evict(-2)
    assert c.evict(np.int64(0)) == []
    assert c.evict(np.uint8(1)) == [1]  # least recently freed first
    assert c.evict(None) == [0]


@pytest.mark.parametrize("bad", [0.5, True, "2"])
def test_pool_allocate_and_block_ids_are_ints(bad) -> None:
    pool = BlockPool(4, 2)
    with pytest.raises(TypeError, match="n must be an int"):
        pool.allocate(bad)
    assert pool.num_free == 4
    pool.allocate(2)
    with pytest.raises(ValueError, match="block id"):
        pool.touch(True)  # not block 1
    assert pool.ref_counts == [1, 1, 0, 0]


@pytest.mark.parametrize("bad", ["x", None, [0.1]])
def test_watermark_is_a_real_number(bad) -> None:
    c = PagedKVCache(4, 2, 1, 1)
    with pytest.raises(TypeError, match="watermark must be a real number"):
        c.can_add(3, watermark=bad)


@pytest.mark.parametrize("key", ["\ud800", "ok\udfff", "\udc80x"])
def test_extra_keys_without_utf8_are_refused(key) -> None:
    with pytest.raises(ValueError, match=r"extra_keys\[1\] = .* is not valid Unicode text"):
        check_extra_keys(("tenant", key))
    with pytest.raises(ValueError, match="not valid Unicode"):
        block_hash(ROOT_HASH, [1, 2], (1, key))
    with pytest.raises(ValueError, match="not valid Unicode"):
        hash_blocks([1, 2], 2, ("a", key))
    c = PagedKVCache(4, 2, 1, 1, enable_prefix_caching=True)
    with pytest.raises(ValueError, match="not valid Unicode"):
        c.add_sequence("s", [1, 2, 3], extra_keys=("a", key))
    assert "s" not in c and c.stats().used_blocks == 0


def test_valid_non_ascii_keys_still_hash() -> None:
    # a surrogate pair written as one character is valid text: its UTF-8 is 4 bytes
    assert block_hash(ROOT_HASH, [1], ("\U0001F600",)) != block_hash(ROOT_HASH, [1], ("",))


@pytest.mark.parametrize("args, what", [
    ((10**7, 10**4, 8, 128), "the K/V storage"),
    ((2**20, 2**10, 1, 1), "the K/V storage"),
    ((2**26, 1, 1, 1, np.float16), "the pool's per-block bookkeeping"),
])
def test_pools_beyond_the_size_limit_are_refused_at_once(args, what) -> None:
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=rf"num_blocks: {what}.*over the limit of "
                                         r"4294967296 bytes"):
        PagedKVCache(*args)
    assert time.perf_counter() - t0 < 0.5


def test_pool_size_limit_is_tied_to_the_storage_bytes() -> None:
    # 2^19 blocks x 2 x 2^10 slots: 2^30 elements, 4 GiB in float32 (at the limit), 8 GiB
    # in float64 (over it)
    with pytest.raises(ValueError, match=r"1073741824 elements x 8 bytes"):
        PagedKVCache(2**19, 2**10, 1, 1, dtype=np.float64)
    with pytest.raises(ValueError, match="bookkeeping"):
        BlockPool(2**26, 1)
    with pytest.raises(TypeError, match="num_blocks must be an int"):
        PagedKVCache(4.0, 2, 1, 1)
