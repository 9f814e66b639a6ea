"""Hypothesis draws shared by the attention fast-path tests: the shapes, the mask
options and the shift of every logit by about 1e4 (the fast paths must give the plain
loops' bytes under each of them)."""
from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st


def shapes(draw) -> tuple:
    """(rng, batch, Hq, Hkv, Sq, Sk, D): a seeded generator and small shapes, GQA when
    Hq = 2 Hkv, 1..20 queries and keys (so tiles rarely divide them)."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    batch = draw(st.sampled_from([(), (2,)]))
    hkv = draw(st.integers(1, 2))
    hq = hkv * draw(st.integers(1, 2))
    sq = draw(st.integers(1, 20))
    sk = draw(st.integers(1, 20))
    d = draw(st.sampled_from([1, 8, 64]))
    return rng, batch, hq, hkv, sq, sk, d


def mask_options(draw, rng: np.random.Generator, batch: tuple[int, ...], hq: int,
                 sq: int, sk: int) -> dict:
    """Causal, a window, softcap, ALiBi slopes and padding masks, each drawn on or off,
    and either alignment of the diagonal (it places the window too)."""
    opts: dict = {}
    if draw(st.booleans()):
        opts["causal"] = True
    opts["causal_alignment"] = draw(st.sampled_from(["bottom_right", "top_left"]))
    if draw(st.booleans()):
        opts["window"] = (draw(st.one_of(st.none(), st.integers(0, 6))),
                          draw(st.one_of(st.none(), st.integers(0, 6))))
    if draw(st.booleans()):
        opts["softcap"] = draw(st.sampled_from([1.0, 5.0, 30.0]))
    if draw(st.booleans()):
        opts["alibi_slopes"] = (2.0 ** -rng.integers(1, 8, hq)).astype(np.float32)
    if draw(st.booleans()):
        opts["key_padding_mask"] = rng.random(batch + (sk,)) < 0.8
    if draw(st.booleans()):
        opts["query_padding_mask"] = rng.random(batch + (sq,)) < 0.8
    return opts


def maybe_large_logits(draw, q: np.ndarray, k: np.ndarray, v: np.ndarray, opts: dict):
    """(q, k, v), drawn either unchanged or with every logit about 1e4 larger: an extra
    coordinate 100 * 100 with ``scale`` 1 (written into ``opts``)."""
    if not draw(st.booleans()):
        return q, k, v
    d = q.shape[-1]
    lead_q, lead_k = q.shape[:-1] + (1,), k.shape[:-1] + (1,)
    q = np.concatenate([q * np.float32(1 / math.sqrt(d)),
                        np.full(lead_q, 100.0, np.float32)], axis=-1)
    k = np.concatenate([k, np.full(lead_k, 100.0, np.float32)], axis=-1)
    v = np.concatenate([v, np.zeros(lead_k, np.float32)], axis=-1)
    opts["scale"] = 1.0
    return q, k, v
