"""Validated attention inputs and options, shared by the reference and every schedule.

Layout (the PyTorch SDPA layout): ``q`` is (..., Hq, Sq, D), ``k`` is (..., Hkv, Sk, D),
``v`` is (..., Hkv, Sk, Dv), with the same leading (batch) dimensions. GQA/MQA: query
head ``h`` reads key/value head ``h // (Hq // Hkv)``; ``Hq % Hkv != 0`` is an error.

Inputs must hold finite float32 values (float16 and float32 arrays always do; a float64
or wider (``numpy.longdouble``) array is accepted when every value is a float32 value,
never rounded silently). Each of q, k and v may hold at most the elements
:func:`refimpl.validation.check_elements` allows (checked before any copy). Non-finite inputs are refused
with the index of the first one, rather than propagated silently.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import numpy as np
from numpy.typing import ArrayLike

from refimpl.attention.mask import ALIGNMENTS, MaskOptions, as_mask, mask_keywords
from refimpl.validation import check_elements, exact_astype, first_index

__all__ = ["Problem", "prepare", "ALIGNMENTS"]

#: window bounds at or above this are unbounded in effect (no index is this large);
#: capping there keeps ``a - w_left`` and ``a + w_right`` inside int64
_WINDOW_CAP = 2**62


@dataclass(frozen=True)
class Problem:
    """Attention inputs flattened to one batch axis, with validated options.

    q: (B, Hq, Sq, D) float32; k: (B, Hkv, Sk, D); v: (B, Hkv, Sk, Dv); ``batch_shape`` is
    the original leading shape (B is its product). ``offset[b]`` is the key index aligned
    with query row 0 of batch entry b (see :func:`prepare`).
    """

    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    batch_shape: tuple[int, ...]
    scale: float
    causal: bool
    alignment: str
    window: Optional[tuple[Optional[int], Optional[int]]]
    softcap: Optional[float]
    slopes: Optional[np.ndarray]  # (B, Hq) float64
    key_valid: Optional[np.ndarray]  # (B, Sk) bool
    query_valid: Optional[np.ndarray]  # (B, Sq) bool
    offset: np.ndarray  # (B,) int64

    @property
    def shape(self) -> tuple[int, int, int, int, int, int]:
        """(B, Hq, Hkv, Sq, Sk, D)."""
        b, hq, sq, d = self.q.shape
        return b, hq, self.k.shape[1], sq, self.k.shape[2], d

    @property
    def group(self) -> int:
        """Query heads per key/value head."""
        return self.q.shape[1] // self.k.shape[1]

    @property
    def has_mask(self) -> bool:
        """Whether any (row, key) pair can be masked (causal, window or padding)."""
        return bool(self.causal or self.window is not None or self.key_valid is not None
                    or self.query_valid is not None)

    def kv_for_q_heads(self) -> tuple[np.ndarray, np.ndarray]:
        """k and v repeated so that head h of the result is the KV head query head h reads."""
        g = self.group
        if g == 1:
            return self.k, self.v
        return np.repeat(self.k, g, axis=1), np.repeat(self.v, g, axis=1)

    def restore(self, x: np.ndarray) -> np.ndarray:
        """Give a (B, ...) result its original batch shape back."""
        return x.reshape(self.batch_shape + x.shape[1:])

    def visible(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """Which (row, key) pairs take part: bool (B, len(rows), len(cols)).

        Key j is visible from row i (with ``a = i + offset``) iff the key is valid, the
        row is valid, ``j <= a`` when causal, and ``a - w_left <= j <= a + w_right`` for a
        window (bounds inclusive, None = unbounded).
        """
        rows = np.asarray(rows, dtype=np.int64)
        cols = np.asarray(cols, dtype=np.int64)
        a = rows[None, :, None] + self.offset[:, None, None]
        j = cols[None, None, :]
        vis = np.ones((self.q.shape[0], rows.size, cols.size), dtype=bool)
        if self.causal:
            vis &= j <= a
        if self.window is not None:
            # a bound beyond any key distance is unbounded: capped so that int64
            # arithmetic never overflows (window=(2**70, 0) means (None, 0))
            left, right = (None if w is None else min(w, _WINDOW_CAP)
                           for w in self.window)
            if left is not None:
                vis &= j >= a - left
            if right is not None:
                vis &= j <= a + right
        if self.key_valid is not None:
            vis &= self.key_valid[:, None, cols]
        if self.query_valid is not None:
            vis &= self.query_valid[:, rows, None]
        return vis

    def alibi_bias(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """``-slope_h * |i + offset - j|`` as float64 (B, Hq, len(rows), len(cols)); exact
        for float32 slopes and distances below 2^29."""
        rows = np.asarray(rows, dtype=np.int64)
        cols = np.asarray(cols, dtype=np.int64)
        a = rows[None, :, None] + self.offset[:, None, None]
        dist = np.abs(a - cols[None, None, :]).astype(np.float64)
        return -self.slopes[:, :, None, None] * dist[:, None, :, :]


def _as_f32(x: ArrayLike, name: str, dtype: type = np.float32) -> np.ndarray:
    arr = np.asarray(x)
    check_elements(name, arr)  # before the scans and copies below
    if arr.dtype.kind != "f":
        raise ValueError(f"{name} must be a floating-point array, got dtype {arr.dtype}")
    bad = ~np.isfinite(arr)
    if bad.any():
        idx = first_index(bad)
        raise ValueError(f"{name} holds a non-finite value at index {idx}: {arr[idx]!r}")
    # float64 and wider (longdouble) inputs must hold values of the working dtype
    return exact_astype(arr, dtype, name)


def _padding_shape(m: np.ndarray, name: str, batch: tuple[int, ...],
                   length: int) -> np.ndarray:
    want = batch + (length,)
    if m.shape != want:
        raise ValueError(f"{name} must have shape {want} (batch + sequence), got {m.shape}")
    return m.reshape(math.prod(batch), length)


@mask_keywords
def prepare(
    q: ArrayLike,
    k: ArrayLike,
    v: ArrayLike,
    *,
    mask: Optional[MaskOptions] = None,
    input_dtype: type = np.float32,
) -> Problem:
    """Validate the inputs and the masking options of every attention function (same
    names, same meaning everywhere): ``mask``, a :class:`refimpl.attention.MaskOptions` or
    None, or its fields as keywords (:func:`refimpl.attention.mask.mask_keywords`).

    Alignment: with ``"bottom_right"`` row i is aligned with key ``i + Sk - Sq``; when
    padding masks are given, Sq and Sk are the numbers of valid queries and keys of each
    batch entry (right padding, as in flash-attention's variable-length kernels).
    ``"top_left"`` aligns row i with key i.

    ``input_dtype=np.float64`` (the float64 reference) keeps any finite float64 inputs;
    the default requires float32 values.

    Raises:
        TypeError: a wrong type (see :class:`refimpl.attention.MaskOptions`).
        ValueError: shapes, head counts, non-finite or non-float32 inputs, option values,
            slopes or padding masks whose shapes do not fit q, k and v.
    """
    return _problem(q, k, v, as_mask(mask), input_dtype)


def _problem(q: ArrayLike, k: ArrayLike, v: ArrayLike, mask: MaskOptions,
             input_dtype: type) -> Problem:
    q32 = _as_f32(q, "q", input_dtype)
    k32 = _as_f32(k, "k", input_dtype)
    v32 = _as_f32(v, "v", input_dtype)
    for name, arr in (("q", q32), ("k", k32), ("v", v32)):
        if arr.ndim < 3:
            raise ValueError(
                f"{name} must have shape (..., heads, seq, dim), got shape {arr.shape}"
            )
    batch = q32.shape[:-3]
    if k32.shape[:-3] != batch or v32.shape[:-3] != batch:
        raise ValueError(
            f"q, k, v must share their batch dimensions: q {q32.shape}, k {k32.shape}, "
            f"v {v32.shape}"
        )
    hq, sq, d = q32.shape[-3:]
    hkv, sk, dk = k32.shape[-3:]
    if dk != d:
        raise ValueError(f"k's last dimension ({dk}) must equal q's ({d})")
    if v32.shape[-3:-1] != (hkv, sk):
        raise ValueError(
            f"v must have shape (..., {hkv}, {sk}, Dv) like k, got {v32.shape}"
        )
    if hq == 0 or hkv == 0:
        raise ValueError(
            f"attention needs at least one query head and one key/value head, got "
            f"Hq = {hq} (q {q32.shape}) and Hkv = {hkv} (k {k32.shape})"
        )
    if hq % hkv != 0:
        raise ValueError(
            f"query heads ({hq}) must be a multiple of key/value heads ({hkv}) (GQA/MQA)"
        )
    if d == 0:
        raise ValueError("head dimension D must be at least 1")
    scale = 1.0 / math.sqrt(d) if mask.scale is None else mask.scale
    bsz = math.prod(batch)
    flat = lambda x: x.reshape((bsz,) + x.shape[-3:])  # noqa: E731
    slopes = None
    if mask.alibi_slopes is not None:
        s = mask.alibi_slopes
        if s.shape == (hq,):
            s = np.broadcast_to(s, (bsz, hq))
        elif s.shape == batch + (hq,):
            s = s.reshape(bsz, hq)
        else:
            raise ValueError(
                f"alibi_slopes must have shape ({hq},) or {batch + (hq,)}, got {s.shape}"
            )
        slopes = np.ascontiguousarray(s)
    kv = None if mask.key_padding_mask is None else _padding_shape(
        mask.key_padding_mask, "key_padding_mask", batch, sk)
    qv = None if mask.query_padding_mask is None else _padding_shape(
        mask.query_padding_mask, "query_padding_mask", batch, sq)
    if mask.causal_alignment == "top_left":
        offset = np.zeros(bsz, dtype=np.int64)
    else:
        n_k = np.full(bsz, sk, dtype=np.int64) if kv is None else kv.sum(axis=1)
        n_q = np.full(bsz, sq, dtype=np.int64) if qv is None else qv.sum(axis=1)
        offset = (n_k - n_q).astype(np.int64)
    return Problem(
        q=flat(q32), k=flat(k32), v=flat(v32), batch_shape=batch, scale=scale,
        causal=mask.causal, alignment=mask.causal_alignment, window=mask.window,
        softcap=mask.softcap, slopes=slopes, key_valid=kv, query_valid=qv, offset=offset,
    )
