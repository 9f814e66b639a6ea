"""``oracle.run`` / ``python -m oracle run``: a user's function called case by case,
compared as ``check`` compares, its outputs written in the suite layout for ``check``.

The implementations here are refimpl itself (correct by construction for the suite it
wrote) and deliberately broken versions of it, so every verdict is known in advance."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import oracle
from oracle.cli import main
from oracle.runner import call_params
from refimpl import formats as F

ONLY = "formats.*.e2m1*"


@pytest.fixture(scope="module")
def suite(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("run") / "golden"
    oracle.generate(out, only=ONLY, progress=None)
    return out


def encode(*arrays, fmt, rounding, saturate, nan=None, **params):
    if len(arrays) != 1 or params:
        raise NotImplementedError("stochastic rounding and E8M0 conventions")
    return F.encode(arrays[0], fmt, rounding=rounding, saturate=saturate, nan=nan)


def decode(codes, *, fmt):
    return F.decode(codes, fmt)


def test_parameters_use_one_vocabulary() -> None:
    assert call_params({"format": "e4m3", "rounding": "up", "saturate": True}) == \
        {"fmt": "e4m3", "rounding": "nearest_away", "saturate": True}
    assert call_params({"elem": "e2m1", "scale_rule": "floor"}) == \
        {"fmt": "e2m1", "scale_rule": "floor"}


def test_a_correct_implementation_passes_and_check_reads_its_results(suite: Path,
                                                                     tmp_path: Path) -> None:
    r = oracle.run(suite, {"formats.encode": encode, "formats.decode": decode},
                   results=tmp_path / "res")
    assert r.ok and r.compared == r.passed > 0 and not r.failures
    # the stochastic case raised NotImplementedError: counted, never a pass
    assert [c for c, _ in r.not_supported] == ["formats.encode.e2m1.f32.stochastic"]
    assert r.without_impl > 0               # round_to, pack, unpack: no callable given
    c = oracle.check(suite, tmp_path / "res", only="formats.decode")
    assert c.ok and c.passed == 1


def test_a_wrong_implementation_fails_and_check_agrees(suite: Path, tmp_path: Path) -> None:
    def off_by_one(*arrays, **kw):
        codes = encode(*arrays, **kw).copy()
        codes[0] ^= 1
        return codes

    r = oracle.run(suite, {"formats.encode": off_by_one}, results=tmp_path / "res")
    assert not r.ok and r.failures and all("codes" in m for _, m in r.failures)
    c = oracle.check(suite, tmp_path / "res", only="formats.encode.e2m1.f32.nearest_even",
                     allow_missing="only encode was run")
    assert not c.ok


def test_ml_dtypes_like_or_wide_integer_codes_are_read_as_values(suite: Path) -> None:
    r = oracle.run(suite, {"formats.decode": lambda codes, fmt: decode(codes, fmt=fmt)
                           .astype(np.float64),
                           "formats.encode": lambda *a, **kw: encode(*a, **kw)
                           .astype(np.int64)})
    assert r.ok, r.failures


def test_nothing_compared_fails(suite: Path) -> None:
    def never(*a, **kw):
        raise NotImplementedError("nothing")

    r = oracle.run(suite, {"formats.decode": never})
    assert not r.ok and r.compared == 0 and len(r.not_supported) == 1


def test_an_exception_is_a_failure_with_its_text(suite: Path) -> None:
    def boom(*a, **kw):
        raise RuntimeError("kaboom")

    r = oracle.run(suite, {"formats.decode": boom})
    assert not r.ok and "raised RuntimeError: kaboom" in r.failures[0][1]


def test_exact_ids_and_errors(suite: Path) -> None:
    r = oracle.run(suite, {"formats.encode": encode},
                   ids=["formats.encode.e2m1.f32.nearest_even"])
    assert r.called == 1 and r.ok
    with pytest.raises(ValueError, match="no such case"):
        oracle.run(suite, {"formats.encode": encode}, ids=["formats.encode.e2m1"])
    with pytest.raises(ValueError, match="no case of the suite has operation"):
        oracle.run(suite, {"formats.encdoe": encode})
    with pytest.raises(ValueError, match="unknown option"):
        oracle.run(suite, {"formats.encode": encode}, variants={"nan_to_e2m1": "one"})


def test_a_tuple_of_the_wrong_length_is_a_failure(suite: Path) -> None:
    r = oracle.run(suite, {"formats.decode": lambda c, fmt: (decode(c, fmt=fmt),) * 2})
    assert not r.ok and "tuple of 2 arrays" in r.failures[0][1]


def test_cli_run_then_check(suite: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    (tmp_path / "run_impl.py").write_text(
        "from tests.oracle.test_runner import encode, decode\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    res = tmp_path / "res"
    assert main(["run", str(suite), "--impl", "formats.encode=run_impl:encode",
                 "--variant", "nan_to_e2m1=zero", "--results", str(res)]) == 0
    out = capsys.readouterr().out
    assert "not supported: formats.encode.e2m1.f32.stochastic" in out
    assert "cases of other variants skipped" in out and out.splitlines()[-1].startswith("ok:")
    # --only is a pattern (it also selects the .nan= siblings, not run here); --id is exact
    assert main(["check", str(suite), "--results", str(res), "--only",
                 "formats.encode.e2m1.f32.nearest_even"]) == 1
    capsys.readouterr()
    assert main(["check", str(suite), "--results", str(res), "--id",
                 "formats.encode.e2m1.f32.nearest_even", "--id",
                 "formats.encode.e2m1.f32.nearest_even.nan=zero"]) == 0
    assert "ok: 2/2 outputs pass" in capsys.readouterr().out
    assert main(["check", str(suite), "--results", str(res), "--max-problems", "1",
                 "--only", "formats.encode"]) == 1
    out = capsys.readouterr().out
    assert "more (--all lists them)" in out
    assert main(["check", str(suite), "--results", str(res), "--all",
                 "--only", "formats.encode"]) == 1
    assert "more (--all" not in capsys.readouterr().out
    assert main(["run", "--suite", str(suite), "--impl", "formats.decode=run_impl:nope"]) == 2
    assert main(["run", str(suite), "--impl", "formats.decode"]) == 2
