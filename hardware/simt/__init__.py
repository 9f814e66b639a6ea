"""A SIMT warp interpreter for the PTX that ``nvcc -ptx`` emits.

Kernel authors compile CUDA C to PTX, run it here on small inputs and get the outputs bit
for bit, plus the divergence, coalescing and bank-conflict statistics that explain the
kernel's speed.

>>> import numpy as np
>>> from hardware.simt import load_ptx, GlobalMemory, gallery
>>> mod = load_ptx(gallery.source("vector_add"))
>>> mem = GlobalMemory()
>>> a = mem.to_device(np.arange(40, dtype=np.float32))
>>> b = mem.to_device(np.ones(40, dtype=np.float32))
>>> c = mem.alloc(40 * 4)
>>> st = mod.launch("vector_add", grid=2, block=32, args=[a, b, c, 40], memory=mem)
>>> mem.from_device(c, np.float32, 40)[:3]
array([1., 2., 3.], dtype=float32)
>>> st.global_load_requests, round(st.simd_efficiency, 3)
(4, 0.812)

Modules: :mod:`.parser` (PTX text), :mod:`.inline` (device-function calls, by
inlining), :mod:`.cfg` (reconvergence points), :mod:`.instructions` (the opcode table;
the compilers, one module per PTX ISA chapter, in :mod:`.isa`),
:mod:`.rounding` (exact IEEE arithmetic), :mod:`.lowprec` (packed FP8/FP6/FP4/UE8M0 cvt),
:mod:`.matrix` (mma, ldmatrix, wmma), :mod:`.wgmma` (warpgroup wgmma, sm_90a),
:mod:`.async_copy` (cp.async groups),
:mod:`.device_runtime` (device ``printf``, ``assert`` and ``trap``),
:mod:`.sanitizer` (memcheck, racecheck, initcheck, synccheck: ``launch(sanitize=...)``),
:mod:`.executor` (the wave: registers and memory spaces), :mod:`.scheduler` (SIMT
stack, warp scheduling, barriers), :mod:`.memory`
(:class:`GlobalMemory`), :mod:`.stats` (:class:`LaunchStats`), :mod:`.gallery`.
"""
from .errors import (
    DeadlockError,
    DeviceAssertionError,
    ExecutionError,
    HostMemoryError,
    LaunchBudgetError,
    LaunchError,
    MemoryAccessError,
    PtxError,
    PtxSyntaxError,
    PtxTypeError,
    RaceError,
    SanitizerError,
    StepLimitError,
    LivelockError,
    SyncError,
    UninitializedReadError,
    UnsupportedPtxError,
)
from .instructions import APPROX_ERROR, SUPPORTED_OPCODES
from .memory import GlobalMemory
from .module import (DEFAULT_GPU, DEFAULT_MAX_INSTRUCTIONS, DEFAULT_MAX_STEPS, Kernel, Module,
                     known_gpus, load_ptx)
from .sanitizer import TOOLS, Report, Sanitize, parse_sanitize
from .stats import LaunchStats

__all__ = [
    "load_ptx",
    "Module",
    "Kernel",
    "GlobalMemory",
    "LaunchStats",
    "SUPPORTED_OPCODES",
    "APPROX_ERROR",
    "DEFAULT_MAX_STEPS",
    "DEFAULT_MAX_INSTRUCTIONS",
    "DEFAULT_GPU",
    "known_gpus",
    "PtxError",
    "PtxSyntaxError",
    "PtxTypeError",
    "UnsupportedPtxError",
    "LaunchError",
    "ExecutionError",
    "MemoryAccessError",
    "DeadlockError",
    "StepLimitError",
    "LivelockError",
    "LaunchBudgetError",
    "DeviceAssertionError",
    "SanitizerError",
    "RaceError",
    "UninitializedReadError",
    "SyncError",
    "HostMemoryError",
    "TOOLS",
    "Sanitize",
    "Report",
    "parse_sanitize",
]
