"""The interpreter as a deterministic sanitizer: the four tools of compute-sanitizer.

``Module.launch(..., sanitize=...)`` chooses the tools (compute-sanitizer documentation,
"Memcheck Tool", "Racecheck Tool", "Initcheck Tool", "Synccheck Tool"):

- ``memcheck``: accesses outside their allocation (exact bounds of each ``alloc``, of
  each static ``.shared`` variable, of the dynamic shared region and of each ``.local``
  variable), to freed memory, and misaligned accesses;
- ``racecheck``: two accesses from different threads to the same bytes, at least one a
  write, not ordered by a barrier, an atomic or a fence-and-flag pattern; and a
  generic-proxy write of shared memory read by the async proxy (bulk and tensor
  stores, wgmma operands) without a ``fence.proxy.async`` between them
  (:mod:`hardware.simt.proxycheck`);
- ``initcheck``: reads of shared, local and device memory never written (device memory
  from :meth:`GlobalMemory.alloc` is unwritten until the host writes it, with
  ``to_device``/``write``/``memset``, or a kernel stores to it);
- ``synccheck``: barriers reached by part of a block or warp, mask mismatches.

The option (parsed by :func:`parse_sanitize`; a bad value is a LaunchError):

==========================================  ============================================
``None``, ``"default"``, ``True``           every tool; each hazard raises (the default:
                                            what is undefined on every GPU is an error)
``False``, ``"off"``, ``"none"``, ``()``    no tool
``"warn"``                                  every tool; hazards become
                                            ``LaunchStats.warnings``
a tool name or a set/tuple/list of them     those tools, raising
a mapping ``{tool: "error"|"warn"|"off"}``  the default, with those tools changed
a :class:`Sanitize`                         itself
==========================================  ============================================

Whatever the option, an access the interpreter cannot perform (an address outside
every allocation's backing, a misaligned address) is a MemoryAccessError, as a GPU
faults on it; memcheck decides about the accesses a GPU would perform silently (past
the exact end of an allocation into its 256-byte rounding, into a neighbouring shared
or local variable, into freed memory). Each hazard is a :class:`Report` naming the
access (or both accesses: thread, instruction, PTX line, address, allocation); it is
raised as the tool's error class (:data:`TOOL_ERRORS`) or appended, formatted, to
``LaunchStats.warnings`` (at most :data:`MAX_WARNINGS`, then one line saying how many
were left out).

How a tool hooks in. memcheck and initcheck are built into the wave
(:class:`hardware.simt.executor.Wave`: its ``_locate`` checks bounds, its ``load``,
``store``, ``atomic`` and ``shared_offsets`` keep the per-byte initialisation shadows).
Other tools are classes registered with :func:`register_tool`; a launch creates one
instance per enabled tool (``factory(session)``, the :class:`Session` of the launch)
and the wave and the scheduler call its methods, each a single call at the point:

- ``begin_wave(wave)``: a wave (a batch of blocks) is about to run;
- ``access(wave, kind, space, threads, offsets, width, inst)``: after the checks of one
  warp-level access, from ``Wave.load``/``store``/``atomic``/``shared_offsets``:
  ``kind`` "ld", "st" or "atom", ``space`` "global", "shared" or "local", ``threads``
  the thread slots of the wave (int64 array), ``offsets`` the byte offsets of each
  thread's access in the space's byte buffer (``memory.buffer``, ``wave.smem``,
  ``wave.lmem``), ``width`` bytes per thread (a tool whose class says ``wants_access =
  False`` is not called; ``wave.off_bounds``, when its first item is ``offsets``
  itself, gives their lowest and highest value; ``wave.off_shift``, when its first item is
  ``offsets``, is ``(offsets, previous, d)``: they are the offsets array ``previous``
  that the same instruction passed last time, plus ``d``);
- ``end_wave(wave)`` after the wave ran; ``end_launch()`` after the last wave.
Barrier and collective hooks are called by :mod:`hardware.simt.scheduler` and
:mod:`hardware.simt.isa.sync` on the tool objects in ``wave.tools`` (a dict from tool
name to instance). A tool reports through ``session.report(report)``; it describes a
thread's access with :meth:`hardware.simt.executor.Wave.access_record`.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from .errors import (
    LaunchError,
    MemoryAccessError,
    RaceError,
    SanitizerError,
    SyncError,
    UninitializedReadError,
)

__all__ = ["TOOLS", "ACTIONS", "TOOL_ERRORS", "MAX_WARNINGS", "Sanitize", "Access",
           "Report", "Session", "Regions", "parse_sanitize", "register_tool"]

#: the tools, in compute-sanitizer's order
TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")
#: what a tool does with a hazard
ACTIONS = ("error", "warn", "off")
#: the error each tool raises
TOOL_ERRORS: dict[str, type[SanitizerError]] = {
    "memcheck": MemoryAccessError,
    "racecheck": RaceError,
    "initcheck": UninitializedReadError,
    "synccheck": SyncError,
}
#: warnings kept per launch (later ones are counted, not kept)
MAX_WARNINGS = 100


@dataclass(frozen=True)
class Sanitize:
    """The tools of a launch: ``actions`` maps every tool to "error", "warn" or "off"."""

    actions: tuple[tuple[str, str], ...] = tuple((t, "error") for t in TOOLS)

    def action(self, tool: str) -> str:
        return dict(self.actions)[tool]

    def enabled(self, tool: str) -> bool:
        return self.action(tool) != "off"

    @property
    def tools(self) -> frozenset[str]:
        """The enabled tools."""
        return frozenset(t for t, a in self.actions if a != "off")

    def __str__(self) -> str:
        return ", ".join(f"{t}={a}" for t, a in self.actions)


DEFAULT = Sanitize()
OFF = Sanitize(tuple((t, "off") for t in TOOLS))
WARN = Sanitize(tuple((t, "warn") for t in TOOLS))
_NAMED = {"default": DEFAULT, "off": OFF, "none": OFF, "warn": WARN}


def _with(actions: Mapping[str, str]) -> Sanitize:
    return Sanitize(tuple((t, actions.get(t, "off")) for t in TOOLS))


def parse_sanitize(value: Any) -> Sanitize:
    """The :class:`Sanitize` a ``launch(sanitize=...)`` value means (table in the module
    docstring); LaunchError naming the value and what is accepted otherwise."""
    if value is None or value is True:
        return DEFAULT
    if value is False:
        return OFF
    if isinstance(value, Sanitize):
        return value
    if isinstance(value, str):
        if value in _NAMED:
            return _NAMED[value]
        if value in TOOLS:
            return _with({value: "error"})
        raise LaunchError(f"sanitize={value!r}: expected one of {sorted(_NAMED)}, a tool "
                          f"name {TOOLS}, a collection of tool names or a mapping "
                          f"{{tool: action}} with actions {ACTIONS}")
    if isinstance(value, Mapping):
        acts = dict(DEFAULT.actions)
        for t, a in value.items():
            if t not in TOOLS:
                raise LaunchError(f"sanitize: unknown tool {t!r}; the tools are {TOOLS}")
            if not isinstance(a, str) or a not in ACTIONS:
                raise LaunchError(f"sanitize[{t!r}] = {a!r}: expected one of {ACTIONS}")
            acts[t] = a
        return Sanitize(tuple((t, acts[t]) for t in TOOLS))
    if isinstance(value, (set, frozenset, tuple, list)):
        for t in value:
            if not isinstance(t, str) or t not in TOOLS:
                raise LaunchError(f"sanitize: unknown tool {t!r}; the tools are {TOOLS}")
        return _with({t: "error" for t in value})
    raise LaunchError(f"sanitize must be None, a bool, a string, a collection of tool "
                      f"names or a mapping {{tool: action}}, got {type(value).__name__}")


@dataclass(frozen=True)
class Access:
    """One thread's access, as a report names it."""

    kind: str                       # "read", "write" or "atomic"
    space: str                      # "global", "shared" or "local"
    block: tuple[int, int, int]
    thread: tuple[int, int, int]
    line: int
    text: str                       # the PTX instruction
    address: int                    # global: the address; shared/local: the .shared /
    #                                 .local address (offset in the block's / thread's)
    width: int = 0
    allocation: str = ""            # e.g. "allocation 'a' (#0, 128 bytes at 0x...) + 16"

    def __str__(self) -> str:
        if not self.space:  # an instruction that touches no memory (synccheck)
            return (f"{self.kind} by block {self.block} thread {self.thread}, line "
                    f"{self.line} ({self.text!r})")
        where = f", {self.allocation}" if self.allocation else ""
        w = f"{self.width}-byte " if self.width else ""
        return (f"{w}{self.kind} of {self.space} address {self.address:#x}{where} by block "
                f"{self.block} thread {self.thread}, line {self.line} ({self.text!r})")


