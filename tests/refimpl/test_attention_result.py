"""refimpl.attention.result: the named result of every schedule (``out``, ``lse``,
``stats``; the tuple of the parts asked for), the gradients' result, flash_v1's LSE
against a float64 reference, and the tile helpers."""
from __future__ import annotations

import math
import pickle
import warnings

import numpy as np
import pytest

from refimpl.attention import (
    AttentionGradients, AttentionResult, ScheduleStats, attention, attention_backward,
    flash_v1, flash_v2, flash_v2_backward, flash_v3, split_kv, standard_attention,
)
from refimpl.attention.tiles import DEFAULT_BLOCK, check_block, tile_ranges
from refimpl.kvcache import PagedKVCache, paged_attention

RNG = np.random.default_rng(8)
B, HQ, SQ, SK, D = 1, 2, 6, 9, 4


def _x(*shape):
    return (RNG.integers(-32, 33, shape) / 16).astype(np.float32)


Q, K, V = _x(B, HQ, SQ, D), _x(B, HQ, SK, D), _x(B, HQ, SK, D)


def _paged(**kw):
    c = PagedKVCache(8, 4, HQ, D)
    c.add_sequence(0)
    c.append(0, K[0].transpose(1, 0, 2), V[0].transpose(1, 0, 2))
    return paged_attention(Q, c, [0], block_q=4, **kw)


#: name -> (call(return_lse), default of return_lse)
SCHEDULES = {
    "standard_attention": (lambda r: standard_attention(Q, K, V, return_lse=r), False),
    "flash_v1": (lambda r: flash_v1(Q, K, V, block=(2, 4), return_lse=r), False),
    "flash_v2": (lambda r: flash_v2(Q, K, V, block=(4, 4), return_lse=r), True),
    "flash_v3": (lambda r: flash_v3(Q, K, V, block=(4, 4), return_lse=r), True),
    "split_kv": (lambda r: split_kv(Q, K, V, num_splits=2, block=(4, 4), return_lse=r),
                 True),
    "paged_attention": (lambda r: _paged(return_lse=r), True),
}


