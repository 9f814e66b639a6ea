"""Run an implementation across a golden suite, case by case: ``oracle.run(suite,
{operation: callable})`` and ``python -m oracle run SUITE --impl OPERATION=module:function``.

The calling convention (the same for every operation):

- ``fn(*inputs, **params)``: the case's input arrays positionally, in manifest order
  (``manifest.json`` lists them under ``inputs``, by name in alphabetical order: ``k, q,
  v`` for attention, ``random_bits, x`` for stochastic rounding; ``inputs="keywords"``
  passes them by name instead), and its parameters as keywords, named as the manifest
  names them: one vocabulary for every case type (a format is always ``fmt``, a
  rounding mode always its canonical name, ``refimpl.rounding_modes``). A suite written
  before that vocabulary (``format``/``elem`` for ``fmt``, E8M0's ``rounding: "up"`` for
  ``nearest_away``) is read in it (:func:`oracle.suite.current_params`).
- It returns a mapping ``{output name: array}``, a tuple of arrays in the order of the
  case's expected outputs (manifest order, alphabetical: ``codes, dequantized,
  scales``), or one array when the case has one expected output.
  Low-precision outputs are unsigned codes; an array of ml_dtypes' type for the
  output's format is read as its codes (:mod:`oracle.extension_dtypes`). An array of
  another dtype that holds the expected dtype's values exactly (int64 codes, float64
  values that are float32 values) is read as the expected dtype.
- It may raise ``NotImplementedError`` for parameters it does not support: that case is
  counted and reported as not supported, never as a pass. Any other exception is a
  failure of the case, with its text.

Each output is compared as ``check`` compares it (the case's typed tolerance); a missing
output fails unless ``allow_missing`` says why; a run in which nothing was compared
fails. With ``results`` the outputs are written in the suite layout
(``<case id>/<output>.npy``), so
``python -m oracle check SUITE --results RESULTS`` reads them.
"""
from __future__ import annotations

import inspect
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from oracle import suite as S
from oracle.extension_dtypes import as_codes_of
from oracle.cases import registry as default_registry
from oracle.variant_match import failure_notes
from oracle.variants import known, validate
from oracle.wording import count

__all__ = ["run", "RunReport", "call_params", "PARAM_NAMES"]

#: parameter names of suites written before the one vocabulary -> the keyword passed
PARAM_NAMES = S.OLD_PARAM_NAMES


def call_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """A case's parameters as the runner passes them: the manifest's, with the names of
    suites written before translated (:func:`oracle.suite.current_params`)."""
    return S.current_params(params)


@dataclass
class RunReport:
    """What a run did: cases called, outputs compared and passed, and per case what
    failed or was not supported."""

    called: int = 0
    compared: int = 0
    passed: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)      # (case, message)
    not_supported: list[tuple[str, str]] = field(default_factory=list)  # (case, reason)
    missing: list[str] = field(default_factory=list)                   # case/output
    skipped: int = 0                                                   # other variants
    without_impl: int = 0                                              # no callable given
    allow_missing: str | None = None

    @property
    def ok(self) -> bool:
        return not self.failures and self.compared > 0 and (
            not self.missing or self.allow_missing is not None)

    def summary(self) -> str:
        parts = [f"{self.passed}/{self.compared} outputs pass in "
                 f"{count(self.called, 'case')}"]
        if self.not_supported:
            parts.append(f"{count(len(self.not_supported), 'case')} not supported")
        if self.missing:
            parts.append(f"{count(len(self.missing), 'output')} missing")
        if self.skipped:
            parts.append(f"{count(self.skipped, 'case')} of other variants skipped")
        if self.without_impl:
            parts.append(f"{count(self.without_impl, 'case')} of operations without an "
                         "implementation")
        return ", ".join(parts)


def _call_text(case: S.Case, params: Mapping[str, Any], inputs: str) -> str:
    """How the callable was called, for a report: ``fn(k, q, v, causal=True)``."""
    arrays = list(case.inputs) if inputs == "positional" else \
        [f"{n}={n}" for n in case.inputs]
    return "fn(" + ", ".join(arrays + [f"{k}={v!r}" for k, v in params.items()]) + ")"


