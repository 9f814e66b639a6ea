"""Cases of the matmul, attention and scaling areas against independent oracles: a
float32 Python loop, NumPy's own BLAS product (must land inside the acceptance
interval), a float64 NumPy softmax attention, and pinned hand-derived cases."""
from __future__ import annotations

import numpy as np
import pytest

from oracle.cases import registry
from oracles import built_case
from refimpl.formats import decode


def test_blas_product_lies_in_the_acceptance_interval() -> None:
    spec, inputs, out = built_case("matmul.exact.fp32.16x300x8")
    tol = spec.tolerance["c"].resolve(out)
    blas = inputs["a"] @ inputs["b"]                   # any float32 summation order
    assert tol.compare(blas, out["c"]).ok
    assert tol.compare(out["c"], out["c"]).ok
    off = out["c"].copy()
    off[3, 3] = np.float32(out["hi"][3, 3] * 1.01 + 1)
    assert not tol.compare(off, out["c"]).ok
    # the correctly rounded result is within half an ulp of the float64 product
    ref = inputs["a"].astype(np.float64) @ inputs["b"].astype(np.float64)
    assert np.allclose(out["c"], ref, rtol=2 ** -23, atol=1e-30)


def test_sequential_equals_a_float32_loop() -> None:
    _, inputs, out = built_case("matmul.sequential.bf16.16x300x8")
    a, b = decode(inputs["a"], "bf16"), decode(inputs["b"], "bf16")
    acc = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for k in range(a.shape[1]):
        acc = (acc + (a[:, k:k + 1] * b[k:k + 1, :]).astype(np.float32)).astype(np.float32)
    assert np.array_equal(out["c"], acc)


