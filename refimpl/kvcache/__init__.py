"""The paged KV cache (Kwon et al. 2023, PagedAttention / vLLM): a block pool with
reference counts, block tables with fork and copy-on-write, prefix caching with chained
stable hashes and LRU eviction, FlashInfer's CSR page table, attention read through
the page table, and a trace simulator comparing paged with contiguous reservation.
"""
from refimpl.kvcache.cache import KVCacheStats, PagedKVCache
from refimpl.kvcache.pool import BlockPool, OutOfBlocksError
from refimpl.kvcache.prefix import ROOT_HASH, block_hash, hash_blocks

__all__ = [
    "BlockPool", "OutOfBlocksError", "PagedKVCache", "KVCacheStats",
    "ROOT_HASH", "block_hash", "hash_blocks",
]
