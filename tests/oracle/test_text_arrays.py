"""The text layout of arrays (``generate --text``, ``check --results`` reading
``<case id>/<output>.txt``): hand-derived bit patterns, round trips for every suite dtype,
strict parsing, and a suite whose results are given as text only."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

import oracle
from oracle.cli import main
from oracle.text_arrays import DTYPES, array_text, parse_array_text


def test_bit_patterns_by_hand() -> None:
    assert array_text(np.float32([1.0, -0.0]), "c/x") == b"# c/x float32 2\n3F800000\n80000000\n"
    assert array_text(np.int8([[-1, 2]]), "c/y") == b"# c/y int8 1x2\nFF 02\n"
    assert array_text(np.uint8(0x7E), "c/z", "e4m3") == b"# c/z uint8 scalar e4m3\n7E\n"
    assert array_text(np.array([True, False]), "c/b") == b"# c/b bool 2\n1\n0\n"
    assert array_text(np.zeros((2, 0), np.float16), "c/e") == b"# c/e float16 2x0\n"
    # byte order is not part of the layout: big-endian values give the same text
    assert array_text(np.array([1.0], ">f4"), "c/x") == array_text(np.float32([1.0]), "c/x")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(), (5,), (3, 4), (2, 3, 2), (0,)])
def test_round_trip(dtype: str, shape: tuple) -> None:
    rng = np.random.default_rng(7)
    n = int(np.prod(shape))
    dt = np.dtype(dtype)
    raw = rng.integers(0, 256, n * dt.itemsize, dtype=np.uint8)
    a = raw.view(np.uint8).astype(bool) if dt.kind == "b" else raw.view(dt)
    a = a.reshape(shape)
    back, label, fmt = parse_array_text(array_text(a, "case/out", "e4m3"), "t")
    assert (label, fmt) == ("case/out", "e4m3")
    assert back.dtype == dt and back.shape == a.shape
    assert back.tobytes() == np.ascontiguousarray(a).tobytes()   # NaN payloads included


@pytest.mark.parametrize("data, says", [
    (b"", "empty"),
    (b"3F800000\n", "line 1 is not"),
    (b"# c/x float128 1\n00\n", "dtype 'float128'"),
    (b"# c/x float32 2\n3F800000\n", "1 lines of values, expected 2"),
    (b"# c/x float32 1\n3f800000\n", "uppercase hex"),
    (b"# c/x uint8 1x2\n01  02\n", "separated by one space"),
    (b"# c/x uint8 2y\n01\n", "shape '2y'"),
    ("# c/x uint8 1\n\u00e9\n".encode(), "not ASCII"),
])
def test_malformed_text_is_refused(data: bytes, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_array_text(data, "t")


@pytest.fixture(scope="module")
def text_suite(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("text") / "golden"
    oracle.generate(out, only="*e2m1*", text=True, progress=None)
    return out


def test_every_array_of_every_case_has_its_text(text_suite: Path) -> None:
    suite = oracle.load(text_suite)
    assert len(suite) > 10
    for case in suite:
        for name, a in {**case.inputs, **case.expected, **case.reference}.items():
            data = (text_suite / case.files[name][:-4]).with_suffix(".txt").read_bytes()
            back, label, fmt = parse_array_text(data, name)
            assert label == f"{case.id}/{name}" and fmt == case.formats.get(name)
            assert back.dtype == a.dtype and back.tobytes() == a.tobytes()
    assert oracle.verify(text_suite, progress=None).ok


def test_verify_catches_a_text_form_that_disagrees(text_suite: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    shutil.copytree(text_suite, bad)
    p = bad / "formats.decode.e2m1" / "values.txt"
    p.write_bytes(p.read_bytes().replace(b"\n00000000\n", b"\n00000001\n", 1))
    report = oracle.verify(bad, progress=None)
    assert not report.ok
    assert any("values.txt" in pr.file for pr in report.problems)


def test_check_reads_text_results(text_suite: Path, tmp_path: Path, capsys) -> None:
    res = tmp_path / "res"
    for case in oracle.load(text_suite):
        for name in case.expected:
            rel = case.files[name][:-4] + ".txt"
            (res / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(text_suite / rel, res / rel)
    assert oracle.check(text_suite, res).ok
    # one wrong code in text form fails, naming the output
    p = res / "formats.encode.e2m1.f32.nearest_even" / "codes.txt"
    lines = p.read_text().splitlines()
    lines[1] = "07" if lines[1] != "07" else "06"
    p.write_text("\n".join(lines) + "\n")
    assert main(["check", str(text_suite), "--results", str(res)]) == 1
    assert "formats.encode.e2m1.f32.nearest_even/codes" in capsys.readouterr().out
