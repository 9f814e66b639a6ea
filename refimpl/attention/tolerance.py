"""The tolerance rule of flash-attention's own tests: a low-precision kernel may be at most
``factor`` (default 2) times as wrong as the same computation done naively in that
precision by plain framework code, both measured against a float32-or-better reference.

Reference: ``tests/test_flash_attn.py`` of flash-attention (``(out - out_ref).abs().max()
<= 2 * (out_pt - out_ref).abs().max() + atol``). The oracle supplies the exact reference
(:func:`refimpl.attention.attention`) and the naive one
(:func:`refimpl.attention.naive_attention`).
"""
from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from refimpl.validation import as_float64

__all__ = ["naive_error_bound", "within_naive_tolerance"]


def naive_error_bound(ref: ArrayLike, naive: ArrayLike, *, factor: float = 2.0,
                      atol: float = 0.0) -> float:
    """``factor * max|naive - ref| + atol``: the largest error the rule allows."""
    ref = as_float64(ref, "ref")
    naive = as_float64(naive, "naive")
    if ref.shape != naive.shape:
        raise ValueError(f"ref {ref.shape} and naive {naive.shape} must have one shape")
    err = float(np.max(np.abs(naive - ref))) if ref.size else 0.0
    return factor * err + atol


def within_naive_tolerance(out: ArrayLike, ref: ArrayLike, naive: ArrayLike, *,
                           factor: float = 2.0, atol: float = 0.0) -> bool:
    """True when ``max|out - ref| <= factor * max|naive - ref| + atol``."""
    out = as_float64(out, "out")
    ref = as_float64(ref, "ref")
    if out.shape != ref.shape:
        raise ValueError(f"out {out.shape} and ref {ref.shape} must have one shape")
    err = float(np.max(np.abs(out - ref))) if ref.size else 0.0
    return err <= naive_error_bound(ref, naive, factor=factor, atol=atol)
