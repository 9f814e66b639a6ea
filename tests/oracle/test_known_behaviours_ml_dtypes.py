"""The known behaviour ``ml_dtypes_nan_to_opposite_zero``: ml_dtypes (0.7) casts a NaN
to FP4/FP6 as the zero of the opposite sign. Simulated from that description: refimpl's
encoder for numbers, and for a NaN the code of the zero whose sign bit is the
complement of the NaN's."""
from __future__ import annotations

import numpy as np
import pytest

from oracle.conformance import ConformanceError, conform
from oracle.known_behaviours import KNOWN_BEHAVIOURS, encode_behaviour
from refimpl import formats as F

NAME = "ml_dtypes_nan_to_opposite_zero"
SIGN = {"e2m1": 0x8, "e2m3": 0x20, "e3m2": 0x20}


def cast(fmt: str, nan_code=None):
    def fn(x):
        x = np.asarray(x, np.float32)
        nan = np.isnan(x)
        codes = np.asarray(F.encode(np.where(nan, 0, x), fmt)).copy()
        if nan_code is None:       # the opposite zero: +NaN -> -0, -NaN -> +0
            codes[nan] = np.where(np.signbit(x[nan]), 0, SIGN[fmt])
        else:
            codes[nan] = nan_code
        return codes
    return fn


@pytest.mark.parametrize("fmt", sorted(SIGN))
def test_conform_names_the_behaviour(fmt: str) -> None:
    with pytest.raises(ConformanceError) as err:
        conform("formats.encode", cast(fmt), fmt, variant={f"nan_to_{fmt}": "signed_zero"},
                max_examples=0)
    kinds = [f.kind for f in err.value.failures]
    assert kinds and all(f"({NAME})" in k for k in kinds), kinds


def test_another_nan_mapping_is_not_named() -> None:
    with pytest.raises(ConformanceError) as err:
        conform("formats.encode", cast("e2m1", nan_code=0x1), "e2m1",
                variant={"nan_to_e2m1": "zero"}, max_examples=0)
    assert NAME not in str(err.value)


def test_the_detector() -> None:
    assert encode_behaviour(np.float64("nan"), 0x8, "e2m1") == NAME
    assert encode_behaviour(-np.float64("nan"), 0x0, "e2m1") == NAME
    assert encode_behaviour(np.float64("nan"), 0x0, "e2m1") is None      # same sign
    assert encode_behaviour(1.0, 0x0, "e2m1") is None                    # not a NaN
    assert encode_behaviour(np.float64("nan"), 0x80, "e4m3") is None     # has a NaN
    assert KNOWN_BEHAVIOURS[NAME].operation == "formats.encode"
