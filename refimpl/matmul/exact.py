"""Correctly rounded matrix products ("exact" accumulation).

Definition: every output is the exact sum of the exact products a_ik * b_kj, rounded
once to the output format with roundTiesToEven (IEEE 754-2019 section 4.3.1). It is a
correctly rounded dot product, so it does not depend on any summation order.

Special values follow what any IEEE sum of the same products would give: a NaN input,
0 * Inf, or +Inf and -Inf products together give NaN (returned as the default quiet NaN);
otherwise any infinite product gives that Inf. An exact sum of zero is +0, except that a
sum of only -0 products is -0 (IEEE 754-2019 section 6.3: x + (-x) = +0 under
roundTiesToEven, (-0) + (-0) = -0). The empty sum (k = 0) is +0.

Two implementations, tested against each other:

- :func:`exact_dot_reference`: plain, reads like the definition (Fraction arithmetic,
  one rounding by :func:`refimpl.rational.round_rational`).
- the fast path of :mod:`refimpl.matmul.screening` (a float64 BLAS product, screened
  with a rigorous error bound, the uncertain outputs resolved exactly with the integer
  limbs of :mod:`refimpl.matmul.limbs`), which the :class:`ExactAccumulation` model runs.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from refimpl.deprecation import deprecated_names
from refimpl.matmul import screening
from refimpl.matmul.accumulation import NAMED, WholeK
from refimpl.matmul.rounding import FP32, Target, to_format
from refimpl.matmul.screening import exact_matmul64, exact_matmul_fp32
from refimpl.rational import round_rational
from refimpl.validation import as_float64

__all__ = ["ExactAccumulation", "exact_dot_reference"]


def exact_dot_reference(a: np.ndarray, b: np.ndarray, tgt: Target = FP32) -> float:
    """Correctly rounded dot product of two 1-D float arrays, by the definition.

    Special values as in the module docstring. Returns a Python float that
    :func:`refimpl.matmul.rounding.to_format` turns into the target's value (for FP32
    the returned float is already an FP32 value or +-Inf/NaN).
    """
    a = [float(v) for v in as_float64(a, "a").ravel()]
    b = [float(v) for v in as_float64(b, "b").ravel()]
    if len(a) != len(b):
        raise ValueError(f"length mismatch: {len(a)} and {len(b)}")
    products = []
    for x, y in zip(a, b):
        if np.isnan(x) or np.isnan(y) or (np.isinf(x) and y == 0) or (np.isinf(y) and x == 0):
            return float("nan")
        products.append((x, y))
    infs = {np.sign(x) * np.sign(y) for x, y in products if np.isinf(x) or np.isinf(y)}
    if infs:
        return float("nan") if len(infs) == 2 else float(np.inf * next(iter(infs)))
    total = sum((Fraction(x) * Fraction(y) for x, y in products), Fraction(0))
    if total == 0:
        all_negative_zero = bool(products) and all(
            (x == 0 or y == 0) and (np.signbit(x) != np.signbit(y)) for x, y in products
        )
        return -0.0 if all_negative_zero else 0.0
    return round_rational(total, tgt.precision, tgt.emin)


class ExactAccumulation(WholeK):
    """Correctly rounded accumulation: exact sum of exact products, rounded once (RNE).

    The default model of :func:`refimpl.matmul.matmul`. Streaming keeps the k slices
    and sums them at the end: the exact sum does not depend on how k is split.
    """

    def __repr__(self) -> str:
        return "ExactAccumulation()"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ExactAccumulation)

    def __hash__(self) -> int:
        return hash("ExactAccumulation")

    def finish_k(self, a: np.ndarray, b: np.ndarray, tgt: Target,
                 shape: tuple[int, ...]) -> np.ndarray:
        y = self.run(a, b, tgt)
        return y if y.shape == shape else np.broadcast_to(y, shape).copy()

    def run(self, a: np.ndarray, b: np.ndarray, tgt: Target,
            c: np.ndarray | None = None) -> np.ndarray:
        if c is not None:  # C as one more exact term (Accumulation.run)
            return super().run(a, b, tgt, c)
        if tgt.is_fp32:
            return exact_matmul_fp32(a, b)
        x, _ = exact_matmul64(a, b, tgt)
        return to_format(x, tgt)


NAMED["exact"] = ExactAccumulation()


def _round_fraction(x: Fraction, tgt: Target = FP32) -> float:
    """RN_tgt(x) of an exact rational, unbounded above (the old ``round_fraction``)."""
    return round_rational(x, tgt.precision, tgt.emin)


# names that moved to refimpl.matmul.screening and refimpl.rational
__getattr__ = deprecated_names(__name__, {
    **{name: (f"refimpl.matmul.screening.{name}", getattr(screening, name))
       for name in ("ExactStats", "exact_product_fp32", "exact_row_bounds",
                    "exact_col_norms", "screen_width", "screen_fp32", "resolve_fp32")},
    "round_fraction": ("refimpl.rational.round_rational", _round_fraction),
    "Exact": ("ExactAccumulation", ExactAccumulation),
})
