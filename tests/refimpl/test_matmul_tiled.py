"""tiled_matmul: traffic counts equal the closed forms, values equal matmul."""
from __future__ import annotations

import math

import numpy as np
import pytest

from refimpl.matmul import BlockFMA, Chunked, Sequential, matmul, tiled_matmul


def closed_form(m: int, n: int, k: int, bm: int, bn: int, bk: int) -> dict:
    tiles = math.ceil(m / bm) * math.ceil(n / bn)
    return {
        "global_reads_a": m * k * math.ceil(n / bn),
        "global_reads_b": k * n * math.ceil(m / bm),
        "global_writes": m * n,
        "shared_reads": 2 * m * n * k,
        "tiles": tiles,
        "k_steps": tiles * math.ceil(k / bk),
        "padded_global_reads": tiles * math.ceil(k / bk) * (bm * bk + bk * bn),
    }


@pytest.mark.parametrize("n, t", [(4, 2), (8, 4), (16, 4), (12, 3), (7, 2), (10, 4), (5, 8)])
def test_square_counts_match_closed_forms(n, t):
    a = np.arange(n * n, dtype=np.float32).reshape(n, n) % 7 - 3
    b = np.arange(n * n, dtype=np.float32).reshape(n, n) % 5 - 2
    c, st = tiled_matmul(a, b, block=(t, t, t))
    want = closed_form(n, n, n, t, t, t)
    for key, value in want.items():
        assert getattr(st, key) == value, key
    assert st.shared_writes == st.global_reads
    assert st.tile_utilisation == (n * n) / (math.ceil(n / t) ** 2 * t * t)
    if n % t == 0:  # each input element read N/T times from global memory, not N
        assert st.global_reads_a == n * n * (n // t) and st.global_reads_b == n * n * (n // t)
        assert st.padded_global_reads == st.global_reads
    else:  # ragged: fewer real loads than full tiles would make
        assert st.padded_global_reads > st.global_reads
    assert np.array_equal(c, matmul(a, b))


def test_untiled_limit_reads_each_element_n_times():
    n = 6
    a = np.ones((n, n), np.float32)
    _, st = tiled_matmul(a, a, block=(1, 1, n))
    assert st.global_reads_a == n * n * n and st.global_reads_b == n * n * n


@pytest.mark.parametrize("shape, tile", [((5, 7, 3), (2, 3, 4)), ((9, 4, 6), (4, 4, 5)),
                                         ((3, 10, 11), (8, 2, 3))])
def test_rectangular_and_batched_counts(shape, tile):
    m, k, n = shape
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    c, st = tiled_matmul(a, b, block=tile)
    want = closed_form(m, n, k, *tile)
    for key, value in want.items():
        assert getattr(st, key) == 2 * value, key
    assert np.array_equal(c, matmul(a, b))


@pytest.mark.parametrize("model", [
    "exact", Sequential(), Sequential(fma=True), "pairwise", Chunked(5, inner="sequential"),
    Chunked(4), BlockFMA.preset("V100-FP16"), BlockFMA.preset("H100-FP8"), BlockFMA(3, 20),
])
@pytest.mark.parametrize("tile", [(4, 4, 4), (3, 5, 7), (16, 16, 2)])
def test_values_equal_matmul_under_each_model(model, tile):
    rng = np.random.default_rng(1)
    a = (rng.standard_normal((11, 19)) * 2.0 ** rng.integers(-10, 10, (11, 19))).astype(np.float32)
    b = rng.standard_normal((19, 9)).astype(np.float32)
    c, _ = tiled_matmul(a, b, block=tile, accumulate=model)
    assert c.tobytes() == matmul(a, b, accumulate=model).tobytes()


def test_bad_tile():
    a = np.ones((2, 2), np.float32)
    with pytest.raises(ValueError, match="BK"):
        tiled_matmul(a, a, block=(2, 2, 0))
    with pytest.raises(ValueError, match="tuple"):
        tiled_matmul(a, a, block=(2, 2))


def test_257_columns_need_six_tiles():
    """Tile quantisation: 128-wide tiles cover 256 columns with 2 x 2 tiles; one more
    column (257) needs 2 x 3 = 6, the extra column of tiles holding a single column."""
    a = np.ones((256, 8), np.float32)
    _, even = tiled_matmul(a, np.ones((8, 256), np.float32), block=(128, 128, 8))
    _, ragged = tiled_matmul(a, np.ones((8, 257), np.float32), block=(128, 128, 8))
    assert even.tiles == 4 and even.tile_utilisation == 1.0
    assert ragged.tiles == 6
    assert ragged.tile_utilisation == (256 * 257) / (6 * 128 * 128)
