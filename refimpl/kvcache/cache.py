"""The paged KV cache: K/V storage in fixed-size pages, one block table per sequence,
fork with reference counts, copy-on-write, and prefix caching (Kwon et al. 2023,
sections 4.2-4.4; vLLM v1 automatic prefix caching; FlashInfer's page layouts).

Storage is one array ``kv`` of shape ``(num_blocks, 2, block_size, heads, dim)``
(layout ``"NHD"``) or ``(num_blocks, 2, heads, block_size, dim)`` (``"HND"``); index 0
of the second axis is K, 1 is V. Sequence ``s`` keeps a block table: logical block ``i``
(tokens ``i*block_size .. (i+1)*block_size - 1``) lives in physical block
``block_table(s)[i]``. Blocks are taken lazily: a new block only when the last one is
full, so a sequence of ``L`` tokens always holds exactly ``ceil(L / block_size)`` blocks.

Allocation and eviction order are those of :class:`refimpl.kvcache.pool.BlockPool`.

Prefix caching (``enable_prefix_caching=True``, vLLM v1): a block is hashed when it
becomes full and the ids of all its tokens are known (the prompt, or ``token_ids``
passed to :meth:`PagedKVCache.append`; after a token of unknown id, later blocks of
that sequence are not hashed). The hash chains over the sequence's earlier blocks and
its ``extra_keys`` (:mod:`refimpl.kvcache.prefix`). :meth:`PagedKVCache.add_sequence`
reuses the cached blocks of the longest matching prefix, at most
``(len(prompt) - 1) // block_size`` blocks, so the last prompt token is always
recomputed. A block that becomes full with content another block already caches
carries the hash too (vLLM v1 does not de-duplicate, so block tables never change);
a hit takes the earliest-cached carrier. Freed blocks keep their hash in the free queue
until allocation evicts them (LRU) or :meth:`PagedKVCache.evict` drops it.

Every mutating method validates everything and checks the block budget before it
changes anything, so a failure (``OutOfBlocksError``, ``ValueError``,
``TypeError``) leaves the cache exactly as it was.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Hashable, Sequence

import numpy as np

from refimpl.kvcache.pool import BlockPool, OutOfBlocksError
from refimpl.kvcache.prefix import (ROOT_HASH, ExtraKey, block_hash, check_extra_keys,
                                    check_token_ids, hash_blocks)
from refimpl.validation import (as_float, check_array_bytes, check_bool, check_count,
                                check_index, check_int, check_positive_ints)

LAYOUTS = ("NHD", "HND")


@dataclass
class _Sequence:
    table: list[int]
    length: int = 0
    #: known token ids of positions 0 .. len(tokens) - 1 (the prompt, then any
    #: token ids given to append); hashing stops where they stop
    tokens: list[int] = field(default_factory=list)
    extra_keys: tuple[ExtraKey, ...] = ()
    #: chained hashes of the first len(hashes) blocks of the table
    hashes: list[bytes] = field(default_factory=list)
    prompt_len: int = 0


@dataclass(frozen=True)
class KVCacheStats:
    """A snapshot of the cache's memory accounting.

    ``used_blocks + free_blocks == num_blocks``; ``cached_blocks`` counts the free
    blocks that still hold reusable prefix data (they are inside ``free_blocks``).
    ``tokens`` is the sum of the sequences' lengths (a shared block counts once per
    sequence); ``stored_tokens`` counts written slots in used blocks (a shared block
    counts once). ``internal_waste = used_blocks * block_size - stored_tokens``: slots
    reserved but unused. ``utilization = stored_tokens / (used_blocks * block_size)``,
    1.0 when no block is used.
    """

    num_blocks: int
    block_size: int
    sequences: int
    used_blocks: int
    free_blocks: int
    cached_blocks: int
    shared_blocks: int
    tokens: int
    stored_tokens: int
    internal_waste: int
    utilization: float
    prefix_query_tokens: int
    prefix_hit_tokens: int
    evictions: int


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


class PagedKVCache:
    """Paged K/V storage with block tables, fork, copy-on-write and prefix caching.

    Args:
        num_blocks: physical blocks in the pool.
        block_size: token slots per block (page size).
        num_kv_heads: K/V heads per token.
        head_dim: elements per head.
        dtype: storage dtype (a NumPy floating type); appended K/V must have exactly it.
        layout: ``"NHD"`` (pages, 2, page_size, heads, dim) or ``"HND"``
            (pages, 2, heads, page_size, dim), FlashInfer's two layouts.
        enable_prefix_caching: hash full blocks and reuse them across sequences.

    Raises:
        TypeError: a size that is not an int, a non-floating ``dtype``.
        ValueError: a size below 1, or storage beyond
            :data:`refimpl.validation.MAX_ARRAY_BYTES` (checked before allocating).
    """

    def __init__(self, num_blocks: int, block_size: int, num_kv_heads: int, head_dim: int,
                 dtype: np.dtype | type = np.float32, layout: str = "NHD",
                 enable_prefix_caching: bool = False) -> None:
        num_blocks, block_size, num_kv_heads, head_dim = check_positive_ints(
            num_blocks=num_blocks, block_size=block_size, num_kv_heads=num_kv_heads,
            head_dim=head_dim)
        enable_prefix_caching = check_bool("enable_prefix_caching", enable_prefix_caching)
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
        dt = np.dtype(dtype)
        if dt.kind != "f":
            raise TypeError(f"dtype must be a floating type, got {dt}")
        # the storage is allocated below: refuse a size beyond the limit first
        check_array_bytes("num_blocks", num_blocks * 2 * block_size * num_kv_heads
                          * head_dim, dt.itemsize,
                          what="the K/V storage (num_blocks * 2 * block_size * "
                               "num_kv_heads * head_dim)")
        self.pool = BlockPool(num_blocks, block_size)
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.num_kv_heads = num_kv_heads
        self.head_dim = head_dim
        self.dtype = dt
        self.layout = layout
        self.enable_prefix_caching = bool(enable_prefix_caching)
        shape = ((num_blocks, 2, block_size, num_kv_heads, head_dim) if layout == "NHD"
                 else (num_blocks, 2, num_kv_heads, block_size, head_dim))
        #: the K/V storage; axis 1: 0 = K, 1 = V
        self.kv = np.zeros(shape, dtype=dt)
        #: written slots of each physical block
        self._filled: list[int] = [0] * num_blocks
        self._seqs: dict[Hashable, _Sequence] = {}
        self._freed: set[Hashable] = set()
        self._query_tokens = 0
        self._hit_tokens = 0

    # -- lookups ---------------------------------------------------------------------
    def _get(self, seq_id: Hashable) -> _Sequence:
        try:
            return self._seqs[seq_id]
        except KeyError:
            if seq_id in self._freed:
                raise ValueError(f"sequence {seq_id!r} was freed") from None
            raise ValueError(f"unknown sequence {seq_id!r}") from None
        except TypeError:
            raise TypeError(f"sequence id must be hashable, got {seq_id!r}") from None

    def _check_new(self, seq_id: Hashable) -> None:
        """Raise unless ``seq_id`` is hashable and not a live sequence."""
        try:
            live = seq_id in self._seqs
        except TypeError:
            raise TypeError(f"sequence id must be hashable, got {seq_id!r}") from None
        if live:
            raise ValueError(f"sequence {seq_id!r} already exists")

    def __contains__(self, seq_id: Hashable) -> bool:
        return seq_id in self._seqs

    def sequences(self) -> list[Hashable]:
        """Live sequence ids in the order they were added."""
        return list(self._seqs)

    def block_table(self, seq_id: Hashable) -> list[int]:
        """Physical block ids of the sequence's logical blocks, in order (a copy)."""
        return list(self._get(seq_id).table)

    def length(self, seq_id: Hashable) -> int:
        """Tokens held by the sequence."""
        return self._get(seq_id).length

    def _block(self, block: object) -> int:
        """A physical block id in ``[0, num_blocks)``; negative ids are refused, not
        counted from the end."""
        return check_index("block", block, self.num_blocks)

    def ref_count(self, block: int) -> int:
        """Sequences holding physical ``block`` (0 when free).

        Raises:
            TypeError: ``block`` not an int; ValueError: outside ``[0, num_blocks)``.
        """
        return self.pool.ref_counts[self._block(block)]

    def filled(self, block: int) -> int:
        """Written slots of physical ``block`` (errors as :meth:`ref_count`)."""
        return self._filled[self._block(block)]

    def page(self, block: int) -> tuple[np.ndarray, np.ndarray]:
        """Views of block ``block``'s K and V, each (heads, block_size, dim) (errors as
        :meth:`ref_count`)."""
        block = self._block(block)
        if self.layout == "HND":
            return self.kv[block, 0], self.kv[block, 1]
        return self.kv[block, 0].transpose(1, 0, 2), self.kv[block, 1].transpose(1, 0, 2)

    def gather(self, seq_id: Hashable) -> tuple[np.ndarray, np.ndarray]:
        """The sequence's K and V, contiguous, each (length, heads, dim), read through
        its block table."""
        seq = self._get(seq_id)
        n, bs = seq.length, self.block_size
        k = np.empty((n, self.num_kv_heads, self.head_dim), self.dtype)
        v = np.empty_like(k)
        for i, block in enumerate(seq.table):
            c = min(bs, n - i * bs)
            kp, vp = self.page(block)
            k[i * bs:i * bs + c] = kp[:, :c].transpose(1, 0, 2)
            v[i * bs:i * bs + c] = vp[:, :c].transpose(1, 0, 2)
        return k, v

    # -- planning (no side effects) ----------------------------------------------------
    def _append_need(self, seq: _Sequence, n: int) -> tuple[int, bool]:
        """(new blocks, copy-on-write?) for appending ``n`` tokens to ``seq``."""
        bs = self.block_size
        cow = (n > 0 and seq.length % bs != 0
               and self.pool.ref_counts[seq.table[-1]] > 1)
        return _ceil_div(seq.length + n, bs) - len(seq.table), cow

    def can_append(self, seq_id: Hashable, n: int = 1) -> bool:
        """Whether ``append`` of ``n`` tokens would find enough free blocks."""
        n = check_int("n", n, minimum=0)
        new, cow = self._append_need(self._get(seq_id), n)
        return new + cow <= self.pool.num_free

    def _match_prefix(self, tokens: list[int], extra_keys: tuple) -> list[int]:
        """Cached blocks serving the longest prefix of ``tokens``; the last token is
        never served (at most ``(len - 1) // block_size`` blocks)."""
        if not self.enable_prefix_caching or len(tokens) < 2:
            return []
        limit = (len(tokens) - 1) // self.block_size
        hits = []
        for h in hash_blocks(tokens[:limit * self.block_size], self.block_size,
                             extra_keys):
            block = self.pool.lookup(h)
            if block is None:
                break
            hits.append(block)
        return hits

    def can_add(self, prompt_tokens: Sequence[int] | int, *,
                extra_keys: Sequence[ExtraKey] = (), watermark: float = 0.0) -> bool:
        """Whether a sequence with this prompt could be added *and* its whole prompt
        appended, keeping ``int(watermark * num_blocks)`` blocks free afterwards
        (vLLM v0's ``watermark_blocks``, rounded down as there).

        ``prompt_tokens`` may be a token list (prefix-cache hits are counted) or a
        length. vLLM v0 admits with a 1% watermark (``watermark=0.01``) to avoid
        thrashing; the default here is 0.
        """
        watermark = as_float("watermark", watermark)
        if not 0.0 <= watermark < 1.0:
            raise ValueError(f"watermark must be in [0, 1), got {watermark}")
        if isinstance(prompt_tokens, (int, np.integer)) and not isinstance(
                prompt_tokens, bool):
            length, hits = int(prompt_tokens), []
            if length < 0:
                raise ValueError(f"prompt length must be >= 0, got {length}")
        else:
            toks = check_token_ids(prompt_tokens)
            length, hits = len(toks), self._match_prefix(toks,
                                                         check_extra_keys(extra_keys))
        # hits on free cached blocks leave the free queue too, so only hits on blocks
        # in use save free blocks
        in_use = sum(1 for b in hits if self.pool.ref_counts[b] > 0)
        needed = _ceil_div(length, self.block_size) - in_use
        return self.pool.num_free - needed >= int(watermark * self.num_blocks)

    # -- mutations ---------------------------------------------------------------------
    def add_sequence(self, seq_id: Hashable, prompt_tokens: Sequence[int] | None = None,
                     *, extra_keys: Sequence[ExtraKey] = ()) -> int:
        """Start an empty sequence; with prefix caching, attach cached prompt blocks.

        Args:
            seq_id: a new, hashable id (a freed id may be reused).
            prompt_tokens: the prompt's token ids, used for prefix caching; the caller
                then appends K/V for positions ``returned .. len(prompt) - 1``.
            extra_keys: ints, strs or bytes mixed into every block hash (tenant, LoRA
                adapter, cache salt).

        Returns:
            The number of prompt tokens served from the cache (a multiple of
            ``block_size``, at most ``len(prompt) - 1``: the last prompt token is
            always recomputed). Allocates no new block, so it cannot run out.

        Admission is two calls (this, then ``append`` of the rest of the prompt); to
        admit all or nothing, ask :meth:`can_add` with the same prompt and keys first.
        Freeing after a failed prompt append is not the same as never adding: the hit
        blocks go back to the tail of the free queue and the prefix counters keep the
        query.
        """
        self._check_new(seq_id)
        toks = [] if prompt_tokens is None else check_token_ids(prompt_tokens)
        extra = check_extra_keys(extra_keys)  # validated before any change
        hits = self._match_prefix(toks, extra)
        if self.enable_prefix_caching and toks:
            self._query_tokens += len(toks)
            self._hit_tokens += len(hits) * self.block_size
        for block in hits:
            self.pool.touch(block)
        n = len(hits) * self.block_size
        seq = _Sequence(table=list(hits), length=n, tokens=toks, extra_keys=extra,
                        prompt_len=len(toks))
        if hits:
            seq.hashes = [self.pool.block_hashes[b] for b in hits]  # type: ignore[misc]
        self._seqs[seq_id] = seq
        self._freed.discard(seq_id)
        return n

    def _check_kv(self, k: np.ndarray, v: np.ndarray) -> int:
        want = (self.num_kv_heads, self.head_dim)
        for name, a in (("k", k), ("v", v)):
            if not isinstance(a, np.ndarray):
                raise TypeError(f"{name} must be a numpy array, got {type(a).__name__}")
            if a.dtype != self.dtype:
                raise TypeError(f"{name} has dtype {a.dtype}; the cache stores "
                                f"{self.dtype}")
            if a.ndim != 3 or a.shape[1:] != want:
                raise ValueError(f"{name} must have shape (n, {want[0]}, {want[1]}) "
                                 f"(tokens, kv heads, head dim), got {a.shape}")
        if k.shape[0] != v.shape[0]:
            raise ValueError(f"k has {k.shape[0]} tokens but v has {v.shape[0]}")
        return k.shape[0]

    def append(self, seq_id: Hashable, k: np.ndarray, v: np.ndarray,
               token_ids: Sequence[int] | None = None) -> list[tuple[int, int]]:
        """Append ``n`` tokens' K and V, each of shape (n, num_kv_heads, head_dim).

        Writes slot ``length % block_size`` of the last block onward and takes new
        blocks from the pool only when the last one is full. If the last block is
        partly filled and shared (count > 1), copy-on-write first: a new block gets
        the filled slots, the shared one loses a reference.

        Args:
            token_ids: ids of the appended tokens, optional; positions inside the
                prompt must agree with it. Full blocks whose ids are all known are
                hashed and offered to the prefix cache.

        Returns:
            The copies made, as ``(src_block, dst_block)`` pairs (empty or one).

        Raises:
            OutOfBlocksError: not enough free blocks (nothing changes).
        """
        seq = self._get(seq_id)
        n = self._check_kv(k, v)
        new_ids = None if token_ids is None else check_token_ids(token_ids, "token_ids")
        if new_ids is not None:
            if len(new_ids) != n:
                raise ValueError(f"token_ids has {len(new_ids)} ids for {n} tokens")
            overlap = seq.tokens[seq.length:seq.length + n]
            if overlap != new_ids[:len(overlap)]:
                raise ValueError("token_ids disagree with the known (prompt) token ids "
                                 f"at positions {seq.length}..")
        new_blocks, cow = self._append_need(seq, n)
        if new_blocks + cow > self.pool.num_free:
            raise OutOfBlocksError(new_blocks + cow, self.pool.num_free)
        if n == 0:
            return []
        # -- from here on nothing can fail --
        bs = self.block_size
        copies: list[tuple[int, int]] = []
        if cow:
            src = seq.table[-1]
            (dst,) = self.pool.allocate(1)
            used = seq.length % bs
            if self.layout == "NHD":
                self.kv[dst, :, :used] = self.kv[src, :, :used]
            else:
                self.kv[dst, :, :, :used] = self.kv[src, :, :, :used]
            self._filled[dst] = used
            self.pool.release([src])
            seq.table[-1] = dst
            copies.append((src, dst))
        for block in self.pool.allocate(new_blocks):
            self._filled[block] = 0
            seq.table.append(block)
        pos, i = seq.length, 0
        while i < n:
            block, off = seq.table[pos // bs], pos % bs
            c = min(bs - off, n - i)
            if self.layout == "NHD":
                self.kv[block, 0, off:off + c] = k[i:i + c]
                self.kv[block, 1, off:off + c] = v[i:i + c]
            else:
                self.kv[block, 0, :, off:off + c] = k[i:i + c].transpose(1, 0, 2)
                self.kv[block, 1, :, off:off + c] = v[i:i + c].transpose(1, 0, 2)
            self._filled[block] = off + c
            pos += c
            i += c
        if new_ids is not None and len(seq.tokens) >= seq.length:
            seq.tokens.extend(new_ids[len(seq.tokens) - seq.length:])
        seq.length = pos
        if self.enable_prefix_caching:
            self._hash_full_blocks(seq)
        return copies

    def _hash_full_blocks(self, seq: _Sequence) -> None:
        bs = self.block_size
        known = min(seq.length, len(seq.tokens))
        j = len(seq.hashes)
        while (j + 1) * bs <= known:
            parent = seq.hashes[-1] if seq.hashes else ROOT_HASH
            h = block_hash(parent, seq.tokens[j * bs:(j + 1) * bs], seq.extra_keys)
            seq.hashes.append(h)
            if self.pool.block_hashes[seq.table[j]] is None:
                self.pool.set_hash(seq.table[j], h)
            j += 1

    def fork(self, parent_id: Hashable, child_id: Hashable) -> None:
        """New sequence ``child_id`` sharing every block of ``parent_id`` (counts + 1;
        no data is copied; the first append to a shared partial block copies it)."""
        parent = self._get(parent_id)
        self._check_new(child_id)
        for block in parent.table:
            self.pool.touch(block)
        self._seqs[child_id] = _Sequence(
            table=list(parent.table), length=parent.length, tokens=list(parent.tokens),
            extra_keys=parent.extra_keys, hashes=list(parent.hashes),
            prompt_len=parent.prompt_len)
        self._freed.discard(child_id)

    def free(self, seq_id: Hashable) -> None:
        """Drop the sequence; its blocks lose a reference, last block first, so that
        among them the tail of the sequence is evicted first. Full hashed blocks stay
        reusable by the prefix cache until evicted."""
        seq = self._get(seq_id)
        self.pool.release(reversed(seq.table))
        del self._seqs[seq_id]
        self._freed.add(seq_id)

    def evict(self, num_blocks: int | None = None) -> list[int]:
        """Forget the prefix data of up to ``num_blocks`` free cached blocks (all if
        None), least recently freed first. Returns the evicted block ids.

        Raises:
            TypeError: ``num_blocks`` is not an int or None (``0.5``, ``True``, ``"x"``:
                a count is never a float, a bool or a string).
            ValueError: ``num_blocks`` is negative.
        """
        if num_blocks is not None:
            num_blocks = check_count("num_blocks", num_blocks)
        return self.pool.evict(num_blocks)

    # -- reports -----------------------------------------------------------------------
    def stats(self) -> KVCacheStats:
        counts = self.pool.ref_counts
        used = [b for b in range(self.num_blocks) if counts[b] > 0]
        stored = sum(self._filled[b] for b in used)
        reserved = len(used) * self.block_size
        return KVCacheStats(
            num_blocks=self.num_blocks,
            block_size=self.block_size,
            sequences=len(self._seqs),
            used_blocks=len(used),
            free_blocks=self.pool.num_free,
            cached_blocks=self.pool.num_cached_free,
            shared_blocks=sum(1 for b in used if counts[b] > 1),
            tokens=sum(s.length for s in self._seqs.values()),
            stored_tokens=stored,
            internal_waste=reserved - stored,
            utilization=stored / reserved if reserved else 1.0,
            prefix_query_tokens=self._query_tokens,
            prefix_hit_tokens=self._hit_tokens,
            evictions=self.pool.evictions,
        )

    def to_csr(self, seq_ids: Sequence[Hashable]) -> tuple[np.ndarray, np.ndarray,
                                                           np.ndarray]:
        """FlashInfer's page table for ``seq_ids``, in that order.

        Returns:
            ``(kv_indptr, kv_indices, kv_last_page_len)``, int32, of lengths ``B + 1``,
            ``kv_indptr[-1]`` and ``B``: sequence ``b``'s pages are
            ``kv_indices[kv_indptr[b]:kv_indptr[b + 1]]`` and
            ``length = page_size * (pages - 1) + last_page_len`` with
            ``1 <= last_page_len <= page_size``.

        Raises:
            ValueError: an empty sequence (the layout cannot express zero tokens).
        """
        seqs = [self._get(s) for s in seq_ids]
        for s_id, s in zip(seq_ids, seqs):
            if s.length == 0:
                raise ValueError(f"sequence {s_id!r} has no tokens; FlashInfer's CSR "
                                 "layout needs at least one per sequence")
        indptr = np.zeros(len(seqs) + 1, np.int32)
        indptr[1:] = np.cumsum([len(s.table) for s in seqs], dtype=np.int64)
        indices = np.array([b for s in seqs for b in s.table], dtype=np.int32)
        last = np.array([(s.length - 1) % self.block_size + 1 for s in seqs], np.int32)
        return indptr, indices, last
