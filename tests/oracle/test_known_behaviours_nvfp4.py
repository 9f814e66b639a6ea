"""The NVFP4 known behaviour ``torchao_nvfp4_reciprocal_overflow``: torchao (0.18)
multiplies the elements by ``(1 / p) / s`` in float32; for a tensor with a tiny amax
that factor is Inf, so zeros become NaN (E2M1 0x3 or 0xB) and the rest +-6.

The simulated torchao here is written from that description in float32 NumPy: the
per-tensor scale ``p = amax / 2688``, the block scale ``s`` (E4M3 of ``(block amax / 6)
/ p`` clamped to [2^-6, 448], encoded with refimpl's exhaustively tested codec), then
``clamp(x * ((1 / p) / s), -6, 6)`` rounded to E2M1, a NaN to 0xB."""
from __future__ import annotations

import numpy as np
import pytest

from oracle.conformance import ConformanceError, check_nvfp4_quantize
from oracle.known_behaviours import (
    KNOWN_BEHAVIOURS, case_behaviours, nvfp4_codes_behaviours,
)
from refimpl import formats as F
from refimpl.scaling import nvfp4_quantize

NAME = "torchao_nvfp4_reciprocal_overflow"


def torchao_like(x: np.ndarray) -> tuple:
    x = np.asarray(x, np.float32)
    with np.errstate(all="ignore"):
        p = np.float32(np.abs(x).max()) / np.float32(448 * 6)
        amax = np.abs(x).reshape(x.shape[0], -1, 16).max(axis=-1)
        s = F.encode(np.clip((amax / np.float32(6)) / p, 2.0 ** -6, 448), "e4m3")
        factor = (np.float32(1) / p) / F.decode(s, "e4m3")
        y = np.clip(x.reshape(x.shape[0], -1, 16) * factor[..., None], -6, 6)
    codes = F.encode(y.reshape(x.shape), "e2m1", nan=0xB)
    return codes, s, p


def test_the_simulation_agrees_with_the_rule_on_ordinary_data() -> None:
    """Away from the overflow the reciprocal form gives the rule's codes on these
    inputs (so the behaviour below is the overflow, not a different rule)."""
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((8, 64)) * 3).astype(np.float32)
    codes, s, p = torchao_like(x)
    q = nvfp4_quantize(x, scale_rule="torchao")
    assert np.array_equal(s, q.scales) and np.array_equal(codes, q.codes)


def test_the_detector_names_only_the_overflow_blocks() -> None:
    x = (np.float32(2.0 ** -126) * np.arange(-8, 8, dtype=np.float32) / 4)[None, :]
    q = nvfp4_quantize(x, scale_rule="torchao")
    codes, s, p = torchao_like(x)
    assert not np.array_equal(codes, q.codes)              # it does differ here
    assert codes[0, 8] == 0xB                               # the zero: NaN -> 0xB
    assert nvfp4_codes_behaviours(x, q.global_scale, q.scales, s, q.codes, codes) == \
        [(0, 0, NAME)]
    wrong = codes.copy()
    wrong[0, 1] ^= 0x1                                      # not what torchao gives
    assert nvfp4_codes_behaviours(x, q.global_scale, q.scales, s, q.codes, wrong) == []


def test_conform_names_the_behaviour_and_passes_the_rule() -> None:
    with pytest.raises(ConformanceError) as err:
        check_nvfp4_quantize(lambda x: torchao_like(x), scale_rule="torchao",
                             max_examples=0)
    kinds = [f.kind for f in err.value.failures]
    assert kinds and all(f"({NAME})" in k for k in kinds), kinds
    assert KNOWN_BEHAVIOURS[NAME].summary in str(err.value)

    def rule(x):
        q = nvfp4_quantize(x, scale_rule="torchao")
        return q.codes, q.scales, q.global_scale, q.dequantize()
    check_nvfp4_quantize(rule, scale_rule="torchao", max_examples=0)


def test_a_golden_case_names_the_behaviour() -> None:
    """What ``check`` and ``run`` call for a failing output (case_behaviours), on an
    NVFP4 torchao case holding the tiny tensor."""
    x = (np.float32(2.0 ** -126) * np.arange(-8, 8, dtype=np.float32) / 4)[None, :]
    q = nvfp4_quantize(x, scale_rule="torchao")
    expected = {"codes": q.codes, "scales": q.scales,
                "global_scale": np.asarray(q.global_scale, np.float32)}
    params = {"block": [1, 16], "scale_rule": "torchao", "global_amax": None,
              "hadamard": False}
    codes, s, _ = torchao_like(x)
    [note] = case_behaviours("scaling.nvfp4_quantize", params, {"x": x}, expected,
                             "codes", codes, {"scales": s}.get)
    assert NAME in note and "the one failing block" in note
    # another rule's case is not explained by it
    assert case_behaviours("scaling.nvfp4_quantize", {**params, "scale_rule": "te"},
                           {"x": x}, expected, "codes", codes, {"scales": s}.get) == []
