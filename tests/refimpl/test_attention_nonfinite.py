"""Rows with non-finite scores (float32 overflow of a correctly rounded dot product):
the convention of refimpl.attention.reference, the same in every schedule, and row
independence (a bad row never changes another row's bytes)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from refimpl.attention import (
    OnlineState, attention, finalize, flash_v1, flash_v2, flash_v3,
    merge_attention_states, online_block_update, split_kv,
)
from refimpl.kvcache import PagedKVCache, paged_attention
from refimpl.matmul import resolve_accumulation

BIG = np.float32(2.0**64)  # BIG * 2^66 = 2^130: beyond float32 (max < 2^128)
SQ, SK, D, HQ, HKV = 6, 9, 4, 2, 1
POS, NEG = 1, 4  # query rows with a +inf score / with a -inf score (head 0)
KEY = 2  # the key that overflows (visible to rows POS and NEG under causal)


def _inputs(bad: bool = True):
    """q (1, 2, 6, 4), k, v (1, 1, 9, 4): small scores everywhere, except (head 0) row
    POS whose score with key KEY is +2^130 -> +inf and row NEG whose score with it is
    -2^130 -> -inf. ``bad=False``: the same with row POS's query set to 0."""
    rng = np.random.default_rng(7)
    q = rng.standard_normal((1, HQ, SQ, D)).astype(np.float32)
    k = rng.standard_normal((1, HKV, SK, D)).astype(np.float32)
    v = rng.standard_normal((1, HKV, SK, D)).astype(np.float32)
    q[..., 0] = 0.0
    k[..., 0] = 0.0
    k[0, :, KEY, 0] = np.float32(2.0**66)
    q[0, 0, NEG, 0] = -BIG
    q[0, 0, POS, 0] = BIG if bad else 0.0
    return q, k, v


def _paged(q, k, v, block_q, page, **opts):
    c = PagedKVCache(8, page, HKV, D)
    c.add_sequence(0)
    c.append(0, k[0].transpose(1, 0, 2), v[0].transpose(1, 0, 2))
    return paged_attention(q, c, [0], block_q=block_q, **opts)[:2]


def _schedules(opts):
    """name -> function (q, k, v) -> (out, lse or None); tiles of 4 x 4 so that the bad
    row shares every tile and product with good rows."""
    exact_model = resolve_accumulation("exact")  # a model object: flash_v3's own loop
    return {
        "reference": lambda q, k, v: attention(q, k, v, return_lse=True, **opts),
        "flash_v1": lambda q, k, v: (flash_v1(q, k, v, block=(4, 4), **opts)[0], None),
        "flash_v2": lambda q, k, v: flash_v2(q, k, v, block=(4, 4), **opts)[:2],
        "flash_v2_plain": lambda q, k, v: flash_v2(q, k, v, block=(4, 4),
                                                   implementation="plain", **opts)[:2],
        "split_kv": lambda q, k, v: split_kv(q, k, v, num_splits=3, block=(4, 2),
                                             **opts)[:2],
        "flash_v3": lambda q, k, v: flash_v3(q, k, v, block=(4, 4), **opts)[:2],
        "flash_v3_loop": lambda q, k, v: flash_v3(q, k, v, block=(4, 4),
                                                  accumulate=exact_model, **opts)[:2],
        "flash_v3_fp8": lambda q, k, v: flash_v3(q, k, v, block=(4, 4), fp8=True,
                                                 **opts)[:2],
        "paged": lambda q, k, v: _paged(q, k, v, 4, 4, **opts),
    }


OPTIONS = [{}, {"causal": True}, {"alibi_slopes": [0.25, 0.5], "window": (4, 1)}]
NAMES = list(_schedules({}))


# fp8 quantisation scales are per tile of Q: a huge query changes its tile's scale by
# design, so the fp8 path is checked for NaN placement only (below)
ISOLATED = [n for n in NAMES if n != "flash_v3_fp8"]


