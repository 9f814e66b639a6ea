"""``conform softmax.softmax`` under the public rule ``softmax_tolerance``: float32
softmaxes that subtract the maximum pass (vectorised and sequential sums), one without
the max subtraction, one rounding to bf16, one giving NaN for a fully masked row and one
a few ulps beyond the bound fail."""
from __future__ import annotations

import numpy as np
import pytest

from oracle.conformance import ConformanceError, check_softmax
from oracle.tolerance import Ulp, softmax_tolerance


def _safe(x: np.ndarray, sequential: bool = False) -> np.ndarray:
    m = np.max(x, axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, np.float32(0))
    e = np.exp(x - m)
    if sequential:
        s = np.zeros(x.shape[:-1] + (1,), np.float32)
        for j in range(x.shape[-1]):
            s[..., 0] += e[..., j]
    else:
        s = np.sum(e, axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        y = e / s
    return np.where(s > 0, y, np.float32(0)).astype(np.float32)


def test_the_rule_by_hand() -> None:
    # L = 3, D = 1 (the -inf entry is masked): 8 + 3 + 2 * 1
    assert softmax_tolerance(np.float32([[0, 1, -np.inf]])) == Ulp(13, "fp32")
    # D = 2.5 -> ceil 3; the fully masked row adds nothing; L = 2
    assert softmax_tolerance(np.float32([[0.5, -2], [-np.inf, -np.inf]])) == Ulp(16, "fp32")
    with pytest.raises(ValueError, match="NaN"):
        softmax_tolerance(np.float32([[0, np.nan]]))
    with pytest.raises(ValueError, match="empty"):
        softmax_tolerance(np.zeros((2, 0), np.float32))


@pytest.mark.parametrize("sequential", [False, True])
def test_a_float32_softmax_passes(sequential: bool) -> None:
    r = check_softmax(lambda x: _safe(x, sequential), max_examples=20)
    assert r.compared["y"] > 1000


@pytest.mark.parametrize("impl, kind", [
    (lambda x: np.nan_to_num((np.exp(x.astype(np.float64)) /
                              np.exp(x.astype(np.float64)).sum(-1, keepdims=True))
                             .astype(np.float32)), "y "),
    (lambda x: (_safe(x).view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32),
     "beyond the ulp bound (finite entry)"),
    (lambda x: np.where(np.isfinite(x).any(-1, keepdims=True), _safe(x), np.nan)
     .astype(np.float32), "NaN where a number is expected (fully masked row)"),
])
def test_wrong_softmaxes_fail(impl, kind: str) -> None:
    with np.errstate(all="ignore"), pytest.raises(ConformanceError) as err:
        check_softmax(impl, max_examples=0)
    assert any(kind in f.kind for f in err.value.failures), err.value


def test_just_beyond_the_bound_fails() -> None:
    def off(x: np.ndarray) -> np.ndarray:
        y = _safe(x)
        n = int(softmax_tolerance(x).n)
        i = np.unravel_index(np.argmax(y), y.shape)     # a value near 1: ulp 2^-24..2^-23
        y[i] = np.float32(np.float64(y[i]) - (n + 3) * 2.0 ** -23)
        return y

    with pytest.raises(ConformanceError, match="beyond the ulp bound"):
        check_softmax(off, max_examples=0)
