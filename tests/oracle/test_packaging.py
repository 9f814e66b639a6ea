"""What ``pip install .`` brings: every import the CLI needs, ``conform`` included."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _requirement_names(reqs: list[str]) -> set[str]:
    return {re.split(r"[<>=!~ \[;]", r, maxsplit=1)[0].lower() for r in reqs}


@pytest.mark.skipif(sys.version_info < (3, 11), reason="tomllib is Python 3.11+")
def test_hypothesis_is_a_runtime_dependency() -> None:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    runtime = _requirement_names(project["dependencies"])
    # conform and oracle.strategies import hypothesis: it must come with the package
    assert {"numpy", "tabulate", "hypothesis"} <= runtime
    # the design allows these three at run time, nothing else
    assert runtime == {"numpy", "tabulate", "hypothesis"}


def test_conform_imports_only_runtime_dependencies() -> None:
    """The modules conform runs import nothing beyond numpy, tabulate and hypothesis
    (pytest, matplotlib and the test tree are not installed by the first command)."""
    import subprocess

    code = ("import sys, oracle.cli, oracle.conformance, oracle.strategies, oracle.cli.conform;"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
            "('pytest', 'matplotlib', 'tests', '_pytest'));"
            "print(bad); raise SystemExit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
