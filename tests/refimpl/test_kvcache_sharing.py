"""Blocks shared between sequences in the paged KV cache, adversarial scenarios: fork
then append to every child with a partial last block (copy-on-write), free of a forked
parent, prefix hits on held blocks under eviction pressure, out of blocks in the middle
of a multi-token append (full state snapshot), prompts that are an exact multiple of the
block size, duplicate full blocks (vLLM v1 keeps every copy cached), extra-key
containers, and a seeded walk over a two-token alphabet.

Every expected block id, count and queue order is derived by hand from the documented
rules: the free queue starts ``0 .. n-1``, allocation takes from the head, release
appends blocks reaching count zero to the tail, a sequence is freed last block first,
copy-on-write allocates its block before the append's new blocks.
"""
from __future__ import annotations

import copy

import numpy as np
import pytest

from refimpl.kvcache import OutOfBlocksError, PagedKVCache, hash_blocks

H, D = 2, 3


def value(tok: float, head: int, lane: int) -> float:
    """K of token value ``tok`` at (head, lane): distinct per head and lane, exact."""
    return tok * 100 + head * 10 + lane


def kv(toks) -> tuple[np.ndarray, np.ndarray]:
    toks = np.asarray(toks, np.float64)
    k = (toks[:, None, None] * 100 + np.arange(H)[None, :, None] * 10
         + np.arange(D)[None, None, :]).astype(np.float32)
    return k, -k


def expect(c: PagedKVCache, sid, toks) -> None:
    k, v = c.gather(sid)
    want, _ = kv(toks)
    assert k.shape == (len(toks), H, D)
    assert np.array_equal(k, want) and np.array_equal(v, -want)


def snapshot(c: PagedKVCache):
    """Everything a failed operation must leave alone, internals included."""
    p = c.pool
    return (copy.deepcopy(c._seqs), set(c._freed), list(c._filled), c.kv.copy(),
            list(p.ref_counts), list(p._next), list(p._prev), p.num_free,
            list(p.block_hashes), dict(p.cached),
            {h: list(b) for h, b in p._carriers.items()}, p.evictions,
            c._query_tokens, c._hit_tokens, c.stats())


def assert_same(a, b) -> None:
    for x, y in zip(a, b):
        if isinstance(x, np.ndarray):
            assert np.array_equal(x, y)
        else:
            assert x == y


def check_pool(c: PagedKVCache) -> None:
    """Cache map consistency: every hashed block is a carrier of its hash, and a hit
    goes to the earliest carrier."""
    p = c.pool
    hashed = {b: h for b, h in enumerate(p.block_hashes) if h is not None}
    assert set(p.cached) == set(hashed.values())
    for b, h in hashed.items():
        assert b in p.carriers(h)
        assert p.cached[h] == p.carriers(h)[0]
    assert sum(len(p.carriers(h)) for h in p.cached) == len(hashed)


@pytest.mark.parametrize("layout", ["NHD", "HND"])
def test_fork_then_append_to_every_child_with_partial_last_block(layout: str) -> None:
    c = PagedKVCache(8, 4, H, D, layout=layout)
    c.add_sequence("p")
    c.append("p", *kv([1, 2, 3, 4, 5, 6]))           # blocks 0 (full), 1 (2 of 4)
    c.fork("p", "a")
    c.fork("p", "b")
    assert [c.ref_count(b) for b in (0, 1)] == [3, 3]
    # a: block 1 shared and partial -> copy into 2 first, then 9 tokens need block 3
    assert c.append("a", *kv([10, 11, 12])) == [(1, 2)]
    assert c.block_table("a") == [0, 2, 3]
    # b: block 1 still shared by p and b -> copy into 4
    assert c.append("b", *kv([20])) == [(1, 4)]
    assert c.block_table("b") == [0, 4]
    # p: block 1 is now its own (count 1): written in place, then block 5
    assert c.ref_count(1) == 1
    assert c.append("p", *kv([30, 31, 32, 33, 34])) == []
    assert c.block_table("p") == [0, 1, 5]
    expect(c, "p", [1, 2, 3, 4, 5, 6, 30, 31, 32, 33, 34])
    expect(c, "a", [1, 2, 3, 4, 5, 6, 10, 11, 12])
    expect(c, "b", [1, 2, 3, 4, 5, 6, 20])
    assert [c.filled(b) for b in range(6)] == [4, 4, 4, 1, 3, 3]
    # free the forked parent: 5 and 1 reach zero (in that order), 0 stays shared
    c.free("p")
    assert c.pool.free_queue() == [6, 7, 5, 1]
    assert c.ref_count(0) == 2
    expect(c, "a", [1, 2, 3, 4, 5, 6, 10, 11, 12])
    expect(c, "b", [1, 2, 3, 4, 5, 6, 20])
    s = c.stats()
    assert (s.used_blocks, s.free_blocks, s.shared_blocks) == (4, 4, 1)
    assert (s.tokens, s.stored_tokens, s.internal_waste) == (16, 12, 4)
    indptr, indices, last = c.to_csr(["a", "b"])
    assert indptr.tolist() == [0, 3, 5] and indices.tolist() == [0, 2, 3, 0, 4]
    assert last.tolist() == [1, 3]


