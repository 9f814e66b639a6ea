"""The preset registry, and every preset's vectorised path against its plain Fraction
reference (``dot_reference``), with C, FP16 output and special values."""
from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refimpl import formats as F
from refimpl.matmul import (
    ALIASES, PRESETS, BlockFMA, BlockScaledFMA, MatrixCore, block_scaled_matmul, canonical,
    matmul, preset,
)
from refimpl.matmul.presets import SOURCES, aliases_of


def test_registry_entries_are_documented():
    for name, p in PRESETS.items():
        assert re.fullmatch(r"[A-Z0-9]+-[A-Z0-9]+(-[A-Z0-9]+)?", name), name
        assert name.startswith(p.gpu + "-")
        assert p.sources and set(p.sources) <= set(SOURCES), name
        assert p.evidence in ("measured", "inferred"), name
        assert p.note and p.instruction, name
        model = p.model()
        assert model.name == name
        F.get(p.in_format.split("/")[0]) if "/" not in p.in_format and not \
            p.in_format.startswith(("mx", "nv")) else None


def test_aliases():
    assert canonical("H100-FP8") == "H100-E4M3"
    assert canonical("b200-fp8") == "B200-E4M3"
    assert canonical("H200-E5M2") == "H100-E5M2"
    assert canonical("A30-TF32") == "A100-TF32" and canonical("A2-BF16") == "A100-BF16"
    assert canonical("A40-FP16") == "A100-FP16"
    assert canonical("L4-E4M3") == "L40S-E4M3" and canonical("RTX4090-TF32") == "L40S-TF32"
    assert canonical("MI250-BF16") == "MI250X-BF16" and canonical("MI300A-FP16") == "MI300X-FP16"
    assert "H200-E4M3" in aliases_of("H100-E4M3")
    for alias, name in ALIASES.items():
        assert name in PRESETS
        assert repr(preset(alias)) == repr(preset(name))
    with pytest.raises(ValueError, match="unknown tensor-core preset"):
        canonical("H300-FP16")
    with pytest.raises(TypeError):
        canonical(3)
    with pytest.raises(ValueError, match="block-scaled"):
        matmul(np.ones((1, 32), np.float32), np.ones((32, 1), np.float32),
               accumulate="B200-MXF8F6F4")
    with pytest.raises(ValueError, match="FP32 only"):
        matmul(np.ones((1, 4), np.float32), np.ones((4, 1), np.float32),
               accumulate="MI300X-FP16", out_format="fp16")


def test_tf32_conversions():
    x = np.array([[1 + 2.0**-11 + 2.0**-12, -(1 + 2.0**-11 + 2.0**-12)]], np.float32)
    one = np.ones((2, 1), np.float32)
    # RNE: 1 + 1.5 * 2^-11 ulp(TF32) = 2^-10: 1.5 ulp... (1 + 2^-11 + 2^-12) is 0.75 ulp
    # above 1 (TF32 ulp 2^-10): RNE 1 + 2^-10, truncation 1; the pair cancels either way
    assert matmul(x[:, :1], one[:1], accumulate="A100-TF32", in_format="tf32")[0, 0] \
        == np.float32(1 + 2.0**-10)
    assert matmul(x[:, :1], one[:1], accumulate="A100-TF32",
                  in_format="tf32_truncate")[0, 0] == np.float32(1.0)
    assert matmul(x[:, 1:], one[:1], accumulate="A100-TF32",
                  in_format="tf32_truncate")[0, 0] == np.float32(-1.0)


# ------------------------------------------------------------------ fast vs plain
def _values(fmt: str, data, size: int, specials: bool) -> np.ndarray:
    f = F.get(fmt)
    lo = max(f.emin - f.man_bits - 1, -140)
    hi = min(f.emax, 60)
    mags = data.draw(st.lists(st.floats(1.0, 2.0, exclude_max=True), min_size=size,
                              max_size=size))
    exps = data.draw(st.lists(st.integers(lo, hi), min_size=size, max_size=size))
    signs = data.draw(st.lists(st.sampled_from([-1.0, 1.0]), min_size=size, max_size=size))
    x = np.array([s * m * 2.0**e for s, m, e in zip(signs, mags, exps)])
    x = np.asarray(F.round_to(x, f, saturate=True), np.float64)
    zeros = data.draw(st.lists(st.booleans(), min_size=size, max_size=size))
    x[np.array(zeros, bool)] = data.draw(st.sampled_from([0.0, -0.0]))
    if specials and size and data.draw(st.booleans()):
        i = data.draw(st.integers(0, size - 1))
        x[i] = data.draw(st.sampled_from([np.inf, -np.inf, np.nan]))
    return x


