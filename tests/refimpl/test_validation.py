"""The shared argument checks: integers a working precision cannot hold are refused at
every entry point (never rounded to a neighbour), flags take only bools, counts and
indices only ints; degenerate sizes give clean results or clean errors."""
from __future__ import annotations

import re
from fractions import Fraction

import numpy as np
import pytest

from refimpl import attention as A
from refimpl import formats as F
from refimpl import scaling as S
from refimpl import softmax as SM
from refimpl.elementary import exp, log
from refimpl.kvcache import PagedKVCache, paged_attention
from refimpl.matmul import Sequential, exact_dot_reference, exact_matmul64, matmul
from refimpl.summation import fold_sum
from refimpl.validation import (as_float, as_float_array, check_axis, check_bool, check_index,
                                check_int, check_positive_int)

BIG = 2**53 + 1          # the smallest positive integer float64 cannot hold


# --------------------------------------------------------------------------- the checks


@pytest.mark.parametrize("x, index", [
    (np.array([[1, BIG]]), [0, 1]),
    (np.array([2**63 - 1]), [0]),                         # int64 max: float64 2^63
    (np.array([3, 2**64 - 1], dtype=np.uint64), [1]),     # uint64 max: float64 2^64
    (np.array([2**63 + 1], dtype=np.uint64), [0]),
    ([0.5, 2**63 + 1, -1], [1]),                          # NumPy makes this float64
    ([[2**70 + 1]], [0, 0]),                              # an object array
    (np.array([1, 2**80 + 1], dtype=object), [1]),
])
def test_integers_float64_cannot_hold_are_refused(x, index) -> None:
    with pytest.raises(ValueError, match=re.escape(f"x{index} = ") + r"\d+ is an integer "
                       "that float64"):
        as_float_array(x)


@pytest.mark.parametrize("x", [np.array([-2**63]), np.array([2**53, -2**53]),
                               [2**70], np.array([2**64 - 2**11], dtype=np.uint64)])
def test_exact_integers_are_kept(x) -> None:
    got = as_float_array(x)
    assert got.dtype == np.float64
    # Python compares an int and a float exactly
    assert all(float(g) == int(v) for g, v in zip(got.ravel(), np.asarray(x).ravel()))


def test_float32_working_precision() -> None:
    assert as_float_array(np.array([2**24, 2**30]), precision=np.float32).tolist() == \
        [2.0**24, 2.0**30]
    with pytest.raises(ValueError, match=r"x\[1\] = 16777217 .* float32"):
        as_float_array(np.array([0, 2**24 + 1], dtype=np.int32), precision=np.float32)


def test_non_numbers_are_refused() -> None:
    with pytest.raises(ValueError, match=r"x\[1\] = 'a'"):
        as_float_array(np.array([1, "a"], dtype=object))
    for bad in (np.array([True]), np.array([1j])):
        with pytest.raises(ValueError, match="dtype"):
            as_float_array(bad)


def test_scalar_numbers() -> None:
    assert as_float("scale", np.int64(3)) == 3.0
    with pytest.raises(ValueError, match="scale = 9007199254740993"):
        as_float("scale", BIG)
    for bad in (True, "1", None, np.ones(1)):
        with pytest.raises(TypeError, match="scale"):
            as_float("scale", bad)


def test_flags_counts_and_indices() -> None:
    assert check_bool("f", np.bool_(True)) is True
    for bad in ("false", 0, 1, None, np.array([True])):
        with pytest.raises(TypeError, match="f must be True or False"):
            check_bool("f", bad)
    assert check_positive_int("n", np.int64(4)) == 4 and type(check_positive_int("n", 4)) is int
    for bad in (True, 4.0, "4", None):
        with pytest.raises(TypeError, match="n must be an int"):
            check_positive_int("n", bad)
    with pytest.raises(ValueError, match="n must be a positive int"):
        check_positive_int("n", 0)
    with pytest.raises(ValueError, match="n must be <= 3"):
        check_int("n", 4, maximum=3)
    for bad in (-1, 5):
        with pytest.raises(ValueError, match=rf"block {bad} out of range \[0, 5\)"):
            check_index("block", bad, 5)


# --------------------------------------------------------------------- every entry point


