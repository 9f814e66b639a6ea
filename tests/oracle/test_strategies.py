"""The hypothesis strategies produce what they promise."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings

from oracle import strategies as S


def test_special_codes_e4m3_hand_listed() -> None:
    # zero, min subnormal, max subnormal, min normal, one, max, NaN; both signs
    assert S.special_codes("e4m3") == [0x00, 0x80, 0x01, 0x81, 0x07, 0x87, 0x08, 0x88,
                                       0x38, 0xB8, 0x7E, 0xFE, 0x7F, 0xFF]
    assert 0x7C in S.special_codes("e5m2") and 0x7F in S.special_codes("e5m2")   # Inf, NaN
    assert S.special_codes("e8m0") == [0x00, 0x01, 0x7F, 0xFE, 0xFF]


@settings(max_examples=60)
@given(S.codes("e2m1", shape=(8,)), S.codes("bf16"))
def test_codes_in_range(a: np.ndarray, c: int) -> None:
    assert a.dtype == np.uint8 and (a < 16).all()
    assert 0 <= c < 1 << 16


@settings(max_examples=60)
@given(S.floats_near("e4m3", dtype=np.float64), S.floats_near("e2m1", nan=False, shape=4))
def test_floats_near(x, arr) -> None:
    assert isinstance(x, np.float64)
    assert arr.dtype == np.float32 and not np.isnan(arr).any()


@settings(max_examples=40)
@given(S.mx_blocks("e4m3", max_blocks=3), S.nvfp4_blocks(rows=2))
def test_blocks_shapes(x: np.ndarray, y: np.ndarray) -> None:
    assert x.ndim == 1 and x.size % 32 == 0 and x.dtype == np.float32
    assert y.shape[0] == 2 and y.shape[1] % 16 == 0


@settings(max_examples=60)
@given(S.mx_blocks("e2m1", min_blocks=1, max_blocks=1, kinds=["below_pow2_amax"]))
def test_below_pow2_block(x: np.ndarray) -> None:
    amax = np.abs(x).max()
    m, _ = np.frexp(amax)
    assert m == np.float32(np.nextafter(np.float32(1), np.float32(0)))     # 1 - 2^-24


@settings(max_examples=40)
@given(S.attention_inputs())
def test_attention_inputs(a: dict) -> None:
    q, k, v = a["q"], a["k"], a["v"]
    assert q.shape[0] == k.shape[0] and q.shape[1] % k.shape[1] == 0
    assert k.shape == v.shape and q.shape[-1] == k.shape[-1]
    assert np.array_equal(q * 64, np.round(q * 64))
    if a["key_padding_mask"] is not None:
        assert a["key_padding_mask"].shape == (k.shape[0], k.shape[2])


@settings(max_examples=60)
@given(S.kvcache_ops())
def test_kvcache_ops_name_live_sequences(ops: list) -> None:
    live: set[int] = set()
    for op in ops:
        if op[0] == "add":
            assert op[1] not in live
            live.add(op[1])
        elif op[0] == "fork":
            assert op[1] in live and op[2] not in live
            live.add(op[2])
        elif op[0] == "free":
            assert op[1] in live
            live.remove(op[1])
        else:
            assert op[1] in live and op[2] >= 1


@settings(max_examples=25)
@given(S.attention_inputs())
def test_attention_inputs_are_accepted_by_the_reference(a: dict) -> None:
    from refimpl.attention import attention

    out = attention(a["q"], a["k"], a["v"], causal=a["causal"],
                    causal_alignment=a["causal_alignment"], window=a["window"],
                    key_padding_mask=a["key_padding_mask"])
    assert out.shape == a["q"].shape and not np.isnan(out).any()


@settings(max_examples=25)
@given(S.kvcache_ops(max_tokens=20))
def test_kvcache_ops_drive_the_paged_cache(ops: list) -> None:
    from refimpl.kvcache import OutOfBlocksError, PagedKVCache

    cache = PagedKVCache(16, 4, 1, 2)
    for op in ops:
        if op[0] != "add" and op[1] not in cache:
            continue                       # its admission failed for lack of blocks
        try:
            if op[0] == "add":
                cache.add_sequence(op[1])
                n = op[2]
                cache.append(op[1], np.ones((n, 1, 2), np.float32),
                             np.ones((n, 1, 2), np.float32))
            elif op[0] == "append":
                n = op[2]
                cache.append(op[1], np.ones((n, 1, 2), np.float32),
                             np.ones((n, 1, 2), np.float32))
            elif op[0] == "fork":
                cache.fork(op[1], op[2])
            else:
                cache.free(op[1])
        except OutOfBlocksError:
            if op[0] == "add":
                cache.free(op[1])
        st = cache.stats()
        assert st.used_blocks + st.free_blocks == 16
