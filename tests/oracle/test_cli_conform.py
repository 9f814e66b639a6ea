"""``python -m oracle conform --impl``: a module that fails while being imported is a
usage error naming ``--impl`` and the exception, never a traceback."""
from __future__ import annotations

from pathlib import Path

import pytest

from oracle.cli import main


@pytest.mark.parametrize("source, spec, says", [
    ("raise RuntimeError('boom at import')\n", "conf_boom:f",
     "--impl conf_boom:f: importing it failed with RuntimeError: boom at import"),
    ("def f(:\n", "conf_syntax:f", "--impl conf_syntax:f: importing it failed with "
                                   "SyntaxError"),
    ("", ":f", "--impl :f: Empty module name"),
])
def test_a_module_that_fails_to_import_is_a_usage_error(tmp_path: Path, monkeypatch, capsys,
                                                        source: str, spec: str,
                                                        says: str) -> None:
    name = spec.split(":")[0]
    if name:
        (tmp_path / f"{name}.py").write_text(source)
        monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["conform", "formats.encode", "--impl", spec, "--format", "e4m3"]) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err


def test_resolve_callable_wraps_what_a_module_raises(tmp_path: Path, monkeypatch) -> None:
    """The library function, not only the CLI: a module raising on import is a
    ValueError naming the module and the exception (chained), not a raw RuntimeError."""
    from oracle.conformance import resolve_callable

    (tmp_path / "conf_raises.py").write_text("raise KeyError('no config')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError, match="conf_raises:f: importing it failed with KeyError") as e:
        resolve_callable("conf_raises:f")
    assert isinstance(e.value.__cause__, KeyError)


@pytest.mark.parametrize("argv, left", [
    (["formats.encode", "--format", "e2m1"], "not checked: NaN inputs"),
    (["formats.encode", "--format", "e2m1", "--variant", "nan_to_e2m1=zero"], None),
    (["formats.encode", "--format", "e4m3"], None),                # E4M3 has a NaN
    (["scaling.mx_quantize", "--format", "e2m1"], "not checked: blocks holding Inf or NaN"),
    (["scaling.mx_quantize", "--format", "e2m1", "--inf-block", "nan"], None),
])
def test_a_pass_says_what_it_did_not_check(tmp_path: Path, monkeypatch, capsys, argv,
                                           left) -> None:
    """Inputs the sweep places only when an implementation-defined option is named (NaN
    into FP4, Inf/NaN blocks) are said to be unchecked after an ok, with the flag that
    checks them. The implementations are refimpl's, so each passes."""
    mod = f"conf_ref_{argv[2]}"            # one module per format (imports are cached)
    (tmp_path / f"{mod}.py").write_text(
        "from refimpl import formats as F\n"
        "from refimpl.scaling import mx_quantize\n"
        "def enc(x):\n    return F.encode(x, FMT, **KW)\n"
        "def mx(x):\n    q = mx_quantize(x, 'e2m1')\n    return q.codes, q.scales\n"
        .replace("FMT", repr(argv[2]))
        .replace("KW", "{'nan': 'zero'}" if argv[2] == "e2m1" else "{}"))
    monkeypatch.syspath_prepend(str(tmp_path))
    fn = f"{mod}:mx" if argv[0] == "scaling.mx_quantize" else f"{mod}:enc"
    assert main(["conform", argv[0], "--impl", fn, *argv[1:], "--max-examples", "0"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("ok:")
    if left:
        assert left in out and "--variant" in out
    else:
        assert "not checked" not in out
