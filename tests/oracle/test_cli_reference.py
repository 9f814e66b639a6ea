"""docs/cli.md names every command and every option the CLI has."""
from __future__ import annotations

from pathlib import Path

from oracle.cli import build_parser

DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def test_every_command_and_option_is_in_the_reference() -> None:
    doc = DOC.read_text(encoding="utf-8")
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    missing = []
    for name, parser in sub.choices.items():
        if f"## `{name}`:" not in doc:
            missing.append(name)
        for action in parser._actions:
            for opt in action.option_strings:
                if opt.startswith("--") and opt != "--help" and f"`{opt}`" not in doc:
                    missing.append(f"{name} {opt}")
    assert not missing, missing
