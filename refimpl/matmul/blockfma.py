"""The block fused multiply-add model of NVIDIA tensor-core arithmetic: D = A B + C.

Sources:

- [FHMP21] Fasi, Higham, Mikaitis and Pranesh, "Numerical behavior of NVIDIA tensor
  cores", PeerJ Computer Science 7:e330 (2021): V100, T4 and A100 compute
  d = c + sum a_i b_i with exact products, significands aligned to the largest
  exponent with the bits shifted out truncated, one normalisation at the end and an FP32
  result rounded toward zero; FP16 and FP32 subnormals are supported in input and
  output.
- [KM25] Khattak and Mikaitis, "Accurate models of NVIDIA tensor cores",
  arXiv:2512.07004 (2025), section 4.1 and Table 3, with the authors' MATLAB models
  (``Generic_BFMA_TC.m``, ``V100TC.m``, ``A100TC.m``, ``AdaTC.m``, ``L40STC.m``,
  ``H100TC.m``, ``B200TC.m``), validated bit for bit against V100, A2, A30, A100,
  Ada RTX 1000, L40S, H100, H200 and B200 on 10^5 random inputs: block sizes, extra
  alignment bits, unnormalised product exponents, the alignment floor, the 13-bit FP8
  accumulator of Hopper and Ada, FP16 outputs rounded to nearest.
- [MMASim] Xie, Wang, Yang and Yang, "MMA-Sim: bit-accurate reference model of tensor
  cores and matrix cores", arXiv:2511.10909 (2025), the truncated fused dot-product-add
  (T-FDPA): fraction bits 23 (Volta), 24 (Turing, Ampere, Ada), 25 (Hopper, Blackwell),
  13 for FP8 on Ada (``mma``) and Hopper (``wgmma``), FP16 results rounded to nearest
  even, overflow to Inf; validated bitwise against the hardware.
- NVIDIA PTX ISA 8.x, sections 9.7.14 (``mma``: D = A * B + C, C and D in FP32 or
  FP16) and 9.7.16 (``tcgen05.mma``, ``kind::f8f6f4``, ``kind::mxf8f6f4``,
  ``kind::mxf4nvf4``).

One block FMA computes d = c + a_1 b_1 + ... + a_n b_n as a single operation:

1. every product a_i b_i is exact; its significand (in [1, 4) for normal inputs) is
   *not* renormalised, and its exponent is e(a_i) + e(b_i), the sum of the inputs'
   exponents as stored (``product_exponent="unnormalised"``, [KM25], [MMASim]); an
   input below the smallest normal number of its format has the exponent
   ``input_emin`` of that format (its exponent field: FP16 -14, BF16/TF32 -126, E4M3
   -6, E5M2 -14), a normal input floor(log2 |x|);
2. c is a term too (``c_placement="inside"``), with the exponent field of the
   accumulator format: max(floor(log2 |c|), -126) in FP32, -14 in FP16;
3. the alignment exponent eta is the largest exponent of a non-zero term (zero terms
   take no part), raised to ``align_floor`` if it is lower ([KM25]'s minimum alignment
   exponent; ``align_floor_fp16`` when the accumulator is FP16);
4. every term, c included, is truncated toward zero in sign-magnitude (the magnitude's
   bits below the grid are dropped, the sign kept) to a multiple of 2^(eta - F),
   F = ``fraction_bits`` = 23 + the extra alignment bits of [KM25];
5. the truncated terms are added exactly (the hardware's carry bits), normalised once,
   and the result is rounded into the accumulator: FP32 with ``output_rounding``
   (toward zero on every NVIDIA GPU: the bits past the last one kept are dropped) to
   ``output_fraction_bits`` (23, or 13 on the FP8 paths of Hopper and Ada: an
   E8M13 accumulator), FP32's exponent range and subnormal spacing applying; FP16
   rounded to nearest even ([KM25], [MMASim]; FP16 subnormals kept).

Where C enters (``c_placement``):

- ``"inside"``: c is one of the block's terms (steps 2-4): Volta, Turing, Ampere, Ada,
  Hopper ``mma``/``wgmma`` (with FP8 operands and FP32 accumulators too) and Blackwell
  ``tcgen05.mma``.
- ``"after"``: the products alone form the block sum (steps 1, 3-5 without c), which is
  rounded into the accumulator as above and then added to c with a separate
  round-to-nearest-even addition in the accumulator format: d = RN(c + RZ(sum)).
  Blackwell ``mma.sync`` with FP8 operands, and Hopper's with FP8 operands and FP16
  accumulators (with the interleaved halves below): on [KM25]'s published B200 outputs
  for random C the ``"inside"`` model (their ``B200TC.m``) is off by one unit in the
  last place on about a third of the samples, this placement on none (``tcgen05.mma``,
  modelled by [MMASim], keeps C inside).

Interleaved halves (``interleave=True``): the block's n products are summed as two
chained block FMAs of n/2 products each, taken in pairs: first the products whose index
within the block is 0 or 1 modulo 4 (k = 0, 1, 4, 5, ...), then those at 2 or 3 modulo 4
(k = 2, 3, 6, 7, ...). The first half starts from c (``"inside"``) or from +0
(``"after"``); its result, rounded into the accumulator, is the c term of the second
half, whose result is rounded into the accumulator again; with ``"after"``, C is then
added with one round-to-nearest-even addition. Hopper and Blackwell ``mma.sync`` with
FP8 operands and FP16 accumulators: [KM25]'s published H100, H200 and B200 outputs
(``model_validation`` of the authors' repository, 5000 dot products per GPU and format)
are reproduced bit for bit by halves of 16 with F = 25, each rounded to nearest even into
FP16, and C added last; their ``GEMM.m`` of early 2026 had this pattern
(``inter_pattern``), their later ``H100TC.m`` keeps the comment "FMA size is 16, but
interleaved pattern is used to join two 16-element vectors". Blackwell's FP32 outputs
are reproduced by the same halves with FP32 accumulators.

Two datapaths (``fp16_model``): an instruction whose ``.f16`` accumulator form computes
differently from its ``.f32`` form (Hopper ``mma.sync`` with FP8 operands: 13-bit FP8
accumulation into FP32, the interleaved FP16 pattern above into FP16) is one model with
a second :class:`BlockFMA` used whenever the accumulator is FP16.

Overflow: a normalised sum at or above 2^128 (FP32; FP16: 65520 after rounding) gives
Inf of its sign, also when rounding toward zero (``overflow="inf"``, what [MMASim] and
the hardware tests report; [KM25] models the FP32 exponent field overflowing to Inf
too). ``overflow="saturate"`` gives the IEEE roundTowardZero answer (the largest finite
value) instead.

Special values: any NaN term, 0 * Inf, or Inf of both signs gives NaN; otherwise an
infinite term gives that Inf (what IEEE addition of the terms gives). An exact zero sum
is +0 (both published models return +0; a non-zero sum that underflows keeps its sign).

A dot product longer than n is processed in successive block FMAs: c starts at C (or
+0 when no C is given: the ``beta = 0`` GEMM), products n*j+1..n*j+n form block j, and
block j's d is block j+1's c ([KM25]'s GEMM: recursive summation of tensor-core
results; PTX: a longer K is a chain of ``mma`` instructions, D of one the C of the
next). A last partial block holds fewer products (the missing ones are zeros). For an
output format other than FP32 and FP16 the accumulator is FP32 and is rounded to
``out_format`` (nearest-even) at the end.

The alternative ``product_exponent="normalised"`` gives every term the exponent
floor(log2 |t|) of its exact value (c included, without the -126 clamp). It differs
from the published model when the product with the largest exponent has a significand
of 2 or more: the grid is then one bit coarser.

When all non-zero terms share one exponent and each has at most F + 1 significant bits
(FP16 products have 22, BF16 products 16, FP8 products 8, an FP32 c has 24), the
truncation drops nothing and d is the exact sum rounded once with ``output_rounding``:
the model degenerates to exact accumulation.

The presets (every GPU and input format, their parameters and sources) are in
``refimpl.matmul.presets``; ``BlockFMA.preset(name)`` returns one.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Optional

import numpy as np

from refimpl.eft import add_round_to_odd
from refimpl.matmul import aligned32
from refimpl.matmul.accumulation import Accumulation, preset_model
from refimpl.matmul.alignment import (
    NO_EXPONENT, AccumulatorFormat, EminLike, emin_pair, exponent_of, exponents,
    round_fraction, round_into, trunc_toward_zero, truncated_sum,
)
from refimpl.matmul.rounding import FP32, ROUNDINGS, Target, to_format
from refimpl.rounding_modes import rounding_mode
from refimpl.validation import check_int

#: Exponent choices for a product (module docstring, step 1).
PRODUCT_EXPONENTS = ("unnormalised", "normalised")

#: Where C enters a block FMA (module docstring).
C_PLACEMENTS = ("inside", "after")

#: What a sum beyond the accumulator's range gives (module docstring).
OVERFLOWS = ("inf", "saturate")

def _nearest(acc: AccumulatorFormat) -> AccumulatorFormat:
    """The accumulator format of ``acc`` with full precision, rounding to nearest even
    and overflowing to Inf: the separate addition of C (``c_placement="after"``)."""
    return AccumulatorFormat(acc.name, 23 if acc.name == "fp32" else 10, acc.emin,
                             acc.emax, "nearest_even", "inf")


def _add_after(c: np.ndarray, s: np.ndarray, acc: AccumulatorFormat) -> np.ndarray:
    """RN(c + s) in the accumulator (one rounding: round-to-odd first), an overflowed
    block sum ``s`` (Inf) kept: finite c cannot bring it back.

    For the FP32 and FP16 accumulators that one rounding is the float64 sum converted to
    float32 (float16): c and s are values of the accumulator, and the float64 sum of two
    24-bit values rounded once more to 24 bits is the correctly rounded sum (double
    rounding is innocuous for addition when the first precision is at least 2p + 1 bits:
    S. A. Figueroa, "When is double rounding innocuous?", SIGNUM Newsletter 30(3), 1995;
    53 >= 49), the float64 sum of two FP16 values is exact (their exponents span less than
    53 bits); the conversions overflow to Inf and keep subnormals as round_into does."""
    with np.errstate(invalid="ignore", over="ignore"):
        if acc.name in ("fp32", "fp16"):
            rounded = (c + s).astype(np.float32 if acc.name == "fp32" else np.float16)
            return np.where(np.isinf(s), s, rounded.astype(np.float64))
        return np.where(np.isinf(s), s, round_into(add_round_to_odd(c, s), _nearest(acc)))


def _add_after_ieee(c: np.ndarray, s: np.ndarray, acc: AccumulatorFormat) -> np.ndarray:
    """:func:`_add_after` where c and s are finite, their IEEE sum elsewhere (Inf of
    one sign, or NaN)."""
    with np.errstate(invalid="ignore"):
        special = c + s
    return np.where(np.isfinite(c) & np.isfinite(s), _add_after(c, s, acc), special)


def _optional_int(v: object) -> bool:
    return v is None or (not isinstance(v, bool) and isinstance(v, (int, np.integer)))


def accumulator(model: "BlockFMA", tgt: Target) -> AccumulatorFormat:
    """The accumulator of ``model`` for output target ``tgt``: FP16 for an FP16 output
    when the instruction has FP16 accumulators (``fp16_accumulator``), FP32
    (``output_fraction_bits``) otherwise."""
    if tgt.name == "fp16" and model.fp16_accumulator:
        return AccumulatorFormat("fp16", 10, -14, 15, model.fp16_rounding, model.overflow)
    return AccumulatorFormat("fp32", model.output_fraction_bits, -126, 127,
                             model.output_rounding, model.overflow)


@dataclass(frozen=True)
class BlockFMA(Accumulation):
    """Tensor-core block FMA model (module docstring).

    Args:
        n: products per block FMA, >= 1.
        fraction_bits: F, bits kept below the alignment exponent, 1..40.
        output_rounding: rounding into an FP32 accumulator, ``"toward_zero"`` (default,
            the published behaviour) or ``"nearest_even"``.
        name: an optional label (the preset name).
        product_exponent: ``"unnormalised"`` (default, [KM25]: e(a) + e(b), the product's
            significand in [1, 4)) or ``"normalised"`` (floor(log2 |t|) of every term).
        input_emin: the exponent an input below 2^input_emin (a subnormal of the input
            format) has; ``None`` (default): floor(log2 |x|) for every input. A pair
            ``(emin_a, emin_b)`` for operands of two formats (E4M3 x E5M2).
        align_floor: the lowest alignment exponent with an FP32 accumulator (``None``,
            default: no floor).
        output_fraction_bits: fraction bits of the FP32 accumulator, 1..23 (default 23;
            the FP8 paths of Hopper and Ada keep 13).
        c_placement: ``"inside"`` (default) or ``"after"`` (module docstring).
        overflow: ``"inf"`` (default, the hardware) or ``"saturate"``.
        fp16_rounding: rounding into an FP16 accumulator (default ``"nearest_even"``).
        align_floor_fp16: the lowest alignment exponent with an FP16 accumulator.
        fp16_accumulator: whether an FP16 output is accumulated in FP16 (default True:
            ``mma`` with FP16 or FP8 operands and ``.f16`` C/D); False for BF16/TF32,
            whose instructions accumulate in FP32 only: an FP16 output is then the FP32
            result rounded to nearest even at the end (a kernel's epilogue).
        interleave: whether a block is two chained halves of n/2 products interleaved in
            pairs (module docstring; n a multiple of 4). Default False.
        fp16_model: the model used when the accumulator is FP16 (module docstring: two
            datapaths), a BlockFMA without a ``fp16_model`` of its own; ``None``
            (default): this model for both accumulators.
    """

    n: int
    fraction_bits: int
    output_rounding: str = "toward_zero"
    name: str = ""
    product_exponent: str = "unnormalised"
    input_emin: EminLike = None
    align_floor: Optional[int] = None
    output_fraction_bits: int = 23
    c_placement: str = "inside"
    overflow: str = "inf"
    fp16_rounding: str = "nearest_even"
    align_floor_fp16: Optional[int] = None
    fp16_accumulator: bool = True
    interleave: bool = False
    fp16_model: Optional["BlockFMA"] = None

    def __post_init__(self) -> None:
        for attr, lo, hi in (("n", 1, 1 << 12), ("fraction_bits", 1, 40),
                             ("output_fraction_bits", 1, 23)):
            check_int(f"BlockFMA.{attr}", getattr(self, attr), minimum=lo, maximum=hi)
        for attr in ("output_rounding", "fp16_rounding"):  # plain names, one vocabulary
            object.__setattr__(self, attr, rounding_mode(getattr(self, attr),
                                                         f"BlockFMA.{attr}", allowed=ROUNDINGS))
        for attr, allowed in (("product_exponent", PRODUCT_EXPONENTS),
                              ("c_placement", C_PLACEMENTS), ("overflow", OVERFLOWS)):
            if getattr(self, attr) not in allowed:
                raise ValueError(f"BlockFMA.{attr} must be one of {allowed}, "
                                 f"got {getattr(self, attr)!r}")
        emin = self.input_emin
        pair = emin if isinstance(emin, tuple) else (emin,)
        if isinstance(emin, tuple) and len(emin) != 2:
            raise ValueError(f"BlockFMA.input_emin must be None, an int or a pair, got {emin!r}")
        for attr, vals in (("input_emin", pair), ("align_floor", (self.align_floor,)),
                           ("align_floor_fp16", (self.align_floor_fp16,))):
            for v in vals:
                if not _optional_int(v) or (v is not None and not -1100 <= v <= 1100):
                    raise ValueError(f"BlockFMA.{attr} must be None or an int in "
                                     f"[-1100, 1100], got {getattr(self, attr)!r}")
        # the aligned integers must add exactly in float64: a product is below 4 * 2^eta,
        # c below 2 * 2^eta, so the sum is below (4 n + 2) 2^F
        if (4 * self.n + 2) * 2.0**self.fraction_bits > 2.0**53:
            raise ValueError(f"BlockFMA n={self.n}, F={self.fraction_bits} too wide to model")
        self._check_datapaths()

    def _check_datapaths(self) -> None:
        """Validate ``interleave`` and ``fp16_model``."""
        if not isinstance(self.interleave, (bool, np.bool_)):
            raise ValueError(f"BlockFMA.interleave must be True or False, "
                             f"got {self.interleave!r}")
        if self.interleave and self.n % 4:
            raise ValueError(f"BlockFMA.interleave pairs the products in fours: n must be a "
                             f"multiple of 4, got n={self.n}")
        f16 = self.fp16_model
        if f16 is None:
            return
        if not isinstance(f16, BlockFMA) or f16.fp16_model is not None:
            raise ValueError("BlockFMA.fp16_model must be None or a BlockFMA without a "
                             f"fp16_model of its own, got {f16!r}")
        if not self.fp16_accumulator:
            raise ValueError("BlockFMA.fp16_model needs fp16_accumulator=True (an FP16 "
                             "output of an FP32-only instruction is rounded at the end)")

    def for_accumulator(self, name: str) -> "BlockFMA":
        """The model that computes with accumulator ``name`` (``"fp32"`` or ``"fp16"``):
        ``fp16_model`` for an FP16 accumulator when one is given, else this model."""
        if name == "fp16" and self.fp16_accumulator and self.fp16_model is not None:
            return self.fp16_model
        return self

    @classmethod
    def preset(cls, name: str) -> "BlockFMA":
        """The published model ``name`` (a BlockFMA preset of
        ``refimpl.matmul.presets``, aliases included).

        Raises:
            ValueError: an unknown name, or a preset that is not a BlockFMA model.
        """
        model = preset_model(name)
        if not isinstance(model, cls):
            raise ValueError(f"preset {name!r} is not a BlockFMA model ({model!r})")
        return model

    # ------------------------------------------------------------------ plain version
    def dot_reference(self, a: np.ndarray, b: np.ndarray, c: float = 0.0,
                      out_format: str = "fp32") -> float:
        """One dot product d = c + sum a_i b_i through successive block FMAs, in exact
        rational arithmetic, step by step as the module docstring states it (the plain
        version that the vectorised :meth:`block` path is tested against). ``c`` is a
        value of the accumulator (``out_format`` ``"fp32"`` or ``"fp16"``). Returns the
        accumulator."""
        model = self.for_accumulator(out_format)
        if model is not self:
            return model.dot_reference(a, b, c, out_format)
        acc = accumulator(self, FP32 if out_format == "fp32" else Target("fp16", 11, -14))
        a = [float(v) for v in np.asarray(a, dtype=np.float64).ravel()]
        b = [float(v) for v in np.asarray(b, dtype=np.float64).ravel()]
        c = float(c)
        for k0 in range(0, len(a), self.n):
            c = self._block_reference(c, list(zip(a[k0:k0 + self.n], b[k0:k0 + self.n])), acc)
        if out_format == "fp16" and acc.name == "fp32":  # FP32 result, rounded at the end
            with np.errstate(over="ignore"):
                return float(np.float16(c)) if np.isfinite(c) else c
        return c

    def _input_exponent(self, x: float, which: int) -> int:
        return exponent_of(x, emin_pair(self.input_emin)[which])

    def _block_reference(self, c: float, pairs: list, acc: AccumulatorFormat) -> float:
        if self.interleave:
            return self._interleaved_reference(c, pairs, acc)
        products = [x * y for x, y in pairs]  # float64: exact for float32 inputs
        terms = [c] + products
        if not all(np.isfinite(t) for t in terms):
            with np.errstate(invalid="ignore"):
                return float(np.sum(np.array(terms, dtype=np.float64)))  # IEEE NaN/Inf rules
        inside = self.c_placement == "inside"
        if self.product_exponent == "unnormalised":
            exps = [self._input_exponent(x, 0) + self._input_exponent(y, 1)
                    for (x, y), p in zip(pairs, products) if p != 0]
            if c != 0 and inside:
                exps.append(exponent_of(c, acc.emin))
        else:
            exps = [exponent_of(t, None) for t in (terms if inside else products)
                    if t != 0]
        total = Fraction(0)
        if exps:
            eta = max(exps)
            floor = self.align_floor if acc.name == "fp32" else self.align_floor_fp16
            if floor is not None:
                eta = max(eta, floor)
            quantum = Fraction(2) ** (eta - self.fraction_bits)
            summed = terms if inside else products
            total = sum((trunc_toward_zero(Fraction(t) / quantum) for t in summed),
                        0) * quantum
        s = round_fraction(total, acc)
        if inside:
            return s
        if np.isinf(s):  # the block overflowed: c (finite) cannot bring it back
            return s
        exact = Fraction(c) + Fraction(s)  # one addition, round to nearest even
        return round_fraction(exact, _nearest(acc))

    # ------------------------------------------------------------------ one block
    def _term_exponents(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        ea, eb = emin_pair(self.input_emin)
        return exponents(a, ea) + exponents(b, eb)

    def block(self, c: np.ndarray, a: np.ndarray, b: np.ndarray,
              acc: AccumulatorFormat | None = None) -> np.ndarray:
        """One block FMA: ``c`` (...) float64 accumulator values; ``a`` and ``b`` the
        operands (..., m), m <= n, broadcasting against each other and ``c``. Returns d
        (...) as float64 accumulator values (FP32 accumulator unless ``acc`` given)."""
        acc = acc or accumulator(self, FP32)
        model = self.for_accumulator(acc.name)
        if model is not self:
            return model.block(c, a, b, accumulator(model, Target("fp16", 11, -14)))
        if self.interleave:
            return self._interleaved_block(c, a, b, acc)
        a = np.asarray(a, dtype=np.float64)
        b = np.asarray(b, dtype=np.float64)
        c = np.asarray(c, dtype=np.float64)
        with np.errstate(invalid="ignore"):
            products = a * b
        shape = np.broadcast_shapes(products.shape[:-1], c.shape)
        products = np.broadcast_to(products, shape + products.shape[-1:])
        c = np.broadcast_to(c, shape)
        inside = self.c_placement == "inside"
        if self.product_exponent == "unnormalised":
            e = np.broadcast_to(self._term_exponents(a, b), products.shape)
        else:
            e = exponents(products, None)
        e = np.where(np.isfinite(products) & (products != 0), e, NO_EXPONENT)
        finite_p = np.where(np.isfinite(products), products, 0.0)
        floor = self.align_floor if acc.name == "fp32" else self.align_floor_fp16
        if inside:
            cf = np.where(np.isfinite(c), c, 0.0)
            if self.product_exponent == "unnormalised":
                ec = exponents(cf, acc.emin)
            else:
                ec = exponents(cf, None)
            ec = np.where(cf != 0, ec, NO_EXPONENT)
            terms = np.concatenate([cf[..., None], finite_p], axis=-1)
            e = np.concatenate([ec[..., None], e], axis=-1)
            d = round_into(truncated_sum(terms, e, self.fraction_bits, floor), acc)
        else:
            s = round_into(truncated_sum(finite_p, e, self.fraction_bits, floor), acc)
            d = _add_after(c, s, acc)
        finite = np.isfinite(products).all(axis=-1) & np.isfinite(c)
        with np.errstate(invalid="ignore"):
            special = products.sum(axis=-1) + c  # IEEE: NaN and Inf rules of the terms' sum
        return np.where(finite, d, special)

    # ------------------------------------------------------------------ streaming
    def begin(self, shape: tuple[int, ...], tgt: Target, c: np.ndarray | None = None) -> dict:
        model = self.for_accumulator("fp16" if tgt.name == "fp16" else "fp32")
        if model is not self:
            return model.begin(shape, tgt, c)
        acc = accumulator(self, tgt)
        c0 = np.zeros(shape) if c is None else np.broadcast_to(
            np.asarray(c, dtype=np.float64), shape)
        return {"tgt": tgt, "acc": acc, "shape": shape, "c": c0, "pa": None, "pb": None,
                "model": self}

    def _blocks(self, state: dict, a: np.ndarray, b: np.ndarray, final: bool) -> None:
        if state.get("model", self) is not self:
            return state["model"]._blocks(state, a, b, final)
        if self.interleave:
            return self._interleaved_blocks(state, a, b, final)
        k = a.shape[-1]
        full = k if final else (k // self.n) * self.n
        c = state["c"]
        if full and self._fast_ok(a[..., :full], b[..., :full, :]):
            c = self._fast_blocks(c, a[..., :full], b[..., :full, :], state["acc"])
        else:
            for k0 in range(0, full, self.n):
                ab = a[..., :, None, k0:k0 + self.n]
                bb = np.swapaxes(b[..., k0:k0 + self.n, :], -1, -2)[..., None, :, :]
                c = self.block(c, ab, bb, state["acc"])
        state["c"] = c
        state["pa"], state["pb"] = a[..., :, full:], b[..., full:, :]

    # ------------------------------------------------------------------ fast path
    def _fast_ok(self, a: np.ndarray, b: np.ndarray) -> bool:
        return (self.product_exponent == "unnormalised" and bool(np.isfinite(a).all())
                and bool(np.isfinite(b).all()))

    def _fast_blocks(self, c: np.ndarray, a: np.ndarray, b: np.ndarray,
                     acc: AccumulatorFormat) -> np.ndarray:
        """Every block of finite operands ``a`` (..., M, K), ``b`` (..., K, N), K a
        multiple of n or the final slice, starting from the accumulator ``c``.

        The same arithmetic as :meth:`block` in fewer passes: an operand's exponent is
        found once (a zero operand gets ``NO_EXPONENT``, so a zero product's exponent sum
        stays far below every real one), a term is scaled by the power of two 2^(F - eta)
        with one multiplication (exact: a product of two float32 values has at most 48
        bits and the scaled values that are 1 or more are far from float64's subnormal
        range; smaller ones truncate to 0 either way), and the rows are processed in
        chunks that stay in cache. A non-finite accumulator (C given as Inf or NaN, or
        an overflow in an earlier block) passes through unchanged, as IEEE addition of
        finite products to it gives."""
        ea_pair = emin_pair(self.input_emin)
        shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])
        floor = self.align_floor if acc.name == "fp32" else self.align_floor_fp16
        if self.c_placement == "inside" and ((a.ndim == 2 and b.ndim == 2) or (
                a.ndim == 3 and b.ndim == 3 and a.shape[0] == b.shape[0])):
            prepared = aligned32.plan(a, b, self.n, self.fraction_bits, ea_pair)
            if prepared is not None:
                return aligned32.run(prepared, np.broadcast_to(c, shape), acc, floor)
        ea = np.where(a != 0, exponents(a, ea_pair[0]), NO_EXPONENT).astype(np.int32)
        eb = np.where(b != 0, exponents(b, ea_pair[1]), NO_EXPONENT).astype(np.int32)
        bt = np.swapaxes(b, -1, -2)       # (..., N, K)
        ebt = np.swapaxes(eb, -1, -2)
        c = np.array(np.broadcast_to(c, shape), dtype=np.float64)
        m, n, k = shape[-2], shape[-1], a.shape[-1]
        rows = max(1, (1 << 16) // max(1, n * min(k, self.n)))
        for r0 in range(0, m, rows):
            ar, ear = a[..., r0:r0 + rows, None, :], ea[..., r0:r0 + rows, None, :]
            cr = c[..., r0:r0 + rows, :]
            for k0 in range(0, k, self.n):
                sl = slice(k0, k0 + self.n)
                cr = self._fast_block(cr, ar[..., sl], bt[..., None, :, sl],
                                      ear[..., sl] + ebt[..., None, :, sl], acc, floor)
            c[..., r0:r0 + rows, :] = cr
        return c

    def _fast_after_blocks(self, c: np.ndarray, a: np.ndarray, b: np.ndarray,
                           acc: AccumulatorFormat, n: int) -> np.ndarray:
        """Blocks of ``n`` products of the (C inside) half model ``self``, each a chain
        of its n / self.n blocks from +0, whose result is added to ``c`` with one
        rounding (:func:`_add_after_ieee`); ``a`` (..., M, K) and ``b`` (..., K, N) with
        K a multiple of n."""
        shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])
        floor = self.align_floor if acc.name == "fp32" else self.align_floor_fp16
        if a.ndim == 2 and b.ndim == 2:
            prepared = aligned32.plan(a, b, self.n, self.fraction_bits,
                                      emin_pair(self.input_emin))
            if prepared is not None:
                return aligned32.run(prepared, np.broadcast_to(c, shape), acc, floor,
                                     chain=n // self.n,
                                     combine=lambda c0, s: _add_after_ieee(c0, s, acc))
        nb = a.shape[-1] // n
        ab = np.moveaxis(a.reshape(a.shape[:-1] + (nb, n)), -2, -3)
        bb = b.reshape(b.shape[:-2] + (nb, n, b.shape[-1]))
        s = self._fast_blocks(np.zeros(1), ab, bb, acc)
        for j in range(nb):
            c = _add_after_ieee(c, s[..., j, :, :], acc)
        return c

    def _fast_block(self, c: np.ndarray, a: np.ndarray, b: np.ndarray, e: np.ndarray,
                    acc: AccumulatorFormat, floor: Optional[int]) -> np.ndarray:
        inside = self.c_placement == "inside"
        cfin = np.isfinite(c)
        cf = np.where(cfin, c, 0.0)
        eta = e.max(axis=-1).astype(np.int64)
        if inside:
            ec = np.where(cf != 0, exponents(cf, acc.emin), NO_EXPONENT)
            eta = np.maximum(eta, ec)
        none = eta < NO_EXPONENT // 2
        if floor is not None:
            eta = np.maximum(eta, floor)
        shift = np.where(none, 0, self.fraction_bits - eta)
        scale = np.ldexp(1.0, shift.astype(np.int32))
        t = a * b
        t *= scale[..., None]
        np.trunc(t, out=t)
        total = t.sum(axis=-1)
        if inside:
            total += np.trunc(cf * scale)
        total = np.where(total == 0, 0.0, total)  # an exact zero sum is +0
        s = round_into(total / scale, acc)
        if not inside:
            s = _add_after(cf, s, acc)
        return np.where(cfin, s, c)

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
        tgt = state["tgt"]
        if tgt.is_fp32 or state["acc"].name == tgt.name:
            return c.astype(np.float32)
        return to_format(c, tgt)

    def run(self, a: np.ndarray, b: np.ndarray, tgt: Target,
            c: np.ndarray | None = None) -> np.ndarray:
        shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])
        return self.finish(self.update(self.begin(shape, tgt, c), a, b))

    # ------------------------------------------------------------------ interleaved halves
    def _half(self) -> "BlockFMA":
        """One half of an interleaved block: n/2 products with the block's c as a term."""
        return replace(self, n=self.n // 2, interleave=False, c_placement="inside",
                       fp16_model=None, name="")

    def _halves(self) -> tuple[np.ndarray, np.ndarray]:
        """Indices of the two halves of a block (padded to n products): 0, 1 modulo 4
        first, then 2, 3 modulo 4 (module docstring)."""
        k = np.arange(self.n)
        return k[k % 4 < 2], k[k % 4 >= 2]

    def _interleaved_reference(self, c: float, pairs: list, acc: AccumulatorFormat) -> float:
        """The plain version of one interleaved block (module docstring), on the exact
        arithmetic of :meth:`_block_reference` for each half."""
        pairs = list(pairs) + [(0.0, 0.0)] * (self.n - len(pairs))
        first, second = self._halves()
        half = self._half()
        inside = self.c_placement == "inside"
        d = half._block_reference(c if inside else 0.0, [pairs[i] for i in first], acc)
        d = half._block_reference(d, [pairs[i] for i in second], acc)
        if inside:
            return d
        if not (np.isfinite(d) and np.isfinite(c)):
            with np.errstate(invalid="ignore"):
                return float(np.float64(c) + np.float64(d))  # IEEE: Inf and NaN rules
        return round_fraction(Fraction(c) + Fraction(d), _nearest(acc))

    def _interleaved_block(self, c: np.ndarray, a: np.ndarray, b: np.ndarray,
                           acc: AccumulatorFormat) -> np.ndarray:
        """:meth:`block` of an interleaved model: the two halves through the vectorised
        block FMA of n/2 products, then C added after (``"after"``)."""
        a = np.asarray(a, dtype=np.float64)
        b = np.asarray(b, dtype=np.float64)
        c = np.asarray(c, dtype=np.float64)
        a = np.pad(a, [(0, 0)] * (a.ndim - 1) + [(0, self.n - a.shape[-1])])
        b = np.pad(b, [(0, 0)] * (b.ndim - 1) + [(0, self.n - b.shape[-1])])
        first, second = self._halves()
        half = self._half()
        inside = self.c_placement == "inside"
        with np.errstate(invalid="ignore"):
            shape = np.broadcast_shapes((a[..., :1] * b[..., :1]).shape[:-1], c.shape)
        c = np.broadcast_to(c, shape)
        d = half.block(c if inside else np.zeros(shape), a[..., first], b[..., first], acc)
        d = half.block(d, a[..., second], b[..., second], acc)
        if inside:
            return d
        return _add_after_ieee(c, d, acc)

    def _interleaved_blocks(self, state: dict, a: np.ndarray, b: np.ndarray,
                            final: bool) -> None:
        """:meth:`_blocks` of an interleaved model: the products of every block put in
        the order of its halves (the last, partial block padded with zero products) and
        summed by the fast path of the half model; one :meth:`_interleaved_block` per
        block where that path does not apply (non-finite operands)."""
        k = a.shape[-1]
        full = k if final else (k // self.n) * self.n
        c, acc = state["c"], state["acc"]
        if full:
            a_p, b_p = self._in_half_order(a[..., :full], b[..., :full, :])
            half = self._half()
            if not half._fast_ok(a_p, b_p):
                for k0 in range(0, full, self.n):
                    ab = a[..., :, None, k0:k0 + self.n]
                    bb = np.swapaxes(b[..., k0:k0 + self.n, :], -1, -2)[..., None, :, :]
                    c = self._interleaved_block(c, ab, bb, acc)
            elif self.c_placement == "inside":  # a chain of half blocks from c
                c = half._fast_blocks(c, a_p, b_p, acc)
            else:  # every block's halves from +0, then C
                c = half._fast_after_blocks(c, a_p, b_p, acc, self.n)
        state["c"] = c
        state["pa"], state["pb"] = a[..., :, full:], b[..., full:, :]

    def _in_half_order(self, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``a`` (..., M, K) and ``b`` (..., K, N) padded with zeros to a multiple of n,
        each block's products reordered: its first half, then its second."""
        pad = (-a.shape[-1]) % self.n
        if pad:
            a = np.concatenate([a, np.zeros(a.shape[:-1] + (pad,))], axis=-1)
            b = np.concatenate([b, np.zeros(b.shape[:-2] + (pad, b.shape[-1]))], axis=-2)
        first, second = self._halves()
        block = np.concatenate([first, second])
        order = (np.arange(0, a.shape[-1], self.n)[:, None] + block).ravel()
        return a[..., order], b[..., order, :]

    def __repr__(self) -> str:
        if self.name:
            return f"BlockFMA.preset({self.name!r})"
        extra = "".join(
            f", {f}={getattr(self, f)!r}" for f, default in (
                ("product_exponent", "unnormalised"), ("input_emin", None),
                ("align_floor", None), ("output_fraction_bits", 23),
                ("c_placement", "inside"), ("overflow", "inf"),
                ("fp16_rounding", "nearest_even"), ("align_floor_fp16", None),
                ("fp16_accumulator", True), ("interleave", False), ("fp16_model", None))
            if getattr(self, f) != default)
        return (f"BlockFMA(n={self.n}, fraction_bits={self.fraction_bits}, "
                f"output_rounding={self.output_rounding!r}{extra})")