def test_matmul_refuses_the_issue_example_and_keeps_exact_integers() -> None:
    # exact answer 1; float64 would make it 2^53 - 2^53 = 0
    with pytest.raises(ValueError, match=r"a\[0, 0\] = 9007199254740993"):
        matmul(np.array([[BIG, -2**53]]), np.array([[1], [1]]))
    with pytest.raises(ValueError, match=r"a\[0, 0\]"):
        matmul([[BIG, -2**53]], [[1], [1]])
    with pytest.raises(ValueError, match=r"b\[0, 0\] = 18446744073709551615"):
        matmul(np.ones((1, 1), np.float32), np.array([[2**64 - 1]], dtype=np.uint64))
    with pytest.raises(ValueError, match=r"a\[0, 0\] = 9223372036854775807"):
        matmul(np.array([[2**63 - 1]]), np.array([[1]]))
    # without in_format, matmul takes float32 values: 2^24 + 1 is not one
    with pytest.raises(ValueError, match=r"a\[0, 1\] = 16777217 .* float32"):
        matmul(np.array([[1, 2**24 + 1]]), np.array([[1], [1]]))
    # exact integers are values like any other: 2^24 + 1 rounds (tie) to even 2^24
    got = matmul(np.array([[2**24, 1]]), np.array([[1], [1]]))
    assert got.dtype == np.float32 and float(got[0, 0]) == 2.0**24
    # with in_format the integers are rounded once from their exact value
    got = matmul(np.array([[2**40 + 2**32 + 1]]), np.array([[1]]), in_format="bf16")
    # bf16 keeps 8 significant bits: 2^40 + 2^32 + 1 is just above the tie 2^40 + 2^32
    # between 2^40 and 2^40 + 2^33, so it rounds up (a float64 pre-rounding would not
    # change it here, but the integer is checked before any rounding)
    assert Fraction(float(got[0, 0])) == Fraction(2**40 + 2**33)
    with pytest.raises(ValueError, match="float64"):
        matmul(np.array([[BIG]]), np.array([[1]]), in_format="bf16")


@pytest.mark.parametrize("call", [
    lambda x: F.encode(x, "bf16"),
    lambda x: F.round_to(x, "e4m3"),
    lambda x: S.mx_quantize(np.resize(x, 32), "e4m3"),
    lambda x: S.nvfp4_quantize(np.resize(x, (1, 16))),
    lambda x: S.block_fp8_quantize(np.resize(x, (1, 128))),
    lambda x: S.tensor_scale(x[0]),
    lambda x: S.tensor_quantize(x, 1.0),
    lambda x: SM.softmax(x),
    lambda x: SM.logsumexp(x),
    lambda x: SM.online_softmax(x),
    lambda x: exp(x),
    lambda x: log(x),
    lambda x: fold_sum(x),
    lambda x: S.quantization_error(x, np.zeros(2)),
    lambda x: A.naive_error_bound(x, np.zeros(2)),
    lambda x: A.merge_attention_states(x[None, None, :], np.zeros((1, 1))),
    lambda x: A.online_block_update(A.OnlineState.initial((1,), 2), x[None, :],
                                    np.ones((2, 2), np.float32)),
    lambda x: exact_dot_reference(x, x),
    lambda x: exact_matmul64(x[None, :], x[:, None]),
])
def test_every_entry_point_refuses_inexact_integers(call) -> None:
    # float32 entry points refuse 2^24 + 1, float64 ones 2^53 + 1: BIG fails both
    with pytest.raises(ValueError, match="9007199254740993"):
        call(np.array([BIG, 1]))


def test_attention_numbers() -> None:
    q = np.ones((1, 2, 2, 4), np.float32)
    with pytest.raises(ValueError, match="scale = 9007199254740993"):
        A.attention(q, q, q, scale=BIG)
    with pytest.raises(ValueError, match=r"alibi_slopes\[1\] = 9007199254740993"):
        A.attention(q, q, q, alibi_slopes=np.array([1, BIG]))
    with pytest.raises(TypeError, match="softcap"):
        A.attention(q, q, q, softcap="30")


# -------------------------------------------------------------------------------- flags


def _qkv(b=1, h=2, s=3, d=4):
    r = np.arange(b * h * s * d, dtype=np.float32).reshape(b, h, s, d) / np.float32(16)
    return r, r[..., ::-1].copy(), r * np.float32(0.5)


