"""The hypothesis strategies keep the promises their docstrings make: types, shapes and
ranges, the special values they claim to reach, the kind of block they claim to build,
valid masks and operation sequences.

Oracles: special codes and element values listed by hand or enumerated from the format
layouts (``tests/oracles.py``), block properties restated from the docstrings (a
power-of-two amax, an outlier 2^24 above the rest, every value representable after a
power-of-two scale), and a replay of the operation sequences.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st

from oracle import strategies as S
from oracles import ELEMENT_LAYOUTS, element_table

FIND = settings(max_examples=2000, database=None, derandomize=True)


# ----- codes ------------------------------------------------------------------------------

def test_special_codes_hand_listed() -> None:
    # zero, min subnormal, max subnormal, min normal, one, max, NaN; both signs
    assert S.special_codes("e4m3") == [0x00, 0x80, 0x01, 0x81, 0x07, 0x87, 0x08, 0x88,
                                       0x38, 0xB8, 0x7E, 0xFE, 0x7F, 0xFF]
    # E5M2: ... max 0x7B, then Inf 0x7C and the last NaN 0x7F
    assert S.special_codes("e5m2")[-6:] == [0x7B, 0xFB, 0x7C, 0xFC, 0x7F, 0xFF]
    # E2M1 (no Inf, no NaN): 0, 0.5 (the only subnormal), 1 (min normal = one), 6
    assert S.special_codes("e2m1") == [0x0, 0x8, 0x1, 0x9, 0x2, 0xA, 0x7, 0xF]
    assert S.special_codes("e8m0") == [0x00, 0x01, 0x7F, 0xFE, 0xFF]


@pytest.mark.parametrize("name", list(ELEMENT_LAYOUTS))
def test_special_codes_decode_to_their_named_values(name: str) -> None:
    """Zero, the smallest subnormal, one and the largest finite value of each element
    format are among the special codes (values from the layout, OCP MX v1.0 5.3)."""
    e, m, bias, largest = ELEMENT_LAYOUTS[name]
    by_value = {v: c for v, c in element_table(e, m, bias, largest)}
    sign = 1 << (e + m)
    special = S.special_codes(name)
    for v in (Fraction(0), Fraction(2) ** (1 - bias - m), Fraction(1), largest):
        assert by_value[v] in special and by_value[v] | sign in special, v


@settings(max_examples=60)
@given(S.codes("e2m1", shape=(8,)), S.codes("bf16"), S.codes("e4m3", shape=(2, 3)))
def test_codes_types_and_ranges(a: np.ndarray, c: int, b: np.ndarray) -> None:
    assert a.dtype == np.uint8 and a.shape == (8,) and (a < 16).all()
    assert type(c) is int and 0 <= c < 1 << 16
    assert b.dtype == np.uint8 and b.shape == (2, 3)


def test_codes_reach_the_special_codes() -> None:
    # about half the draws are special: the NaN and the largest codes come up at once
    for code in (0x7F, 0xFE, 0x01):
        assert find(S.codes("e4m3"), lambda c, code=code: c == code, settings=FIND) == code
    assert find(S.codes("bf16"), lambda c: c == 0x7F80, settings=FIND) == 0x7F80  # +Inf


# ----- floats_near ------------------------------------------------------------------------

E2M1 = [float(v) for v, _ in element_table(*ELEMENT_LAYOUTS["e2m1"])]
E2M1_TIES = [(a + b) / 2 for a, b in zip(E2M1, E2M1[1:])] + [7.0]   # 7: the overflow tie


@settings(max_examples=100)
@given(S.floats_near("e2m1"), S.floats_near("e4m3", dtype=np.float64),
       S.floats_near("e2m1", nan=False, shape=4))
def test_floats_near_types_and_placement(x, y, arr) -> None:
    assert isinstance(x, np.float32) and isinstance(y, np.float64)
    assert arr.dtype == np.float32 and arr.shape == (4,) and not np.isnan(arr).any()
    a = abs(float(x))
    if math.isfinite(a) and a not in E2M1 and a not in E2M1_TIES:
        # a neighbour of a value or tie, or a random value three binades below the
        # smallest subnormal (2^-1) to two above the largest (6 < 2^3): [2^-4, 2^5)
        up, down = (abs(float(np.nextafter(x, np.float32(t)))) for t in (np.inf, -np.inf))
        near = {up, down} & set(E2M1 + E2M1_TIES)
        assert near or 2.0 ** -4 <= a < 2.0 ** 5, a


@pytest.mark.parametrize("target", [0.25, 5.0, -7.0])
def test_floats_near_reach_every_tie(target: float) -> None:
    """Every rounding tie of E2M1, the overflow tie 7 included, both signs."""
    got = find(S.floats_near("e2m1"), lambda v: v == target, settings=FIND)
    assert got == target


def test_floats_near_reach_the_neighbours_of_a_tie() -> None:
    above = np.nextafter(np.float32(0.75), np.float32(1))
    assert find(S.floats_near("e2m1"), lambda v: v == above, settings=FIND) == above


# ----- blocks -----------------------------------------------------------------------------

def _blocks(x: np.ndarray, size: int) -> np.ndarray:
    return x.reshape(-1, size)


@settings(max_examples=40)
@given(S.mx_blocks("e4m3", max_blocks=3), S.nvfp4_blocks(rows=2),
       S.mx_blocks("e2m1", block_size=4, min_blocks=2, max_blocks=2, rows=3))
def test_blocks_shapes(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> None:
    assert x.ndim == 1 and x.dtype == np.float32 and x.size // 32 in (1, 2, 3)
    assert x.size % 32 == 0
    assert y.dtype == np.float32 and y.shape[0] == 2 and y.shape[1] // 16 in (1, 2, 3, 4)
    assert y.shape[1] % 16 == 0
    assert z.shape == (3, 8) and z.dtype == np.float32


def _is_pow2(v: float) -> bool:
    m, _ = math.frexp(v)
    return m == 0.5


@settings(max_examples=40)
@given(S.mx_blocks("e4m3", max_blocks=2, kinds=["pow2_amax"]),
       S.mx_blocks("e2m1", max_blocks=2, kinds=["below_pow2_amax"]))
def test_pow2_blocks(x: np.ndarray, y: np.ndarray) -> None:
    for b in _blocks(x, 32):
        assert _is_pow2(float(np.abs(b).max()))
    for b in _blocks(y, 32):
        above = float(np.nextafter(np.abs(b).max(), np.float32(np.inf)))
        assert _is_pow2(above)                       # one float32 ulp below a power of two


@settings(max_examples=40)
@given(S.mx_blocks("e4m3", max_blocks=2, kinds=["outlier"]),
       S.mx_blocks("e4m3", max_blocks=2, kinds=["subnormal"]),
       S.mx_blocks("e4m3", max_blocks=2, kinds=["zero"]))
def test_outlier_subnormal_and_zero_blocks(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> None:
    for b in _blocks(x, 32):
        mags = np.sort(np.abs(b.astype(np.float64)))
        assert mags[-1] >= 2.0 ** 24 * mags[-2]      # one outlier, the rest 2^24 below
    for b in _blocks(y, 32):
        assert np.abs(b).max() < 2.0 ** -126         # a float32 subnormal amax (or zero)
    assert not z.any()


@settings(max_examples=40)
@given(S.mx_blocks("e2m1", max_blocks=2, kinds=["nan"]),
       S.mx_blocks("e2m1", max_blocks=2, kinds=["inf"]),
       S.mx_blocks("e2m1", max_blocks=2, kinds=["random", "exact"]))
def test_nonfinite_blocks_only_when_asked(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> None:
    for b in _blocks(x, 32):
        assert np.isnan(b).sum() == 1 and not np.isinf(b).any()
    for b in _blocks(y, 32):
        assert np.isinf(b).sum() == 1 and not np.isnan(b).any()
    assert np.isfinite(z).all()


@pytest.mark.parametrize("name", ["e4m3", "e2m1"])
@settings(max_examples=25)
@given(data=st.data())
def test_exact_blocks_are_representable_after_a_power_of_two(name: str, data) -> None:
    values = {v for v, _ in element_table(*ELEMENT_LAYOUTS[name])}
    x = data.draw(S.mx_blocks(name, max_blocks=2, kinds=["exact"]))
    for b in _blocks(x, 32):
        mags = [abs(Fraction(float(v))) for v in b]
        assert any(all(v * Fraction(2) ** -k in values for v in mags) for k in range(-20, 21))


# ----- attention --------------------------------------------------------------------------

def _check_attention(a: dict, *, max_seq: int = 33, dims=(1, 8, 16),
                     alignments=("bottom_right", "top_left")) -> None:
    q, k, v = a["q"], a["k"], a["v"]
    assert q.dtype == k.dtype == v.dtype == np.float32
    assert q.ndim == 4 and k.shape == v.shape
    assert q.shape[0] == k.shape[0] and q.shape[1] % k.shape[1] == 0      # GQA groups
    assert q.shape[-1] == k.shape[-1] in dims
    assert 1 <= q.shape[2] <= max_seq and 1 <= k.shape[2] <= max_seq
    for t in (q, k, v):                               # multiples of 1/64 in [-4, 4]
        assert np.array_equal(t * 64, np.round(t * 64)) and np.abs(t).max() <= 4
    assert type(a["causal"]) is bool and a["causal_alignment"] in alignments
    if a["window"] is not None:
        assert all(0 <= w <= max_seq for w in a["window"])
    m = a["key_padding_mask"]
    if m is not None:
        assert m.dtype == bool and m.shape == (k.shape[0], k.shape[2])
        n = m.sum(axis=1)                             # right padding: a run of True first
        assert np.array_equal(m, np.arange(k.shape[2])[None, :] < n[:, None])


@settings(max_examples=40)
@given(S.attention_inputs())
def test_attention_inputs(a: dict) -> None:
    _check_attention(a)


@settings(max_examples=25)
@given(S.attention_inputs(masks=False, max_seq=5, dims=(4,)),
       S.attention_inputs(window=False, alignments=("top_left",)))
def test_attention_inputs_options(plain: dict, a: dict) -> None:
    _check_attention(plain, max_seq=5, dims=(4,))
    assert (plain["causal"], plain["window"], plain["key_padding_mask"]) == (False, None, None)
    _check_attention(a, alignments=("top_left",))
    assert a["window"] is None


def test_attention_inputs_reach_empty_keys_only_when_allowed() -> None:
    a = find(S.attention_inputs(allow_empty=True), lambda a: a["k"].shape[2] == 0,
             settings=FIND)
    assert a["k"].shape[2] == 0 and a["v"].shape[2] == 0


@settings(max_examples=25)
@given(S.attention_inputs())
def test_attention_inputs_are_accepted_by_the_reference(a: dict) -> None:
    from refimpl.attention import attention

    out = attention(a["q"], a["k"], a["v"], causal=a["causal"],
                    causal_alignment=a["causal_alignment"], window=a["window"],
                    key_padding_mask=a["key_padding_mask"])
    assert out.shape == a["q"].shape and not np.isnan(out).any()


# ----- KV-cache operations ----------------------------------------------------------------

def _replay(ops: list, *, max_ops: int, max_seqs: int, max_tokens: int, fork: bool) -> None:
    assert 1 <= len(ops) <= max_ops
    live: set[int] = set()
    next_id = 0
    for op in ops:
        if op[0] == "add":
            assert op[1] == next_id and 0 <= op[2] <= max_tokens     # ids 0, 1, ... in order
            live.add(op[1])
            next_id += 1
        elif op[0] == "fork":
            assert fork and op[1] in live and op[2] == next_id
            live.add(op[2])
            next_id += 1
        elif op[0] == "free":
            assert len(op) == 2 and op[1] in live
            live.remove(op[1])
        else:
            assert op[0] == "append" and op[1] in live and 1 <= op[2] <= 20
        assert len(live) <= max_seqs


@settings(max_examples=60)
@given(S.kvcache_ops(), S.kvcache_ops(max_ops=8, max_seqs=2, max_tokens=3, fork=False))
def test_kvcache_ops_name_live_sequences(ops: list, small: list) -> None:
    _replay(ops, max_ops=30, max_seqs=6, max_tokens=40, fork=True)
    _replay(small, max_ops=8, max_seqs=2, max_tokens=3, fork=False)


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
        st_ = cache.stats()
        assert st_.used_blocks + st_.free_blocks == 16


def test_the_profiles_ship_with_the_package(monkeypatch) -> None:
    from hypothesis import settings

    from oracle.strategies import PROFILES, register_profiles

    before = settings._current_profile
    try:
        monkeypatch.setenv("CI", "1")
        monkeypatch.delenv("HYPOTHESIS_PROFILE", raising=False)
        assert register_profiles() == "ci"
        assert settings().derandomize and settings().database is None
        monkeypatch.setenv("HYPOTHESIS_PROFILE", "thorough")
        assert register_profiles() == "thorough" and settings().max_examples == 2000
        monkeypatch.setenv("HYPOTHESIS_PROFILE", "fast")
        with pytest.raises(ValueError, match="known profiles are ci, dev, thorough"):
            register_profiles()
        assert set(PROFILES) == {"ci", "dev", "thorough"}
    finally:
        settings.load_profile(before)


def test_the_test_suite_runs_under_the_shipped_profiles() -> None:
    """tests/conftest.py registers the shipped profiles; ``ci`` keeps the settings the
    suite's own profile had: derandomised, no deadline, no database, the reproduction
    blob printed, 50 examples, the slow-reference and large-data health checks off."""
    from hypothesis import HealthCheck, settings

    ci = settings.get_profile("ci")
    assert ci.derandomize is True and ci.deadline is None and ci.database is None
    assert ci.print_blob is True and ci.max_examples == 50
    assert set(ci.suppress_health_check) == {HealthCheck.too_slow,
                                             HealthCheck.data_too_large}
    dev = settings.get_profile("dev")
    assert dev.deadline is None and dev.max_examples == 50
    assert settings.get_profile("thorough").max_examples == 2000
