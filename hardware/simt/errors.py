"""Errors raised by the SIMT interpreter: every one names where it happened."""
from __future__ import annotations

__all__ = [
    "PtxError",
    "PtxSyntaxError",
    "UnsupportedPtxError",
    "LaunchError",
    "MemoryAccessError",
    "DeadlockError",
    "StepLimitError",
    "ExecutionError",
    "DeviceAssertionError",
]


class PtxError(Exception):
    """Base class of every error of :mod:`hardware.simt`."""


class PtxSyntaxError(PtxError, ValueError):
    """The PTX text is malformed (message names the line and the statement)."""


class UnsupportedPtxError(PtxError, NotImplementedError):
    """A well-formed construct the interpreter does not implement (named, with its line).

    Raised by :func:`~hardware.simt.load_ptx`, before anything runs: the interpreter never
    executes a program it only partly understands.
    """


class LaunchError(PtxError, ValueError):
    """Bad launch arguments: unknown kernel, wrong argument count or type, bad grid."""


class ExecutionError(PtxError, RuntimeError):
    """A fault while running: names the kernel, block, thread, PTX line and instruction."""


class MemoryAccessError(ExecutionError):
    """Out-of-bounds, unallocated or misaligned memory access."""


class DeadlockError(ExecutionError):
    """Warps wait at a barrier that the rest of their block can never reach."""


class StepLimitError(ExecutionError):
    """The launch executed more warp instructions than ``max_steps``."""


class DeviceAssertionError(ExecutionError):
    """A device-side ``assert`` failed (``__assertfail``): names the kernel, block,
    thread, the asserted expression, file, line and function; ``stdout`` holds the
    ``printf`` output of the launch up to the failure."""

    stdout: str = ""
