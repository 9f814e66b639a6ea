"""``--variant CHOICE=OPTION``: selecting the implementation-defined choices a consumer
implements.

A case whose answer depends on a choice the specifications leave open (causal alignment,
the E8M0 tie rule, what a NaN becomes in FP4, ...) is marked with that choice and the
option its expected values follow. A consumer names the options it implements; cases
marked with another option of a named choice are skipped (``generate`` does not write
them, ``check`` does not compare them).

A selection is never silently empty: a choice no case is marked with (a misspelt key)
and an option no case of that choice follows (a misspelt or unsupported value) are
errors that list what is known, instead of keeping or skipping every case of the choice.
"""
from __future__ import annotations

from typing import Iterable, Mapping, Sequence

from oracle.suite import variant_pairs

__all__ = ["parse", "known", "validate"]


def parse(items: Sequence[str]) -> dict[str, str]:
    """``["CHOICE=OPTION", ...]`` -> {choice: option}.

    Raises:
        ValueError: an item without ``=``, an empty choice or option, or one choice
            given twice with different options.
    """
    out: dict[str, str] = {}
    for item in items:
        choice, sep, option = str(item).partition("=")
        choice, option = choice.strip(), option.strip()
        if not sep or not choice or not option:
            raise ValueError(f"--variant must be CHOICE=OPTION, got {item!r}")
        if out.get(choice, option) != option:
            raise ValueError(f"--variant {choice} given twice ({out[choice]!r} and "
                             f"{option!r}); a choice has one option")
        out[choice] = option
    return out


def known(*variant_fields: Iterable[object]) -> dict[str, tuple[str, ...]]:
    """The choices and options marked by cases, from iterables of their variant fields
    (None, a ``{choice, option}`` mapping or a list of them), merged in order."""
    out: dict[str, list[str]] = {}
    for fields in variant_fields:
        for v in fields:
            for choice, option in variant_pairs(v):
                opts = out.setdefault(choice, [])
                if option not in opts:
                    opts.append(option)
    return {k: tuple(v) for k, v in out.items()}


def validate(selected: Mapping[str, str], options: Mapping[str, Sequence[str]]) -> None:
    """Refuse a selection naming an unknown choice or an option the choice does not have.

    Raises:
        ValueError: naming the first bad choice with the list of known choices, or the
            first bad option with the list of the choice's options.
    """
    for choice, option in selected.items():
        if choice not in options:
            names = ", ".join(sorted(options)) or "none"
            raise ValueError(f"--variant {choice}={option}: unknown choice {choice!r}; "
                             f"known choices: {names}")
        if option not in options[choice]:
            raise ValueError(f"--variant {choice}={option}: unknown option {option!r} of "
                             f"{choice}; allowed: {', '.join(options[choice])}")

