"""Old spellings of renamed oracle arguments and names: each still works for one
release, warns with a DeprecationWarning naming the new spelling, and gives the same
result as the new spelling; the suite's manifest schema keeps its keys."""
from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from hypothesis import find, settings

from api_warnings import old, quiet
import oracle
from oracle import strategies
from oracle import tolerance as T
from oracle.cases.scaling import special_blocks
from oracle.cli import main
from oracle.conformance import check_mx_quantize
from oracle.random_stream import CaseRandom
from refimpl.scaling import mx_quantize

# E4M3 codes: 0x38 = 1.0, 0x39 = 1.125, 0x3A = 1.25 (one and two ulps above 1)
GOT = np.uint8([0x38, 0x3A])
WANT = np.uint8([0x39, 0x39])


def test_ulp_format():
    assert old(r"ulp\(format=.*use fmt=", T.ulp, 1, format="e4m3") == quiet(T.ulp, 1, fmt="e4m3")
    assert old("format=", T.Ulp, n=1, format="e4m3") == T.Ulp(1, "e4m3")
    assert old(r"Ulp\.format.*Ulp\.fmt", getattr, T.Ulp(1, "e4m3"), "format") == "e4m3"


def test_ulp_manifest_form_keeps_the_format_key():
    tol = quiet(T.ulp, 2, fmt="bf16")
    assert tol.to_json() == {"kind": "ulp", "n": 2, "format": "bf16"}
    assert T.from_json(json.loads(json.dumps(tol.to_json()))) == tol
    assert tol.describe() == "ulp(n=2, format=bf16)"
    with pytest.raises(ValueError, match="unexpected fields"):
        T.from_json({"kind": "ulp", "n": 2, "fmt": "bf16"})


@pytest.mark.parametrize("call", [
    lambda tol, **kw: tol.compare(GOT, WANT, **kw),
    lambda tol, **kw: T.compare(GOT, WANT, tol, **kw),
])
def test_compare_format(call):
    tol = T.ulp(1, "e4m3")
    c_old = old("format=", call, tol, format="e4m3")
    c_new = quiet(call, tol, fmt="e4m3")
    assert c_old.ok is c_new.ok is True
    assert c_new.error.tolist() == [1.0, 1.0]  # 1.0 and 1.25 are one ulp (0.125) from 1.125
    assert c_old.error.tobytes() == c_new.error.tobytes()


def test_assert_matches_and_failure_rows_format():
    tol = T.exact()
    with pytest.warns(DeprecationWarning, match="format="), \
            pytest.raises(AssertionError) as e_old:
        T.assert_matches(GOT, WANT, tol, format="e4m3")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(AssertionError) as e_new:
            T.assert_matches(GOT, WANT, tol, fmt="e4m3")
    assert str(e_old.value) == str(e_new.value)
    assert "0x39 (1.125)" in str(e_new.value)  # decoded with the format
    c = tol.compare(GOT, WANT, fmt="e4m3")
    assert old("format=", T.failure_rows, c, GOT, WANT, format="e4m3") == \
        quiet(T.failure_rows, c, GOT, WANT, fmt="e4m3")


def test_exact_tolerance_name():
    assert old(r"oracle\.Exact .*ExactTolerance", getattr, oracle, "Exact") is \
        oracle.ExactTolerance
    assert old("ExactTolerance", getattr, T, "Exact") is T.ExactTolerance
    assert quiet(T.exact) == T.ExactTolerance()
    with pytest.raises(AttributeError):
        getattr(oracle, "Inexact")


def test_mx_blocks_elem():
    with pytest.warns(DeprecationWarning, match=r"mx_blocks\(elem="):
        s_old = strategies.mx_blocks(elem="e2m1", block_size=8, max_blocks=1)
    s_new = quiet(strategies.mx_blocks, fmt="e2m1", block_size=8, max_blocks=1)
    # the simplest example of each strategy with a nonzero element, both searches
    # derandomized (the same search under any profile): the same bytes
    fixed = settings(derandomize=True, database=None)
    a = find(s_old, lambda x: bool(np.any(x != 0)), settings=fixed)
    b = find(s_new, lambda x: bool(np.any(x != 0)), settings=fixed)
    assert a.tobytes() == b.tobytes()


def test_special_blocks_elem():
    a = old("elem", special_blocks, CaseRandom(0, "t"), 32, elem="e2m1")
    b = quiet(special_blocks, CaseRandom(0, "t"), 32, fmt="e2m1")
    assert [x.tobytes() for x in a] == [x.tobytes() for x in b]


def test_check_mx_quantize_elem():
    def fn(x):
        q = mx_quantize(x, "e3m2")
        return q.codes, q.scales

    r_old = old("elem", check_mx_quantize, fn, elem="e3m2", max_examples=0)
    r_new = quiet(check_mx_quantize, fn, fmt="e3m2", max_examples=0)
    assert r_old.target == r_new.target and "e3m2" in r_new.target
    assert r_old.compared == r_new.compared and sum(r_new.compared.values()) > 0


def test_kvcache_seed_example_flag(capsys):
    assert main(["kvcache", "--example"]) == 0
    new = capsys.readouterr().out
    assert main(["kvcache", "--seed-example"]) == 0
    assert capsys.readouterr().out == new
    assert "PagedAttention example" in new
