"""AMD matrix-core (``v_mfma``) arithmetic models: CDNA1 (MI100), CDNA2 (MI210, MI250X),
CDNA3 (MI300X, MI300A): D = A B + C.

Sources: [MMASim] Xie, Wang, Yang, Yang, "MMA-Sim: bit-accurate reference model of
tensor cores and matrix cores", arXiv:2511.10909 (2025), section V and its algorithms
E-FDPA, FTZ-MUL-ADD, TR-FDPA and GTR-FDPA, validated bitwise against MI100, MI250X and
MI300X; [KM25b] Khattak and Mikaitis, "Generalized methodology for determining numerical
features of hardware floating-point matrix multipliers", Part II (CDNA1-3) and the
authors' MATLAB models ``CDNA1.m``, ``CDNA2.m``, ``CDNA3.m`` (the same features: exact
accumulation of 4 (FP16) or 2 (BF16) products on CDNA1; pairwise FP32 additions with
subnormals flushed on CDNA2; 8-term (TF32/XF32: 4, FP8: 16) truncated fused sums with
one extra alignment bit, C added afterwards with round-down alignment and a
round-to-nearest result on CDNA3, FP8 in odd and even halves).

Every model processes k in groups of ``group`` products (the chain of ``v_mfma``
steps inside one instruction and across instructions: each group's result is the next
group's C). Within a group:

- ``"exact"`` (CDNA1, E-FDPA): d = RN32(c + p_1 + ... + p_L), one correct rounding of
  the exact sum, subnormals kept.
- ``"ftz_pairwise"`` (CDNA2, FTZ-MUL-ADD): inputs below their format's smallest normal
  are flushed to +0, C too; every product is formed in FP32 (RN) and every FP32
  addition rounds to nearest, a result below 2^-126 flushed to a zero of its sign; the
  group is summed as a tree: L = 4: d = c + ((p_1 + p_2) + (p_3 + p_4)); L = 2:
  d = c + (p_1 + p_2).
- ``"truncated"`` (CDNA3, TR-FDPA): the products are aligned to their largest
  (unnormalised, as on NVIDIA) exponent e_p and truncated toward zero 24 bits below it
  (one extra alignment bit past FP32's 23), then added exactly: S. C joins afterwards:
  E = max(e_p, e_c) (e_c: C's FP32 exponent field, at least -126); S is rounded down
  (toward -Inf) to a multiple of 2^(E - 31) and c to a multiple of 2^(E - 24); their
  exact sum is rounded to nearest even in FP32 (overflow to Inf).
- ``"truncated_split"`` (CDNA3 FP8, GTR-FDPA): the odd and the even products are summed
  separately as above (S_0 at e_0, S_1 at e_1), both truncated to 2^(max(e_0, e_1) - 24)
  and added; then C as for ``"truncated"`` with truncation toward zero in place of
  rounding down. [MMASim]'s first release rounded down here too; its later release
  truncates, which we follow.

Special values: a NaN term, 0 * Inf or Inf of both signs give NaN, another infinite
term its Inf (IEEE rules of the sum; the hardware returns the default NaN). An exact
zero sum is +0.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Optional

import numpy as np

from refimpl.eft import add_round_to_odd, two_sum
from refimpl.matmul.accumulation import Accumulation
from refimpl.matmul.alignment import NO_EXPONENT, EminLike, emin_pair, exponent_of, exponents
from refimpl.matmul.rounding import Target, to_format
from refimpl.rational import round_rational
from refimpl.validation import check_int

KINDS = ("exact", "ftz_pairwise", "truncated", "truncated_split")

_FTZ = 2.0 ** -126


def _ftz(x: np.ndarray, keep_sign: bool) -> np.ndarray:
    small = np.abs(x) < _FTZ
    return np.where(small, np.copysign(0.0, x) if keep_sign else 0.0, x).astype(x.dtype)


def _floor_to(x: Fraction, q: Fraction) -> Fraction:
    return math.floor(x / q) * q


def _trunc_to(x: Fraction, q: Fraction) -> Fraction:
    v = x / q
    return (math.floor(v) if v >= 0 else -math.floor(-v)) * q


@dataclass(frozen=True)
class MatrixCore(Accumulation):
    """An AMD matrix-core model (module docstring).

    Args:
        kind: one of ``KINDS``.
        group: products per group (L), >= 1 (``"ftz_pairwise"``: 2 or 4;
            ``"truncated_split"``: even).
        input_emin: the exponent field of a subnormal input (the format's minimum
            exponent; a pair for two formats); ``"ftz_pairwise"`` flushes below it.
        name: the preset name.
        fraction_bits: bits kept below the products' alignment exponent (24).
        c_fraction_bits: bits kept below E for the products' sum when C joins (31).
    """

    kind: str
    group: int
    input_emin: EminLike = None
    name: str = ""
    fraction_bits: int = 24
    c_fraction_bits: int = 31

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"MatrixCore.kind must be one of {KINDS}, got {self.kind!r}")
        g = check_int("MatrixCore.group", self.group, minimum=1, maximum=64)
        if self.kind == "ftz_pairwise" and g not in (2, 4):
            raise ValueError(f"MatrixCore.group must be 2 or 4 for ftz_pairwise, got {g}")
        if self.kind == "truncated_split" and g % 2:
            raise ValueError(f"MatrixCore.group must be even for truncated_split, got {g}")

    def __repr__(self) -> str:
        if self.name:
            return f"preset({self.name!r})"
        return f"MatrixCore({self.kind!r}, group={self.group}, input_emin={self.input_emin!r})"

    # ------------------------------------------------------------------ plain version
    def dot_reference(self, a: np.ndarray, b: np.ndarray, c: float = 0.0) -> float:
        """One dot product d = c + sum a_i b_i group by group, step by step as the
        module docstring states it (Fraction arithmetic; the plain version the
        vectorised path is tested against). Returns the FP32 result as a float."""
        a = [float(v) for v in np.asarray(a, dtype=np.float64).ravel()]
        b = [float(v) for v in np.asarray(b, dtype=np.float64).ravel()]
        c = float(c)
        for k0 in range(0, len(a), self.group):
            pa = a[k0:k0 + self.group] + [0.0] * (self.group - len(a[k0:k0 + self.group]))
            pb = b[k0:k0 + self.group] + [0.0] * (self.group - len(b[k0:k0 + self.group]))
            c = self._group_reference(c, pa, pb)
        return c

    def _exp(self, x: float, which: int) -> int:
        return exponent_of(x, emin_pair(self.input_emin)[which])

    def _fused_reference(self, pairs: list) -> tuple[Fraction, Optional[int]]:
        """Products aligned to their largest exponent, truncated F bits below, summed."""
        nz = [(x, y) for x, y in pairs if x != 0 and y != 0]
        if not nz:
            return Fraction(0), None
        e = max(self._exp(x, 0) + self._exp(y, 1) for x, y in nz)
        q = Fraction(2) ** (e - self.fraction_bits)
        return sum((_trunc_to(Fraction(x) * Fraction(y), q) for x, y in nz), Fraction(0)), e

    def _group_reference(self, c: float, a: list, b: list) -> float:
        terms = [c] + [x * y for x, y in zip(a, b)]
        if self.kind == "ftz_pairwise":
            return self._ftz_reference(c, a, b)
        if not all(math.isfinite(t) for t in terms):
            with np.errstate(invalid="ignore"):
                return float(np.sum(np.array(terms, dtype=np.float64)))
        if self.kind == "exact":
            total = sum((Fraction(t) for t in terms), Fraction(0))
            return float(np.float32(_round_fp32(total)))
        pairs = list(zip(a, b))
        rnd = _floor_to if self.kind == "truncated" else _trunc_to
        if self.kind == "truncated":
            s, e = self._fused_reference(pairs)
        else:
            s0, e0 = self._fused_reference(pairs[0::2])
            s1, e1 = self._fused_reference(pairs[1::2])
            es = [x for x in (e0, e1) if x is not None]
            e = max(es) if es else None
            s = Fraction(0)
            if e is not None:
                q = Fraction(2) ** (e - self.fraction_bits)
                s = _trunc_to(s0, q) + _trunc_to(s1, q)
        ec = exponent_of(c, -126) if c != 0 else None
        es = [x for x in (e, ec) if x is not None]
        if not es:
            return 0.0
        big_e = max(es)
        total = rnd(s, Fraction(2) ** (big_e - self.c_fraction_bits))
        total += rnd(Fraction(c), Fraction(2) ** (big_e - self.fraction_bits))
        return float(np.float32(_round_fp32(total)))

    def _ftz_reference(self, c: float, a: list, b: list) -> float:
        f32 = np.float32
        emin = emin_pair(self.input_emin)

        def flush_in(x: float, lo: Optional[int]) -> float:
            return 0.0 if lo is not None and abs(x) < 2.0 ** lo else x

        def ftz(x: np.float32) -> np.float32:
            return f32(x * f32(0.0)) if abs(float(x)) < _FTZ else x

        with np.errstate(over="ignore", invalid="ignore"):
            p = [ftz(f32(flush_in(x, emin[0])) * f32(flush_in(y, emin[1])))
                 for x, y in zip(a, b)]
            acc = f32(0.0) if abs(c) < _FTZ else f32(c)
            for i in range(0, len(p), self.group):
                s = ftz(p[i] + p[i + 1])
                if self.group == 4:
                    s = ftz(s + ftz(p[i + 2] + p[i + 3]))
                acc = ftz(acc + s)
        return float(acc)

    # ------------------------------------------------------------------ vectorised
    def begin(self, shape: tuple[int, ...], tgt: Target, c: np.ndarray | None = None) -> dict:
        if not tgt.is_fp32:
            raise ValueError(f"{self.name or 'MatrixCore'}: v_mfma accumulates in FP32 only; "
                             f"out_format {tgt.name!r} has no hardware model (use fp32)")
        c0 = np.zeros(shape) if c is None else np.broadcast_to(np.asarray(c, np.float64), shape)
        return {"tgt": tgt, "shape": shape, "c": c0, "pa": None, "pb": None}

    def update(self, state: dict, a: np.ndarray, b: np.ndarray) -> dict:
        if state["pa"] is not None and state["pa"].shape[-1]:
            a = np.concatenate([state["pa"], a], axis=-1)
            b = np.concatenate([state["pb"], b], axis=-2)
        full = (a.shape[-1] // self.group) * self.group
        state["c"] = self._groups(state["c"], a[..., :full], b[..., :full, :])
        state["pa"], state["pb"] = a[..., :, full:], b[..., full:, :]
        return state

    def finish(self, state: dict) -> np.ndarray:
        if state["pa"] is not None and state["pa"].shape[-1]:
            a, b = state["pa"], state["pb"]
            pad = self.group - a.shape[-1]
            a = np.concatenate([a, np.zeros(a.shape[:-1] + (pad,))], axis=-1)
            b = np.concatenate([b, np.zeros(b.shape[:-2] + (pad, b.shape[-1]))], axis=-2)
            state["c"] = self._groups(state["c"], a, b)
            state["pa"] = state["pb"] = None
        c = np.broadcast_to(state["c"], state["shape"])
        tgt = state["tgt"]
        return c.astype(np.float32) if tgt.is_fp32 else to_format(c, tgt)

    def run(self, a: np.ndarray, b: np.ndarray, tgt: Target,
            c: np.ndarray | None = None) -> np.ndarray:
        shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])
        return self.finish(self.update(self.begin(shape, tgt, c), a, b))

    def _groups(self, c: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])
        c = np.array(np.broadcast_to(c, shape), dtype=np.float64)
        if a.shape[-1] == 0:
            return c
        emin = emin_pair(self.input_emin)
        if self.kind == "ftz_pairwise":
            a = np.where(np.abs(a) < 2.0 ** emin[0], 0.0, a) if emin[0] is not None else a
            b = np.where(np.abs(b) < 2.0 ** emin[1], 0.0, b) if emin[1] is not None else b
            c = _ftz(c, keep_sign=False)
        if self.kind == "exact" and np.isfinite(a).all() and np.isfinite(b).all():
            return self._exact_groups(c, a, b)
        ea = np.where(a != 0, exponents(a, emin[0]), NO_EXPONENT).astype(np.int32)
        eb = np.where(b != 0, exponents(b, emin[1]), NO_EXPONENT).astype(np.int32)
        bt, ebt = np.swapaxes(b, -1, -2), np.swapaxes(eb, -1, -2)
        m, n, L = shape[-2], shape[-1], self.group
        rows = max(1, (1 << 16) // max(1, n * L))
        for r0 in range(0, m, rows):
            ar, ear = a[..., r0:r0 + rows, None, :], ea[..., r0:r0 + rows, None, :]
            cr = c[..., r0:r0 + rows, :]
            for k0 in range(0, a.shape[-1], L):
                sl = slice(k0, k0 + L)
                with np.errstate(invalid="ignore", over="ignore"):
                    cr = self._group(cr, ar[..., sl], bt[..., None, :, sl],
                                     ear[..., sl] + ebt[..., None, :, sl])
            c[..., r0:r0 + rows, :] = cr
        return c

    def _exact_groups(self, c: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """CDNA1 with finite operands: every group's products are summed first, all groups
        at once, with a TwoSum cascade; where every rounding error of the cascade was
        zero (checked), that sum P is exact and d = RN32(c + P) is one round-to-odd
        addition and one rounding (as in ``_exact_fp32_sums``). An output whose P was
        inexact in any group is recomputed by the general per-group path."""
        m, n, L = c.shape[-2], c.shape[-1], self.group
        g = a.shape[-1] // L
        bt = np.swapaxes(b, -1, -2)
        rows = max(1, (1 << 16) // max(1, n * a.shape[-1]))
        out = np.empty_like(c)
        redo = np.zeros(c.shape, bool)
        for r0 in range(0, m, rows):
            p = a[..., r0:r0 + rows, None, :] * bt[..., None, :, :]
            p = p.reshape(p.shape[:-1] + (g, L))
            s = p[..., 0]
            bad = np.zeros(s.shape, bool)
            for i in range(1, L):
                s, e = two_sum(s, p[..., i])
                bad |= e != 0
            cr = c[..., r0:r0 + rows, :]
            for j in range(g):
                ro = add_round_to_odd(cr, s[..., j])
                ro = np.where(ro == 0, 0.0, ro)  # exact zero (RO of a non-zero is not 0)
                with np.errstate(over="ignore"):
                    cr = ro.astype(np.float32).astype(np.float64)
            out[..., r0:r0 + rows, :] = cr
            redo[..., r0:r0 + rows, :] = bad.any(axis=-1)
        if redo.any():
            a_all = np.broadcast_to(a, c.shape[:-2] + a.shape[-2:])
            b_all = np.broadcast_to(b, c.shape[:-2] + b.shape[-2:])
            for pos in zip(*np.nonzero(redo)):
                out[pos] = self.dot_reference(a_all[pos[:-1]],
                                              b_all[pos[:-2] + (slice(None), pos[-1])],
                                              float(c[pos]))
        return out

    def _group(self, c: np.ndarray, a: np.ndarray, b: np.ndarray, e: np.ndarray) -> np.ndarray:
        if self.kind == "ftz_pairwise":
            return self._ftz_group(c, a, b)
        p = a * b
        finite = np.isfinite(p).all(axis=-1) & np.isfinite(c)
        special = p.sum(axis=-1) + c
        p = np.where(np.isfinite(p), p, 0.0)
        cf = np.where(np.isfinite(c), c, 0.0)
        if self.kind == "exact":
            d = _exact_fp32_sums(np.concatenate([cf[..., None], p], axis=-1))
        else:
            d = self._truncated_group(cf, p, e)
        return np.where(finite, d, special)

    def _fused(self, p: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(S, e_p): products truncated 24 bits below their largest exponent, summed; S
        as an integer count of 2^(e_p - F) (exact in float64: below 2^(F + 2) L)."""
        ep = e.max(axis=-1).astype(np.int64)
        scale = np.ldexp(1.0, np.where(ep < NO_EXPONENT // 2, 0, self.fraction_bits - ep)
                         .astype(np.int32))
        return np.trunc(p * scale[..., None]).sum(axis=-1), ep

    def _truncated_group(self, c: np.ndarray, p: np.ndarray, e: np.ndarray) -> np.ndarray:
        f, f2 = self.fraction_bits, self.c_fraction_bits
        if self.kind == "truncated":
            s, ep = self._fused(p, e)
            rnd = np.floor
        else:
            s0, e0 = self._fused(p[..., 0::2], e[..., 0::2])
            s1, e1 = self._fused(p[..., 1::2], e[..., 1::2])
            ep = np.maximum(e0, e1)
            none = ep < NO_EXPONENT // 2
            s = (np.trunc(np.ldexp(s0, np.where(none, 0, e0 - ep).astype(np.int32)))
                 + np.trunc(np.ldexp(s1, np.where(none, 0, e1 - ep).astype(np.int32))))
            rnd = np.trunc
        ec = np.where(c != 0, exponents(c, -126), NO_EXPONENT)
        big_e = np.maximum(ep, ec)
        none = big_e < NO_EXPONENT // 2
        big_e = np.where(none, 0, big_e)
        # S counts 2^(e_p - F); in units of 2^(E - F2): S 2^(e_p - F - E + F2)
        sp = rnd(np.ldexp(s, np.where(ep < NO_EXPONENT // 2, 0, ep - f - big_e + f2)
                          .astype(np.int32)))
        sc = rnd(np.ldexp(c, (f - big_e).astype(np.int32)))
        total = np.ldexp(sp + np.ldexp(sc, f2 - f), (big_e - f2).astype(np.int32))
        total = np.where(total == 0, 0.0, total)  # an exact zero sum is +0
        with np.errstate(over="ignore"):
            return total.astype(np.float32).astype(np.float64)

    def _ftz_group(self, c: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        f32 = np.float32
        p = _ftz(a.astype(f32) * b.astype(f32), keep_sign=True)
        s = _ftz(p[..., 0] + p[..., 1], keep_sign=True)
        if self.group == 4:
            s = _ftz(s + _ftz(p[..., 2] + p[..., 3], keep_sign=True), keep_sign=True)
        return _ftz(c.astype(f32) + s, keep_sign=True).astype(np.float64)


def _exact_fp32_sums(terms: np.ndarray) -> np.ndarray:
    """RN32 of the exact sum of the finite float64 ``terms`` along the last axis (+0 for
    an exact zero), as float64.

    Knuth's TwoSum cascade gives s and the exact rounding errors; the errors are added
    with TwoSum too, and where every one of those additions is exact, s + err is the
    exact sum: one round-to-odd addition of the two and one round to FP32 is then a
    single correct rounding (Boldo and Melquiond, IEEE TC 57(4), 2008, Theorem 1; see
    ``refimpl.matmul.rounding``). The rare sums where an error addition was inexact are
    summed again exactly with Fraction. No partial sum can overflow: the terms are
    products of FP32 values (below 2^256) and at most 65 of them are added."""
    s = terms[..., 0]
    err = np.zeros_like(s)
    inexact = np.zeros(s.shape, bool)
    for i in range(1, terms.shape[-1]):
        s, e = two_sum(s, terms[..., i])
        err, e2 = two_sum(err, e)
        inexact |= e2 != 0
    with np.errstate(over="ignore"):
        d = add_round_to_odd(s, err).astype(np.float32).astype(np.float64)
    for idx in zip(*np.nonzero(inexact)):
        total = sum((Fraction(float(t)) for t in terms[idx]), Fraction(0))
        d[idx] = float(np.float32(_round_fp32(total)))
    return np.where(d == 0, np.where((terms == 0).all(axis=-1), 0.0, d), d)


def _round_fp32(x: Fraction) -> float:
    """RN32 of an exact rational (FP32 subnormals; a value past the range comes back
    large, and the float32 cast of the callers makes it Inf)."""
    return round_rational(x, 24, -126)