@dataclass(frozen=True)
class Report:
    """A hazard: ``what`` happened (e.g. "write-after-read race", "out-of-bounds
    access"), at ``access``; ``other`` is the earlier access of a two-access hazard."""

    tool: str
    kernel: str
    what: str
    access: Access
    other: Access | None = None
    detail: str = ""

    def __str__(self) -> str:
        d = f" ({self.detail})" if self.detail else ""
        head = f"{self.tool}: kernel {self.kernel}: {self.what}{d}"
        if self.other is None:
            return f"{head}: {self.access}"
        return f"{head}:\n  first:  {self.other}\n  second: {self.access}"


#: tool name -> factory(session) of the tools that are not built into the wave
_FACTORIES: dict[str, Callable[["Session"], Any]] = {}


def register_tool(name: str, factory: Callable[["Session"], Any]) -> None:
    """Make ``factory(session)`` the implementation of tool ``name`` (one of TOOLS)."""
    if name not in TOOLS:
        raise ValueError(f"unknown tool {name!r}; the tools are {TOOLS}")
    _FACTORIES[name] = factory


@dataclass
class Session:
    """The sanitizer state of one launch: the options, the launch's statistics (for
    warnings) and the instances of the registered tools that are enabled."""

    options: Sanitize
    stats: Any = None
    memory: Any = None
    tools: dict[str, Any] = field(default_factory=dict)
    left_out: int = 0
    #: a session without the registered tools (a wave compiled outside a launch)
    bare: bool = False

    def __post_init__(self) -> None:
        if self.bare:
            return
        for name, factory in _FACTORIES.items():
            if self.options.enabled(name):
                self.tools[name] = factory(self)

    def enabled(self, tool: str) -> bool:
        return self.options.enabled(tool)

    def report(self, report: Report) -> None:
        """Raise ``report`` as its tool's error, or keep it as a warning."""
        action = self.options.action(report.tool)
        if action == "off":
            return
        if action == "error" or self.stats is None:
            err = TOOL_ERRORS[report.tool](str(report))
            err.report = report
            raise err
        self.warn(str(report))

    def warn(self, text: str) -> None:
        w = self.stats.warnings
        if len(w) < MAX_WARNINGS:
            w.append(text)
        else:
            self.left_out += 1

    def begin_wave(self, wave: Any) -> None:
        for t in self.tools.values():
            t.begin_wave(wave)

    def end_wave(self, wave: Any) -> None:
        for t in self.tools.values():
            t.end_wave(wave)

    def end_launch(self) -> None:
        for t in self.tools.values():
            t.end_launch()
        if self.left_out and self.stats is not None:
            self.stats.warnings.append(f"... {self.left_out} more sanitizer warnings")


