"""The on-disk suite machinery (generate, load, verify, check, shards, corruption),
exercised on a small demonstration registry whose expected values come from an
independent oracle: ``numpy.float16`` casting (IEEE binary16, round to nearest even)."""
from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest

import oracle
from oracle import suite as fmt
from oracle.cases import Area, CaseSpec, Operation, Registry
from oracle.generation import generate, merge, parse_shard, select, shard_slice
from oracle.tolerance import ExactNaNClass, RelativeToNaive, Ulp
from oracle.verification import check, verify


def _to_fp16(inputs, params):
    with np.errstate(over="ignore"):
        return {"codes": np.asarray(inputs["x"]).astype(np.float16).view(np.uint16)}


def _mean(inputs, params):
    x = inputs["x"]
    exact = (x.astype(np.float64).sum(axis=-1) / x.shape[-1]).astype(np.float32)
    naive = np.zeros(x.shape[:-1], np.float16)
    for i in range(x.shape[-1]):  # the plain low-precision loop
        naive = (naive + x[..., i].astype(np.float16)).astype(np.float16)
    naive = (naive / np.float16(x.shape[-1])).astype(np.float32)
    return {"mean": exact, "naive": naive}


def _cases():
    return [
        CaseSpec("demo.to_fp16.uniform", "demo.to_fp16", {"rounding": "nearest_even"},
                 lambda r: {"x": r.uniform(64, -70000, 70000)},
                 tolerance={"codes": ExactNaNClass()}, formats={"codes": "fp16"},
                 level=0, text=("x", "codes")),
        CaseSpec("demo.mean.normal", "demo.mean", {},
                 lambda r: {"x": r.normal((4, 16))},
                 tolerance={"mean": RelativeToNaive(2.0, "naive", 1e-6)},
                 reference=("naive",), level=0),
        CaseSpec("demo.to_fp16.normal", "demo.to_fp16", {},
                 lambda r: {"x": r.normal(300, 1e4)}, formats={"codes": "fp16"},
                 level=1, variant={"choice": "demo_choice", "option": "a"}),
        CaseSpec("demo.mean.wide", "demo.mean", {},
                 lambda r: {"x": r.normal((3, 40), 100.0)},
                 tolerance={"mean": Ulp(64, "fp32")}, reference=("naive",), level=2),
    ]


DEMO = Registry([Area("demo", {"IEEE 754": "2019"},
                      [Operation("demo.to_fp16", _to_fp16, "float32 -> fp16 codes"),
                       Operation("demo.mean", _mean, "row means")], _cases)])


def _gen(path: Path, **kw) -> dict:
    kw.setdefault("suite", "full")
    return generate(path, registry=DEMO, progress=None, **kw)


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture()
def golden(tmp_path: Path) -> Path:
    _gen(tmp_path / "g", text=True)
    return tmp_path / "g"


def _problems(root: Path) -> list[str]:
    rep = verify(root, registry=DEMO, progress=None)
    return [f"{p.case} {p.file} {p.message}" for p in rep.problems]


def test_round_trip_verifies_and_loads(golden: Path) -> None:
    assert _problems(golden) == []
    s = oracle.load(golden)
    assert [c.id for c in s] == [c.id for c in DEMO.cases("full")]
    case = s["demo.to_fp16.uniform"]
    # the expected codes are numpy.float16's own cast of the stored inputs
    assert np.array_equal(case.expected["codes"], _to_fp16(case.inputs, {})["codes"])
    assert case.formats == {"codes": "fp16"}
    assert case.params == {"rounding": "nearest_even"}
    assert isinstance(case.tolerance["codes"], ExactNaNClass)
    mean = s["demo.mean.normal"]
    assert isinstance(mean.tolerance["mean"].naive, np.ndarray)   # resolved
    assert s["demo.to_fp16.normal"].variant == {"choice": "demo_choice", "option": "a"}
    m = json.loads((golden / "manifest.json").read_text())
    assert list(m)[:3] == ["schema", "schema_version", "oracle_version"]
    assert m["generation"]["seed"] == 1 and m["spec_versions"] == {"IEEE 754": "2019"}
    assert "time" not in json.dumps(m["generation"])


