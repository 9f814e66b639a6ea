"""``encode(..., nan="signed_zero")``: a NaN becomes the zero of its own sign (IEEE 754-2019
section 6.3: the sign bit of a NaN is defined even where its payload is not)."""
from __future__ import annotations

import numpy as np
import pytest

from refimpl import formats as F

#: format -> (+0 code, -0 code), by hand: the sign bit is the top bit of the code;
#: E4M3FNUZ has no negative zero (its 0x80 is the NaN), so both signs give +0
ZEROS = {"e2m1": (0x0, 0x8), "e2m3": (0x00, 0x20), "e3m2": (0x00, 0x20),
         "e4m3fnuz": (0x00, 0x00), "e4m3": (0x00, 0x80)}


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("fmt", sorted(ZEROS))
def test_nan_payloads_of_both_signs(fmt: str, dtype: type) -> None:
    width = np.dtype(dtype).itemsize * 8
    uint = np.dtype(f"u{width // 8}")
    man = {16: 10, 32: 23, 64: 52}[width]
    exp_all = ((1 << (width - 1 - man)) - 1) << man
    payloads = [1, 2, 1 << (man - 1), (1 << man) - 1, 12345 % (1 << man) or 1]
    bits = np.array([exp_all | p for p in payloads], dtype=np.uint64)
    pos = bits.astype(uint).view(dtype)
    neg = (bits | (1 << (width - 1))).astype(uint).view(dtype)
    x = np.concatenate([pos, neg, np.array([1.0, -0.0], dtype=dtype)])
    with np.errstate(invalid="ignore"):
        codes = F.encode(x, fmt, nan="signed_zero")
    plus, minus = ZEROS[fmt]
    n = len(payloads)
    assert codes[:n].tolist() == [plus] * n
    assert codes[n:2 * n].tolist() == [minus] * n
    assert codes[-1] == F.encode(np.array([-0.0], dtype=dtype), fmt)[0]   # -0.0 as usual


def test_zero_policy_ignores_the_sign_and_errors_name_signed_zero() -> None:
    x = np.array([np.nan, -np.nan], np.float32)
    x[1] = np.copysign(np.float32(np.nan), np.float32(-1))
    assert F.encode(x, "e2m1", nan="zero").tolist() == [0, 0]
    with pytest.raises(ValueError, match="signed_zero"):
        F.encode(x, "e2m1")
    with pytest.raises(ValueError, match="signed_zero"):
        F.encode(x, "e2m1", nan="signed")
