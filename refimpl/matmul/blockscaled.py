"""Blackwell block-scaled MMA: ``tcgen05.mma`` ``kind::mxf8f6f4`` and ``kind::mxf4nvf4``.

D = A B + C where A (M x K) and B (K x N) hold FP8/FP6/FP4 elements and every
``scale_block`` consecutive elements along K share one scale (E8M0 per 32: MX, OCP MX
v1.0; UE4M3 per 16: NVFP4). PTX ISA 8.7, section 9.7.16.10 (``tcgen05.mma`` with
``.block_scale``): each product is a_i b_i sa sb with the scales of its blocks, C and D
FP32 in tensor memory.

Model ([MMASim] Xie, Wang, Yang, Yang, arXiv:2511.10909, section IV, ST-FDPA and
GST-FDPA, validated on B200; the 25 accumulator bits of ``kind::f8f6f4`` and the wider
FP4 accumulation are also reported by B200 users, DeepGEMM issue 176):

- ``kind::mxf8f6f4`` (k = 32 per instruction, one E8M0 scale pair per instruction): the
  block FMA of ``refimpl.matmul.blockfma`` with every product's exponent raised by the
  two scale exponents, e(a_i) + e(b_i) + e(sa) + e(sb), F = 25 fraction bits below the
  largest exponent (C's included), terms truncated toward zero, the exact sum rounded
  toward zero into FP32.
- ``kind::mxf4nvf4`` (k = 64 per instruction): each group of 16 products is summed
  exactly first (E2M1 products are multiples of 1/4 below 36: the group sums are exact
  small numbers); a group's term is that sum times the significands of its two scales
  (1 for E8M0), with exponent e(sa) + e(sb) alone (the group sum is not normalised);
  these terms and C are aligned, truncated F = 35 bits below the largest exponent,
  summed exactly and rounded toward zero into FP32.
- An element below its format's smallest normal has the format's minimum exponent (the
  exponent field, as for FP8 on every tensor core); [MMASim] reads FP4/FP6 elements
  through FP32 instead (their own exponent), which differs only when a subnormal element
  is in the product of the largest exponent: not measured, our choice.
- Overflow gives Inf; an exact zero sum +0; NaN elements or NaN scales (E8M0 0xFF,
  E4M3 0x7F) NaN; Inf elements (E5M2) the IEEE rules of the sum.

The per-tensor FP32 scales of NVFP4 are not part of the instruction (kernels apply them
in the epilogue): ``block_scaled_matmul`` on NVFP4 operands returns sum q_a sf_a q_b sf_b,
that is the product of the dequantised operands times S_a S_b (rules "te", "te_kernel").
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Optional, Union

import numpy as np

from refimpl import formats as F
from refimpl.formats import get, round_to
from refimpl.matmul import aligned32
from refimpl.matmul.accumulation import preset_model
from refimpl.matmul.alignment import (
    NO_EXPONENT, AccumulatorFormat, exponent_of, exponents, round_fraction, round_into,
    trunc_toward_zero, truncated_sum,
)
from refimpl.scaling import MXArray, NVFP4Array

KINDS = ("mxf8f6f4", "mxf4nvf4")

_ACC = AccumulatorFormat("fp32", 23, -126, 127, "toward_zero", "inf")


@dataclass(frozen=True)
class BlockScaledFMA:
    """A block-scaled tensor-core instruction (module docstring).

    Args:
        kind: ``"mxf8f6f4"`` or ``"mxf4nvf4"``.
        k: products per instruction (32 or 64).
        scale_block: elements per scale (32 for E8M0, 16 for UE4M3).
        scale_format: ``"e8m0"`` or ``"e4m3"`` (UE4M3: the sign bit is ignored).
        fraction_bits: F (25 for mxf8f6f4, 35 for mxf4nvf4).
        name: the preset name.
    """

    kind: str
    k: int
    scale_block: int
    scale_format: str
    fraction_bits: int
    name: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"BlockScaledFMA.kind must be one of {KINDS}, got {self.kind!r}")
        if self.scale_format not in ("e8m0", "e4m3"):
            raise ValueError(f"BlockScaledFMA.scale_format must be 'e8m0' or 'e4m3', "
                             f"got {self.scale_format!r}")
        if self.k % self.scale_block or (self.kind == "mxf4nvf4" and self.scale_block % 16):
            raise ValueError("BlockScaledFMA: k must be a multiple of scale_block, and "
                             "scale_block of 16 for mxf4nvf4")

    def __repr__(self) -> str:
        return f"preset({self.name!r})" if self.name else (
            f"BlockScaledFMA({self.kind!r}, k={self.k}, scale_block={self.scale_block}, "
            f"scale_format={self.scale_format!r}, fraction_bits={self.fraction_bits})")

    @property
    def _scale_emin(self) -> Optional[int]:
        return -6 if self.scale_format == "e4m3" else None

    # ------------------------------------------------------------------ plain version
    def dot_reference(self, a, sa, b, sb, c: float = 0.0,
                      emin: tuple[Optional[int], Optional[int]] = (None, None)) -> float:
        """One dot product: ``a``, ``b`` element values (length K, a multiple of
        ``scale_block``), ``sa``, ``sb`` their scale values (K / scale_block each),
        ``emin`` the element formats' minimum exponents. Fraction arithmetic, step by
        step (the plain version the vectorised path is tested against)."""
        a = [float(v) for v in np.ravel(a)]
        b = [float(v) for v in np.ravel(b)]
        sa = [abs(float(v)) for v in np.ravel(sa)]
        sb = [abs(float(v)) for v in np.ravel(sb)]
        c = float(c)
        bs = self.scale_block
        for k0 in range(0, len(a), self.k):
            idx = range(k0, min(k0 + self.k, len(a)))
            c = self._block_reference(c, [(a[i], b[i], sa[i // bs], sb[i // bs]) for i in idx],
                                      emin)
        return c

    def _block_reference(self, c: float, items: list, emin) -> float:
        values = [c] + [x * y * s * t for x, y, s, t in items]
        if not all(np.isfinite(v) for v in values):
            with np.errstate(invalid="ignore"):
                return float(np.sum(np.array(values, dtype=np.float64)))
        terms, exps = [Fraction(c)], [exponent_of(c, -126) if c else None]
        se = self._scale_emin
        if self.kind == "mxf8f6f4":
            for x, y, s, t in items:
                if x * y * s * t != 0:
                    terms.append(Fraction(x) * Fraction(y) * Fraction(s) * Fraction(t))
                    exps.append(exponent_of(x, emin[0]) + exponent_of(y, emin[1])
                                + exponent_of(s, se) + exponent_of(t, se))
        else:
            for g in range(0, len(items), 16):
                grp = items[g:g + 16]
                s, t = grp[0][2], grp[0][3]
                p = sum((Fraction(x) * Fraction(y) for x, y, _, _ in grp), Fraction(0))
                if p != 0 and s != 0 and t != 0:
                    terms.append(p * Fraction(s) * Fraction(t))
                    exps.append(exponent_of(s, se) + exponent_of(t, se))
        known = [e for e in exps if e is not None]
        if not known:
            return 0.0
        q = Fraction(2) ** (max(known) - self.fraction_bits)
        total = sum((trunc_toward_zero(v / q) for v in terms), 0) * q
        return round_fraction(total, _ACC)

    # ------------------------------------------------------------------ vectorised
    def run(self, a: np.ndarray, sa: np.ndarray, b: np.ndarray, sb: np.ndarray,
            c: Optional[np.ndarray], emin: tuple[Optional[int], Optional[int]]) -> np.ndarray:
        """float64 ``a`` (M, K), ``sa`` (M, K / bs), ``b`` (K, N), ``sb`` (K / bs, N),
        ``c`` (M, N) or None; K a multiple of ``k``. Returns float32 (M, N)."""
        m, kk = a.shape
        n = b.shape[1]
        d = np.zeros((m, n)) if c is None else np.array(c, dtype=np.float64)
        bs = self.scale_block
        sa_full = np.abs(np.repeat(sa, bs, axis=1))       # (M, K)
        sb_full = np.abs(np.repeat(sb, bs, axis=0))       # (K, N)
        se = self._scale_emin
        if (self.kind == "mxf8f6f4" and self.scale_format == "e8m0"
                and all(np.isfinite(x).all() for x in (a, b, sa, sb))):
            # the block FMA of n = k products of the scaled elements a sa, b sb (exact in
            # float64: powers of two 2^-127..2^127 times elements of at most 4 bits), whose
            # exponents e(x) + e(s) are at least floor(log2 |x s|) (E8M0: equal but for
            # a subnormal element's floor), as aligned32.plan requires
            a_s, b_s = a * sa_full, b * sb_full
            exps = (exponents(a, emin[0]) + exponents(sa_full, se),
                    exponents(b, emin[1]) + exponents(sb_full, se))
            prepared = aligned32.plan(a_s, b_s, self.k, self.fraction_bits, (None, None), exps)
            if prepared is not None:
                return aligned32.run(prepared, d, _ACC, None).astype(np.float32)
        if self.kind == "mxf4nvf4" and _e2m1_values(a) and _e2m1_values(b) and all(
                np.isfinite(x).all() for x in (sa, sb)):
            return self._fp4_run(a, sa, b, sb, d, se).astype(np.float32)
        rows = max(1, (1 << 16) // max(1, n * self.k))
        with np.errstate(invalid="ignore", over="ignore"):
            for r0 in range(0, m, rows):
                r = slice(r0, r0 + rows)
                dr = d[r]
                for k0 in range(0, kk, self.k):
                    ks = slice(k0, k0 + self.k)
                    dr = self._block(dr, a[r, None, ks], sa_full[r, None, ks],
                                     b[ks].T[None], sb_full[ks].T[None], emin, se)
                d[r] = dr
        return d.astype(np.float32)

    def _fp4_run(self, a, sa, b, sb, d, se) -> np.ndarray:
        """``kind::mxf4nvf4`` with E2M1 elements and finite scales: the group sums of 16
        products by a float64 matrix product, then each instruction's terms and C aligned
        and truncated (as in :meth:`_block`).

        The matrix product is exact in any summation order: E2M1 values are multiples of
        1/2 at most 6 in magnitude, so every product is a multiple of 1/4 of magnitude at
        most 36, and every partial sum of at most 16 of them a multiple of 1/4 below
        2^10: representable in float64 (12 bits), so each multiplication, addition or
        fused multiply-add the BLAS performs is exact."""
        groups = self.k // 16
        f = self.fraction_bits
        for k0 in range(0, a.shape[1], self.k):
            terms, exps = [], []
            for g in range(groups):
                ks = slice(k0 + 16 * g, k0 + 16 * g + 16)
                s_a = np.abs(sa[:, ks.start // self.scale_block])[:, None]
                s_b = np.abs(sb[ks.start // self.scale_block])[None, :]
                t = (a[:, ks] @ b[ks, :]) * s_a * s_b   # exact: at most 12 + 4 + 4 bits
                terms.append(t)
                exps.append(np.where(t != 0, exponents(s_a, se) + exponents(s_b, se),
                                     NO_EXPONENT))
            cfin = np.isfinite(d)
            cf = np.where(cfin, d, 0.0)
            eta = np.where(cf != 0, exponents(cf, -126), NO_EXPONENT)
            for e in exps:
                eta = np.maximum(eta, e)
            # the terms on the grid 2^(eta - F), as truncated_sum: integers below 2^(F + 12)
            # (a group sum is below 2^10, the scales' significands below 2 each), five of
            # them add exactly in float64
            shift = np.where(eta < NO_EXPONENT // 2, 0, f - eta).astype(np.int32)
            scale = np.ldexp(1.0, shift)
            total = np.trunc(cf * scale)
            for t in terms:
                total += np.trunc(t * scale)
            total = np.where(total == 0, 0.0, total)  # an exact zero sum is +0
            out = round_into(total / scale, _ACC)
            d = np.where(cfin, out, d)   # Inf or NaN C: the IEEE sum with finite terms
        return d

    def _block(self, c, a, sa, b, sb, emin, se) -> np.ndarray:
        p = a * b * sa * sb  # exact: at most 4 + 4 + 4 + 4 significant bits in float64
        special = p.sum(axis=-1) + c
        finite = np.isfinite(special)
        cf = np.where(np.isfinite(c), c, 0.0)
        if self.kind == "mxf8f6f4":
            e = (exponents(a, emin[0]) + exponents(b, emin[1]) + exponents(sa, se)
                 + exponents(sb, se))
            e = np.where(p != 0, e, NO_EXPONENT)
            terms = p
        else:
            shape = p.shape[:-1] + (p.shape[-1] // 16, 16)
            grp = (a * b).reshape(shape).sum(axis=-1)       # exact: multiples of 1/4
            s_a, s_b = sa[..., ::16], sb[..., ::16]
            terms = grp * s_a * s_b
            e = exponents(s_a, se) + exponents(s_b, se)
            e = np.where(np.isfinite(terms) & (terms != 0), e, NO_EXPONENT)
            terms = np.where(np.isfinite(terms), terms, 0.0)
        ec = np.where(cf != 0, exponents(cf, -126), NO_EXPONENT)
        terms = np.concatenate([np.broadcast_to(cf[..., None], terms.shape[:-1] + (1,)),
                                np.where(np.isfinite(terms), terms, 0.0)], axis=-1)
        e = np.concatenate([np.broadcast_to(ec[..., None], e.shape[:-1] + (1,)), e], axis=-1)
        d = round_into(truncated_sum(terms, e, self.fraction_bits, None), _ACC)
        return np.where(finite, d, special)


def _e2m1_values(x: np.ndarray) -> bool:
    """Whether every entry of ``x`` is a finite E2M1 value (a multiple of 1/2 of
    magnitude at most 6)."""
    with np.errstate(invalid="ignore"):
        return bool(np.all((np.abs(x) <= 6) & (x * 2 == np.trunc(x * 2))))


def _values(x: Any, name: str) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype == bool or not (np.issubdtype(arr.dtype, np.floating)
                                 or np.issubdtype(arr.dtype, np.integer)):
        raise TypeError(f"{name} must be a real float array, got dtype {arr.dtype}")
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D, got shape {arr.shape}")
    return arr.astype(np.float64)


def _in_formats(in_format, model: BlockScaledFMA):
    if in_format is None:
        if model.kind != "mxf4nvf4":
            raise ValueError(f"{model.name or 'kind::mxf8f6f4'}: in_format is required "
                             "(e4m3, e5m2, e3m2, e2m3 or e2m1, or a pair)")
        in_format = "e2m1"
    pair = in_format if isinstance(in_format, tuple) else (in_format, in_format)
    fmts = tuple(get(f) for f in pair)
    allowed = ("e2m1",) if model.kind == "mxf4nvf4" else ("e4m3", "e5m2", "e3m2", "e2m3",
                                                          "e2m1")
    for f in fmts:
        if f.name not in allowed:
            raise ValueError(f"{model.name}: element format {f.name!r} not supported "
                             f"(supported: {', '.join(allowed)})")
    return fmts


def block_scaled_matmul(
    a: Any, a_scales: Any, b: Any, b_scales: Any, c: Any = None, *,
    accumulate: Union[str, BlockScaledFMA] = "B200-MXF8F6F4",
    in_format: Any = None,
) -> np.ndarray:
    """D = A B + C on a block-scaled tensor-core preset (module docstring).

    Special values: see the module docstring (NaN scales give NaN outputs).

    Args:
        a: (M, K) element values (values of ``in_format``, e.g. decoded E4M3 codes).
        a_scales: (M, K / scale_block) scale values (powers of two for E8M0, UE4M3
            values for NVFP4).
        b: (K, N) element values.
        b_scales: (K / scale_block, N) scale values.
        c: optional (M, N) FP32 accumulator input (broadcast like the output).
        accumulate: ``"B200-MXF8F6F4"`` (default), ``"B200-MXF4"``, ``"B200-NVF4"`` (or
            their aliases) or a :class:`BlockScaledFMA`.
        in_format: the element format (a pair for A and B); required for mxf8f6f4,
            E2M1 for mxf4nvf4.

    Returns:
        (M, N) float32. K is padded with zero elements (scale 1) to a multiple of the
        instruction's k.

    Raises:
        TypeError: non-numeric arrays.
        ValueError: wrong shapes, values not of ``in_format`` or of the scale format,
            an unknown preset or element format.
    """
    model = preset_model(accumulate) if isinstance(accumulate, str) else accumulate
    if not isinstance(model, BlockScaledFMA):
        raise ValueError(f"accumulate {accumulate!r} is not a block-scaled preset; use "
                         "refimpl.matmul.matmul")
    a64, b64 = _values(a, "a"), _values(b, "b")
    sa, sb = _values(a_scales, "a_scales"), _values(b_scales, "b_scales")
    (m, k), (k2, n) = a64.shape, b64.shape
    bs = model.scale_block
    if k != k2:
        raise ValueError(f"inner dimensions differ: a has K = {k}, b has K = {k2}")
    if k % bs:
        raise ValueError(f"K = {k} is not a multiple of the scale block {bs}")
    if sa.shape != (m, k // bs) or sb.shape != (k // bs, n):
        raise ValueError(f"scales: expected a_scales {(m, k // bs)} and b_scales "
                         f"{(k // bs, n)}, got {sa.shape} and {sb.shape}")
    fa, fb = _in_formats(in_format, model)
    sfmt = get(model.scale_format)
    for x, f, name in ((a64, fa, "a"), (b64, fb, "b"), (sa, sfmt, "a_scales"),
                       (sb, sfmt, "b_scales")):
        with np.errstate(over="ignore", invalid="ignore"):
            back = np.asarray(round_to(np.abs(x) if f is sfmt else x, f), dtype=np.float64)
        ref = np.abs(x) if f is sfmt else x
        bad = ~((back == ref) | np.isnan(ref))
        if bad.any():
            where = tuple(int(i) for i in np.argwhere(bad)[0])
            raise ValueError(f"{name}{list(where)} = {float(x[where])!r} is not a "
                             f"{f.name} value")
    pad = -k % model.k
    if pad:
        a64 = np.concatenate([a64, np.zeros((m, pad))], axis=1)
        b64 = np.concatenate([b64, np.zeros((pad, n))], axis=0)
        sa = np.concatenate([sa, np.ones((m, pad // bs))], axis=1)
        sb = np.concatenate([sb, np.ones((pad // bs, n))], axis=0)
    c64 = None
    if c is not None:
        carr = np.asarray(c)
        if carr.dtype == bool or not np.issubdtype(carr.dtype, np.number):
            raise TypeError(f"c must be a real float array, got dtype {carr.dtype}")
        try:
            c64 = np.broadcast_to(carr.astype(np.float64), (m, n))
        except ValueError:
            raise ValueError(f"c has shape {carr.shape}, which does not broadcast to "
                             f"{(m, n)}") from None
        with np.errstate(over="ignore"):
            bad = c64.astype(np.float32).astype(np.float64) != c64
        if (bad & ~np.isnan(c64)).any():
            raise ValueError("c must hold FP32 values")
    return model.run(a64, sa, b64, sb, c64, (fa.emin, fb.emin))


def mma_block_scaled(qa: Any, qb: Any, c: Any = None, *,
                     accumulate: Union[str, BlockScaledFMA, None] = None) -> np.ndarray:
    """:func:`block_scaled_matmul` on quantised operands: ``MXArray`` (``refimpl.scaling``,
    E8M0 scales per 32, blocks along K: axis 1 of A, axis 0 of B) or ``NVFP4Array``
    (1 x 16 blocks along K). The default preset is ``"B200-MXF8F6F4"`` for MX FP8/FP6
    elements, ``"B200-MXF4"`` for MXFP4 and ``"B200-NVF4"`` for NVFP4. NVFP4's
    per-tensor scales are not applied (module docstring).

    Raises:
        TypeError: operands of another type, or of two different kinds.
        ValueError: blocks not along K, MXINT8 elements, NVFP4 16 x 16 tiles.
    """
    if isinstance(qa, MXArray) and isinstance(qb, MXArray):
        for q, ax, name in ((qa, 1, "qa"), (qb, 0, "qb")):
            if q.codes.ndim != 2 or q.axis != ax:
                raise ValueError(f"{name}: a 2-D MXArray with blocks along K (axis {ax})")
            if not isinstance(q.fmt, F.Format):
                raise ValueError(f"{name}: MXINT8 elements have no tensor-core preset here")
        if accumulate is None:
            accumulate = "B200-MXF4" if qa.fmt.name == qb.fmt.name == "e2m1" \
                else "B200-MXF8F6F4"
        with np.errstate(over="ignore"):
            vals = [F.decode(q.codes, q.fmt).astype(np.float64) for q in (qa, qb)]
            scales = [np.where(q.scales == 0xFF, np.nan,
                               np.ldexp(1.0, q.scales.astype(np.int64) - 127)) for q in (qa, qb)]
        return block_scaled_matmul(vals[0], scales[0], vals[1], scales[1], c,
                                   accumulate=accumulate,
                                   in_format=(qa.fmt.name, qb.fmt.name))
    if isinstance(qa, NVFP4Array) and isinstance(qb, NVFP4Array):
        for q, ax, name in ((qa, 1, "qa"), (qb, 0, "qb")):
            if q.codes.ndim != 2 or q.axis != ax or tuple(q.block) != (1, 16):
                raise ValueError(f"{name}: a 2-D NVFP4Array with 1 x 16 blocks along K "
                                 f"(axis {ax})")
        vals = [F.decode(q.codes, "e2m1").astype(np.float64) for q in (qa, qb)]
        scales = [F.decode(q.scales, "e4m3").astype(np.float64) for q in (qa, qb)]
        return block_scaled_matmul(vals[0], scales[0], vals[1], scales[1], c,
                                   accumulate=accumulate or "B200-NVF4", in_format="e2m1")
    raise TypeError(f"qa and qb must both be MXArray or both NVFP4Array, got "
                    f"{type(qa).__name__} and {type(qb).__name__}")
