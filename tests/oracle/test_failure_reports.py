"""What a failing case says in ``run`` and ``check``: the documented variant a case
follows and how to select another one (so a documented choice is not filed as a bug),
known library behaviours named by ``run`` as by ``check``, and the result file a text
harness wrote named as written.

The implementation under test here is ``refimpl``'s encoder asked for E8M0's ties up
(``nearest_away``) whatever the case says: the behaviour of ml_dtypes' float8_e8m0fnu
cast on the tie cases, so the verdict of every case is known in advance."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import oracle
from oracle.text_arrays import array_text
from oracle.variants import failure_hint
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


def test_the_hint_names_the_option_and_the_others() -> None:
    options = {"e8m0_tie": ("nearest_even", "up"), "mx_scale_rule": ("floor", "ceil", "even")}
    assert failure_hint(None, None, options) is None
    assert failure_hint({"choice": "e8m0_tie", "option": "nearest_even"}, None, options) == (
        "this case follows e8m0_tie=nearest_even (a documented variant); an implementation "
        "of another option selects it with --variant e8m0_tie=up")
    assert "--variant mx_scale_rule=ceil or --variant mx_scale_rule=even" in failure_hint(
        {"choice": "mx_scale_rule", "option": "floor"}, {}, options)
    # a choice the user named already, or one with no other option, gets no hint
    assert failure_hint({"choice": "e8m0_tie", "option": "nearest_even"},
                        {"e8m0_tie": "nearest_even"}, options) is None
    assert failure_hint({"choice": "other", "option": "a"}, None, {"other": ("a",)}) is None


def test_run_names_the_variant_a_failing_case_follows(suite: Path) -> None:
    r = oracle.run(suite, {"formats.encode": ties_up}, ids=[E8M0 + "nearest_even"])
    assert not r.ok and len(r.failures) == 1
    case, message = r.failures[0]
    assert case == E8M0 + "nearest_even"
    assert "this case follows e8m0_tie=nearest_even" in message
    assert "--variant e8m0_tie=up" in message
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
    assert "this case follows e8m0_tie=nearest_even" in p.message
    assert "--variant e8m0_tie=up" in p.message


def test_a_missing_result_says_both_names_were_looked_for(suite: Path,
                                                          tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    report = check(suite, tmp_path / "empty", ids=[E8M0 + "up"])
    assert any("missing (neither .npy nor .txt)" in p.message for p in report.problems)
