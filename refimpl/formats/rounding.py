"""Rounding modes, NaN policies and random bits: the named options of the encoder.

Modes (:mod:`refimpl.rounding_modes`: IEEE 754-2019 section 4.3; stochastic rounding as
defined by the IEEE P3109 interim report): ``"nearest_even"`` (default),
``"nearest_away"``, ``"toward_zero"``, ``"toward_positive"``, ``"toward_negative"``,
``"stochastic"``, or the same as :class:`~refimpl.rounding_modes.RoundingMode` members.
Ties are broken on the *code*: "even" means the candidate whose code is even. For every
format with a mantissa bit this is the usual even last mantissa bit; for E8M0 (no
mantissa) it is the even biased exponent field (2.0 is 0x80, 4.0 is 0x81), so 3.0 goes
to 2.0; ``"nearest_away"`` rounds E8M0 ties up (what ml_dtypes and the cuBLAS RCEIL rule
do: 3.0 -> 4.0). The older spellings ``"floor"``, ``"ceil"`` and, for unsigned formats,
``"up"`` (ties toward +Inf) resolve with a DeprecationWarning.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Tuple, Union

import numpy as np

from ..rounding_modes import ROUNDING_MODES, rounding_mode
from .types import Format

#: NaN-input policies accepted by ``encode(..., nan=...)``.
NAN_POLICIES = ("error", "nan", "zero", "signed_zero")

RandomBits = Union[None, np.ndarray, Tuple[Any, int]]


def index_of(flat_index: int, shape: Tuple[int, ...]) -> Tuple[int, ...]:
    """The multi-index of a C-order flat index, as plain ints (for error messages)."""
    return tuple(int(i) for i in np.unravel_index(int(flat_index), shape)) if shape else ()


def resolve_rounding(rounding: str, fmt: Format) -> str:
    """Canonical mode name (a plain ``str``) for ``rounding`` in ``fmt``.

    Raises:
        TypeError: ``rounding`` is not a string or :class:`RoundingMode`.
        ValueError: unknown mode, or the deprecated ``"up"`` for a signed format.
    """
    if isinstance(rounding, str) and rounding.strip().lower() == "up" and fmt.signed:
        raise ValueError(
            f"rounding={rounding!r} (ties toward +Inf) is offered for unsigned formats "
            f"such as e8m0 only; for {fmt.name!r} use 'nearest_away' or 'nearest_even'"
        )
    return rounding_mode(rounding)


@dataclass(frozen=True)
class NanPolicy:
    """What a NaN input becomes: ``error`` raises; otherwise the codes for NaNs with the
    sign bit clear and set."""

    error: bool
    positive: int = 0
    negative: int = 0


def resolve_nan(nan: Optional[Union[str, int]], fmt: Format) -> NanPolicy:
    """Resolve ``encode(..., nan=...)``.

    - ``None`` (default): the format's NaN code (sign kept where NaN is signed), or
      ``"error"`` when the format has no NaN (E2M1, E2M3, E3M2).
    - ``"error"``: any NaN input raises ``ValueError``.
    - ``"nan"``: the format's NaN code (an error for a format without NaN).
    - ``"zero"``: the +0 code for every NaN (what TransformerEngine emits for NaN -> FP4).
    - ``"signed_zero"``: the zero of the NaN's sign (+0 for a NaN with the sign bit
      clear, -0 with it set); +0 for both in a format without negative zero.
    - an int: that code for every NaN (ml_dtypes gives 0x8 for NaN -> E2M1, torchao 0x3).

    Raises:
        TypeError: ``nan`` is neither None, a policy name nor an int (a bool included).
        ValueError: unknown policy, ``"nan"`` for a format without NaN, an int code
            outside the format's width.
    """
    if nan is None:
        nan = "nan" if fmt.has_nan else "error"
    if isinstance(nan, (bool, np.bool_)) or not isinstance(nan, (str, int, np.integer)):
        raise TypeError(f"nan must be a policy name or an int code, got {nan!r}")
    if isinstance(nan, (int, np.integer)):
        code = int(nan)
        if not 0 <= code < (1 << fmt.bits):
            raise ValueError(
                f"nan={code:#x} is not a {fmt.bits}-bit code of format {fmt.name!r}"
            )
        return NanPolicy(False, code, code)
    if nan == "error":
        return NanPolicy(True)
    if nan == "nan":
        if not fmt.has_nan:
            raise ValueError(
                f"format {fmt.name!r} has no NaN; choose nan='error', 'zero', 'signed_zero' "
                "or an int code"
            )
        return NanPolicy(False, fmt.nan_code(False), fmt.nan_code(True))
    if nan == "zero":
        return NanPolicy(False, 0, 0)
    if nan == "signed_zero":
        return NanPolicy(False, 0, fmt.sign_mask if fmt.has_negative_zero else 0)
    raise ValueError(
        f"unknown nan policy {nan!r}; expected None, {', '.join(map(repr, NAN_POLICIES))} "
        "or an int code"
    )


def resolve_random_bits(
    random_bits: RandomBits, shape: Tuple[int, ...], mode: str
) -> Tuple[Optional[np.ndarray], int]:
    """Validate the random bits of stochastic rounding.

    ``random_bits`` is either an unsigned integer array broadcastable to ``x`` (N = the
    dtype's width: uint8 -> 8, uint16 -> 16, uint32 -> 32), or a tuple ``(array, N)``
    giving N explicitly (1 <= N <= 32; any non-negative integer array). Every value must
    be below 2^N. Element i rounds its magnitude away from zero exactly when
    ``floor(v_i * 2^N) + R_i >= 2^N`` (IEEE P3109), v_i being the fraction of the scaled
    significand that rounding drops, so the result is a pure function of (x, R, N).

    Returns:
        (flattened uint64 bits broadcast to ``shape`` or None, N)

    Raises:
        ValueError: bits given for a deterministic mode, missing for ``"stochastic"``,
            wrong dtype, not broadcastable, or values >= 2^N (names the first index).
    """
    if mode != "stochastic":
        if random_bits is not None:
            raise ValueError("random_bits is only used with rounding='stochastic'")
        return None, 0
    if random_bits is None:
        raise ValueError(
            "rounding='stochastic' needs random_bits: an unsigned integer array "
            "broadcastable to x, or a tuple (array, N)"
        )
    if isinstance(random_bits, tuple):
        if len(random_bits) != 2:
            raise ValueError("random_bits tuple must be (array, N)")
        bits_arr = np.asarray(random_bits[0])
        n = random_bits[1]
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 1 <= n <= 32:
            raise ValueError(f"random_bits N must be an int in [1, 32], got {n!r}")
        n = int(n)
        if bits_arr.dtype.kind not in "ui":
            raise ValueError(f"random_bits must be integers, got dtype {bits_arr.dtype}")
    else:
        bits_arr = np.asarray(random_bits)
        if bits_arr.dtype.kind != "u" or bits_arr.dtype.itemsize > 4:
            raise ValueError(
                "random_bits without an explicit N must be a uint8/uint16/uint32 array "
                f"(N = its width); got dtype {bits_arr.dtype}; pass (array, N) otherwise"
            )
        n = bits_arr.dtype.itemsize * 8
    try:
        b = np.broadcast_to(bits_arr, shape)
    except ValueError:
        raise ValueError(
            f"random_bits of shape {bits_arr.shape} does not broadcast to x's shape {shape}"
        ) from None
    if bits_arr.dtype.kind == "i" and bits_arr.size and bits_arr.min() < 0:
        bad = index_of(int(np.argmax(b < 0)), shape)
        raise ValueError(f"random_bits must be non-negative; first negative at index {bad}")
    flat = np.ascontiguousarray(b).reshape(-1).astype(np.uint64)
    if flat.size and int(flat.max()) >= (1 << n):
        first = int(np.argmax(flat >= (1 << n)))
        raise ValueError(
            f"random_bits value {int(flat[first])} at index "
            f"{index_of(first, shape)} does not fit in N={n} bits"
        )
    return flat, n
