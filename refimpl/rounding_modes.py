"""Rounding modes: one set of names for the format encoder, the matmul accumulation
models and the PTX interpreter.

The canonical names are the rounding-direction attributes of IEEE 754-2019 section 4.3
(roundTiesToEven, roundTiesToAway, roundTowardZero, roundTowardPositive,
roundTowardNegative) and stochastic rounding as the IEEE P3109 interim report defines
it. :class:`RoundingMode` is a ``str`` enum, so ``RoundingMode.TOWARD_ZERO`` and the
plain string ``"toward_zero"`` are interchangeable everywhere a ``rounding=`` argument
is taken; resolving either gives the plain string.

The PTX rounding modifiers map onto these names in :data:`PTX_MODIFIERS` (PTX ISA
section 9.7.3 "Floating-Point Instructions" and 9.7.9.21 ``cvt``: ``.rn``, ``.rna``,
``.rz``, ``.rm``, ``.rp``, and ``.rs`` for the stochastic conversions) and
:data:`PTX_INTEGER_MODIFIERS` (``.rni``, ``.rzi``, ``.rmi``, ``.rpi``: rounding to an
integral value). They are the interpreter's spelling, not accepted by ``rounding=``.

Older spellings (``"floor"``, ``"ceil"``, and ``"up"``, ties toward +Inf, which for the
unsigned E8M0 equals ``"nearest_away"``) still resolve for one release, with a
``DeprecationWarning`` (:mod:`refimpl.deprecation`).
"""
from __future__ import annotations

import enum
import warnings
from types import MappingProxyType
from typing import Any, Iterable, Mapping, Optional

from refimpl.deprecation import REMOVED_IN

__all__ = [
    "RoundingMode",
    "ROUNDING_MODES",
    "PTX_MODIFIERS",
    "PTX_INTEGER_MODIFIERS",
    "DEPRECATED_SPELLINGS",
    "rounding_mode",
]


class RoundingMode(str, enum.Enum):
    """A rounding mode; its value is the canonical name (IEEE 754-2019 section 4.3)."""

    NEAREST_EVEN = "nearest_even"        # roundTiesToEven
    NEAREST_AWAY = "nearest_away"        # roundTiesToAway
    TOWARD_ZERO = "toward_zero"          # roundTowardZero
    TOWARD_POSITIVE = "toward_positive"  # roundTowardPositive
    TOWARD_NEGATIVE = "toward_negative"  # roundTowardNegative
    STOCHASTIC = "stochastic"            # IEEE P3109 stochastic rounding

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


#: every canonical name, in the order above
ROUNDING_MODES: tuple[str, ...] = tuple(m.value for m in RoundingMode)

#: PTX rounding modifier -> mode (PTX ISA 9.7.3, 9.7.9.21)
PTX_MODIFIERS: Mapping[str, RoundingMode] = MappingProxyType({
    "rn": RoundingMode.NEAREST_EVEN,
    "rna": RoundingMode.NEAREST_AWAY,
    "rz": RoundingMode.TOWARD_ZERO,
    "rm": RoundingMode.TOWARD_NEGATIVE,
    "rp": RoundingMode.TOWARD_POSITIVE,
    "rs": RoundingMode.STOCHASTIC,
})

#: PTX integer rounding modifier (round to an integral value) -> mode
PTX_INTEGER_MODIFIERS: Mapping[str, RoundingMode] = MappingProxyType({
    "rni": RoundingMode.NEAREST_EVEN,
    "rzi": RoundingMode.TOWARD_ZERO,
    "rmi": RoundingMode.TOWARD_NEGATIVE,
    "rpi": RoundingMode.TOWARD_POSITIVE,
})

#: spellings kept for one release: old name -> mode. ``"up"`` (ties toward +Inf) is
#: ``"nearest_away"`` only for unsigned values; the format encoder refuses it for a
#: signed format.
DEPRECATED_SPELLINGS: Mapping[str, RoundingMode] = MappingProxyType({
    "floor": RoundingMode.TOWARD_NEGATIVE,
    "ceil": RoundingMode.TOWARD_POSITIVE,
    "up": RoundingMode.NEAREST_AWAY,
})


def rounding_mode(value: Any, name: str = "rounding", *,
                  allowed: Optional[Iterable[str]] = None) -> str:
    """The canonical name (a plain ``str``) of the rounding mode ``value``.

    Special values: none; case and surrounding spaces are ignored. A deprecated
    spelling (:data:`DEPRECATED_SPELLINGS`) resolves with a ``DeprecationWarning``.

    Args:
        value: a :class:`RoundingMode` or its name as a string.
        name: the argument's name in messages.
        allowed: the modes the caller offers (default: every mode).

    Returns:
        one of :data:`ROUNDING_MODES`.

    Raises:
        TypeError: ``value`` is not a string.
        ValueError: an unknown name, or a mode outside ``allowed``.
    """
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a rounding mode name (str), got {value!r}")
    offered = ROUNDING_MODES if allowed is None else tuple(str(m) for m in allowed)
    key = str(value).strip().lower()
    mode = DEPRECATED_SPELLINGS[key].value if key in DEPRECATED_SPELLINGS else key
    if mode not in offered:
        raise ValueError(f"unknown {name} {value!r}; expected one of {', '.join(offered)}")
    if mode != key:
        warnings.warn(f"{name}={value!r} is deprecated and will be removed in {REMOVED_IN}; "
                      f"use {name}={mode!r}", DeprecationWarning, stacklevel=3)
    return mode