class Regions:
    """The variables of a per-block (``.shared``) or per-thread (``.local``) space:
    sorted, non-overlapping ``[start, end)`` byte ranges with names, for memcheck's
    bounds and for naming an address in reports."""

    def __init__(self, space: str, regions: list[tuple[int, int, str]]) -> None:
        regions = sorted(r for r in regions if r[1] > r[0])
        self.space = space
        self.starts = np.asarray([r[0] for r in regions], dtype=np.int64)
        self.ends = np.asarray([r[1] for r in regions], dtype=np.int64)
        self.names = [r[2] for r in regions]
        self._starts = self.starts.tolist()
        self._ends = self.ends.tolist()

    def holds(self, lo: int, end: int) -> bool:
        """Whether one variable holds every byte of ``[lo, end)``."""
        k = bisect.bisect_right(self._starts, lo) - 1
        return k >= 0 and end <= self._ends[k]

    def holder(self, lo: int, end: int) -> tuple[int, int] | None:
        """The ``[start, end)`` of the variable that holds every byte of ``[lo, end)``,
        None when none does."""
        k = bisect.bisect_right(self._starts, lo) - 1
        return (self._starts[k], self._ends[k]) if k >= 0 and end <= self._ends[k] else None

    def first_outside(self, addr: np.ndarray, width: int, lo: int, hi: int) -> int | None:
        """Index of the first ``width``-byte access at ``addr`` that is not inside one
        variable (``lo``/``hi``: the least and greatest address), None when all are."""
        if self.holds(lo, hi + width):
            return None
        if not self._starts:
            return 0
        k = np.searchsorted(self.starts, addr, side="right") - 1
        ok = (k >= 0) & (addr + width <= self.ends[np.maximum(k, 0)])
        return None if ok.all() else int(np.argmin(ok))

    def label(self, k: int) -> str:
        return (f"{self.space} variable '{self.names[k]}' ({self._ends[k] - self._starts[k]} "
                f"bytes at {self._starts[k]:#x})")

    def describe(self, address: int) -> str:
        """The variable ``address`` is in (with the offset), or the nearest one."""
        if not self._starts:
            return f"no {self.space} variable is declared"
        k = bisect.bisect_right(self._starts, address) - 1
        if k >= 0 and address < self._ends[k]:
            return f"{self.label(k)} + {address - self._starts[k]}"
        after = address - self._ends[k] if k >= 0 else None
        before = self._starts[k + 1] - address if k + 1 < len(self._starts) else None
        if before is not None and (after is None or before < after):
            return f"{before} bytes before {self.label(k + 1)}"
        return f"{after} bytes past the end of {self.label(k)}"
