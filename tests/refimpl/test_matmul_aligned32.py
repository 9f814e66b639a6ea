"""The block FMA's fast kernel (refimpl.matmul.aligned32) against the plain version.

The plain version is ``BlockFMA.dot_reference``: the module docstring of
refimpl.matmul.blockfma step by step in exact rational arithmetic, one dot product at a
time, block after block. Every preset is run through ``matmul`` (which takes the kernel
wherever its exactness conditions hold, the float64 path elsewhere) on random operands
of the preset's input format: zeros (also whole rows and columns), subnormals, the
largest values, wide and narrow exponent ranges, K not a multiple of the block, with and
without C.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refimpl import formats as F
from refimpl.matmul import BlockFMA, PRESETS, matmul
from refimpl.matmul import aligned32
from refimpl.matmul.alignment import emin_pair

BLOCKFMA = [name for name, p in PRESETS.items()
            if isinstance(p.model(), BlockFMA)]


@st.composite
def values(draw, fmt: str, shape: tuple[int, int], spread: int) -> np.ndarray:
    """Values of ``fmt``: signed significands scaled by 2^e, e within ``spread`` of 0,
    with zeros, the format's largest value and its smallest subnormal mixed in."""
    size = shape[0] * shape[1]
    sig = np.array(draw(st.lists(st.floats(-2, 2, width=32), min_size=size, max_size=size)))
    exp = np.array(draw(st.lists(st.integers(-spread, spread), min_size=size, max_size=size)))
    kind = np.array(draw(st.lists(st.sampled_from("vvvvvz0mt"), min_size=size,
                                  max_size=size)))
    info = F.get(fmt)
    x = np.ldexp(sig, exp)
    x = np.where(kind == "z", 0.0, x)
    x = np.where(kind == "m", np.copysign(float(info.max), sig), x)
    x = np.where(kind == "t", np.copysign(float(info.min_subnormal), sig), x)
    return np.asarray(F.round_to(x, fmt, saturate=True), np.float32).reshape(shape)


def reference(model: BlockFMA, a, b, c, out_format: str) -> np.ndarray:
    m, n = a.shape[0], b.shape[1]
    out = np.empty((m, n), np.float32)
    for i in range(m):
        for j in range(n):
            c0 = 0.0 if c is None else float(c[i, j])
            d = model.dot_reference(a[i], b[:, j], c0, out_format)
            with np.errstate(over="ignore"):
                out[i, j] = np.float32(d) if out_format == "fp32" else np.float16(d)
    return out


def same_bits(x: np.ndarray, y: np.ndarray) -> bool:
    x, y = np.asarray(x, np.float32), np.asarray(y, np.float32)
    return bool(np.all((x.view(np.uint32) == y.view(np.uint32)) | (np.isnan(x) & np.isnan(y))))


@settings(max_examples=60, deadline=None)
@given(data=st.data(), name=st.sampled_from(BLOCKFMA),
       m=st.integers(1, 3), n=st.integers(1, 3), blocks=st.integers(1, 3),
       extra=st.integers(-3, 3), spread=st.sampled_from([2, 8, 40]),
       with_c=st.booleans(), fp16=st.booleans(), zero=st.sampled_from(["", "a", "b"]))
def test_matmul_equals_the_plain_block_fma(data, name, m, n, blocks, extra, spread,
                                            with_c, fp16, zero):
    model = BlockFMA.preset(name)
    fmt = PRESETS[name].in_format
    k = max(1, blocks * model.n + extra)
    a = data.draw(values(fmt, (m, k), spread))
    b = data.draw(values(fmt, (k, n), spread))
    if zero == "a":  # a row of zeros against non-zero columns (and the reverse)
        a[-1] = 0
    elif zero == "b":
        b[:, -1] = 0
    out = "fp16" if fp16 else "fp32"
    c = None
    if with_c:
        c = data.draw(values(out, (m, n), spread)).astype(np.float32)
    got = matmul(a, b, c, accumulate=name, out_format=out)
    assert same_bits(got, reference(model, a, b, c, out))


