"""refimpl.rounding_modes: one vocabulary of rounding modes.

The expected names are written here from IEEE 754-2019 section 4.3 (the five
rounding-direction attributes) and the PTX ISA's descriptions of its modifiers (9.7.3:
``.rn`` to nearest even, ``.rna`` to nearest with ties away from zero, ``.rz`` toward
zero, ``.rm`` toward negative infinity, ``.rp`` toward positive infinity; the ``i``
forms round to an integral value), not read from the module under test. The codes in
the encoder checks are derived by hand.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from refimpl import formats as F
from refimpl.matmul.blockfma import BlockFMA
from refimpl.matmul.rounding import ROUNDINGS
from refimpl.rounding_modes import (
    PTX_INTEGER_MODIFIERS,
    PTX_MODIFIERS,
    ROUNDING_MODES,
    RoundingMode,
    rounding_mode,
)

PTX_BY_HAND = {"rn": "nearest_even", "rna": "nearest_away", "rz": "toward_zero",
               "rm": "toward_negative", "rp": "toward_positive", "rs": "stochastic"}
PTX_INTEGER_BY_HAND = {"rni": "nearest_even", "rzi": "toward_zero",
                       "rmi": "toward_negative", "rpi": "toward_positive"}


def test_the_canonical_names():
    assert ROUNDING_MODES == ("nearest_even", "nearest_away", "toward_zero",
                              "toward_positive", "toward_negative", "stochastic")
    assert F.ROUNDING_MODES == ROUNDING_MODES  # the encoder offers exactly these


def test_ptx_modifiers_map_onto_the_names():
    assert {k: v.value for k, v in PTX_MODIFIERS.items()} == PTX_BY_HAND
    assert {k: v.value for k, v in PTX_INTEGER_MODIFIERS.items()} == PTX_INTEGER_BY_HAND
    with pytest.raises(TypeError):
        PTX_MODIFIERS["rn"] = RoundingMode.TOWARD_ZERO  # a frozen table


@pytest.mark.parametrize("mode", list(RoundingMode))
def test_enum_member_and_plain_string_resolve_alike(mode):
    assert rounding_mode(mode) == rounding_mode(mode.value) == mode.value
    assert type(rounding_mode(mode)) is str
    assert f"{mode}" == str(mode) == mode.value


# 2.5 and 3.5 are E2M1 ties between 2/3 and 3/4; -2.5 between -2 and -3; 1.25 between 1
# and 1.5 (E2M1 values 0, 0.5, 1, 1.5, 2, 3, 4, 6; codes 0..7, sign bit 0x8)
E2M1_TIES = np.array([2.5, 3.5, -2.5, 1.25], np.float32)
BY_HAND = {
    "nearest_even": [0x4, 0x6, 0xC, 0x2],      # 2, 4, -2, 1
    "nearest_away": [0x5, 0x6, 0xD, 0x3],      # 3, 4, -3, 1.5
    "toward_zero": [0x4, 0x5, 0xC, 0x2],       # 2, 3, -2, 1
    "toward_positive": [0x5, 0x6, 0xC, 0x3],   # 3, 4, -2, 1.5
    "toward_negative": [0x4, 0x5, 0xD, 0x2],   # 2, 3, -3, 1
}


@pytest.mark.parametrize("name", list(BY_HAND))
def test_encoder_takes_the_enum(name):
    mode = RoundingMode(name)
    assert F.encode(E2M1_TIES, "e2m1", rounding=mode).tolist() == BY_HAND[name]
    assert F.encode(E2M1_TIES, "e2m1", rounding=name).tolist() == BY_HAND[name]


@pytest.mark.parametrize("old, new, fmt, x", [
    ("floor", "toward_negative", "e2m1", E2M1_TIES),
    ("ceil", "toward_positive", "e2m1", E2M1_TIES),
    ("up", "nearest_away", "e8m0", np.array([3.0, 6.0, 1.5], np.float32)),
])
def test_old_spellings_warn_and_give_the_same_codes(old, new, fmt, x):
    with pytest.warns(DeprecationWarning, match=f"rounding={old!r}.*{new!r}"):
        got = F.encode(x, fmt, rounding=old)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        want = F.encode(x, fmt, rounding=new)
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


def test_e8m0_up_is_ties_up_by_hand():
    # 3.0 lies between 2 (0x80) and 4 (0x81); 6.0 between 4 and 8 (0x82); ties go up
    assert F.encode(np.float32([3.0, 6.0]), "e8m0", rounding="nearest_away").tolist() == \
        [0x81, 0x82]


def test_errors():
    with pytest.raises(TypeError, match="rounding"):
        rounding_mode(1)
    with pytest.raises(TypeError, match="rounding"):
        F.encode(1.0, "e4m3", rounding=None)
    with pytest.raises(ValueError, match="unknown rounding 'rn'"):
        rounding_mode("rn")  # the PTX spelling is the interpreter's, not the API's
    with pytest.raises(ValueError, match="unsigned"):
        F.encode(1.0, "e4m3", rounding="up")
    with pytest.raises(ValueError, match="toward_zero"):
        rounding_mode("toward_positive", allowed=("nearest_even", "toward_zero"))


def test_accumulators_use_the_same_names():
    assert set(ROUNDINGS) <= set(ROUNDING_MODES)
    a = BlockFMA(4, 24, output_rounding=RoundingMode.NEAREST_EVEN)
    b = BlockFMA(4, 24, output_rounding="nearest_even")
    assert a == b and type(a.output_rounding) is str and repr(a) == repr(b)
    with pytest.raises(ValueError, match="output_rounding"):
        BlockFMA(4, 24, output_rounding="toward_positive")

