"""Float64 matrix products on a helper thread, overlapped with elementwise work.

The attention schedules alternate BLAS products with long elementwise passes that NumPy
runs on one core. On a machine with two or more cores, :class:`ProductThread` runs the
products on a helper thread with BLAS limited to one thread (OpenBLAS, found among the
libraries the process has loaded), so that the products and the elementwise passes run
side by side instead of one after the other. Where the BLAS thread count cannot be set
(another BLAS, another platform) or there is one core, the products run on the calling
thread, as before.

While a :class:`ProductThread` is active, OpenBLAS runs every product of the process on
one thread (the count it had is restored when the last one ends); other threads of the
caller that use BLAS meanwhile run slower, never differently.

Nothing here changes a result: the products are exact float64 sums certified (or
resolved) afterwards (see :mod:`refimpl.matmul.exact`), so their bytes do not depend on
the BLAS kernel, its thread count or which thread calls it.
"""
from __future__ import annotations

import ctypes
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, Optional

import numpy  # noqa: F401  loads the BLAS that is looked for

__all__ = ["ProductThread", "product_thread_available"]

_GETTERS = ("scipy_openblas_get_num_threads64_", "scipy_openblas_get_num_threads",
            "openblas_get_num_threads64_", "openblas_get_num_threads")
_SETTERS = ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
            "openblas_set_num_threads64_", "openblas_set_num_threads")

_lock = threading.Lock()
_state = {"users": 0, "saved": None, "controls": None, "searched": False}
_executor: Optional[ThreadPoolExecutor] = None
_executor_pid = 0  # a forked child has no helper thread: it makes its own


def _find_controls() -> Optional[tuple[Callable[[], int], Callable[[int], None]]]:
    """(get, set) of the thread count of the OpenBLAS the process has loaded, or None."""
    paths = set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                fields = line.split()
                name = os.path.basename(fields[5]).lower() if len(fields) >= 6 else ""
                if "openblas" in name and ".so" in name:
                    paths.add(fields[5])
    except OSError:
        return None
    for path in sorted(paths):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        get = next((getattr(lib, n) for n in _GETTERS if hasattr(lib, n)), None)
        put = next((getattr(lib, n) for n in _SETTERS if hasattr(lib, n)), None)
        if get is not None and put is not None:
            get.restype = ctypes.c_int
            get.argtypes = []
            put.restype = None
            put.argtypes = [ctypes.c_int]
            return get, put
    return None


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def product_thread_available() -> bool:
    """Whether :class:`ProductThread` can overlap products here (two or more cores and
    an OpenBLAS whose thread count can be set)."""
    if _cores() < 2:
        return False
    with _lock:
        return _controls() is not None


def _controls():
    """The (get, set) pair, looked up once (the caller holds ``_lock``)."""
    if not _state["searched"]:
        _state["controls"] = _find_controls()
        _state["searched"] = True
    return _state["controls"]


class ProductThread:
    """Context manager: ``submit(fn)`` runs ``fn()`` (a BLAS product into arrays the
    caller owns) on the helper thread and returns a future; :meth:`wait` waits for it.
    With ``enabled=False``, or where BLAS cannot be limited to one thread or there is
    one core, ``submit`` runs ``fn`` at once (same results, no overlap)."""

    def __init__(self, enabled: bool = True) -> None:
        self.overlap = False
        self._enabled = enabled

    def __enter__(self) -> "ProductThread":
        global _executor, _executor_pid
        if not self._enabled or _cores() < 2:
            return self
        with _lock:
            controls = _controls()
            if controls is None:
                return self
            if _state["users"] == 0:
                _state["saved"] = controls[0]()
                controls[1](1)
            _state["users"] += 1
            if _executor is None or _executor_pid != os.getpid():
                _executor = ThreadPoolExecutor(1, thread_name_prefix="refimpl-blas")
                _executor_pid = os.getpid()
        self.overlap = True
        return self

    def __exit__(self, *exc: object) -> None:
        if not self.overlap:
            return
        with _lock:
            _state["users"] -= 1
            if _state["users"] == 0 and _state["saved"] is not None:
                _state["controls"][1](_state["saved"])
                _state["saved"] = None
        self.overlap = False

    def submit(self, fn: Callable[[], object]) -> Future:
        if self.overlap:
            return _executor.submit(fn)
        done: Future = Future()
        try:
            done.set_result(fn())
        except BaseException as exc:  # noqa: BLE001  re-raised by wait()
            done.set_exception(exc)
        return done

    @staticmethod
    def wait(future: Future) -> object:
        return future.result()
