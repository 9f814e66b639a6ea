"""What a benchmark ran on: the BLAS kernel and thread counts, and the optional peer.

The peer (PyTorch and torchao) is imported only here, only when a bench asks, and only
if it is installed: it is never a dependency of the project. Nothing here changes a
result; it only says where the figures come from.
"""
from __future__ import annotations

import ctypes
import importlib
import logging
import os
import warnings
from types import ModuleType
from typing import Optional

import numpy as np

__all__ = ["blas_line", "import_peer", "peer_line"]

_PREFIXES = ("scipy_openblas_", "openblas_")
_SUFFIXES = ("64_", "")


def _openblas() -> Optional[ctypes.CDLL]:
    """The OpenBLAS library this process has loaded (NumPy's), or None."""
    try:
        with open("/proc/self/maps") as f:
            paths = sorted({fields[5] for fields in (line.split() for line in f)
                            if len(fields) >= 6 and "openblas" in
                            os.path.basename(fields[5]).lower() and ".so" in fields[5]})
    except OSError:
        return None
    for path in paths:
        try:
            return ctypes.CDLL(path)
        except OSError:
            continue
    return None


def _call(lib: ctypes.CDLL, name: str, restype):
    for prefix in _PREFIXES:
        for suffix in _SUFFIXES:
            fn = getattr(lib, f"{prefix}{name}{suffix}", None)
            if fn is not None:
                fn.restype = restype
                fn.argtypes = []
                return fn()
    return None


def blas_line() -> str:
    """One line: NumPy's BLAS (name, version), the kernel it dispatched to and its
    thread count, read from the loaded OpenBLAS; NumPy's build record otherwise."""
    name, version = "unknown BLAS", ""
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        name, version = blas.get("name", name), blas.get("version", "")
    except Exception:  # an older NumPy without the dict form: say what is known
        pass
    lib = _openblas()
    core = threads = None
    if lib is not None:
        core = _call(lib, "get_corename", ctypes.c_char_p)
        threads = _call(lib, "get_num_threads", ctypes.c_int)
    kernel = core.decode() if isinstance(core, bytes) else "kernel not reported"
    count = f"{threads} threads" if threads else "thread count not reported"
    return (f"NumPy {np.__version__}, BLAS {name} {version} ({kernel}, {count}); "
            f"NumPy's elementwise work runs on one thread")


def import_peer(*modules: str) -> Optional[dict]:
    """The peer's modules by name (``{"torch": ..., ...}``), or None when any is missing
    or fails to import; its import-time noise (warnings, logging) is silenced."""
    out: dict[str, ModuleType] = {}
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)  # torch re-configures its loggers while importing
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for name in modules:
                out[name] = importlib.import_module(name)
    except Exception:
        return None
    finally:
        logging.disable(previous)
    return out


def peer_line(peer: Optional[dict]) -> str:
    """One line naming the peer's versions and threads, or why it is absent."""
    if peer is None:
        return "peer: torch/torchao not importable (optional; install them in a venv to compare)"
    torch = peer["torch"]
    versions = ", ".join(f"{n} {getattr(m, '__version__', '?')}" for n, m in peer.items()
                         if "." not in n)
    return f"peer: {versions} on the CPU, {torch.get_num_threads()} intra-op threads"
