"""Known behaviours of named libraries, recognised in a failure so that the report says
what a difference is ("matches torchao's to_mx: ...") instead of leaving the user to
work it out, or to file a bug that is already understood.

A behaviour here is one the oracle does not offer as a documented variant (it is not a
choice the specifications leave open) but that a widely used library is known to show.
Each has a detector that, given a failing output, says whether the failing elements are
exactly what the behaviour produces.

- ``torchao_mx_scale_0x00`` (``scaling.mx_quantize``, codes): torchao's ``to_mx`` stores
  the E8M0 scale code 0x00 (2^-127) for a block whose scale clamps at the bottom, but
  divides the elements by max(scale, 2^-126), the float32 smallest normal (it forms the
  scale as a float32 number, and float32 flushes 2^-127 to 2^-126 there), so the
  elements of blocks with amax in about [2^-136, 2^-119] are quantised as if the scale
  were 2^-126: half their size.
- ``torchao_nvfp4_reciprocal_overflow`` (``scaling.nvfp4_quantize``, rule ``torchao``,
  codes): torchao (0.18) multiplies the elements by ``(1 / p) / s`` in float32 instead
  of dividing them by ``p * s``; for a tensor whose amax is tiny (``p`` below about
  2^-128) that factor overflows to Inf, so the block's zero elements become NaN (E2M1
  0x3 or 0xB) and the others +-6 (0x7, 0xF).
- ``ml_dtypes_nan_to_opposite_zero`` (``formats.encode`` to E2M1, E2M3, E3M2): ml_dtypes
  (0.7) casts a NaN to the zero of the opposite sign (+NaN -> -0, -NaN -> +0), which no
  ``nan_to_*`` option is.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

from refimpl import formats as F

__all__ = ["KnownBehaviour", "KNOWN_BEHAVIOURS", "mx_codes_behaviours",
           "nvfp4_codes_behaviours", "encode_behaviour", "describe"]


@dataclass(frozen=True)
class KnownBehaviour:
    """A documented way a public library departs from the reference: ``name`` (the key
    of :data:`KNOWN_BEHAVIOURS`), the ``library`` and the ``operation`` and ``output``
    it concerns, and a one-sentence ``summary``."""

    name: str
    library: str
    operation: str
    output: str
    summary: str


KNOWN_BEHAVIOURS: dict[str, KnownBehaviour] = {b.name: b for b in (
    KnownBehaviour(
        "torchao_mx_scale_0x00", "torchao (to_mx)", "scaling.mx_quantize", "codes",
        "a block whose scale code is 0x00 (2^-127) is quantised as if its scale were "
        "2^-126 (elements divided by max(scale, 2^-126)), so its elements are half their "
        "size"),
    KnownBehaviour(
        "torchao_nvfp4_reciprocal_overflow", "torchao (NVFP4Tensor.to_nvfp4)",
        "scaling.nvfp4_quantize", "codes",
        "the elements are multiplied by (1 / p) / s in float32, which overflows to Inf "
        "for a tensor with a tiny amax: zero elements become NaN (E2M1 0x3 or 0xB), the "
        "others +-6"),
    KnownBehaviour(
        "ml_dtypes_nan_to_opposite_zero", "ml_dtypes (astype)", "formats.encode", "codes",
        "a NaN cast to a format without NaN (float4_e2m1fn, float6_e2m3fn, "
        "float6_e3m2fn) becomes the zero of the opposite sign"),
)}


def describe(name: str) -> str:
    """One line naming the behaviour, for a report."""
    b = KNOWN_BEHAVIOURS[name]
    return f"matches a known behaviour of {b.library} ({b.name}): {b.summary}"


def kind_suffix(name: str | None) -> str:
    """What a failure kind adds for the known behaviour ``name`` (nothing for None)."""
    return f", as {KNOWN_BEHAVIOURS[name].library} does ({name})" if name else ""


def _torchao_codes(block: np.ndarray, fmt: Any) -> np.ndarray | None:
    """The element codes torchao's to_mx gives a block stored with scale code 0x00."""
    try:
        f = F.get(fmt)
    except (ValueError, TypeError):
        return None               # int8 elements: not modelled
    with np.errstate(invalid="ignore", over="ignore"):
        scaled = np.asarray(block, np.float64) * 2.0 ** 126    # exact: a power of two
    return np.asarray(F.encode(scaled, f, saturate=True), np.int64)


