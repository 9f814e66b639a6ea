"""The online-softmax update of one query tile against one key/value tile (FlashAttention-2
inner loop body), as a reusable step, and the final normalisation.

Every FlashAttention-2-style schedule here (``flash_v2``, ``split_kv``) and any schedule
built elsewhere on top of it (paged K/V, FA3) obtains identical bytes by calling
:func:`online_block_update` on the same score tiles in the same key order.

The step, for score tile ``s`` (float32, ``-inf`` where masked), value tile ``v`` and the
on-chip state ``(m, l, acc)`` (float32), each numbered line rounded once to float32
after evaluation in float64 (``e^(-inf - (-inf)) := 0``):

1. ``m_new = max(m, rowmax(s))`` (exact)
2. ``alpha = RN32(e^(fl64(m - m_new)))``
3. ``p = RN32(e^(fl64(s - m_new)))``
4. ``rowsum = fl32(fold_sum(p))`` (:func:`refimpl.summation.fold_sum` over the tile)
5. ``l_new = fl32(alpha * l + rowsum)``
6. ``acc_new = fl32(alpha * acc + matmul_f32(p, v))`` (the product correctly rounded)

where ``RN32(e^x)`` is the exponential correctly rounded to float32
(:func:`refimpl.elementary.exp_f32`): one answer, whatever computes it.

FlashAttention-2 (Dao 2023, Algorithm 1 lines 8-10): the rescale is
``diag(e^(m_old - m_new)) O`` (the published pseudo-code's ``^-1`` on this factor is a typo;
the code and the math do not have it); normalisation is delayed to :func:`finalize`:
``out = fl32(acc / l)`` and ``LSE = fl32(m + ln l)``; rows that saw no visible key
(``l = 0``) give ``out = 0`` and ``LSE = -inf``.

Non-finite scores (see :mod:`refimpl.attention.reference`): a ``-inf`` score weighs
nothing, like a masked key. A ``+inf`` score makes ``m = +inf`` and a NaN score makes
``m`` NaN (``np.maximum`` keeps both for the rest of the row); ``p`` of such a row is
NaN, so its probabilities are replaced by 0 in the product of step 6 (the product is
the only step that mixes rows: its error screen is per matrix), and :func:`finalize`
writes NaN output with LSE ``+inf`` (resp. NaN) for the row. Other rows are unaffected,
byte for byte.

A tile that the mask hides entirely leaves the state unchanged byte for byte (alpha = 1 or,
before any visible key, 0 with l = acc = 0; p = +0; ``acc + (+-0)`` keeps acc, which is
never -0 since it starts at +0), so skipping such a tile is the same as computing it: a
schedule only has to visit the same key tiles in the same order.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from refimpl import elementary
from refimpl.attention.products import matmul_f32
from refimpl.validation import as_float32

__all__ = ["OnlineState", "online_block_update", "online_step", "finalize", "final_lse",
           "nonfinite_rows", "product_operand"]


@dataclass(frozen=True)
class OnlineState:
    """On-chip state of a query tile: running max ``m`` (..., r), running sum ``l``
    (..., r) and unnormalised output ``acc`` (..., r, Dv), all float32."""

    m: np.ndarray
    l: np.ndarray
    acc: np.ndarray

    @classmethod
    def initial(cls, rows_shape: tuple[int, ...], dv: int) -> "OnlineState":
        """``m = -inf``, ``l = 0``, ``acc = 0``."""
        return cls(
            np.full(rows_shape, -np.inf, dtype=np.float32),
            np.zeros(rows_shape, dtype=np.float32),
            np.zeros(rows_shape + (dv,), dtype=np.float32),
        )

    def where(self, keep_new: np.ndarray, new: "OnlineState") -> "OnlineState":
        """Rows where ``keep_new`` (broadcast to (..., r)) take ``new``'s state."""
        k = np.broadcast_to(keep_new, self.m.shape)
        return OnlineState(
            np.where(k, new.m, self.m),
            np.where(k, new.l, self.l),
            np.where(k[..., None], new.acc, self.acc),
        )


def online_block_update(state: OnlineState, s: np.ndarray, v: np.ndarray) -> OnlineState:
    """One FlashAttention-2 inner step (see the module docstring for the exact operations).

    Args:
        state: the tile's current state.
        s: (..., r, c) float32 scores of the tile, ``-inf`` where masked.
        v: (..., c, Dv) float32 value tile.
    Returns:
        the updated state (a new object; ``state`` is not modified).
    """
    return online_step(state, s, lambda p, p64: matmul_f32(p, v))


