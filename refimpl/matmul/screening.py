"""The fast path of the correctly rounded matrix product: a float64 BLAS product,
screened, with the few uncertain outputs resolved exactly.

The definition (and the plain Fraction reference) is in :mod:`refimpl.matmul.exact`.
Here:

- :func:`exact_matmul64`: float64 values whose rounding to any target of at most FP32's
  precision is the correctly rounded result (used by :func:`refimpl.matmul.matmul` for
  outputs narrower than FP32 and for inputs with Inf or NaN);
- :func:`exact_matmul_fp32`: the FP32 answers themselves, with fewer passes when every
  input is finite (the screen of :func:`exact_product_fp32` with the per-output width
  W_ij: the bound below plus room for the screen's own roundings);
- :func:`exact_product_fp32`: a lean FP32 entry for callers that multiply many tiles of
  validated, finite operands (the attention schedules): float64 copies and the
  row/column norms of the screen (:func:`exact_row_bounds`, :func:`exact_col_norms`)
  are prepared once per tensor, and the screen is a monotone test (same guarantee,
  fewer passes). Its steps are public for schedules that interleave them with their own
  work: :func:`screen_width`, :func:`screen_fp32` (which outputs are certified) and
  :func:`resolve_fp32` (the correctly rounded values of the others).

Why the fast path's bytes cannot depend on the BLAS kernel, thread count or CPU
------------------------------------------------------------------------------
Inputs are float32 values (any narrower format is a subset). The product of two float32
values has at most 48 significant bits and an exponent in [-298, 255], so it is exact in
float64 (53 bits, normal range down to 2^-1022): every BLAS computes the same products.
Only the order (and FMA use) of its float64 additions differs between kernels. For any
order, every product takes part in at most k - 1 additions, each with relative error at
most u = 2^-53 (additions of float64 values never lose accuracy to underflow, and no
partial sum can overflow: |sum| <= k * 2^256), so the BLAS value s^ satisfies
(Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed., eq. (4.4) and
Lemma 3.1; an FMA with an exact product is one rounded addition)

    |s^ - s| <= gamma_{k-1} * sum_k |a_ik b_kj|,   gamma_m = m u / (1 - m u).

The one assumption about the BLAS: it computes each output as a sum of the products
a_ik b_kj in binary64 (any order, blocking, vector width, FMA use, or wider
intermediates such as x87's: the 1.001 slack below covers their double rounding), as
every conventional dgemm does. Strassen-type algorithms, which form other products, are
not used by the dgemm of OpenBLAS, MKL, BLIS or Accelerate.

We bound sum |a_ik b_kj| from above by U = ||a_i||_2 ||b_j||_2 (Cauchy-Schwarz), computed
with a safety factor that covers its own rounding, and use the error bound
B = 1.001 * k * u * U (>= gamma_{k-1} U for k < 2^40).

Then the exact s lies in [s^ - B, s^ + B]. Rounding to the target is a step function
that changes only at the midpoints between neighbouring target values (overflow to Inf
happens at a midpoint, too). If that interval contains no midpoint, no zero and (for a
normal s^) does not reach below the binade of s^, then RN(s^) = RN(s): we return s^.
Otherwise the output is summed again, in a fixed order with an error-free split
(:func:`_split_sum`, error about 2^-100 of the terms), and the same test is applied with
that much smaller bound; what still fails (true near-ties, cancellation to zero) is
recomputed exactly with integer arithmetic (:mod:`refimpl.matmul.limbs`). Either way the
output equals RN(s), a function of the inputs alone: a different kernel can only change
*which* outputs take the slower paths (the reported fractions), never their bytes.
(The same argument covers the BLAS-free parts: every later step is certified or exact,
so the summation order inside ``np.sum`` does not matter either.)
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from refimpl.eft import two_sum
from refimpl.matmul.limbs import exact_row_sums
from refimpl.matmul.rounding import FP32, Target, to_format
from refimpl.summation import fold_sum_axis1
from refimpl.validation import as_float32

__all__ = ["ExactStats", "exact_matmul64", "exact_matmul_fp32", "exact_product_fp32",
           "exact_row_bounds", "exact_col_norms", "screen_width", "screen_fp32",
           "resolve_fp32", "flagged", "resolve_flagged"]

_U = 2.0**-53
_K_MAX = 1 << 40
#: elements per screening block and per refinement chunk (cache-sized: memory bound)
_SCREEN_ELEMS = 1 << 15
_REFINE_ELEMS = 1 << 16
#: elements per screening block of the lean FP32 entry (fewer, fused passes)
_LEAN_SCREEN_ELEMS = 1 << 17
#: flagged products beyond which exact BLAS sums are looked for first (integer-like data)
_BULK_ELEMS = 1 << 24
#: flagged products up to which resolve_fp32 gathers the factors directly
_FEW_ELEMS = 1 << 14


@dataclass
class ExactStats:
    """What the fast path did: outputs in total; how many the cheap bound could not
    certify (``refined``: summed again with the split sum and its tiny bound); how many
    of those were recomputed with exact integer accumulation (``recomputed``)."""

    outputs: int = 0
    refined: int = 0
    recomputed: int = 0

    @property
    def recomputed_fraction(self) -> float:
        return self.recomputed / self.outputs if self.outputs else 0.0

    @property
    def refined_fraction(self) -> float:
        return self.refined / self.outputs if self.outputs else 0.0



def _needs_recompute(s: np.ndarray, bound: np.ndarray, tgt: Target) -> np.ndarray:
    """True where [s - bound, s + bound] may hold a rounding midpoint of ``tgt``, zero, or
    reach below the binade of s (where the grid gets finer). All arithmetic here is exact:
    scalings by powers of two and Sterbenz subtractions."""
    x = np.abs(s)
    _, ex = np.frexp(x)
    e = ex.astype(np.int64) - 1  # floor(log2 x) for x > 0
    ec = np.maximum(e, tgt.emin)
    q = np.ldexp(x, (tgt.precision - ec).astype(np.int32))  # x in units of half an ulp
    odd = 2.0 * np.floor(q / 2.0) + 1.0  # the nearest odd multiple: a midpoint
    dmid = np.ldexp(np.abs(q - odd), (ec - tgt.precision).astype(np.int32))
    below = np.where(e >= tgt.emin, x - np.ldexp(1.0, e.astype(np.int32)), np.inf)
    flag = (x <= bound) | (dmid <= bound) | (below <= bound)
    return flag & (bound > 0)



def _special_values(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mask, values) of outputs that are NaN or +-Inf under IEEE summation rules.

    Counts are matrix products of 0/1 float64 matrices: integer sums below 2^53, exact in
    any order, so BLAS cannot change them.
    """
    f = np.float64
    ainf_p, ainf_n = (a == np.inf).astype(f), (a == -np.inf).astype(f)
    binf_p, binf_n = (b == np.inf).astype(f), (b == -np.inf).astype(f)
    apos, aneg = ((a > 0) & (a < np.inf)).astype(f), ((a < 0) & (a > -np.inf)).astype(f)
    bpos, bneg = ((b > 0) & (b < np.inf)).astype(f), ((b < 0) & (b > -np.inf)).astype(f)
    azero, bzero = (a == 0).astype(f), (b == 0).astype(f)
    anan, bnan = np.isnan(a).astype(f), np.isnan(b).astype(f)
    ainf, binf = ainf_p + ainf_n, binf_p + binf_n
    nan = (anan @ np.ones(b.shape[-2:], dtype=f)) + (np.ones(a.shape[-2:], dtype=f) @ bnan)
    nan = nan + azero @ binf + ainf @ bzero
    pos = ainf_p @ (bpos + binf_p) + ainf_n @ (bneg + binf_n) + apos @ binf_p + aneg @ binf_n
    neg = ainf_p @ (bneg + binf_n) + ainf_n @ (bpos + binf_p) + apos @ binf_n + aneg @ binf_p
    is_nan = (nan > 0) | ((pos > 0) & (neg > 0))
    mask = is_nan | (pos > 0) | (neg > 0)
    values = np.where(is_nan, np.nan, np.where(pos > 0, np.inf, -np.inf))
    return mask, values


