"""The chunked float32 paths of MX and NVFP4 quantisation against the plain paths.

``mx_quantize`` on float32 input runs in cache-sized chunks
(``refimpl.scaling.float32_blocks``). It is compared with

- the whole-array vectorised path it replaced (``refimpl.scaling.mx._quantize_general``,
  itself tested against exact references in ``test_scaling_mx.py``), on many blocks;
- the plain per-block reference in ``Fraction`` arithmetic
  (``refimpl.scaling.mx_reference.quantize_block``), on a few,

for every element format, scale rule, Inf policy and rounding mode of the chunked path,
with blocks that hold Inf or NaN, tiny maxima (2^-137 .. 2^-119), float32 subnormals,
exact ties between two element values, and chunk boundaries. Dequantisation is checked
exhaustively (every code with every scale code) against the exact float64 product
rounded once to float32. NVFP4's chunked element encoding is compared with its
whole-array form (``refimpl.scaling.nvfp4._encode_elements_plain``).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from refimpl import formats
from refimpl.scaling import INT8, MXArray, mx_quantize, mx_scale_exponent, nvfp4_quantize
from refimpl.scaling import float32_blocks as FB
from refimpl.scaling import mx as MX
from refimpl.scaling import nvfp4 as NV
from refimpl.scaling.mx_reference import quantize_block

ELEMENTS = ["e4m3", "e5m2", "e3m2", "e2m3", "e2m1", "int8"]
RULES = ["floor", "ceil", "even", "rceil"]
POLICIES = ["nan", "max", "exponent"]
MODES = ["nearest_even", "nearest_away", "toward_zero"]
KINDS = ["random", "tiny_amax", "subnormal", "ties", "inf", "nan", "zero", "huge"]


def _values(name: str) -> np.ndarray:
    """Sorted non-negative finite element values, float64 (enumerated from codes)."""
    if name == "int8":
        return np.arange(128) / 64.0
    f = formats.get(name)
    codes = np.arange(f.max_code_magnitude + 1)
    return np.unique(formats.decode(codes.astype(f.code_dtype), f).astype(np.float64))


@st.composite
def block(draw, name: str, size: int = 32) -> np.ndarray:
    kind = draw(st.sampled_from(KINDS))
    seed = draw(st.integers(0, 2 ** 32 - 1))
    rng = np.random.default_rng(seed)
    pos = draw(st.integers(0, size - 1))
    m = np.clip(rng.standard_normal(size), -1.96875, 1.96875)
    if kind == "tiny_amax":     # floor(log2 amax) = e, e in -137 .. -119
        e = draw(st.integers(-137, -119))
        m[pos] = draw(st.sampled_from([1.5, -1.5, 1.0, -1.9375]))
        x = np.ldexp(m, e)
    elif kind == "subnormal":   # float32 subnormal elements under a small normal maximum
        x = rng.integers(-(1 << 23), 1 << 23, size) * 2.0 ** -149
        x[pos] = np.ldexp(draw(st.sampled_from([1.0, -1.25, 1.75])),
                          draw(st.integers(-126, -100)))
    elif kind == "ties":        # midpoints of two element values, at scale 2**e
        vals = _values(name)
        mids = (vals[:-1] + vals[1:]) / 2
        e = draw(st.integers(-120, 100))
        x = mids[rng.integers(0, mids.size, size)] * np.where(rng.integers(0, 2, size), 1, -1)
        x[pos] = vals[-1]
        x = np.ldexp(x, e)
    elif kind == "huge":
        x = np.ldexp(m, draw(st.integers(100, 127)))
    elif kind == "zero":
        x = np.where(rng.integers(0, 2, size) == 1, -0.0, 0.0)
    else:
        x = np.ldexp(m, draw(st.integers(-40, 40)))
        if kind == "inf":
            x[pos] = draw(st.sampled_from([np.inf, -np.inf]))
            if draw(st.booleans()):
                x[(pos + 7) % size] = -x[pos]
        elif kind == "nan":
            x[pos] = np.nan
            if draw(st.booleans()):
                x[(pos + 5) % size] = np.inf
    return x.astype(np.float32)


@st.composite
def tensor(draw, name: str, size: int = 32, max_blocks: int = 6) -> np.ndarray:
    n = draw(st.integers(1, max_blocks))
    return np.stack([draw(block(name, size)) for _ in range(n)])


def _general(x: np.ndarray, name: str, rule: str, policy: str, mode: str, bs: int = 32):
    blocks = x.reshape(x.shape[:-1] + (x.shape[-1] // bs, bs))
    s, c = MX._quantize_general(blocks, MX.element_format(name), rule, policy, mode, None)
    return s, c.reshape(x.shape)


@pytest.mark.parametrize("name", ELEMENTS)
@settings(max_examples=25)
@given(data=st.data())
def test_chunked_matches_whole_array_path(name, data):
    x = data.draw(tensor(name))
    rule = data.draw(st.sampled_from(RULES))
    policy = data.draw(st.sampled_from(POLICIES))
    mode = data.draw(st.sampled_from(MODES))
    q = mx_quantize(x, name, scale_rule=rule, inf_block=policy, rounding=mode)
    s, c = _general(x, name, rule, policy, mode)
    np.testing.assert_array_equal(q.scales, s)
    np.testing.assert_array_equal(q.codes, c)


@pytest.mark.parametrize("name", ELEMENTS)
@settings(max_examples=10)
@given(data=st.data())
def test_chunked_matches_fraction_reference(name, data):
    x = data.draw(tensor(name, max_blocks=2))
    rule = data.draw(st.sampled_from(RULES))
    policy = data.draw(st.sampled_from(POLICIES))
    mode = data.draw(st.sampled_from(MODES))
    q = mx_quantize(x, name, scale_rule=rule, inf_block=policy, rounding=mode)
    for b in range(x.shape[0]):
        scale, codes = quantize_block(x[b].tolist(), name, scale_rule=rule, rounding=mode,
                                      inf_block=policy)
        assert int(q.scales[b, 0]) == scale
        if scale != 0xFF:   # codes under a NaN scale are unread (both give 0 here)
            assert q.codes[b].tolist() == codes


@pytest.mark.parametrize("name", ELEMENTS)
def test_tiny_amax_blocks_every_exponent(name):
    """One block per floor(log2 amax) in -137..-119 (E8M0's 2**-127 floor): a quantiser
    that divides by max(scale, 2**-126) while storing 0x00 differs here."""
    rows = []
    for e in range(-137, -118):
        m = np.linspace(-1.9375, 1.9375, 32)
        m[3] = 1.5
        rows.append(np.ldexp(m, e).astype(np.float32))
    x = np.stack(rows)
    for rule in RULES:
        q = mx_quantize(x, name, scale_rule=rule)
        s, c = _general(x, name, rule, "nan", "nearest_even")
        np.testing.assert_array_equal(q.scales, s)
        np.testing.assert_array_equal(q.codes, c)
        for b in (0, 8, 18):
            scale, codes = quantize_block(x[b].tolist(), name, scale_rule=rule)
            assert (int(q.scales[b, 0]), q.codes[b].tolist()) == (scale, codes)


@pytest.mark.parametrize("bs", [1, 3, 32, 48, 70000])
def test_chunk_boundaries_and_block_sizes(bs):
    """Blocks that do not divide the chunk (48), one block per element, and blocks
    larger than a chunk; against the whole-array path and numpy's max(abs)."""
    rng = np.random.default_rng(bs)
    n = bs * max(1, 140000 // bs)
    x = (rng.standard_normal((2, n)) * np.exp2(rng.integers(-30, 30, (2, n)))).astype(np.float32)
    x[0, 5] = np.nan
    x[1, n - 2] = -np.inf
    a2 = FB.block_max_bits(x.reshape(-1).view(np.uint32), bs)
    want = np.max(np.abs(x.reshape(-1, bs)), axis=1)
    got = (a2 >> np.uint32(1)).view(np.float32)
    assert np.array_equal(got, want, equal_nan=True)
    for name in ("e4m3", "e2m1", "int8"):
        q = mx_quantize(x, name, block_size=bs, inf_block="max")
        s, c = _general(x, name, "floor", "max", "nearest_even", bs)
        np.testing.assert_array_equal(q.scales, s)
        np.testing.assert_array_equal(q.codes, c)


def test_other_axis_and_padding_go_through_the_same_path():
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((70, 5)) * 8).astype(np.float32)
    q = mx_quantize(x, "e4m3", axis=0, pad=True)
    blocks = np.concatenate([x.T, np.zeros((5, 26), np.float32)], axis=1).reshape(5, 3, 32)
    s, c = MX._quantize_general(blocks, formats.E4M3, "floor", "nan", "nearest_even", None)
    np.testing.assert_array_equal(q.scales, s.T)
    np.testing.assert_array_equal(q.codes, c.reshape(5, 96)[:, :70].T)


@pytest.mark.parametrize("name", ELEMENTS)
@pytest.mark.parametrize("rule", RULES)
def test_scale_codes_from_bits_match_scale_exponent(name, rule):
    """Every exponent field, with mantissas at each rule's boundaries."""
    el = MX.element_format(name)
    top = int(np.float32(el.max).view(np.uint32)) & 0x7F_FFFF
    even = (1 << 23) - (1 << (22 - el.man_bits))
    mans = sorted({0, 1, 2, 0x40_0000, 0x7F_FFFF, even - 1, even, even + 1,
                   max(top - 1, 0), top, top + 1})
    bits = np.array([(f << 23) | m for f in range(256) for m in mans], dtype=np.uint32)
    amax = bits.view(np.float32)
    for policy in POLICIES:
        codes, e = MX._scales_from_bits(bits << np.uint32(1), el, rule, policy)
        want_codes, want_e = mx_scale_exponent(amax, el, scale_rule=rule, inf_block=policy)
        np.testing.assert_array_equal(codes, want_codes)
        np.testing.assert_array_equal(e, want_e)


@pytest.mark.parametrize("mode", MODES)
def test_int8_table_matches_direct_rounding(mode):
    """Every entry of the MXINT8 lookup table, read through three inputs sharing it
    (low bits zero, one, all ones), against round(64 v) clamped, computed in float64."""
    table, k = MX._encoder_table(INT8, mode)
    idx = np.arange(1 << (32 - k), dtype=np.uint32)
    for low in (0, 1, (1 << k) - 1):
        b = (idx << np.uint32(k)) | np.uint32(low)
        b = b[~np.isnan(b.view(np.float32))]
        v = b.view(np.float32)
        want = MX._encode_int8(v, mode)
        got = table[(b | ((b & np.uint32((1 << k) - 1)) + np.uint32((1 << k) - 1))) >> k]
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", ELEMENTS)
def test_dequantize_every_code_with_every_scale(name):
    """float32 X * P against the exact float64 product rounded once to float32, bit for
    bit (Inf beyond float32's range, NaN for the NaN scale and NaN codes), except the
    sign of a NaN code under a NaN scale, which IEEE 754-2019 section 6.3 leaves
    unspecified (NumPy's loops pick either operand)."""
    bits = 8 if name in ("e4m3", "e5m2", "int8") else MX.element_format(name).bits
    codes = np.tile(np.arange(1 << bits, dtype=np.uint8), 256)
    codes = np.repeat(codes.reshape(256, -1), 32 // (1 << bits) if bits < 5 else 1, axis=1)
    codes = codes.reshape(256, -1)
    nblk = codes.shape[1] // 32
    scales = np.repeat(np.arange(256, dtype=np.uint8)[:, None], nblk, axis=1)
    got = MXArray(codes, scales, name).dequantize()
    if name == "int8":
        vals = codes.view(np.int8).astype(np.float64) / 64
    else:
        vals = formats.decode(codes, name).astype(np.float64)
    mult = np.where(scales == 255, np.nan, np.ldexp(1.0, scales.astype(np.int64) - 127))
    with np.errstate(over="ignore"):
        want = (vals * np.repeat(mult, 32, axis=1)).astype(np.float32)
    both = np.isnan(vals) & np.repeat(scales == 255, 32, axis=1)
    assert np.isnan(got[both]).all()
    assert np.array_equal(got[~both].view(np.uint32), want[~both].view(np.uint32))
    np.testing.assert_array_equal(MXArray(codes, scales, name).dequantize(np.float64),
                                  vals * np.repeat(mult, 32, axis=1))


@pytest.mark.parametrize("rule", ["te", "te_kernel", "torchao"])
@pytest.mark.parametrize("blk", [(1, 16), (16, 16)])
@settings(max_examples=15)
@given(data=st.data())
@example(data=None)
def test_nvfp4_chunked_matches_whole_array(rule, blk, data):
    if data is None:  # an all-special input: NaN, Inf, zero, subnormal and tiny blocks
        x = np.zeros((16, 64), np.float32)
        x[0, 3], x[1, 20], x[2, 40] = np.nan, np.inf, -np.inf
        x[3] = np.float32(2.0 ** -149) * np.arange(-32, 32)
        x[4] = np.float32(2.0 ** -130) * np.arange(64)
        x[5] = np.float32(3e38)
        ga = None
    else:
        rows = [data.draw(block("e2m1", 64)) for _ in range(16)]
        x = np.stack(rows)
        ga = data.draw(st.one_of(st.none(), st.floats(2.0 ** -60, 2.0 ** 60, width=32)))
    if rule == "torchao":
        x = np.nan_to_num(x, nan=1.0, posinf=3.0, neginf=-3.0)
        if ga is None and not np.abs(x).max() > 0:
            return
    q = nvfp4_quantize(x, scale_rule=rule, block=blk, global_amax=ga)
    tiles = NV._tile_view(x, blk)
    sf = formats.decode(q.scales, formats.E4M3).astype(np.float32)
    nan_block = q.scales == 0x7F
    sf = np.where(nan_block, np.float32(0), sf)
    want = NV._untile(NV._encode_elements_plain(tiles, sf, q.global_scale, rule, nan_block,
                                                blk), blk, x.shape)
    np.testing.assert_array_equal(q.codes, want)


@pytest.mark.parametrize("name", ["e4m3", "e5m2", "e3m2", "e2m3", "e2m1", "e4m3fnuz", "bf16"])
@pytest.mark.parametrize("mode", MODES + ["toward_positive"])
def test_float32_lookup_with_the_kernels_index_is_encode(name, mode):
    """``encode_blocks``'s index ``(b | ((b & low) + low)) >> k`` read in
    ``float32_lookup``'s table gives ``encode`` for random bit patterns (every class:
    subnormal, normal, Inf, NaN) and every index's extreme low bits."""
    from refimpl.formats.encode import float32_lookup

    f = formats.get(name)
    table, k = float32_lookup(f, mode, saturate=True, nan="zero")
    low = np.uint32((1 << k) - 1)
    rng = np.random.default_rng(k)
    b = rng.integers(0, 1 << 32, 20000, dtype=np.uint64).astype(np.uint32)
    top = np.arange(1 << (32 - k), dtype=np.uint32) << np.uint32(k)
    b = np.concatenate([b, top, top | np.uint32(1), top | low])
    x = b.view(np.float32)
    got = table[(b | ((b & low) + low)) >> np.uint32(k)]
    want = formats.encode(x, f, rounding=mode, saturate=True, nan="zero")
    np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match="no float32 table"):
        float32_lookup(f, "stochastic")