def test_text_form_is_hex_bits(golden: Path) -> None:
    case = oracle.load(golden)["demo.to_fp16.uniform"]
    lines = (golden / "demo.to_fp16.uniform" / "vectors.txt").read_text().splitlines()
    assert lines[0].startswith("#")
    x_bits, code = lines[1].split()
    assert int(x_bits, 16) == int(case.inputs["x"][:1].view(np.uint32)[0])
    assert int(code, 16) == int(case.expected["codes"][0])
    assert len(lines) == 1 + case.inputs["x"].size


def test_suites_nest_and_only_selects() -> None:
    smoke, default, full = (DEMO.cases(s) for s in ("smoke", "default", "full"))
    assert len(smoke) < len(default) < len(full)
    assert [c.id for c in select(DEMO, "full", "demo.mean.*")] == ["demo.mean.normal",
                                                                   "demo.mean.wide"]
    assert [c.id for c in select(DEMO, "full", "fp16.normal")] == ["demo.to_fp16.normal"]


def test_reproducible_across_runs_and_jobs(tmp_path: Path, monkeypatch) -> None:
    import oracle.generation as gen
    _gen(tmp_path / "a")
    monkeypatch.setattr(gen, "SERIAL_SECONDS", 0.0)   # every case to the workers
    _gen(tmp_path / "b", jobs=2)
    _gen(tmp_path / "a")              # regenerating over a suite replaces it
    assert _tree(tmp_path / "a") == _tree(tmp_path / "b")
    # a budget that runs out part way: the first cases here, the rest in workers
    clock = iter(range(10**6))
    monkeypatch.setattr(gen, "SERIAL_SECONDS", 1.5)
    monkeypatch.setattr(gen.time, "perf_counter", lambda: float(next(clock)))
    _gen(tmp_path / "c", jobs=2)
    assert _tree(tmp_path / "c") == _tree(tmp_path / "a")


def test_jobs_start_no_worker_for_a_quick_suite(tmp_path: Path, monkeypatch) -> None:
    """Workers cost about a second each to start: a suite built within SERIAL_SECONDS is
    built in this process, so --jobs N is never slower than one job on it."""
    import oracle.generation as gen

    def no_pool(*a, **k):
        raise AssertionError("a worker process was started for a quick suite")
    monkeypatch.setattr(gen, "ProcessPoolExecutor", no_pool)
    monkeypatch.setattr(gen, "SERIAL_SECONDS", 60.0)
    _gen(tmp_path / "b", jobs=2)
    _gen(tmp_path / "a")
    assert _tree(tmp_path / "a") == _tree(tmp_path / "b")


def test_seed_changes_inputs(tmp_path: Path) -> None:
    _gen(tmp_path / "a", seed=1)
    _gen(tmp_path / "b", seed=2)
    a, b = oracle.load(tmp_path / "a"), oracle.load(tmp_path / "b")
    assert not np.array_equal(a.cases[0].inputs["x"], b.cases[0].inputs["x"])
    assert b.seed == 2


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_shards_concatenate_to_the_whole(tmp_path: Path, n: int) -> None:
    whole = _gen(tmp_path / "whole")
    parts = []
    for i in range(1, n + 1):
        m = _gen(tmp_path / f"s{i}", shard=(i, n))
        parts += m["cases"]
        if m["cases"]:
            assert _problems(tmp_path / f"s{i}") == []
        else:                     # an empty shard verifies nothing: never a silent pass
            (msg,) = _problems(tmp_path / f"s{i}")
            assert "no cases" in msg
    assert parts == whole["cases"]
    merge([tmp_path / f"s{i}" for i in range(n, 0, -1)], tmp_path / "merged")
    assert _tree(tmp_path / "merged") == _tree(tmp_path / "whole")


def test_shard_arithmetic() -> None:
    assert parse_shard("2/4") == (2, 4)
    for bad in ("0/4", "5/4", "x", "1/0"):
        with pytest.raises(ValueError, match="shard"):
            parse_shard(bad)
    total = 7
    covered = [i for k in range(1, 4) for i in range(total)[shard_slice(total, (k, 3))]]
    assert covered == list(range(total))


