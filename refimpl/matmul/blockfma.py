"""The block fused multiply-add model of NVIDIA tensor-core arithmetic.

Source: Fasi, Higham, Mikaitis and Pranesh, "Numerical behavior of NVIDIA tensor cores",
PeerJ Computer Science 7:e330 (2021), section 3 (V100, T4, A100); Khattak and Mikaitis,
"Accurate models of NVIDIA tensor cores", arXiv 2512.07004 (2025) (A100, H100, B200,
8-bit inputs). One block FMA computes

    d = c + a_1 b_1 + ... + a_n b_n

as a single operation, in this model:

1. every product a_i b_i is exact (no rounding of the products);
2. the exponent of each non-zero term t (c included) is floor(log2 |t|); the largest one,
   e_max, is the alignment point;
3. every term is truncated toward zero (sign-magnitude: the bits shifted out are
   dropped) to a multiple of 2^(e_max - F), F = ``fraction_bits``: F bits are kept
   past the alignment point;
4. the truncated terms are added exactly (the hardware's extra carry bits), normalised
   once, and the result is rounded to the FP32 accumulator with ``output_rounding``
   (round toward zero on the GPUs above: IEEE roundTowardZero, so overflow gives the
   largest finite value).

Special values: any NaN term, 0 * Inf, or Inf of both signs gives NaN; otherwise an
infinite term gives that Inf (what IEEE addition of the terms gives). An exact zero sum
is +0 unless every term, c included, is -0. Zero terms have no exponent and do not take
part in choosing e_max.

A dot product longer than n is processed in successive block FMAs: c starts at +0 (the
``beta = 0`` GEMM), products n*j+1..n*j+n form block j, and block j's d is block j+1's c.
A last partial block holds fewer products (the missing ones are zeros). The FP32
accumulator is rounded to ``out_format`` (nearest-even) at the end.

When all non-zero terms share one exponent and each has at most F + 1 significant bits
(FP16 products have 22, BF16 products 16, FP8 products 8, an FP32 c has 24), the
truncation drops nothing and d is the exact sum rounded once to FP32 with
``output_rounding``: the model degenerates to exact accumulation.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from refimpl.matmul.accumulation import Accumulation
from refimpl.matmul.rounding import FP32, ROUNDINGS, Target, to_format

def _floor_log2(x: Fraction) -> int:
    e = x.numerator.bit_length() - x.denominator.bit_length()
    return e - 1 if Fraction(2) ** e > x else e


def _trunc(x: Fraction) -> int:
    """Toward zero (Python's // floors)."""
    return x.numerator // x.denominator if x >= 0 else -((-x.numerator) // x.denominator)


def _round_fp32(x: Fraction, rounding: str) -> float:
    """Exact rational -> FP32 value, nearest-even or toward zero (overflow: Inf or max)."""
    mag = abs(x)
    e = max(_floor_log2(mag), -126)
    quantum = Fraction(2) ** (e - 23)
    q, r = divmod(mag, quantum)
    if rounding == "nearest_even" and (r > quantum / 2 or (r == quantum / 2 and q % 2)):
        q += 1
    value = q * quantum
    fmax = Fraction(2**24 - 1) * Fraction(2) ** 104
    if value > fmax:
        value = fmax if rounding == "toward_zero" else None
    out = float("inf") if value is None else float(value)
    return -out if x < 0 else out


#: Published parameters (n products per block FMA, F fraction bits kept past the
#: alignment point), all with an FP32 accumulator rounded toward zero.
PRESETS: dict[str, tuple[int, int]] = {
    "V100-FP16": (4, 23),
    "A100-FP16": (8, 24),
    "A100-BF16": (8, 24),
    "A100-TF32": (4, 24),
    "H100-FP16": (16, 25),
    "H100-BF16": (16, 25),
    "H100-FP8": (32, 13),
    "B200-FP8": (32, 25),
}

_NO_EXP = np.int64(-(1 << 20))


@dataclass(frozen=True)
class BlockFMA(Accumulation):
    """Tensor-core block FMA model (module docstring).

    Args:
        n: products per block FMA, >= 1.
        fraction_bits: F, bits kept below the alignment point, 1..50.
        output_rounding: ``"toward_zero"`` (default, the published behaviour) or
            ``"nearest_even"``, applied when the exact block sum goes into FP32.
        name: an optional label (the preset name).
    """

    n: int
    fraction_bits: int
    output_rounding: str = "toward_zero"
    name: str = ""

    def __post_init__(self) -> None:
        for attr, lo, hi in (("n", 1, 1 << 12), ("fraction_bits", 1, 50)):
            v = getattr(self, attr)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not lo <= v <= hi:
                raise ValueError(f"BlockFMA.{attr} must be an int in [{lo}, {hi}], got {v!r}")
        if self.output_rounding not in ROUNDINGS:
            raise ValueError(
                f"BlockFMA.output_rounding must be one of {ROUNDINGS}, "
                f"got {self.output_rounding!r}")
        # the aligned integers must add exactly in float64: (n + 1) * 2^(F + 1) < 2^53
        if (self.n + 1) * 2.0 ** (self.fraction_bits + 1) >= 2.0**53:
            raise ValueError(f"BlockFMA n={self.n}, F={self.fraction_bits} too wide to model")

    @classmethod
    def preset(cls, name: str) -> "BlockFMA":
        """The published model ``name`` (a key of ``PRESETS``)."""
        if name not in PRESETS:
            raise ValueError(f"unknown BlockFMA preset {name!r}; known: {', '.join(PRESETS)}")
        n, f = PRESETS[name]
        return cls(n, f, "toward_zero", name)

    # ------------------------------------------------------------------ plain version
    def dot_reference(self, a: np.ndarray, b: np.ndarray) -> float:
        """One dot product through successive block FMAs, in exact rational arithmetic,
        step by step as the module docstring states it (the plain version that the
        vectorised :meth:`block` path is tested against). Returns the FP32 accumulator."""
        a = [float(v) for v in np.asarray(a, dtype=np.float64).ravel()]
        b = [float(v) for v in np.asarray(b, dtype=np.float64).ravel()]
        c = 0.0
        for k0 in range(0, len(a), self.n):
            c = self._block_reference(c, list(zip(a[k0:k0 + self.n], b[k0:k0 + self.n])))
        return c

    def _block_reference(self, c: float, pairs: list) -> float:
        products = [x * y for x, y in pairs]  # float64: exact for float32 inputs
        terms = [c] + products
        if not all(np.isfinite(t) for t in terms):
            return float(np.sum(np.array(terms, dtype=np.float64)))  # IEEE NaN/Inf rules
        exact = [Fraction(t) for t in terms]
        nonzero = [t for t in exact if t != 0]
        if not nonzero:
            return -0.0 if all(np.signbit(t) for t in terms) else 0.0
        emax = max(_floor_log2(abs(t)) for t in nonzero)
        quantum = Fraction(2) ** (emax - self.fraction_bits)
        total = sum((_trunc(t / quantum) for t in exact), 0) * quantum
        if total == 0:
            return 0.0
        return _round_fp32(total, self.output_rounding)

    # ------------------------------------------------------------------ one block
    def block(self, c: np.ndarray, products: np.ndarray) -> np.ndarray:
        """One block FMA: ``c`` (...) float64 FP32 values, ``products`` (..., m), m <= n,
        exact float64 products. Returns d (...) as float64 FP32 values."""
        terms = np.concatenate([np.asarray(c, dtype=np.float64)[..., None], products], axis=-1)
        mag = np.abs(terms)
        finite = np.isfinite(terms).all(axis=-1)
        _, ex = np.frexp(np.where(np.isfinite(mag), mag, 0.0))
        e = np.where(mag > 0, ex.astype(np.int64) - 1, _NO_EXP)
        emax = e.max(axis=-1)
        shift = (self.fraction_bits - emax).astype(np.int64)
        shift = np.where(emax == _NO_EXP, 0, shift)
        with np.errstate(invalid="ignore"):
            scaled = np.ldexp(np.where(np.isfinite(terms), terms, 0.0),
                              shift[..., None].astype(np.int32))
        total = np.trunc(scaled).sum(axis=-1)  # integers below 2^53: exact in any order
        d = np.ldexp(total, (-shift).astype(np.int32))
        all_neg_zero = np.all((terms == 0) & np.signbit(terms), axis=-1)
        d = np.where(total == 0, np.where(all_neg_zero, -0.0, 0.0), d)
        d = to_format(d, FP32, self.output_rounding).astype(np.float64)
        with np.errstate(invalid="ignore"):
            special = terms.sum(axis=-1)  # IEEE: NaN and Inf rules of the terms' sum
        return np.where(finite, d, special)

    # ------------------------------------------------------------------ streaming
    def begin(self, shape: tuple[int, ...], tgt: Target) -> dict:
        return {"tgt": tgt, "shape": shape, "c": np.zeros(shape), "pa": None, "pb": None}

    def _blocks(self, state: dict, a: np.ndarray, b: np.ndarray, final: bool) -> None:
        k = a.shape[-1]
        full = k if final else (k // self.n) * self.n
        c = state["c"]
        for k0 in range(0, full, self.n):
            ab = a[..., :, None, k0:k0 + self.n]
            bb = np.swapaxes(b[..., k0:k0 + self.n, :], -1, -2)[..., None, :, :]
            with np.errstate(invalid="ignore"):
                c = self.block(c, ab * bb)
        state["c"] = c
        state["pa"], state["pb"] = a[..., :, full:], b[..., full:, :]

    def update(self, state: dict, a: np.ndarray, b: np.ndarray) -> dict:
        if state["pa"] is not None and state["pa"].shape[-1]:
            a = np.concatenate([state["pa"], a], axis=-1)
            b = np.concatenate([state["pb"], b], axis=-2)
        self._blocks(state, a, b, final=False)
        return state

    def finish(self, state: dict) -> np.ndarray:
        if state["pa"] is not None and state["pa"].shape[-1]:
            self._blocks(state, state["pa"], state["pb"], final=True)
        c = np.broadcast_to(state["c"], state["shape"])
        return to_format(c, state["tgt"]) if not state["tgt"].is_fp32 else c.astype(np.float32)

    def __repr__(self) -> str:
        if self.name:
            return f"BlockFMA.preset({self.name!r})"
        return (f"BlockFMA(n={self.n}, fraction_bits={self.fraction_bits}, "
                f"output_rounding={self.output_rounding!r})")