def test_free_forked_parent_leaves_child_appending_in_place() -> None:
    c = PagedKVCache(8, 4, H, D)
    c.add_sequence("p")
    c.append("p", *kv([1, 2, 3, 4, 5, 6]))
    c.fork("p", "c")
    c.free("p")                      # counts 2 -> 1: nothing returns to the queue
    assert c.pool.free_queue() == [2, 3, 4, 5, 6, 7]
    assert c.append("c", *kv([7])) == []                # sole owner: no copy
    assert c.block_table("c") == [0, 1]
    expect(c, "c", [1, 2, 3, 4, 5, 6, 7])
    with pytest.raises(ValueError, match="freed"):
        c.append("p", *kv([8]))
    with pytest.raises(ValueError, match="freed"):
        c.fork("p", "d")


def test_out_of_blocks_mid_multi_token_append_changes_nothing() -> None:
    c = PagedKVCache(5, 2, H, D, enable_prefix_caching=True)
    c.add_sequence("A", [1, 2, 3, 4])
    c.append("A", *kv([1, 2, 3, 4]), token_ids=[1, 2, 3, 4])   # 0, 1 hashed
    c.free("A")                                                  # queue 2 3 4 1 0
    assert c.pool.free_queue() == [2, 3, 4, 1, 0]
    c.add_sequence("P", [7, 8, 9])
    c.append("P", *kv([7, 8, 9]), token_ids=[7, 8, 9])         # 2, 3 (one slot)
    c.fork("P", "Q")
    # Q: 3 + 7 = 10 tokens = 5 blocks: copy-on-write 1 + 3 new = 4 > 3 free (4 1 0);
    # a partial run would evict the cached blocks 1 and 0 and split block 3
    assert not c.can_append("Q", 7) and c.can_append("Q", 5)
    before = snapshot(c)
    with pytest.raises(OutOfBlocksError) as e:
        c.append("Q", *kv(range(20, 27)), token_ids=list(range(20, 27)))
    assert (e.value.needed, e.value.free) == (4, 3)
    assert_same(before, snapshot(c))
    assert c.stats().cached_blocks == 2 and c.stats().evictions == 0
    # the rejected call left nothing behind: 5 tokens fit exactly (copy 4, new 1, 0)
    assert c.append("Q", *kv(range(20, 25)), token_ids=list(range(20, 25))) == [(3, 4)]
    assert c.block_table("Q") == [2, 4, 1, 0]
    assert c.stats().evictions == 2
    expect(c, "Q", [7, 8, 9, 20, 21, 22, 23, 24])
    expect(c, "P", [7, 8, 9])
    check_pool(c)


