"""Softmax, log-sum-exp and the online (streaming) softmax state.

Sources: Milakov & Gimelshein 2018, "Online normalizer calculation for softmax"
(arXiv 1805.02867), algorithm 3; FlashAttention (Dao et al. 2022) section 3.1.

Special values, first:
- A row whose entries are all ``-inf`` (fully masked), or an empty row, has softmax all
  zeros (never NaN) and log-sum-exp ``-inf``. ``e^(-inf - (-inf))`` is defined as 0.
- A row holding NaN gives NaN (softmax and log-sum-exp). A row holding ``+inf`` (and no
  NaN) has softmax NaN, as ``e^x / sum e^x = inf / inf`` of the definition does, and
  log-sum-exp ``+inf`` (``ln(inf)``), as the definition and other libraries give.

Arithmetic: inputs are converted to float64; ``exp`` and ``log`` are the deterministic
ones of :mod:`refimpl.elementary`; sums use :func:`refimpl.summation.fold_sum`. Results
are rounded once to float32 for float32 (or narrower) inputs and kept in float64 for
float64 inputs, so every result is the same bytes on every machine.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from refimpl import elementary
from refimpl.summation import fold_sum
from refimpl.validation import as_float_array, check_axis, check_positive_int

__all__ = [
    "SoftmaxState", "merge", "softmax", "logsumexp", "online_softmax", "online_state",
    "exp_diff", "exp_diff_f32",
]


def _out_dtype(x: np.ndarray) -> type:
    return np.float64 if x.dtype == np.float64 else np.float32


def _real(x: ArrayLike, name: str = "x") -> tuple[np.ndarray, type]:
    """``x`` as float64 (integers only when float64 holds them exactly) and the result
    dtype of its input dtype."""
    raw = np.asarray(x)
    return as_float_array(raw, name).astype(np.float64), _out_dtype(raw)


def exp_diff(a: ArrayLike, b: ArrayLike) -> np.ndarray:
    """``e^(a - b)`` in float64 with ``e^(-inf - (-inf)) := 0`` (never NaN).

    Used wherever a running maximum ``b >= a`` rescales a term: when both are ``-inf`` the
    term it scales is empty, and 0 is the neutral choice.
    """
    return elementary.exp(_diff(a, b))


def _diff(a: ArrayLike, b: ArrayLike) -> np.ndarray:
    """``fl64(a - b)``, with 0 subtracted where ``b = -inf``: b = -inf implies a = -inf
    (b is a maximum over a's values), so that gives e^(-inf) = 0, and only b (usually
    one value per row) needs the test."""
    a = _real(a, "a")[0]
    b = _real(b, "b")[0]
    b = np.where(np.isneginf(b), 0.0, b)
    with np.errstate(invalid="ignore"):
        return a - b


def exp_diff_f32(a: ArrayLike, b: ArrayLike, *, shift: int = 0) -> np.ndarray:
    """``RN32(2^shift e^(fl64(a - b)))`` with ``e^(-inf - (-inf)) := 0``, as
    :func:`exp_diff` but correctly rounded to float32 once
    (:func:`refimpl.elementary.exp_f32`)."""
    return elementary.exp_f32(_diff(a, b), shift=shift)


@dataclass(frozen=True)
class SoftmaxState:
    """The online-softmax state ``(m, d)``: running maximum and ``sum e^(x - m)``.

    ``m`` and ``d`` are float64 arrays of one shape. The identity is ``(-inf, 0)``.
    """

    m: np.ndarray
    d: np.ndarray

    @classmethod
    def identity(cls, shape: tuple[int, ...] = ()) -> "SoftmaxState":
        return cls(np.full(shape, -np.inf), np.zeros(shape))

    @classmethod
    def of(cls, x: ArrayLike, axis: int = -1) -> "SoftmaxState":
        """State of a whole chunk of values along ``axis`` (its max and scaled sum)."""
        x = _real(x)[0]
        if x.shape[axis] == 0:
            shape = np.delete(np.array(x.shape), axis % x.ndim)
            return cls.identity(tuple(int(s) for s in shape))
        m = np.max(x, axis=axis, keepdims=True)
        d = fold_sum(exp_diff(x, m), axis=axis)
        return cls(np.squeeze(m, axis=axis), d)

    def merge(self, other: "SoftmaxState") -> "SoftmaxState":
        """``(m_a, d_a) (+) (m_b, d_b) = (M, d_a e^(m_a - M) + d_b e^(m_b - M))``."""
        return merge(self, other)

    @property
    def lse(self) -> np.ndarray:
        """Natural log-sum-exp ``m + ln d``: ``-inf`` for the identity (``d = 0``),
        ``+inf`` when ``m = +inf`` (a ``+inf`` value, whose ``d`` is NaN from
        ``inf - inf``), NaN when a NaN was seen (``m`` or ``d`` NaN)."""
        with np.errstate(invalid="ignore"):
            out = self.m + elementary.log(self.d)
        # d = 0 only for the identity / all -inf; d is NaN for a NaN value (m is NaN
        # then, np.max propagates it) or for +inf (m = +inf and x - m = NaN)
        special = np.where(self.d == 0, -np.inf,
                           np.where(np.isposinf(self.m), np.inf, np.nan))
        return np.where(self.d > 0, out, special)


def merge(a: SoftmaxState, b: SoftmaxState) -> SoftmaxState:
    """Combine two online-softmax states.

    Exactly commutative (IEEE addition is); associative up to float64 rounding.
    """
    m = np.maximum(a.m, b.m)
    ta = a.d * exp_diff(a.m, m)
    tb = b.d * exp_diff(b.m, m)
    return SoftmaxState(m, ta + tb)


def softmax(x: ArrayLike, axis: int = -1) -> np.ndarray:
    """Safe softmax: ``e^(x - max x) / sum e^(x - max x)`` along ``axis``.

    Args:
        x: scores; ``-inf`` marks masked entries.
        axis: the axis normalised.
    Returns:
        float32 for float32 or narrower input, float64 for float64 input.
    """
    x64, dt = _real(x)
    axis = check_axis("axis", axis, x64.ndim)
    if x64.shape[axis] == 0:
        return x64.astype(dt)
    m = np.max(x64, axis=axis, keepdims=True)
    e = exp_diff(x64, m)
    d = fold_sum(e, axis=axis, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        y = np.where(d > 0, e / np.where(d > 0, d, 1.0), np.where(np.isnan(d), np.nan, 0.0))
    return y.astype(dt)


def logsumexp(x: ArrayLike, axis: int = -1) -> np.ndarray:
    """Natural ``log sum e^x`` along ``axis``; ``-inf`` for all-``-inf`` or empty rows.

    Base 2 (FlashInfer's convention) is ``logsumexp(x) / ln 2``.
    """
    x64, dt = _real(x)
    return SoftmaxState.of(x64, check_axis("axis", axis, x64.ndim)).lse.astype(dt)


def online_state(x: ArrayLike, axis: int = -1, block: int = 1) -> SoftmaxState:
    """One streaming pass over ``x`` along ``axis``, ``block`` elements at a time.

    With ``block=1`` this is the recurrence of Milakov & Gimelshein:
    ``m_j = max(m_{j-1}, x_j)``, ``d_j = d_{j-1} e^(m_{j-1} - m_j) + e^(x_j - m_j)``;
    larger blocks merge the state of each block into the running state.
    """
    block = check_positive_int("block", block)
    x = _real(x)[0]
    x = np.moveaxis(x, check_axis("axis", axis, x.ndim), -1)
    state = SoftmaxState.identity(x.shape[:-1])
    for start in range(0, x.shape[-1], block):
        state = merge(state, SoftmaxState.of(x[..., start:start + block], axis=-1))
    return state


def online_softmax(x: ArrayLike, axis: int = -1, block: int = 1) -> np.ndarray:
    """Softmax from :func:`online_state` (first pass) and one normalising pass.

    Returns the dtype rule of :func:`softmax`.
    """
    x64, dt = _real(x)
    axis = check_axis("axis", axis, x64.ndim)
    state = online_state(x64, axis=axis, block=block)
    m = np.expand_dims(state.m, axis)
    d = np.expand_dims(state.d, axis)
    e = exp_diff(x64, m)
    with np.errstate(invalid="ignore", divide="ignore"):
        y = np.where(d > 0, e / np.where(d > 0, d, 1.0), np.where(np.isnan(d), np.nan, 0.0))
    return y.astype(dt)
