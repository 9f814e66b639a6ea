"""Golden cases for the paged KV cache (``refimpl.kvcache``).

- ``kvcache.trace``: a sequence of operations replayed on a ``PagedKVCache``; the golden
  outputs are what a serving engine's block manager must agree with: the status of each
  operation (0 done, 1 out of blocks and nothing changed, 2 skipped because it names a
sequence whose admission failed), the prompt tokens served from
  the prefix cache, the copy-on-write copies, the final block tables in FlashInfer's CSR
  form (``kv_indptr``, ``kv_indices``, ``kv_last_page_len``, int32), the statistics and
  each live sequence's K/V as read through its block table (``k_gathered``, ``v_gathered``: the
  sequences' rows concatenated in ``seq_ids`` order; slots no sequence holds are not
  compared). Which physical block a request gets is a policy choice (here:
  vLLM's free queue, LRU eviction of freed cached blocks), so these cases are marked with
  the variant ``kv_block_order``.
- ``kvcache.paged_attention``: attention of each live sequence's queries over its K/V read
  through the page table (FlashAttention's 2x-naive rule; does not depend on which
  physical blocks hold the data; the causal mask does depend on the alignment, so the
  case carries the variant ``causal_alignment``, bottom_right written into its params).
- ``kvcache.simulate``: a request trace replayed under contiguous and paged reservation.

Trace encoding (``ops``, int64 rows ``[opcode, seq, a, b]``): 0 = add sequence ``seq``
with a prompt of ``a`` tokens (ids taken in order from ``tokens``), extra key ``b``
(-1 none), then append the K/V of the prompt tokens not served from cache (the prompt's
``a`` K/V rows are always consumed: the cached ones hold the same data); 1 = append
``a`` decode tokens to ``seq``; 2 = fork ``seq`` into ``a``; 3 = free ``seq``. K/V rows
are taken in order from ``k`` and ``v``: every add and append consumes its rows, whether
it is applied or not.

Sources: Kwon et al. 2023 (vLLM / PagedAttention); FlashInfer's page-table layout.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from oracle.cases import Area, CaseSpec, Operation
from oracle.random_stream import CaseRandom
from oracle.tolerance import AllClose, RelativeToNaive, Ulp
from refimpl import kvcache as K
from refimpl.attention import MaskOptions, naive_attention

SPECS = {"PagedAttention": "Kwon et al. 2023 (arXiv 2309.06180)"}
VARIANT = {"choice": "kv_block_order", "option": "vllm_free_queue_lru"}
STATS = ("used_blocks", "free_blocks", "cached_blocks", "shared_blocks", "tokens",
         "stored_tokens", "internal_waste", "prefix_query_tokens", "prefix_hit_tokens",
         "evictions")


def _replay(inputs: Mapping[str, np.ndarray], p: Mapping[str, Any]):
    """Run the encoded operations; returns the cache and per-operation results."""
    cache = K.PagedKVCache(p["num_blocks"], p["block_size"], p["num_kv_heads"],
                           p["head_dim"], layout=p["layout"],
                           enable_prefix_caching=p["prefix_caching"])
    ops, tokens, k, v = inputs["ops"], inputs["tokens"], inputs["k"], inputs["v"]
    tok_pos = kv_pos = 0
    status = np.zeros(len(ops), np.int64)
    cached = np.zeros(len(ops), np.int64)
    copies = np.full((len(ops), 2), -1, np.int64)

    def take_kv(n: int) -> tuple[np.ndarray, np.ndarray]:
        nonlocal kv_pos
        out = k[kv_pos:kv_pos + n], v[kv_pos:kv_pos + n]
        kv_pos += n
        return out

    for i, (code, seq, a, b) in enumerate(ops.tolist()):
        if code != 0 and seq not in cache:
            status[i] = 2        # names a sequence whose admission failed earlier
            if code == 1:
                take_kv(a)       # every add/append consumes its K/V rows, applied or not
            continue
        try:
            if code == 0:
                prompt = tokens[tok_pos:tok_pos + a].tolist()
                tok_pos += a
                extra = () if b < 0 else (int(b),)
                kk, vv = take_kv(a)
                if not cache.can_add(prompt, extra_keys=extra):
                    # refused before anything changes: no free-queue reordering, no
                    # prefix-cache counters (admission is all or nothing)
                    status[i] = 1
                    continue
                n_cached = cache.add_sequence(seq, prompt, extra_keys=extra)
                cached[i] = n_cached
                made = cache.append(seq, kk[n_cached:], vv[n_cached:],
                                    token_ids=prompt[n_cached:])
            elif code == 1:
                kk, vv = take_kv(a)
                made = cache.append(seq, kk, vv)
            elif code == 2:
                cache.fork(seq, a)
                made = []
            else:
                cache.free(seq)
                made = []
            if made:
                copies[i] = made[0]
        except K.OutOfBlocksError:
            status[i] = 1
    return cache, status, cached, copies


def _trace(inputs: Mapping[str, np.ndarray], p: Mapping[str, Any]) -> dict[str, np.ndarray]:
    cache, status, cached, copies = _replay(inputs, p)
    live = sorted(s for s in cache.sequences() if cache.length(s) > 0)
    indptr, indices, last = cache.to_csr(live)
    st = cache.stats()
    empty = np.zeros((0, p["num_kv_heads"], p["head_dim"]), cache.kv.dtype)
    return {"status": status, "cached_tokens": cached, "copies": copies,
            "seq_ids": np.array(live, np.int64), "kv_indptr": indptr,
            "kv_indices": indices, "kv_last_page_len": last,
            "stats": np.array([getattr(st, n) for n in STATS], np.int64),
            # only the slots each live sequence holds: unwritten slots and stale data of
            # a block's earlier use are not part of the cache's contract
            "k_gathered": np.concatenate([cache.gather(s)[0] for s in live] or [empty]),
            "v_gathered": np.concatenate([cache.gather(s)[1] for s in live] or [empty])}


def _simulate(inputs: Mapping[str, np.ndarray], p: Mapping[str, Any]) -> dict[str, np.ndarray]:
    t = inputs["trace"]
    trace = [K.Request(float(a), int(pl), int(ol)) for a, pl, ol in t.tolist()]
    out: dict[str, np.ndarray] = {}
    for policy in ("contiguous", "paged"):
        r = K.simulate(trace, policy, memory_slots=p["memory_slots"], max_len=p["max_len"],
                       block_size=p["block_size"])
        out[f"{policy}_counts"] = np.array(
            [r.steps, r.finished, r.peak_running, r.preemptions, r.generated_tokens],
            np.int64)
        out[f"{policy}_fractions"] = np.array(
            [r.utilization, r.waste, r.memory_utilization], np.float64)
        out[f"{policy}_request_waste"] = np.array(r.request_waste, np.int64)
    return out


def _paged_attention(inputs: Mapping[str, np.ndarray],
                     p: Mapping[str, Any]) -> dict[str, np.ndarray]:
    cache, status, _, _ = _replay(inputs, p)
    if status.any():
        raise ValueError("paged-attention traces must apply every operation")
    live = sorted(s for s in cache.sequences() if cache.length(s) > 0)
    mask = MaskOptions(causal=p["causal"],
                       causal_alignment=p.get("causal_alignment", "bottom_right"))
    out, lse, _ = K.paged_attention(inputs["q"], cache, live, block_q=p["block_q"], mask=mask)
    naive = np.concatenate([
        naive_attention(inputs["q"][i:i + 1], *(t.transpose(1, 0, 2)[None]
                                                for t in cache.gather(s)),
                        dtype="fp16", mask=mask)
        for i, s in enumerate(live)])
    return {"out": out, "lse": lse, "naive": naive}


OPERATIONS = [
    Operation("kvcache.trace", _trace,
              "replay ops on refimpl.kvcache.PagedKVCache(num_blocks, block_size, "
              "num_kv_heads, head_dim, layout=, enable_prefix_caching=)"),
    Operation("kvcache.paged_attention", _paged_attention,
              "replay ops, then refimpl.kvcache.paged_attention(q, cache, live sequences, "
              "block_q=, mask=MaskOptions(causal=, causal_alignment=)); naive: FP16 naive "
              "attention of each gathered sequence"),
    Operation("kvcache.simulate", _simulate,
              "refimpl.kvcache.simulate(trace, policy) for contiguous and paged"),
]


def _random_trace(n_ops: int, max_seqs: int, heads: int, dim: int, shared_prefix: bool):
    def build(rng: CaseRandom) -> dict[str, np.ndarray]:
        live: list[int] = []
        nxt = 0
        rows, tokens, ks, vs = [], [], [], []
        base_prompt = rng.integers(0, 1000, 40).tolist()
        # K/V of a token depends on its prefix: prompts sharing the base prefix share rows
        base_k, base_v = rng.normal((40, heads, dim)), rng.normal((40, heads, dim))
        for _ in range(n_ops):
            kind = int(rng.integers(0, 10))
            if not live or (kind < 3 and len(live) < max_seqs):
                plen = int(rng.integers(1, 40))
                if shared_prefix and rng.integers(0, 2) == 1:
                    prompt = base_prompt[:plen]
                    ks.append(base_k[:plen])
                    vs.append(base_v[:plen])
                else:
                    prompt = rng.integers(0, 1000, plen).tolist()
                    ks.append(rng.normal((plen, heads, dim)))
                    vs.append(rng.normal((plen, heads, dim)))
                extra = int(rng.integers(0, 2)) - 1 if shared_prefix else -1
                rows.append([0, nxt, plen, extra])
                tokens += prompt
                live.append(nxt)
                nxt += 1
            elif kind < 7:
                s = live[int(rng.integers(0, len(live)))]
                n = int(rng.integers(1, 12))
                rows.append([1, s, n, 0])
                ks.append(rng.normal((n, heads, dim)))
                vs.append(rng.normal((n, heads, dim)))
            elif kind < 8 and len(live) < max_seqs:
                s = live[int(rng.integers(0, len(live)))]
                rows.append([2, s, nxt, 0])
                live.append(nxt)
                nxt += 1
            else:
                s = live.pop(int(rng.integers(0, len(live))))
                rows.append([3, s, 0, 0])
        return {"ops": np.array(rows, np.int64), "tokens": np.array(tokens, np.int64),
                "k": np.concatenate(ks), "v": np.concatenate(vs)}
    return build


LSE_ORDER = "exact scores; float64 fixed-order sum of exp over keys"


def _paged_attention_input(rng: CaseRandom) -> dict[str, np.ndarray]:
    """add 0 (13 tokens), add 1 (21), fork 0 -> 2, append 5 to 2 (copy-on-write),
    append 3 to 0, add 3 (9), free 1: live sequences 0, 2, 3 (16, 18, 9 tokens)."""
    ops = np.array([[0, 0, 13, -1], [0, 1, 21, -1], [2, 0, 2, 0], [1, 2, 5, 0],
                    [1, 0, 3, 0], [0, 3, 9, -1], [3, 1, 0, 0]], np.int64)
    n_kv = 13 + 21 + 5 + 3 + 9

    def t(*shape: int) -> np.ndarray:       # multiples of 1/16: exact in FP16 and BF16
        return rng.integers(-64, 65, shape).astype(np.float32) / np.float32(16)

    return {"ops": ops, "tokens": rng.integers(0, 1000, 13 + 21 + 9),
            "k": t(n_kv, 2, 16), "v": t(n_kv, 2, 16), "q": t(3, 4, 3, 16)}


def _sharegpt(n: int, seed: int):
    def build(rng: CaseRandom) -> dict[str, np.ndarray]:
        trace = K.sharegpt_like_trace(n, seed=seed)
        return {"trace": np.array([[r.arrival, r.prompt_len, r.output_len] for r in trace],
                                  np.float64)}
    return build


def cases() -> list[CaseSpec]:
    out = []
    configs = [("small", 24, 4, "NHD", False, 40, 0), ("prefix", 32, 4, "NHD", True, 60, 1),
               ("hnd", 24, 8, "HND", False, 40, 1), ("tight", 10, 4, "NHD", True, 80, 1),
               ("long", 128, 16, "NHD", True, 400, 2)]
    for name, blocks, bs, layout, prefix, n_ops, level in configs:
        out.append(CaseSpec(
            f"kvcache.trace.{name}", "kvcache.trace",
            {"num_blocks": blocks, "block_size": bs, "num_kv_heads": 2, "head_dim": 4,
             "layout": layout, "prefix_caching": prefix},
            _random_trace(n_ops, 6, 2, 4, prefix), level=level, variant=VARIANT,
            description=f"{n_ops} add/append/fork/free operations on {blocks} blocks of "
                        f"{bs} tokens, {layout}, prefix caching {prefix}"))
    out.append(CaseSpec(
        "kvcache.paged_attention.decode_and_prefill", "kvcache.paged_attention",
        {"num_blocks": 32, "block_size": 8, "num_kv_heads": 2, "head_dim": 16,
         "layout": "NHD", "prefix_caching": False, "block_q": 4, "causal": True,
         "causal_alignment": "bottom_right"},
        _paged_attention_input, tolerance={"out": RelativeToNaive(2.0, "naive", 1e-5),
                                           "lse": AllClose(1e-5, 1e-5, LSE_ORDER)},
        reference=("naive",), level=1,
        variant={"choice": "causal_alignment", "option": "bottom_right"},
        description="3 sequences (one forked, copy-on-write, ragged last pages), 3 queries "
                    "each, GQA 4/2, causal (bottom-right: the queries are each sequence's "
                    "last tokens), read through the page table"))
    frac_tol = {f"{p}_fractions": Ulp(8, "fp64") for p in ("contiguous", "paged")}
    out.append(CaseSpec("kvcache.simulate.sharegpt200", "kvcache.simulate",
                        {"memory_slots": 16 * 2048, "max_len": 2048, "block_size": 16},
                        _sharegpt(200, 0), tolerance=frac_tol, level=1,
                        variant={"choice": "kv_scheduler", "option": "fcfs_recompute"},
                        description="200 ShareGPT-like requests, contiguous vs paged"))
    return out


AREA = Area("kvcache", SPECS, OPERATIONS, cases)