def online_step(
    state: OnlineState,
    s: np.ndarray,
    product: Callable[[np.ndarray, np.ndarray], np.ndarray],
    *,
    out: Optional[OnlineState] = None,
) -> OnlineState:
    """:func:`online_block_update` with the product ``P V`` left to the caller:
    ``product(p, p64)`` gets the float32 probabilities and the same values in float64 and
    must return ``matmul_f32(p, v)`` (for a schedule that prepares ``v`` once, e.g. with
    :func:`refimpl.matmul.exact.exact_product_fp32`). Same bytes.

    ``out``: write the new state into these arrays (which may be ``state``'s own) and
    return ``out``; by default a new state is returned and ``state`` is left as it is.
    """
    s = as_float32(s, "s")  # float64 scores must be float32 values, never rounded here
    if s.shape[-1] == 0:
        if out is None:
            return state
        np.copyto(out.m, state.m)
        np.copyto(out.l, state.l)
        np.copyto(out.acc, state.acc)
        return out
    m_new = np.maximum(state.m, np.max(s, axis=-1))
    # alpha = RN32(e^(m - m_new)) and p = RN32(e^(s - m_new)), from the same float64
    # differences formed in place in one array (m as an extra key column, so that one
    # exp call serves both; m_new = -inf only where the whole row is -inf, and then
    # subtracting 0 gives e^(-inf) = 0)
    m64 = np.where(np.isneginf(m_new), 0.0, m_new.astype(np.float64))
    c = s.shape[-1]
    d = _with_extra_column(s)
    d[..., :c] = s  # exact; keeps the memory layout of s
    d[..., c] = state.m
    with np.errstate(invalid="ignore"):
        d -= m64[..., None]
    e = elementary.exp_f32(d)  # keeps the memory layout of d
    alpha = e[..., c]
    p = e[..., :c]
    p64 = p.astype(np.float64)
    rowsum = _fold_last(p64).astype(np.float32)
    l_new = (alpha.astype(np.float64) * state.l + rowsum).astype(np.float32)
    acc = state.acc.astype(np.float64)
    acc *= alpha.astype(np.float64)[..., None]
    acc += product(*_product_operands(m_new, p, p64))  # float32 product, exactly converted
    if out is None:
        return OnlineState(m_new, l_new, acc.astype(np.float32))
    np.copyto(out.m, m_new)
    np.copyto(out.l, l_new)
    np.copyto(out.acc, acc, casting="same_kind")  # rounded to float32 once, as astype
    return out


def nonfinite_rows(m: np.ndarray) -> np.ndarray:
    """Rows whose running maximum ``m`` is ``+inf`` or NaN: a ``+inf`` or NaN score was
    seen. Their result is fixed by :func:`finalize` (NaN output); ``-inf`` (no visible
    key yet) is an ordinary row."""
    return ~(m < np.inf)


def product_operand(p: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Probabilities ``p`` (..., r, c) for the product ``P V``, with the rows of
    :func:`nonfinite_rows` of their maximum ``m`` (..., r) set to 0 (``p`` itself when
    there are none). Those rows' probabilities are NaN (``inf - inf``), and the
    product's error screen (or accumulation model) is per matrix, not per row, so a NaN
    would reach the other rows' results; those rows' outputs are set to NaN afterwards
    anyway. Rows stay independent."""
    bad = nonfinite_rows(m)
    if not bad.any():
        return p
    return np.where(bad[..., None], p.dtype.type(0), p)


def _product_operands(m_new: np.ndarray, p: np.ndarray,
                      p64: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(p, p64)`` for the product ``P V``, each through :func:`product_operand`."""
    return product_operand(p, m_new), product_operand(p64, m_new)


def _with_extra_column(s: np.ndarray) -> np.ndarray:
    """An empty float64 array of the shape of ``s`` with one more column, laid out like
    ``s`` (key-major when ``s`` is key-major)."""
    shape = s.shape[:-1] + (s.shape[-1] + 1,)
    if s.ndim >= 2 and not s.flags.c_contiguous and np.swapaxes(s, -1, -2).flags.c_contiguous:
        return np.swapaxes(np.empty(shape[:-2] + (shape[-1], shape[-2])), -1, -2)
    return np.empty(shape)


def _fold_last(x: np.ndarray) -> np.ndarray:
    """:func:`refimpl.summation.fold_sum` over the last axis of float64 ``x``, the same
    additions in the same order (``y[i] + y[i + h]`` at each level; elementwise IEEE
    additions are commutative), written so that NumPy keeps the memory layout of ``x``
    (no copies to row-major for a key-major tile)."""
    y = x
    n = y.shape[-1]
    if n == 0:
        return np.zeros(y.shape[:-1])
    while n > 1:
        h = (n + 1) // 2
        if n - h == h:
            y = np.add(y[..., :h], y[..., h:n])
        else:  # odd: the middle element passes through
            z = y[..., :h].copy(order="K")
            z[..., :n - h] += y[..., h:n]
            y = z
        n = h
    return y[..., 0]


def finalize(state: OnlineState, *, lse_shift: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Delayed normalisation: ``(fl32(acc / l), fl32(m + ln l))``; rows with ``l = 0``
    give 0 and ``-inf``. Rows that saw a ``+inf`` score (``m = +inf``) give NaN output
    and LSE ``+inf``; rows that saw a NaN score (``m`` NaN) give NaN and NaN (the
    convention of :mod:`refimpl.attention.reference`).

    ``lse_shift``: the LSE is ``fl32(m + ln(l 2^-lse_shift))`` (for probabilities that
    were scaled by ``2^lse_shift``; the scaling is exact)."""
    pos = state.l > 0
    l64 = np.where(pos, state.l, 1.0).astype(np.float64)
    with np.errstate(invalid="ignore"):
        out = np.where(pos[..., None], state.acc / l64[..., None], 0.0).astype(np.float32)
    bad = nonfinite_rows(state.m)
    if bad.any():
        out[bad] = np.nan
    return out, final_lse(state.m, state.l, lse_shift=lse_shift)


def final_lse(m: np.ndarray, l: np.ndarray, *, lse_shift: int = 0) -> np.ndarray:
    """The natural LSE of rows with running maximum ``m`` and sum ``l`` (float32):
    ``fl32(m + ln(l 2^-lse_shift))`` (the log in float64, :func:`refimpl.elementary.log`);
    ``-inf`` where ``l = 0`` (no visible key); ``m`` itself (``+inf`` or NaN) for the
    rows of :func:`nonfinite_rows`."""
    pos = l > 0
    l64 = np.where(pos, l, 1.0).astype(np.float64)
    with np.errstate(invalid="ignore"):
        l_lse = np.ldexp(l64, -lse_shift) if lse_shift else l64
        lse = np.where(pos, m + elementary.log(l_lse), -np.inf).astype(np.float32)
    bad = nonfinite_rows(m)
    if bad.any():
        lse = np.where(bad, m, lse).astype(np.float32)  # +inf or NaN
    return lse