def test_prefix_hit_on_held_block_survives_eviction_pressure() -> None:
    c = PagedKVCache(4, 2, H, D, enable_prefix_caching=True)
    c.add_sequence("a", [1, 2, 3, 4, 5])
    c.append("a", *kv([1, 2, 3, 4, 5]), token_ids=[1, 2, 3, 4, 5])  # 0 1 hashed, 2
    c.free("a")                                       # release 2, 1, 0 -> queue 3 2 1 0
    assert c.pool.free_queue() == [3, 2, 1, 0]
    # 4-token prompt: at most (4 - 1) // 2 = 1 block served
    assert c.add_sequence("b", [1, 2, 3, 9]) == 2
    assert c.block_table("b") == [0] and c.pool.free_queue() == [3, 2, 1]
    # a second hit on the held block shares it
    assert c.add_sequence("c", [1, 2, 7]) == 2
    assert c.ref_count(0) == 2
    # pressure: 6 tokens take 3, 2, 1; block 1's hash is evicted, block 0 is held
    c.add_sequence("x")
    c.append("x", *kv(range(6)))
    assert c.block_table("x") == [3, 2, 1]
    assert c.stats().evictions == 1
    assert c.evict() == []                 # held blocks are never eviction candidates
    assert c.pool.block_hashes[0] == hash_blocks([1, 2], 2)[0]
    expect(c, "b", [1, 2])
    with pytest.raises(OutOfBlocksError):
        c.append("b", *kv([3]))
    c.free("x")                            # release 1, 2, 3
    assert c.append("b", *kv([3, 9]), token_ids=[3, 9]) == []
    assert c.block_table("b") == [0, 1]
    expect(c, "b", [1, 2, 3, 9])
    check_pool(c)


def test_prompt_exact_multiple_of_block_size() -> None:
    c = PagedKVCache(8, 4, H, D, enable_prefix_caching=True)
    prompt = list(range(8))
    assert c.add_sequence("a", prompt) == 0
    c.append("a", *kv(prompt), token_ids=prompt)
    assert c.block_table("a") == [0, 1]
    h = hash_blocks(prompt, 4)
    assert c.pool.block_hashes[:2] == h
    _, _, last = c.to_csr(["a"])
    assert last.tolist() == [4]                   # never a third, empty page
    # the same 8 tokens: the last token is recomputed, so only block 0 is served
    assert c.add_sequence("b", prompt) == 4
    assert c.block_table("b") == [0]
    c.append("b", *kv(prompt[4:]), token_ids=prompt[4:])
    assert c.block_table("b") == [0, 2]           # block 2 duplicates block 1
    assert c.pool.block_hashes[2] == h[1] and c.pool.carriers(h[1]) == [1, 2]
    # one more token: both blocks served, from the earliest copies
    assert c.add_sequence("c", prompt + [99]) == 8
    assert c.block_table("c") == [0, 1]
    assert c.add_sequence("d", prompt[:4]) == 0   # 4 tokens: (4 - 1) // 4 = 0 blocks
    assert c.add_sequence("e", prompt[:5]) == 4
    check_pool(c)


def test_duplicate_full_blocks_stay_cached_like_vllm_v1() -> None:
    # beam-search-like: two forks generate the same tokens into their own blocks
    c = PagedKVCache(8, 4, H, D, enable_prefix_caching=True)
    c.add_sequence("p", [0, 1])
    c.append("p", *kv([0, 1]), token_ids=[0, 1])        # block 0, two slots
    c.fork("p", "q")
    assert c.append("p", *kv([2, 3]), token_ids=[2, 3]) == [(0, 1)]
    assert c.append("q", *kv([2, 3]), token_ids=[2, 3]) == []
    (h,) = hash_blocks([0, 1, 2, 3], 4)
    assert c.pool.block_hashes[0] == c.pool.block_hashes[1] == h
    assert c.pool.carriers(h) == [1, 0] and c.pool.cached[h] == 1
    c.free("p")                                          # queue 2 .. 7, 1
    assert c.stats().cached_blocks == 1
    assert c.evict(1) == [1]
    # q's copy still holds the content: the hit goes to it
    assert c.pool.cached[h] == 0
    assert c.add_sequence("z", [0, 1, 2, 3, 4]) == 4
    assert c.block_table("z") == [0] and c.ref_count(0) == 2
    expect(c, "z", [0, 1, 2, 3])
    c.free("q")
    c.free("z")                                          # last reference to 0 goes
    assert c.pool.free_queue() == [2, 3, 4, 5, 6, 7, 1, 0]
    assert c.stats().cached_blocks == 1
    c.add_sequence("w")
    c.append("w", *kv(range(32)))        # all 8 blocks (queue 2 .. 7, 1, 0): 0 evicted
    assert h not in c.pool.cached and c.pool.carriers(h) == []
    assert c.stats().evictions == 2
    check_pool(c)