def _np_attention(q, k, v, visible):
    hq, hkv = q.shape[1], k.shape[1]
    kq = np.repeat(k, hq // hkv, axis=1).astype(np.float64)
    vq = np.repeat(v, hq // hkv, axis=1).astype(np.float64)
    s = q.astype(np.float64) @ np.swapaxes(kq, -1, -2) / np.sqrt(q.shape[-1])
    s = np.where(visible, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    e = np.where(np.isneginf(s), 0.0, np.exp(s - np.where(np.isneginf(m), 0, m)))
    d = e.sum(axis=-1, keepdims=True)
    return np.where(d > 0, e @ vq / np.where(d > 0, d, 1), 0.0)


@pytest.mark.parametrize("align", ["bottom_right", "top_left"])
def test_causal_cases_match_numpy_and_discriminate_alignment(align: str) -> None:
    spec, x, out = built_case(f"attention.attention.gqa.causal_{align}.17x40")
    sq, sk = 17, 40
    i, j = np.arange(sq)[:, None], np.arange(sk)[None, :]
    vis = j <= i + (sk - sq if align == "bottom_right" else 0)
    want = _np_attention(x["q"], x["k"], x["v"], vis)
    assert np.abs(out["out"] - want).max() < 1e-5
    tol = spec.tolerance["out"].resolve(out)
    assert tol.compare(want.astype(np.float32), out["out"]).ok
    other = "top_left" if align == "bottom_right" else "bottom_right"
    vis2 = j <= i + (sk - sq if other == "bottom_right" else 0)
    wrong = _np_attention(x["q"], x["k"], x["v"], vis2).astype(np.float32)
    assert not tol.compare(wrong, out["out"]).ok


def test_empty_rows_give_zero_and_minus_inf() -> None:
    _, x, out = built_case("attention.attention.empty_rows")
    assert (out["out"][-1] == 0).all() and np.isneginf(out["lse"][-1]).all()
    # right padding: n valid keys, bottom-right alignment on n: row i sees j <= i + n - 9
    n = x["key_padding_mask"].sum(axis=-1)
    i, j = np.arange(9)[None, :, None], np.arange(6)[None, None, :]
    sees = ((j <= i + n[:, None, None] - 9) & (j < n[:, None, None])).any(axis=-1)
    assert (np.isfinite(out["lse"]) == sees[:, None, :]).all()
    assert (out["out"][~np.broadcast_to(sees[:, None, :], out["lse"].shape)] == 0).all()


def test_flash_schedules_agree_with_numpy() -> None:
    for cid in ("attention.flash_v2.mha.16x16", "attention.flash_v1.m256"):
        spec, x, fl = built_case(cid)
        want = _np_attention(x["q"], x["k"], x["v"], np.ones((33, 33), bool))
        assert np.abs(fl["out"] - want).max() < 1e-5
        assert spec.tolerance["out"].resolve(fl).compare(want.astype(np.float32),
                                                          fl["out"]).ok
    reads, writes, peak, computed, skipped = fl["stats"]
    assert peak <= 256 and skipped == 0 and computed > 0


def test_mx_pinned_cases() -> None:
    _, _, e2m1 = built_case("scaling.mx.e2m1.floor")
    assert e2m1["scales"][1, 0] == 128 and e2m1["scales"][2, 0] == 127   # 8.0 and 7.9999995
    for rule, scale, code, value in (("floor", 128, 0x7E, 896.0), ("rceil", 129, None, 960.0)):
        _, x, out = built_case(f"scaling.mx.e4m3.{rule}")
        assert x["x"][6, 1] == 957.0
        assert out["scales"][6, 0] == scale and out["dequantized"][6, 1] == value
        if code is not None:
            assert out["codes"][6, 1] == code
    _, _, z = built_case("scaling.mx.e4m3.floor")
    assert z["scales"][0, 0] == 0 and (z["dequantized"][0] == 0).all()


def test_mx_nonfinite_variants() -> None:
    _, _, nan = built_case("scaling.mx.e4m3.floor.inf_block=nan")
    assert (nan["scales"][:3, 0] == 0xFF).all() and nan["scales"][3, 0] != 0xFF
    _, _, mx = built_case("scaling.mx.e4m3.floor.inf_block=max")
    assert mx["scales"][0, 0] == 0xFF and (mx["scales"][1:3, 0] == 0xFE).all()


def test_nvfp4_zero_block_rules() -> None:
    _, _, te = built_case("scaling.nvfp4.te.1x16")
    _, _, ta = built_case("scaling.nvfp4.torchao.1x16")
    assert te["scales"][0, 0] == 0x00 and ta["scales"][0, 0] == 0x08


def test_flash_v3_cases() -> None:
    spec, x, fp16 = built_case("attention.flash_v3.fp16.32x32")
    i, j = np.arange(64)[:, None], np.arange(64)[None, :]
    want = _np_attention(x["q"], x["k"], x["v"], j <= i)
    assert np.abs(fp16["out"] - want).max() < 1e-5
    spec, x, fp8 = built_case("attention.flash_v3.fp8.block")
    want = _np_attention(x["q"], x["k"], x["v"], np.ones((64, 64), bool))
    assert np.abs(fp8["out"] - want).max() < 1e-5          # out is the exact attention
    tol = spec.tolerance["out"].resolve(fp8)
    assert tol.compare(fp8["fp8_model"], fp8["out"]).ok     # the model passes its own rule
    assert not tol.compare(np.zeros_like(fp8["out"]), fp8["out"]).ok


def test_delayed_scaling_case_against_a_window_max() -> None:
    _, x, out = built_case("scaling.delayed.max.h16")
    a = x["amax"]
    for t in range(len(a)):
        window = a[max(0, t - 15):t + 1]
        want = np.float32(448.0) / np.float32(window.max())
        assert out["scales"][t] == want, t
    _, x, recent = built_case("scaling.delayed.most_recent.h16")
    a = x["amax"]
    assert recent["scales"][8] == recent["scales"][6]          # zero amax keeps the scale
    assert recent["scales"][9] == np.float32(448.0) / a[9]


def test_quantization_error_and_standard_attention_cases() -> None:
    _, x, out = built_case("scaling.quantization_error.mxfp4")
    d = x["x"].astype(np.float64) - x["q"].astype(np.float64)
    rmse, max_abs, sqnr = out["metrics"]
    assert abs(rmse - np.sqrt(np.mean(d * d))) < 1e-12 and max_abs == np.abs(d).max()
    assert abs(sqnr - 10 * np.log10((x["x"].astype(np.float64) ** 2).sum()
                                    / (d * d).sum())) < 1e-9
    _, x, out = built_case("attention.standard.mha")
    reads, writes = out["stats"][:2]
    n, d_, heads = 33, 16, 2
    assert reads + writes == heads * (4 * n * d_ + 4 * n * n)     # 4Nd + 4N^2 per head


#: presets whose C enters after the block with a round to nearest (NVIDIA Blackwell
#: mma.sync FP8), or whose arithmetic rounds to nearest (AMD): the probes below differ
_C_AFTER_OR_RN = {"B200-E4M3", "B200-E5M2", "MI100-FP16", "MI100-BF16", "MI250X-FP16",
                  "MI250X-BF16", "MI300X-FP16", "MI300X-BF16", "MI300X-TF32", "MI300X-E4M3",
                  "MI300X-E5M2"}
_F13 = {"H100-E4M3", "H100-E5M2", "H100-E4M3-MMA", "H100-E5M2-MMA", "L40S-E4M3",
        "L40S-E5M2"}


def test_tensor_core_cases_hold_the_probe_results() -> None:
    """Every ``matmul.mma`` case embeds the probes at fixed outputs (oracle/cases/matmul.py):
    (0, 0): c = 2048 plus 1.75 * 2^-12, 1.75 FP32 ulps: truncated 2048 + 2^-12, rounded
    to nearest 2048 + 2^-11, dropped by the F = 13 grid: 2048; (1, 1): c = 256 plus
    0.75 ulp: truncated 256, nearest 256 + 2^-15; (2, 2): the smallest subnormal times
    1: itself (0 on CDNA2, which flushes it); (3, 3): 1 - 1 + (-0): +0; row 4 / column 5 hold Inf or NaN; C[6, 6] Inf
    and C[7, 7] NaN (FP32) or 65504 + 16 (FP16: Inf)."""
    from refimpl import formats as F

    reg = registry()
    specs = [c for c in reg.all_cases if c.operation == "matmul.mma"]
    assert len(specs) >= 30
    for spec in specs:
        name, out_fmt, fmt = (spec.params["accumulate"], spec.params["out_format"],
                              spec.params["in_format"])
        _, _, out = built_case(spec.id)
        d = out["d"] if out_fmt == "fp32" else decode(out["d"], "fp16")
        d = d.astype(np.float64)
        rn = name in _C_AFTER_OR_RN
        if out_fmt == "fp32":
            want00 = 2048 + 2.0**-11 if rn else (2048.0 if name in _F13 else 2048 + 2.0**-12)
            assert d[0, 0] == want00, spec.id
            assert d[1, 1] == (256 + 2.0**-15 if rn else 256.0), spec.id
            assert d[6, 6] == np.inf and np.isnan(d[7, 7]), spec.id
        else:  # FP16: 2048 + 1.75 2^-12 and 256 + 0.75 2^-15 round to nearest: 2048, 256
            assert (d[0, 0], d[1, 1], d[6, 6]) == (2048.0, 256.0, np.inf), spec.id
        # CDNA2 flushes subnormal inputs to zero
        # (BF16/TF32 subnormals, 2^-133 and 2^-136, are far below FP16's 2^-25: +0 there)
        tiny = 0.0 if name.startswith("MI250X") or (
            out_fmt == "fp16" and fmt in ("bf16", "tf32")) else F.get(fmt).min_subnormal
        assert d[2, 2] == tiny, spec.id
        assert d[3, 3] == 0 and not np.signbit(d[3, 3]), spec.id
        assert not np.isfinite(d[4, :5]).any() and not np.isfinite(d[:, 5]).any(), spec.id
