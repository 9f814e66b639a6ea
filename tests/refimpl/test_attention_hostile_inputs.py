"""Hostile inputs to every attention entry point: wide floats, values float32 cannot
hold, huge windows and split counts, inputs beyond the size limit."""
import time

import numpy as np
import pytest

from refimpl import attention as A
from refimpl.attention import split_kv
from refimpl.attention.online import OnlineState, online_block_update
from refimpl.attention.split_kv import MAX_SPLITS_BEYOND_KEYS, split_ranges
from refimpl.kvcache import PagedKVCache, paged_attention

WIDE = np.finfo(np.longdouble).nmant > 52
needs_wide = pytest.mark.skipif(not WIDE, reason="longdouble is float64 on this platform")

RNG = np.random.default_rng(28)
Q = RNG.standard_normal((1, 2, 3, 4)).astype(np.float32)
DO = RNG.standard_normal((1, 2, 3, 4)).astype(np.float32)


def _paged(q, k, v, dtype=np.float32):
    cache = PagedKVCache(4, 2, 2, 4, dtype=dtype)
    cache.add_sequence("s")
    cache.append("s", np.ascontiguousarray(k[0].transpose(1, 0, 2)).astype(dtype),
                 np.ascontiguousarray(v[0].transpose(1, 0, 2)).astype(dtype))
    return paged_attention(q, cache, ["s"])[0]


def _backward(q, k, v):
    out, lse = A.attention(Q, Q, Q, return_lse=True)
    return A.attention_backward(q, k, v, out, DO, lse).dq


#: every forward entry point taking q, k, v, as (q, k, v) -> output
SCHEDULES = {
    "attention": lambda q, k, v: A.attention(q, k, v),
    "naive": lambda q, k, v: A.naive_attention(q, k, v),
    "standard": lambda q, k, v: A.standard_attention(q, k, v)[0],
    "flash_v1": lambda q, k, v: A.flash_v1(q, k, v, block=(2, 2))[0],
    "flash_v2": lambda q, k, v: A.flash_v2(q, k, v, block=(2, 2))[0],
    "flash_v3": lambda q, k, v: A.flash_v3(q, k, v, block=(2, 2))[0],
    "split_kv": lambda q, k, v: split_kv(q, k, v, num_splits=2, block=(2, 2))[0],
    "backward": _backward,
}


@needs_wide
@pytest.mark.parametrize("name", sorted(SCHEDULES))
@pytest.mark.parametrize("arg", [0, 1, 2])
def test_longdouble_values_float32_cannot_hold_are_refused(name, arg):
    qkv = [Q, Q, Q]
    wide = Q.astype(np.longdouble)
    wide[0, 1, 2, 3] += np.longdouble(2) ** -40  # not a float32 (nor a float64) value
    qkv[arg] = wide
    with pytest.raises(ValueError, match=rf"{'qkv'[arg]} holds a value that is not a "
                                         r"float32 value at index \(0, 1, 2, 3\)"):
        SCHEDULES[name](*qkv)


@needs_wide
@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_longdouble_holding_float32_values_gives_the_float32_result(name):
    wide = Q.astype(np.longdouble)
    assert np.array_equal(SCHEDULES[name](wide, wide, wide), SCHEDULES[name](Q, Q, Q))


@pytest.mark.parametrize("bad", [np.ones((1, 2, 3, 4), np.complex64),
                                 np.ones((1, 2, 3, 4), bool), np.ones((1, 2, 3, 4), np.int64),
                                 np.full((1, 2, 3, 4), "1"), np.ones((1, 2, 3, 4), object)])
@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_non_float_inputs_are_refused(name, bad):
    with pytest.raises(ValueError, match="k must be a floating-point array"):
        SCHEDULES[name](Q, bad, Q)


