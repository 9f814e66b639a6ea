"""Which documented variant a failing golden case's result follows.

A case marked with an implementation-defined choice (``e8m0_tie=nearest_even``,
``mx_inf_block=nan``, ...) has sibling cases in the registry marked with the choice's
other options, whose parameters differ from its own only where the option is spelt
(``rounding``, ``inf_block``, ...). When a result fails, the case's expected outputs
(and the reference arrays its tolerance reads: the naive result of ``relative_to_naive``,
interval bounds) are recomputed from its own inputs under each sibling's parameters;
an option under which
the result passes is named ("matches e8m0_tie=up (a documented variant, not a bug): add
--variant e8m0_tie=up"), as ``conform`` names one. A plain bug matches no option and
gets no such line.
"""
from __future__ import annotations

from dataclasses import fields, replace
from typing import Any, Callable, Mapping

import numpy as np

from oracle import suite as S
from oracle.cases import Registry, registry as default_registry
from oracle.known_behaviours import case_behaviours, describe, encode_behaviour
from oracle.tolerance import ExactUnlessNaNScale

__all__ = ["matching_option", "describe_match", "failure_notes"]

#: the tolerance kinds a recomputed expectation can be compared with (the reference
#: arrays a tolerance reads, a naive result or interval bounds, recomputed too)
_COMPARABLE = ("exact", "exact_nan_class", "exact_unless_nan_scale", "ulp", "allclose",
               "relative_to_naive", "interval")


def _same(a: Any, b: Any) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def _recomputed(tol: Any, case: S.Case, alt: Mapping[str, Any]) -> Any:
    """``tol`` reading the recomputed ``alt`` where it reads the case's arrays (its
    reference arrays, or for ``exact_unless_nan_scale`` the expected scales); None when
    one of them was not recomputed."""
    changes: dict[str, Any] = {}
    for f in fields(tol):
        if not f.metadata.get("array") or f.metadata.get("output"):
            continue            # an expected output (scales) is replaced below
        value = getattr(tol, f.name)
        name = next((n for n, a in case.reference.items() if _same(a, value)), None)
        if name is None or name not in alt:
            return None
        changes[f.name] = np.asarray(alt[name])
    if isinstance(tol, ExactUnlessNaNScale) and "scales" in alt:
        changes["scales"] = np.asarray(alt["scales"])
    return replace(tol, **changes) if changes else tol


def _siblings(case: S.Case, choice: str, option: str,
              reg: Registry) -> dict[str, dict[str, Any]]:
    """Other option -> the case's parameters with the sibling's values where they
    differ (the sibling differing in the fewest parameters)."""
    best: dict[str, tuple[int, dict[str, Any]]] = {}
    for spec in reg.all_cases:
        if spec.operation != case.operation:
            continue
        for c, o in S.variant_pairs(spec.variant):
            if c != choice or o == option:
                continue
            params = S.current_params(spec.params)
            diff = {k: v for k, v in params.items() if case.params.get(k) != v}
            if set(params) != set(case.params) or not diff:
                continue
            if o not in best or len(diff) < best[o][0]:
                best[o] = (len(diff), {**case.params, **diff})
    return {o: p for o, (_, p) in best.items()}


def matching_option(case: S.Case, name: str, got: np.ndarray,
                    selected: Mapping[str, str] | None = None,
                    reg: Registry | None = None) -> tuple[str, str] | None:
    """(choice, option): another documented option of a choice of ``case`` (one the
    user did not ``selected``) under which output ``name`` = ``got`` passes, recomputed
    from the case's inputs; None when there is none (or it cannot be recomputed)."""
    tol = case.tolerance.get(name)
    if tol is None or tol.kind not in _COMPARABLE:
        return None
    reg = reg or default_registry()
    op = reg.operations.get(case.operation)
    for choice, option in S.variant_pairs(case.variant):
        if op is None or (selected and choice in selected):
            continue
        for other, params in _siblings(case, choice, option, reg).items():
            try:
                with np.errstate(all="ignore"):
                    alt = op.compute(case.inputs, params)
                t = _recomputed(tol, case, alt)
                ok = t is not None and name in alt and t.compare(
                    got, np.asarray(alt[name]), fmt=case.formats.get(name)).ok
            except Exception:  # noqa: BLE001 - no expectation under this option
                continue
            if ok:
                return choice, other
    return None


def describe_match(match: tuple[str, str]) -> str:
    """The report line for a match."""
    choice, option = match
    return (f"matches {choice}={option} (a documented variant, not a bug): add "
            f"--variant {choice}={option}")


def _encode_behaviours(case: S.Case, name: str, got: np.ndarray,
                       mismatch: np.ndarray | None) -> list[str]:
    """The known behaviour every failing element of a ``formats.encode`` case shows
    (ml_dtypes' NaN to the zero of the opposite sign), as one report line."""
    x = case.inputs.get("x")
    fmt = case.formats.get(name)
    if case.operation != "formats.encode" or name != "codes" or x is None or fmt is None \
            or mismatch is None or np.shape(got) != np.shape(x):
        return []
    bad = np.flatnonzero(np.asarray(mismatch).reshape(-1))
    xs, gs = np.asarray(x).reshape(-1)[bad], np.asarray(got).reshape(-1)[bad]
    found = {encode_behaviour(a, g, fmt) for a, g in zip(xs, gs)}
    if len(bad) == 0 or len(found) != 1 or None in found:
        return []
    n = len(bad)
    return [describe(found.pop()) + (f" (all {n} failing elements)" if n != 1
                                     else " (the one failing element)")]


def failure_notes(case: S.Case, name: str, got: np.ndarray, mismatch: np.ndarray | None,
                  results: Callable[[str], np.ndarray | None],
                  selected: Mapping[str, str] | None = None) -> list[str]:
    """What a failing output ``name`` = ``got`` of a golden case is, when the oracle
    knows: the known library behaviours that explain every failing element
    (:mod:`oracle.known_behaviours`; ``results(other)`` reads another output of the same
    implementation, or None), else a documented option it matches
    (:func:`matching_option`); empty for a plain difference."""
    notes = case_behaviours(case.operation, S.current_params(case.params), case.inputs,
                            case.expected, name, got, results)
    notes = notes or _encode_behaviours(case, name, got, mismatch)
    if notes:
        return notes
    match = matching_option(case, name, got, selected)
    return [describe_match(match)] if match else []
