"""``conform --variant CHOICE=OPTION`` and the explanation of a failure by documented
variants, checked with an E8M0 encoder written here from the definition (math.frexp,
exact on float32 values) that follows ml_dtypes' documented choices: ties up, zero -> NaN.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from oracle.cli import main
from oracle.conformance import ConformanceError
from oracle.conformance.choices import choices_for, conform


def _e8m0_code(x: float, *, zero_nan: bool, ties_up: bool) -> int:
    if math.isnan(x) or x < 0 or math.isinf(x):
        return 0xFF
    if x == 0:
        return 0xFF if zero_nan else 0x00
    m, k = math.frexp(x)             # x = m * 2^k, m in [0.5, 1): x = (2m) * 2^(k-1)
    e = k - 1
    v = 2 * m                        # in [1, 2); the neighbours are 2^e and 2^(e+1)
    if v > 1.5 or (v == 1.5 and (ties_up or (e + 127) % 2 == 1)):
        e += 1                       # nearest-even on the code: odd code -> up
    code = e + 127
    if code > 254:
        return 0xFF                  # above 2^127: no finite code (E8M0 has no Inf)
    return max(code, 0)              # below 2^-127 the nearest value is 2^-127


def ml_like(x: np.ndarray) -> np.ndarray:
    return np.array([_e8m0_code(float(v), zero_nan=True, ties_up=True) for v in x],
                    dtype=np.uint8)


def even_zero_nan_and_a_bug(x: np.ndarray) -> np.ndarray:
    out = np.array([_e8m0_code(float(v), zero_nan=True, ties_up=False) for v in x],
                   dtype=np.uint8)
    out[x == 4.0] += 1               # a plain bug: 4.0 -> 2^3
    return out


def test_the_definition_agrees_with_the_oracle_on_the_defaults() -> None:
    default = lambda x: np.array([_e8m0_code(float(v), zero_nan=False, ties_up=False)
                                  for v in x], dtype=np.uint8)
    assert conform("formats.encode", default, "e8m0", max_examples=10).compared["codes"] > 0


def test_a_failure_explained_by_two_variants_names_both() -> None:
    with pytest.raises(ConformanceError) as err:
        conform("formats.encode", ml_like, "e8m0", max_examples=10)
    note = err.value.explanation
    assert note is not None and note.startswith("every difference matches")
    assert "--variant e8m0_tie=up" in note and "--variant e8m0_zero=nan" in note
    assert "e8m0_negative" not in note
    assert note in str(err.value)


def test_the_variants_named_make_it_pass() -> None:
    report = conform("formats.encode", ml_like, "e8m0",
                     variant={"e8m0_tie": "up", "e8m0_zero": "nan"}, max_examples=10)
    assert report.compared["codes"] > 0


def test_a_variant_explains_some_kinds_and_the_rest_stay_plain() -> None:
    with pytest.raises(ConformanceError) as err:
        conform("formats.encode", even_zero_nan_and_a_bug, "e8m0", max_examples=0)
    note = err.value.explanation
    assert "e8m0_zero=nan" in note and "match no documented variant" in note
    assert "e8m0_tie" not in note
    kinds = [f.kind for f in err.value.failures]
    assert any("zero input" in k for k in kinds) and len(kinds) >= 2


def test_a_plain_bug_is_not_explained() -> None:
    def bug(x: np.ndarray) -> np.ndarray:
        out = np.array([_e8m0_code(float(v), zero_nan=False, ties_up=False) for v in x],
                       dtype=np.uint8)
        out[x == 4.0] += 1
        return out

    with pytest.raises(ConformanceError) as err:
        conform("formats.encode", bug, "e8m0", max_examples=0)
    assert err.value.explanation is None
    assert "documented variant" not in str(err.value)


def test_variant_contradicting_an_option_is_refused() -> None:
    with pytest.raises(ValueError, match="rounding"):
        conform("formats.encode", ml_like, "e8m0", variant={"e8m0_tie": "up"},
                rounding="nearest_even")


@pytest.mark.parametrize("item, says", [
    ("e8m0_zero=zero", "unknown option 'zero' of e8m0_zero; allowed: min, nan"),
    ("nan_to_e2m1=0x8", "has no choice 'nan_to_e2m1'; its choices: e8m0_tie, e8m0_zero"),
    ("e8m0_zero", "--variant must be CHOICE=OPTION"),
])
def test_cli_refuses_an_unknown_variant(capsys, item: str, says: str) -> None:
    assert main(["conform", "formats.encode", "--impl", "numpy:asarray", "--format", "e8m0",
                 "--variant", item]) == 2
    assert says in capsys.readouterr().err


def test_cli_variant_passes_and_the_failure_names_it(tmp_path: Path, monkeypatch,
                                                     capsys) -> None:
    (tmp_path / "e8m0_ml_like.py").write_text(
        "from tests.oracle.test_conform_variants import ml_like\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    base = ["conform", "formats.encode", "--impl", "e8m0_ml_like:ml_like", "--format",
            "e8m0", "--max-examples", "5"]
    assert main(base) == 1
    out = capsys.readouterr().out
    assert "add --variant e8m0_tie=up --variant e8m0_zero=nan" in out
    assert main(base + ["--variant", "e8m0_tie=up", "--variant", "e8m0_zero=nan"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("ok:") and "e8m0_tie=up, e8m0_zero=nan" in out


def test_every_choice_of_conform_is_one_the_suites_mark() -> None:
    """One registry: conform's choices and options are those of the golden cases."""
    from oracle.cases import registry

    marked = registry().variant_options()
    for target, fmt in (("formats.encode", "e8m0"), ("formats.encode", "e2m1"),
                        ("formats.encode", "e2m3"), ("scaling.mx_quantize", None),
                        ("scaling.nvfp4_quantize", None), ("attention.attention", None)):
        for choice, options in choices_for(target, fmt).items():
            assert set(options) == set(marked[choice]), (target, choice)


def test_an_option_given_directly_is_not_varied() -> None:
    """rounding given as an option fixes e8m0_tie: only the other choices are tried."""
    with pytest.raises(ConformanceError) as err:
        conform("formats.encode", ml_like, "e8m0", rounding="nearest_away", max_examples=0)
    note = err.value.explanation
    assert note and "e8m0_zero=nan" in note and "e8m0_tie" not in note
