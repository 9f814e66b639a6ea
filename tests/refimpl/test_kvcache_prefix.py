"""Prefix caching: the hash encoding (re-derived with hashlib), stability across
processes, and a pinned scenario of hits, misses and LRU eviction."""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import numpy as np
import pytest

from refimpl.kvcache import ROOT_HASH, PagedKVCache, block_hash, hash_blocks


def kv(n: int):
    k = np.arange(n, dtype=np.float32).reshape(n, 1, 1)
    return k, -k


def test_block_hash_matches_documented_encoding() -> None:
    le = lambda n, w=8: n.to_bytes(w, "little", signed=True)  # noqa: E731
    want = hashlib.sha256(
        ROOT_HASH + b"T" + le(3) + le(1) + le(-2) + le(2**40)
        + b"K" + le(3) + b"s" + le(5) + b"tenan"
        + b"i" + le(16) + le(7, 16) + b"b" + le(2) + b"\x00\xff"
    ).digest()
    assert block_hash(ROOT_HASH, [1, -2, 2**40], ("tenan", 7, b"\x00\xff")) == want
    assert ROOT_HASH == hashlib.sha256(b"refimpl.kvcache prefix root").digest()


def test_hash_chain_names_the_whole_prefix() -> None:
    a = hash_blocks(list(range(12)), 4)
    assert len(a) == 3
    assert a[1] == block_hash(a[0], [4, 5, 6, 7])
    b = hash_blocks([99] + list(range(1, 12)), 4)
    assert all(x != y for x, y in zip(a, b))   # an early change reaches every block
    assert hash_blocks(list(range(11)), 4) == a[:2]   # partial tail not hashed
    # extra keys, and their types, keep otherwise equal blocks apart
    assert block_hash(ROOT_HASH, [1], (1,)) != block_hash(ROOT_HASH, [1], ("1",))
    assert block_hash(ROOT_HASH, [1], ("a", "b")) != block_hash(ROOT_HASH, [1], ("ab",))
    with pytest.raises(TypeError, match="extra_keys"):
        block_hash(ROOT_HASH, [1], (1.5,))
    with pytest.raises(ValueError, match="int64"):
        block_hash(ROOT_HASH, [2**63])


@pytest.mark.slow
def test_hash_is_stable_across_processes() -> None:
    code = ("from refimpl.kvcache import hash_blocks;"
            "print(hash_blocks(list(range(40)), 16, ('tenant-a', 3))[-1].hex())")
    here = hash_blocks(list(range(40)), 16, ("tenant-a", 3))[-1].hex()
    for seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        out = subprocess.run([sys.executable, "-c", code], env=env, check=True,
                             capture_output=True, text=True).stdout.strip()
        assert out == here


def test_pinned_hits_misses_and_lru_eviction() -> None:
    c = PagedKVCache(6, 4, 1, 1, enable_prefix_caching=True)
    P = list(range(10, 20))
    # A: 10 tokens -> blocks 0, 1 (full, cached), 2 (2 tokens)
    assert c.add_sequence("A", P) == 0
    c.append("A", *kv(10))
    assert c.block_table("A") == [0, 1, 2]
    # B shares A's two full blocks; 3 more tokens take block 3
    assert c.add_sequence("B", P[:8] + [7, 7, 7]) == 8
    assert c.block_table("B") == [0, 1]
    c.append("B", *kv(3))
    assert c.block_table("B") == [0, 1, 3]
    # C's whole 8-token prompt is cached, but its last token is recomputed: 1 block
    assert c.add_sequence("C", P[:8]) == 4
    c.append("C", *kv(4))
    # block 4 duplicates block 1: it carries the hash too (vLLM v1 keeps duplicates),
    # hits still go to block 1, cached first
    assert c.block_table("C") == [0, 4]
    assert c.pool.block_hashes[4] == c.pool.block_hashes[1] is not None
    assert c.pool.cached[c.pool.block_hashes[1]] == 1
    s = c.stats()
    assert (s.used_blocks, s.free_blocks, s.cached_blocks) == (5, 1, 0)
    assert (s.prefix_query_tokens, s.prefix_hit_tokens) == (29, 12)
    assert [c.ref_count(b) for b in range(6)] == [3, 2, 1, 1, 1, 0]
    for sid in "ABC":
        c.free(sid)
    # A frees 2; B frees 3 and 1; C frees 4 and 0 -> queue 5, 2, 3, 1, 4, 0
    assert c.pool.free_queue() == [5, 2, 3, 1, 4, 0]
    s = c.stats()
    assert (s.used_blocks, s.free_blocks, s.cached_blocks) == (0, 6, 3)
    # 16 uncached tokens take 5, 2, 3 and 1: block 1 (A's second block) is evicted
    # before block 0, its prefix
    c.add_sequence("D")
    c.append("D", *kv(16))
    assert c.block_table("D") == [5, 2, 3, 1]
    assert c.stats().evictions == 1 and c.stats().cached_blocks == 2
    # A's prompt again: block 0, then C's duplicate 4 now serves the second block
    assert c.add_sequence("E", P) == 8
    assert c.block_table("E") == [0, 4] and c.pool.free_queue() == []


