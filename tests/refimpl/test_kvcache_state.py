"""Stateful test of the paged KV cache: random add/append/fork/free/evict sequences,
checked against a plain model (the tokens and values each sequence was given) after
every step."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (RuleBasedStateMachine, initialize, invariant,
                                 precondition, rule)

from refimpl.kvcache import OutOfBlocksError, PagedKVCache

BLOCK = 4
NUM_BLOCKS = 12


def value(tenant: int, pos: int, token: int) -> float:
    """What position ``pos`` of a sequence holds: a function of the tenant, position
    and token only (exact in float64), so a correct prefix-cache hit reads exactly
    the value the model expects, and a wrong share (other tenant, other tokens) or a
    leaked write does not."""
    return float(tenant * 2**40 + pos * 2**21 + token)


class KVCacheMachine(RuleBasedStateMachine):
    @initialize(layout=st.sampled_from(["NHD", "HND"]))
    def setup(self, layout: str) -> None:
        self.cache = PagedKVCache(NUM_BLOCKS, BLOCK, num_kv_heads=1, head_dim=2,
                                  dtype=np.float64, layout=layout,
                                  enable_prefix_caching=True)
        # model: seq id -> (tenant, known token ids, length)
        self.seqs: dict[int, dict] = {}
        self.next_id = 0
        self.history: list[tuple[int, list[int]]] = []  # (tenant, tokens) ever held

    def _snapshot(self):
        c = self.cache
        return (
            {s: c.block_table(s) for s in self.seqs},
            list(c.pool.ref_counts), c.pool.free_queue(), dict(c.pool.cached),
            c.stats(), c.kv.copy(),
        )

    def _assert_unchanged(self, before) -> None:
        after = self._snapshot()
        for a, b in zip(before[:-1], after[:-1]):
            assert a == b
        assert np.array_equal(before[-1], after[-1])

    # -- rules -------------------------------------------------------------------------
    @precondition(lambda self: self.history)
    @rule(data=st.data(), tenant=st.integers(0, 1))
    def add_sharing(self, data, tenant: int) -> None:
        """A prompt starting like one seen before (live or freed): prefix-cache hits
        when the tenant matches (the value check catches a share across tenants)."""
        old_tenant, old = data.draw(st.sampled_from(self.history))
        cut = data.draw(st.integers(0, len(old)))
        prompt = old[:cut] + data.draw(st.lists(st.integers(0, 1), max_size=5))
        self.add(prompt, tenant)

    @rule(prompt=st.lists(st.integers(0, 1), max_size=14), tenant=st.integers(0, 1))
    def add(self, prompt: list[int], tenant: int) -> None:
        sid = self.next_id
        self.next_id += 1
        hit = self.cache.add_sequence(sid, prompt, extra_keys=(tenant,))
        assert hit % BLOCK == 0
        assert hit <= max(len(prompt) - 1, 0)
        if hit:
            event("prefix-cache hit")
        self.seqs[sid] = {"tenant": tenant, "tokens": list(prompt), "len": hit}
        self.history.append((tenant, self.seqs[sid]["tokens"]))

    @precondition(lambda self: self.seqs)
    @rule(data=st.data())
    def prefill(self, data) -> None:
        """Append the rest of a sequence's prompt at once (at least one token)."""
        sid = data.draw(st.sampled_from(sorted(self.seqs)))
        m = self.seqs[sid]
        self.append(data, max(1, len(m["tokens"]) - m["len"]), sid)

    @precondition(lambda self: self.seqs)
    @rule(data=st.data(), n=st.integers(1, 9))
    def append(self, data, n: int, sid=None) -> None:
        if sid is None:
            sid = data.draw(st.sampled_from(sorted(self.seqs)))
        m = self.seqs[sid]
        start = m["len"]
        toks = []
        for p in range(start, start + n):
            if p < len(m["tokens"]):
                toks.append(m["tokens"][p])
            else:
                toks.append(data.draw(st.integers(0, 2**20 - 1)))
        vals = np.array([value(m["tenant"], start + i, t) for i, t in enumerate(toks)])
        k = np.stack([vals, vals + 0.5], axis=1)[:, None, :]
        v = -k
        c = self.cache
        table = c.block_table(sid)
        # what the allocator must need, derived from the tables alone
        shared = bool(table) and start % BLOCK != 0 and sum(
            c.block_table(o).count(table[-1]) for o in self.seqs) > 1
        need = -(-(start + n) // BLOCK) - len(table) + shared
        assert c.can_append(sid, n) == (need <= c.stats().free_blocks)
        if need > c.stats().free_blocks:
            before = self._snapshot()
            with pytest.raises(OutOfBlocksError):
                c.append(sid, k, v, token_ids=toks)
            self._assert_unchanged(before)
            event("out of blocks")
            return
        copies = c.append(sid, k, v, token_ids=toks)
        if shared:
            event("copy-on-write")
            assert len(copies) == 1 and copies[0][0] == table[-1]
            assert c.block_table(sid)[len(table) - 1] == copies[0][1]
        else:
            assert copies == []
        assert c.block_table(sid)[:len(table) - shared] == table[:len(table) - shared]
        m["len"] = start + n
        if len(m["tokens"]) < m["len"]:
            m["tokens"] += toks[len(m["tokens"]) - start:]

    @precondition(lambda self: self.seqs)
    @rule(data=st.data())
    def fork(self, data) -> None:
        parent = data.draw(st.sampled_from(sorted(self.seqs)))
        child = self.next_id
        self.next_id += 1
        free_before = self.cache.stats().free_blocks
        self.cache.fork(parent, child)
        assert self.cache.stats().free_blocks == free_before  # forks take no block
        m = self.seqs[parent]
        self.seqs[child] = {"tenant": m["tenant"], "tokens": list(m["tokens"]),
                            "len": m["len"]}

    @precondition(lambda self: self.seqs)
    @rule(data=st.data())
    def free(self, data) -> None:
        sid = data.draw(st.sampled_from(sorted(self.seqs)))
        self.cache.free(sid)
        del self.seqs[sid]
        with pytest.raises(ValueError, match="freed"):
            self.cache.free(sid)

    @rule(n=st.none() | st.integers(0, 4))
    def evict(self, n) -> None:
        c = self.cache
        free_cached = [b for b in c.pool.free_queue()
                       if c.pool.block_hashes[b] is not None]
        out = c.evict(n)
        if out:
            event("evicted")
        assert out == free_cached[:len(free_cached) if n is None else n]

    # -- invariants --------------------------------------------------------------------
    @invariant()
    def counts_match_tables(self) -> None:
        c = self.cache
        held = [0] * NUM_BLOCKS
        for s in self.seqs:
            table = c.block_table(s)
            assert len(set(table)) == len(table), "a block twice in one table"
            for b in table:
                held[b] += 1
        assert c.pool.ref_counts == held
        free = c.pool.free_queue()
        assert len(set(free)) == len(free)
        assert sorted(free) == [b for b in range(NUM_BLOCKS) if held[b] == 0]

    @invariant()
    def stats_add_up(self) -> None:
        c = self.cache
        s = c.stats()
        assert s.used_blocks + s.free_blocks == NUM_BLOCKS
        used = {b for sid in self.seqs for b in c.block_table(sid)}
        assert s.used_blocks == len(used)
        assert s.tokens == sum(m["len"] for m in self.seqs.values())
        # written slots from the model: block k of a sequence of n tokens holds
        # min(BLOCK, n - k * BLOCK) of them; a shared block counts once
        filled: dict[int, int] = {}
        for sid, m in self.seqs.items():
            for k, b in enumerate(c.block_table(sid)):
                filled[b] = max(filled.get(b, 0), min(BLOCK, m["len"] - k * BLOCK))
        assert s.stored_tokens == sum(filled.values())
        assert s.internal_waste == s.used_blocks * BLOCK - sum(filled.values())
        assert s.cached_blocks == sum(1 for b in c.pool.free_queue()
                                      if c.pool.block_hashes[b] is not None)
        assert s.cached_blocks <= s.free_blocks
        assert s.sequences == len(self.seqs)
        # every cached hash points at a block that carries it
        for h, b in c.pool.cached.items():
            assert c.pool.block_hashes[b] == h

    @invariant()
    def contents_match_model(self) -> None:
        c = self.cache
        for sid, m in self.seqs.items():
            n = m["len"]
            assert c.length(sid) == n
            assert len(c.block_table(sid)) == -(-n // BLOCK)
            k, v = c.gather(sid)
            want = np.array([value(m["tenant"], p, m["tokens"][p]) for p in range(n)])
            assert np.array_equal(k[:, 0, 0], want)
            assert np.array_equal(k[:, 0, 1], want + 0.5)
            assert np.array_equal(v, -k)


KVCacheMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40)
test_kvcache_state_machine = pytest.mark.slow(KVCacheMachine.TestCase)