@pytest.mark.parametrize("opts", OPTIONS, ids=["plain", "causal", "alibi_window"])
@pytest.mark.parametrize("name", ISOLATED)
def test_pos_inf_row_is_nan_and_isolated(name, opts):
    """Row POS (a +inf score): out NaN in every element, LSE +inf. Every other row:
    the same bytes as with row POS's query replaced by 0 (nothing of the bad row
    reaches them, in particular not through the error screen of the P V product)."""
    f = _schedules(opts)[name]
    out, lse = f(*_inputs())
    out_ok, lse_ok = f(*_inputs(bad=False))
    nan_rows = np.zeros(out.shape[:-1], dtype=bool)
    nan_rows[0, 0, POS] = True
    assert np.array_equal(np.isnan(out).any(axis=-1), nan_rows)
    assert np.isnan(out[0, 0, POS]).all()
    keep = ~nan_rows
    assert np.array_equal(out[keep], out_ok[keep])
    if lse is not None:
        assert lse[0, 0, POS] == np.inf
        assert np.array_equal(lse[keep], lse_ok[keep])
        assert not np.isnan(lse).any()


@pytest.mark.parametrize("opts", OPTIONS, ids=["plain", "causal", "alibi_window"])
def test_schedules_agree_on_nonfinite_rows(opts):
    """NaN in the same places and the same LSE specials in every schedule; the schedules
    defined to give flash_v2's bytes (plain, flash_v3 without fp8, paged) give them."""
    res = {name: f(*_inputs()) for name, f in _schedules(opts).items()}
    ref_nan = np.isnan(res["reference"][0])
    for name, (out, lse) in res.items():
        assert np.array_equal(np.isnan(out), ref_nan), name
        if lse is not None:
            assert lse[0, 0, POS] == np.inf, name
            assert np.isfinite(lse[0, 0, NEG]) or opts.get("causal"), name
    o2, l2 = res["flash_v2"]
    for name in ("flash_v2_plain", "flash_v3", "flash_v3_loop", "paged"):
        out, lse = res[name]
        assert np.array_equal(out, o2, equal_nan=True), name
        assert np.array_equal(lse, l2), name


def test_neg_inf_score_is_a_masked_key():
    """Row NEG's -inf score (key KEY) weighs nothing: its result equals that of the
    same row with key KEY masked by the key padding mask (no causal alignment, so the
    mask changes nothing else)."""
    q, k, v = _inputs()
    mask = np.ones((1, SK), dtype=bool)
    mask[0, KEY] = False
    for name, f in _schedules({}).items():
        if name in ("flash_v3_fp8", "paged"):
            continue  # fp8: the huge query changes its tile's scale; paged: no mask
        out, lse = f(q, k, v)
        g = _schedules({"key_padding_mask": mask})[name]
        out_m, lse_m = g(q, k, v)
        assert np.array_equal(out[0, 0, NEG], out_m[0, 0, NEG]), name
        if lse is not None:
            assert lse[0, 0, NEG] == lse_m[0, 0, NEG], name


def test_by_hand_single_row():
    """Two queries, two keys: scores (+inf, 0) give out NaN, LSE +inf in every
    schedule; scores (-inf, 0) give v_1 and LSE 0 (by hand)."""
    k = np.array([[2.0**66, 0.0], [0.0, 0.0]], np.float32)[None, None]
    v = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)[None, None]
    q = np.array([[BIG, 0.0], [-BIG, 0.0]], np.float32)[None, None]
    for name, f in _schedules({}).items():
        if name in ("split_kv", "paged"):
            continue  # shapes of the helper (one KV head, D = 4)
        out, lse = f(q, k, v)
        assert np.isnan(out[0, 0, 0]).all(), name
        if lse is not None:
            assert lse[0, 0, 0] == np.inf, name
        if name == "flash_v3_fp8":
            continue  # V is quantised to E4M3
        # row 1: scores (-inf, 0): all weight on key 1, out = v_1, LSE = 0
        assert np.array_equal(out[0, 0, 1], [3.0, 4.0]), name
        if lse is not None:
            assert lse[0, 0, 1] == 0.0, name