def _lse64(q, k, scale=None, visible=None):
    """Natural log-sum-exp of each row of ``scale q k^T`` in float64 (fully masked rows
    ``-inf``), written from the definition."""
    s = np.einsum("bhqd,bhkd->bhqk", q.astype(np.float64), k.astype(np.float64))
    s = s * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)
    if visible is not None:
        s = np.where(visible, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    m_ok = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        return (np.log(np.exp(s - m_ok).sum(axis=-1, keepdims=True)) + m_ok)[..., 0]


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_every_schedule_returns_the_named_result(name):
    call, default = SCHEDULES[name]
    ref_out, ref_lse = attention(Q, K, V, return_lse=True)
    for return_lse in (True, False):
        r = call(return_lse)
        assert isinstance(r, AttentionResult) and isinstance(r, tuple)
        assert isinstance(r.stats, ScheduleStats) and r[-1] is r.stats
        assert r.out is r[0] and r.out.shape == (B, HQ, SQ, D) and r.out.dtype == np.float32
        # every schedule is within a few ulp of the exact reference on these inputs
        np.testing.assert_allclose(r.out, ref_out, rtol=1e-5, atol=1e-6)
        if return_lse:
            assert r.present == ("out", "lse", "stats") and len(r) == 3
            out, lse, stats = r
            assert lse is r.lse and r.lse.shape == (B, HQ, SQ)
            np.testing.assert_allclose(r.lse, ref_lse, rtol=1e-5, atol=1e-6)
        else:
            assert r.present == ("out", "stats") and len(r) == 2 and r.lse is None
            out, stats = r
        assert out is r.out and stats is r.stats
    # the default of return_lse is today's: the unpacking of existing calls still works
    r = call(default)
    assert len(r) == (3 if default else 2)


def test_reference_returns_a_bare_array_unless_lse_is_asked():
    out = attention(Q, K, V)
    assert type(out) is np.ndarray
    r = attention(Q, K, V, return_lse=True)
    assert isinstance(r, AttentionResult) and r.present == ("out", "lse")
    assert r.stats is None and np.array_equal(r.out, out)
    np.testing.assert_allclose(r.lse, _lse64(Q, K), rtol=1e-6, atol=1e-6)


def test_gradients_are_named():
    out, lse = attention(Q, K, V, return_lse=True)
    do = _x(B, HQ, SQ, D)
    g = attention_backward(Q, K, V, out, do, lse)
    assert isinstance(g, AttentionGradients) and g.present == ("dq", "dk", "dv")
    dq, dk, dv = g
    assert (dq is g.dq, dk is g.dk, dv is g.dv, g.stats) == (True, True, True, None)
    f = flash_v2_backward(Q, K, V, out, do, lse, block=(2, 4))
    dq2, dk2, dv2, st = f
    assert st is f.stats and isinstance(st, ScheduleStats) and dk2 is f.dk
    for a, b in ((dq, dq2), (dk, dk2), (dv, dv2)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_result_is_immutable_picklable_and_readable():
    r = flash_v2(Q, K, V, block=(4, 4), return_lse=False)
    with pytest.raises(AttributeError, match="immutable"):
        r.out = None  # type: ignore[misc]
    with pytest.raises(AttributeError, match="immutable"):
        r._values = ()  # type: ignore[misc]
    back = pickle.loads(pickle.dumps(r))
    assert back.present == ("out", "stats") and back.lse is None
    assert np.array_equal(back.out, r.out) and back.stats == r.stats
    assert r._asdict().keys() == {"out", "lse", "stats"}
    assert "out=<float32 array (1, 2, 6, 4)>" in repr(r) and "lse=None" in repr(r)
    with pytest.raises(TypeError, match="needs out"):
        AttentionResult(None)
    with pytest.raises(TypeError, match="lsee"):
        AttentionResult(r.out, lsee=r.out)  # type: ignore[call-arg]


# ----------------------------------------------------------------- flash_v1's LSE
@pytest.mark.parametrize("block", [(1, 1), (2, 4), (8, 16)])
@pytest.mark.parametrize("causal", [False, True])
def test_flash_v1_lse_matches_a_float64_reference(block, causal):
    """LSE = fl32(m + ln l) of the final HBM state: within a few float32 ulps of the
    float64 log-sum-exp of the scores (the scores here are exact: multiples of 1/64
    times 1/2). Sq > Sk rows under bottom-right causal see no key: ``-inf``."""
    q, k, v = _x(2, 3, 11, D), _x(2, 3, 7, D), _x(2, 3, 7, D)
    r = flash_v1(q, k, v, block=block, causal=causal, return_lse=True)
    vis = None
    if causal:  # bottom right: row i sees key j iff j <= i + Sk - Sq
        vis = np.arange(7)[None, :] <= np.arange(11)[:, None] + 7 - 11
    want = _lse64(q, k, visible=vis)
    assert np.array_equal(np.isneginf(r.lse), np.isneginf(want))
    if causal:
        assert np.isneginf(r.lse[..., :4]).all() and np.isfinite(r.lse[..., 4:]).all()
    ok = np.isfinite(want)
    np.testing.assert_allclose(r.lse[ok], want[ok], rtol=4 * 2.0**-24, atol=2.0**-22)


def test_flash_v1_lse_of_an_overflowing_row_is_inf():
    """A score beyond float32's range (+inf): output NaN and LSE +inf in that row only,
    as every schedule does."""
    q = np.zeros((1, 2, 4), np.float32)
    k = np.zeros((1, 3, 4), np.float32)
    q[0, 1] = 2.0**100
    k[0, 2] = 2.0**100
    r = flash_v1(q, k, k, block=(1, 2), scale=1.0, return_lse=True)
    assert r.lse[0, 1] == np.inf and np.isnan(r.out[0, 1]).all()
    assert r.lse[0, 0] == np.float32(math.log(3)) and not np.isnan(r.out[0, 0]).any()


# ----------------------------------------------------------------- flash_v3 fmt
def test_flash_v3_old_fp8_format_spelling_warns_and_gives_the_same_bytes():
    q = _x(1, 2, 8, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        new = flash_v3(q, q, q, block=(4, 4), fp8=True, fmt="e5m2")
    with pytest.warns(DeprecationWarning, match=r"fp8_format=.*use fmt="):
        old = flash_v3(q, q, q, block=(4, 4), fp8=True, fp8_format="e5m2")
    assert new.out.tobytes() == old.out.tobytes() and new.lse.tobytes() == old.lse.tobytes()
    assert new.stats == old.stats
    e4 = flash_v3(q, q, q, block=(4, 4), fp8=True)
    assert e4.out.tobytes() != new.out.tobytes()  # the format reaches the computation
    with pytest.raises(TypeError, match="both fp8_format=.*and fmt="):
        flash_v3(q, q, q, fp8=True, fp8_format="e5m2", fmt="e4m3")


# ----------------------------------------------------------------- tiles
def test_tile_helpers():
    assert DEFAULT_BLOCK == (128, 128)
    assert check_block([2, np.int64(3)]) == (2, 3)
    with pytest.raises(TypeError, match="pair"):
        check_block(4)
    with pytest.raises(TypeError, match="pair"):
        check_block("ab")
    with pytest.raises(ValueError, match="pair"):
        check_block((1, 2, 3))
    with pytest.raises(ValueError, match="B_c"):
        check_block((1, 0))
    with pytest.raises(TypeError, match="B_r"):
        check_block((1.0, 2))
    tiles = tile_ranges(10, 4, start=1)
    assert [t.tolist() for t in tiles] == [[1, 2, 3, 4], [5, 6, 7, 8], [9]]
