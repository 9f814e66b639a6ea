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
