"""Rounding float64 intermediates to the declared output format.

Every accumulation model of this package produces, for each output, a float64 value that
carries the information needed to round once to the output format:

- a value that is exact, or
- a value rounded to *odd* at float64 precision (Boldo and Melquiond, "Emulation of FMA
  and correctly rounded sums: proved algorithms using rounding to odd", IEEE TC 57(4),
  2008, Theorem 1): if the target precision p satisfies p + 2 <= 53, then
  RN_p(RO_53(x)) = RN_p(x). Every target here has at most 24 significand bits, so one
  float64 round-to-odd followed by one round-to-nearest-even to the target is a single,
  correct rounding of the exact x (:func:`refimpl.eft.add_round_to_odd`).

The conversion to FP32 uses NumPy's float64 -> float32 cast, which is IEEE 754-2019
``convertFormat`` with roundTiesToEven (subnormals and overflow to Inf included, and
independent of BLAS, libm and SIMD width: casting is exact integer work in the FPU).
Other formats go through :func:`refimpl.formats.round_to`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refimpl import eft
from refimpl.deprecation import deprecated_names
from refimpl.formats import get, round_to
from refimpl.rounding_modes import RoundingMode, rounding_mode

#: Rounding modes an accumulator may apply when storing into its format
#: (:mod:`refimpl.rounding_modes` names).
ROUNDINGS = (RoundingMode.NEAREST_EVEN.value, RoundingMode.TOWARD_ZERO.value)


@dataclass(frozen=True)
class Target:
    """The numeric grid of an output format, as the fast paths need it.

    Args:
        name: the canonical format name (``"fp32"``).
        precision: significand bits including the implicit bit (FP32: 24).
        emin: exponent of the smallest normal number (FP32: -126); below it the grid
            spacing stays 2^(emin - precision + 1) (subnormals).
    """

    name: str
    precision: int
    emin: int

    @property
    def is_fp32(self) -> bool:
        return self.name == "fp32"


FP32 = Target("fp32", 24, -126)


def target(out_format: object) -> Target:
    """The :class:`Target` of ``out_format`` (a name or a ``refimpl.formats.Format``).

    Raises:
        ValueError: an unknown format, or one wider than FP32 (the round-to-odd argument
            above needs precision <= 51, and values are returned as float32).
    """
    if isinstance(out_format, str) and out_format.strip().lower() in ("fp32", "float32"):
        return FP32

    fmt = get(out_format)
    if fmt.name == "fp32":
        return FP32
    if fmt.value_dtype != np.float32:
        raise ValueError(
            f"out_format {fmt.name!r} is wider than fp32; matmul returns values in float32 "
            "(supported: fp32 and every narrower registered format)"
        )
    return Target(fmt.name, fmt.man_bits + 1, fmt.emin)


def to_format(x: np.ndarray, tgt: Target, rounding: str = "nearest_even") -> np.ndarray:
    """Round float64 ``x`` once to ``tgt``; return float32 holding the rounded values.

    ``x`` must be exact or rounded to odd at float64 precision (module docstring).
    NaN stays NaN, +-Inf stays +-Inf (or follows the format's rule: E4M3 has no Inf),
    signed zeros keep their sign. ``rounding="toward_zero"`` truncates (IEEE
    roundTowardZero: overflow gives the largest finite value, never Inf).
    """
    rounding = rounding_mode(rounding, allowed=ROUNDINGS)
    x = np.asarray(x, dtype=np.float64)
    if tgt.is_fp32:
        with np.errstate(over="ignore"):
            y = x.astype(np.float32)
        if rounding == "toward_zero":
            # the RNE result is within one ulp; step back toward zero where it went past
            past = np.isfinite(x) & (np.abs(y.astype(np.float64)) > np.abs(x))
            y = np.where(past, np.nextafter(y, np.float32(0)), y)
        return y

    return np.asarray(round_to(x, get(tgt.name), rounding=rounding), dtype=np.float32)


__getattr__ = deprecated_names(__name__, {
    "add_round_to_odd": ("refimpl.eft.add_round_to_odd", eft.add_round_to_odd),
})
