"""The two phases every check runs: the deterministic sweep over placed inputs, then
rounds of hypothesis search that shrink each new kind of failure; and the calls into
the implementation, whose exceptions become failures of the implementation."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from oracle.conformance.kinds import example_text, failure_kinds
from oracle.conformance.report import (
    Collector, ConformanceError, ConformanceReport, Failure, NewKind,
)
from oracle.extension_dtypes import as_codes_of
from oracle.tolerance import ExactNaNClass
from refimpl.formats import Format
from refimpl.validation import check_int

#: hypothesis searches run after the sweep, each continuing past the kinds found so far
SEARCH_ROUNDS = 4


def invoke(fn: Callable, *args: Any, **kwargs: Any) -> Any:
    """Call the implementation; an exception it raises becomes a ConformanceError with
    its text (a failure of the implementation, not of the check)."""
    try:
        return fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - any exception is the implementation's
        shapes = ", ".join(str(np.shape(a)) for a in args)
        raise ConformanceError(
            f"the implementation raised {type(exc).__name__}: {exc}\n"
            f"  called with argument shapes {shapes}") from None


def call_impl(fn: Callable, x: np.ndarray, vectorized: bool) -> np.ndarray:
    """The implementation on ``x``, whole or one scalar at a time."""
    if vectorized:
        return np.asarray(invoke(fn, x))
    return np.array([np.asarray(invoke(fn, v)).item()
                     for v in x.reshape(-1)]).reshape(x.shape)


def as_codes(got: np.ndarray, f, shape: tuple[int, ...]) -> np.ndarray:
    """An encoder's output checked to be integer codes of ``f`` in ``shape`` (an
    extension-dtype array of ``f``, e.g. ml_dtypes' float8_e4m3fn, read as its codes)."""
    got = extension_codes(got, f, "the encoder's result")
    if got.shape != shape:
        raise ConformanceError(f"the encoder returned shape {got.shape} for input shape {shape}")
    if got.dtype.kind not in "ui":
        raise ConformanceError(f"the encoder returned {got.dtype} values; an encoder returns "
                               f"integer codes of {f.name}")
    if (got < 0).any() or (got >= (1 << f.bits)).any():
        bad = int(np.flatnonzero((got < 0) | (got >= (1 << f.bits)))[0])
        raise ConformanceError(f"the encoder returned {int(got.reshape(-1)[bad])} at index "
                               f"{bad}, not a {f.bits}-bit code of {f.name}")
    return got.astype(f.code_dtype)


def extension_codes(a: Any, fmt: Any, what: str) -> np.ndarray:
    """:func:`oracle.extension_dtypes.as_codes_of`, its refusal a ConformanceError."""
    try:
        return as_codes_of(a, fmt, what)
    except ValueError as exc:
        raise ConformanceError(str(exc)) from None


def _search(strategy: Any, body: Callable[[Any], None], max_examples: int) -> Failure | None:
    """Run ``body`` on examples drawn from ``strategy`` (derandomised, no database); the
    Failure of the example hypothesis shrank a new kind to, or None. A ConformanceError
    (an implementation that raised or returned a wrong shape) is re-raised as it is."""
    # deferred: hypothesis is imported only when a check runs (import time of oracle)
    from hypothesis import HealthCheck, given, settings

    found: list[BaseException] = []

    @settings(max_examples=max_examples, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck), print_blob=False)
    @given(strategy)
    def prop(v: Any) -> None:
        try:
            body(v)
        except (NewKind, ConformanceError) as exc:
            found[:] = [exc]
            raise

    try:
        prop()
    except (NewKind, ConformanceError):
        exc = found[-1]
        if isinstance(exc, ConformanceError):
            raise exc from None
        return exc.failure  # type: ignore[union-attr]
    return None


def hunt(col: Collector, strategy: Any, body: Callable[[Any], None],
          max_examples: int) -> None:
    """Hypothesis rounds; each continues past the kinds found before (``body`` raises
    ``NewKind`` only for an unseen kind)."""
    if strategy is None or max_examples <= 0:
        return
    for _ in range(SEARCH_ROUNDS):
        f = _search(strategy, body, max_examples)
        if f is None:
            return
        col.add(f)


@dataclass(frozen=True)
class Target:
    """What an elementwise check tests, for titles and messages."""

    what: str            # "encoder" / "decoder" / "round_to"
    fmt: Any
    options: str

    @property
    def title(self) -> str:
        return f"{self.fmt} {self.what} ({self.options})"


def run_check(t: Target, inputs: np.ndarray, expect: Callable[[np.ndarray], np.ndarray],
         actual: Callable[[np.ndarray], np.ndarray], out_fmt: Format | None,
         strategy: Any, max_examples: int,
         where: Callable[[np.ndarray], list[str]],
         rounded_to: Format | None = None) -> ConformanceReport:
    """Sweep, then hypothesis; every kind of failure found, each with its simplest
    counterexample (``rounded_to``: the format a fake-quantiser rounds to, for the known
    behaviours of :func:`oracle.conformance.kinds.failure_kinds`)."""
    col = Collector(t.title, f"{t.fmt} {t.what}")
    tol = ExactNaNClass()
    want = expect(inputs)
    got = actual(inputs)
    c = tol.compare(got, want, fmt=out_fmt)
    if c.problem:
        raise ConformanceError(f"{t.fmt} {t.what}: {c.problem}")
    col.placed = inputs.size
    if strategy is None:           # a decoder: the sweep is the check
        col.no_search = f"a decoder's sweep is {t.options}"
    col.count("codes" if t.what == "encoder" else "values", inputs.size, c.failures)
    phase = f"sweep of {inputs.size} placed inputs"
    if not c.ok:
        idx = np.flatnonzero(c.mismatch.reshape(-1))
        xs, ws, gs = (a.reshape(-1)[idx] for a in (inputs, want, got))
        for i, kind in enumerate(failure_kinds(xs, ws, gs, out_fmt, where, rounded_to)):
            if kind in col.kinds:
                col.kinds[kind].count += 1
            else:
                col.add(Failure(kind, phase, example_text(xs[i], ws[i], gs[i], out_fmt),
                                xs[i], ws[i], gs[i], 1))

    def one(v: Any) -> None:
        col.examples += 1
        x = np.asarray([v], dtype=inputs.dtype)
        w, g = expect(x), actual(x)
        if not tol.compare(g, w, fmt=out_fmt).ok:
            kind = failure_kinds(x, w, g, out_fmt, where, rounded_to)[0]
            if kind not in col.kinds:
                raise NewKind(Failure(kind, "hypothesis, shrunk",
                                       example_text(x[0], w[0], g[0], out_fmt),
                                       x[0], w[0], g[0], 0))

    hunt(col, strategy, one, max_examples)
    return col.finish()


def check_max_examples(max_examples: Any) -> int:
    """``max_examples`` checked: an int >= 0."""
    return check_int("max_examples", max_examples, minimum=0)