def _c_values(fmt: str, data, size: int) -> np.ndarray:
    f = F.get(fmt)
    x = _values(fmt, data, size, False)
    extra = data.draw(st.sampled_from([None, f.max, -f.max, 2.0 ** (f.emin - f.man_bits)]))
    if extra is not None and size:
        x[0] = extra
    return x


NON_SCALED = sorted(n for n, p in PRESETS.items() if not p.block_scaled)


@pytest.mark.slow
@pytest.mark.parametrize("name", NON_SCALED)
@settings(max_examples=12, deadline=None)
@given(data=st.data())
def test_vectorised_matches_reference(name, data):
    model = preset(name)
    fmt = PRESETS[name].in_format
    out = "fp16" if isinstance(model, BlockFMA) and data.draw(st.booleans()) else "fp32"
    n = model.n if isinstance(model, BlockFMA) else model.group
    k = data.draw(st.integers(1, 2 * n + 3))
    specials = data.draw(st.booleans())
    a = _values(fmt, data, 2 * k, specials).reshape(2, k)
    b = _values(fmt, data, 2 * k, specials).reshape(k, 2)
    c = _c_values(out, data, 4).reshape(2, 2) if data.draw(st.booleans()) else None
    if out == "fp16" and a.size and (np.abs(a[np.isfinite(a)]).max(initial=0) > 2**7):
        a = np.clip(a, -2**7, 2**7)  # keep FP16 sums mostly in range (overflow still tested)
    with np.errstate(over="ignore", invalid="ignore"):
        got = matmul(a.astype(np.float32), b.astype(np.float32),
                     None if c is None else c.astype(np.float32 if out == "fp32" else np.float16),
                     accumulate=name, out_format=out)
    for i in range(2):
        for j in range(2):
            cij = 0.0 if c is None else float(c[i, j])
            if isinstance(model, MatrixCore):
                want = model.dot_reference(a[i], b[:, j], cij)
            else:
                want = model.dot_reference(a[i], b[:, j], cij, out_format=out)
            w = np.float32(want)
            assert got[i, j].tobytes() == w.tobytes() or (np.isnan(got[i, j]) and np.isnan(w)), \
                (name, out, i, j, got[i, j], w)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["B200-MXF8F6F4", "B200-MXF4", "B200-NVF4"])
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_block_scaled_vectorised_matches_reference(name, data):
    model = preset(name)
    assert isinstance(model, BlockScaledFMA)
    fmt = "e2m1" if model.kind == "mxf4nvf4" else data.draw(
        st.sampled_from(["e4m3", "e5m2", "e3m2", "e2m3", "e2m1"]))
    bs = model.scale_block
    nb = data.draw(st.integers(1, 4))
    k = nb * bs
    a = _values(fmt, data, 2 * k, False).reshape(2, k)
    b = _values(fmt, data, 2 * k, False).reshape(k, 2)
    if model.scale_format == "e8m0":
        sa = np.ldexp(1.0, np.array(data.draw(st.lists(st.integers(-20, 20), min_size=2 * nb,
                                                       max_size=2 * nb)))).reshape(2, nb)
        sb = np.ldexp(1.0, np.array(data.draw(st.lists(st.integers(-20, 20), min_size=2 * nb,
                                                       max_size=2 * nb)))).reshape(nb, 2)
    else:
        sa = np.abs(_values("e4m3", data, 2 * nb, False)).reshape(2, nb)
        sb = np.abs(_values("e4m3", data, 2 * nb, False)).reshape(nb, 2)
    c = _c_values("fp32", data, 4).reshape(2, 2) if data.draw(st.booleans()) else None
    got = block_scaled_matmul(a, sa, b, sb, c, accumulate=name, in_format=fmt)
    emin = F.get(fmt).emin
    for i in range(2):
        for j in range(2):
            cij = 0.0 if c is None else float(c[i, j])
            w = np.float32(model.dot_reference(a[i], sa[i], b[:, j], sb[:, j], cij,
                                               (emin, emin)))
            assert got[i, j].tobytes() == w.tobytes() or (np.isnan(got[i, j]) and np.isnan(w))
