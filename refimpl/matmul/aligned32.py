"""The block FMA's aligned sums on float32 significands and int32 sums: the fast kernel
of :meth:`refimpl.matmul.blockfma.BlockFMA._fast_blocks`.

For one output (i, j) and one block, the block FMA of :mod:`refimpl.matmul.blockfma`
truncates every term toward zero to the grid 2^(eta - F), eta the largest term
exponent (raised to the alignment floor), and adds the truncated terms exactly. In units
of the grid a product is

    x_k = a_k b_k 2^(F - eta) = a'_k b'_k r,   a' = a 2^-EA_i,  b' = b 2^(F - EB_j),
                                                r = 2^(EA_i + EB_j - eta)

with EA_i (EB_j) the largest exponent of row i of A (column j of B) in the block: a'
and b' are scaled once per block and row (column), r once per output and block, and
each product costs one multiplication b'_k r, one by a'_k whose float32 result is
converted to int32 (which truncates toward zero, sign kept: the hardware's
sign-magnitude truncation), and an int32 addition.

Exactness (checked by :func:`plan` before the kernel is used, otherwise the caller's
float64 path runs):

- the significands of a and b have at most 24 bits together, so a'_k (b'_k r) is exact
  in float32 (FP16, BF16, TF32 and FP8 operands: 22, 16, 22 and 8 bits) wherever it is
  a normal float32 value;
- every non-zero a' lies in [2^-sa, 2) and every b' in [2^(F - sb), 2^(F + 1)), sa (sb)
  the largest distance of a non-zero entry's exponent below its row's (column's) block
  maximum; the kernel requires sa + sb <= 125 - F, so both are normal float32 values,
  and r <= 2^(sa + sb) wherever a product is not zero (eta >= e(a_k) + e(b_k));
  r is clamped to [2^-127 (taken as +0), 2^(125 - F)], so b' r < 2^126 is finite also
  where a' is zero (0 * Inf would be NaN, not the zero product). A power-of-two r scales
  b' exactly, except where b' r or a' b' r falls below 2^-126: there x_k < 1 (a' < 2),
  and it truncates to 0 however it was rounded;
- |x_k| < 2^(F + 2) (significands below 2 each, e(a_k) + e(b_k) <= eta), so a
  truncated product is at most 2^(F + 2) - 1 and m of them add exactly in int32 while
  m (2^(F + 2) - 1) <= 2^31 - 1 (n = 16 with F = 25: 2^31 - 16); longer blocks add in
  groups of that size, the groups in float64;
- the term of C, trunc(c 2^(F - eta)), is below 2^(F + 1) (exact in float32 where
  c 2^(F - eta) is a normal value, below 1 otherwise), and the block's sum is below
  2^53 in float64: exact.
"""
from __future__ import annotations

from typing import Callable, Optional

import numpy as np

from refimpl.matmul.alignment import AccumulatorFormat, exponents, round_into

#: the exponent of a zero operand in the int16 exponent arrays: two of them still fit
#: (-32000), and a zero product's exponent sum stays far below every real one
_NONE16 = np.int16(-16000)

#: outputs per chunk of rows (the per-block work on the outputs is done a chunk at a time)
_CHUNK_OUTPUTS = 1 << 14


def significand_bits(x: np.ndarray) -> int:
    """The most significant bits of a finite non-zero entry of ``x`` (float64 values of
    float32 numbers): 0 for an all-zero array, at most 24."""
    m, _ = np.frexp(np.abs(x))
    for p in range(1, 25):
        scaled = np.ldexp(m, p)
        if np.array_equal(scaled, np.trunc(scaled)):
            return p if m.any() else 0
    return 25  # not float32 values: the caller's float64 path runs


