"""``matmul``: a matrix product with declared accumulation semantics.

A GPU GEMM's answer depends on how the products are summed. ``matmul`` makes that a named
option (``accumulate``) and computes it the same way on every machine: the result is a
function of the inputs and options alone, never of the BLAS library, thread count or CPU.
"""
from __future__ import annotations

from typing import Union

import numpy as np

from refimpl.matmul.accumulation import Accumulation
from refimpl.matmul.blockfma import PRESETS, BlockFMA
from refimpl.matmul.exact import Exact
from refimpl.matmul.ordered import Chunked, Pairwise, Sequential
from refimpl.matmul.rounding import target
from refimpl.validation import as_float_array

AccumulationLike = Union[str, Accumulation]

#: accumulation names accepted by ``matmul`` (BlockFMA presets are accepted too)
NAMED: dict[str, Accumulation] = {
    "exact": Exact(),
    "sequential": Sequential(fma=False),
    "sequential_fma": Sequential(fma=True),
    "pairwise": Pairwise(),
    "chunked": Chunked(),
}


def resolve_accumulation(accumulate: AccumulationLike) -> Accumulation:
    """The model named by ``accumulate``: an :class:`Accumulation` is returned unchanged;
    a string is one of ``NAMED`` or a BlockFMA preset (``"H100-FP8"``).

    Raises:
        ValueError: an unknown name (the message lists the known ones).
    """
    if isinstance(accumulate, Accumulation):
        return accumulate
    if isinstance(accumulate, str):
        if accumulate in NAMED:
            return NAMED[accumulate]
        if accumulate in PRESETS:
            return BlockFMA.preset(accumulate)
    raise ValueError(
        f"accumulate must be an Accumulation or one of {sorted(NAMED)} or a BlockFMA preset "
        f"{sorted(PRESETS)}, got {accumulate!r}"
    )


def as_format_values(x: object, name: str, in_format: object = None) -> np.ndarray:
    """``x`` as a float64 array of float32-representable values (rounded to ``in_format``
    first when given).

    Integers (int arrays, Python int lists, object arrays of ints) are accepted only
    when exactly representable: as float32 values, or as float64 values when
    ``in_format`` rounds them.

    Raises:
        ValueError: not a real numeric array of at least 2 dimensions, an integer the
            working precision cannot hold (naming the first index), or (without
            ``in_format``) values that are not float32 values.
    """
    # integers must be exact in the working precision: float32 values, or float64 when
    # they are rounded to in_format first (2**53 + 1 is refused, never rounded)
    arr = as_float_array(x, name, precision=np.float64 if in_format is not None
                         else np.float32)
    if arr.ndim < 2:
        raise ValueError(f"{name} must have at least 2 dimensions (..., rows, cols), "
                         f"got shape {arr.shape}")
    if in_format is not None:
        from refimpl.formats import get, round_to

        arr = np.asarray(round_to(arr.astype(np.float64), get(in_format)),
                         dtype=np.float64)
    x64 = arr.astype(np.float64)
    if arr.dtype not in (np.float16, np.float32):
        with np.errstate(over="ignore"):
            back = x64.astype(np.float32).astype(np.float64)
        bad = ~((back == x64) | (np.isnan(back) & np.isnan(x64)))
        if bad.any():
            where = tuple(int(i) for i in np.argwhere(bad)[0])
            raise ValueError(
                f"{name}{list(where)} = {float(x64[where])!r} is not a float32 value; matmul takes "
                "values already in their format (pass in_format= to round them first)"
            )
    return x64


def matmul(
    a: object,
    b: object,
    *,
    accumulate: AccumulationLike = "exact",
    out_format: object = "fp32",
    in_format: object = None,
) -> np.ndarray:
    """The matrix product ``a @ b`` under a declared accumulation model.

    Args:
        a: (..., M, K) array of values in their format (float32 arrays holding BF16,
            FP16, FP8 values are the common case; float64 arrays must hold float32 values).
        b: (..., K, N) array, same rules. Leading dimensions broadcast like ``np.matmul``.
        accumulate: ``"exact"`` (default: the exact sum of the exact products rounded
            once to ``out_format`` with round-to-nearest-even), ``"sequential"`` (left to
            right over k in ``out_format`` arithmetic, products rounded first),
            ``"sequential_fma"`` (the same with a fused multiply-add), ``"pairwise"``,
            ``"chunked"`` (128-element chunks), a BlockFMA preset name (``"H100-FP8"``),
            or a model object (:class:`Sequential`, :class:`Pairwise`,
            :class:`Chunked`, :class:`BlockFMA`, :class:`Exact`).
        out_format: the output format (default ``"fp32"``); any registered format no
            wider than FP32. Results come back as float32 arrays holding its values.
            Rounding into it is nearest-even without saturation, so the format's own
            overflow rule applies (FP32/BF16/FP16 overflow to Inf, E4M3 to NaN), as in
            ``refimpl.formats.round_to``.
        in_format: when given, ``a`` and ``b`` are first rounded (nearest-even) to this
            format; a pair ``(fmt_a, fmt_b)`` rounds each to its own format.

    Returns:
        float32 array of shape broadcast(batch) + (M, N). The bytes depend only on the
        inputs and options, never on the BLAS, its thread count or the CPU (for
        "exact" see ``refimpl.matmul.exact``; the other models do their own arithmetic
        in a fixed order). ``exact_matmul64`` also reports how many outputs needed the
        slower certified paths.

    Raises:
        ValueError: bad shapes (which argument, which dimension), non-float32 values
            without ``in_format``, unknown accumulation or format names.
    """
    fa, fb = (in_format if isinstance(in_format, tuple) else (in_format, in_format))
    a64 = as_format_values(a, "a", fa)
    b64 = as_format_values(b, "b", fb)
    if a64.shape[-1] != b64.shape[-2]:
        raise ValueError(
            f"inner dimensions differ: a has shape {a64.shape} (K = {a64.shape[-1]}), "
            f"b has shape {b64.shape} (K = {b64.shape[-2]})"
        )
    try:
        np.broadcast_shapes(a64.shape[:-2], b64.shape[:-2])
    except ValueError:
        raise ValueError(
            f"batch dimensions do not broadcast: a {a64.shape[:-2]}, b {b64.shape[:-2]}"
        ) from None
    model = resolve_accumulation(accumulate)
    return model.run(a64, b64, target(out_format))