def test_online_nan_score_row():
    """A NaN score (not reachable from finite inputs; the building blocks still follow
    the convention): that row NaN output and NaN LSE, a +inf row NaN and +inf, the
    others exactly as without them."""
    s = np.array([[[[0.0, np.nan, 1.0], [0.0, np.inf, 1.0], [0.0, 0.0, math.log(3.0)],
                    [-np.inf, -np.inf, -np.inf]]]], np.float32)
    v = np.array([[[[1.0], [2.0], [4.0]]]], np.float32)
    out, lse = finalize(online_block_update(OnlineState.initial((1, 1, 4), 1), s, v))
    assert np.isnan(out[0, 0, 0, 0]) and np.isnan(lse[0, 0, 0])
    assert np.isnan(out[0, 0, 1, 0]) and lse[0, 0, 1] == np.inf
    # row 2: weights 1, 1, 3 (over 5): out = (1 + 2 + 12) / 5 = 3, LSE = ln 5
    assert abs(out[0, 0, 2, 0] - 3.0) <= 4 * 2.0**-24 * 3.0
    assert abs(lse[0, 0, 2] - math.log(5.0)) <= 4 * 2.0**-24 * 2.0
    assert out[0, 0, 3, 0] == 0.0 and lse[0, 0, 3] == -np.inf
    # later tiles keep the row NaN / +inf
    st = online_block_update(OnlineState.initial((1, 1, 4), 1), s, v)
    out2, lse2 = finalize(online_block_update(st, np.zeros_like(s), v))
    assert np.isnan(out2[0, 0, :2]).all() and np.isnan(lse2[0, 0, 0])
    assert lse2[0, 0, 1] == np.inf and np.isfinite(out2[0, 0, 2:]).all()


def test_merge_nonfinite_parts():
    """merge_attention_states: a part with LSE NaN makes the row NaN / NaN; else a part
    with LSE +inf makes it NaN / +inf; other rows unchanged; -inf parts weigh nothing."""
    outs = np.array([[[1.0], [1.0], [1.0], [2.0]],
                     [[np.nan], [np.nan], [3.0], [5.0]],
                     [[np.nan], [0.0], [0.0], [0.0]]], np.float32)
    lses = np.array([[0.0, 0.0, 0.0, 0.0],
                     [np.nan, np.inf, 0.0, 0.0],
                     [np.inf, -np.inf, -np.inf, -np.inf]], np.float32)
    out, lse = merge_attention_states(outs, lses)
    assert np.isnan(out[0, 0]) and np.isnan(lse[0])
    assert np.isnan(out[1, 0]) and lse[1] == np.inf
    # rows 2, 3: two parts of weight 1/2 each; LSE ln 2
    assert out[2, 0] == 2.0 and out[3, 0] == 3.5
    assert lse[2] == np.float32(math.log(2.0)) and lse[3] == np.float32(math.log(2.0))
    ok_out, ok_lse = merge_attention_states(outs[:2, 2:], lses[:2, 2:])
    assert np.array_equal(out[2:], ok_out) and np.array_equal(lse[2:], ok_lse)


def test_softcap_caps_an_overflowed_score():
    """With softcap the cap comes first: an overflowed score +-inf becomes
    ``cap * tanh(+-inf) = +-cap`` (also the correctly capped value of the exact score,
    whose tanh rounds to +-1), so the row is an ordinary one. By hand, row POS with cap
    c has scores (c at key KEY, the capped small ones elsewhere), all finite."""
    q, k, v = _inputs()
    c = 2.0
    res = {name: f(q, k, v) for name, f in _schedules({"softcap": c}).items()}
    for name, (out, lse) in res.items():
        assert np.isfinite(out).all(), name
        if lse is not None:
            assert np.isfinite(lse).all(), name
    # key KEY's score is exactly c for row POS and -c for row NEG
    from refimpl.attention import prepare, scores
    prob = prepare(q, k, v, softcap=c)
    s, _, _ = scores(prob, prob.q, np.repeat(prob.k, 2, axis=1), np.arange(SQ),
                     np.arange(SK))
    assert s[0, 0, POS, KEY] == np.float32(c) and s[0, 0, NEG, KEY] == np.float32(-c)
    o2, l2 = res["flash_v2"]
    for name in ("flash_v2_plain", "flash_v3", "flash_v3_loop", "paged"):
        assert np.array_equal(res[name][0], o2) and np.array_equal(res[name][1], l2), name


def test_backward_refuses_rows_without_gradient():
    """The forward's +inf row (LSE +inf, output NaN) has no gradient: both backward
    functions say so (which argument, which index) instead of spreading NaN into dK
    and dV."""
    from refimpl.attention import attention_backward, flash_v2_backward

    q, k, v = _inputs()
    out, lse = attention(q, k, v, return_lse=True)
    do = np.ones_like(out)
    for f in (attention_backward, flash_v2_backward):
        with pytest.raises(ValueError, match=r"lse\[0, 0, 1\] = inf"):
            f(q, k, v, out, do, lse)
        lse_ok = np.where(np.isfinite(lse), lse, 0.0)
        with pytest.raises(ValueError, match=r"o must be finite; o\[0, 0, 1, 0\]"):
            f(q, k, v, out, do, lse_ok)
