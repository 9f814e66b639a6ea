"""The fast paths of the online-softmax step: layout-keeping fold and elementary
functions, in-place state updates. Each is checked against its plain counterpart
(:func:`refimpl.summation.fold_sum`, the row-major result of the elementary functions,
:func:`refimpl.attention.online_block_update`) byte for byte, on row-major and
key-major (transposed) memory."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refimpl import elementary
from refimpl.attention import OnlineState, online_block_update
from refimpl.attention.online import _fold_last, online_step
from refimpl.attention.products import matmul_f32
from refimpl.summation import fold_sum, fold_sum_axis1


def key_major(x: np.ndarray) -> np.ndarray:
    """The same values, stored with the last two axes swapped in memory."""
    return np.swapaxes(np.ascontiguousarray(np.swapaxes(x, -1, -2)), -1, -2)


@settings(max_examples=40)
@given(st.integers(0, 300), st.integers(1, 5), st.integers(0, 2**32 - 1))
def test_fold_last_is_fold_sum(n, rows, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, rows, n)) * 10.0 ** rng.integers(-8, 8, (2, rows, n))
    if n:
        x[0, 0] = -0.0  # an all -0 row keeps its sign
    for arr in (x, key_major(x)):
        want = fold_sum(arr, axis=-1)
        got = _fold_last(arr)
        assert got.shape == want.shape
        assert np.ascontiguousarray(got).tobytes() == want.tobytes()


@settings(max_examples=40)
@given(st.integers(0, 300), st.integers(1, 4), st.integers(1, 5), st.integers(0, 2**32 - 1))
def test_fold_sum_axis1_is_fold_sum(c, n, w, seed):
    """The in-place fold of the fast path and of the product resolution: the additions
    of fold_sum, the same bytes, with and without a given scratch array."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c, w)) * 10.0 ** rng.integers(-8, 8, (n, c, w))
    if c:
        x[0, :, 0] = -0.0  # an all -0 column keeps its sign
    want = fold_sum(x, axis=1)
    for buf in (None, np.full((n, (c + 1) // 2 + 2, w + 3), np.nan)[:, :(c + 1) // 2, :w]):
        got = fold_sum_axis1(x, buf)
        assert got.shape == want.shape
        assert np.ascontiguousarray(got).tobytes() == want.tobytes()


@pytest.mark.parametrize("fn", ["exp", "expm1", "tanh"])
@pytest.mark.parametrize("shape", [(3, 7), (2, 4, 130), (1, 1, 128, 300)])
def test_elementary_on_key_major_memory_is_row_major_result(fn, shape):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape) * 20
    x.reshape(-1)[:4] = (-np.inf, 0.0, -800.0, np.nan)
    want = getattr(elementary, fn)(x)
    got = getattr(elementary, fn)(key_major(x))
    assert got.shape == want.shape
    assert np.ascontiguousarray(got).tobytes() == want.tobytes()


def _states(rng, rows, dv):
    st0 = OnlineState.initial((2, rows), dv)
    s = rng.standard_normal((2, rows, 9)).astype(np.float32) * 4
    s[0, 0] = -np.inf  # a row with no visible key yet
    s[1, 1, :4] = -np.inf
    v = rng.standard_normal((2, 9, dv)).astype(np.float32)
    return st0, s, v


def test_online_step_in_place_and_key_major_match_block_update():
    rng = np.random.default_rng(2)
    state, s, v = _states(rng, 5, 3)
    want = online_block_update(state, s, v)
    s2 = rng.standard_normal((2, 5, 9)).astype(np.float32) * 30
    v2 = rng.standard_normal((2, 9, 3)).astype(np.float32)
    want2 = online_block_update(want, s2, v2)

    def run(layout):
        acc = np.zeros((2, 5, 3), np.float32) if layout == "row" else key_major(
            np.zeros((2, 5, 3), np.float32))
        st_ = OnlineState(np.full((2, 5), -np.inf, np.float32), np.zeros((2, 5), np.float32),
                          acc)
        for s_, v_ in ((s, v), (s2, v2)):
            s_in = s_ if layout == "row" else key_major(s_)
            got = online_step(st_, s_in, lambda p, p64, v_=v_: matmul_f32(p, v_), out=st_)
            assert got is st_
        return st_

    for layout in ("row", "key"):
        got = run(layout)
        for a, b in ((got.m, want2.m), (got.l, want2.l), (got.acc, want2.acc)):
            assert np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()


def test_online_step_without_out_leaves_state_unchanged():
    rng = np.random.default_rng(3)
    state, s, v = _states(rng, 4, 2)
    state = online_block_update(state, s, v)
    before = [x.copy() for x in (state.m, state.l, state.acc)]
    new = online_step(state, s * 2, lambda p, p64: matmul_f32(p, v))
    assert new is not state
    for a, b in zip(before, (state.m, state.l, state.acc)):
        assert a.tobytes() == b.tobytes()
