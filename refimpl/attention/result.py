"""The result of an attention schedule: :class:`AttentionResult` (``out``, ``lse``,
``stats``), and of a backward pass: :class:`AttentionGradients` (``dq``, ``dk``, ``dv``,
``stats``).

Both are tuples of the parts the call asked for, in field order, so that the unpacking
each function documents works (``out, lse, stats = flash_v2(...)``,
``out, stats = flash_v1(...)``, ``out, lse = attention(..., return_lse=True)``), and
they name every field: a part the call did not produce reads as None and is not in the
tuple.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from refimpl.attention.stats import ScheduleStats

__all__ = ["AttentionResult", "AttentionGradients"]


class _PartsTuple(tuple):
    """A tuple of the parts that are not None, with every part named (``_fields``);
    immutable like a tuple."""

    _fields: tuple[str, ...] = ()

    def __new__(cls, *values: Any) -> "_PartsTuple":
        """``values``: one per field, in field order (None for a part not produced)."""
        if len(values) != len(cls._fields):
            raise TypeError(f"{cls.__name__} takes {len(cls._fields)} values "
                            f"{cls._fields}, got {len(values)}")
        self = super().__new__(cls, tuple(x for x in values if x is not None))
        self._values = values  # type: ignore[attr-defined]
        return self

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "_values" and "_values" not in self.__dict__:
            super().__setattr__(name, value)
            return
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __reduce__(self):  # pickle the fields, not the tuple view
        return (type(self), self._values)

    @property
    def present(self) -> tuple[str, ...]:
        """The names of the parts in the tuple, in order."""
        return tuple(n for n, x in zip(self._fields, self._values) if x is not None)

    def _asdict(self) -> dict[str, Any]:
        """Every field by name (None for a part not produced)."""
        return dict(zip(self._fields, self._values))

    def __repr__(self) -> str:
        def show(x: Any) -> str:
            if isinstance(x, np.ndarray):
                return f"<{x.dtype} array {x.shape}>"
            return repr(x)
        body = ", ".join(f"{n}={show(x)}" for n, x in zip(self._fields, self._values))
        return f"{type(self).__name__}({body})"


class AttentionResult(_PartsTuple):
    """``out`` (..., Hq, Sq, Dv) float32, ``lse`` (..., Hq, Sq) the natural LSE (None
    unless asked for), ``stats`` the :class:`ScheduleStats` (None for the reference,
    which has no schedule). As a tuple: ``(out, lse, stats)`` without the None parts.
    """

    _fields = ("out", "lse", "stats")

    def __new__(cls, out: np.ndarray, lse: Optional[np.ndarray] = None,
                stats: Optional[ScheduleStats] = None) -> "AttentionResult":
        if out is None:
            raise TypeError("AttentionResult needs out")
        return super().__new__(cls, out, lse, stats)  # type: ignore[return-value]

    @property
    def out(self) -> np.ndarray:
        return self._values[0]

    @property
    def lse(self) -> Optional[np.ndarray]:
        return self._values[1]

    @property
    def stats(self) -> Optional[ScheduleStats]:
        return self._values[2]


class AttentionGradients(_PartsTuple):
    """``dq``, ``dk``, ``dv`` shaped like q, k, v, and ``stats`` (None for the reference
    gradients). As a tuple: ``(dq, dk, dv, stats)`` without a None ``stats``."""

    _fields = ("dq", "dk", "dv", "stats")

    def __new__(cls, dq: np.ndarray, dk: np.ndarray, dv: np.ndarray,
                stats: Optional[ScheduleStats] = None) -> "AttentionGradients":
        if dq is None or dk is None or dv is None:
            raise TypeError("AttentionGradients needs dq, dk and dv")
        return super().__new__(cls, dq, dk, dv, stats)  # type: ignore[return-value]

    @property
    def dq(self) -> np.ndarray:
        return self._values[0]

    @property
    def dk(self) -> np.ndarray:
        return self._values[1]

    @property
    def dv(self) -> np.ndarray:
        return self._values[2]

    @property
    def stats(self) -> Optional[ScheduleStats]:
        return self._values[3]