@pytest.mark.parametrize("keys", [b"\x01", "tenant", bytearray(b"x")])
def test_bare_str_or_bytes_extra_keys_are_refused(keys) -> None:
    c = PagedKVCache(8, 4, H, D, enable_prefix_caching=True)
    with pytest.raises(TypeError, match="wrap it"):
        c.add_sequence("a", [1, 2, 3, 4, 5], extra_keys=keys)
    assert "a" not in c and c.stats().prefix_query_tokens == 0
    with pytest.raises(TypeError, match="wrap it"):
        c.can_add([1, 2, 3, 4, 5], extra_keys=keys)
    with pytest.raises(TypeError, match="wrap it"):
        hash_blocks([1, 2, 3, 4], 4, keys)


def test_wrapped_bytes_key_never_matches_an_int_key() -> None:
    c = PagedKVCache(8, 4, H, D, enable_prefix_caching=True)
    c.add_sequence("a", [1, 2, 3, 4, 5], extra_keys=(b"\x01",))
    c.append("a", *kv([1, 2, 3, 4, 5]), token_ids=[1, 2, 3, 4, 5])
    assert c.add_sequence("b", [1, 2, 3, 4, 5], extra_keys=(1,)) == 0
    assert c.add_sequence("c", [1, 2, 3, 4, 5], extra_keys=(b"\x01",)) == 4


def test_seeded_walk_with_duplicates_keeps_cache_map_and_contents_consistent() -> None:
    """A fixed pseudo-random walk over a two-token alphabet (so full blocks repeat
    often): after every step the cache map is consistent and every sequence reads back
    the K/V of its own prefix (a position's value is a code of the whole prefix, so a
    wrong hit or a leaked write shows)."""
    rng = np.random.default_rng(12345)
    bs = 2
    c = PagedKVCache(12, bs, 1, 1, dtype=np.float64, enable_prefix_caching=True)
    model: dict[int, list[int]] = {}   # seq -> token ids of its stored positions
    most_carriers = 0

    def codes(toks):
        out, h = [], 0
        for t in toks:
            h = (h * 31 + t + 1) % 1_000_003
            out.append(float(h))
        return out

    def rows(toks, start, n):
        vals = np.array(codes(toks)[start:start + n]).reshape(n, 1, 1)
        return vals, -vals

    next_id = 0
    for _ in range(400):
        op = rng.integers(0, 20)
        live = sorted(model)
        if live and c.stats().free_blocks < 3:
            op = 19                        # make room: free one
        if op < 5 or not live:
            prompt = rng.integers(0, 2, rng.integers(1, 8)).tolist()
            if not c.can_add(prompt):
                continue
            sid, next_id = next_id, next_id + 1
            hit = c.add_sequence(sid, prompt)
            assert hit % bs == 0 and hit <= len(prompt) - 1
            k, v = rows(prompt, hit, len(prompt) - hit)
            c.append(sid, k, v, token_ids=prompt[hit:])
            model[sid] = list(prompt)
        elif op < 12:
            sid = live[rng.integers(0, len(live))]
            new = rng.integers(0, 2, rng.integers(1, 4)).tolist()
            toks = model[sid] + new
            k, v = rows(toks, len(model[sid]), len(new))
            if c.can_append(sid, len(new)):
                c.append(sid, k, v, token_ids=new)
                model[sid] = toks
            else:
                with pytest.raises(OutOfBlocksError):
                    c.append(sid, k, v, token_ids=new)
        elif op < 14:
            sid = live[rng.integers(0, len(live))]
            child, next_id = next_id, next_id + 1
            c.fork(sid, child)
            model[child] = list(model[sid])
        elif op < 15:
            c.evict(int(rng.integers(0, 3)))
        else:
            sid = live[rng.integers(0, len(live))]
            c.free(sid)
            del model[sid]
        check_pool(c)
        most_carriers = max([most_carriers] + [len(c.pool.carriers(h))
                                               for h in c.pool.cached])
        for sid, toks in model.items():
            k, v = c.gather(sid)
            assert k[:, 0, 0].tolist() == codes(toks)
    s = c.stats()
    # the walk did reach the cases it is for
    assert s.prefix_hit_tokens > 0 and s.evictions > 0 and most_carriers > 1
