"""``check`` reads a results ``.npy`` saved from an ml_dtypes array (``np.save`` writes
the descriptor ``'<V1'``, ``'<f1'`` for float8_e5m2, ``'<V2'`` for bfloat16: no format
name) as the codes it holds when the output is codes of that width, and refuses it with
the reason otherwise. The files here are written byte by byte from the .npy format
specification (NumPy NEP 1), so ml_dtypes is not needed; one test with ml_dtypes itself
is skipped without it."""
from __future__ import annotations

import ast
import io
from pathlib import Path

import numpy as np
import pytest

import oracle
from oracle.cli import main
from oracle.extension_dtypes import OPAQUE_DESCRS, opaque_npy

IDS = ["formats.encode.e4m3.f32.nearest_even", "formats.encode.bf16.f32.nearest_even",
       "formats.decode.e4m3"]


def npy_bytes(descr: str, shape: tuple, body: bytes, fortran: bool = False) -> bytes:
    """A version 1.0 .npy file: magic, version, header length, the header dict padded
    with spaces and a newline to a multiple of 64 bytes, the raw elements."""
    header = f"{{'descr': '{descr}', 'fortran_order': {fortran}, 'shape': {shape}, }}"
    pad = 64 - (10 + len(header) + 1) % 64
    header = header + " " * (pad % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode() + body


@pytest.fixture(scope="module")
def golden(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("opaque") / "golden"
    oracle.generate(out, only="formats.[ed][en]code.[eb][4f][m1]*", progress=None)
    return out


def _case(golden: Path, cid: str):
    return next(c for c in oracle.load(golden).cases if c.id == cid)


def _write(res: Path, case, name: str, data: bytes) -> Path:
    p = res / case.files[name]
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data)
    return p


def test_the_handwritten_header_is_what_numpy_writes() -> None:
    a = np.arange(5, dtype=np.uint8)
    buf = io.BytesIO()
    np.save(buf, a)
    assert npy_bytes("|u1", (5,), a.tobytes()) == buf.getvalue()


@pytest.mark.parametrize("descr", ["<V1", "|V1", "<f1"])
def test_one_byte_opaque_codes_are_read_as_e4m3_codes(golden: Path, tmp_path: Path,
                                                      descr: str) -> None:
    case = _case(golden, IDS[0])
    codes = case.expected["codes"]
    _write(tmp_path, case, "codes", npy_bytes(descr, codes.shape, codes.tobytes()))
    r = oracle.check(golden, tmp_path, ids=[IDS[0]])
    assert r.ok and r.passed == r.checked == 1, [p.message for p in r.problems]
    # the codes are compared, not waved through: one wrong code fails
    bad = codes.copy()
    bad[3] ^= 1
    _write(tmp_path, case, "codes", npy_bytes(descr, bad.shape, bad.tobytes()))
    r = oracle.check(golden, tmp_path, ids=[IDS[0]])
    assert not r.ok and "1 of" in r.problems[0].message


def test_two_byte_opaque_codes_are_read_as_bf16_codes_little_endian(golden: Path,
                                                                    tmp_path: Path) -> None:
    case = _case(golden, IDS[1])
    codes = case.expected["codes"]
    assert codes.dtype == np.uint16
    _write(tmp_path, case, "codes", npy_bytes("<V2", codes.shape,
                                              codes.astype("<u2").tobytes()))
    assert oracle.check(golden, tmp_path, ids=[IDS[1]]).ok
    # big-endian bytes under '<V2' are other codes: they fail
    _write(tmp_path, case, "codes", npy_bytes("<V2", codes.shape,
                                              codes.astype(">u2").tobytes()))
    assert not oracle.check(golden, tmp_path, ids=[IDS[1]]).ok


def test_a_width_other_than_the_formats_is_refused_with_the_reason(golden: Path,
                                                                   tmp_path: Path) -> None:
    case = _case(golden, IDS[1])                        # bf16: 2-byte codes
    n = case.expected["codes"].size
    _write(tmp_path, case, "codes", npy_bytes("<V1", (n,), bytes(n)))
    r = oracle.check(golden, tmp_path, ids=[IDS[1]])
    assert not r.ok and r.passed == 0
    msg = r.problems[0].message
    assert "1-byte elements of no NumPy type" in msg and "'<V1'" in msg
    assert "bf16 codes of 2 byte(s) (uint16)" in msg


def test_opaque_elements_for_a_values_output_are_refused(golden: Path, tmp_path: Path,
                                                         capsys) -> None:
    case = _case(golden, IDS[2])                        # decode: float32 values
    n = case.expected["values"].size
    _write(tmp_path, case, "values", npy_bytes("<V1", (n,), bytes(n)))
    r = oracle.check(golden, tmp_path, ids=[IDS[2]])
    assert not r.ok
    assert "float32 values, not codes of a format" in r.problems[0].message
    assert main(["check", str(golden), "--results", str(tmp_path), "--id", IDS[2]]) == 1
    assert "not codes of a format" in capsys.readouterr().out


def test_a_truncated_opaque_file_is_a_problem(golden: Path, tmp_path: Path) -> None:
    case = _case(golden, IDS[0])
    codes = case.expected["codes"]
    _write(tmp_path, case, "codes", npy_bytes("<f1", codes.shape, codes.tobytes()[:-1]))
    r = oracle.check(golden, tmp_path, ids=[IDS[0]])
    assert not r.ok and "truncated or padded" in r.problems[0].message


def test_opaque_npy_reads_only_opaque_descriptors() -> None:
    buf = io.BytesIO()
    np.save(buf, np.arange(4, dtype=np.uint8))
    assert opaque_npy(buf.getvalue()) is None            # an ordinary file
    assert opaque_npy(b"not a npy file at all") is None
    assert opaque_npy(npy_bytes("|V2", (2,), bytes(4))) is None   # no byte order
    descr, codes = opaque_npy(npy_bytes("<V1", (2, 3), bytes(range(6)), fortran=True))
    assert descr == "<V1" and codes.tolist() == [[0, 2, 4], [1, 3, 5]]
    descr, codes = opaque_npy(npy_bytes("<V2", (2,), b"\x01\x02\x03\x04"))
    assert codes.dtype == np.uint16 and codes.tolist() == [0x0201, 0x0403]
    with pytest.raises(ValueError, match="header"):
        opaque_npy(npy_bytes("<V1", (-1,), b""))


try:
    import ml_dtypes
except ImportError:
    ml_dtypes = None


@pytest.mark.skipif(ml_dtypes is None, reason="ml_dtypes is not installed")
def test_np_save_of_ml_dtypes_arrays_is_read(golden: Path, tmp_path: Path) -> None:
    for cid, dtype in ((IDS[0], ml_dtypes.float8_e4m3fn), (IDS[1], ml_dtypes.bfloat16)):
        case = _case(golden, cid)
        x = case.inputs["x"]
        with np.errstate(all="ignore"):
            arr = x.astype(dtype)            # ml_dtypes' own cast (round to nearest even)
        p = tmp_path / case.files["codes"]
        p.parent.mkdir(parents=True, exist_ok=True)
        np.save(p, arr)
        data = p.read_bytes()
        header = ast.literal_eval(data[10:10 + int.from_bytes(data[8:10], "little")]
                                  .decode("latin1"))
        assert header["descr"] in OPAQUE_DESCRS
        # ml_dtypes' casts round to nearest even without saturating, as these cases do
        r = oracle.check(golden, tmp_path, ids=[cid])
        assert r.ok and r.passed == r.checked == 1, [q.message for q in r.problems]