def _order_note(fn: Callable, case: S.Case) -> str | None:
    """A note when ``fn``'s first positional parameters are the case's input names in
    another order (they are passed positionally, in manifest order)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    names = [p.name for p in sig.parameters.values() if p.kind in kinds][:len(case.inputs)]
    order = list(case.inputs)
    if len(order) < 2 or sorted(names) != sorted(order) or names == order:
        return None
    return (f"the function's parameters ({', '.join(names)}) are this case's inputs in "
            f"another order: they are passed positionally in manifest order "
            f"({', '.join(order)}); pass them by name with --inputs-as-keywords "
            "(inputs='keywords')")


def _outputs(case: S.Case, got: Any) -> dict[str, Any]:
    names = list(case.expected)
    if got is None:
        raise ValueError(f"returned None; this case has outputs {names}: return one array, "
                         "a tuple in that order or a mapping")
    if isinstance(got, Mapping):
        return dict(got)
    if isinstance(got, tuple):
        if len(got) != len(names):
            raise ValueError(f"returned a tuple of {len(got)} arrays; this case has "
                             f"{len(names)} outputs {names} (return them in that order "
                             "or as a mapping)")
        return dict(zip(names, got))
    if len(names) == 1:
        return {names[0]: got}
    raise ValueError(f"returned one {type(got).__name__}; this case has outputs {names}: "
                     "return a mapping or a tuple in that order")


def _as_expected_dtype(a: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """``a`` cast to the expected dtype when the cast keeps every value (NaNs too)."""
    if a.dtype == expected.dtype or a.shape != expected.shape:
        return a
    if a.dtype.kind not in "biuf" or expected.dtype.kind not in "biuf":
        return a
    with np.errstate(all="ignore"):
        cast = a.astype(expected.dtype)
        back = cast.astype(a.dtype)
    same = (back == a) | (np.isnan(back) & np.isnan(a) if a.dtype.kind == "f" else False)
    if a.dtype.kind == "f":
        same &= np.signbit(back) == np.signbit(a)
    return cast if bool(np.all(same)) else a


def _write(results: Path, rel: str, a: np.ndarray) -> None:
    path = results / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        np.save(fh, np.ascontiguousarray(a), allow_pickle=False)


def run(suite: str | os.PathLike | S.Suite, impls: Mapping[str, Callable], *,
        only: str | None = None, ids: Sequence[str] | None = None,
        variants: Mapping[str, str] | None = None, results: str | os.PathLike | None = None,
        allow_missing: str | None = None, inputs: str = "positional") -> RunReport:
    """Call ``impls[case.operation]`` on every selected case of ``suite`` (a path or a
    loaded :class:`~oracle.suite.Suite`) and compare what it returns (the calling
    convention is in this module's docstring).

    Args:
        impls: operation name -> callable; cases of other operations are counted as
            without an implementation.
        only: case ids matching this glob (or containing it).
        ids: exact case ids (each must exist).
        variants: choice -> option: cases marked with another option are skipped.
        results: a directory to write the outputs to in the suite layout (created).
        allow_missing: a reason for which outputs the callable does not return do not
            fail the run.
        inputs: ``"positional"`` (manifest order) or ``"keywords"`` (by name).

    Raises:
        ValueError: an unknown operation in ``impls``, an unknown case id, variant
            choice or option, or a selection of no case.
        TypeError: an entry of ``impls`` that is not callable.
        SuiteError: the suite fails validation or its hashes.
    """
    if inputs not in ("positional", "keywords"):
        raise ValueError(f"inputs must be 'positional' or 'keywords', got {inputs!r}")
    s = suite if isinstance(suite, S.Suite) else S.load(suite)
    if not isinstance(impls, Mapping) or not impls:
        raise ValueError("impls must map at least one operation name to a callable")
    ops = {c.operation for c in s.cases}
    for op, fn in impls.items():
        if op not in ops:
            raise ValueError(f"no case of the suite has operation {op!r}; its operations: "
                             f"{', '.join(sorted(ops))}")
        if not callable(fn):
            raise TypeError(f"impls[{op!r}] is not callable ({type(fn).__name__})")
    if variants:
        validate(variants, known((c.variant for c in s.cases),
                                 (x.variant for x in default_registry().all_cases)))
    chosen = s.select(only, ids=ids)
    if not chosen:
        raise ValueError("the selection (--only/--id) matches no case of the suite")
    kept = {c.id for c in s.select(only, variants, ids=ids)}
    report = RunReport(allow_missing=allow_missing)
    out_dir = Path(results) if results is not None else None
    for case in chosen:
        if case.id not in kept:
            report.skipped += 1
            continue
        fn = impls.get(case.operation)
        if fn is None:
            report.without_impl += 1
            continue
        report.called += 1
        params = call_params(case.params)
        order = _order_note(fn, case) if inputs == "positional" else None
        try:
            got = (fn(*case.inputs.values(), **params) if inputs == "positional"
                   else fn(**case.inputs, **params))
        except NotImplementedError as exc:
            report.not_supported.append((case.id, str(exc) or "NotImplementedError"))
            continue
        except Exception as exc:  # noqa: BLE001 - the implementation's failure
            called = (f"; called as {_call_text(case, params, inputs)}"
                      if isinstance(exc, TypeError) else "")
            report.failures.append((case.id, "; ".join(
                [f"raised {type(exc).__name__}: {exc}{called}"] + [order] * bool(order))))
            continue
        try:
            outs = _outputs(case, got)
            outs = {k: (as_codes_of(v, case.formats[k], f"output {k}")
                        if k in case.formats else np.asarray(v)) for k, v in outs.items()}
            # values are compared: int64 codes or float64 values that the expected dtype
            # holds exactly are read as that dtype
            outs = {k: (_as_expected_dtype(v, case.expected[k]) if k in case.expected
                        else v) for k, v in outs.items()}
        except ValueError as exc:
            report.failures.append((case.id, str(exc)))
            continue
        for name in case.expected:
            if name not in outs:
                report.missing.append(f"{case.id}/{name}")
        for name, c in case.check(outs).items():
            if name in case.expected and name not in outs:
                continue     # listed in report.missing: fails unless allow_missing
            report.compared += 1
            if c.ok:
                report.passed += 1
                continue
            notes = failure_notes(case, name, outs[name], c.mismatch, outs.get, variants)
            report.failures.append((case.id, "; ".join(
                [f"{name}: {c.summary()}", *notes] + [order] * bool(order))))
        if out_dir is not None:
            for name, a in outs.items():
                if name in case.expected:
                    _write(out_dir, case.files[name], a)
    return report
