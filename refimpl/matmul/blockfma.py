"""The block fused multiply-add model of NVIDIA tensor-core arithmetic.

Sources:

- [FHMP21] Fasi, Higham, Mikaitis and Pranesh, "Numerical behavior of NVIDIA tensor
  cores", PeerJ Computer Science 7:e330 (2021): V100, T4 and A100 compute
  d = c + sum a_i b_i with exact products, significands aligned to the largest
  exponent with the bits shifted out truncated, one normalisation at the end and an FP32
  result rounded toward zero; FP16 and FP32 subnormals are supported in input and
  output.
- [KM25] Khattak and Mikaitis, "Accurate models of NVIDIA tensor cores",
  arXiv:2512.07004 (2025), section 4.1 and Table 3, with the authors' MATLAB models
  (``Generic_BFMA_TC.m`` and the per-GPU ``V100TC.m``, ``A100TC.m``, ``H100TC.m``,
  ``B200TC.m``), validated bit for bit against V100, A100, H100 and B200: the block
  sizes, the number of extra alignment bits, the unnormalised product exponents, the
  alignment floor and the 13-bit H100 FP8 accumulator used below.

One block FMA computes d = c + a_1 b_1 + ... + a_n b_n as a single operation:

1. every product a_i b_i is exact; its significand (in [1, 4) for normal inputs) is
   *not* renormalised, and its exponent is e(a_i) + e(b_i), the sum of the inputs'
   exponents as stored (``product_exponent="unnormalised"``, [KM25]); an input below
   the smallest normal number of its format has the exponent ``input_emin`` of that
   format (its exponent field), a normal input floor(log2 |x|);
2. c is a term too, with its FP32 exponent max(floor(log2 |c|), -126);
3. the alignment exponent eta is the largest exponent of a non-zero term (zero terms
   take no part), raised to ``align_floor`` if it is lower ([KM25]'s minimum alignment
   exponent);
4. every term, c included, is truncated toward zero in sign-magnitude (the magnitude's
   bits below the grid are dropped, the sign kept) to a multiple of 2^(eta - F),
   F = ``fraction_bits`` = 23 + the extra alignment bits of [KM25];
5. the truncated terms are added exactly (the hardware's carry bits), normalised once,
   and the result is rounded to ``output_fraction_bits`` fraction bits (FP32: 23) with
   ``output_rounding`` (toward zero on every GPU above: the bits past the last one kept
   are dropped), FP32's exponent range and subnormal spacing applying.

The alternative ``product_exponent="normalised"`` gives every term the exponent
floor(log2 |t|) of its exact value (c included, without the -126 clamp). It differs
from the published model when the product with the largest exponent has a significand
of 2 or more: the grid is then one bit coarser.

Special values: any NaN term, 0 * Inf, or Inf of both signs gives NaN; otherwise an
infinite term gives that Inf (what IEEE addition of the terms gives). An exact zero sum
is +0 unless every term, c included, is -0 (a block of ``matmul`` never sees that: c
starts at +0). A finite sum beyond the largest value rounds toward zero to the largest
finite value (IEEE roundTowardZero; [FHMP21] and [KM25] do not report tensor-core
overflow, so this is the IEEE rule, not a measured one).

A dot product longer than n is processed in successive block FMAs: c starts at +0 (the
``beta = 0`` GEMM), products n*j+1..n*j+n form block j, and block j's d is block j+1's c
([KM25]'s GEMM: recursive summation of tensor-core results). A last partial block holds
fewer products (the missing ones are zeros). The accumulator is rounded to
``out_format`` (nearest-even) at the end.

Presets (``PRESETS``: name -> (n, F); the other parameters in ``PRESET_OPTIONS``), all
rounding the output toward zero. n and F: [KM25] Table 3 and the per-GPU models (F = 23
+ extra alignment bits), V100 and A100 also [FHMP21]; align_floor: [KM25] Table 3 (the
models' minimum alignment exponent); input_emin: the input format's minimum exponent.

=========== ==== ==== ============ =========== ====== ===================================
preset       n    F   input_emin   align_floor output notes
=========== ==== ==== ============ =========== ====== ===================================
V100-FP16    4   23   -14 (FP16)   none        23     0 extra alignment bits
A100-FP16    8   24   -14 (FP16)   -132        23     1 extra bit
A100-BF16    8   24   -126 (BF16)  -132        23     1 extra bit
A100-TF32    4   24   -126 (TF32)  -132        23     1 extra bit
H100-FP16   16   25   -14 (FP16)   -133        23     2 extra bits
H100-BF16   16   25   -126 (BF16)  -133        23     2 extra bits
H100-FP8    32   13   none         -133        13     two interleaved 16-product halves;
                                                      -10 extra bits: a 13-bit
                                                      accumulator, its output included
B200-FP8    32   25   none         -133        23     2 extra bits
=========== ==== ==== ============ =========== ====== ===================================

The FP8 presets leave ``input_emin`` unset because one name serves E4M3 and E5M2
operands: a subnormal operand is read with its own exponent. To follow [KM25] exactly
on E4M3 data use ``dataclasses.replace(BlockFMA.preset("H100-FP8"), input_emin=-6)``
(E5M2: -14). ``input_emin`` only matters when a subnormal operand enters a product of
the largest exponent.

When all non-zero terms share one exponent and each has at most F + 1 significant bits
(FP16 products have 22, BF16 products 16, FP8 products 8, an FP32 c has 24), the
truncation drops nothing and d is the exact sum rounded once with ``output_rounding``:
the model degenerates to exact accumulation.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Optional

import numpy as np

from refimpl.matmul.accumulation import Accumulation
from refimpl.matmul.rounding import FP32, ROUNDINGS, Target, to_format

#: Exponent choices for a product (module docstring, step 1).
PRODUCT_EXPONENTS = ("unnormalised", "normalised")

#: FP32's smallest normal exponent: c's exponent field never reads lower.
_FP32_EMIN = -126


def _floor_log2(x: Fraction) -> int:
    e = x.numerator.bit_length() - x.denominator.bit_length()
    return e - 1 if Fraction(2) ** e > x else e


def _trunc(x: Fraction) -> int:
    """Toward zero (Python's // floors)."""
    return x.numerator // x.denominator if x >= 0 else -((-x.numerator) // x.denominator)


def _round_acc(x: Fraction, rounding: str, bits: int) -> float:
    """Exact rational -> a value with ``bits`` fraction bits in FP32's exponent range,
    nearest-even or toward zero (overflow: Inf, or the largest finite value)."""
    mag = abs(x)
    e = max(_floor_log2(mag), _FP32_EMIN)
    quantum = Fraction(2) ** (e - bits)
    q, r = divmod(mag, quantum)
    if rounding == "nearest_even" and (r > quantum / 2 or (r == quantum / 2 and q % 2)):
        q += 1
    value = q * quantum
    fmax = Fraction(2 ** (bits + 1) - 1) * Fraction(2) ** (127 - bits)
    if value > fmax:
        value = fmax if rounding == "toward_zero" else None
    out = float("inf") if value is None else float(value)
    return -out if x < 0 else out


#: Published parameters (n products per block FMA, F fraction bits kept past the
#: alignment exponent); sources in the module docstring.
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

#: The presets' other published parameters (module docstring table).
PRESET_OPTIONS: dict[str, dict] = {
    "V100-FP16": {"input_emin": -14, "align_floor": None, "output_fraction_bits": 23},
    "A100-FP16": {"input_emin": -14, "align_floor": -132, "output_fraction_bits": 23},
    "A100-BF16": {"input_emin": -126, "align_floor": -132, "output_fraction_bits": 23},
    "A100-TF32": {"input_emin": -126, "align_floor": -132, "output_fraction_bits": 23},
    "H100-FP16": {"input_emin": -14, "align_floor": -133, "output_fraction_bits": 23},
    "H100-BF16": {"input_emin": -126, "align_floor": -133, "output_fraction_bits": 23},
    "H100-FP8": {"input_emin": None, "align_floor": -133, "output_fraction_bits": 13},
    "B200-FP8": {"input_emin": None, "align_floor": -133, "output_fraction_bits": 23},
}

_NO_EXP = np.int64(-(1 << 20))


def _optional_int(v: object) -> bool:
    return v is None or (not isinstance(v, bool) and isinstance(v, (int, np.integer)))


@dataclass(frozen=True)
class BlockFMA(Accumulation):
    """Tensor-core block FMA model (module docstring).

    Args:
        n: products per block FMA, >= 1.
        fraction_bits: F, bits kept below the alignment exponent, 1..50.
        output_rounding: ``"toward_zero"`` (default, the published behaviour) or
            ``"nearest_even"``, applied when the exact block sum goes into the accumulator.
        name: an optional label (the preset name).
        product_exponent: ``"unnormalised"`` (default, [KM25]: e(a) + e(b), the product's
            significand in [1, 4)) or ``"normalised"`` (floor(log2 |t|) of every term).
        input_emin: the exponent an input below 2^input_emin (a subnormal of the input
            format) has; ``None`` (default): floor(log2 |x|) for every input. The presets
            set their format's value (FP16 -14, BF16/TF32 -126, E4M3 -6).
        align_floor: the lowest alignment exponent (``None``, default: no floor).
        output_fraction_bits: fraction bits of the accumulator, 1..23 (default 23: FP32;
            the H100 FP8 path keeps 13).
    """

    n: int
    fraction_bits: int
    output_rounding: str = "toward_zero"
    name: str = ""
    product_exponent: str = "unnormalised"
    input_emin: Optional[int] = None
    align_floor: Optional[int] = None
    output_fraction_bits: int = 23

    def __post_init__(self) -> None:
        for attr, lo, hi in (("n", 1, 1 << 12), ("fraction_bits", 1, 50),
                             ("output_fraction_bits", 1, 23)):
            v = getattr(self, attr)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not lo <= v <= hi:
                raise ValueError(f"BlockFMA.{attr} must be an int in [{lo}, {hi}], got {v!r}")
        if self.output_rounding not in ROUNDINGS:
            raise ValueError(
                f"BlockFMA.output_rounding must be one of {ROUNDINGS}, "
                f"got {self.output_rounding!r}")
        if self.product_exponent not in PRODUCT_EXPONENTS:
            raise ValueError(
                f"BlockFMA.product_exponent must be one of {PRODUCT_EXPONENTS}, "
                f"got {self.product_exponent!r}")
        for attr in ("input_emin", "align_floor"):
            v = getattr(self, attr)
            if not _optional_int(v) or (v is not None and not -1100 <= v <= 1100):
                raise ValueError(f"BlockFMA.{attr} must be None or an int in [-1100, 1100], "
                                 f"got {v!r}")
        # the aligned integers must add exactly in float64: a product is below 4 * 2^eta,
        # c below 2 * 2^eta, so the sum is below (4 n + 2) 2^F
        if (4 * self.n + 2) * 2.0**self.fraction_bits > 2.0**53:
            raise ValueError(f"BlockFMA n={self.n}, F={self.fraction_bits} too wide to model")

    @classmethod
    def preset(cls, name: str) -> "BlockFMA":
        """The published model ``name`` (a key of ``PRESETS``; parameters and sources in
        the module docstring)."""
        if name not in PRESETS:
            raise ValueError(f"unknown BlockFMA preset {name!r}; known: {', '.join(PRESETS)}")
        n, f = PRESETS[name]
        return cls(n, f, "toward_zero", name, **PRESET_OPTIONS[name])

    # ------------------------------------------------------------------ plain version
    def dot_reference(self, a: np.ndarray, b: np.ndarray) -> float:
        """One dot product through successive block FMAs, in exact rational arithmetic,
        step by step as the module docstring states it (the plain version that the
        vectorised :meth:`block` path is tested against). Returns the accumulator."""
        a = [float(v) for v in np.asarray(a, dtype=np.float64).ravel()]
        b = [float(v) for v in np.asarray(b, dtype=np.float64).ravel()]
        c = 0.0
        for k0 in range(0, len(a), self.n):
            c = self._block_reference(c, list(zip(a[k0:k0 + self.n], b[k0:k0 + self.n])))
        return c

    def _input_exponent(self, x: float) -> int:
        e = _floor_log2(abs(Fraction(x)))
        return e if self.input_emin is None else max(e, self.input_emin)

    def _block_reference(self, c: float, pairs: list) -> float:
        products = [x * y for x, y in pairs]  # float64: exact for float32 inputs
        terms = [c] + products
        if not all(np.isfinite(t) for t in terms):
            with np.errstate(invalid="ignore"):
                return float(np.sum(np.array(terms, dtype=np.float64)))  # IEEE NaN/Inf rules
        if self.product_exponent == "unnormalised":
            exps = [self._input_exponent(x) + self._input_exponent(y)
                    for (x, y), p in zip(pairs, products) if p != 0]
            if c != 0:
                exps.append(max(_floor_log2(abs(Fraction(c))), _FP32_EMIN))
        else:
            exps = [_floor_log2(abs(Fraction(t))) for t in terms if t != 0]
        if not exps:
            return -0.0 if all(np.signbit(t) for t in terms) else 0.0
        eta = max(exps)
        if self.align_floor is not None:
            eta = max(eta, self.align_floor)
        quantum = Fraction(2) ** (eta - self.fraction_bits)
        total = sum((_trunc(Fraction(t) / quantum) for t in terms), 0) * quantum
        if total == 0:
            return 0.0
        return _round_acc(total, self.output_rounding, self.output_fraction_bits)

    # ------------------------------------------------------------------ one block
    def _exponents(self, x: np.ndarray) -> np.ndarray:
        """floor(log2 |x|) of finite non-zero x (clamped to ``input_emin``); any value
        elsewhere (those terms are masked by the caller)."""
        mag = np.abs(x)
        _, ex = np.frexp(np.where(np.isfinite(mag), mag, 0.0))
        e = ex.astype(np.int64) - 1
        return e if self.input_emin is None else np.maximum(e, self.input_emin)

    def _round_out(self, d: np.ndarray) -> np.ndarray:
        """Exact float64 block sums -> the accumulator (``output_fraction_bits``)."""
        if self.output_fraction_bits == 23:
            return to_format(d, FP32, self.output_rounding).astype(np.float64)
        bits = self.output_fraction_bits
        mag = np.abs(d)
        _, ex = np.frexp(mag)
        e = np.maximum(ex.astype(np.int64) - 1, _FP32_EMIN)
        q = np.ldexp(mag, (bits - e).astype(np.int32))  # exact: a power-of-two scaling
        # np.rint rounds half to even
        q = np.trunc(q) if self.output_rounding == "toward_zero" else np.rint(q)
        y = np.ldexp(q, (e - bits).astype(np.int32))
        fmax = (2.0 - 2.0**-bits) * 2.0**127
        y = np.where(y > fmax, fmax if self.output_rounding == "toward_zero" else np.inf, y)
        return np.copysign(y, d)

    def block(self, c: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """One block FMA: ``c`` (...) float64 accumulator values; ``a`` and ``b`` the
        operands (..., m), m <= n, broadcasting against each other and ``c``. Returns d
        (...) as float64 accumulator values."""
        a = np.asarray(a, dtype=np.float64)
        b = np.asarray(b, dtype=np.float64)
        c = np.asarray(c, dtype=np.float64)
        with np.errstate(invalid="ignore"):
            products = a * b
        products, c = np.broadcast_arrays(products, c[..., None])
        terms = np.concatenate([c[..., :1], products], axis=-1)
        if self.product_exponent == "unnormalised":
            ep = self._exponents(a) + self._exponents(b)
            ec = np.maximum(np.frexp(np.where(np.isfinite(c[..., :1]), c[..., :1], 0.0))[1]
                            .astype(np.int64) - 1, _FP32_EMIN)
            e = np.concatenate([ec, np.broadcast_to(ep, products.shape)], axis=-1)
        else:
            mag = np.abs(terms)
            e = np.frexp(np.where(np.isfinite(mag), mag, 0.0))[1].astype(np.int64) - 1
        e = np.where(np.isfinite(terms) & (terms != 0), e, _NO_EXP)
        emax = e.max(axis=-1)
        if self.align_floor is not None:
            emax = np.where(emax == _NO_EXP, emax, np.maximum(emax, self.align_floor))
        shift = np.where(emax == _NO_EXP, 0, self.fraction_bits - emax).astype(np.int64)
        with np.errstate(invalid="ignore"):
            scaled = np.ldexp(np.where(np.isfinite(terms), terms, 0.0),
                              shift[..., None].astype(np.int32))
        total = np.trunc(scaled).sum(axis=-1)  # integers below 2^53: exact in any order
        d = np.ldexp(total, (-shift).astype(np.int32))
        all_neg_zero = np.all((terms == 0) & np.signbit(terms), axis=-1)
        d = np.where(total == 0, np.where(all_neg_zero, -0.0, 0.0), d)
        d = self._round_out(d)
        finite = np.isfinite(terms).all(axis=-1)
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
            c = self.block(c, ab, bb)
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
        extra = "".join(
            f", {f}={getattr(self, f)!r}" for f, default in (
                ("product_exponent", "unnormalised"), ("input_emin", None),
                ("align_floor", None), ("output_fraction_bits", 23))
            if getattr(self, f) != default)
        return (f"BlockFMA(n={self.n}, fraction_bits={self.fraction_bits}, "
                f"output_rounding={self.output_rounding!r}{extra})")
