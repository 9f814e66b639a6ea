"""The CLI on the real case registry: generate -> verify -> check round trips,
corruption reported with exit 1, byte-identical output across runs, BLAS thread counts
and --jobs."""
from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import oracle
from oracle.cases import registry
from oracle.cli import main
from oracle.suite import array_bytes, finish_manifest, npy_size, sha256


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _assert_same_suite(a: Path, b: Path) -> None:
    """Byte-identical trees. In a shared working tree the package's sources may be edited
    between two generations, which changes only the recorded ``sources_sha256`` (and so
    the manifest's content hash): then every other byte must still be identical."""
    ta, tb = _tree(a), _tree(b)
    if ta == tb:
        return
    ma, mb = (json.loads(t.pop("manifest.json")) for t in (ta, tb))
    assert ta == tb                                   # every array and text file
    for m in (ma, mb):
        m.pop("content_sha256")
        m["generation"].pop("sources_sha256")
    assert ma == mb


@pytest.fixture(scope="module")
def smoke(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("smoke") / "golden"
    assert main(["generate", "--out", str(out), "--suite", "smoke", "--quiet"]) == 0
    return out


@pytest.fixture()
def copy(smoke: Path, tmp_path: Path) -> Path:
    import shutil

    shutil.copytree(smoke, tmp_path / "g")
    return tmp_path / "g"


def test_generate_then_verify(smoke: Path, capsys) -> None:
    assert main(["verify", str(smoke), "--quiet"]) == 0
    assert "ok:" in capsys.readouterr().out
    s = oracle.load(smoke)
    # exactly the registry's level-0 cases come back, every one with its arrays
    want = {c.id for c in registry().all_cases if c.level == 0}
    assert want and {c.id for c in s} == want
    assert {c.operation for c in s} >= {"formats.encode", "formats.decode"}
    assert all(c.inputs and c.expected for c in s)


def test_usage_errors_exit_2(tmp_path: Path, capsys) -> None:
    assert main(["verify", str(tmp_path / "nope")]) == 2
    assert main(["generate", "--out", str(tmp_path / "x"), "--shard", "3/2"]) == 2
    assert main(["generate", "--out", str(tmp_path / "x"), "--only", "no.such.case"]) == 2
    assert "error:" in capsys.readouterr().err


def _verify_out(root: Path, capsys) -> tuple[int, str]:
    code = main(["verify", str(root), "--quiet"])
    return code, capsys.readouterr().out


def test_corruption_flip_byte(copy: Path, capsys) -> None:
    p = copy / "formats.encode.e4m3.f32.nearest_even" / "codes.npy"
    data = bytearray(p.read_bytes())
    data[200] ^= 0x40
    p.write_bytes(bytes(data))
    code, out = _verify_out(copy, capsys)
    assert code == 1 and "formats.encode.e4m3.f32.nearest_even/codes.npy" in out
    assert "sha256" in out and "Traceback" not in out


def test_corruption_truncate_delete_rename(copy: Path, capsys) -> None:
    a = copy / "formats.decode.e4m3" / "values.npy"
    a.write_bytes(a.read_bytes()[:100])
    b = copy / "formats.encode.e2m1.f32.nearest_even" / "x.npy"
    b.unlink()
    c = copy / "formats.encode.bf16.f32.nearest_even" / "codes.npy"
    c.rename(c.with_name("codes2.npy"))
    code, out = _verify_out(copy, capsys)
    assert code == 1
    assert "formats.decode.e4m3/values.npy: file size 100 bytes" in out
    assert "formats.encode.e2m1.f32.nearest_even/x.npy is missing" in out
    assert "codes2.npy" in out and "not listed" in out


def test_corruption_edited_manifest(copy: Path, capsys) -> None:
    m = json.loads((copy / "manifest.json").read_text())
    m["cases"][1]["params"]["saturate"] = True
    (copy / "manifest.json").write_text(json.dumps(m, indent=1))
    code, out = _verify_out(copy, capsys)
    assert code == 1 and "edited by hand" in out
    # re-hashed by someone who knows the scheme: recomputation still catches it
    (copy / "manifest.json").write_bytes(finish_manifest(m))
    code, out = _verify_out(copy, capsys)
    assert code == 1 and "differs from recomputation" in out


def test_corruption_pickled_array(copy: Path, capsys) -> None:
    p = copy / "formats.decode.e4m3" / "codes.npy"
    np.save(p, np.array([1, "x", None], dtype=object))  # np.save pickles object arrays by default
    data = p.read_bytes()
    m = json.loads((copy / "manifest.json").read_text())
    # an entry whose size matches the pickle's, so the size check lets it through
    n = next(n for n in range(len(data)) if npy_size("uint8", [n]) == len(data))
    m["cases"][0]["inputs"]["codes"].update(sha256=sha256(data), shape=[n], dtype="uint8")
    (copy / "manifest.json").write_bytes(finish_manifest(m))
    code, out = _verify_out(copy, capsys)
    assert code == 1 and "pickled object array; refused" in out


# this interpreter's version tuple and the installed numpy distribution's metadata
_PYTHON = "{}.{}.{}".format(*sys.version_info[:3])
_NUMPY = importlib.metadata.version("numpy")


def test_version_names_package_python_and_numpy(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    out = capsys.readouterr().out.strip()
    assert out == (f"python -m oracle {oracle.__version__} (Python {_PYTHON}, "
                   f"NumPy {_NUMPY})")


def test_manifest_records_the_python_and_numpy_that_wrote_it(smoke: Path) -> None:
    m = json.loads((smoke / "manifest.json").read_text())
    assert m["runtime"] == {"python": _PYTHON, "numpy": _NUMPY}
    assert list(m)[:4] == ["schema", "schema_version", "oracle_version", "runtime"]


def _rewrite_manifest(root: Path, edit) -> None:
    m = json.loads((root / "manifest.json").read_text())
    edit(m)
    (root / "manifest.json").write_bytes(finish_manifest(m))


def test_verify_recomputes_a_suite_written_by_other_versions(copy: Path, capsys) -> None:
    """The recorded versions are information, not a condition: a suite written under
    another Python and NumPy is recomputed bit for bit here (the CI legs do this for
    real across interpreters), and the difference is noted."""
    _rewrite_manifest(copy, lambda m: m.update(runtime={"python": "3.0.0",
                                                         "numpy": "1.0.0"}))
    code, out = _verify_out(copy, capsys)
    assert code == 0 and "recomputed bit for bit" in out
    assert "written with Python 3.0.0 and NumPy 1.0.0" in out
    assert f"recomputed here with Python {_PYTHON} and NumPy {_NUMPY}" in out
    # suites written before the versions were recorded still verify
    _rewrite_manifest(copy, lambda m: m.pop("runtime"))
    code, out = _verify_out(copy, capsys)
    assert code == 0 and "written with" not in out


@pytest.mark.parametrize("runtime", [{"python": "3.12.1"}, {"python": "3.12.1", "numpy": 2},
                                     {"python": "", "numpy": "2.1.0"},
                                     {"python": "3.12.1", "numpy": "2.1.0", "os": "x"},
                                     ["3.12.1", "2.1.0"]])
def test_malformed_runtime_is_a_schema_problem(copy: Path, capsys, runtime) -> None:
    _rewrite_manifest(copy, lambda m: m.update(runtime=runtime))
    code, out = _verify_out(copy, capsys)
    assert code == 1 and "runtime" in out


def test_merge_refuses_shards_from_different_runtimes(smoke: Path, tmp_path: Path,
                                                      capsys) -> None:
    dirs = []
    for i in (1, 2):
        d = tmp_path / f"s{i}"
        assert main(["generate", "--out", str(d), "--suite", "smoke", "--shard", f"{i}/2",
                     "--quiet"]) == 0
        dirs.append(str(d))
    _rewrite_manifest(Path(dirs[1]), lambda m: m["runtime"].update(numpy="1.0.0"))
    assert main(["generate", "--out", str(tmp_path / "m"), "--merge", *dirs]) == 2
    assert "different Python/NumPy versions" in capsys.readouterr().err
    assert not (tmp_path / "m").exists()


def _write_results(suite_dir: Path, dest: Path) -> None:
    for case in oracle.load(suite_dir):
        for name, arr in case.expected.items():
            path = dest / case.files[name]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(array_bytes(arr))


def test_check_golden_passes_and_perturbed_fails(smoke: Path, tmp_path: Path,
                                                 capsys) -> None:
    res = tmp_path / "results"
    _write_results(smoke, res)
    assert main(["check", str(smoke), "--results", str(res)]) == 0
    assert "ok:" in capsys.readouterr().out
    # an encoder off by one code on one element
    p = res / "formats.encode.e4m3.f32.nearest_even" / "codes.npy"
    codes = np.load(p)
    x = oracle.load(smoke)["formats.encode.e4m3.f32.nearest_even"].inputs["x"]
    i = int(np.flatnonzero(x == 1.0)[0])
    assert codes[i] == 0x38                           # the code of 1.0
    codes[i] = 0x39
    np.save(p, codes)
    assert main(["check", str(smoke), "--results", str(res)]) == 1
    out = capsys.readouterr().out
    assert "formats.encode.e4m3.f32.nearest_even" in out and f"[{i}]" in out
    assert "0x38 (1)" in out and "0x39 (1.125)" in out and "x=1 [0x3F800000]" in out
    assert "1 step apart" in out and "1 steps" not in out
    # a float output off by one float32 ulp
    p = res / "formats.decode.e4m3" / "values.npy"
    vals = np.load(p)
    vals[0x38] = np.nextafter(vals[0x38], np.float32(2))
    np.save(p, vals)
    assert main(["check", str(smoke), "--results", str(res)]) == 1
    out = capsys.readouterr().out
    assert "formats.decode.e4m3" in out and "[56]" in out


def test_check_wrong_dtype_is_reported(smoke: Path, tmp_path: Path, capsys) -> None:
    res = tmp_path / "results"
    _write_results(smoke, res)
    p = res / "formats.decode.e4m3" / "values.npy"
    np.save(p, np.load(p).astype(np.float64))
    assert main(["check", str(smoke), "--results", str(res)]) == 1
    assert "dtype float64 differs" in capsys.readouterr().out


@pytest.mark.slow
def test_reproducible_jobs_and_blas_threads(smoke: Path, tmp_path: Path, monkeypatch) -> None:
    import oracle.generation as gen
    monkeypatch.setattr(gen, "SERIAL_SECONDS", 0.0)   # every case to the workers
    # --jobs 2 in-process
    assert main(["generate", "--out", str(tmp_path / "j2"), "--suite", "smoke",
                 "--jobs", "2", "--quiet"]) == 0
    _assert_same_suite(tmp_path / "j2", smoke)
    # fresh interpreters with different BLAS thread counts
    for threads in ("1", "2"):
        env = dict(os.environ, OPENBLAS_NUM_THREADS=threads, OMP_NUM_THREADS=threads)
        out = tmp_path / f"t{threads}"
        subprocess.run([sys.executable, "-m", "oracle", "generate", "--out", str(out),
                        "--suite", "smoke", "--quiet"], check=True, env=env,
                       capture_output=True)
        _assert_same_suite(out, smoke)


def test_shards_merge_to_the_whole(smoke: Path, tmp_path: Path) -> None:
    dirs = []
    for i in (1, 2, 3):
        d = tmp_path / f"s{i}"
        assert main(["generate", "--out", str(d), "--suite", "smoke", "--shard", f"{i}/3",
                     "--quiet"]) == 0
        dirs.append(str(d))
    assert main(["generate", "--out", str(tmp_path / "m"), "--merge", *dirs]) == 0
    _assert_same_suite(tmp_path / "m", smoke)


def test_text_form(tmp_path: Path) -> None:
    out = tmp_path / "t"
    assert main(["generate", "--out", str(out), "--only", "formats.encode.e2m1.f32.*",
                 "--text", "--quiet"]) == 0
    assert main(["verify", str(out), "--quiet"]) == 0
    lines = (out / "formats.encode.e2m1.f32.nearest_even" / "vectors.txt").read_text()
    pairs = dict(line.split() for line in lines.splitlines()[1:])
    # E2M1 ties (OCP MX v1.0 section 5.3): 0.25 -> 0x0, 0.75 -> 0x2, 5.0 -> 0x6, 7.0 -> 0x7
    assert pairs["3E800000"] == "00" and pairs["3F400000"] == "02"
    assert pairs["40A00000"] == "06" and pairs["40E00000"] == "07"


def test_list_cases(capsys) -> None:
    assert main(["generate", "--list", "--only", "formats.encode.e2m1.*"]) == 0
    out = capsys.readouterr().out
    assert "formats.encode.e2m1.f32.nearest_even" in out and "nan_to_e2m1=0x8" in out
    assert main(["generate", "--suite", "smoke"]) == 2          # neither --out nor --list


@pytest.mark.slow
def test_default_suite_generates_verifies_and_stays_small(tmp_path: Path) -> None:
    out = tmp_path / "golden"
    assert main(["generate", "--out", str(out), "--quiet"]) == 0     # the README command
    assert main(["verify", str(out), "--quiet"]) == 0
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    assert size < 10 * 2 ** 20                                      # committable


def test_the_console_script_names_itself(monkeypatch, capsys) -> None:
    import sys

    monkeypatch.setattr(sys, "argv", ["/venv/bin/gpu-oracle", "--help"])
    with pytest.raises(SystemExit):
        main(["--help"])
    assert capsys.readouterr().out.startswith("usage: gpu-oracle")
    monkeypatch.setattr(sys, "argv", ["/x/oracle/__main__.py", "--help"])
    with pytest.raises(SystemExit):
        main(["conform", "--help"])
    assert capsys.readouterr().out.startswith("usage: python -m oracle conform")
