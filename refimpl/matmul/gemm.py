"""``matmul``: a matrix product with declared accumulation semantics.

A GPU GEMM's answer depends on how the products are summed. ``matmul`` makes that a named
option (``accumulate``) and computes it the same way on every machine: the result is a
function of the inputs and options alone, never of the BLAS library, thread count or CPU.
"""
from __future__ import annotations

import numpy as np

from refimpl import deprecation
from refimpl.formats import get, round_to
from refimpl.matmul import accumulation
from refimpl.matmul.accumulation import AccumulationLike, resolve_accumulation
from refimpl.matmul.rounding import target
from refimpl.validation import as_float_array

#: input conversions other than a plain rounding to nearest even: name -> (format,
#: rounding). ``"tf32_truncate"`` is the FP32 -> TF32 conversion the tensor cores apply to
#: FP32 operands of ``wmma``/``mma`` with ``.tf32`` (the 13 low fraction bits dropped:
#: round toward zero; [MMASim] ``truncate_fp32_to_tf32``), as opposed to ``"tf32"``,
#: round to nearest even (``cvt.rna.tf32.f32`` rounds to nearest away instead).
IN_CONVERSIONS: dict[str, tuple[str, str]] = {
    "tf32_truncate": ("tf32", "toward_zero"),
    "tf32_rna": ("tf32", "nearest_away"),
}


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
        key = in_format.strip().lower() if isinstance(in_format, str) else None
        fmt, rounding = IN_CONVERSIONS.get(key, (in_format, "nearest_even"))
        arr = np.asarray(round_to(arr.astype(np.float64), get(fmt), rounding=rounding),
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


def _accumulator_input(c: object, shape: tuple[int, ...], tgt) -> np.ndarray:
    """``c`` as float64 values of the output format, broadcast to ``shape``.

    Raises:
        TypeError: not a real numeric array.
        ValueError: does not broadcast to the output shape, or holds a value that is not
            a value of the output format.
    """
    arr = np.asarray(c)
    if arr.dtype == bool or not (np.issubdtype(arr.dtype, np.floating)
                                 or np.issubdtype(arr.dtype, np.integer)):
        raise TypeError(f"c must be a real float array, got dtype {arr.dtype}")
    try:
        c64 = np.broadcast_to(arr.astype(np.float64), shape)
    except ValueError:
        raise ValueError(f"c has shape {arr.shape}, which does not broadcast to the output "
                         f"shape {shape}") from None

    with np.errstate(over="ignore", invalid="ignore"):
        back = np.asarray(round_to(c64, get(tgt.name)), dtype=np.float64)
    bad = ~((back == c64) | (np.isnan(back) & np.isnan(c64)))
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(f"c{list(where)} = {float(c64[where])!r} is not a {tgt.name} value; "
                         "C must hold values of out_format")
    return c64


def matmul(
    a: object,
    b: object,
    c: object = None,
    *,
    accumulate: AccumulationLike = "exact",
    out_format: object = "fp32",
    in_format: object = None,
) -> np.ndarray:
    """D = A B + C under a declared accumulation model (``a @ b`` when ``c`` is None).

    Args:
        a: (..., M, K) array of values in their format (float32 arrays holding BF16,
            FP16, FP8 values are the common case; float64 arrays must hold float32 values).
        b: (..., K, N) array, same rules. Leading dimensions broadcast like ``np.matmul``.
        c: the accumulator input C, an array broadcasting to the output shape
            (batch + (M, N)), holding values of ``out_format`` (default None: no C, the
            sum starts at +0). Each tensor-core preset says where C enters
            (``BlockFMA.c_placement``: inside the first block FMA, or added afterwards
            with a separate round to nearest); the other models take C as the first term
            of the sum (``Accumulation.run``).
        accumulate: ``"exact"`` (default: the exact sum of the exact products rounded
            once to ``out_format`` with round-to-nearest-even), ``"sequential"`` (left to
            right over k in ``out_format`` arithmetic, products rounded first),
            ``"sequential_fma"`` (the same with a fused multiply-add), ``"pairwise"``,
            ``"chunked"`` (128-element chunks), a tensor-core preset
            (``"H100-E4M3"``, ``"A100-TF32"``, ``"MI300X-BF16"``: every name and its source
            in ``refimpl.matmul.presets``, also ``python -m oracle formats --presets``),
            or a model object (:class:`Sequential`, :class:`Pairwise`,
            :class:`Chunked`, :class:`BlockFMA`, :class:`ExactAccumulation`).
        out_format: the output format (default ``"fp32"``); any registered format no
            wider than FP32. Results come back as float32 arrays holding its values.
            The tensor-core presets accumulate in it when it is ``"fp16"`` (the
            hardware's FP16 accumulator: every block FMA rounds into FP16), in FP32
            otherwise. Rounding into a format other than the accumulator's is
            nearest-even without saturation, so the format's own overflow rule applies
            (FP32/BF16/FP16 overflow to Inf, E4M3 to NaN), as in
            ``refimpl.formats.round_to``.
        in_format: when given, ``a`` and ``b`` are first rounded (nearest-even) to this
            format; a pair ``(fmt_a, fmt_b)`` rounds each to its own format.
            ``"tf32_truncate"`` is the tensor cores' own FP32 -> TF32 conversion (the
            13 low fraction bits dropped) and ``"tf32_rna"`` the ``cvt.rna.tf32.f32``
            one (``IN_CONVERSIONS``); ``"tf32"`` rounds to nearest even.

    Returns:
        float32 array of shape broadcast(batch) + (M, N). The bytes depend only on the
        inputs and options, never on the BLAS, its thread count or the CPU (for
        "exact" see ``refimpl.matmul.exact``; the other models do their own arithmetic
        in a fixed order). ``exact_matmul64`` also reports how many outputs needed the
        slower certified paths.

    Raises:
        TypeError: a non-numeric ``c`` or an ``accumulate`` of the wrong type.
        ValueError: bad shapes (which argument, which dimension), non-float32 values
            without ``in_format``, a ``c`` that is not of ``out_format`` or does not
            broadcast to the output, unknown accumulation or format names.
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
    tgt = target(out_format)
    if c is None:
        return model.run(a64, b64, tgt)
    shape = np.broadcast_shapes(a64.shape[:-2], b64.shape[:-2]) + (a64.shape[-2],
                                                                     b64.shape[-1])
    return model.run(a64, b64, tgt, _accumulator_input(c, shape, tgt))


# moved to refimpl.matmul.accumulation (resolve_accumulation is imported above)
__getattr__ = deprecation.deprecated_names(__name__, {
    "NAMED": ("refimpl.matmul.accumulation.NAMED", accumulation.NAMED),
})
