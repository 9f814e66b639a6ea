"""NVFP4 rule ``torchao``: dequantised values are ``e * (p * s)`` as torchao's
``NVFP4Tensor.to_dtype`` computes them (the scale ``p * s`` rounded to float32 first,
then the element multiplied by it), and ``conform`` compares dequantised values.

Independent expectation, exact by construction: e (E2M1, 2 significant bits), s (E4M3,
4 bits) and p (float32, 24 bits) are exact in float64, p * s has at most 28 bits and is
exact in float64, so float32(p * s) is one correct rounding; e * that has at most 26
bits, exact in float64, so its float32 is one correct rounding again."""
from __future__ import annotations

import numpy as np
import pytest

from oracle.conformance import ConformanceError, check_nvfp4_quantize
from oracle.random_stream import CaseRandom
from refimpl import formats as F
from refimpl.scaling import nvfp4_quantize


def _x(seed: int, rows: int = 32, cols: int = 64) -> np.ndarray:
    r = CaseRandom(seed, "tests.nvfp4.torchao")
    return (r.normal((rows, cols)) * np.float32(3)).astype(np.float32)


def _parts(q):
    e = F.decode(q.codes, F.E2M1).astype(np.float64)
    s = np.repeat(F.decode(q.scales, F.E4M3).astype(np.float64), 16, axis=-1)
    return e, s, np.float64(q.global_scale)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_dequantize_is_e_times_the_rounded_scale(seed: int) -> None:
    q = nvfp4_quantize(_x(seed), scale_rule="torchao")
    e, s, p = _parts(q)
    want = (e * (p * s).astype(np.float32).astype(np.float64)).astype(np.float32)
    got = q.dequantize()
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    # float64: every product exact, the order does not matter
    np.testing.assert_array_equal(q.dequantize(np.float64), e * s * p)


def test_the_other_order_differs_on_this_input() -> None:
    """(e * s) * p, the order computed before, is one float32 step off on some
    elements: the two rules are distinguishable, so the test above can fail."""
    q = nvfp4_quantize(_x(0), scale_rule="torchao")
    e, s, p = _parts(q)
    old = ((e * s).astype(np.float32).astype(np.float64) * p).astype(np.float32)
    diff = old.view(np.int32).astype(np.int64) - q.dequantize().view(np.int32)
    assert np.count_nonzero(diff) > 0 and np.abs(diff).max() == 1


def test_te_rule_is_unchanged() -> None:
    q = nvfp4_quantize(_x(1), scale_rule="te")
    e, s, g = _parts(q)
    want = ((e * s) / g).astype(np.float32)          # e * s exact; one division
    np.testing.assert_array_equal(q.dequantize().view(np.uint32), want.view(np.uint32))


def _impl(order: str):
    def quantize(x):
        q = nvfp4_quantize(x, scale_rule="torchao")
        e, s, p = _parts(q)
        if order == "torchao":
            deq = (e * (p * s).astype(np.float32).astype(np.float64)).astype(np.float32)
        else:
            deq = ((e * s).astype(np.float32).astype(np.float64) * p).astype(np.float32)
        return q.codes, q.scales, q.global_scale, deq
    return quantize


def test_conform_compares_dequantized_values() -> None:
    r = check_nvfp4_quantize(_impl("torchao"), scale_rule="torchao", max_examples=5)
    assert r.compared["dequantized"] > 0
    with pytest.raises(ConformanceError) as err:
        check_nvfp4_quantize(_impl("other"), scale_rule="torchao", max_examples=0)
    kinds = [f.kind for f in err.value.failures]
    assert kinds and all(k.startswith("dequantized one float32 step off") for k in kinds)
    assert err.value.counts["codes"][0] == 0 and err.value.counts["scales"][0] == 0
