"""Encoding: rounding real numbers to the codes of a format, once, from the input's own
precision.

Special-value policy (OCP OFP8 rev 1.0 section 5, OCP MX v1.0 section 5.3, IEEE 754-2019
sections 4.3 and 7.4, PTX ``cvt`` ``.satfinite``):

- Overflow (a finite input whose rounded magnitude exceeds the largest finite value):
  ``saturate=True`` gives +-max. Otherwise a format with Inf gives +-Inf (E5M2: from
  61440 up); the "fn" and "fnuz" formats give NaN (E4M3: 464 ties down to 448, anything
  that rounds above gives 0x7F/0xFF); a format with neither Inf nor NaN saturates. In the
  directed modes that round toward zero for that sign (``toward_zero``;
  ``toward_negative`` for positives; ``toward_positive`` for negatives) overflow gives
  +-max, as IEEE 754 section 7.4 prescribes.
- +-Inf input: Inf where the format has it; else +-max when saturating or when the format
  has no NaN; else NaN.
- NaN input: see :func:`refimpl.formats.rounding.resolve_nan` (default: the format's
  NaN, sign kept where NaN is signed; a ValueError for formats without NaN).
- Zero: -0.0 and negatives that round to zero give the negative-zero code; FNUZ formats
  give 0x00. The unsigned E8M0 has no zero: zero and tiny values give its smallest code
  0x00 (2^-127) in every mode; a negative input gives its NaN 0xFF (an error for an
  unsigned user format without NaN).

Two implementations share one definition. :func:`encode_float64` works on the integer
bit pattern of float64 values for any format and mode. For the deterministic modes and
formats with few mantissa bits, :func:`encode` then uses a lookup table indexed by the
input's high bits plus one "sticky" bit (OR of the low bits), built by running
:func:`encode_float64` on one representative per entry: all inputs sharing an entry
provably round alike, because every rounding boundary lies above the sticky bit.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any, Optional, Tuple, Union

import numpy as np

from .registry import FormatLike, get
from .rounding import (
    NanPolicy,
    RandomBits,
    index_of,
    resolve_nan,
    resolve_random_bits,
    resolve_rounding,
)
from .types import Format
from ..validation import as_float_array, check_bool

__all__ = ["encode", "encode_float64", "as_float_array", "float32_lookup"]

#: Elements per chunk of the table path (a few uint32 temporaries).
CHUNK = 1 << 16
#: Elements per chunk of the bit-manipulation path: its int64 temporaries together stay
#: within L2 (larger chunks run several times slower).
BIT_CHUNK = 1 << 14

_MAG64_I = np.int64(0x7FFF_FFFF_FFFF_FFFF)
_MAN64_I = np.int64((1 << 52) - 1)


def _floor_log2(mag: np.ndarray, exp_field: np.ndarray) -> np.ndarray:
    """floor(log2 |x|) from the float64 bit pattern (int64 magnitude bits and exponent
    field); never a float log2, which can round up just below a power of two."""
    out = exp_field - 1023
    sub = exp_field == 0
    if np.any(sub):
        # subnormal: 2^-1074 * M; the float64 conversion of M is exact (M < 2^52)
        m = (mag[sub] & _MAN64_I).astype(np.float64)
        out[sub] = (m.view(np.int64) >> 52) - 1023 - 1074
    return out


def encode_float64(
    x: np.ndarray,
    fmt: Format,
    mode: str,
    saturate: bool,
    nan: NanPolicy,
    rbits: Optional[np.ndarray] = None,
    nbits: int = 0,
) -> np.ndarray:
    """Vectorised rounding of a 1-D float64 array to codes (int64), any format, any mode.

    ``mode`` must be canonical (``resolve_rounding``); NaN inputs give ``nan``'s codes
    (the caller checks the "error" policy first). With ``rbits`` (uint64, same length)
    and ``nbits`` = N the stochastic rule of IEEE P3109 applies.

    The arithmetic: ``|x| = sig * 2^e_in`` exactly (sig < 2^53). The target quantum at
    |x| is ``2^(max(floor(log2|x|), emin) - man_bits)``; it is never finer than the
    input's (``Format`` guarantees ``emin - man_bits >= -1074`` and ``man_bits <= 52``),
    so rounding drops ``s >= 0`` low bits of ``sig``: the kept part, plus a remainder
    compared with half a quantum. Adding the kept part to the code of the quantum's
    binade gives the magnitude code directly, a carry into the next binade included.
    """
    m = fmt.man_bits
    b = x.view(np.int64)
    neg = b < 0
    mag = b & _MAG64_I
    e_field = mag >> 52
    sig = mag & _MAN64_I
    sig |= np.minimum(e_field, 1) << 52  # the hidden bit of normal inputs
    e_in = np.maximum(e_field, 1)
    e_in -= 1075
    if fmt.emin - 1 >= -1022:
        # every float64 subnormal lies below the format's normal range anyway
        lg = e_field - 1023
    else:
        lg = _floor_log2(mag, e_field)
    le = np.maximum(lg, fmt.emin)
    s_true = le - m
    s_true -= e_in  # low bits of sig below the target quantum, >= 0
    s = np.minimum(s_true, 62)  # sig < 2^53: dropping 54..62 bits acts alike
    kept = sig >> s
    rem = sig - (kept << s)
    code = le - fmt.emin
    code <<= m
    code += kept
    if not fmt.subnormals:
        code -= 1 << m
    if mode in ("nearest_even", "nearest_away"):
        twice = rem << 1
        unit = np.left_shift(1, s)
        if mode == "nearest_even":
            inc = (twice > unit) | ((twice == unit) & ((code & 1) == 1))
        else:
            inc = twice >= unit
    elif mode == "toward_zero":
        inc = None
    elif mode == "toward_positive":
        inc = (rem != 0) & ~neg
    elif mode == "toward_negative":
        inc = (rem != 0) & neg
    elif mode == "stochastic":
        assert rbits is not None
        t = s_true - nbits
        if t.min() >= 0:  # the usual case: more dropped bits than random bits
            frac_n = rem >> np.minimum(t, 62)  # floor(v * 2^N)
        else:
            frac_n = np.where(t >= 0, rem >> np.clip(t, 0, 62), rem << np.clip(-t, 0, 62))
        inc = (frac_n + rbits.astype(np.int64)) >= (1 << nbits)
    else:  # pragma: no cover - resolve_rounding guards this
        raise ValueError(f"unknown rounding mode {mode!r}")
    if inc is not None:
        code += inc
    if not fmt.subnormals:
        np.maximum(code, 0, out=code)  # no zero: the smallest code absorbs underflow

    max_mag = fmt.max_code_magnitude
    overflow = code > max_mag
    any_overflow = bool(overflow.any())
    if any_overflow:
        code[overflow] = max_mag  # finite overflow saturates here; see below
    if fmt.signed:
        code |= (b >> 63) & fmt.sign_mask  # arithmetic shift: all ones when negative
        if fmt.nan == "fnuz":
            code[code == fmt.sign_mask] = 0  # no negative zero
    if any_overflow and not (saturate or fmt.nan == "none"):
        big_pos = fmt.inf_code(False) if fmt.has_inf else fmt.nan_code(False)
        big_neg = fmt.inf_code(True) if fmt.has_inf else fmt.nan_code(True)
        # IEEE 754 section 7.4: modes rounding toward zero for that sign give max
        if mode not in ("toward_zero", "toward_negative"):
            code[overflow & ~neg] = big_pos
        if fmt.signed and mode not in ("toward_zero", "toward_positive"):
            code[overflow & neg] = big_neg
    special = e_field == 2047
    if special.any():
        is_nan = special & (sig != (1 << 52))
        is_inf = special & ~is_nan
        if saturate or fmt.nan == "none":
            inf_pos, inf_neg = max_mag, fmt.sign_mask | max_mag
        elif fmt.has_inf:
            inf_pos, inf_neg = fmt.inf_code(False), fmt.inf_code(True)
        else:
            inf_pos, inf_neg = fmt.nan_code(False), fmt.nan_code(True)
        code[is_inf & ~neg] = inf_pos
        code[is_inf & neg] = inf_neg if fmt.signed else inf_pos
        code[is_nan & ~neg] = nan.positive
        code[is_nan & neg] = nan.negative
    if not fmt.signed and fmt.has_nan:
        # unsigned: a negative non-zero input (-Inf included) has no value but NaN
        neg_nonzero = neg & (mag != 0) & ~(special & (sig != (1 << 52)))
        if neg_nonzero.any():
            code[neg_nonzero] = fmt.nan_code(False)
    return code


# ----------------------------------------------------------------------------------
# lookup-table path


def _table_shape(fmt: Format, in_dtype: np.dtype) -> Optional[Tuple[int, int]]:
    """(k, index bits) of the table path for ``in_dtype`` input, or None when a table
    would be too large or not exact.

    Index = (bits >> k) | sticky(bits & (2^k - 1)); bit 0 of the index merges input bit k
    into the sticky bit, which is exact when every rounding boundary of the target lies
    at input bit k+1 or above: for normal inputs the round bit sits at or above
    ``p - man_bits - 1`` = k + 1; for subnormal inputs at the target's fixed subnormal
    quantum, which must then be either no coarser than the input's or coarse enough.
    """
    p, total, bias_in = (23, 32, 127) if in_dtype == np.float32 else (52, 64, 1023)
    k = p - fmt.man_bits - 2
    if k < 1:
        return None
    nbits = total - k
    if nbits > 18:
        return None
    s_sub = (fmt.emin - fmt.man_bits) - (1 - bias_in - p)  # dropped bits of input subnormals
    if 0 < s_sub < k + 2:
        return None
    return k, nbits


@lru_cache(maxsize=64)
def _table(
    fmt: Format, mode: str, saturate: bool, nan: NanPolicy, in_dtype_char: str
) -> Tuple[np.ndarray, int, int]:
    in_dtype = np.dtype(in_dtype_char)
    shape = _table_shape(fmt, in_dtype)
    assert shape is not None
    k, nbits = shape
    uint = np.uint32 if in_dtype == np.float32 else np.uint64
    reps = (np.arange(1 << nbits, dtype=np.uint64) << np.uint64(k)).astype(uint)
    with np.errstate(invalid="ignore"):  # signalling-NaN patterns widen quietly
        vals = reps.view(in_dtype).astype(np.float64)
    sentinel = 1 << fmt.bits
    policy = NanPolicy(False, sentinel, sentinel) if nan.error else nan
    codes = encode_float64(vals, fmt, mode, saturate, policy)
    fits = not nan.error or sentinel <= np.iinfo(fmt.code_dtype).max
    dtype = fmt.code_dtype if fits else np.uint32
    table = codes.astype(dtype)
    table.setflags(write=False)
    return table, k, sentinel


def float32_lookup(
    fmt: FormatLike, rounding: str = "nearest_even", *, saturate: bool = False,
    nan: Optional[Union[str, int]] = None,
) -> Tuple[np.ndarray, int]:
    """``(table, k)`` of the table path for float32 input, for callers that form the
    index themselves: the code of a float32 with bit pattern ``b`` is
    ``table[(b >> k) | sticky]``, ``sticky`` = 1 when any of the ``k`` low bits is set
    (what :func:`encode` computes; the same special-value policy). Under ``nan="error"``
    (the default for formats without NaN) NaN entries hold ``2**fmt.bits``.

    Raises:
        ValueError: a mode or format without a float32 table (stochastic rounding,
            formats with more than 19 mantissa bits or an inexact subnormal range).
    """
    f = get(fmt)
    mode = resolve_rounding(rounding, f)
    policy = resolve_nan(nan, f)
    shape = _table_shape(f, np.dtype(np.float32)) if mode != "stochastic" else None
    if shape is None:
        raise ValueError(f"format {f.name!r} with rounding={mode!r} has no float32 table")
    table, k, _ = _table(f, mode, check_bool("saturate", saturate), policy, "f")
    return table, k

def _nan_error(fmt: Format, flat_index: int, shape: Tuple[int, ...]) -> ValueError:
    return ValueError(
        f"NaN input at index {index_of(flat_index, shape)} cannot be encoded in format "
        f"{fmt.name!r}, which has no NaN (pass nan='zero', 'signed_zero' or an int code "
        "to choose one)"
    )


def encode(
    x: Any, fmt: FormatLike,
    *,
    rounding: str = "nearest_even", saturate: bool = False,
    nan: Optional[Union[str, int]] = None, random_bits: RandomBits = None,
) -> np.ndarray:
    """Round ``x`` once, from its own precision, to codes of ``fmt``.

    Special values first (details in this module's docstring): overflow gives Inf, NaN
    or +-max by format and ``saturate``; NaN input follows ``nan``; -0.0 keeps its sign
    except in FNUZ formats; E8M0 has no zero (smallest code 0x00).

    Args:
        x: float16, float32 or float64 array (or scalar/list; integers exactly
            representable in float64 are accepted). Never pre-rounded to float32.
        fmt: a Format or its name.
        rounding: ``"nearest_even"`` (default), ``"nearest_away"`` (E8M0: ties up),
            ``"toward_zero"``, ``"toward_positive"``, ``"toward_negative"``,
            ``"stochastic"``, or a :class:`refimpl.rounding_modes.RoundingMode`; the
            older ``"ceil"``, ``"floor"`` and ``"up"`` (E8M0) are deprecated.
        saturate: clamp overflow and +-Inf to +-max finite (OCP SATFINITE).
        nan: NaN-input policy: None (default: the format's NaN, or an error when it has
            none), ``"error"``, ``"nan"``, ``"zero"`` (+0 for every NaN),
            ``"signed_zero"`` (the zero of the NaN's sign) or an int code.
        random_bits: stochastic rounding only: an unsigned integer array broadcastable to
            ``x`` (N = its dtype width) or a tuple ``(array, N)``; element i rounds away
            from zero when ``floor(v_i * 2^N) + R_i >= 2^N`` (IEEE P3109).

    Returns:
        Unsigned codes (uint8 for <= 8 bits, uint16 for <= 16, uint32 above), shape of x.

    Raises:
        TypeError: ``saturate`` not a bool.
        ValueError: a bad option, an integer float64 cannot hold exactly, NaN input
            under the "error" policy or a negative input to an unsigned format without
            NaN (the message names the first index).
    """
    f = get(fmt)
    mode = resolve_rounding(rounding, f)
    policy = resolve_nan(nan, f)
    saturate = check_bool("saturate", saturate)
    arr = as_float_array(x)
    shape = arr.shape
    rbits, nbits = resolve_random_bits(random_bits, shape, mode)
    if arr.dtype == np.float16:
        with np.errstate(invalid="ignore"):
            arr = arr.astype(np.float32)  # exact
    flat = np.ascontiguousarray(arr).reshape(-1)
    out = np.empty(flat.size, dtype=f.code_dtype)
    if flat.size == 0:
        return out.reshape(shape)

    if not f.signed and not f.has_nan:
        bad = (flat < 0) | (np.signbit(flat) & np.isinf(flat))
        if bad.any():
            first = int(np.argmax(bad))
            raise ValueError(
                f"negative input at index {index_of(first, shape)} cannot be "
                f"encoded in the unsigned format {f.name!r}, which has no NaN"
            )
    if (mode == "nearest_even" and not saturate and not policy.error
            and flat.dtype == np.float32 and f.is_binary32_top_half):
        _encode_bf16_rne(flat, policy, out)
        return out.reshape(shape)
    tshape = _table_shape(f, flat.dtype) if mode != "stochastic" else None
    if tshape is not None:
        _encode_by_table(flat, f, mode, bool(saturate), policy, out, shape)
        return out.reshape(shape)
    if policy.error and np.isnan(flat).any():
        raise _nan_error(f, int(np.argmax(np.isnan(flat))), shape)
    for start in range(0, flat.size, BIT_CHUNK):
        stop = min(start + BIT_CHUNK, flat.size)
        with np.errstate(invalid="ignore"):
            piece = flat[start:stop].astype(np.float64, copy=False)
        rb = rbits[start:stop] if rbits is not None else None
        out[start:stop] = encode_float64(piece, f, mode, bool(saturate), policy, rb, nbits)
    return out.reshape(shape)


def _encode_bf16_rne(flat: np.ndarray, policy: NanPolicy, out: np.ndarray) -> None:
    """bfloat16 codes of float32 ``flat`` rounded to nearest even, into ``out``: the top
    half of ``bits + 0x7FFF + bit16`` (the carry of a round-up moves into the exponent,
    so the largest finite values round to Inf and subnormals stay on their grid, as on
    the binary32 encoding itself), NaNs then given ``policy``'s codes by sign. The bytes
    of the table path, in fewer passes."""
    bits = flat.view(np.uint32)
    n = flat.size
    t = np.empty(min(CHUNK, n), dtype=np.uint32)
    half, one, s16 = np.uint32(0x7FFF), np.uint32(1), np.uint32(16)
    for start in range(0, n, CHUNK):
        b = bits[start:start + CHUNK]
        tt = t[:b.size]
        np.right_shift(b, s16, out=tt)
        np.bitwise_and(tt, one, out=tt)
        np.add(tt, half, out=tt)
        np.add(tt, b, out=tt)          # wraps only for NaN patterns, replaced below
        np.right_shift(tt, s16, out=out[start:start + CHUNK], casting="unsafe")
        x = flat[start:start + CHUNK]
        nan = np.isnan(x)
        if nan.any():
            o = out[start:start + CHUNK]
            o[nan] = np.where(np.signbit(x[nan]), policy.negative, policy.positive)


def _encode_by_table(
    flat: np.ndarray,
    f: Format,
    mode: str,
    saturate: bool,
    policy: NanPolicy,
    out: np.ndarray,
    shape: Tuple[int, ...],
) -> None:
    table, k, sentinel = _table(f, mode, saturate, policy, flat.dtype.char)
    uint = np.uint32 if flat.dtype == np.float32 else np.uint64
    bits = flat.view(uint)
    ks = uint(k)
    low = uint((1 << k) - 1)
    direct = table.dtype == out.dtype
    n = flat.size
    chunk = min(CHUNK, n)
    idx = np.empty(chunk, dtype=uint)
    # NumPy 2.0 (and 1.x) casts take()'s indices to intp only under the 'safe' rule,
    # which refuses uint64; the indices are below 2^(64-k), so the signed view holds them
    take_idx = idx.view(np.int64) if uint is np.uint64 else idx
    sticky = np.empty(chunk, dtype=uint)
    wide = None if direct else np.empty(chunk, dtype=table.dtype)
    for start in range(0, n, chunk):
        stop = min(start + chunk, n)
        c = stop - start
        b = bits[start:stop]
        i = idx[:c]
        ti = take_idx[:c]
        st = sticky[:c]
        # sticky = 1 when any of the k low bits is set: (low_bits + 2^k - 1) >> k
        np.bitwise_and(b, low, out=st)
        np.add(st, low, out=st)
        np.right_shift(st, ks, out=st)
        np.right_shift(b, ks, out=i)
        np.bitwise_or(i, st, out=i)
        if direct:
            np.take(table, ti, out=out[start:stop], mode="clip")
            if policy.error and out[start:stop].max() >= sentinel:
                pos = int(np.argmax(out[start:stop] >= sentinel))
                raise _nan_error(f, start + pos, shape)
        else:
            w = wide[:c]
            np.take(table, ti, out=w, mode="clip")
            if policy.error and w.max() >= sentinel:
                pos = int(np.argmax(w >= sentinel))
                raise _nan_error(f, start + pos, shape)
            out[start:stop] = w
