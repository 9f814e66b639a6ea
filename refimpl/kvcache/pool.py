"""The block pool: a fixed set of physical KV blocks, their reference counts and the
free queue (Kwon et al. 2023, "Efficient Memory Management for Large Language Model
Serving with PagedAttention", section 4.2; vLLM v1 block pool design).

Allocation and eviction order (deterministic, as in vLLM v1):

- All free blocks, with or without cached prefix data, sit in **one free queue**.
  Initially it holds ``0, 1, ..., num_blocks - 1`` in that order.
- ``allocate(n)`` takes the ``n`` blocks at the **head** of the queue, in queue order.
  A block taken this way that still carries a prefix-cache hash loses it: that is the
  eviction. So the eviction order is the free-queue order, least recently freed first.
- ``release(blocks)`` decrements the counts; every block whose count reaches zero is
  appended to the **tail**, in the order given. Callers free a sequence's table in
  reverse (last block first), so a request's last blocks are evicted before its first
  ones, which are the blocks most likely to be shared as a prefix.
- ``touch(block)`` (a prefix-cache hit) increments the count; a free cached block is
  taken out of the middle of the queue, wherever it is.
- Duplicates are not merged (vLLM v1 ``BlockPool.cached_block_hash_to_block``): two
  blocks that become full with the same content both carry its hash, so block tables
  stay append-only. A hit takes the earliest-cached block still carrying the hash; when
  that one is evicted, the next carrier serves later hits.

vLLM v1 also reserves block 0 as a placeholder "null block" that is never handed out;
this pool has none, so its block ``b`` corresponds to vLLM v1's block ``b + 1`` in a
vLLM pool of ``num_blocks + 1`` blocks.

Every operation is O(1) per block: the queue is a doubly linked list over the block
ids (two index arrays and a sentinel), so removal from the middle costs the same as
from the head, however long the pool.
"""
from __future__ import annotations

from typing import Iterable

from refimpl.validation import check_array_bytes, check_count, check_positive_int

#: bytes of Python list entries and int objects the pool keeps per block (its free
#: queue links, reference counts and hashes), for the size check before allocating
BYTES_PER_BLOCK = 96


class OutOfBlocksError(RuntimeError):
    """Not enough free blocks for the request; nothing was changed.

    The caller decides what to do (vLLM preempts a victim by recomputation or swap).
    """

    def __init__(self, needed: int, free: int) -> None:
        super().__init__(f"out of KV blocks: need {needed}, {free} free")
        self.needed = needed
        self.free = free


