"""Inputs placed relative to a TARGET format (Berkeley TestFloat practice).

For a conversion from float32 (or float64, float16) to a low-precision format the
interesting inputs are defined by the target, not by the source: its representable
values, the rounding midpoints between neighbours (ties with even and odd last bits),
the source values just above and below each midpoint, the smallest subnormal and the
subnormal/normal boundary, the largest finite value plus and minus half an ulp (the
overflow tie) and beyond, zeros, infinities and NaNs.

:func:`target_codes` picks the target codes to place inputs around (every code of a
format of 8 bits or fewer; TestFloat's special exponents crossed with special
significands otherwise), :func:`sharp_inputs` builds the placed inputs, and
:func:`random_inputs` draws source values whose exponents span the target's range
(:func:`random_span`).
The case registry, :mod:`oracle.strategies` and :mod:`oracle.conformance` share them.
"""
from __future__ import annotations

import numpy as np

from oracle.random_stream import CaseRandom
from refimpl.formats import decode, get


def _fmt(fmt):
    return get(fmt)


def target_codes(fmt, *, exhaustive: bool | None = None) -> np.ndarray:
    """Non-negative finite codes (magnitudes) of ``fmt`` to place inputs around, sorted.

    ``exhaustive`` (default: formats of at most 8 bits) takes every finite magnitude;
    otherwise every exponent field is crossed with the significands 0, 1, 2, max-1, max
    (TestFloat level 1), plus the 64 lowest magnitudes (zero, subnormals, first normals),
    the 64 highest finite ones and 64 around 1.0.
    """
    f = _fmt(fmt)
    top = f.max_code_magnitude
    if exhaustive is None:
        exhaustive = f.bits <= 8
    if exhaustive:
        return np.arange(top + 1, dtype=np.int64)
    mant = [0, 1, 2, (1 << f.man_bits) - 2, (1 << f.man_bits) - 1]
    exps = np.arange(1 << f.exp_bits, dtype=np.int64)
    codes = {int(e << f.man_bits) + m for e in exps for m in mant if 0 <= m < (1 << f.man_bits)}
    one = f.bias << f.man_bits
    codes |= set(range(64)) | set(range(top - 63, top + 1)) | set(range(one - 32, one + 32))
    return np.array(sorted(c for c in codes if 0 <= c <= top), dtype=np.int64)


def _values(f, codes: np.ndarray) -> np.ndarray:
    return np.asarray(decode(codes.astype(f.code_dtype), f), dtype=np.float64)


def sharp_inputs(fmt, dtype: type = np.float32, *, exhaustive: bool | None = None,
                 specials: bool = True) -> np.ndarray:
    """Source values of ``dtype`` placed relative to ``fmt``, both signs, sorted by
    magnitude (negative right after positive) so the simplest come first.

    Includes each target value, each midpoint between neighbouring target values, the
    ``dtype`` neighbours just below and above each midpoint, and past the largest finite
    value: max + ulp/2 (the overflow tie), its neighbours, max + ulp, 2 * max. For a
    float64 source, points 2^-40 relative beside each midpoint too (inputs that a
    float32 pre-rounding would move onto the tie: the double-rounding trap). With
    ``specials``: +-0, +-Inf and +-NaN. Values the source type cannot hold exactly are
    dropped (a source type narrower than the target).
    """
    f = _fmt(fmt)
    dt = np.dtype(dtype)
    codes = target_codes(f, exhaustive=exhaustive)
    vals = _values(f, codes)
    vals = vals[np.isfinite(vals)]
    vals = np.unique(vals)
    mids = (vals[:-1] + vals[1:]) / 2                     # exact in float64
    # spacing at the top binade: the overflow tie lies half an ulp above max
    ulp_max = vals[-1] - vals[-2] if vals.size > 1 else vals[-1]
    over = np.array([vals[-1] + ulp_max / 2, vals[-1] + ulp_max, 2 * vals[-1]])
    ties = np.concatenate([mids, over[:1]])
    pts = [vals, ties, over[1:]]
    with np.errstate(over="ignore", invalid="ignore"):
        t = ties.astype(dt)
        exact = t.astype(np.float64) == ties
        t = t[exact & np.isfinite(t)]
        pts.append(np.nextafter(t, dt.type(np.inf)).astype(np.float64))
        pts.append(np.nextafter(t, dt.type(0)).astype(np.float64))
        if dt == np.float64:
            pts.append(ties * (1 + 2.0 ** -40))
            pts.append(ties * (1 - 2.0 ** -40))
        allp = np.concatenate(pts)
        cast = allp.astype(dt)
        keep = (cast.astype(np.float64) == allp) & np.isfinite(cast) & (allp >= 0)
    mags = np.unique(cast[keep])
    mags = mags[mags > 0]
    out = np.empty(2 * mags.size, dtype=dt)
    out[0::2] = mags
    out[1::2] = -mags
    if specials:
        head = np.array([0.0, -0.0], dtype=dt)
        tail = np.array([np.inf, -np.inf, np.nan, -np.nan], dtype=dt)
        if tail.dtype.kind == "f":
            tail[3] = np.copysign(tail[3], dt.type(-1.0))
        out = np.concatenate([head, out, tail])
    return out


def random_span(fmt, dtype: type = np.float32) -> tuple[int, int, int]:
    """``(source significand bits, lowest exponent, highest exponent)`` for random
    source values of ``dtype`` placed around ``fmt``: from three binades below the
    target's smallest subnormal to two above its largest value, clipped to the binades
    ``dtype`` can hold."""
    f = _fmt(fmt)
    dt = np.dtype(dtype)
    src_man = {2: 10, 4: 23, 8: 52}[dt.itemsize]
    lo = f.emin - f.man_bits - 3
    hi = f.emax + 2
    if dt.itemsize == 2:
        lo, hi = max(lo, -24), min(hi, 15)
    elif dt.itemsize == 4:
        lo, hi = max(lo, -149), min(hi, 127)
    return src_man, lo, hi


def random_inputs(fmt, rng: CaseRandom, n: int, dtype: type = np.float32) -> np.ndarray:
    """``n`` source values with random significands and exponents spread over
    :func:`random_span`, random signs. Built exactly with ``ldexp`` (no libm)."""
    dt = np.dtype(dtype)
    src_man, lo, hi = random_span(fmt, dt)
    e = rng.integers(lo, hi + 1, n)
    m = rng.integers(0, 1 << src_man, n).astype(np.float64) * 2.0 ** -src_man
    sign = np.where(rng.integers(0, 2, n) == 1, -1.0, 1.0)
    with np.errstate(over="ignore", under="ignore"):
        return (sign * np.ldexp(1.0 + m, e.astype(np.int32))).astype(dt)
