"""The one registry of golden-vector cases.

Every capability the oracle covers contributes an *area* module here (``formats``,
``scaling``, ...), each exposing ``AREA``: the operations it can recompute and the case
specifications it generates. ``AREAS`` below is the explicit list of areas in this
version; the CLI, the generator, the verifier and the tests all read it, and nothing
keeps a second list.

An :class:`Operation` is a pure function ``compute(inputs, params) -> outputs`` of named
NumPy arrays and JSON parameters: everything it needs is recorded in the suite, which is
how ``verify`` recomputes every expected output. A :class:`CaseSpec` says how to build
one case's inputs from its random stream, which operation and parameters produce its
outputs, and the typed tolerance of each output.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from oracle.random_stream import CaseRandom
from oracle.suite import CASE_ID, valid_variant
from oracle.tolerance import Tolerance
from oracle.variants import known

#: areas of this version, in suite order (each is ``oracle.cases.<name>``)
AREAS: tuple[str, ...] = (
    "formats", "scaling", "matmul", "softmax", "attention", "kvcache", "hardware", "simt",
)

#: suite name -> the largest case level it includes (0 smoke, 1 default, 2 full)
SUITES: dict[str, int] = {"smoke": 0, "default": 1, "full": 2}


Arrays = Mapping[str, np.ndarray]
Compute = Callable[[Arrays, Mapping[str, Any]], dict[str, np.ndarray]]


@dataclass(frozen=True)
class Operation:
    """A recomputable operation: ``compute(inputs, params) -> outputs``."""

    name: str
    compute: Compute
    summary: str


@dataclass(frozen=True)
class CaseSpec:
    """How to build one golden case.

    Attributes:
        id: unique, file-name safe (lowercase letters, digits, ``._=+-``).
        operation: name of a registered :class:`Operation`.
        params: JSON-serialisable parameters passed to the operation.
        build: makes the input arrays from the case's random stream.
        tolerance: typed tolerance per checked output; outputs not listed are exact.
        formats: array name (input or output) -> format whose unsigned codes it holds.
        reference: outputs that are not results but data the tolerances read (naive
            low-precision result, interval bounds); implementations do not produce them.
        level: 0 smoke, 1 default, 2 full (a suite includes every level up to its own).
        variant: for an implementation-defined choice, ``{"choice": ..., "option": ...}``
            so a consumer can select the variant it implements; a tuple of such mappings
            (distinct choices) when the answer depends on several choices.
        text: (input, output) pair written as TestFloat-style hex lines with ``--text``.
        description: one line for people reading the manifest.
    """

    id: str
    operation: str
    params: Mapping[str, Any]
    build: Callable[[CaseRandom], dict[str, np.ndarray]]
    tolerance: Mapping[str, Tolerance] = field(default_factory=dict)
    formats: Mapping[str, str] = field(default_factory=dict)
    reference: tuple[str, ...] = ()
    level: int = 1
    variant: Mapping[str, str] | Sequence[Mapping[str, str]] | None = None
    text: tuple[str, str] | None = None
    description: str = ""

    def __post_init__(self) -> None:
        if not CASE_ID.match(self.id):
            raise ValueError(f"case id {self.id!r} is not file-name safe "
                             f"(pattern {CASE_ID.pattern})")
        if self.level not in SUITES.values():
            raise ValueError(f"case {self.id}: level must be one of {sorted(SUITES.values())}")
        if not valid_variant(self.variant if isinstance(self.variant, Mapping) or
                             self.variant is None else [dict(v) for v in self.variant]):
            raise ValueError(f"case {self.id}: variant needs exactly 'choice' and 'option' "
                             "(or a tuple of such mappings with distinct choices)")


@dataclass(frozen=True)
class Area:
    """One area's contribution: spec versions it implements, operations, cases."""

    name: str
    specs: Mapping[str, str]
    operations: Sequence[Operation]
    cases: Callable[[], list[CaseSpec]]


class Registry:
    """Areas gathered into lookup tables; ``REGISTRY`` is the one built from ``AREAS``."""

    def __init__(self, areas: Sequence[Area]) -> None:
        self.areas = tuple(areas)

    @cached_property
    def operations(self) -> dict[str, Operation]:
        ops: dict[str, Operation] = {}
        for area in self.areas:
            for op in area.operations:
                if op.name in ops:
                    raise ValueError(f"operation {op.name!r} registered twice")
                ops[op.name] = op
        return ops

    @cached_property
    def all_cases(self) -> tuple[CaseSpec, ...]:
        seen: set[str] = set()
        out = []
        for area in self.areas:
            for spec in area.cases():
                if spec.id in seen:
                    raise ValueError(f"case id {spec.id!r} registered twice")
                if spec.operation not in self.operations:
                    raise ValueError(f"case {spec.id}: unknown operation {spec.operation!r}")
                seen.add(spec.id)
                out.append(spec)
        return tuple(out)

    @property
    def spec_versions(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for area in self.areas:
            out.update(area.specs)
        return dict(sorted(out.items()))

    def variant_options(self) -> dict[str, tuple[str, ...]]:
        """Every implementation-defined choice marked by a case of any suite, with its
        options in registry order (what ``--variant CHOICE=OPTION`` accepts)."""
        return known(spec.variant for spec in self.all_cases)

    def cases(self, suite: str = "default") -> list[CaseSpec]:
        """The cases of a named suite, in registry order."""
        if suite not in SUITES:
            raise ValueError(f"unknown suite {suite!r}; known: {', '.join(SUITES)}")
        level = SUITES[suite]
        return [c for c in self.all_cases if c.level <= level]


def _load_areas() -> list[Area]:
    # An area is listed in AREAS only once its modules exist, so an import error here is
    # a real bug and must surface.
    return [importlib.import_module(f"oracle.cases.{name}").AREA for name in AREAS]


_REGISTRY: Registry | None = None


def registry() -> Registry:
    """The registry of this version (built on first use)."""
    global _REGISTRY
    if _REGISTRY is None:
        _REGISTRY = Registry(_load_areas())
    return _REGISTRY