def _float64_product(a64: np.ndarray, b64: np.ndarray) -> np.ndarray:
    """The float64 BLAS product: exact products, summed in whatever order the kernel
    picks (the module docstring shows why that order cannot change the result)."""
    return np.matmul(a64, b64)


def _flag_fp32(s: np.ndarray, bound: np.ndarray) -> np.ndarray:
    """FP32 version of :func:`_needs_recompute`, cheaper, same guarantee.

    y = RN32(s); r = s - y is exact (y is within a factor 2 of s); the nearest midpoint is
    at distance g/2 - |r| where g is the spacing below |y| (the smaller one when y is a
    power of two), and g/2 - |r| is exact too: both are multiples of ulp64(s) below
    2^-23 |s| (for |y| >= 2^-125; below that we always recompute). Certify iff that
    distance exceeds the bound: then the interval around s holds no midpoint and no zero.
    Overflow (y = Inf) gives a NaN distance, which is flagged.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        y = s.astype(np.float32)
        ay = np.abs(y)
        below = (ay.view(np.uint32) - np.uint32(1)).view(np.float32)  # next float32 down
        half_gap = (ay - below).astype(np.float64) * 0.5
        dist = half_gap - np.abs(s - y)
        return ~(dist > bound) | (ay < np.float32(2.0**-125))


def _screen(s: np.ndarray, ra: np.ndarray, cb: np.ndarray, tgt: Target):
    """Indices (batch, row, col) of outputs whose rounding the bound ra_i * cb_j cannot
    certify. Works on blocks of rows that fit in cache (the passes are memory bound)."""
    nb, m, n = s.shape
    rows = max(1, _SCREEN_ELEMS // max(n, 1))
    found = []
    for bi in range(nb):
        for r0 in range(0, m, rows):
            blk = s[bi, r0:r0 + rows]
            bound = ra[bi, r0:r0 + rows, None] * cb[bi, None, :]
            if tgt.is_fp32:
                flag = _flag_fp32(blk, bound)
            else:
                flag = _needs_recompute(blk, bound, tgt) | (blk == 0)
            flat = flagged(flag)
            if flat.size:
                found.append((bi, r0 + flat // n, flat % n))
    if not found:
        empty = np.zeros(0, dtype=np.intp)
        return empty, empty, empty
    bt = np.concatenate([np.full(len(r), b, dtype=np.intp) for b, r, _ in found])
    return bt, np.concatenate([r for _, r, _ in found]), np.concatenate([c for _, _, c in found])


def _split_sum(p: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sum each row of exact products ``p`` (rows x k) with a rigorous, tiny error bound.

    ExtractScalar (Rump, Ogita and Oishi, "Accurate floating-point summation part I",
    SIAM J. Sci. Comput. 31(1), 2008, Algorithm 3.2 and Lemma 3.3): with a power of two
    2^sigma such that k max|p| <= 2^(sigma + 51), tau = 1.5 * 2^(sigma + 52) and
    hi = fl(fl(p + tau) - tau), every hi is a multiple of 2^sigma, lo = p - hi is exact and
    |lo| <= 2^(sigma - 1). The sum of the hi is exact in any order (multiples of 2^sigma
    below 2^(sigma + 53) in magnitude); the sum of the lo has error at most
    gamma_{k-1} sum |lo|. TwoSum of the two gives t + e exactly.

    Returns (t, e, err): the exact row sum lies in [t + e - err, t + e + err].
    """
    k = p.shape[-1]
    amax = np.max(np.abs(p), axis=-1, initial=0.0)
    _, ex = np.frexp(amax)  # amax < 2^ex
    sigma = ex.astype(np.int64) + (max(k, 1) - 1).bit_length() - 51  # k <= 2^ceil(log2 k)
    tau = np.ldexp(1.5, (sigma + 52).astype(np.int32))[:, None]
    hi = (p + tau) - tau
    lo = p - hi
    s_hi = np.sum(hi, axis=-1)  # exact
    s_lo = np.sum(lo, axis=-1)
    err = np.sum(np.abs(lo), axis=-1) * ((1.001 * k * _U) * (1.0 + (2 * k + 8) * _U))
    t, e = two_sum(s_hi, s_lo)
    return t, e, err