def mx_codes_behaviours(x: np.ndarray, want_scales: np.ndarray, got_scales: np.ndarray,
                        want_codes: np.ndarray, got_codes: np.ndarray, fmt: Any,
                        block_size: int) -> list[tuple[int, int, str]]:
    """(row, block, behaviour name) for each block of MX output (blocks along the last
    axis of 2-D arrays) whose codes differ and are exactly what a known behaviour
    produces. Blocks whose scale codes differ are not considered."""
    out = []
    x = np.asarray(x)
    wc, gc = np.asarray(want_codes, np.int64), np.asarray(got_codes, np.int64)
    ws, gs = np.asarray(want_scales, np.int64), np.asarray(got_scales, np.int64)
    if x.ndim != 2 or wc.shape != gc.shape or ws.shape != gs.shape or wc.shape != x.shape:
        return out
    for r, b in zip(*np.nonzero((ws == 0) & (gs == 0))):
        sl = slice(b * block_size, (b + 1) * block_size)
        if np.array_equal(wc[r, sl], gc[r, sl]):
            continue
        alt = _torchao_codes(x[r, sl], fmt)
        if alt is not None and np.array_equal(alt, gc[r, sl]):
            out.append((int(r), int(b), "torchao_mx_scale_0x00"))
    return out


def encode_behaviour(x: Any, got: Any, fmt: Any) -> str | None:
    """The known behaviour that one failing encoded element shows (``x`` the input,
    ``got`` the code of format ``fmt``), or None."""
    f = F.get(fmt)
    if f.has_nan or not np.isnan(x):
        return None
    opposite = 0 if np.signbit(x) else f.sign_mask
    return "ml_dtypes_nan_to_opposite_zero" if int(got) == opposite else None


def nvfp4_codes_behaviours(x: np.ndarray, p: Any, want_scales: np.ndarray,
                           got_scales: np.ndarray, want_codes: np.ndarray,
                           got_codes: np.ndarray) -> list[tuple[int, int, str]]:
    """(row, block, behaviour name) for each 1x16 block of torchao-rule NVFP4 output
    (``p`` the per-tensor decode scale) whose codes differ and are exactly what torchao
    gives when ``(1 / p) / s`` overflows float32. Blocks whose scale codes differ are
    not considered."""
    out = []
    x = np.asarray(x, np.float32)
    wc, gc = np.asarray(want_codes, np.int64), np.asarray(got_codes, np.int64)
    ws, gs = np.asarray(want_scales, np.int64), np.asarray(got_scales, np.int64)
    if x.ndim != 2 or wc.shape != gc.shape or wc.shape != x.shape or ws.shape != gs.shape \
            or ws.shape != (x.shape[0], x.shape[1] // 16):
        return out
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        inv_p = np.float32(1) / np.float32(p)
        factor = inv_p / F.decode(ws.astype(np.uint8), "e4m3")       # float32
    for r, b in zip(*np.nonzero((ws == gs) & np.isinf(factor))):
        sl = slice(b * 16, (b + 1) * 16)
        if np.array_equal(wc[r, sl], gc[r, sl]):
            continue
        v, g = x[r, sl], gc[r, sl]
        ok = np.where(v == 0, (g == 0x3) | (g == 0xB), g == np.where(v > 0, 0x7, 0xF))
        if ok.all():
            out.append((int(r), int(b), "torchao_nvfp4_reciprocal_overflow"))
    return out


def case_behaviours(operation: str, params: Mapping[str, Any],
                    inputs: Mapping[str, np.ndarray], expected: Mapping[str, np.ndarray],
                    output: str, got: np.ndarray,
                    results: Callable[[str], np.ndarray | None]) -> list[str]:
    """The known behaviours that explain every failing element of ``output`` of a golden
    case (``results(name)`` reads another output of the implementation, or None)."""
    if output != "codes" or np.asarray(inputs.get("x")).ndim != 2:
        return []
    got_scales = results("scales")
    if got_scales is None:
        return []
    if operation == "scaling.mx_quantize" and params.get("axis", -1) in (-1, 1):
        bs = int(params.get("block_size", 32))
        found = mx_codes_behaviours(inputs["x"], expected["scales"], got_scales,
                                    expected["codes"], got, params.get("fmt"), bs)
    elif operation == "scaling.nvfp4_quantize" and params.get("scale_rule") == "torchao" \
            and list(params.get("block", ())) == [1, 16] and "global_scale" in expected:
        bs = 16
        found = nvfp4_codes_behaviours(inputs["x"], expected["global_scale"],
                                       expected["scales"], got_scales, expected["codes"],
                                       got)
    else:
        return []
    if not found:
        return []
    explained = np.zeros(np.shape(got), dtype=bool)
    for r, b, _ in found:
        explained[r, b * bs:(b + 1) * bs] = True
    bad = np.asarray(got).astype(np.int64) != np.asarray(expected["codes"]).astype(np.int64)
    if (bad & ~explained).any():
        blocks = f"{len(found)} block" + ("s" if len(found) != 1 else "")
        return [f"{describe(n)} (in {blocks}; other elements differ too)"
                for n in sorted({n for *_, n in found})]
    return [describe(n) + (f" (all {len(found)} failing blocks)" if len(found) != 1
                           else " (the one failing block)")
            for n in sorted({n for *_, n in found})]
