"""What a conformance check returns or raises: the report of a pass, the error of a
failure with every kind found, and the collector that builds either."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

__all__ = ["ConformanceError", "ConformanceReport", "Failure"]


@dataclass
class Failure:
    """One kind of disagreement: its simplest counterexample and how often it occurred
    in the sweep (0 when only the hypothesis search found it)."""

    kind: str
    phase: str
    text: str
    input: Any = None
    expected: Any = None
    got: Any = None
    count: int = 0


class ConformanceError(AssertionError):
    """A callable disagrees with the oracle. ``failures`` lists every kind found
    (simplest first); ``input``, ``expected`` and ``got`` hold the first one's
    counterexample; ``counts`` maps each output to (failed, compared) in the sweep;
    ``explanation`` names the documented variants that account for the failure (set by
    ``oracle.conformance.conform``; None when none does or none was tried)."""

    explanation: str | None = None

    def __init__(self, message: str, input: Any = None, expected: Any = None,
                 got: Any = None, failures: list[Failure] | None = None,
                 counts: dict[str, tuple[int, int]] | None = None) -> None:
        super().__init__(message)
        self.input, self.expected, self.got = input, expected, got
        self.failures = list(failures or [])
        self.counts = dict(counts or {})


@dataclass
class ConformanceReport:
    """What a passing check compared: ``compared`` maps each output to the number of
    elements the sweep compared; ``examples`` counts the hypothesis examples run."""

    target: str
    compared: dict[str, int] = field(default_factory=dict)
    placed: int = 0
    examples: int = 0
    #: why the check has no random search (a decoder's sweep is every code), or None
    no_search: str | None = None

    def summary(self) -> str:
        outs = ", ".join(f"{n} {name}" for name, n in self.compared.items())
        text = f"{self.placed} placed inputs swept ({outs} compared)"
        if self.examples:
            return text + f", then {self.examples} random examples"
        return text + f", no random search ({self.no_search or 'max_examples 0'})"


class Collector:
    """Failures by kind (first found first), per-output counts, examples run."""

    def __init__(self, title: str, target: str) -> None:
        self.title, self.target = title, target
        self.kinds: dict[str, Failure] = {}
        self.counts: dict[str, list[int]] = {}
        self.placed = 0
        self.examples = 0
        self.no_search: str | None = None

    def count(self, output: str, compared: int, failed: int) -> None:
        c = self.counts.setdefault(output, [0, 0])
        c[0] += failed
        c[1] += compared

    def judge(self, output: str, c: Any, count: bool) -> bool:
        """Whether the comparison ``c`` (a tolerance rule's result) passed: a problem it
        names (shape, dtype) is a ConformanceError; the elements it compared and failed are
        counted under ``output`` when ``count``."""
        if c.problem:
            raise ConformanceError(f"{self.title}: {c.problem}")
        if count:
            self.count(output, c.mismatch.size, c.failures)
        return c.ok

    def seen(self, kind: str, count: bool) -> bool:
        """Whether a failure of ``kind`` was found before (then counted once more when
        ``count``: a sweep's failures are counted, the random search's are not)."""
        if kind not in self.kinds:
            return False
        if count:
            self.kinds[kind].count += 1
        return True

    def keep(self, f: Failure, count: bool) -> Failure:
        """``f``, a failure of a kind not seen before, recorded when ``count`` (a sweep's
        failure; the random search's are reported by hypothesis once shrunk)."""
        if count:
            self.add(f)
        return f

    def first(self, kind: str, count: bool, make: Callable[[], Failure]) -> Failure | None:
        """The failure ``make()`` of ``kind`` when the kind is new (recorded when
        ``count``), None when it was seen before (:meth:`seen`): ``make`` builds the
        failure's text only for a new kind."""
        if self.seen(kind, count):
            return None
        return self.keep(make(), count)

    def add(self, f: Failure) -> None:
        if f.kind in self.kinds:
            self.kinds[f.kind].count += f.count
        else:
            self.kinds[f.kind] = f

    def finish(self) -> ConformanceReport:
        if not self.kinds and not any(c[1] for c in self.counts.values()) \
                and not self.examples:
            raise ConformanceError(f"{self.title}: nothing was compared (an empty sweep "
                                   "and no random examples); this is not a pass")
        if self.kinds:
            raise self.error()
        return ConformanceReport(self.target, {k: v[1] for k, v in self.counts.items()},
                                 self.placed, self.examples, self.no_search)

    def error(self) -> ConformanceError:
        fs = list(self.kinds.values())
        n = len(fs)
        lines = [f"{self.title} disagrees with the oracle: {n} kind{'s' * (n != 1)} "
                 "of failure"]
        if self.counts:
            lines.append("  sweep: " + "; ".join(
                f"{name} {f} of {c} differ" for name, (f, c) in self.counts.items()))
        for i, f in enumerate(fs, 1):
            seen = f"{f.count} in the sweep" if f.count else "found by the random search"
            lines.append(f"[{i}] {f.kind}: {seen}; simplest ({f.phase}):")
            lines.append(f.text)
        first = fs[0]
        return ConformanceError("\n".join(lines), first.input, first.expected, first.got,
                                fs, {k: (v[0], v[1]) for k, v in self.counts.items()})


class NewKind(Exception):
    """Raised inside a hypothesis example that shows a kind not yet found."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.kind)
        self.failure = failure
