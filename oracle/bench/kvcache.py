"""``python -m oracle bench kvcache``: the paged KV cache's bookkeeping cost per token,
and the trace simulator's memory figures (contiguous reservation versus pages).

Appends: ``N`` sequences grow one token at a time, round robin, to ``T`` tokens each
(16-token pages, one KV head of dimension 4, so the bookkeeping dominates). The time
per append should not grow with ``N`` or with the number of blocks: allocation and
release are O(1) per block. Times are CPU seconds of this process (``process_time``),
so other load on the machine does not inflate them; what growth remains comes from the
memory hierarchy (the working set grows from kilobytes to tens of megabytes), not from
the algorithm. The second table isolates the block pool: allocate, release and
cache-hit (take from the middle of the free queue) at pool sizes from 10^3 to 10^6.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
from tabulate import tabulate

from refimpl.kvcache import BlockPool, PagedKVCache
from refimpl.kvcache.simulate import POLICIES, paged_example_trace, sharegpt_like_trace, simulate

BLOCK = 16


def _append_run(num_seqs: int, tokens: int) -> tuple[float, int]:
    """Seconds for ``num_seqs * tokens`` one-token appends, and the pool size."""
    num_blocks = num_seqs * -(-tokens // BLOCK)
    cache = PagedKVCache(num_blocks, BLOCK, num_kv_heads=1, head_dim=4)
    k = np.ones((1, 1, 4), np.float32)
    v = -k
    append = cache.append
    for s in range(num_seqs):
        cache.add_sequence(s)
    ids = range(num_seqs)
    t0 = time.process_time()
    for _ in range(tokens):
        for s in ids:
            append(s, k, v)
    dt = time.process_time() - t0
    assert cache.stats().tokens == num_seqs * tokens
    return dt, num_blocks


def _pool_run(num_blocks: int, ops: int) -> float:
    """CPU seconds for ``ops`` rounds of: allocate one block (evicting a cached one),
    hash it, release it, and hit a cached block in the middle of the free queue."""
    pool = BlockPool(num_blocks, BLOCK)
    blocks = pool.allocate(num_blocks)
    for b in blocks:  # every block cached, then all free: the worst case for eviction
        pool.set_hash(b, b.to_bytes(32, "little"))
    pool.release(blocks)
    step = max(1, num_blocks // ops)
    t0 = time.process_time()
    for i in range(ops):
        (b,) = pool.allocate(1)
        pool.set_hash(b, (num_blocks + i).to_bytes(32, "little"))
        pool.release([b])
        hit = pool.lookup(((i * step) % num_blocks).to_bytes(32, "little"))
        if hit is not None:
            pool.touch(hit)
            pool.release([hit])
    return time.process_time() - t0


def run(args: argparse.Namespace) -> int:
    sizes = ([(100, 100), (1_000, 20), (10_000, 4)] if getattr(args, "quick", False)
             else [(100, 1_000), (1_000, 1_000), (10_000, 100)])
    rows = []
    for n, t in sizes:
        dt, blocks = min(_append_run(n, t) for _ in range(2))
        rows.append([n, t, blocks, n * t, f"{dt:.2f}", f"{n * t / dt:,.0f}",
                     f"{dt / (n * t) * 1e6:.2f}"])
    print(tabulate(rows, headers=["sequences", "tokens each", "blocks", "appends",
                                  "CPU s", "appends/s", "us/append"]))
    print()

    ops = 20_000 if getattr(args, "quick", False) else 200_000
    rows = []
    for n in (1_000, 10_000, 100_000, 1_000_000):
        dt = min(_pool_run(n, ops) for _ in range(2))
        rows.append([f"{n:,}", f"{ops:,}", f"{dt:.2f}", f"{dt / ops * 1e6:.2f}"])
    print(tabulate(rows, headers=["pool blocks", "rounds", "CPU s",
                                  "us/round (alloc+evict, release, hit)"]))
    print()

    num = 200 if getattr(args, "quick", False) else 1000
    trace = sharegpt_like_trace(num)
    rows = []
    for name, tr in ((f"ShareGPT-like ({num} requests)", trace),
                     ("PagedAttention example (128/1024/300)", paged_example_trace())):
        for policy in POLICIES:
            r = simulate(tr, policy)
            rows.append([name, policy, r.steps, r.peak_running, f"{r.mean_running:.1f}",
                         r.preemptions, f"{100 * r.utilization:.1f}%",
                         f"{100 * r.waste:.1f}%", f"{100 * r.memory_utilization:.1f}%",
                         " ".join(map(str, r.request_waste)) if len(tr) <= 3 else ""])
    print("memory budget 16 x 2048 token slots, max length 2048, 16-token pages")
    print(tabulate(rows, headers=["trace", "policy", "steps", "peak seqs", "mean seqs",
                                  "preempted", "KV used", "waste", "budget used",
                                  "per-request waste"]))
    return 0