def test_explicit_evict_is_lru() -> None:
    c = PagedKVCache(8, 2, 1, 1, enable_prefix_caching=True)
    for sid, prompt in (("x", [1, 2, 3, 4, 5]), ("y", [6, 7, 8])):
        c.add_sequence(sid, prompt)
        c.append(sid, *kv(len(prompt)))
    assert c.block_table("x") == [0, 1, 2] and c.block_table("y") == [3, 4]
    c.free("y")   # queue: 5 6 7 4 3
    c.free("x")   # queue: 5 6 7 4 3 2 1 0 ; cached: 3 (y), 1, 0 (x)
    assert c.evict(2) == [3, 1]
    assert c.stats().cached_blocks == 1
    assert c.evict() == [0]
    assert c.add_sequence("z", [1, 2, 3, 4, 5]) == 0


@pytest.mark.parametrize("keys_a, keys_b, shared", [
    ((), (), True), (("t1",), ("t1",), True), (("t1",), ("t2",), False),
    ((), ("salt",), False), ((3,), ("3",), False), ((b"lora", 1), (b"lora", 2), False),
])
def test_extra_keys_keep_caches_apart(keys_a, keys_b, shared) -> None:
    c = PagedKVCache(8, 4, 1, 1, enable_prefix_caching=True)
    prompt = list(range(9))
    c.add_sequence("a", prompt, extra_keys=keys_a)
    c.append("a", *kv(9))
    hit = c.add_sequence("b", prompt, extra_keys=keys_b)
    assert hit == (8 if shared else 0)
    assert bool(set(c.block_table("a")) & set(c.block_table("b"))) == shared


def test_fully_cached_32_token_prompt_hits_16() -> None:
    c = PagedKVCache(8, 16, 1, 1, enable_prefix_caching=True)
    c.add_sequence(0, list(range(32)))
    c.append(0, *kv(32))
    c.free(0)
    assert c.add_sequence(1, list(range(32))) == 16
    assert c.add_sequence(2, list(range(33))) == 32


def test_generated_tokens_with_ids_are_cached_too() -> None:
    c = PagedKVCache(8, 4, 1, 1, enable_prefix_caching=True)
    c.add_sequence(0, [1, 2])
    c.append(0, *kv(2))
    c.append(0, *kv(3), token_ids=[3, 4, 5])      # block 0 = 1 2 3 4 now full
    c.append(0, *kv(1))                           # unknown id: hashing stops here
    c.append(0, *kv(3), token_ids=[7, 8, 9])
    assert c.add_sequence(1, [1, 2, 3, 4, 5, 6, 7, 8, 9]) == 4
    assert c.block_table(1) == c.block_table(0)[:1]


def test_disabled_prefix_caching_never_hits() -> None:
    c = PagedKVCache(8, 4, 1, 1)
    c.add_sequence(0, list(range(9)))
    c.append(0, *kv(9))
    assert c.add_sequence(1, list(range(9))) == 0
    assert c.pool.cached == {}


def test_can_add_counts_hits_on_blocks_in_use() -> None:
    c = PagedKVCache(4, 4, 1, 1, enable_prefix_caching=True)
    prompt = list(range(9))
    c.add_sequence("a", prompt)
    c.append("a", *kv(9))                   # 3 blocks, the first 2 cached; 1 free
    assert c.can_add(prompt)                # 3 blocks - 2 hits in use = 1 new block
    assert not c.can_add(9)                 # by length alone: 3 blocks
    assert not c.can_add(list(range(1, 10)))  # no hit
    c.free("a")                              # hits would now come from the free queue
    assert c.can_add(prompt) and c.can_add(16) and not c.can_add(17)
