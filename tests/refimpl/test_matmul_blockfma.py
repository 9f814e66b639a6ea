"""BlockFMA tensor-core model: every preset on hand-derived inputs.

Each expected value below is derived by hand from the model's definition (products
exact; alignment to the largest exponent; truncation toward zero F bits past it; exact
sum; FP32 output rounded toward zero), written as a formula in n and F.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refimpl.matmul import BlockFMA, matmul

#: the published parameters, as the issue and the papers state them
PUBLISHED = {
    "V100-FP16": (4, 23), "A100-FP16": (8, 24), "A100-BF16": (8, 24), "A100-TF32": (4, 24),
    "H100-FP16": (16, 25), "H100-BF16": (16, 25), "H100-FP8": (32, 13), "B200-FP8": (32, 25),
}


def dot(row, model) -> np.float32:
    a = np.array(row, np.float32)[None, :]
    return matmul(a, np.ones((a.shape[1], 1), np.float32), accumulate=model)[0, 0]


def test_presets_have_published_parameters():
    for name, (n, f) in PUBLISHED.items():
        model = BlockFMA.preset(name)
        assert (model.n, model.fraction_bits, model.output_rounding) == (n, f, "toward_zero")


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_c_one_with_tiny_products_truncated_away(name):
    n, f = PUBLISHED[name]
    # block 1 makes c = 1; block 2 adds n products of 2^-(F+1): each is half a quantum
    # 2^-F past the alignment point of c, so truncation drops all of them
    row = [1.0] + [0.0] * (n - 1) + [2.0 ** -(f + 1)] * n
    if BlockFMA.preset(name).c_placement == "after":
        # C added after the block: the products alone are aligned among themselves (all
        # kept: n 2^-(F+1) = 2^-21 for n = 32, F = 25), then 1 + 2^-21 is one FP32 RN
        # addition, exact here
        assert dot(row, name) == np.float32(1 + n * 2.0 ** -(f + 1))
        return
    assert dot(row, name) == np.float32(1.0)
    # the correctly rounded sum keeps them (1 + n 2^-(F+1) is an FP32 value here)
    assert dot(row, "exact") == np.float32(1 + n * 2.0 ** -(f + 1))


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_c_one_with_products_of_one_quantum_kept(name):
    n, f = PUBLISHED[name]
    row = [1.0] + [0.0] * (n - 1) + [2.0**-f] * n
    assert dot(row, name) == np.float32(1 + n * 2.0**-f)


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_alignment_before_the_carry(name):
    n, f = PUBLISHED[name]
    # terms 1.75, 1.75, 1.5*2^-F: aligned to exponent 0, the small one keeps 2^-F; the
    # sum 3.5 + 2^-F is normalised once (exponent 1) and rounded toward zero to the
    # accumulator, where the spacing in [2, 4) is 2^(1 - bits): 2^-22 for FP32, 2^-12 for
    # the 13-bit H100 FP8 accumulator
    row = [1.75, 1.75, 1.5 * 2.0**-f] + [0.0] * (n - 3)
    want = 3.5 + 2.0**-f if f <= BlockFMA.preset(name).output_fraction_bits - 1 else 3.5
    assert dot(row, name) == np.float32(want)


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_opposite_signs_truncate_toward_zero(name):
    n, f = PUBLISHED[name]
    # -1.5*2^-F truncates toward zero to -2^-F (two's complement would give -2^(1-F));
    # 1 - 2^-F is an FP32 value for F <= 24, else rounds toward zero to 1 - 2^-24
    row = [1.0, -1.5 * 2.0**-f] + [0.0] * (n - 2)
    assert dot(row, name) == np.float32(1 - 2.0 ** -min(f, 24))


@pytest.mark.parametrize("name", [k for k, (n, f) in PUBLISHED.items() if f >= 24])
def test_output_rounding_toward_zero(name):
    n, f = PUBLISHED[name]
    # 1 + (2^(F-22) - 1) 2^-F lies 1.5 (F=24) or 1.75 (F=25) FP32 ulps above 1
    row = [1.0, (2.0 ** (f - 22) - 1) * 2.0**-f] + [0.0] * (n - 2)
    assert dot(row, name) == np.float32(1 + 2.0**-23)
    assert dot(row, BlockFMA(n, f, "nearest_even")) == np.float32(1 + 2.0**-22)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PUBLISHED))
@settings(max_examples=15)
@given(data=st.data())
def test_degenerates_to_exact_when_terms_share_an_exponent(name, data):
    n, _ = PUBLISHED[name]
    # FP8-like significands (4 bits) in [1, 2) (or (-2, -1]) times 2^e: one exponent for
    # all, so nothing is truncated; the exact sum has <= 4 + log2(n) + 1 bits (FP32)
    # (normal numbers of the preset's input format: exponents from its minimum up)
    emin = BlockFMA.preset(name).input_emin
    e = data.draw(st.integers(max(-20, emin if emin is not None else -20), 20))
    sig = data.draw(st.lists(st.integers(8, 15), min_size=n, max_size=n))
    neg = data.draw(st.lists(st.booleans(), min_size=n, max_size=n))
    row = [(-1.0 if s else 1.0) * m / 8 * 2.0**e for m, s in zip(sig, neg)]
    assert dot(row, name) == dot(row, "exact")


def test_long_k_chains_blocks_and_partial_last_block():
    model = BlockFMA(4, 23)
    # 4 + 4 + 2 products: block 1 -> c = 4 (exponent 2, quantum 2^(2-23) = 2^-21);
    # block 2 adds 2^-21 four times (one quantum each: kept) -> 4 + 2^-19; block 3 holds
    # two products of 2^-22, half a quantum each: truncated away
    row = [1.0] * 4 + [2.0**-21] * 4 + [2.0**-22] * 2
    assert dot(row, model) == np.float32(4 + 2.0**-19)
    assert dot(row, "exact") == np.float32(4 + 2.0**-19 + 2.0**-21)


def test_special_values():
    assert np.isnan(dot([np.inf, -np.inf, 1.0, 1.0], "V100-FP16"))
    assert np.isnan(dot([np.nan, 1.0], "A100-FP16"))
    assert dot([np.inf, 1.0, 2.0, 3.0, 4.0, 5.0], "V100-FP16") == np.inf
    assert np.signbit(dot([-0.0, -0.0], "V100-FP16")) == np.False_  # c starts at +0
    # overflow gives Inf, also under truncation (the hardware tests; MMA-Sim); the IEEE
    # roundTowardZero answer (the largest finite value) on request
    assert dot([3e38, 3e38], "V100-FP16") == np.inf
    assert dot([-3e38, -3e38], "V100-FP16") == -np.inf
    sat = BlockFMA(4, 23, overflow="saturate")
    assert dot([3e38, 3e38], sat) == np.float32(3.4028235e38)


def test_bad_arguments():
    with pytest.raises(ValueError, match="n"):
        BlockFMA(0, 23)
    with pytest.raises(ValueError, match="output_rounding"):
        BlockFMA(4, 23, "up")
    with pytest.raises(ValueError, match="preset"):
        BlockFMA.preset("H200-FP4")


wide = st.builds(lambda m, e: float(np.float32(m * 2.0**e)), st.floats(-2, 2, width=32),
                 st.integers(-30, 30))
edge = st.sampled_from([0.0, -0.0, 1.0, -1.0, 2.0**-24, 3e38, -3e38, 2.0**-140])


@settings(max_examples=40)
@given(st.sampled_from(sorted(PUBLISHED)) | st.builds(
           lambda n, f, r: BlockFMA(n, f, r), st.integers(1, 9), st.integers(3, 30),
           st.sampled_from(["toward_zero", "nearest_even"])),
       st.lists(st.tuples(st.one_of(wide, edge), st.one_of(wide, edge)), min_size=0,
                max_size=40))
def test_vectorised_path_matches_plain_reference(model, pairs):
    """The vectorised block path against the step-by-step Fraction version."""
    m = BlockFMA.preset(model) if isinstance(model, str) else model
    a = np.array([p[0] for p in pairs], np.float32)
    b = np.array([p[1] for p in pairs], np.float32)
    got = matmul(a[None, :], b[:, None], accumulate=m)[0, 0]
    want = np.float32(m.dot_reference(a, b))
    assert got.tobytes() == want.tobytes() or (np.isnan(got) and np.isnan(want)), (got, want)
