"""The paged KV cache (Kwon et al. 2023, PagedAttention / vLLM): a block pool with
reference counts, block tables with fork and copy-on-write, prefix caching with chained
stable hashes and LRU eviction, FlashInfer's CSR page table, attention read through
the page table, and a trace simulator comparing paged with contiguous reservation.
"""
from refimpl.kvcache.cache import KVCacheStats, PagedKVCache
from refimpl.kvcache.paged_attention import paged_attention
from refimpl.kvcache.pool import BlockPool, OutOfBlocksError
from refimpl.kvcache.prefix import ROOT_HASH, block_hash, hash_blocks
from refimpl.kvcache.simulate import (Request, SimulationResult, paged_example_trace,
                                      sharegpt_like_trace, simulate)
from refimpl.deprecation import deprecated_names

__all__ = [
    "BlockPool", "OutOfBlocksError", "PagedKVCache", "KVCacheStats", "paged_attention",
    "ROOT_HASH", "block_hash", "hash_blocks",
    "Request", "SimulationResult", "simulate", "sharegpt_like_trace", "paged_example_trace",
]

__getattr__ = deprecated_names(
    __name__, {"seed_example_trace": ("paged_example_trace", paged_example_trace)})