class BlockPool:
    """``num_blocks`` physical blocks of ``block_size`` token slots each.

    Args:
        num_blocks: number of physical blocks (>= 1).
        block_size: token slots per block (>= 1; 16 is the common default).

    The pool tracks reference counts and, for prefix caching, an optional content hash
    per block and the map from hash to block. It stores no K/V data; see
    :class:`refimpl.kvcache.PagedKVCache`.
    """

    def __init__(self, num_blocks: int, block_size: int) -> None:
        num_blocks = check_positive_int("num_blocks", num_blocks)
        block_size = check_positive_int("block_size", block_size)
        check_array_bytes("num_blocks", num_blocks, BYTES_PER_BLOCK,
                          what="the pool's per-block bookkeeping")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.ref_counts: list[int] = [0] * num_blocks
        # free queue: doubly linked list, sentinel = num_blocks; initially 0 .. n - 1
        sentinel = num_blocks
        self._next: list[int] = list(range(1, num_blocks + 1)) + [0]
        self._prev: list[int] = [sentinel] + list(range(num_blocks))
        self._num_free = num_blocks
        #: prefix-cache hash of each block, or None
        self.block_hashes: list[bytes | None] = [None] * num_blocks
        #: hash -> the block a hit on it takes: the earliest-cached carrier
        self.cached: dict[bytes, int] = {}
        #: hash -> every block carrying it, in caching order (dict as ordered set)
        self._carriers: dict[bytes, dict[int, None]] = {}
        self.evictions = 0

    # -- queries ---------------------------------------------------------------------
    @property
    def num_free(self) -> int:
        """Blocks with reference count zero (cached ones included)."""
        return self._num_free

    @property
    def num_used(self) -> int:
        return self.num_blocks - self._num_free

    @property
    def num_cached_free(self) -> int:
        """Free blocks still holding reusable prefix data."""
        return sum(1 for b in self.free_queue() if self.block_hashes[b] is not None)

    def free_queue(self) -> list[int]:
        """The free queue, head (next to be allocated or evicted) first."""
        out, b, nxt = [], self._next[self.num_blocks], self._next
        while b != self.num_blocks:
            out.append(b)
            b = nxt[b]
        return out

    # -- the linked list ---------------------------------------------------------------
    def _unlink(self, b: int) -> None:
        p, n = self._prev[b], self._next[b]
        self._next[p] = n
        self._prev[n] = p
        self._num_free -= 1

    def _push_tail(self, b: int) -> None:
        sentinel = self.num_blocks
        last = self._prev[sentinel]
        self._next[last] = b
        self._prev[b] = last
        self._next[b] = sentinel
        self._prev[sentinel] = b
        self._num_free += 1

    def lookup(self, block_hash: bytes) -> int | None:
        """The block caching ``block_hash``, or None."""
        return self.cached.get(block_hash)

    def _check_block(self, block: int) -> None:
        if (isinstance(block, bool) or not isinstance(block, int)
                or not 0 <= block < self.num_blocks):
            raise ValueError(f"block id {block!r} out of range [0, {self.num_blocks})")

    # -- mutations -------------------------------------------------------------------
    def allocate(self, n: int) -> list[int]:
        """Take ``n`` blocks from the head of the free queue, count 1 each.

        Raises:
            OutOfBlocksError: fewer than ``n`` free blocks (nothing changes).
        """
        n = check_count("n", n)
        if n > self._num_free:
            raise OutOfBlocksError(n, self._num_free)
        out = []
        for _ in range(n):
            block = self._next[self.num_blocks]
            self._unlink(block)
            self._evict_hash(block)
            self.ref_counts[block] = 1
            out.append(block)
        return out

    def _evict_hash(self, block: int) -> None:
        h = self.block_hashes[block]
        if h is None:
            return
        self.block_hashes[block] = None
        carriers = self._carriers[h]
        del carriers[block]
        if not carriers:
            del self._carriers[h]
            del self.cached[h]
        elif self.cached[h] == block:
            # a duplicate made while this block was cached takes over its hits
            self.cached[h] = next(iter(carriers))
        self.evictions += 1

    def carriers(self, block_hash: bytes) -> list[int]:
        """Every block carrying ``block_hash``, earliest cached first."""
        return list(self._carriers.get(block_hash, ()))

    def touch(self, block: int) -> None:
        """Take one more reference to ``block`` (a prefix-cache hit or a fork)."""
        self._check_block(block)
        if self.ref_counts[block] == 0:
            self._unlink(block)
        self.ref_counts[block] += 1

    def release(self, blocks: Iterable[int]) -> None:
        """Drop one reference to each block; blocks reaching zero go to the queue tail.

        Raises:
            ValueError: a block that is already free (nothing changes).
        """
        blocks = list(blocks)
        pending: dict[int, int] = {}
        for b in blocks:
            self._check_block(b)
            pending[b] = pending.get(b, 0) + 1
            if pending[b] > self.ref_counts[b]:
                raise ValueError(f"block {b} released more times than it is referenced "
                                 f"(count {self.ref_counts[b]})")
        for b in blocks:
            self.ref_counts[b] -= 1
            if self.ref_counts[b] == 0:
                self._push_tail(b)

    def set_hash(self, block: int, block_hash: bytes) -> bool:
        """Record that full ``block`` holds the content named by ``block_hash``.

        A block whose content another block already caches carries the hash too (vLLM
        v1 does not de-duplicate); hits keep going to the earliest-cached carrier.
        Returns True if ``block`` is the one a hit on ``block_hash`` now takes.

        Raises:
            ValueError: the block already carries a different hash (nothing changes).
        """
        self._check_block(block)
        old = self.block_hashes[block]
        if old is not None:
            if old != block_hash:
                raise ValueError(f"block {block} already carries another hash")
            return self.cached[block_hash] == block
        self.block_hashes[block] = block_hash
        self._carriers.setdefault(block_hash, {})[block] = None
        self.cached.setdefault(block_hash, block)
        return self.cached[block_hash] == block

    def evict(self, n: int | None = None) -> list[int]:
        """Drop the cached hashes of up to ``n`` free blocks (all if None), LRU first.

        The blocks stay in the free queue at their place. Returns the evicted ids.

        Raises:
            TypeError: ``n`` is not an int or None (a float, a bool, a string).
            ValueError: ``n`` is negative.
        """
        if n is not None:
            n = check_count("n", n)
        out: list[int] = []
        for b in self.free_queue():
            if n is not None and len(out) >= n:
                break
            if self.block_hashes[b] is not None:
                out.append(b)
        for b in out:
            self._evict_hash(b)
        return out
