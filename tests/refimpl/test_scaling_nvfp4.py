"""NVFP4 quantisation against a per-block scalar reference.

The reference walks one block at a time with NumPy float32 *scalars* (IEEE float32
operations, the arithmetic the TransformerEngine and torchao formulas are written in) and
rounds to E4M3 / E2M1 by searching value tables enumerated from the formats' layouts with
``Fraction`` (not the codec under test).
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oracles import ELEMENT_LAYOUTS, code_value, element_table, nearest_magnitude
from refimpl.scaling import NVFP4Array, hadamard_transform, nvfp4_quantize, quantization_error

F32 = np.float32
FLT_MAX = F32(np.finfo(np.float32).max)
E4M3 = element_table(*ELEMENT_LAYOUTS["e4m3"])
E2M1 = element_table(*ELEMENT_LAYOUTS["e2m1"])


def rne(a: float, tab, sign_bit: int) -> int:
    """Nearest entry (ties to the even code), saturating; a is finite."""
    sign = sign_bit if math.copysign(1.0, a) < 0 else 0
    return nearest_magnitude(abs(Fraction(a)), tab) | sign


def e4m3_value(code: int) -> F32:
    return F32(float(code_value(code & 0x7F, *ELEMENT_LAYOUTS["e4m3"][:3])))


def ref_global(ga: F32, rule: str) -> F32:
    with np.errstate(divide="ignore"):
        if rule in ("te", "te_kernel"):
            s = F32(2688.0) / ga
            s = min(s, FLT_MAX)
            return F32(1.0) if s == 0 or (rule == "te_kernel" and ga == 0) else F32(s)
        return F32(ga / F32(2688.0))


def ref_block(vals, S, rule):
    if any(math.isnan(v) for v in vals):
        return 0x7F, [0] * len(vals)
    bamax = F32(max(abs(F32(v)) for v in vals))
    with np.errstate(divide="ignore", over="ignore"):
        if rule == "te":
            ds = F32(bamax / F32(6.0)) * S
            ds = min(F32(ds), FLT_MAX, F32(448.0))
        elif rule == "te_kernel":
            ds = min(F32(bamax * F32(S * F32(F32(1.0) / F32(6.0)))), F32(448.0))
        else:
            ds = F32(F32(bamax / F32(6.0)) / S)
            ds = min(max(ds, F32(2.0 ** -6)), F32(448.0))
        sf_code = rne(float(ds), E4M3, 0x80)
        sf = e4m3_value(sf_code)
        codes = []
        for v in vals:
            if rule == "te":
                enc = F32(min(F32(S / sf), FLT_MAX))
                y = F32(F32(v) * enc)
            elif rule == "te_kernel":
                enc = F32(min(F32(F32(1.0) / F32(sf * F32(F32(1.0) / S))), FLT_MAX))
                y = F32(F32(v) * enc)
            else:
                y = F32(F32(v) / F32(S * sf))
            y = max(min(y, F32(6.0)), F32(-6.0))
            codes.append(rne(float(y), E2M1, 0x8))
    return sf_code, codes


@st.composite
def nv_block(draw, n=16):
    kind = draw(st.sampled_from(["random", "random", "zero", "outlier", "tiny", "wide", "nan"]))
    k = draw(st.integers(-30, 30))
    base = draw(st.lists(st.floats(-8, 8, width=32), min_size=n, max_size=n))
    vals = [v * 2.0 ** k for v in base]
    pos = draw(st.integers(0, n - 1))
    if kind == "zero":
        vals = [draw(st.sampled_from([0.0, -0.0])) for _ in range(n)]
    elif kind == "outlier":
        vals = [v * 2.0 ** -40 for v in vals]
        vals[pos] = draw(st.floats(1.0, 2.0 ** 60, width=32))
    elif kind == "tiny":
        vals = [v * 2.0 ** -100 for v in vals]
    elif kind == "wide":
        wide = st.floats(-2.0 ** 100, 2.0 ** 100, width=32, allow_subnormal=True)
        vals = [draw(wide) for _ in range(n)]
    elif kind == "nan":
        vals[pos] = math.nan
    return [float(F32(v)) for v in vals]


@st.composite
def nv_tensor(draw):
    rows = draw(st.integers(1, 2))
    nblk = draw(st.integers(1, 3))
    return np.array([[x for _ in range(nblk) for x in draw(nv_block())] for _ in range(rows)], F32)


@pytest.mark.slow
@pytest.mark.parametrize("rule", ["te", "te_kernel", "torchao"])
@settings(max_examples=30)
@given(x=nv_tensor(), given_amax=st.one_of(st.none(), st.floats(2.0 ** -10, 2.0 ** 20, width=32)))
def test_1x16_matches_reference(rule, x, given_amax):
    mags = np.abs(x[~np.isnan(x)])
    ga = F32(given_amax) if given_amax is not None else F32(mags.max() if mags.size else 0.0)
    if rule == "torchao" and ga == 0:
        with pytest.raises(ValueError, match="torchao"):
            nvfp4_quantize(x, scale_rule=rule, global_amax=given_amax)
        return
    q = nvfp4_quantize(x, scale_rule=rule, global_amax=given_amax)
    S = ref_global(ga, rule)
    assert q.global_scale == S
    for r in range(x.shape[0]):
        for j in range(x.shape[1] // 16):
            block = [float(v) for v in x[r, 16 * j:16 * (j + 1)]]
            sf, codes = ref_block(block, S, rule)
            assert int(q.scales[r, j]) == sf, (r, j, block)
            assert [int(c) for c in q.codes[r, 16 * j:16 * (j + 1)]] == codes, (r, j, block)


@pytest.mark.slow
@pytest.mark.parametrize("rule", ["te", "te_kernel", "torchao"])
@settings(max_examples=6)
@given(data=st.data())
def test_16x16_matches_reference(rule, data):
    tiles_r, tiles_c = data.draw(st.integers(1, 2)), data.draw(st.integers(1, 2))
    x = np.array([[v for _ in range(tiles_c) for v in data.draw(nv_block())]
                  for _ in range(16 * tiles_r)], F32)
    x[np.isnan(x)] = 1.0  # keep this one about tiling
    q = nvfp4_quantize(x, block=(16, 16), scale_rule=rule, global_amax=4.0)
    S = ref_global(F32(4.0), rule)
    assert q.scales.shape == (tiles_r, tiles_c)
    for ti in range(tiles_r):
        for tj in range(tiles_c):
            tile = x[16 * ti:16 * (ti + 1), 16 * tj:16 * (tj + 1)]
            sf, codes = ref_block([float(v) for v in tile.reshape(-1)], S, rule)
            assert int(q.scales[ti, tj]) == sf
            got = q.codes[16 * ti:16 * (ti + 1), 16 * tj:16 * (tj + 1)].reshape(-1)
            assert [int(c) for c in got] == codes


def test_pinned_all_zero_block():
    x = np.zeros((1, 32), F32)
    x[0, 16] = 3.0
    x[0, 5] = -0.0
    te = nvfp4_quantize(x)
    assert int(te.scales[0, 0]) == 0x00 and int(te.codes[0, 0]) == 0
    assert int(te.codes[0, 5]) == 0x8  # negative zero kept
    ao = nvfp4_quantize(x, scale_rule="torchao")
    assert int(ao.scales[0, 0]) == 0x08  # clamped below at 2**-6
    for q in (te, ao):
        assert (q.dequantize()[0, :16] == 0).all()
    assert te.dequantize()[0, 16] == 3.0  # S_enc = 896, sf = 448, q = 6: exact
    # torchao: p = fl(3 / 2688) is inexact; torchao rounds the scale p * 448 to float32
    # first and multiplies the element 6 by it (NVFP4Tensor.to_dtype): 6 * fl(448 * p)
    assert ao.dequantize()[0, 16] == F32(6 * F32(F32(448) * ao.global_scale))


def test_pinned_outlier_block():
    # global amax 2688 -> S_enc = 1; block amax 6 -> sf = 1.0 (0x38); 6 -> 0x7, tiny -> 0
    x = np.full((1, 16), 1e-3, F32)
    x[0, 7] = -6.0
    q = nvfp4_quantize(x, global_amax=2688.0)
    assert q.global_scale == 1.0
    assert int(q.scales[0, 0]) == 0x38
    assert int(q.codes[0, 7]) == 0xF and not np.delete(q.codes[0], 7).any()
    assert q.dequantize()[0, 7] == -6.0


def test_pinned_subnormal_block_scale():
    # S_enc = 1; block amax 6 * 2**-8 -> sf = 2**-8, an E4M3 subnormal (mantissa 2: 0x02)
    x = np.zeros((1, 16), F32)
    x[0, 0], x[0, 1] = 6 * 2.0 ** -8, 2.0 ** -8
    q = nvfp4_quantize(x, global_amax=2688.0)
    assert int(q.scales[0, 0]) == 0x02
    assert [int(c) for c in q.codes[0, :2]] == [0x7, 0x2]  # 6 and 1
    assert q.dequantize()[0, :2].tolist() == [6 * 2.0 ** -8, 2.0 ** -8]
    # torchao clamps the same block scale up to 2**-6 (0x08): the elements become
    # 6 * 2**-8 / 2**-6 = 1.5 (0x3) and 0.25, a tie between 0 and 0.5 that goes to 0
    a = nvfp4_quantize(x, global_amax=2688.0, scale_rule="torchao")
    assert int(a.scales[0, 0]) == 0x08
    assert [int(c) for c in a.codes[0, :2]] == [0x3, 0x0]


def test_pinned_te_reference_and_kernel_differ():
    """The reference multiplies by S_enc / sf, the kernel by 1 / (sf * (1 / S_enc)); with
    sf = 1 the kernel's multiplier is fl(1/fl(1/S_enc)), here one ulp below S_enc, so an
    element the reference puts exactly on the 3.5 tie (even: 4.0) falls below it (3.0)."""
    ga = F32(1.4457228)
    S = F32(F32(2688.0) / ga)
    kernel_enc = F32(F32(1.0) / F32(F32(1.0) / S))
    assert kernel_enc < S
    x = np.zeros((1, 16), F32)
    x[0, 0] = F32(0.0032270597)  # block amax: amax / 6 * S_enc rounds to E4M3 1.0
    x[0, 1] = F32(0.0018824516)
    assert F32(x[0, 1] * S) == 3.5 and F32(x[0, 1] * kernel_enc) < 3.5
    ref = nvfp4_quantize(x, global_amax=ga)
    ker = nvfp4_quantize(x, global_amax=ga, scale_rule="te_kernel")
    assert int(ref.scales[0, 0]) == int(ker.scales[0, 0]) == 0x38
    assert int(ref.codes[0, 1]) == 0x6 and int(ker.codes[0, 1]) == 0x5
    assert nvfp4_quantize(np.zeros((1, 16), F32), scale_rule="te_kernel").global_scale == 1.0


def test_pinned_global_amax_zero_and_inf():
    z = nvfp4_quantize(np.zeros((2, 16), F32))
    assert z.global_scale == FLT_MAX  # 2688 / 0 = Inf, clamped to FLT_MAX
    assert not z.scales.any() and not z.codes.any()
    assert not z.dequantize().any()
    with pytest.raises(ValueError, match="torchao"):
        nvfp4_quantize(np.zeros((2, 16), F32), scale_rule="torchao")
    assert nvfp4_quantize(np.ones((1, 16), F32), global_amax=np.inf).global_scale == 1.0
    # a zero global amax given for non-zero data: the formulas still define every code
    q = nvfp4_quantize(np.full((1, 16), 2.0, F32), global_amax=0.0)
    assert int(q.scales[0, 0]) == 0x7E  # block scale clamps to 448
    # 2 * (FLT_MAX / 448) saturates to 6 (0x7), which decodes to 6 * 448 / FLT_MAX
    assert int(q.codes[0, 0]) == 0x7
    assert q.dequantize()[0, 0] == F32(F32(6 * 448) / FLT_MAX)


def test_nan_block_is_local():
    x = np.ones((1, 32), F32)
    x[0, 3] = np.nan
    q = nvfp4_quantize(x)
    assert int(q.scales[0, 0]) == 0x7F and not q.codes[0, :16].any()
    d = q.dequantize()
    assert np.isnan(d[0, :16]).all() and (d[0, 16:] == 1.0).all()


@pytest.mark.slow
@pytest.mark.parametrize("rule", ["te", "torchao"])
@settings(max_examples=20)
@given(x=nv_tensor())
def test_round_trip_bound(rule, x):
    """Per block: |x - dq| <= max(1.0 * sf, amax * S_enc - 6 * sf) / S_enc (half the widest
    E2M1 step, or the clipping that an E4M3-rounded-down scale causes)."""
    x = x[~np.isnan(x).any(axis=1)]
    if x.size == 0 or not np.abs(x).max() > 0:
        return
    if rule == "te" and 448.0 * 6 / float(np.abs(x).max()) > float(np.finfo(np.float32).max):
        # S_enc = 2688 / amax overflows float32 and is clamped to FLT_MAX (the rule's
        # documented choice): the bound below assumes S_enc = 2688 / amax
        return
    q = nvfp4_quantize(x, scale_rule=rule)
    dq = q.dequantize(np.float64)
    S = float(q.global_scale) if rule == "te" else 1.0 / float(q.global_scale)
    sf = np.array([[float(e4m3_value(int(c))) for c in row] for row in q.scales])
    blocks = x.astype(np.float64).reshape(x.shape[0], -1, 16)
    amax = np.abs(blocks).max(axis=-1)
    bound = np.maximum(sf, amax * S - 6 * sf) / S * (1 + 2.0 ** -20)
    err = np.abs(blocks - dq.reshape(blocks.shape)).max(axis=-1)
    assert (err <= bound).all()


def test_exact_when_representable():
    rng = np.random.default_rng(2)
    e2m1 = np.array([float(v) for v, _ in E2M1])
    q_vals = rng.choice(np.concatenate([e2m1, -e2m1]), size=(4, 64))
    q_vals[:, ::16] = 6.0  # each block's amax is 6 * sf exactly
    sf = rng.choice([float(v) for v, _ in E4M3 if v >= 2 ** -6], size=(4, 4))
    x = (q_vals.reshape(4, 4, 16) * sf[..., None]).reshape(4, 64).astype(F32)
    q = nvfp4_quantize(x, global_amax=2688.0)  # S_enc = 1
    assert np.array_equal(q.dequantize(), x)


def test_hadamard_round_trip_and_amax():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((4, 64)).astype(F32)
    x[1, 5] = 40.0  # an outlier the transform spreads
    q = nvfp4_quantize(x, hadamard=True)
    y = hadamard_transform(x)
    assert q.global_scale == F32(2688.0) / F32(np.abs(y).max())  # amax after the transform
    plain = nvfp4_quantize(y, global_amax=float(np.abs(y).max()))
    assert np.array_equal(plain.codes, q.codes) and np.array_equal(plain.scales, q.scales)
    assert np.array_equal(q.dequantize(undo_hadamard=False), plain.dequantize())
    # the transform is orthogonal: per 16-group, the error norm in the original domain
    # equals the error norm in the transformed domain (up to float32 rounding)
    ex = (x.astype(np.float64) - q.dequantize(np.float64)).reshape(4, 4, 16)
    ey = (y.astype(np.float64) - plain.dequantize(np.float64)).reshape(4, 4, 16)
    nx, ny = np.linalg.norm(ex, axis=-1), np.linalg.norm(ey, axis=-1)
    scale = np.linalg.norm(x.reshape(4, 4, 16), axis=-1)
    assert (np.abs(nx - ny) <= 1e-6 * scale + 1e-12).all()
    assert quantization_error(x, q).rmse == pytest.approx(quantization_error(y, plain).rmse,
                                                          rel=1e-6)


def test_axis_packing_and_errors():
    rng = np.random.default_rng(8)
    x = rng.standard_normal((32, 3)).astype(F32)
    q = nvfp4_quantize(x, axis=0)
    assert q.scales.shape == (2, 3)
    t = nvfp4_quantize(np.ascontiguousarray(x.T), global_amax=float(np.abs(x).max()))
    assert np.array_equal(q.codes, t.codes.T) and np.array_equal(q.scales, t.scales.T)
    packed = q.packed()
    assert packed.size == x.size // 2
    back = NVFP4Array.from_packed(packed, q.scales, q.global_scale, q.shape, axis=0)
    assert np.array_equal(back.dequantize(), q.dequantize())
    with pytest.raises(ValueError, match="4-bit"):
        NVFP4Array(np.full((1, 16), 0x10, np.uint8), np.zeros((1, 1), np.uint8), 1.0)
    with pytest.raises(ValueError, match="scales"):
        NVFP4Array(np.zeros((1, 16), np.uint8), np.zeros((1, 2), np.uint8), 1.0)
    with pytest.raises(ValueError, match="multiple of 16"):
        nvfp4_quantize(np.ones((2, 20), F32))
    with pytest.raises(ValueError, match="not a float32"):
        nvfp4_quantize(np.full((1, 16), 0.1))
    with pytest.raises(ValueError, match="scale_rule"):
        nvfp4_quantize(np.ones((1, 16), F32), scale_rule="mx")
    with pytest.raises(ValueError, match="axis must be -1"):
        nvfp4_quantize(np.ones((16, 16), F32), block=(16, 16), axis=0)
    with pytest.raises(ValueError, match="global_amax"):
        nvfp4_quantize(np.ones((1, 16), F32), global_amax=-1.0)


def test_flags_and_packed_length_are_checked():
    x = np.ones((1, 32), np.float32)
    with pytest.raises(TypeError, match="hadamard"):
        nvfp4_quantize(x, hadamard="no")  # a truthy string once applied the transform
    q = nvfp4_quantize(x)
    with pytest.raises(TypeError, match="undo_hadamard"):
        q.dequantize(undo_hadamard="no")
    packed = q.packed()
    assert packed.size == 16  # 32 FP4 codes, two per byte
    with pytest.raises(ValueError, match="packed"):
        NVFP4Array.from_packed(np.concatenate([packed, packed]), q.scales, q.global_scale,
                               (1, 32))
    r = NVFP4Array.from_packed(packed, q.scales, q.global_scale, (1, 32))
    assert np.array_equal(r.codes, q.codes)