def test_refuses_to_overwrite_foreign_directory(tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="not empty"):
        _gen(tmp_path / "x")
    assert (tmp_path / "x" / "notes.txt").read_text() == "mine"
    # a suite with a foreign file beside it: refused, and the suite is left intact
    _gen(tmp_path / "y")
    before = _tree(tmp_path / "y")
    (tmp_path / "y" / "README").write_text("mine")
    with pytest.raises(ValueError, match="README"):
        _gen(tmp_path / "y")
    after = _tree(tmp_path / "y")
    assert after.pop("README") == b"mine" and after == before


# --- corruption: every kind is reported with its file, never raised -----------------

def _first_npy(root: Path, name: str = "codes.npy") -> Path:
    return root / "demo.to_fp16.uniform" / name


def _rewrite_manifest(root: Path, edit, rehash: bool) -> None:
    m = json.loads((root / "manifest.json").read_text())
    edit(m)
    if rehash:
        (root / "manifest.json").write_bytes(fmt.finish_manifest(m))
    else:
        (root / "manifest.json").write_text(json.dumps(m))


def test_flipped_byte(golden: Path) -> None:
    p = _first_npy(golden)
    data = bytearray(p.read_bytes())
    data[-1] ^= 0x01
    p.write_bytes(bytes(data))
    (msg,) = _problems(golden)
    assert "demo.to_fp16.uniform/codes.npy" in msg and "sha256" in msg


def test_truncated_file(golden: Path) -> None:
    p = _first_npy(golden, "x.npy")
    p.write_bytes(p.read_bytes()[:-7])
    (msg,) = _problems(golden)
    assert "x.npy" in msg and "file size" in msg       # checked before reading


def test_truncated_file_with_matching_hash_is_still_refused(golden: Path) -> None:
    p = _first_npy(golden, "x.npy")
    short = p.read_bytes()[:-8]
    p.write_bytes(short)

    def edit(m):
        m["cases"][0]["inputs"]["x"]["sha256"] = fmt.sha256(short)
    _rewrite_manifest(golden, edit, rehash=True)
    (msg,) = _problems(golden)
    assert "truncated" in msg


def test_deleted_and_renamed_files(golden: Path) -> None:
    p = _first_npy(golden)
    p.rename(p.with_name("codes_old.npy"))
    msgs = _problems(golden)
    assert any("codes.npy is missing" in m for m in msgs)
    assert any("codes_old.npy" in m and "not listed" in m for m in msgs)


def test_hand_edited_manifest(golden: Path) -> None:
    def edit(m):
        m["cases"][0]["params"]["rounding"] = "toward_zero"
    _rewrite_manifest(golden, edit, rehash=False)
    msgs = _problems(golden)
    assert any("content_sha256" in m and "edited by hand" in m for m in msgs)


def test_edited_data_with_consistent_hashes_fails_recomputation(golden: Path) -> None:
    p = _first_npy(golden)
    codes = np.load(p)
    codes[3] ^= 1
    data = fmt.array_bytes(codes)
    p.write_bytes(data)

    def edit(m):
        m["cases"][0]["expected"]["codes"]["sha256"] = fmt.sha256(data)
    _rewrite_manifest(golden, edit, rehash=True)
    # the suite has a text form (--text): it still holds the old values, which is found too
    msg, text_msg = sorted(_problems(golden), key=lambda m: "text form" in m)
    assert "differs from recomputation" in msg and "[3]" in msg
    assert "codes.txt" in text_msg and "does not hold the values of its .npy" in text_msg