@needs_wide
def test_paged_attention_refuses_wide_storage_that_is_not_float32():
    cache = PagedKVCache(2, 2, 2, 4, dtype=np.longdouble)
    cache.add_sequence("s")
    k = np.ones((3, 2, 4), np.longdouble)
    k[1, 0, 2] += np.longdouble(2) ** -40
    cache.append("s", k, np.ones((3, 2, 4), np.longdouble))
    with pytest.raises(ValueError, match="not a float32 value at token 1, head 0, lane 2"):
        paged_attention(Q, cache, ["s"])
    # wide storage holding float32 values reads as the float32 cache does; pages of 2
    # keys are flash_v2's key tiles
    want = A.flash_v2(Q, Q, Q, block=(A.DEFAULT_BLOCK[0], 2))[0]
    assert np.array_equal(_paged(Q, Q, Q), want)
    assert np.array_equal(_paged(Q, Q, Q, np.longdouble), want)


def test_online_block_update_refuses_float64_scores_that_are_not_float32():
    state = OnlineState.initial((1, 2), 4)
    with pytest.raises(ValueError, match=r"s holds a value that is not a float32 value "
                                         r"at index \(1, 0\)"):
        online_block_update(state, np.array([[0.5, 1.0], [0.1, 0.0]]), np.ones((2, 4), np.float32))


def test_backward_refuses_an_upstream_gradient_float32_cannot_hold():
    out, lse = A.attention(Q, Q, Q, return_lse=True)
    do = DO.astype(np.float64)
    do[0, 0, 1, 2] = 0.1
    with pytest.raises(ValueError, match=r"do holds a value that is not a float32 value "
                                         r"at index \(0, 0, 1, 2\)"):
        A.flash_v2_backward(Q, Q, Q, out, do, lse, block=(2, 2))


@pytest.mark.parametrize("window, same", [((2**70, 0), (None, 0)), ((0, 2**90), (0, None)),
                                          ((2**63, 2**64), None)])
def test_windows_beyond_any_distance_are_unbounded(window, same):
    # 2**70 once overflowed int64 (a raw OverflowError): it means "no bound" here
    assert np.array_equal(A.attention(Q, Q, Q, window=window),
                          A.attention(Q, Q, Q, window=same))
    assert np.array_equal(A.flash_v2(Q, Q, Q, window=window, block=(2, 2))[0],
                          A.flash_v2(Q, Q, Q, window=same, block=(2, 2))[0])


def test_split_counts_beyond_the_keys_are_bounded():
    assert MAX_SPLITS_BEYOND_KEYS == 128
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=r"num_splits = 1000000000 is more than 3 keys can "
                                         r"fill: at most max\(Sk, 128\) = 128 parts"):
        split_kv(Q, Q, Q, num_splits=10**9)
    with pytest.raises(ValueError, match="at most max"):
        split_ranges(3, 1, 129)
    assert time.perf_counter() - t0 < 0.5
    # up to 128 parts (most of them empty) give the one-pass result's values
    out = split_kv(Q, Q, Q, num_splits=128, block=(2, 1))[0]
    np.testing.assert_allclose(out, A.attention(Q, Q, Q), rtol=2**-20, atol=2**-22)
    assert len(split_ranges(300, 1, 300)) == 300  # one key per part


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_inputs_beyond_the_size_limit_are_refused_at_once(name):
    huge = np.broadcast_to(np.float32(0), (2**12, 1, 2**12, 2**6))  # 2^30 elements
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=r"q: the working copies of an array of shape "
                                         r"\(4096, 1, 4096, 64\).*over the limit"):
        SCHEDULES[name](huge, Q, Q)
    assert time.perf_counter() - t0 < 0.5


def test_reference_backward_refuses_a_score_matrix_beyond_the_limit():
    q = np.broadcast_to(np.float32(0), (1, 1, 2**15, 1))
    k = np.broadcast_to(np.float32(0), (1, 1, 2**15, 1))  # 2^30 scores x 8 bytes: 8 GiB
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=r"q, k: the \(B, Hq, Sq, Sk\) score matrices"):
        A.attention_backward(q, k, k, q, q, q[..., 0])
    assert time.perf_counter() - t0 < 0.5
