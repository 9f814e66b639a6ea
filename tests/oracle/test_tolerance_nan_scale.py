"""``exact_unless_nan_scale``: element codes under a NaN block scale are don't-care
(OCP MX v1.0 section 5.2: every element of such a block is NaN whatever its code)."""
from __future__ import annotations

import copy
import io
import json

import numpy as np
import pytest

from oracle import tolerance as T
from oracle.cases import registry
from oracle.generation import build_case
from oracle.suite import validate_manifest

NAN, ONE = 0xFF, 127          # E8M0 NaN and 2^0


def test_codes_under_a_nan_scale_are_dont_care() -> None:
    tol = T.exact_unless_nan_scale(np.array([[ONE, NAN], [NAN, ONE]], np.uint8), 2, -1)
    expected = np.array([[1, 2, 3, 4], [5, 6, 7, 8]], np.uint8)
    anything = expected.copy()
    anything[0, 2:] = [0xAA, 0x00]          # row 0, block 1: NaN scale
    anything[1, :2] = [0x80, 0x7F]          # row 1, block 0: NaN scale
    assert tol.compare(anything, expected).ok
    for index in ((0, 0), (0, 1), (1, 2), (1, 3)):   # finite-scale blocks: bitwise
        bad = expected.copy()
        bad[index] ^= 1
        c = tol.compare(bad, expected)
        assert not c.ok and c.failures == 1 and c.mismatch[index]


def test_ragged_last_block_and_other_axis() -> None:
    expected = np.arange(10, dtype=np.uint8).reshape(5, 2)
    tol = T.ExactUnlessNaNScale(np.array([[ONE, ONE], [ONE, NAN]], np.uint8), 4, 0)
    got = expected.copy()
    got[4, 1] = 99                          # rows 4.. of column 1: the short NaN block
    assert tol.compare(got, expected).ok
    got[3, 1] = 99                          # row 3 of column 1: first block, finite
    assert not tol.compare(got, expected).ok
    got = expected.copy()
    got[4, 0] = 99                          # column 0's short block is finite
    assert not tol.compare(got, expected).ok


def test_negative_zero_differs_under_a_finite_scale() -> None:
    tol = T.exact_unless_nan_scale(np.array([ONE], np.uint8), 32)
    expected = np.zeros(32, np.uint8)
    got = expected.copy()
    got[5] = 0x8                            # E2M1 -0
    c = tol.compare(got, expected, fmt="e2m1")
    assert not c.ok and c.failures == 1


def test_bad_shapes_and_dtypes_fail_cleanly() -> None:
    expected = np.zeros((2, 64), np.uint8)
    wrong = T.exact_unless_nan_scale(np.zeros((2, 3), np.uint8), 32)
    c = wrong.compare(expected, expected)
    assert not c.ok and "scales" in c.problem
    ok = T.exact_unless_nan_scale(np.zeros((2, 2), np.uint8), 32)
    assert ok.compare(expected, expected).ok
    assert "dtype" in ok.compare(expected.astype(np.uint16), expected).problem
    unresolved = T.exact_unless_nan_scale("scales", 32)
    assert "resolve" in unresolved.compare(expected, expected).problem


def test_json_round_trip_and_refusals() -> None:
    t = T.exact_unless_nan_scale()
    j = t.to_json()
    assert j == {"kind": "exact_unless_nan_scale", "scales": "scales", "block_size": 32,
                 "axis": -1, "scale_format": "e8m0"}
    assert T.from_json(json.loads(json.dumps(j))) == t
    for field, value in (("block_size", 32.5), ("block_size", 0), ("axis", 1.0),
                         ("block_size", True), ("scale_format", 3), ("scales", 5)):
        with pytest.raises(ValueError):
            T.from_json({**j, field: value})
    assert t.references() == () and t.output_references() == ("scales",)


def test_mx_cases_use_it_and_a_real_case_behaves() -> None:
    reg = registry()
    mx = [c for c in reg.cases("default") if c.operation == "scaling.mx_quantize"]
    assert mx and all(c.tolerance["codes"].kind == "exact_unless_nan_scale" for c in mx)
    spec = next(c for c in mx if c.id == "scaling.mx.e4m3.floor.inf_block=nan")
    entry, files = build_case(spec, reg, 1)
    out = {name: np.load(io.BytesIO(files[e["file"]]))
           for name, e in entry["expected"].items()}
    tol = T.from_json(entry["expected"]["codes"]["tolerance"]).resolve(out)
    codes = out["codes"]
    nan_rows = np.flatnonzero(out["scales"][:, 0] == NAN)
    finite_rows = np.flatnonzero(out["scales"][:, 0] != NAN)
    assert nan_rows.size and finite_rows.size
    other = codes.copy()
    other[nan_rows] = 0x3C                  # any code where no reader can use it
    assert tol.compare(other, codes).ok
    other[finite_rows[0], 0] ^= 1
    assert not tol.compare(other, codes).ok


def test_manifest_refuses_a_scales_name_that_is_no_expected_output() -> None:
    reg = registry()
    spec = next(c for c in reg.cases("default") if c.id == "scaling.mx.e2m1.floor")
    entry, _ = build_case(spec, reg, 1)
    from oracle.generation import header
    m = header(reg, "default", 1, None, None, False)
    m["cases"] = [entry]
    m["content_sha256"] = "0" * 64
    assert not [p for p in validate_manifest(m) if "scales" in p]
    bad = copy.deepcopy(m)
    bad["cases"][0]["expected"]["codes"]["tolerance"]["scales"] = "nosuch"
    assert any("nosuch" in p for p in validate_manifest(bad))
    bad["cases"][0]["expected"]["codes"]["tolerance"]["scales"] = "codes"
    assert any("'codes'" in p for p in validate_manifest(bad))


def test_layout_fields_are_checked():
    with pytest.raises(TypeError, match="block_size must be an int"):
        T.ExactUnlessNaNScale(block_size=True)
    with pytest.raises(TypeError, match="axis must be an int"):
        T.ExactUnlessNaNScale(axis=1.0)
    with pytest.raises(ValueError, match="block_size must be a positive int"):
        T.ExactUnlessNaNScale(block_size=0)