@pytest.mark.parametrize("call", [
    lambda q, k, v, bad: A.attention(q, k, v, causal=bad),
    lambda q, k, v, bad: A.attention(q, k, v, return_lse=bad),
    lambda q, k, v, bad: A.flash_v2(q, k, v, causal=bad),
    lambda q, k, v, bad: A.flash_v2(q, k, v, return_lse=bad),
    lambda q, k, v, bad: A.flash_v3(q, k, v, fp8=bad),
    lambda q, k, v, bad: A.flash_v3(q, k, v, block_quantization=bad),
    lambda q, k, v, bad: A.flash_v3(q, k, v, incoherent=bad),
    lambda q, k, v, bad: A.flash_v3(q, k, v, return_lse=bad),
    lambda q, k, v, bad: A.split_kv(q, k, v, num_splits=2, return_lse=bad),
    lambda q, k, v, bad: A.naive_attention(q, k, v, causal=bad),
    lambda q, k, v, bad: F.encode(q, "e4m3", saturate=bad),
    lambda q, k, v, bad: S.mx_quantize(np.ones(33), "e2m1", pad=bad),
    lambda q, k, v, bad: S.nvfp4_quantize(np.ones((1, 16)), hadamard=bad),
    lambda q, k, v, bad: S.tensor_scale(1.0, power_of_two=bad),
    lambda q, k, v, bad: S.hadamard_transform(np.ones(16), inverse=bad),
    lambda q, k, v, bad: fold_sum(q, keepdims=bad),
    lambda q, k, v, bad: PagedKVCache(4, 4, 1, 4, enable_prefix_caching=bad),
    lambda q, k, v, bad: F.Format("x", 4, 3, signed=bad),
    lambda q, k, v, bad: F.pack(np.zeros(4, np.uint8), "e2m3", dense=bad),
    lambda q, k, v, bad: F.unpack(np.zeros(3, np.uint8), "e2m3", 4, dense=bad),
    lambda q, k, v, bad: Sequential(fma=bad),
])
@pytest.mark.parametrize("bad", ["false", 0, 1, None])
def test_boolean_flags_refuse_non_bools(call, bad) -> None:
    q, k, v = _qkv()
    with pytest.raises(TypeError, match="must be True or False"):
        call(q, k, v, bad)


def test_causal_false_string_no_longer_masks_and_numpy_bools_work() -> None:
    q, k, v = _qkv()
    with pytest.raises(TypeError, match="causal"):
        A.attention(q, k, v, causal="false")
    assert np.array_equal(A.attention(q, k, v, causal=np.bool_(True)),
                          A.attention(q, k, v, causal=True))
    assert not np.array_equal(A.attention(q, k, v, causal=np.bool_(False)),
                              A.attention(q, k, v, causal=True))


# -------------------------------------------------------------------- degenerate sizes


def test_empty_batch_gives_empty_results() -> None:
    q = np.zeros((0, 2, 3, 4), np.float32)
    out, lse = A.attention(q, q, q, return_lse=True)
    assert out.shape == (0, 2, 3, 4) and lse.shape == (0, 2, 3)
    for run in (lambda: A.flash_v2(q, q, q), lambda: A.flash_v3(q, q, q),
                lambda: A.flash_v3(q, q, q, fp8=True), lambda: A.split_kv(q, q, q, num_splits=2),
                lambda: A.standard_attention(q, q, q), lambda: A.flash_v1(q, q, q, block=(2, 2))):
        assert run()[0].shape == (0, 2, 3, 4)
    assert A.naive_attention(q, q, q).shape == (0, 2, 3, 4)


@pytest.mark.parametrize("hq, hkv", [(0, 0), (0, 1), (2, 0)])
def test_zero_heads_are_refused(hq, hkv) -> None:
    q = np.zeros((1, hq, 3, 4), np.float32)
    k = np.zeros((1, hkv, 3, 4), np.float32)
    for run in (A.attention, A.flash_v2, A.flash_v3):
        with pytest.raises(ValueError, match="at least one query head and one key/value"):
            run(q, k, k)


def test_huge_mx_block_size_is_one_block_without_padding_memory() -> None:
    import resource

    x = np.arange(1, 41, dtype=np.float32).reshape(2, 20) / np.float32(7)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    q = S.mx_quantize(x, "e4m3", block_size=10**9, pad=True)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 100_000  # KiB
    # one block per row: the scale is that of the row's amax, as with block_size=20
    # (zero padding never changes a block's amax); FLOOR rule: 2^(floor(log2 amax) - 8)
    assert q.block_size == 10**9 and q.scales.shape == (2, 1)
    for row in range(2):
        amax = Fraction(float(x[row].max()))
        e = amax.numerator.bit_length() - amax.denominator.bit_length()
        e -= Fraction(2) ** e > amax
        assert int(q.scales[row, 0]) == 127 + e - 8
    assert np.array_equal(q.dequantize(),
                          S.mx_quantize(x, "e4m3", block_size=20).dequantize())
    qt = S.mx_quantize(x.T.copy(), "e4m3", block_size=10**9, pad=True, axis=0)
    assert S.mx_matmul(q, qt).shape == (2, 2)
    b = S.block_fp8_quantize(x, block=(10**9, 10**9))
    assert b.scales.shape == (1, 1)
    assert float(b.scales[0, 0]) == float(np.float32(x.max()) / np.float32(448))
    with pytest.raises(TypeError, match=r"block\[0\]"):
        S.block_fp8_quantize(x, block=(1.5, 128))