@settings(max_examples=30, deadline=None)
@given(data=st.data(), name=st.sampled_from(BLOCKFMA), batch=st.integers(2, 4),
       m=st.integers(1, 3), n=st.integers(1, 3), blocks=st.integers(1, 2),
       spread=st.sampled_from([2, 8, 40]), with_c=st.booleans(), fp16=st.booleans())
def test_batched_matmul_equals_the_plain_block_fma(data, name, batch, m, n, blocks, spread,
                                                    with_c, fp16):
    # a batch of products (the tensor-core instructions of all warps of a wave in one
    # call) through the kernel's batched plan, entry by entry against the plain version
    model = BlockFMA.preset(name)
    fmt = PRESETS[name].in_format
    k = blocks * model.n
    a = np.stack([data.draw(values(fmt, (m, k), spread)) for _ in range(batch)])
    b = np.stack([data.draw(values(fmt, (k, n), spread)) for _ in range(batch)])
    out = "fp16" if fp16 else "fp32"
    c = None
    if with_c:
        c = np.stack([data.draw(values(out, (m, n), spread)) for _ in range(batch)])
    got = matmul(a, b, c, accumulate=name, out_format=out)
    for g in range(batch):
        assert same_bits(got[g], reference(model, a[g], b[g], None if c is None else c[g], out))


def test_the_batched_kernel_runs_on_ordinary_operands():
    model = BlockFMA.preset("H100-FP16")
    rng = np.random.default_rng(2)
    a = np.asarray(F.round_to(rng.standard_normal((5, 16, 16)), "fp16"), np.float64)
    b = np.asarray(F.round_to(rng.standard_normal((5, 16, 8)), "fp16"), np.float64)
    p = aligned32.plan(a, b, model.n, model.fraction_bits, emin_pair(model.input_emin))
    assert p is not None and p.shape == (5, 16, 8)


@pytest.mark.parametrize("name", ["H100-FP16", "A100-BF16", "H100-E4M3", "B200-E4M3-TCGEN05"])
def test_the_kernel_runs_on_ordinary_operands(name):
    # the property above exercises the kernel only if it accepts such operands
    model = BlockFMA.preset(name)
    fmt = PRESETS[name].in_format
    rng = np.random.default_rng(1)
    a = np.asarray(F.round_to(rng.standard_normal((4, 40)), fmt, saturate=True), np.float64)
    b = np.asarray(F.round_to(rng.standard_normal((40, 3)), fmt, saturate=True), np.float64)
    assert aligned32.plan(a, b, model.n, model.fraction_bits,
                          emin_pair(model.input_emin)) is not None


def test_the_kernel_refuses_what_it_cannot_compute_exactly():
    model = BlockFMA.preset("H100-BF16")
    emin = emin_pair(model.input_emin)
    # FP32 operands: products of up to 48 bits are not float32 values
    full = np.full((2, 16), 1 + 2.0**-23)
    assert aligned32.plan(full, full.T, 16, 25, emin) is None
    # exponents 2^120 apart in one block row: the scaled operands leave float32's range
    wide = np.ones((1, 16))
    wide[0, 1] = 2.0**-120
    assert aligned32.plan(wide, np.ones((16, 1)), 16, 25, emin) is None
    # F too wide for int32 sums of single products
    assert aligned32.plan(np.ones((1, 4)), np.ones((4, 1)), 4, 30, emin) is None
    # the same operands give the plain version's answer through the float64 path
    for a, b in ((full.astype(np.float32), full.T.astype(np.float32)),
                 (wide.astype(np.float32), np.ones((16, 1), np.float32))):
        assert same_bits(matmul(a, b, accumulate="H100-BF16"),
                         reference(model, a, b, None, "fp32"))


