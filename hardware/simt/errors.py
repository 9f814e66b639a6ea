"""Errors raised by the SIMT interpreter: every one names where it happened."""
from __future__ import annotations

__all__ = [
    "PtxError",
    "PtxSyntaxError",
    "PtxTypeError",
    "UnsupportedPtxError",
    "LaunchError",
    "MemoryAccessError",
    "SanitizerError",
    "RaceError",
    "UninitializedReadError",
    "SyncError",
    "HostMemoryError",
    "DeadlockError",
    "StepLimitError",
    "LivelockError",
    "LaunchBudgetError",
    "ExecutionError",
    "DeviceAssertionError",
]


class PtxError(Exception):
    """Base class of every error of :mod:`hardware.simt`."""


class PtxSyntaxError(PtxError, ValueError):
    """The PTX text is malformed (message names the line and the statement)."""


class PtxTypeError(PtxSyntaxError):
    """An instruction breaks a type rule of the PTX ISA (an operand of the wrong type or
    size, a type the instruction does not take, a missing required modifier, an
    immediate out of range): the message names the line, the statement and the rule
    (see :mod:`hardware.simt.ptx_rules`)."""


class UnsupportedPtxError(PtxError, NotImplementedError):
    """A well-formed construct the interpreter does not implement (named, with its line).

    Raised by :func:`~hardware.simt.load_ptx`, before anything runs: the interpreter never
    executes a program it only partly understands.
    """


class LaunchError(PtxError, ValueError):
    """Bad launch arguments: unknown kernel, wrong argument count or type, bad grid."""


class ExecutionError(PtxError, RuntimeError):
    """A fault while running: names the kernel, block, thread, PTX line and instruction."""


class SanitizerError(ExecutionError):
    """A hazard found by one of the sanitizer's tools (:mod:`hardware.simt.sanitizer`);
    ``report`` is the :class:`~hardware.simt.sanitizer.Report` (None for faults that
    have no tool, such as an address outside every allocation)."""

    report: object = None


class MemoryAccessError(SanitizerError):
    """memcheck: out-of-bounds, unallocated, freed or misaligned memory access."""


class RaceError(SanitizerError):
    """racecheck: two accesses of different threads, at least one a write, unordered."""


class UninitializedReadError(SanitizerError):
    """initcheck: a read of shared, local or device memory that was never written."""


class SyncError(SanitizerError):
    """synccheck: a barrier or warp collective reached by part of its threads, or with
    masks that disagree."""


class HostMemoryError(PtxError, ValueError, IndexError):
    """A host-side :class:`~hardware.simt.GlobalMemory` call on bytes outside every live
    allocation, a bad free, or an allocation over the limit (names the address and the
    allocations)."""


class DeadlockError(ExecutionError):
    """Warps wait at a barrier that the rest of their block can never reach."""


class StepLimitError(ExecutionError):
    """The launch executed more warp instructions than ``max_steps``."""


class LivelockError(StepLimitError):
    """No warp of a wave changed anything between two checkpoints of the progress
    detection (:mod:`hardware.simt.progress`): names the spinning warps and lines."""


class LaunchBudgetError(StepLimitError):
    """The launch as a whole exceeded ``max_instructions`` warp instructions or
    ``time_limit`` seconds (names the bound, how far the launch got and how to raise it)."""


class DeviceAssertionError(ExecutionError):
    """A device-side ``assert`` failed (``__assertfail``): names the kernel, block,
    thread, the asserted expression, file, line and function; ``stdout`` holds the
    ``printf`` output of the launch up to the failure."""

    stdout: str = ""
