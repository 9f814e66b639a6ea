"""FlashAttention-3 numerics (refimpl.attention.flash_v3).

Oracles: flash_v2 (FP16/BF16 mode must be the same bytes); float64 attention written
here on operands quantised here from the definitions (tile amax / 448, E4M3 round to
nearest even via refimpl.formats); exact ``fractions.Fraction`` products for the
incoherent transform; error bounds derived in the docstrings from E4M3 rounding.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refimpl import formats
from refimpl.attention import attention, flash_v2
from refimpl.attention.flash_v3 import (
    TABLE3_PAPER, flash_v3, incoherent_transform, outlier_inputs, table3_experiment,
)
from refimpl.matmul import ExactAccumulation as Exact
from refimpl.scaling import random_signs

U8 = 2.0**-4  # E4M3 unit roundoff: 3 fraction bits, round to nearest
H8 = 2.0**-10  # half the E4M3 subnormal spacing 2^-9: absolute error below 2^-6
FMAX = 448.0
U32 = 2.0**-24


def rand(shape, seed, scale=1.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


# ------------------------------------------------------------- FP16/BF16 mode = flash_v2
MASKS = [
    {},
    {"causal": True},
    {"causal": True, "causal_alignment": "top_left"},
    {"window": (5, 3)},
    {"softcap": 2.0},
    {"alibi_slopes": [0.5, 0.25]},
    {"key_padding_mask": np.arange(37)[None, :] < np.array([[30], [37]])},
]


@pytest.mark.slow
@pytest.mark.parametrize("opts", MASKS, ids=lambda o: ",".join(o) or "none")
@pytest.mark.parametrize("block", [(128, 64), (16, 8), (7, 5)])
def test_fp16_mode_is_flash_v2_bit_for_bit(opts, block):
    q = formats.round_to(rand((2, 2, 29, 16), 1), "fp16")
    k = formats.round_to(rand((2, 2, 37, 16), 2), "fp16")
    v = formats.round_to(rand((2, 2, 37, 8), 3), "bf16")
    o2, l2, s2 = flash_v2(q, k, v, block=block, **opts)
    for impl in ("fast", "plain"):
        o3, l3, s3 = flash_v3(q, k, v, block=block, implementation=impl, **opts)
        assert o3.tobytes() == o2.tobytes() and l3.tobytes() == l2.tobytes()
        assert s3 == s2
    # this module's own loop (taken for any other accumulation model) gives the same bytes
    for impl in ("fast", "plain"):
        o4, l4, s4 = flash_v3(q, k, v, block=block, accumulate=Exact(), implementation=impl,
                              **opts)
        assert o4.tobytes() == o2.tobytes() and l4.tobytes() == l2.tobytes()
        assert s4 == s2


@settings(max_examples=15)
@given(
    sq=st.integers(0, 20), sk=st.integers(0, 20), br=st.integers(1, 9),
    bc=st.integers(1, 9), group=st.sampled_from([1, 2]), causal=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_fp16_mode_own_loop_matches_flash_v2(sq, sk, br, bc, group, causal, seed):
    q = rand((1, 2 * group, sq, 8), seed)
    k, v = rand((1, 2, sk, 8), seed + 1), rand((1, 2, sk, 4), seed + 2)
    o2, l2, s2 = flash_v2(q, k, v, block=(br, bc), causal=causal)
    o3, l3, s3 = flash_v3(q, k, v, block=(br, bc), causal=causal, accumulate=Exact())
    assert o3.tobytes() == o2.tobytes() and l3.tobytes() == l2.tobytes() and s3 == s2


# ------------------------------------------------------------- FP8: fast == plain
@pytest.mark.parametrize("opts", [
    {},
    {"block_quantization": False},
    {"incoherent": True, "seed": 7},
    {"causal": True, "p_rowsum": "quantized"},
    {"window": (4, 4), "softcap": 3.0, "p_offset": 0},
    {"accumulate": "H100-FP8"},
    {"fmt": "e5m2", "key_padding_mask": np.arange(33)[None, :] < 20},
])
def test_fp8_fast_equals_plain(opts):
    q, k, v = rand((1, 4, 21, 16), 4), rand((1, 2, 33, 16), 5), rand((1, 2, 33, 16), 6)
    a = flash_v3(q, k, v, block=(8, 8), fp8=True, **opts)
    b = flash_v3(q, k, v, block=(8, 8), fp8=True, implementation="plain", **opts)
    assert a[0].tobytes() == b[0].tobytes() and a[1].tobytes() == b[1].tobytes()
    assert a[2] == b[2]
    # HBM element counts are those of FlashAttention-2 with the same tiles
    ref_stats = flash_v2(q, k, v, block=(8, 8), **{
        key: val for key, val in opts.items()
        if key in ("causal", "window", "softcap", "key_padding_mask")})[2]
    assert a[2] == ref_stats


# ------------------------------------------------------------- FP8 against float64
def hadamard_m(d, seed):
    """M = D H / sqrt(d) built from the definition (H[i, j] = (-1)^popcount(i & j))."""
    i = np.arange(d)
    h = np.array([[(-1) ** bin(a & b).count("1") for b in i] for a in i], dtype=np.float64)
    return random_signs(d, seed).astype(np.float64)[:, None] * h / math.sqrt(d)


def quantize_tiles(x, rows, per_tensor):
    """Tile quantisation from the definition: s = fl32(amax / 448) per tile of ``rows``
    rows (or per tensor), y = fl32(x / s), E4M3 round to nearest even, value = y8 * s
    (float64, exact); returns values and the per-row tile scale."""
    x = np.asarray(x, dtype=np.float32)
    vals = np.empty(x.shape)
    scale = np.empty(x.shape[:-1])
    if per_tensor:
        s = np.float32(max(np.abs(x).max(), np.float32(1e-4)) / np.float32(FMAX))
        y = (x / s).astype(np.float32)
        return formats.round_to(y, "e4m3", saturate=True).astype(np.float64) * float(s), \
            np.full(x.shape[:-1], float(s))
    for b in range(x.shape[0]):
        for h in range(x.shape[1]):
            for r0 in range(0, x.shape[2], rows):
                t = x[b, h, r0:r0 + rows]
                s = np.float32(max(np.abs(t).max(), np.float32(1e-4)) / np.float32(FMAX))
                y = (t / s).astype(np.float32)
                vals[b, h, r0:r0 + rows] = formats.round_to(
                    y, "e4m3", saturate=True).astype(np.float64) * float(s)
                scale[b, h, r0:r0 + rows] = float(s)
    return vals, scale


def softmax64(s):
    m = np.max(s, axis=-1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(m), m, 0.0))
    return e / e.sum(axis=-1, keepdims=True)


FP8_CASES = [
    {"block_quantization": True, "incoherent": False, "p_offset": 8},
    {"block_quantization": True, "incoherent": False, "p_offset": 8, "accumulate": "H100-FP8"},
    {"block_quantization": False, "incoherent": False, "p_offset": 8},
    {"block_quantization": True, "incoherent": True, "p_offset": 8},
    {"block_quantization": True, "incoherent": False, "p_offset": 0},
    {"block_quantization": True, "incoherent": False, "p_offset": 8, "p_rowsum": "quantized"},
    {"block_quantization": True, "incoherent": True, "p_offset": 3, "causal": True},
]


@pytest.mark.parametrize("case", FP8_CASES, ids=str)
@pytest.mark.parametrize("inputs", ["normal", "peaked", "outliers"])
def test_fp8_within_p_quantisation_bound_of_quantised_reference(case, inputs):
    """flash_v3 FP8 against float64 attention on Q8, K8, V8 quantised here.

    Let Q8, K8, V8 be the tile-quantised operands (Q, K after M when incoherent),
    S8 = scale Q8 K8^T and P8 = softmax(S8) in float64, O8 = P8 V8. The kernel differs
    from O8 only by (i) rounding P to E4M3 and (ii) float32 roundings. With P shifted by
    2^p (p = p_offset) each quantised exponential is P~(1 + delta) + eta, |delta| <= u =
    2^-4, |eta| <= h = 2^-10 (subnormal range), in a frame where the row sum l >= 2^p
    (the row maximum contributes 2^p; later rescalings by alpha <= 1 only shrink eta).
    So per output element

        |O - O8| <= u sum_j P8_ij |V8_j| + n h 2^-p max_j |V8_j| + slack,

    slack = (2^-16 + 2^-19 max_j |S8_ij|) sum_j P8_ij |V8_j| + 2^-22 |O8| for the float32
    roundings (scores, exp, alpha, l, acc, the division; T_c << 2^8 steps). With
    ``p_rowsum="quantized"`` l itself is off by a factor (1 + theta), |theta| <= u + n h
    2^-p, which moves O by at most |theta| / (1 - |theta|) (|O8| + bound).
    """
    case = dict(case)
    causal = case.pop("causal", False)
    shape_q, shape_kv = (2, 2, 40, 32), (2, 2, 53, 32)  # partial tiles
    if inputs in ("normal", "peaked"):
        # peaked: scores of spread ~ 9, so many weights fall below E4M3's normal range
        q = rand(shape_q, 10, 3.0 if inputs == "peaked" else 1.0)
        k, v = rand(shape_kv, 11), rand(shape_kv, 12)
    else:
        q, k, v = (x.reshape(s) for x, s in zip(
            outlier_inputs((4 * 40 * 32,), 3, outlier_prob=0.01)[:1]
            + outlier_inputs((4 * 53 * 32,), 4, count=2, outlier_prob=0.01),
            (shape_q, shape_kv, shape_kv)))
    br, bc = 16, 8
    out, lse, _ = flash_v3(q, k, v, block=(br, bc), fp8=True, seed=5, causal=causal, **case)
    qm, km = q, k
    if case["incoherent"]:
        m = hadamard_m(32, 5)
        qm = (q.astype(np.float64) @ m).astype(np.float32)
        km = (k.astype(np.float64) @ m).astype(np.float32)
    per_tensor = not case["block_quantization"]
    q8, _ = quantize_tiles(qm, br, per_tensor)
    k8, _ = quantize_tiles(km, bc, per_tensor)
    v8, _ = quantize_tiles(v, bc, per_tensor)
    s8 = np.einsum("bhid,bhjd->bhij", q8, k8) / math.sqrt(32)
    if causal:
        i, j = np.arange(40)[:, None], np.arange(53)[None, :]
        s8 = np.where(j <= i + 13, s8, -np.inf)
    p8 = softmax64(s8)
    o8 = p8 @ v8
    pv = p8 @ np.abs(v8)
    smax = np.max(np.where(np.isfinite(s8), np.abs(s8), 0.0), axis=-1, keepdims=True)
    n, p = 53, case["p_offset"]
    vmax = np.abs(v8).max(axis=-2, keepdims=True)
    bound = U8 * pv + n * H8 * 2.0**-p * vmax
    bound += (2.0**-16 + 2.0**-19 * smax) * pv + 2.0**-22 * np.abs(o8)
    ds = np.zeros_like(smax)  # score error of a non-exact accumulation model
    theta = 0.0  # relative error of l
    if case.get("accumulate") == "H100-FP8":
        # BlockFMA (32 products, F = 13, round toward zero): each term is truncated to a
        # multiple of 2^(e_max - 13) with 2^e_max <= the largest |product| of the block,
        # so a d = 32 dot product moves by <= 32 * 2^-13 max_c |q8_c k8_c| (+ 2^-23 |G|),
        # which perturbs the softmax weights by a factor e^(+-2 dS); each P V tile (B_c
        # = 8 products) moves by <= 8 * 2^-13 max_j P~_j |V8_j|, in total 2^-10 sum P|V8|.
        ds = (32 * 2.0**-13 * np.max(np.abs(q8)[..., :, None, :] * np.abs(k8)[..., None, :, :],
                                     axis=-1) / math.sqrt(32) + 2.0**-22 * np.abs(s8))
        ds = np.max(np.where(np.isfinite(s8), ds, 0.0), axis=-1, keepdims=True)
        bound += (np.exp(2 * ds) - 1) * 2 * pv + 2.0**-10 * pv
    if case.get("p_rowsum") == "quantized":
        theta = U8 + n * H8 * 2.0**-p
        bound += theta / (1 - theta) * (np.abs(o8) + bound)
    err = np.abs(out - o8)
    assert np.all(err <= bound), float(np.max(err / bound))
    # LSE = m + ln(l 2^-p): float32 roundings, score errors, and ln(1 + theta)
    m8 = np.max(s8, axis=-1)
    lse8 = m8 + np.log(np.sum(np.exp(s8 - m8[..., None]), axis=-1))
    tol = 2.0**-18 * (1 + np.abs(lse8)) + 2.0**-19 * smax[..., 0] + ds[..., 0] + theta / (1 - theta)
    assert np.all(np.abs(lse - lse8) <= tol)
    # the bound is not vacuous (with exact accumulation: the BlockFMA worst case is loose
    # around outliers), and the P rounding it allows for really happens
    if "accumulate" not in case:
        assert float(np.max(bound)) < 0.2 * float(np.max(np.abs(v8)))
    assert float(np.max(err)) > 0


@pytest.mark.parametrize("block_quantization", [True, False])
@pytest.mark.parametrize("incoherent", [False, True])
def test_fp8_within_a_priori_bound_of_exact_attention(block_quantization, incoherent):
    """flash_v3 FP8 against exact (float64) attention on the unquantised inputs.

    Quantising x (a Q or K entry after M, or a V entry) to E4M3 with tile scale s gives
    x(1 + delta) + eta, |delta| <= u, |eta| <= h s. Hence, with a = |Q~|, b = |K~|,

        |S8_ij - S_ij| <= E_ij = scale [(2u + u^2) (a b^T)_ij
                                        + (1 + u)(h s_q,i sum_c b_jc + h s_k,j sum_c a_ic)
                                        + d h^2 s_q,i s_k,j] + 2^-20 scale (a b^T)_ij

    (the last term: float32 rounding of Q M and K M). A perturbation of every score of
    row i by at most E_i = max_j E_ij changes each softmax weight by a factor in
    [e^(-2 E_i), e^(2 E_i)], so |P8 - P| <= P (e^(2 E_i) - 1) and P8 <= P e^(2 E_i).
    With |V8 - V| <= u |V| + h s_v and the P-rounding bound of the previous test:

        |O - O_exact| <= sum_j |P8 - P|_ij |V_j| + sum_j P8_ij (u |V_j| + h s_v,j)
                         + (u + 2^-16) sum_j P8_ij |V8_j| + n h 2^-p max |V8| + 2^-22 |O|,

    with |V8| <= (1 + u)|V| + h s_v. Inputs are kept moderate (|q|, |k| ~ 0.25) so that
    the worst-case score term (linear in d) leaves the bound meaningful.
    """
    d, br, bc, p = 16, 8, 8, 8
    q, k = rand((1, 2, 24, d), 20, 0.25), rand((1, 2, 40, d), 21, 0.25)
    v = rand((1, 2, 40, d), 22)
    out, _, _ = flash_v3(q, k, v, block=(br, bc), fp8=True, seed=9,
                         block_quantization=block_quantization, incoherent=incoherent)
    ref = attention(*(x.astype(np.float64) for x in (q, k, v)), precision="float64")
    qm, km = q.astype(np.float64), k.astype(np.float64)
    if incoherent:
        m = hadamard_m(d, 9)
        qm, km = qm @ m, km @ m
    per_tensor = not block_quantization
    _, sq = quantize_tiles(qm.astype(np.float32), br, per_tensor)
    _, sk = quantize_tiles(km.astype(np.float32), bc, per_tensor)
    _, sv = quantize_tiles(v, bc, per_tensor)
    a, b = np.abs(qm), np.abs(km)
    ab = a @ np.swapaxes(b, -1, -2)
    scale = 1 / math.sqrt(d)
    e = scale * ((2 * U8 + U8 ** 2) * ab
                 + (1 + U8) * (H8 * sq[..., :, None] * b.sum(-1)[..., None, :]
                               + H8 * sk[..., None, :] * a.sum(-1)[..., :, None])
                 + d * H8 ** 2 * sq[..., :, None] * sk[..., None, :]) + 2.0**-20 * scale * ab
    grow = np.exp(2 * e.max(axis=-1, keepdims=True))
    s = scale * (qm @ np.swapaxes(km, -1, -2))
    pr = softmax64(s)
    av = np.abs(v.astype(np.float64))
    ev = U8 * av + H8 * sv[..., None]
    v8max = (1 + U8) * av + H8 * sv[..., None]
    bound = (pr * (grow - 1)) @ av + (pr * grow) @ ev + (U8 + 2.0**-16) * (pr * grow) @ v8max
    bound += 40 * H8 * 2.0**-p * v8max.max(axis=-2, keepdims=True) + 2.0**-22 * np.abs(ref)
    err = np.abs(out - ref)
    assert np.all(err <= bound), float(np.max(err / bound))
    assert float(np.max(bound)) < 0.5 * float(np.max(av))


# ------------------------------------------------------------- incoherent processing
@pytest.mark.parametrize("d", [4, 16, 64])
def test_incoherent_transform_leaves_scores_exactly_unchanged(d):
    """For d a power of 4 every entry of M is +-2^-k, so Q M of small integers is exact in
    float64 and (QM)(KM)^T can be compared with Q K^T in exact rational arithmetic."""
    rng = np.random.default_rng(d)
    q = rng.integers(-8, 9, size=(5, d)).astype(np.float64)
    k = rng.integers(-8, 9, size=(6, d)).astype(np.float64)
    qm, km = incoherent_transform(q, 3), incoherent_transform(k, 3)
    assert np.array_equal(qm, q @ hadamard_m(d, 3))  # exact: both sides are exact here
    for i in range(5):
        for j in range(6):
            lhs = sum(Fraction(float(x)) * Fraction(float(y)) for x, y in zip(qm[i], km[j]))
            rhs = sum(Fraction(float(x)) * Fraction(float(y)) for x, y in zip(q[i], k[j]))
            assert lhs == rhs


def test_incoherent_processing_leaves_float64_attention_unchanged():
    """Quantisation off, float64: attention(QM, KM, V) = attention(Q, K, V) up to float64
    rounding (M orthogonal), for d = 128 where 1/sqrt(d) is not a power of two."""
    d = 128
    q, k, v = (rand((2, 30, d), s).astype(np.float64) for s in (30, 31, 32))
    qm, km = incoherent_transform(q, 11), incoherent_transform(k, 11)
    assert qm.dtype == np.float64 and not np.allclose(qm, q)
    a = attention(q, k, v, precision="float64")
    b = attention(qm, km, v, precision="float64")
    assert np.max(np.abs(a - b)) <= 1e-12
    # the transform is orthogonal and the same seed gives the same M, another seed not
    m = incoherent_transform(np.eye(d), 11)
    assert np.max(np.abs(m @ m.T - np.eye(d))) <= 1e-15
    assert np.array_equal(m, incoherent_transform(np.eye(d), 11))
    assert not np.array_equal(m, incoherent_transform(np.eye(d), 12))


# ------------------------------------------------------------- Table 3
def test_outlier_inputs_are_seeded_and_follow_the_distribution():
    a = outlier_inputs((1000, 200), 1)
    b = outlier_inputs((1000, 200), 1)
    c = outlier_inputs((1000, 200), 2)
    assert all(x.tobytes() == y.tobytes() for x, y in zip(a, b))
    assert a[0].tobytes() != c[0].tobytes() and a[0].tobytes() != a[1].tobytes()
    x = a[0].astype(np.float64).ravel()
    n = x.size
    # variance 1 + 0.001 * 100 = 1.1; |x| > 6 is essentially only outliers:
    # P(|N(0,1)| > 6) ~ 2e-9, P(|N(0,100)| > 6) ~ 0.55, so about 0.00055 n of them
    assert abs(x.mean()) < 5 * math.sqrt(1.1 / n)
    assert abs(x.var() - 1.1) < 0.05
    big = int(np.sum(np.abs(x) > 6))
    assert 0.00055 * n - 5 * math.sqrt(0.00055 * n) < big < 0.00055 * n + 5 * math.sqrt(0.00055 * n)


@pytest.mark.slow
def test_table3_ordering_on_a_small_size():
    """The paper's qualitative result on a small instance (4 heads of 256 x 64): FP16
    flash beats the FP16 standard computation (FP32 softmax), every FP8 variant is far
    worse than FP16, and incoherent processing lowers the FP8 error with either scaling
    (block quantisation alone changes it little, as in the paper's ablation)."""
    r = table3_experiment(256, 64, 0, heads=4)
    x = r.rmse
    assert set(x) == set(TABLE3_PAPER)
    assert x["fp16_flash"] < x["fp16_standard"]
    assert 10 * x["fp16_standard"] < min(x[n] for n in x if n.startswith("fp8"))
    assert x["fp8_block_incoherent"] < x["fp8_block"]
    assert x["fp8_per_tensor_incoherent"] < x["fp8_per_tensor"]
    assert x["fp8_block_incoherent"] < x["fp8_per_tensor"] and r.ratio > 1
    assert [row[0] for row in r.rows()] == list(TABLE3_PAPER)


# ------------------------------------------------------------- options and errors
def test_fp8_defaults_and_options():
    q, k, v = rand((1, 1, 20, 16), 40), rand((1, 1, 20, 16), 41), rand((1, 1, 20, 16), 42)
    a = flash_v3(q, k, v, fp8=True)
    b = flash_v3(q, k, v, fp8=True, block=(128, 64), block_quantization=True,
                 incoherent=False, seed=0, fmt="e4m3", accumulate="exact",
                 p_offset=8, p_rowsum="unquantized")
    assert a[0].tobytes() == b[0].tobytes()
    out, stats = flash_v3(q, k, v, fp8=True, return_lse=False)
    assert out.dtype == np.float32 and out.shape == (1, 1, 20, 16)
    assert stats.blocks_computed == 1
    # the seed matters only with incoherent processing
    assert flash_v3(q, k, v, fp8=True, seed=1)[0].tobytes() == a[0].tobytes()
    assert (flash_v3(q, k, v, fp8=True, incoherent=True, seed=1)[0].tobytes()
            != flash_v3(q, k, v, fp8=True, incoherent=True, seed=2)[0].tobytes())


def test_fully_masked_rows_give_zero_and_minus_inf():
    q, k, v = rand((1, 1, 6, 16), 50), rand((1, 1, 3, 16), 51), rand((1, 1, 3, 16), 52)
    out, lse, _ = flash_v3(q, k, v, fp8=True, causal=True)  # bottom-right: rows 0..2 empty
    assert np.all(out[..., :3, :] == 0) and np.all(np.isneginf(lse[..., :3]))
    assert np.all(np.isfinite(lse[..., 3:]))
    out, lse, _ = flash_v3(q, k[..., :0, :], v[..., :0, :], fp8=True)
    assert np.all(out == 0) and np.all(np.isneginf(lse))


@pytest.mark.parametrize("kwargs, match", [
    ({"p_offset": 9}, "p_offset"),
    ({"p_offset": -1}, "p_offset"),
    ({"p_rowsum": "fp16"}, "p_rowsum"),
    ({"fmt": "fp16"}, "fmt"),
    ({"seed": -1}, "seed"),
    ({"implementation": "gpu"}, "implementation"),
    ({"accumulate": "nope"}, "accumulate"),
    ({"block": (0, 4)}, "block"),
])
def test_bad_options_are_refused(kwargs, match):
    q = rand((1, 1, 4, 16), 60)
    with pytest.raises(ValueError, match=match):
        flash_v3(q, q, q, fp8=True, **kwargs)


def test_incoherent_needs_a_power_of_two_head_dim():
    q = rand((1, 1, 4, 24), 61)
    with pytest.raises(ValueError, match="power of two"):
        flash_v3(q, q, q, fp8=True, incoherent=True)
    with pytest.raises(ValueError, match="seq_len"):
        table3_experiment(0, 64)
    with pytest.raises(ValueError, match="shape"):
        outlier_inputs((4, -1))
    with pytest.raises(ValueError, match="outlier_prob"):
        outlier_inputs((4,), outlier_prob=2.0)


# ------------------------------------------------------------- ALiBi: one rounding
#: 16519105 * 65 = 2^30 + 1: at distance 65 the bias is -(2^-25 + 2^-55)
ALIBI_SLOPE = 16519105 * 2.0**-55


@pytest.mark.parametrize("route", [
    {"accumulate": Exact()},  # this module's loop with the exact GEMMs
    {"p_offset": 1},  # this module's loop, P shifted
    {},  # the shared flash_v2 code
])
@pytest.mark.parametrize("impl", ["plain", "fast"])
def test_alibi_single_rounding(route, impl):
    """Pinned counterexample to the double rounding fl32(fl64(s + bias)): q = 1, k_0 = 1,
    scale 1, Sq = 1, Sk = 66, bottom-right, slope 16519105 * 2^-55. Score 0 is exactly
    1 - 2^-25 - 2^-55, just below the midpoint 1 - 2^-25 between the float32 neighbours
    1 - 2^-24 and 1, so it rounds to 1 - 2^-24 = 0.99999994; rounding to float64 first
    gives the midpoint 1 - 2^-25 (2^-55 is below half an ulp), which then ties to even,
    1.0. Keys 1.. have q.k = -2^20 (scores about -2^20, weight e^(-2^20) = 0), so the
    row's LSE is score 0 exactly: LSE = fl32(s_0 + ln 1) = s_0."""
    want = np.float32(1.0 - 2.0**-24)
    assert want == np.float32(0.99999994)
    exact = Fraction(1) - Fraction(1, 2**25) - Fraction(1, 2**55)
    assert abs(Fraction(float(want)) - exact) < abs(Fraction(1) - exact)  # nearest
    q = np.ones((1, 1, 1, 1), np.float32)
    k = np.full((1, 1, 66, 1), -2.0**20, np.float32)
    k[0, 0, 0, 0] = 1.0
    v = np.zeros((1, 1, 66, 1), np.float32)
    v[0, 0, 0, 0] = 1.0
    out, lse, _ = flash_v3(q, k, v, scale=1.0, alibi_slopes=[ALIBI_SLOPE], block=(1, 64),
                           implementation=impl, **route)
    assert lse[0, 0, 0] == want
    assert out[0, 0, 0, 0] == 1.0
    o2, l2, _ = flash_v2(q, k, v, scale=1.0, alibi_slopes=[ALIBI_SLOPE], block=(1, 64))
    assert np.array_equal(lse, l2) and np.array_equal(out, o2)
    _, l_ref = attention(q, k, v, scale=1.0, alibi_slopes=[ALIBI_SLOPE], return_lse=True)
    assert l_ref[0, 0, 0] == want


def test_fp16_mode_loop_is_flash_v2_with_alibi_slopes_of_many_bits():
    """flash_v3's own loop (fp8=False, exact GEMMs given as a model object) and
    flash_v2 give the same bytes with ALiBi slopes of 24 significant bits (random ones;
    the pinned double-rounding case is in test_alibi_single_rounding)."""
    rng = np.random.default_rng(11)
    q = rng.standard_normal((2, 2, 19, 8)).astype(np.float32)
    k = rng.standard_normal((2, 2, 70, 8)).astype(np.float32)
    v = rng.standard_normal((2, 2, 70, 8)).astype(np.float32)
    slopes = (rng.uniform(0.5, 1.0, (2, 2)) * 2.0**-3).astype(np.float32)
    for opts in ({}, {"causal": True}, {"softcap": 1.5}):
        o2, l2, _ = flash_v2(q, k, v, block=(8, 16), alibi_slopes=slopes, **opts)
        for impl in ("plain", "fast"):
            o3, l3, _ = flash_v3(q, k, v, block=(8, 16), alibi_slopes=slopes,
                                 accumulate=Exact(), implementation=impl, **opts)
            assert np.array_equal(o3, o2) and np.array_equal(l3, l2)
