"""``check --results`` refuses a results tree that lies about what it holds: a text result
whose header names another array or format, a result written twice (.npy and .txt),
Windows line ends, a results folder named like a case the suite does not have; each
problem names the file once. The results are written here by hand in the text layout of
docs/suite-format.md (uppercase hex, one element a line)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import oracle
from oracle.cli import main
from oracle.verification import check

CASE = "formats.encode.e4m3.f32.nearest_even"


@pytest.fixture(scope="module")
def golden(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("text_results") / "golden"
    oracle.generate(out, only=CASE, progress=None)
    return out


def _text(golden: Path, label: str, fmt: str = "e4m3", end: str = "\n") -> str:
    codes = np.load(golden / CASE / "codes.npy")
    head = f"# {label} uint8 {codes.size}" + (f" {fmt}" if fmt else "")
    return end.join([head] + [f"{int(c):02X}" for c in codes]) + end


def _results(tmp_path: Path, text: str, name: str = "codes.txt") -> Path:
    res = tmp_path / "res"
    (res / CASE).mkdir(parents=True)
    (res / CASE / name).write_bytes(text.encode("ascii"))
    return res


def _messages(rep) -> list[str]:
    return [f"{p.file}: {p.message}" for p in rep.problems]


def test_a_right_text_result_passes(golden: Path, tmp_path: Path) -> None:
    rep = check(golden, _results(tmp_path, _text(golden, f"{CASE}/codes")), ids=[CASE])
    assert rep.ok and rep.passed == 1


def test_a_header_naming_another_array_is_refused(golden: Path, tmp_path: Path) -> None:
    other = "formats.encode.e5m2.f32.nearest_even/codes"
    rep = check(golden, _results(tmp_path, _text(golden, other)), ids=[CASE])
    assert not rep.ok and rep.passed == 0
    assert _messages(rep) == [f"{CASE}/codes.txt: its header names {other!r}, not "
                              f"'{CASE}/codes' (a result written for another case or "
                              "output?)"]


def test_a_header_naming_another_format_is_refused(golden: Path, tmp_path: Path) -> None:
    rep = check(golden, _results(tmp_path, _text(golden, f"{CASE}/codes", "e5m2")),
                ids=[CASE])
    assert _messages(rep) == [f"{CASE}/codes.txt: its header says e5m2 codes; this "
                              "output is e4m3 codes"]
    # a header without a format is read as the output's codes
    rep = check(golden, _results(tmp_path / "b", _text(golden, f"{CASE}/codes", "")),
                ids=[CASE])
    assert rep.ok


def test_windows_line_ends_are_named(golden: Path, tmp_path: Path) -> None:
    rep = check(golden, _results(tmp_path, _text(golden, f"{CASE}/codes", end="\r\n")),
                ids=[CASE])
    assert _messages(rep) == [f"{CASE}/codes.txt: line 1 holds a \\r (Windows line "
                              "ends?); the layout uses \\n alone (write the file in "
                              "binary mode)"]


def test_a_result_written_twice_is_refused(golden: Path, tmp_path: Path) -> None:
    res = _results(tmp_path, _text(golden, f"{CASE}/codes"))
    np.save(res / CASE / "codes.npy", np.load(golden / CASE / "codes.npy"))
    rep = check(golden, res, ids=[CASE])
    assert not rep.ok and rep.passed == 0
    assert _messages(rep) == [f"{CASE}/codes.npy: codes.txt is there too: keep the one "
                              "that holds the result (neither was compared)"]


def test_a_truncated_text_result_names_the_text_file_once(golden: Path,
                                                          tmp_path: Path) -> None:
    text = _text(golden, f"{CASE}/codes")
    rep = check(golden, _results(tmp_path, text[:200]), ids=[CASE])
    (msg,) = _messages(rep)
    assert msg.startswith(f"{CASE}/codes.txt: ") and msg.count("codes.txt") == 1
    assert "lines of values, expected" in msg


def test_a_folder_named_like_a_case_the_suite_lacks_fails(golden: Path,
                                                          tmp_path: Path, capsys) -> None:
    res = _results(tmp_path, _text(golden, f"{CASE}/codes"))
    typo = CASE.replace("nearest_even", "nearest_evn")
    (res / typo).mkdir()
    np.save(res / typo / "codes.npy", np.load(golden / CASE / "codes.npy"))
    (res / "logs").mkdir()                        # not named like a case: not ours
    rep = check(golden, res, ids=[CASE])
    assert not rep.ok and rep.passed == 1
    assert _messages(rep) == [f"{typo}/: no case of the suite has this id (did you mean "
                              f"{CASE}?); nothing in this results folder was compared"]
    assert main(["check", str(golden), "--results", str(res), "--id", CASE]) == 1
    out = capsys.readouterr().out
    assert f"\n{typo}/: no case of the suite" in "\n" + out    # no '-: -:' prefix


def test_a_selection_of_nothing_reads_plainly(golden: Path, tmp_path: Path,
                                              capsys) -> None:
    res = _results(tmp_path, _text(golden, f"{CASE}/codes"))
    assert main(["check", str(golden), "--results", str(res), "--only", "nosuch*"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == ["--only 'nosuch*' matches no case of the suite",
                         "no result was compared"]


def test_an_extra_token_on_a_line_is_named_with_the_line(golden: Path,
                                                         tmp_path: Path) -> None:
    lines = _text(golden, f"{CASE}/codes").splitlines()
    lines[4] += " 00"                                   # line 5: two values
    rep = check(golden, _results(tmp_path, "\n".join(lines) + "\n"), ids=[CASE])
    assert _messages(rep) == [f"{CASE}/codes.txt: line 5 must hold one 2-digit "
                              f"uppercase hex value (uint8): {lines[4]!r}"]


def test_generate_counts_the_arrays_and_text_files_it_wrote(tmp_path: Path,
                                                            capsys) -> None:
    out = tmp_path / "g"
    assert main(["generate", "--out", str(out), "--text", "--quiet", "--only", CASE]) == 0
    line = capsys.readouterr().out.strip()
    npy, txt = len(list(out.rglob("*.npy"))), len(list(out.rglob("*.txt")))
    assert (npy, txt) == (4, 6)          # x and codes of two cases, + two vectors.txt
    assert line == f"wrote 2 cases (4 arrays, 6 text files) to {out}"


def test_a_case_folder_far_from_every_id_asks_about_another_suite(golden: Path,
                                                                  tmp_path: Path) -> None:
    res = _results(tmp_path, _text(golden, f"{CASE}/codes"))
    (res / "formats.encode.bf16.f32.toward_zero").mkdir()     # in the default suite
    rep = check(golden, res, ids=[CASE])
    assert _messages(rep) == ["formats.encode.bf16.f32.toward_zero/: no case of the suite has this id "
                              "(results for another suite?); nothing in this results "
                              "folder was compared"]