def _lowest_bits(x32: np.ndarray, axis: int) -> np.ndarray:
    """Exponent of the lowest set bit over each row/column of finite float32 ``x32``
    (a huge value for an all-zero row), from the bit pattern (IEEE 754-2019 3.4)."""
    u = np.ascontiguousarray(x32, dtype=np.float32).view(np.uint32)
    field = ((u >> 23) & 0xFF).astype(np.int32)
    sig = (u & 0x7FFFFF).astype(np.int32) | ((field != 0).astype(np.int32) << 23)
    low = (sig & -sig).astype(np.float32).view(np.uint32)  # 2^z, exactly
    z = (low >> 23).astype(np.int32) - 127
    e = np.where(sig == 0, 1 << 20, np.maximum(field, 1) - 150 + z)
    return np.min(e, axis=axis, initial=1 << 20)


def _exact_blas(a64: np.ndarray, b64: np.ndarray, s: np.ndarray, bt, ii, jj) -> np.ndarray:
    """For many flagged outputs at once (integer-like data: Hadamard, small integers):
    resolve those whose BLAS sum is provably exact, in place in ``s``; return the mask of
    the resolved ones.

    Every product of output (i, j) is a multiple of 2^t, t = (lowest set bit of row i) +
    (lowest set bit of column j); if sum |p| <= U < 2^(53 + t), every partial sum in every
    order is a multiple of 2^t below 2^(53 + t), so representable: s^ is exact. The sign
    of an exact zero comes from exact counts (0/1 matrix products, integer sums < 2^53).
    """
    k = a64.shape[-1]
    a32, b32 = a64.astype(np.float32), b64.astype(np.float32)
    ta, tb = _lowest_bits(a32, -1), _lowest_bits(b32, -2)
    aa, ab = np.abs(a64), np.abs(b64)
    u = np.minimum(np.sum(aa, axis=-1)[bt, ii] * np.max(ab, axis=-2, initial=0.0)[bt, jj],
                   np.max(aa, axis=-1, initial=0.0)[bt, ii] * np.sum(ab, axis=-2)[bt, jj])
    u = u * (1.0 + (4 * k + 16) * _U)
    texp = np.clip(ta[bt, ii] + tb[bt, jj] + 53, -1000, 1000).astype(np.int32)
    exact = u < np.ldexp(1.0, texp)
    zero = exact & (s[bt, ii, jj] == 0)
    if zero.any():
        f = np.float64
        sa, sb = np.signbit(a64), np.signbit(b64)
        nonzero = (a64 != 0).astype(f) @ (b64 != 0).astype(f)
        negative = sa.astype(f) @ (~sb).astype(f) + (~sa).astype(f) @ sb.astype(f)
        zb, zi, zj = bt[zero], ii[zero], jj[zero]
        all_neg = (k > 0) & (nonzero[zb, zi, zj] == 0) & (negative[zb, zi, zj] == k)
        s[zb, zi, zj] = np.where(all_neg, -0.0, 0.0)
    return exact