def test_pickled_array_is_refused(golden: Path) -> None:
    p = _first_npy(golden, "x.npy")
    np.save(p, np.array([{"a": 1}, None], dtype=object))  # np.save pickles object arrays by default
    data = p.read_bytes()
    # a manifest entry whose size matches the pickle's, so the size check lets it through
    n = next(n for n in range(len(data)) if fmt.npy_size("uint8", [n]) == len(data))

    def edit(m):
        m["cases"][0]["inputs"]["x"].update(sha256=fmt.sha256(data), dtype="uint8",
                                            shape=[n])
    _rewrite_manifest(golden, edit, rehash=True)
    (msg,) = _problems(golden)
    assert "pickled" in msg
    with pytest.raises(fmt.SuiteError, match="pickled"):
        oracle.load(golden)


def test_path_traversal_in_manifest_is_refused(golden: Path) -> None:
    def edit(m):
        m["cases"][0]["inputs"]["x"]["file"] = "../../etc/passwd"
    _rewrite_manifest(golden, edit, rehash=True)
    msgs = _problems(golden)
    assert any("file must be" in m for m in msgs)


@pytest.mark.parametrize("text", ["", "{", "[]", '{"schema": 1}'])
def test_broken_manifest(golden: Path, text: str) -> None:
    (golden / "manifest.json").write_text(text)
    assert _problems(golden)


