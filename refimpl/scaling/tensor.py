"""Per-tensor FP8 scaling (TransformerEngine's current and delayed scaling).

One float32 scale per tensor maps its amax onto the format's largest value:
``scale = (fmt.max / amax) / 2**margin`` (float32 arithmetic). Codes are
``encode(x * scale, fmt, saturate=True)`` (the product rounded to float32 first, as the
kernels do) and values decode as ``decode(code) * scale_inv`` with
``scale_inv = 1 / scale`` in float32 (TransformerEngine stores and applies ``scale_inv``).

Special amax values: 0, NaN or Inf give scale 1 (current scaling), or keep the previous
scale (delayed scaling); an amax so small that ``fmt.max / amax`` overflows gives FLT_MAX.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List

import numpy as np

from refimpl import formats
from refimpl.formats import Format
from refimpl.validation import as_float32, check_bool, check_int, check_positive_int

from .block_fp8 import _fp8
from .float32_input import float32_values

__all__ = ["tensor_scale", "FP8Tensor", "tensor_quantize", "DelayedScaling", "AMAX_ALGOS"]

_F32 = np.float32
_FLT_MAX = _F32(np.finfo(np.float32).max)
AMAX_ALGOS = ("max", "most_recent")


def _margin(margin: Any) -> int:
    return check_int("margin", margin, minimum=0)


def _f32_number(name: str, value: Any) -> Any:
    """A number (or array) as float32 without changing it: a float64 or wider value
    float32 cannot hold (0.1, 1e300, whose rounding would make it Inf, 1e-50, which
    would become 0) and an integer float32 cannot hold exactly (2**24 + 1) are refused,
    not rounded (refimpl.validation.as_float32)."""
    return _F32(as_float32(value, name, hint="amaxes and scales are float32 values: "
                           "round it with numpy.float32 first if that is meant"))


def _scale_or_none(amax: Any, f: Format, margin: int, power_of_two: bool) -> Any:
    a = _f32_number("amax", amax)
    if a < 0:
        raise ValueError(f"amax: expected a non-negative number, got {amax!r}")
    if a == 0 or not np.isfinite(a):
        return None
    with np.errstate(over="ignore"):
        s = _F32(f.max) / a
    # s / 2**margin rounded once to float32: formed exactly in float64 (margin <= 1000
    # keeps the product a normal float64), so margins of 128 and more, whose power of two
    # a float32 cannot hold, still give the right value instead of 0
    s = _F32(np.float64(s) * 2.0 ** -min(margin, 1000))
    s = min(s, _FLT_MAX)
    if s == 0:
        raise ValueError(
            f"margin: 2**-{margin} makes the scale for amax {float(a)!r} underflow to zero"
        )
    if power_of_two:
        # round down to a power of two from the exponent bits (never up: no overflow)
        _, e = np.frexp(s)
        s = _F32(np.ldexp(1.0, int(e) - 1))
    return _F32(s)


def tensor_scale(
    amax: Any, fmt: Any = "e4m3", margin: int = 0, *, power_of_two: bool = False
) -> np.float32:
    """The per-tensor scale ``(fmt.max / amax) / 2**margin`` in float32 (current scaling).

    Args:
        amax: the tensor's largest magnitude.
        fmt: ``"e4m3"`` (default) or ``"e5m2"``.
        margin: extra headroom in powers of two (default 0).
        power_of_two: round the scale down to a power of two (TransformerEngine's
            ``force_pow_2_scales``).

    Returns:
        float32 scale; 1 when amax is 0, NaN or Inf; FLT_MAX when the quotient overflows.

    Raises:
        ValueError: negative amax, bad fmt or margin, or a margin so large that the
            scale underflows to zero.
    """
    f = _fp8(fmt)
    power_of_two = check_bool("power_of_two", power_of_two)
    s = _scale_or_none(amax, f, _margin(margin), power_of_two)
    return _F32(1.0) if s is None else s


@dataclass(frozen=True, eq=False)
class FP8Tensor:
    """FP8 codes with one float32 scale (``value = decode(code) * (1 / scale)``)."""

    codes: np.ndarray
    scale: np.float32
    fmt: Format

    @property
    def scale_inv(self) -> np.float32:
        return _F32(_F32(1.0) / _F32(self.scale))

    def dequantize(self) -> np.ndarray:
        """``decode(code) * scale_inv`` in float32 (one rounding)."""
        return formats.decode(self.codes, self.fmt).astype(_F32) * self.scale_inv


def tensor_quantize(x: Any, scale: Any, fmt: Any = "e4m3") -> FP8Tensor:
    """``encode(float32(x * scale), fmt, saturate=True)`` with a per-tensor scale.

    ``x`` must hold float32 values (float16 is widened; float64 only when exact).

    Raises:
        ValueError: a scale that is not positive and finite, bad fmt or input.
    """
    f = _fp8(fmt)
    s = _f32_number("scale", scale)
    if not (np.isfinite(s) and s > 0):
        raise ValueError(f"scale: expected a positive finite number, got {scale!r}")
    arr = float32_values(x)
    with np.errstate(over="ignore", invalid="ignore"):
        y = arr * s
    return FP8Tensor(formats.encode(y, f, saturate=True), s, f)


def _amax_ignoring_nan(x: np.ndarray) -> np.float32:
    m = np.abs(float32_values(x))
    m = m[~np.isnan(m)]
    return _F32(m.max()) if m.size else _F32(0.0)


class DelayedScaling:
    """Delayed scaling: the scale for step t comes from the amaxes of earlier steps.

    Args:
        fmt: ``"e4m3"`` (default) or ``"e5m2"``.
        margin: headroom in powers of two (default 0).
        amax_history_len: how many past amaxes are kept (default 1024).
        amax_compute_algo: ``"max"`` (default: the largest in the window) or
            ``"most_recent"``.

    The scale starts at 1. ``update(amax)`` appends an amax to the window and recomputes
    the scale with ``tensor_scale``; when the reduced amax is 0, NaN or Inf the previous
    scale is kept (TransformerEngine's rule). A rejected ``update`` changes nothing.
    """

    def __init__(
        self,
        fmt: Any = "e4m3",
        *,
        margin: int = 0,
        amax_history_len: int = 1024,
        amax_compute_algo: str = "max",
    ) -> None:
        self.fmt = _fp8(fmt)
        self.margin = _margin(margin)
        n = check_positive_int("amax_history_len", amax_history_len)
        if amax_compute_algo not in AMAX_ALGOS:
            raise ValueError(f"amax_compute_algo: expected one of {', '.join(AMAX_ALGOS)}, "
                             f"got {amax_compute_algo!r}")
        self.amax_history_len = int(amax_history_len)
        self.amax_compute_algo = amax_compute_algo
        self._history: List[np.float32] = []
        self._scale = _F32(1.0)

    @property
    def scale(self) -> np.float32:
        return self._scale

    @property
    def amax_history(self) -> np.ndarray:
        """The window of observed amaxes, oldest first (float32)."""
        return np.array(self._history, dtype=_F32)

    def _reduce(self, history: List[np.float32]) -> np.float32:
        """The window's amax by ``amax_compute_algo`` (0 for an empty window)."""
        if not history:
            return _F32(0.0)
        if self.amax_compute_algo == "most_recent":
            return history[-1]
        return _F32(np.max(np.array(history, dtype=_F32)))

    def reduced_amax(self) -> np.float32:
        """The amax the current window reduces to (0 before any update)."""
        return self._reduce(self._history)

    def update(self, amax: Any) -> np.float32:
        """Record one amax and return the new scale."""
        a = _f32_number("amax", amax)
        if a < 0:
            raise ValueError(f"amax: expected a non-negative number, got {amax!r}")
        history = (self._history + [a])[-self.amax_history_len:]
        new = _scale_or_none(self._reduce(history), self.fmt, self.margin, False)
        self._history = history
        if new is not None:
            self._scale = new
        return self._scale

    def quantize(self, x: Any) -> FP8Tensor:
        """Quantise with the current scale, then record x's amax (NaN ignored)."""
        q = tensor_quantize(x, self._scale, self.fmt)
        self.update(_amax_ignoring_nan(np.asarray(x)))
        return q