def _factor_chunks(a64: np.ndarray, b_src: np.ndarray, bt: np.ndarray, ii: np.ndarray,
                   jj: np.ndarray):
    """Yield (start, rows of a, columns of b as rows) in float64 for cache-sized chunks
    of the outputs (bt, ii, jj) of the stacks ``a64`` (nb, M, K), ``b_src`` (nb, K, N)."""
    k = a64.shape[-1]
    # cache-sized chunks: the refinement is a dozen memory-bound passes
    step = max(1, _REFINE_ELEMS // max(k, 1))
    for c0 in range(0, bt.size, step):
        cb_, ci, cj = bt[c0:c0 + step], ii[c0:c0 + step], jj[c0:c0 + step]
        if b_src.shape[0] == 1:
            # columns of a single matrix: picked from each row of b in turn (reads in
            # memory order, fastest when jj is sorted), then transposed in cache
            bc = np.take(b_src[0], cj, axis=1).T.astype(np.float64, order="C")
        else:
            bc = b_src[cb_, :, cj].astype(np.float64)
        yield c0, a64[cb_, ci, :], bc


def _refine(a64: np.ndarray, b_src: np.ndarray, bt: np.ndarray, ii: np.ndarray,
            jj: np.ndarray, tgt: Target, stats: ExactStats,
            recompute_all: bool = False) -> np.ndarray:
    """Steps (3)-(4) of :func:`exact_matmul64` for the outputs (bt, ii, jj) of the stacks
    ``a64`` (nb, M, K) and ``b_src`` (nb, K, N) (float32 or float64 holding finite values,
    or zeros where the input was not finite): float64 values x with
    ``to_format(x, tgt) == RN_tgt(exact)``, in the order of the indices."""
    k = a64.shape[-1]
    vals_all = np.empty(bt.size, dtype=np.float64)
    for c0, ar, bc in _factor_chunks(a64, b_src, bt, ii, jj):
        step = ar.shape[0]
        p = ar * bc  # exact products, signed zeros included
        # (3) a fixed-order split sum with a tiny error bound
        t, e, err = _split_sum(p)
        with np.errstate(over="ignore"):
            bnd = (np.abs(e) + err) * (1.0 + 2.0**-50)
        zero = (t == 0) & (e == 0) & (err == 0) & (not recompute_all)
        certain = ~_needs_recompute(t, bnd, tgt) & ~zero & (not recompute_all)
        vals = np.where(certain, t, 0.0)
        # exact zero: +0 unless every product is -0 (a BLAS may start its sum from +0)
        if k > 0 and zero.any():
            pz = p[zero]
            neg_zero = zero.copy()
            neg_zero[zero] = np.all((pz == 0) & np.signbit(pz), axis=-1)
            vals = np.where(neg_zero, -0.0, vals)
        # (4) what is left: exact integer accumulation
        redo = ~certain & ~zero
        if redo.any():
            vals[redo] = exact_row_sums(ar[redo], bc[redo])
            stats.recomputed += int(np.count_nonzero(redo))
        stats.refined += int(step)
        vals_all[c0:c0 + step] = vals
    return vals_all


def exact_matmul64(
    a: np.ndarray, b: np.ndarray, tgt: Target = FP32, *, recompute_all: bool = False
) -> tuple[np.ndarray, ExactStats]:
    """Fast correctly rounded product of float32 stacks ``a`` (..., M, K), ``b`` (..., K, N).

    Returns float64 values x with ``to_format(x, tgt) == RN_tgt(exact)`` for every output
    (each x is either a float64 whose rounding to ``tgt`` is certified, or the exact sum
    rounded to odd), and the statistics. Leading dimensions broadcast like ``np.matmul``.

    Steps: (1) s^ = float64 BLAS product; (2) a cheap bound (Cauchy-Schwarz) marks the
    outputs whose interval may hold a midpoint (when very many are marked, the
    exact-BLAS-sum certificate of :func:`_exact_blas` resolves integer-like ones first);
    (3) those are summed again in a fixed order by :func:`_split_sum`, whose bound is
    about 2^-100 of the terms, which certifies almost all; (4) what is left (true
    near-ties, exact zeros from cancellation) is recomputed by exact integer
    accumulation; (5) IEEE special values are set by exact counting.

    ``recompute_all=True`` skips steps 1-3 and sends every output through the exact
    integer accumulation (slow; it is the path the tests check against Fraction sums).
    """
    a = as_float32(a, "a")  # float64 operands must hold float32 values (never rounded)
    b = as_float32(b, "b")
    k = a.shape[-1]
    if k >= _K_MAX:
        raise ValueError(f"inner dimension {k} too large for the error bound (max 2^40)")
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    m_, n_ = a.shape[-2], b.shape[-1]
    nb = int(np.prod(batch, dtype=np.int64))
    a3 = np.broadcast_to(a, batch + a.shape[-2:]).reshape((nb, m_, k))
    b3 = np.broadcast_to(b, batch + b.shape[-2:]).reshape((nb, k, n_))
    all_finite = bool(np.isfinite(a3).all() and np.isfinite(b3).all())
    a64 = a3.astype(np.float64)
    b64 = b3.astype(np.float64)
    if not all_finite:
        a64 = np.where(np.isfinite(a3), a64, 0.0)
        b64 = np.where(np.isfinite(b3), b64, 0.0)

    s = _float64_product(a64, b64)
    stats = ExactStats(outputs=s.size)
    # (2) Cauchy-Schwarz: U <= ||a_i||_2 ||b_j||_2, scaled once per row/column (O(MK))
    scale = (1.0 + (4 * k + 16) * _U) * (1.001 * k * _U)
    ra = np.sqrt(np.einsum("bik,bik->bi", a64, a64)) * scale
    cb = np.sqrt(np.einsum("bkj,bkj->bj", b64, b64))
    # bound = ra_i * cb_j (the rounding of `scale` and of the products: absorbed by 1.001)
    if recompute_all:
        bt, ii, jj = np.nonzero(np.ones(s.shape, dtype=bool))
    else:
        bt, ii, jj = _screen(s, ra, cb, tgt)
    out = s  # our own array: patched in place
    if bt.size * k > _BULK_ELEMS and not recompute_all:
        done = _exact_blas(a64, b64, out, bt, ii, jj)
        bt, ii, jj = bt[~done], ii[~done], jj[~done]
    vals = _refine(a64, b3 if all_finite else b64, bt, ii, jj, tgt, stats, recompute_all)
    out[bt, ii, jj] = vals

    if not all_finite:
        mask, values = _special_values(a3, b3)
        out = np.where(mask, values, out)
    return out.reshape(batch + (m_, n_)), stats


# ----------------------------------------------------------------------------------
# Lean FP32 entry for prepared operands
# ----------------------------------------------------------------------------------
def _lean_scale(k: int) -> float:
    """Factor of ||a_i||_2 in the screen width W of :func:`exact_product_fp32`.

    W = (1.001 k + 3) u ||a_i|| ||b_j|| (with the usual factor for the rounding of the
    norms): the error bound B = 1.001 k u U plus room for the rounding of s^ -+ W
    (at most u (|s^| + W) with |s^| <= (1 + 1.001 k u) U).
    """
    if k >= _K_MAX:
        raise ValueError(f"inner dimension {k} too large for the error bound (max 2^40)")
    return (1.0 + (4 * k + 16) * _U) * ((1.001 * k + 3.0) * _U)


def exact_row_bounds(a64: np.ndarray) -> np.ndarray:
    """Screen factors of the rows of a left operand (..., M, K) of
    :func:`exact_product_fp32`: ``||a_i||_2`` times :func:`_lean_scale` (..., M)."""
    a64 = np.asarray(a64, dtype=np.float64)
    return np.sqrt(np.einsum("...ik,...ik->...i", a64, a64)) * _lean_scale(a64.shape[-1])


def exact_col_norms(b64: np.ndarray) -> np.ndarray:
    """``||b_j||_2`` of the columns of a right operand (..., K, N) of
    :func:`exact_product_fp32` (..., N)."""
    b64 = np.asarray(b64, dtype=np.float64)
    return np.sqrt(np.einsum("...kj,...kj->...j", b64, b64))


def _fold_certified(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(certified, RN32 values) for rows of exact float64 products ``p`` (n x k).

    t = fold_sum(p): every product takes part in at most L = ceil(log2 k) additions,
    so |t - s| <= gamma_L sum|p| <= 1.001 L u sum|p| (Higham, eq. (4.4)); the computed
    U1 = fl(sum |p|) (any order) is at least (1 - 1.01 k u) sum|p|. With
    W = (L + 3) u U1 (1 + (k + 4) u) >= that bound + u (|t| + W) (the margin of 2 covers
    the roundings of W itself), the monotone test of :func:`exact_product_fp32` applies:
    RN32(fl(t - W)) == RN32(fl(t + W)), non-zero, is RN32(s).
    """
    k = p.shape[-1]
    # the products term-major: each level of the fold is one contiguous addition
    t = fold_sum_axis1(np.ascontiguousarray(p.T)[None])[0]
    u1 = np.sum(np.abs(p), axis=-1)
    w = u1 * ((max(k - 1, 0).bit_length() + 3) * _U * (1.0 + (k + 4) * _U))
    with np.errstate(over="ignore"):
        lo32 = (t - w).astype(np.float32)
        hi32 = (t + w).astype(np.float32)
    ok = (lo32.view(np.uint32) == hi32.view(np.uint32)) & (lo32 != 0)
    return ok, lo32


def _fsum_fp32(p: np.ndarray) -> tuple[bool, np.float32]:
    """(certified, RN32 value) of the sum of the exact float64 products ``p`` (1-D):
    ``math.fsum`` returns the exact sum rounded once to binary64 (Shewchuk's algorithm),
    and rounding that to binary32 gives RN32 of the exact sum unless it is itself a
    binary32 midpoint (a double-rounding tie), zero (the sign of an exact zero needs the
    products) or near the overflow threshold; those are left uncertified."""
    v = math.fsum(p.tolist())
    if v == 0 or not abs(v) < 2.0**127:
        return False, np.float32(0)
    y = np.float32(v)
    if float(y) != v:
        other = np.nextafter(y, np.float32(np.inf if v > float(y) else -np.inf))
        if (float(y) + float(other)) / 2 == v:  # exact: two binary32 values
            return False, y
    return True, y


def exact_product_fp32(
    a64: np.ndarray, b64: np.ndarray, ra: np.ndarray, cb: np.ndarray,
    stats: ExactStats | None = None, *, per_output: bool = False,
) -> np.ndarray:
    """Correctly rounded FP32 product of prepared operands: the bytes of
    ``matmul(a, b)`` (accumulate "exact", out_format "fp32") without its checks.

    For callers that multiply the same validated tiles many times (the attention
    schedules): ``a64`` (..., M, K) and ``b64`` (..., K, N) are float64 arrays holding
    *finite float32 values* with the *same* leading shape (nothing is checked);
    ``ra = exact_row_bounds(a64)`` and ``cb = exact_col_norms(b64)`` (computed once per
    operand, or from any superset view of the same rows/columns). Returns float32
    (..., M, N).

    Screen (the argument of the module docstring, in a form that needs fewer passes):
    with W >= B + u (|s^| + W) for an output, lo = fl(s^ - W) <= s and hi = fl(s^ + W)
    >= s for the exact s, and s^ lies in [lo, hi]. Rounding to nearest is monotone, so
    if RN32(lo) and RN32(hi) are the same non-zero float32, every value of [lo, hi]
    rounds to it: RN32(s^) = RN32(s), and RN32(lo) is the answer. W_ij = fl(ra_i cb_j)
    qualifies (see :func:`_lean_scale`), and so does any larger value. The pass over
    all outputs uses one W per matrix, fl(max_i ra_i max_j cb_j) (a scalar: the
    cheapest subtract/add-and-round passes), or with ``per_output=True`` W_ij itself,
    formed per cache-sized block of rows (one more pass, but as tight as the bound of
    :func:`exact_matmul64`: the choice for operands whose rows or columns differ widely
    in norm, as in :func:`refimpl.matmul.matmul`). The few outputs it cannot certify are
    summed again in the fixed order of :func:`refimpl.summation.fold_sum`, whose error
    is at most gamma_L sum |p|, L = ceil(log2 k), and tested the same way with that
    much smaller W (:func:`_fold_certified`); what still fails (true near-ties, and
    every zero, whose sign needs the products) goes through the refinement of
    :func:`exact_matmul64` (steps 3-4). When very many outputs are flagged
    (integer-like data), the exact-BLAS-sum certificate of :func:`_exact_blas` is tried
    instead of the fold sum.
    Zero: a value comparison cannot tell -0 from +0, but both ends round to zero only
    if hi - lo <= 2^-149, impossible once W >= 2^-140 (then
    hi - lo >= 2 W (1 - u) - 2 u |s^|); below that, bit patterns are compared and
    zeros flagged (W_ij >= fl(min_i ra_i min_j cb_j) when W is per output).
    """
    s = _float64_product(a64, b64)
    shape = s.shape
    m_, n_ = shape[-2], shape[-1]
    k = a64.shape[-1]
    nb = s.size // max(m_ * n_, 1)
    s3 = s.reshape(nb, m_, n_)
    y = np.empty(s3.shape, dtype=np.float32)
    if s3.size:
        ra2 = np.broadcast_to(ra, shape[:-1]).reshape(nb, m_)
        cb2 = np.broadcast_to(cb, shape[:-2] + (n_,)).reshape(nb, n_)
        if per_output:
            # fl is monotone: every fl(ra_i cb_j) >= fl(min ra * min cb)
            tiny = not ((ra2.min(axis=-1) * cb2.min(axis=-1)).min() >= 2.0**-140)
            w = None
        else:
            w, tiny = screen_width(ra2, cb2)
        per = max(1, _LEAN_SCREEN_ELEMS // (m_ * n_))  # batch entries per block
        rows = m_ if m_ * n_ <= _LEAN_SCREEN_ELEMS else max(1, _LEAN_SCREEN_ELEMS // n_)
        hi = np.empty((min(per, nb), min(rows, m_), n_), dtype=np.float32)
        wbuf = np.empty(hi.shape, dtype=np.float64) if per_output else None
        found = []
        for b0 in range(0, nb, per):
            if not per_output:
                wb = w[b0:b0 + per]
            for r0 in range(0, m_, rows):
                blk = s3[b0:b0 + per, r0:r0 + rows]
                if per_output:
                    wb = wbuf[:blk.shape[0], :blk.shape[1]]
                    np.multiply(ra2[b0:b0 + per, r0:r0 + rows, None],
                                cb2[b0:b0 + per, None, :], out=wb)
                flag = screen_fp32(blk, wb, y[b0:b0 + per, r0:r0 + rows],
                                   hi[:blk.shape[0], :blk.shape[1]], tiny)
                flat = flagged(flag)
                if flat.size:
                    fr, fj = np.divmod(flat, blk.shape[2])
                    fb, fi = np.divmod(fr, blk.shape[1])
                    found.append((fb + b0, fi + r0, fj))
        if found:
            bt = np.concatenate([f[0] for f in found])
            ii = np.concatenate([f[1] for f in found])
            jj = np.concatenate([f[2] for f in found])
            a3 = np.broadcast_to(a64, shape[:-2] + a64.shape[-2:]).reshape(nb, m_, k)
            b3 = np.broadcast_to(b64, shape[:-2] + b64.shape[-2:]).reshape(nb, k, n_)
            y[bt, ii, jj] = resolve_fp32(a3, b3, s3, bt, ii, jj, stats)
    if stats is not None:
        stats.outputs += s.size
    return y.reshape(shape)


def screen_width(ra2: np.ndarray, cb2: np.ndarray) -> tuple[np.ndarray, bool]:
    """The one screen width per matrix of :func:`exact_product_fp32`:
    ``W = fl(max_i ra_i max_j cb_j)`` as (nb, 1, 1), and whether some W is below
    2^-140 (then zeros must be told apart by their bits, see :func:`screen_fp32`), for
    row bounds ``ra2`` (nb, M) and column norms ``cb2`` (nb, N)."""
    w = (ra2.max(axis=-1, initial=0.0) * cb2.max(axis=-1, initial=0.0))[:, None, None]
    return w, not (w.min(initial=np.inf) >= 2.0**-140)


def flagged(flag: np.ndarray) -> np.ndarray:
    """The flat indices of the True elements of a boolean array, ascending (those of
    ``numpy.flatnonzero``), found faster when few are set (a screen's flags): the
    array is scanned eight bytes at a time, and only the words holding a set byte are
    looked into."""
    f = flag.reshape(-1)
    if f.dtype != np.bool_ or f.size % 8 or not f.flags.c_contiguous:
        return np.flatnonzero(f)
    words = np.flatnonzero(f.view(np.uint64) != 0)
    if words.size > f.size // 64:  # many set: the plain scan is as fast
        return np.flatnonzero(f)
    r, c = np.nonzero(f.reshape(-1, 8)[words])
    return words[r] * 8 + c


def resolve_flagged(flag: np.ndarray, y: np.ndarray, a3: np.ndarray, b3: np.ndarray,
                    s3: np.ndarray, row0: int = 0, col0: int = 0) -> None:
    """The outputs ``flag`` of a screened block (matrices, rows ``row0:``, columns
    ``col0:`` of the float64 BLAS product ``s3`` of ``a3`` and ``b3``, as
    :func:`resolve_fp32` takes them) that :func:`screen_fp32` could not certify: their
    correctly rounded float32 values into ``y`` (the block's results)."""
    idx = flagged(flag)
    if idx.size:
        fb, fi, fj = np.unravel_index(idx, flag.shape)
        y[fb, fi, fj] = resolve_fp32(a3, b3, s3, fb, fi + row0, fj + col0)


def screen_fp32(blk: np.ndarray, w, y: np.ndarray, hi: np.ndarray,
                tiny: bool) -> np.ndarray:
    """The screen of :func:`exact_product_fp32` on a block of float64 BLAS sums ``blk``
    with width ``w`` (a scalar or broadcastable array): writes ``RN32(fl(s^ - W))`` to
    ``y`` and ``RN32(fl(s^ + W))`` to ``hi`` (float32 arrays of the block's shape) and
    returns the mask of the outputs it cannot certify; elsewhere ``y`` is the answer.
    ``tiny``: some W is below 2^-140, so bit patterns are compared and zeros flagged.
    A width of one element (the (1, 1, 1) of :func:`screen_width` for one matrix) is
    used as a scalar: the fastest loops."""
    if isinstance(w, np.ndarray) and w.size == 1:
        w = w.reshape(-1)[0]
    # float64 operations whose results are cast on output (no float64 temporaries)
    with np.errstate(over="ignore"):
        np.subtract(blk, w, out=y, casting="same_kind")
        np.add(blk, w, out=hi, casting="same_kind")
    if tiny:
        flag = y.view(np.uint32) != hi.view(np.uint32)
        flag |= y == 0
        return flag
    return y != hi


def resolve_fp32(a3: np.ndarray, b3: np.ndarray, s3: np.ndarray, bt: np.ndarray,
                 ii: np.ndarray, jj: np.ndarray,
                 stats: ExactStats | None = None) -> np.ndarray:
    """Correctly rounded FP32 values of the outputs ``(bt, ii, jj)`` (in that order) of
    the products of the stacks ``a3`` (nb, M, K) and ``b3`` (nb, K, N) (float64 holding
    finite float32 values) that the screen of :func:`exact_product_fp32` flagged;
    ``s3`` (nb, M, N) holds their float64 BLAS sums (exact zeros may be given their sign
    in place). The steps after the screen in :func:`exact_product_fp32`."""
    k = a3.shape[-1]
    vals = np.empty(bt.size, dtype=np.float32)
    todo = np.arange(bt.size)
    if bt.size * k <= _FEW_ELEMS:  # a few outputs: their factors gathered directly
        p = a3[bt, ii, :] * b3[bt, :, jj]
        ok, v = _fold_certified(p)
        if ok.all():
            return v
        for i in np.flatnonzero(~ok):
            ok[i], v[i] = _fsum_fp32(p[i])
    elif bt.size * k <= _BULK_ELEMS:
        # by matrix and column: the columns of b are then gathered in memory order
        order = np.lexsort((jj, bt))
        ok = np.empty(bt.size, dtype=bool)
        v = np.empty(bt.size, dtype=np.float32)
        for c0, ar, bc in _factor_chunks(a3, b3, bt[order], ii[order], jj[order]):
            sl = order[c0:c0 + ar.shape[0]]
            ok[sl], v[sl] = _fold_certified(ar * bc)
    else:
        ok = np.zeros(bt.size, dtype=bool)
        v = vals
    vals[ok] = v[ok]
    bt, ii, jj, todo = bt[~ok], ii[~ok], jj[~ok], todo[~ok]
    if bt.size:
        st = ExactStats() if stats is None else stats
        if bt.size * k > _BULK_ELEMS:
            done = _exact_blas(a3, b3, s3, bt, ii, jj)
            vals[todo[done]] = s3[bt[done], ii[done], jj[done]]
            bt, ii, jj, todo = bt[~done], ii[~done], jj[~done], todo[~done]
        with np.errstate(over="ignore"):
            vals[todo] = _refine(a3, b3, bt, ii, jj, FP32, st)
    return vals


def exact_matmul_fp32(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """RN32 of the exact product of stacks ``a`` (..., M, K), ``b`` (..., K, N) holding
    float32 values (leading dimensions broadcast): the bytes of :func:`exact_matmul64`
    rounded by ``to_format``, with fewer passes over the outputs when every input is
    finite (the screen of :func:`exact_product_fp32` with the per-output W, whose
    certified outputs are already the float32 answers)."""
    a64 = np.asarray(a, dtype=np.float64)
    b64 = np.asarray(b, dtype=np.float64)
    k = a64.shape[-1]
    if k >= _K_MAX:
        raise ValueError(f"inner dimension {k} too large for the error bound (max 2^40)")
    ra, cb = exact_row_bounds(a64), exact_col_norms(b64)
    # the norms tell whether every input is finite: squares of finite float32 values
    # are at most 2^256, so their sums (k < 2^40 terms) are finite, while an Inf or
    # NaN makes its row's or column's norm Inf or NaN (squares are never negative)
    if not (np.isfinite(ra).all() and np.isfinite(cb).all()):
        x, _ = exact_matmul64(a64, b64, FP32)
        return to_format(x, FP32)
    batch = np.broadcast_shapes(a64.shape[:-2], b64.shape[:-2])
    a3 = np.broadcast_to(a64, batch + a64.shape[-2:])
    b3 = np.broadcast_to(b64, batch + b64.shape[-2:])
    return exact_product_fp32(a3, b3, ra, cb, per_output=True)
