"""What a failing case says in ``run`` and ``check``: the documented variant its result
follows, found by recomputing the case under the choice's other options (so a
documented choice is not filed as a bug, and a plain bug gets no such line), known
library behaviours named by ``run`` as by ``check``, and the result file a text harness
wrote named as written.

The implementation under test here is ``refimpl``'s encoder asked for E8M0's ties up
(``nearest_away``) whatever the case says: the behaviour of ml_dtypes' float8_e8m0fnu
cast on the tie cases, so the verdict of every case is known in advance."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import oracle
from oracle.text_arrays import array_text
from oracle.variant_match import matching_option
from oracle.verification import check
from refimpl import formats as F

E8M0 = "formats.encode.e8m0.f32."


@pytest.fixture(scope="module")
def suite(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("hints") / "golden"
    oracle.generate(out, only=E8M0 + "*", progress=None)
    return out


def ties_up(x, *, fmt, rounding, saturate, nan=None, **params):
    if fmt != "e8m0" or saturate or params:
        raise NotImplementedError(fmt)
    return F.encode(x, "e8m0", rounding="nearest_away")


def off_by_one(x, **params):
    codes = np.asarray(F.encode(x, "e8m0", rounding=params["rounding"])).copy()
    codes[0] ^= 1                                  # a plain bug: no option gives it
    return codes


def test_the_match_is_the_option_whose_expectation_the_result_meets(suite: Path) -> None:
    case = oracle.load(suite)[E8M0 + "nearest_even"]
    got = np.asarray(ties_up(case.inputs["x"], **case.params))
    assert matching_option(case, "codes", got) == ("e8m0_tie", "up")
    # named already by the user: not offered again
    assert matching_option(case, "codes", got, {"e8m0_tie": "nearest_even"}) is None
    # a plain bug matches no option; the right answer is not a difference at all
    assert matching_option(case, "codes", off_by_one(case.inputs["x"], **case.params)) \
        is None


def test_run_names_the_variant_a_failing_case_follows(suite: Path) -> None:
    r = oracle.run(suite, {"formats.encode": ties_up}, ids=[E8M0 + "nearest_even"])
    assert not r.ok and len(r.failures) == 1
    case, message = r.failures[0]
    assert case == E8M0 + "nearest_even"
    assert "matches e8m0_tie=up (a documented variant, not a bug): add --variant " \
        "e8m0_tie=up" in message
    r = oracle.run(suite, {"formats.encode": off_by_one}, ids=[E8M0 + "nearest_even"])
    assert not r.ok and "matches" not in r.failures[0][1]
    # selecting the option the implementation follows: the tie case passes, the other
    # option's case is skipped, and no hint is given
    r = oracle.run(suite, {"formats.encode": ties_up}, variants={"e8m0_tie": "up"},
                   ids=[E8M0 + "nearest_even", E8M0 + "up"])
    assert r.ok and r.skipped == 1 and r.passed == 1


def test_check_names_the_variant_and_the_text_file_read(suite: Path,
                                                         tmp_path: Path) -> None:
    res = tmp_path / "res"
    case = oracle.load(suite)[E8M0 + "nearest_even"]
    got = np.asarray(ties_up(case.inputs["x"], **case.params), np.uint8)
    assert np.count_nonzero(got != case.expected["codes"]) > 0     # it does differ
    (res / case.id).mkdir(parents=True)
    (res / case.id / "codes.txt").write_bytes(array_text(got, f"{case.id}/codes", "e8m0"))
    report = check(suite, res, ids=[case.id])
    [p] = report.problems
    assert p.file == f"{case.id}/codes.txt"              # the file the harness wrote
    assert "matches e8m0_tie=up" in p.message and "--variant e8m0_tie=up" in p.message


def test_a_missing_result_says_both_names_were_looked_for(suite: Path,
                                                          tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    report = check(suite, tmp_path / "empty", ids=[E8M0 + "up"])
    assert any("missing (neither .npy nor .txt)" in p.message for p in report.problems)
