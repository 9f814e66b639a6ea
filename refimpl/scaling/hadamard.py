"""Random-sign Hadamard transforms, applied in groups along one axis.

NVFP4 training in TransformerEngine quantises weight-gradient inputs after a 16-point
random Hadamard transform (RHT): each group of 16 consecutive elements ``x`` (a row
vector) becomes ``y = x D H / 4``, with ``H`` the 16x16 Sylvester Hadamard matrix
(entries +-1, ``H H^T = 16 I``) and ``D`` a fixed diagonal of random signs. The matrix
``M = D H / 4`` is orthogonal, so the inverse is ``x = y M^T = y H D / 4``. FlashAttention-3's
incoherent processing uses the same construction with the head dimension as size.

How it is computed (bit-reproducible): for float16/float32 input and a size that is a
power of 4 (16, 64, 256: ``1/sqrt(n)`` is a power of two) the result is the exact
transform rounded once to the input dtype (correctly rounded). The group sums are formed
by the fast Walsh-Hadamard butterfly in float64, which is exact whenever a group's
nonzero magnitudes span at most 2**25 (24-bit significands, 4 bits of growth); the rare
groups that span more are summed in integers instead. Groups holding Inf or NaN follow
the float64 butterfly (IEEE rules: Inf - Inf is NaN). For float64 input, or other sizes,
the butterfly runs in float64 in its fixed order and ``1/sqrt(n)`` is the float64
square root: the same result on every machine, but not always correctly rounded.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from refimpl.validation import check_bool, check_elements, check_positive_int

from .dyadic import round_dyadic

__all__ = [
    "TE_WGRAD_SIGNS",
    "sylvester_hadamard",
    "hadamard_matrix",
    "hadamard_transform",
    "random_signs",
]

#: The fixed sign diagonal TransformerEngine uses for its NVFP4 weight-gradient RHT
#: (``get_wgrad_sign_vector``), kept as data so results can be compared with it.
TE_WGRAD_SIGNS: tuple[int, ...] = (1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1)


def _check_size(n: int) -> int:
    n = check_positive_int("size", n)
    if n & (n - 1):
        raise ValueError(f"size: expected a power of two >= 1, got {n!r}")
    return n


def sylvester_hadamard(n: int = 16) -> np.ndarray:
    """The n x n Sylvester Hadamard matrix as int8: ``H[i, j] = (-1)**popcount(i & j)``.

    Symmetric, entries +-1, ``H @ H.T == n * I``.
    """
    n = _check_size(n)
    i = np.arange(n, dtype=np.int64)
    bits = np.bitwise_and(i[:, None], i[None, :])
    parity = np.zeros_like(bits)
    while np.any(bits):
        parity ^= bits & 1
        bits >>= 1
    return (1 - 2 * parity).astype(np.int8)


def _signs_array(signs: Sequence[int] | np.ndarray | None, n: int) -> np.ndarray:
    if signs is None:
        return np.ones(n, dtype=np.int8)
    s = np.asarray(signs)
    if s.shape != (n,):
        raise ValueError(f"signs: expected {n} entries of +-1, got shape {s.shape}")
    bad = np.flatnonzero((s != 1) & (s != -1))
    if bad.size:
        raise ValueError(f"signs: entry {int(bad[0])} is {s[bad[0]]!r}, expected +1 or -1")
    return s.astype(np.int8)


def _default_signs(n: int) -> tuple[int, ...] | None:
    return TE_WGRAD_SIGNS if n == 16 else None


def _resolve_signs(
    signs: Sequence[int] | np.ndarray | None | str, n: int
) -> np.ndarray:
    if isinstance(signs, str):
        if signs != "default":
            # any other string would silently mean the default diagonal
            raise ValueError(
                f"signs: expected 'default', None or {n} entries of +-1, got {signs!r}"
            )
        return _signs_array(_default_signs(n), n)
    return _signs_array(signs, n)


def hadamard_matrix(
    n: int = 16, signs: Sequence[int] | np.ndarray | None | str = "default"
) -> np.ndarray:
    """The transform matrix ``M = D H / sqrt(n)`` (float64) so that ``y = x @ M``.

    Args:
        n: size, a power of two (16 for NVFP4).
        signs: the diagonal of ``D``; ``"default"`` is ``TE_WGRAD_SIGNS`` for n = 16 and
            all ones otherwise; ``None`` means all ones (plain Hadamard).

    For n a power of 4 every entry is exactly +-2**-k and ``M @ M.T == I`` exactly.
    """
    n = _check_size(n)
    d = _resolve_signs(signs, n)
    return d[:, None].astype(np.float64) * sylvester_hadamard(n) * (1.0 / np.sqrt(float(n)))


def _fwht(v: np.ndarray) -> np.ndarray:
    """Unnormalised Walsh-Hadamard transform along the last axis (float64, fixed order)."""
    n = v.shape[-1]
    lead = v.shape[:-1]
    h = 1
    while h < n:
        w = v.reshape(lead + (n // (2 * h), 2, h))
        a = w[..., 0, :]
        b = w[..., 1, :]
        v = np.stack([a + b, a - b], axis=-2).reshape(lead + (n,))
        h *= 2
    return v


def hadamard_transform(
    x: np.ndarray,
    *,
    size: int = 16,
    axis: int = -1,
    signs: Sequence[int] | np.ndarray | None | str = "default",
    inverse: bool = False,
) -> np.ndarray:
    """Apply ``y = x D H / sqrt(size)`` to each group of ``size`` consecutive elements
    along ``axis`` (or its inverse ``x = y H D / sqrt(size)`` with ``inverse=True``).

    Args:
        x: float16, float32 or float64 array; the length along ``axis`` must be a
            multiple of ``size``.
        size: group size, a power of two (16: the NVFP4 RHT).
        axis: the axis the groups run along.
        signs: the sign diagonal (see ``hadamard_matrix``).
        inverse: apply the inverse transform.

    Returns:
        An array of x's shape and dtype (see the module docstring for the rounding).

    Raises:
        ValueError: non-float input, bad size or signs, length not a multiple of size.
    """
    x = np.asarray(x)
    check_elements("x", x)
    if x.dtype.kind != "f" or x.dtype.itemsize > 8:
        raise ValueError(
            f"x: expected a floating-point array (float16, float32 or float64), "
            f"got dtype {x.dtype}"
        )
    if not x.dtype.isnative:
        x = x.astype(x.dtype.newbyteorder("="))  # the dtype tests below compare natively
    n = _check_size(size)
    d = _resolve_signs(signs, n)
    inverse = check_bool("inverse", inverse)
    if x.ndim == 0:
        raise ValueError("x: expected at least one dimension")
    ax = axis % x.ndim if -x.ndim <= axis < x.ndim else None
    if ax is None:
        raise ValueError(f"axis: {axis} is out of range for an array of {x.ndim} dimensions")
    length = x.shape[ax]
    if length % n:
        raise ValueError(
            f"x: length {length} along axis {axis} is not a multiple of the group size {n}"
        )
    moved = np.moveaxis(x, ax, -1).astype(np.float64)
    groups = moved.reshape(moved.shape[:-1] + (length // n, n))
    scale = 1.0 / np.sqrt(float(n))
    if inverse:
        y = _fwht(groups) * d * scale
    else:
        y = _fwht(groups * d) * scale
    out = y.astype(x.dtype)
    log4 = (n.bit_length() - 1) // 2
    if x.dtype != np.float64 and 4 ** log4 == n and groups.size:
        _exact_wide_groups(groups, d, inverse, log4, out)
    return np.moveaxis(out.reshape(moved.shape), -1, ax)


def _exact_wide_groups(
    groups: np.ndarray, d: np.ndarray, inverse: bool, log4: int, out: np.ndarray
) -> None:
    """Recompute, in integers, the groups whose float64 butterfly might have rounded.

    ``groups`` holds float32 values (as float64); each is an integer multiple of 2**-149.
    The butterfly is exact when ``emax + 5 - (emin - 23) <= 53`` (frexp exponents of the
    group's largest and smallest nonzero magnitudes).
    """
    mag = np.abs(groups)
    finite = np.isfinite(mag).all(axis=-1)
    gmax = np.where(finite, mag.max(axis=-1), 0.0)
    gmin = np.where(mag > 0, mag, np.inf).min(axis=-1)
    _, emax = np.frexp(gmax)
    _, emin = np.frexp(np.where(np.isfinite(gmin), gmin, 1.0))
    wide = finite & (gmax > 0) & (emax.astype(np.int64) - emin > 25)
    if not wide.any():
        return
    n = groups.shape[-1]
    h = sylvester_hadamard(n).astype(object)
    signs = [int(v) for v in d]
    for idx in zip(*np.nonzero(wide)):
        ints = [int(v * 2.0 ** 149) for v in groups[idx]]  # exact: float32 * 2**149
        if not inverse:
            ints = [s * v for s, v in zip(signs, ints)]
        for j in range(n):
            t = sum(ints[i] * h[i, j] for i in range(n))
            if inverse:
                t *= signs[j]
            out[idx + (j,)] = round_dyadic(t, -149 - log4, out.dtype)


def random_signs(n: int, seed: int) -> np.ndarray:
    """``n`` signs (+1/-1 as int8) from a fixed integer hash of ``(seed, i)`` (SplitMix64),
    so the same seed gives the same signs with any NumPy version on any machine."""
    if n < 0:
        raise ValueError(f"n: expected a non-negative count, got {n}")
    mask = (1 << 64) - 1
    out = np.empty(n, dtype=np.int8)
    state = int(seed) & mask
    for i in range(n):
        state = (state + 0x9E3779B97F4A7C15) & mask
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        z ^= z >> 31
        out[i] = 1 if (z >> 63) == 0 else -1
    return out