class Plan:
    """The operands of one (M, K) x (K, N) product, or of a batch of G of them, prepared
    for :func:`run`: A-side arrays per row (G * M rows, batch-major), B-side arrays per
    batch entry (leading axis G); ``row_batch`` the batch entry of each row (None for a
    single product)."""

    def __init__(self, a3, b3, ea3, eb3, EA, EB, n, F, groups, row_batch=None, shape=None):
        self.a3, self.b3, self.ea3, self.eb3 = a3, b3, ea3, eb3
        self.EA, self.EB, self.n, self.F, self.groups = EA, EB, n, F, groups
        self.row_batch, self.shape = row_batch, shape

    def b_side(self, rs: slice, j: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """b' (R or 1, n, N), its exponents (R or 1, n, N) and EB (R or 1, N) of block ``j``
        for the rows ``rs``."""
        if self.row_batch is None:
            return self.b3[0, j][None], self.eb3[0, j][None], self.EB[0, j][None, :]
        rb = self.row_batch[rs]
        if rb[0] == rb[-1]:  # the rows of one batch entry: broadcast, no gather
            g = int(rb[0])
            return self.b3[g, j][None], self.eb3[g, j][None], self.EB[g, j][None, :]
        return self.b3[rb, j], self.eb3[rb, j], self.EB[rb, j]


def plan(a: np.ndarray, b: np.ndarray, n: int, F: int,
         emin: tuple[Optional[int], Optional[int]],
         exps: Optional[tuple[np.ndarray, np.ndarray]] = None) -> Optional[Plan]:
    """Prepare finite float64 ``a`` (M, K) and ``b`` (K, N) (K a multiple of ``n`` or the
    final slice, padded here with zero products) for blocks of ``n`` products and F
    fraction bits, ``emin`` the operands' exponent floors; ``None`` where the module's
    exactness conditions do not hold. ``a`` (G, M, K) and ``b`` (G, K, N): a batch of G
    independent products (the exactness conditions then hold for the whole batch).
    ``exps``: the operands' exponents when they are not max(floor(log2 |x|), emin) (the
    block-scaled kinds: element and scale exponents added), each at least
    floor(log2 |x|) of its non-zero entry."""
    group = (2**31 - 1) // (2**(F + 2) - 1)
    if group < 1 or significand_bits(a) + significand_bits(b) > 24:
        return None
    batched = a.ndim == 3
    if not batched:
        a, b = a[None], b[None]
        if exps is not None:
            exps = exps[0][None], exps[1][None]
    G, m, k = a.shape
    nb = -(-k // n)
    pad = nb * n - k
    if pad:
        a = np.concatenate([a, np.zeros((G, m, pad))], axis=2)
        b = np.concatenate([b, np.zeros((G, pad, b.shape[2]))], axis=1)
    N = b.shape[2]
    if exps is None:
        exps = exponents(a, emin[0]), exponents(b, emin[1])
    elif pad:
        exps = (np.concatenate([exps[0], np.zeros((G, m, pad), np.int64)], axis=2),
                np.concatenate([exps[1], np.zeros((G, pad, N), np.int64)], axis=1))
    if max(np.abs(e[x != 0]).max(initial=0) for e, x in zip(exps, (a, b))) > 4000:
        return None  # beyond the int16 exponent arrays
    ea = np.where(a != 0, exps[0], _NONE16).astype(np.int16).reshape(G * m, nb, n)
    eb = np.where(b != 0, exps[1], _NONE16).astype(np.int16).reshape(G, nb, n, N)
    EA = ea.max(axis=2)
    EB = eb.max(axis=2)
    EA = np.where(EA < _NONE16 // 2, 0, EA).astype(np.int32)   # an all-zero row block
    EB = np.where(EB < _NONE16 // 2, 0, EB).astype(np.int32)
    # true exponents (no floor) of the non-zero entries below their block maxima
    ta = np.where(a != 0, exponents(a, None), 1 << 20).reshape(G * m, nb, n)
    tb = np.where(b != 0, exponents(b, None), 1 << 20).reshape(G, nb, n, N)
    sa = int((EA[:, :, None] - ta).max(initial=0))
    sb = int((EB[:, :, None, :] - tb).max(initial=0))
    if sa + sb > 125 - F:
        return None
    a3 = np.ldexp(a.reshape(G * m, nb, n), -EA[:, :, None]).astype(np.float32)
    b3 = np.ldexp(b.reshape(G, nb, n, N), (F - EB)[:, :, None, :]).astype(np.float32)
    groups = [(g, min(g + group, n)) for g in range(0, n, group)]
    rows = np.repeat(np.arange(G), m) if batched else None
    return Plan(a3, b3, ea, eb, EA, EB, n, F, groups, rows, (G, m, N) if batched else None)


def _pow2_64(e: np.ndarray) -> np.ndarray:
    """2.0**e as float64 for int ``e`` in [-1022, 1023] (the exponent field written
    directly)."""
    return ((e.astype(np.int64) + 1023) << 52).view(np.float64)


def _pow2_32(e: np.ndarray) -> np.ndarray:
    """2.0**e as float32 for int32 ``e`` in [-126, 127] (the exponent field written
    directly)."""
    return ((e + 127) << 23).view(np.float32)


def _exponent_field(c: np.ndarray, emin: int) -> np.ndarray:
    """The exponent of accumulator values ``c`` (float64 values of the accumulator, never
    float64 subnormals): max(floor(log2 |c|), emin), ``_NONE16`` for a zero."""
    field = (c.view(np.int64) >> 52) & 0x7FF
    return np.where(field == 0, int(_NONE16), np.maximum(field - 1023, emin)).astype(np.int32)


def run(p: Plan, c: np.ndarray, acc: AccumulatorFormat, floor: Optional[int],
        chain: int = 0, combine: Optional[Callable] = None) -> np.ndarray:
    """Every block of the plan ``p`` in turn, starting from the accumulator ``c`` (M, N)
    float64; the block FMA with C inside (``c_placement="inside"``). A non-finite
    accumulator passes through unchanged.

    With ``combine``, the blocks form chains of ``chain`` blocks, each chain starting from
    +0, and each chain's result ``s`` enters the accumulator as ``c = combine(c, s)``
    (C added after the products: the interleaved halves of ``c_placement="after"``).

    Rounding toward zero into an FP32 accumulator (every NVIDIA FP32 accumulator) keeps
    the top ``acc.bits + 1`` significant bits of the block's sum by clearing the low
    fraction bits of its float64 value: exact while the sum is in FP32's normal range,
    which the smallest eta of the chunk (a non-zero sum is at least 2^(eta - F)) and the
    largest (the sum is below (4 n + 2) 2^eta < 2^(eta + 8)) show; otherwise, and for
    other roundings, :func:`refimpl.matmul.alignment.round_into` rounds."""
    c = np.array(c, dtype=np.float64)
    if p.shape is not None:
        c = np.broadcast_to(c, p.shape).reshape(-1, p.shape[2]).copy()
    m, nb, n = p.a3.shape
    N = p.b3.shape[3]
    rows = max(1, _CHUNK_OUTPUTS // N)
    for r0 in range(0, m, rows):
        rs = slice(r0, min(r0 + rows, m))
        if combine is None:
            c0 = c[rs]
            d = _chain(p, rs, range(nb), c0.astype(np.float32), acc, floor)
            c[rs] = np.where(np.isfinite(c0), d, c0)  # non-finite C passes through
        else:
            total = c[rs]
            for j0 in range(0, nb, chain):
                d = _chain(p, rs, range(j0, min(j0 + chain, nb)),
                           np.zeros(total.shape, np.float32), acc, floor)
                total = combine(total, d.astype(np.float64))
            c[rs] = total
    return c if p.shape is None else c.reshape(p.shape)


def _chain(p: Plan, rs: slice, blocks: range, d: np.ndarray, acc: AccumulatorFormat,
           floor: Optional[int]) -> np.ndarray:
    """The ``blocks`` of the plan for the rows ``rs``, from the accumulator ``d`` (float32
    values of the accumulator, Inf or NaN where an output no longer changes)."""
    n, N, F = p.n, p.b3.shape[3], p.F
    R = rs.stop - rs.start
    chop = acc.name == "fp32" and acc.rounding == "toward_zero"
    mask = np.int64(~((1 << (52 - acc.bits)) - 1))
    e3 = np.empty((R, n, N), np.int16)
    t = np.empty((R, n, N), np.float32)
    ti = np.empty((R, n, N), np.int32)
    for j in blocks:
        b3, eb3, EB = p.b_side(rs, j)
        np.add(p.ea3[rs, j, :, None], eb3, out=e3)
        eta = np.maximum.reduce(e3, axis=1).astype(np.int32)
        mag = d.view(np.int32) & 0x7FFFFFFF
        finite = int(mag.max()) < 0x7F800000
        if finite:
            ec = np.where(mag == 0, int(_NONE16), np.maximum((mag >> 23) - 127, acc.emin))
        else:
            d64 = d.astype(np.float64)
            dfin = np.isfinite(d64)
            df = np.where(dfin, d64, 0.0)
            ec = np.where(df != 0, exponents(df, acc.emin), int(_NONE16))
        np.maximum(eta, ec, out=eta)
        if floor is not None:
            np.maximum(eta, floor, out=eta)
        np.maximum(eta, -900, out=eta)   # no term at all: every term is zero
        # r = 2^(EA + EB - eta): +0 below 2^-126 (the scaled product is then below 1 and
        # truncates to 0); at most 2^(125 - F), so that b' r < 2^126 stays finite also
        # where a' is zero (where a product is not, EA + EB - eta <= sa + sb <= 125 - F)
        e = p.EA[rs, j][:, None] + EB - eta
        np.maximum(e, -127, out=e)
        np.minimum(e, 125 - F, out=e)
        np.multiply(b3, _pow2_32(e)[:, None, :], out=t)   # b' r
        # (b' r) a', converted to int32: truncation toward zero
        np.multiply(t, p.a3[rs, j, :, None], out=ti, casting="unsafe")
        if len(p.groups) == 1:
            s = np.add.reduce(ti, axis=1, dtype=np.int32).astype(np.float64)
        else:
            s = sum(np.add.reduce(ti[:, g0:g1], axis=1, dtype=np.int32).astype(np.float64)
                    for g0, g1 in p.groups)
        lo, hi = int(eta.min()), int(eta.max())
        if finite and chop and lo - F >= acc.emin and hi + 8 <= acc.emax and F - lo <= 127:
            # all in float32's normal range: c 2^(F - eta) < 2^(F + 1) is exact or below 1
            s += np.trunc(d * _pow2_32(F - eta))
            chopped = (s.view(np.int64) & mask).view(np.float64).astype(np.float32)
            d = chopped * _pow2_32(eta - F)   # acc.bits + 1 bits, normal: exact
            continue
        if finite:
            d64, dfin, df = d.astype(np.float64), None, None
            df = d64
        s += np.trunc(df * _pow2_64(F - eta))
        if chop and lo - F >= acc.emin and hi + 8 <= acc.emax:
            y = (s.view(np.int64) & mask).view(np.float64) * _pow2_64(eta - F)
        else:
            y = round_into(s * _pow2_64(eta - F), acc)
        d = (y if dfin is None else np.where(dfin, y, d64)).astype(np.float32)
    return d
