"""Known library behaviours are named in reports: torchao's to_mx quantising a block
whose scale code is 0x00 as if the scale were 2^-126. The MX quantiser used is the one
written from OCP MX v1.0 in test_cases_mx_library_bugs (Fractions for the scale, the
exhaustively tested encoder for elements), with and without that behaviour."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from oracle.conformance import ConformanceError, check_mx_quantize
from oracle.generation import generate
from oracle.known_behaviours import KNOWN_BEHAVIOURS, mx_codes_behaviours
from oracle.verification import check
from tests.oracle.test_cases_mx_library_bugs import quantize

NAME = "torchao_mx_scale_0x00"


def _impl(buggy: bool, extra_bug: bool = False):
    def mx(x):
        q = quantize(x, "e2m1", "floor", "nan", buggy)
        codes = q["codes"].copy()
        if extra_bug:
            codes[0, 0] ^= 0x1            # a plain bug in an ordinary block
        return codes, q["scales"]
    return mx


def test_conform_names_the_behaviour() -> None:
    with pytest.raises(ConformanceError) as err:
        check_mx_quantize(_impl(True), "e2m1", max_examples=0)
    kinds = [f.kind for f in err.value.failures]
    assert kinds and all(f"({NAME})" in k for k in kinds), kinds
    assert KNOWN_BEHAVIOURS[NAME].summary in str(err.value)


def test_a_plain_bug_is_not_named() -> None:
    with pytest.raises(ConformanceError) as err:
        check_mx_quantize(_impl(False, extra_bug=True), "e2m1", max_examples=0)
    assert NAME not in str(err.value)
    check_mx_quantize(_impl(False), "e2m1", max_examples=0)    # the correct one passes


def test_the_detector_needs_the_exact_codes() -> None:
    x = np.zeros((1, 32), np.float32)
    x[0, 0], x[0, 1] = 3 * 2.0 ** -127, 2.0 ** -127
    good, bad = (quantize(x, "e2m1", "floor", "nan", b) for b in (False, True))
    assert mx_codes_behaviours(x, good["scales"], bad["scales"], good["codes"],
                               bad["codes"], "e2m1", 32) == [(0, 0, NAME)]
    wrong = bad["codes"].copy()
    wrong[0, 1] ^= 0x1
    assert mx_codes_behaviours(x, good["scales"], bad["scales"], good["codes"], wrong,
                               "e2m1", 32) == []


def test_check_names_the_behaviour(tmp_path: Path) -> None:
    suite = tmp_path / "golden"
    generate(suite, only="scaling.mx.e2m1.floor*", progress=None)
    import oracle

    res = tmp_path / "res"
    for case in oracle.load(suite):
        p = case.params
        got = quantize(case.inputs["x"], p["fmt"], p["scale_rule"], p["inf_block"], True)
        for name in case.expected:
            path = res / case.files[name]
            path.parent.mkdir(parents=True, exist_ok=True)
            np.save(path, got[name])
    report = check(suite, res)
    codes = [p for p in report.problems if p.file.endswith("codes.npy")]
    assert codes and all(NAME in p.message and "all" in p.message for p in codes)


def test_run_names_the_behaviour(tmp_path: Path) -> None:
    """``run`` names a known behaviour as ``check`` does, and then no variant (the
    behaviour, not another scale rule, explains the difference)."""
    import oracle

    suite = tmp_path / "golden"
    generate(suite, only="scaling.mx.e2m1.floor*", progress=None)

    def mx(x, *, fmt, scale_rule, inf_block, **params):
        q = quantize(x, fmt, scale_rule, inf_block, True)
        return {"codes": q["codes"], "scales": q["scales"]}

    r = oracle.run(suite, {"scaling.mx_quantize": mx}, allow_missing="no dequantized")
    codes = [m for _, m in r.failures if m.startswith("codes:")]
    assert codes and all(NAME in m and "documented variant" not in m for m in codes)
