"""Quantisation error metrics: RMSE, maximum absolute error, SQNR in dB.

Defined so that the same inputs give the same numbers on every machine: errors are
formed in float64 (``x - q`` of two float32 arrays is exact there unless their magnitudes
span more than 2**29), squared in float64, summed with ``math.fsum`` (a correctly rounded
sum, independent of order and SIMD width), and the decibel figure uses a logarithm built
from IEEE basic operations only, not the platform's libm (it agrees with a correctly
rounded log10 to a few units in the last place).
"""
from __future__ import annotations

import itertools
import math
from typing import Any, NamedTuple

import numpy as np

from refimpl.deprecation import deprecated_names
from refimpl.validation import as_float64

__all__ = ["QuantizationMetrics", "quantization_error"]

_LN2 = 0.6931471805599453  # ln 2 rounded to float64
_LN10 = 2.302585092994046  # ln 10 rounded to float64


class QuantizationMetrics(NamedTuple):
    """Error of a quantised tensor ``q`` against its source ``x``.

    rmse: ``sqrt(mean((x - q)**2))``; max_abs: ``max |x - q|``; sqnr_db:
    ``10 log10(sum x**2 / sum (x - q)**2)`` (see ``quantization_error`` for the special
    cases).
    """

    rmse: float
    max_abs: float
    sqnr_db: float


def _ln(r: float) -> float:
    """Natural log of a positive finite float from basic operations only: ``r = m * 2**e``
    exactly (frexp), ``ln m = 2 atanh((m-1)/(m+1))`` by its series with m in [0.707, 1.414)."""
    m, e = math.frexp(r)
    if m < 0.7071067811865476:
        m *= 2.0
        e -= 1
    t = (m - 1.0) / (m + 1.0)
    t2 = t * t
    term = t
    total = 0.0
    k = 1
    while True:
        nxt = total + term / k
        if nxt == total:
            break
        total = nxt
        term *= t2
        k += 2
    return 2.0 * total + e * _LN2


def _log10(r: float) -> float:
    return _ln(r) / _LN10


def _exact_sum(a: np.ndarray, chunk: int = 1 << 16) -> float:
    """Correctly rounded sum of a float64 vector (``math.fsum``), streamed in chunks."""
    return math.fsum(
        itertools.chain.from_iterable(a[i : i + chunk].tolist() for i in range(0, a.size, chunk))
    )


def _values(q: Any) -> np.ndarray:
    if hasattr(q, "dequantize"):
        return np.asarray(q.dequantize())
    return np.asarray(q)


def quantization_error(x: Any, q: Any) -> QuantizationMetrics:
    """Error metrics of ``q`` (an array, or a quantised object with ``.dequantize()``)
    against the original ``x``.

    Special values: any NaN in ``x - q`` makes all three metrics NaN; an infinite error
    (and no NaN) gives ``rmse = max_abs = inf`` and ``sqnr_db = -inf``. When the error is
    zero everywhere ``sqnr_db`` is ``inf`` (even for an all-zero x).

    Raises:
        ValueError: shapes differ, or either operand is not real-valued.
    """
    xa = np.asarray(x)
    qa = _values(q)
    if xa.shape != qa.shape:
        raise ValueError(f"q: shape {qa.shape} does not match x's shape {xa.shape}")
    for name, a in (("x", xa), ("q", qa)):
        if a.dtype.kind not in "fiub":
            raise ValueError(f"{name}: expected a real numeric array, got dtype {a.dtype}")
    # integers only when float64 holds them exactly (bools are 0 and 1)
    x64 = as_float64(xa.astype(np.float64) if xa.dtype.kind == "b" else xa, "x").ravel()
    with np.errstate(invalid="ignore"):  # Inf - Inf: NaN, reported as documented below
        err = x64 - as_float64(qa.astype(np.float64) if qa.dtype.kind == "b" else qa,
                               "q").ravel()
    n = err.size
    if n == 0:
        raise ValueError("x: expected at least one element")
    if np.isnan(err).any():
        nan = float("nan")
        return QuantizationMetrics(nan, nan, nan)
    if np.isinf(err).any():
        inf = float("inf")
        return QuantizationMetrics(inf, inf, -inf)
    abs_err = np.abs(err)
    noise = _exact_sum(err * err)
    signal = _exact_sum(x64 * x64)
    rmse = math.sqrt(noise / n)
    if noise == 0.0:
        sqnr = float("inf")
    elif signal == 0.0:
        sqnr = float("-inf")
    elif math.isinf(signal):
        sqnr = float("inf")
    else:
        # difference of logs: the quotient itself could overflow or underflow
        sqnr = 10.0 * (_log10(signal) - _log10(noise))
    return QuantizationMetrics(float(rmse), float(abs_err.max()), float(sqnr))


__getattr__ = deprecated_names(
    __name__, {"QuantizationError": ("QuantizationMetrics", QuantizationMetrics)})