def test_missing_manifest(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    (msg,) = _problems(tmp_path / "empty")
    assert "no manifest.json" in msg


# --- check ----------------------------------------------------------------------------

def _results_from(golden: Path, dest: Path) -> Path:
    """A results directory holding exactly the golden expected outputs."""
    s = oracle.load(golden)
    for case in s:
        for name, arr in case.expected.items():
            path = dest / case.files[name]
            path.parent.mkdir(parents=True, exist_ok=True)
            np.save(path, arr)
    return dest


def test_check_passes_golden_and_flags_perturbed(golden: Path, tmp_path: Path) -> None:
    res = _results_from(golden, tmp_path / "res")
    rep = check(golden, res)
    assert rep.ok and rep.passed == rep.checked == 4
    p = res / "demo.to_fp16.uniform" / "codes.npy"
    codes = np.load(p)
    codes[5] += 1
    np.save(p, codes)
    rep = check(golden, res)
    assert not rep.ok
    (row,) = rep.failures
    assert row[0] == "demo.to_fp16.uniform" and row[2] == "[5]"
    x = oracle.load(golden)["demo.to_fp16.uniform"].inputs["x"][5]
    assert f"{float(x):.9g}" in row[3]


def test_check_relative_to_naive_and_variants(golden: Path, tmp_path: Path) -> None:
    res = _results_from(golden, tmp_path / "res")
    case = oracle.load(golden)["demo.mean.normal"]
    naive_err = np.abs(case.reference["naive"].astype(np.float64) - case.expected["mean"]).max()
    p = res / "demo.mean.normal" / "mean.npy"
    ok = case.expected["mean"] + np.float32(1.5 * naive_err)
    np.save(p, ok)
    assert check(golden, res).ok
    np.save(p, case.expected["mean"] + np.float32(3 * naive_err))
    rep = check(golden, res)
    assert [pr.case for pr in rep.problems] == ["demo.mean.normal"]
    np.save(p, case.expected["mean"])
    (res / "demo.to_fp16.normal" / "codes.npy").unlink()
    with pytest.raises(ValueError, match="allowed: a"):   # no case follows option b
        check(golden, res, variants={"demo_choice": "b"})
    assert not check(golden, res, variants={"demo_choice": "a"}).ok   # missing fails
    rep = check(golden, res, variants={"demo_choice": "a"}, allow_missing="not produced")
    assert rep.ok and rep.skipped == 0 and rep.missing == ["demo.to_fp16.normal/codes.npy"]
    assert check(golden, res, strict=True, allow_missing="not produced").problems


def test_check_rejects_pickled_results(golden: Path, tmp_path: Path) -> None:
    res = _results_from(golden, tmp_path / "res")
    np.save(res / "demo.mean.wide" / "mean.npy", np.array([None] * 3, dtype=object))  # np.save pickles object arrays by default
    rep = check(golden, res)
    assert any("pickled" in p.message for p in rep.problems)


# --- any edit of the manifest is reported, never raised ---------------------------------

def _json_paths(o, p=()):
    yield p
    if isinstance(o, dict):
        for k, v in o.items():
            yield from _json_paths(v, p + (k,))
    elif isinstance(o, list):
        for i, v in enumerate(o):
            yield from _json_paths(v, p + (i,))


@pytest.mark.slow
def test_every_manifest_edit_is_detected(tmp_path: Path) -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    root = tmp_path / "g"
    _gen(root, suite="smoke", text=True)
    original = json.loads((root / "manifest.json").read_text())
    # every field but sources_sha256: a suite from other sources is legitimate (verify
    # then notes it and relies on recomputation), so a re-hashed claim of it is no error
    paths = [p for p in list(_json_paths(original))[1:]
             if p != ("generation", "sources_sha256")]
    values = [None, 0, -1, 7, "x", "e4m3", "../x", [], [1], {}, {"kind": "ulp"}, True, 1e308]

    @settings(max_examples=150, deadline=None, derandomize=True, database=None)
    @given(st.sampled_from(paths), st.sampled_from(values + ["<delete>"]), st.booleans())
    def edit(path, value, rehash):
        if rehash and path == ("content_sha256",):
            return                                # re-hashing would undo the edit
        if rehash and path[:1] == ("runtime",) and (
                (len(path) == 1 and value == "<delete>")
                or (len(path) == 2 and isinstance(value, str) and value != "<delete>")):
            return   # another writer's versions, or none recorded: informative, legitimate
        m = json.loads(json.dumps(original))
        parent = m
        for k in path[:-1]:
            parent = parent[k]
        if value == "<delete>":
            if not isinstance(parent, dict):
                return
            del parent[path[-1]]
        else:
            if parent[path[-1]] == value and type(parent[path[-1]]) is type(value):
                return
            parent[path[-1]] = value
        data = fmt.finish_manifest(m) if rehash else json.dumps(m).encode()
        (root / "manifest.json").write_bytes(data)
        report = verify(root, registry=DEMO, progress=None)      # never raises
        assert not report.ok, (path, value, rehash)
        try:          # load checks schema and hashes (not recomputation): no other error
            oracle.load(root)
            assert rehash, "an edit without re-hashing must fail load"
        except fmt.SuiteError:
            pass

    try:
        edit()
    finally:
        (root / "manifest.json").write_bytes(fmt.finish_manifest(original))


def test_rewritten_npy_with_matching_hash_is_refused(golden: Path) -> None:
    """The same array written in another valid .npy form (version 2.0 header) with its
    hash updated: still not what the generator wrote."""
    p = _first_npy(golden, "x.npy")
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.load(p), version=(2, 0))
    p.write_bytes(buf.getvalue())

    def edit(m):
        m["cases"][0]["inputs"]["x"]["sha256"] = fmt.sha256(buf.getvalue())
    _rewrite_manifest(golden, edit, rehash=True)
    (msg,) = _problems(golden)
    assert "canonical" in msg


def test_failed_generation_leaves_the_previous_suite(tmp_path: Path) -> None:
    _gen(tmp_path / "g")
    before = _tree(tmp_path / "g")

    def broken(inputs, params):
        raise RuntimeError("boom")

    reg = Registry([Area("bad", {}, [Operation("bad.op", broken, "fails")],
                         lambda: [CaseSpec("bad.case", "bad.op", {},
                                           lambda r: {"x": r.normal(3)}, level=0)])])
    with pytest.raises(RuntimeError, match="boom"):
        generate(tmp_path / "g", registry=reg, progress=None)
    assert _tree(tmp_path / "g") == before
    assert [p.name for p in tmp_path.iterdir()] == ["g"]       # no staging left behind


def test_suite_select_by_pattern_and_variant(golden: Path) -> None:
    s = oracle.load(golden)
    assert [c.id for c in s.select("demo.mean.*")] == ["demo.mean.normal", "demo.mean.wide"]
    assert "demo.to_fp16.normal" not in [c.id for c in s.select(variants={"demo_choice": "b"})]
    assert "demo.to_fp16.normal" in [c.id for c in s.select(variants={"demo_choice": "a"})]
