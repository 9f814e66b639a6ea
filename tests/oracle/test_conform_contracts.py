"""The callable contracts are written where users look: ``conform --help`` prints each
target's contract and example, and ``docs/conformance.md`` states the same text."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from oracle.cli import build_parser
from oracle.conformance import CHECKS
from oracle.conformance.contracts import CONTRACTS

DOC = Path(__file__).resolve().parents[2] / "docs" / "conformance.md"


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def _conform_help() -> str:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return sub.choices["conform"].format_help()


def test_every_target_has_a_contract() -> None:
    assert set(CHECKS) <= set(CONTRACTS)


@pytest.mark.parametrize("target", sorted(CHECKS))
def test_conform_help_shows_the_contract_and_an_example(target: str) -> None:
    c = CONTRACTS[target]
    text = _conform_help()
    assert f"{c.target}: {c.call}" in text
    assert _flat(c.arguments) in _flat(text) and _flat(c.returns) in _flat(text)
    assert c.command in text
    for line in c.adapter.splitlines():
        assert line in text


@pytest.mark.parametrize("target", sorted(CHECKS))
def test_the_user_guide_states_the_same_contract(target: str) -> None:
    c = CONTRACTS[target]
    doc = DOC.read_text(encoding="utf-8")
    assert f"### `{c.target}`: `{c.call}`" in doc
    assert _flat(c.arguments) in _flat(doc) and _flat(c.returns) in _flat(doc)
    assert c.command in doc
    assert c.adapter in doc


@pytest.mark.parametrize("target", sorted(CHECKS))
def test_the_example_command_parses(target: str) -> None:
    """Each example names its target and options conform accepts."""
    args = CONTRACTS[target].command.split()[3:]
    ns = build_parser().parse_args(args)
    assert ns.target == target