def test_significand_bits():
    assert aligned32.significand_bits(np.array([0.0, 1.0, 0.75, -1.5])) == 2
    assert aligned32.significand_bits(np.zeros(3)) == 0
    assert aligned32.significand_bits(np.array([1 + 2.0**-23])) == 24
    assert aligned32.significand_bits(np.array([1 + 2.0**-30])) == 25


@settings(max_examples=40, deadline=None)
@given(data=st.data(), name=st.sampled_from(["B200-MXF8F6F4", "B200-MXF4", "B200-NVF4"]),
       m=st.integers(1, 3), n=st.integers(1, 3), blocks=st.integers(1, 2),
       scale_range=st.sampled_from([3, 127]), with_c=st.booleans(),
       zero=st.sampled_from(["", "a", "b"]))
def test_block_scaled_equals_the_plain_model(data, name, m, n, blocks, scale_range, with_c,
                                             zero):
    # the fast paths of block_scaled_matmul (the aligned32 kernel for mxf8f6f4 with E8M0
    # scales, float64 group sums for mxf4nvf4) against BlockScaledFMA.dot_reference
    from refimpl.matmul import block_scaled_matmul
    model = PRESETS[name].model()
    fmt = "e2m1" if model.kind == "mxf4nvf4" else data.draw(st.sampled_from(["e4m3", "e5m2"]))
    k = blocks * model.k
    nb = k // model.scale_block
    a = data.draw(values(fmt, (m, k), 6)).astype(np.float64)
    b = data.draw(values(fmt, (k, n), 6)).astype(np.float64)
    if zero == "a":
        a[-1] = 0
    elif zero == "b":
        b[:, -1] = 0
    if model.scale_format == "e8m0":
        ints = st.integers(-scale_range, scale_range)
        sa = np.ldexp(1.0, np.array(data.draw(st.lists(ints, min_size=m * nb,
                                                        max_size=m * nb)))).reshape(m, nb)
        sb = np.ldexp(1.0, np.array(data.draw(st.lists(ints, min_size=nb * n,
                                                        max_size=nb * n)))).reshape(nb, n)
    else:
        sa = np.abs(data.draw(values("e4m3", (m, nb), 6))).astype(np.float64)
        sb = np.abs(data.draw(values("e4m3", (nb, n), 6))).astype(np.float64)
    c = data.draw(values("fp32", (m, n), 20)) if with_c else None
    got = block_scaled_matmul(a, sa, b, sb, c, accumulate=name, in_format=fmt)
    emin = F.get(fmt).emin
    want = np.empty((m, n), np.float32)
    for i in range(m):
        for j in range(n):
            cij = 0.0 if c is None else float(c[i, j])
            want[i, j] = np.float32(model.dot_reference(a[i], sa[i], b[:, j], sb[:, j], cij,
                                                        (emin, emin)))
    assert same_bits(got, want)


def test_block_scaled_subnormal_elements_have_the_format_exponent():
    # E4M3 elements 2^-9 (subnormal: exponent -6, not -9) times 1: the grid is
    # 2^(-6 - 25), so c = -2^-10 (1 + 2^-23) loses its last bit, 2^-33, and the sum
    # 2^-4 - 2^-10 is exact; with exponent -9 the bit would stay and the sum, rounded
    # toward zero, would be one unit (2^-28) lower
    from refimpl.matmul import block_scaled_matmul
    model = PRESETS["B200-MXF8F6F4"].model()
    a = np.full((1, 32), 2.0**-9)
    b = np.ones((32, 1))
    c = np.array([[-2.0**-10 * (1 + 2.0**-23)]], np.float32)
    got = block_scaled_matmul(a, np.ones((1, 1)), b, np.ones((1, 1)), c,
                              accumulate="B200-MXF8F6F4", in_format="e4m3")
    want = model.dot_reference(a[0], np.ones(1), b[:, 0], np.ones(1), float(c[0, 0]),
                               (-6, -6))
    assert got[0, 0] == np.float32(want) == np.float32(2.0**-4 - 2.0**-10)
