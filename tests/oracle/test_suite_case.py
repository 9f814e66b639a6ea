"""``Case.assert_matches``: a check that compared nothing, or not everything, fails."""
from __future__ import annotations

import numpy as np
import pytest

from oracle import tolerance as T
from oracle.suite import Case


def _case() -> Case:
    codes = np.array([0x38, 0x7E], dtype=np.uint8)       # E4M3 1.0 and 448
    lse = np.array([0.5], dtype=np.float32)
    return Case(id="demo", operation="demo", params={}, inputs={},
                expected={"codes": codes, "lse": lse}, reference={},
                tolerance={"codes": T.exact(), "lse": T.ulp(1, "fp32")},
                formats={"codes": "e4m3"})


def test_all_outputs_matching_pass() -> None:
    c = _case()
    c.assert_matches({"codes": np.array([0x38, 0x7E], np.uint8),
                      "lse": np.array([np.nextafter(np.float32(0.5), np.float32(1))])})


@pytest.mark.parametrize("outputs, missing, unknown", [
    ({}, ["codes", "lse"], []),
    ({"code": np.array([0x38, 0x7E], np.uint8), "lse": np.float32([0.5])},
     ["codes"], ["code"]),
    ({"codes": np.array([0x38, 0x7E], np.uint8)}, ["lse"], []),
    ({"codes": np.array([0x38, 0x7E], np.uint8), "lse": np.float32([0.5]),
      "extra": np.zeros(1)}, [], ["extra"]),
])
def test_missing_and_unknown_outputs_fail(outputs, missing, unknown) -> None:
    with pytest.raises(AssertionError) as info:
        _case().assert_matches(outputs)
    text = str(info.value)
    assert "case demo" in text
    assert (f"missing output(s) {missing}" in text) == bool(missing)
    assert (f"unknown output(s) {unknown}" in text) == bool(unknown)


def test_a_mismatch_still_fails_and_outputs_must_be_a_mapping() -> None:
    with pytest.raises(AssertionError, match="output codes"):
        _case().assert_matches({"codes": np.array([0x38, 0x7D], np.uint8),
                                "lse": np.float32([0.5])})
    with pytest.raises(TypeError, match="mapping"):
        _case().assert_matches([np.zeros(2)])


# --- Case.check: the library call fails alike -------------------------------------

def test_check_of_matching_outputs_passes_each_output() -> None:
    got = _case().check({"codes": np.array([0x38, 0x7E], np.uint8),
                         "lse": np.float32([0.5])})
    assert sorted(got) == ["codes", "lse"] and all(c.ok for c in got.values())


@pytest.mark.parametrize("outputs, failing", [
    ({}, {"codes", "lse"}),
    ({"codes": np.array([0x38, 0x7E], np.uint8)}, {"lse"}),
    ({"code": np.array([0x38, 0x7E], np.uint8), "lse": np.float32([0.5])},
     {"codes", "code"}),
])
def test_check_fails_missing_and_unknown_outputs(outputs, failing) -> None:
    got = _case().check(outputs)
    assert {n for n, c in got.items() if not c.ok} == failing
    assert not all(c.ok for c in got.values())       # the usual all(...) test fails
    for name in failing:
        text = got[name].summary()
        assert "case demo" in text
        assert ("missing" in text) == (name in ("codes", "lse"))
        assert ("not an output" in text) == (name == "code")


def test_check_and_assert_matches_agree_on_every_verdict() -> None:
    right = {"codes": np.array([0x38, 0x7E], np.uint8), "lse": np.float32([0.5])}
    for outputs in (right, {"codes": right["codes"]}, {**right, "x": np.zeros(1)},
                    {"codes": np.array([0x38, 0x7D], np.uint8), "lse": right["lse"]}):
        passed = all(c.ok for c in _case().check(outputs).values())
        try:
            _case().assert_matches(outputs)
            asserted = True
        except AssertionError:
            asserted = False
        assert passed == asserted == (outputs is right)


def test_a_case_without_expected_outputs_compares_nothing_and_fails() -> None:
    empty = Case(id="none", operation="demo", params={}, inputs={}, expected={},
                 reference={}, tolerance={}, formats={})
    got = empty.check({})
    assert not any(c.ok for c in got.values()) and "nothing was compared" in got["-"].summary()
    with pytest.raises(AssertionError, match="no expected output"):
        empty.assert_matches({})
    with pytest.raises(TypeError, match="mapping"):
        _case().check([np.zeros(2)])