def test_format_takes_numpy_integers_as_ints() -> None:
    f = F.Format("x", np.int64(4), np.int32(3))
    assert f == F.Format("x", 4, 3) and hash(f) == hash(F.Format("x", 4, 3))
    assert type(f.exp_bits) is int and type(f.bias) is int and f.bias == 7
    assert int(F.encode(1.0, f)) == 7 << 3          # 1.0 = 2^(7 - 7) * 1.000
    for bad in (4.0, "4", True):
        with pytest.raises(TypeError, match="Format.exp_bits"):
            F.Format("x", bad, 3)
    with pytest.raises(ValueError, match="32 bits"):
        F.Format("x", 10**9, 3)                   # refused before forming 2^(10^9)


# -------------------------------------------------------------------------- KV cache


def test_kv_block_ids_and_extra_keys() -> None:
    c = PagedKVCache(4, 2, 1, 4)
    c.add_sequence("a")
    c.append("a", np.zeros((3, 1, 4), np.float32), np.zeros((3, 1, 4), np.float32))
    assert [c.ref_count(b) for b in range(4)] == [1, 1, 0, 0]
    assert c.ref_count(np.int64(1)) == 1
    for bad in (-1, 4, 99):
        with pytest.raises(ValueError, match=rf"block {bad} out of range \[0, 4\)"):
            c.ref_count(bad)
        with pytest.raises(ValueError, match="out of range"):
            c.filled(bad)
        with pytest.raises(ValueError, match="out of range"):
            c.page(bad)
    with pytest.raises(TypeError, match="block must be an int"):
        c.ref_count(1.0)
    state = (c.sequences(), c.pool.ref_counts[:], c.pool.num_free)
    for key in (2**127, -2**127 - 1, 10**100):
        with pytest.raises(ValueError, match=r"extra_keys\[1\]"):
            c.add_sequence("b", [1, 2], extra_keys=("tenant", key))
    assert (c.sequences(), c.pool.ref_counts, c.pool.num_free) == state
    c.add_sequence("b", [1, 2], extra_keys=(2**127 - 1, -2**127))       # the range ends
    c.add_sequence("c", [1, 2], extra_keys=(np.int64(5),))


def test_paged_attention_flags() -> None:
    c = PagedKVCache(4, 2, 1, 4)
    with pytest.raises(TypeError, match="causal"):
        paged_attention(np.zeros((0, 1, 1, 4), np.float32), c, [], causal="false")
    with pytest.raises(TypeError, match="return_lse"):
        paged_attention(np.zeros((0, 1, 1, 4), np.float32), c, [], return_lse=1)


@pytest.mark.parametrize("axis, ndim, want", [(0, 1, 0), (-1, 3, 2), (np.int64(-3), 3, 0),
                                              (2, 3, 2)])
def test_check_axis(axis, ndim, want):
    assert check_axis("axis", axis, ndim) == want


def test_check_axis_refuses():
    with pytest.raises(ValueError, match="axis: 3 is out of range for an array of 3"):
        check_axis("axis", 3, 3)
    with pytest.raises(ValueError, match="out of range"):
        check_axis("axis", -4, 3)
    for bad in (1.0, True, "0", None):
        with pytest.raises(TypeError, match="axis must be an int"):
            check_axis("axis", bad, 3)


def test_softmax_axis_errors():
    x = np.zeros((2, 3))
    for fn in (SM.softmax, SM.logsumexp, SM.online_softmax):
        with pytest.raises(ValueError, match="out of range"):
            fn(x, axis=2)   # an IndexError from NumPy before
        with pytest.raises(TypeError, match="axis"):
            fn(x, axis=1.0)


def test_option_types_are_type_errors():
    x = np.ones(32, np.float32)
    with pytest.raises(TypeError, match="scale_rule"):
        S.mx_quantize(x, "e4m3", scale_rule=None)
    with pytest.raises(TypeError, match="inf_block"):
        S.mx_quantize(x, "e4m3", inf_block=0)
    with pytest.raises(TypeError, match="nan must be"):
        F.encode(np.float32([np.nan]), "e4m3", nan=True)
    with pytest.raises(TypeError, match="nan must be"):
        F.encode(np.float32([np.nan]), "e4m3", nan=1.0)
