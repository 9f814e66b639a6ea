"""Conformance of block scaling: ``check_mx_quantize`` (scaling.mx_quantize) and
``check_nvfp4_quantize`` (scaling.nvfp4_quantize), with special blocks, Inf and NaN
blocks whenever a policy for them is named, and a classification of each failing
block."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from oracle.cases.scaling import special_blocks, tiny_amax_blocks
from oracle.conformance.phases import check_max_examples, extension_codes, hunt, invoke
from oracle.conformance.report import (
    Collector, ConformanceError, ConformanceReport, Failure, NewKind,
)
from oracle.known_behaviours import (
    describe, kind_suffix, mx_codes_behaviours, nvfp4_codes_behaviours,
)
from oracle.random_stream import CaseRandom
from oracle.tolerance import format_value
from refimpl.deprecation import renamed_arguments
from refimpl.formats import E2M1
from refimpl.scaling import INF_BLOCK_POLICIES, NVFP4_RULES, mx_quantize, nvfp4_quantize

__all__ = ["check_mx_quantize", "check_nvfp4_quantize", "nonfinite_blocks"]


def _block_text(x: np.ndarray) -> str:
    finite = x[np.isfinite(x)]
    amax = float(np.abs(finite).max()) if finite.size else float("nan")
    return (f"block of {x.size} float32 values, amax {amax:.9g}"
            + (f", {int(np.sum(~np.isfinite(x)))} non-finite" if finite.size < x.size else ""))


def _block_class(x: np.ndarray) -> str:
    """What kind of block this is (the 'where' of a block-scaling failure)."""
    if np.isnan(x).any():
        return "block holding NaN"
    if np.isinf(x).any():
        return "block holding Inf"
    a = np.abs(x.astype(np.float64))
    amax = float(a.max()) if a.size else 0.0
    if amax == 0:
        return "all-zero block"
    if amax < float(np.finfo(np.float32).tiny):
        return "block with a float32-subnormal amax"
    if amax < 2.0 ** -100:
        return "block with a tiny amax"
    m, _ = np.frexp(amax)
    if m == 0.5:
        return "block whose amax is a power of two"
    return "block"


def nonfinite_blocks(size: int) -> list[np.ndarray]:
    """Float32 blocks holding Inf or NaN, the inputs a special-block policy decides:
    +Inf, -Inf, NaN, both infinities, NaN with Inf, and Inf among zeros. Values are
    fixed (multiples of 1/8 in [-4, 4]), so every run sweeps the same blocks."""
    base = ((np.arange(size) % 17) - 8).astype(np.float32) / np.float32(2)
    out = []
    for vals in ([np.inf], [-np.inf], [np.nan], [np.inf, -np.inf], [np.nan, np.inf]):
        b = base.copy()
        for i, v in enumerate(vals):
            b[(3 + 5 * i) % size] = v
        out.append(b)
    z = np.zeros(size, np.float32)
    z[size // 2] = np.inf
    out.append(z)
    return out


def _compare_dequantized(col: Collector, title: str, x: np.ndarray, block_size: int,
                         got: np.ndarray, want: np.ndarray, phase: str, count: bool,
                         known: dict[tuple[int, int], str] | None = None) -> Failure | None:
    """Compare dequantised float32 values bitwise (NaNs one class); record counts and
    the first new kind; return it. A block in ``known`` ((row, block) -> behaviour:
    its codes are what that behaviour gives) names the behaviour in its kind."""
    if got.shape != want.shape:
        raise ConformanceError(f"{title}: dequantized has shape {got.shape}, expected "
                               f"{want.shape}")
    g = got.astype(np.float32)
    with np.errstate(invalid="ignore"):
        same = (g.view(np.uint32) == want.view(np.uint32)) | (np.isnan(g) & np.isnan(want))
    bad = ~same
    if count:
        col.count("dequantized", bad.size, int(bad.sum()))
    first_new = None
    for r, c in (tuple(int(v) for v in ix) for ix in np.argwhere(bad)):
        blk = c // block_size
        block = x[r, blk * block_size:(blk + 1) * block_size]
        e, a = float(want[r, c]), float(g[r, c])
        what = "differs"
        if np.isfinite(e) and np.isfinite(a) and e != 0 and \
                abs(int(g[r, c].view(np.int32)) - int(want[r, c].view(np.int32))) == 1:
            what = "one float32 step off"
        kind = (f"dequantized {what} ({_block_class(block)})"
                + kind_suffix((known or {}).get((r, blk))))
        # the report of a new kind, alike in shape on purpose in every check here and in
        # oracle/conformance/tensors.py: the input, the element, expected and got
        f = col.first(kind, count, lambda: Failure(
            kind, phase,
            f"  input    row {r}, {_block_text(block)}\n"
            f"  value    [{r}, {c}]: expected {e:.9g} "
            f"[0x{int(want[r, c].view(np.uint32)):08X}], got {a:.9g} "
            f"[0x{int(g[r, c].view(np.uint32)):08X}] (input {float(x[r, c]):.9g})",
            block, want[r, c], g[r, c], int(count)))
        first_new = first_new or f
    return first_new


def _compare_blocks(col: Collector, title: str, x: np.ndarray, block_size: int,
                    outputs: list[tuple[str, np.ndarray, np.ndarray, int]],
                    phase: str, count: bool, nan_scale: int | None,
                    code_fmt: Any = None,
                    known: dict[tuple[int, int], str] | None = None) -> Failure | None:
    """Compare block-scaled outputs ``(name, got, expected, elements per entry)``
    (scales first, then codes) of ``x`` (rows, n); record counts (``count``) and every
    new kind; return the first new Failure. Codes are not compared in a block whose
    expected scale is the NaN code ``nan_scale`` (no reader can use them) nor, for the
    kind, in a block whose scale already differs. Codes of ``code_fmt`` that differ only
    in the sign bit are a sign difference (of zero: +0 vs -0)."""
    first_new = None
    scale_bad = None
    for name, g, w, per in outputs:
        if g.shape != w.shape:
            raise ConformanceError(f"{title}: {name} have shape {g.shape}, "
                                   f"expected {w.shape}")
        bad = g.astype(np.int64) != w.astype(np.int64)
        care = np.ones(bad.shape, dtype=bool)
        if per > 1 and nan_scale is not None and outputs[0][0] == "scales":
            s_want = outputs[0][2]
            care = np.repeat(s_want != nan_scale, per, axis=-1)[..., :bad.shape[-1]]
        bad &= care
        if count:
            col.count(name, int(care.sum()), int(bad.sum()))
        if per == 1:
            scale_bad = bad
        for r, c in (tuple(int(v) for v in ix) for ix in np.argwhere(bad)):
            blk = c // per
            if per > 1 and scale_bad is not None and scale_bad[r, blk]:
                continue   # follows from the scale
            block = x[r, blk * block_size:(blk + 1) * block_size]
            what = "differ"
            sign = getattr(code_fmt, "sign_mask", 0) if per > 1 else 0
            if sign and int(g[r, c]) ^ int(w[r, c]) == sign:
                what = ("sign difference of zero (+0 vs -0)"
                        if int(w[r, c]) & code_fmt.magnitude_mask == 0 else "sign difference")
            kind = f"{name} {what} ({_block_class(block)})"
            behaviour = (known or {}).get((r, blk)) if per > 1 else None
            kind += kind_suffix(behaviour)
            f = col.first(kind, count, lambda: Failure(
                kind, phase,
                f"  input    row {r}, {_block_text(block)}\n"
                f"  {name[:-1]:8} [{r}, {c}]: expected 0x{int(w[r, c]):02X}, "
                f"got 0x{int(g[r, c]):02X}"
                + (f" (element value {float(x[r, c]):.9g})" if per == 1 and
                   name == "codes" else "")
                + (f"\n  {describe(behaviour)}" if behaviour else ""),
                block, w[r, c], g[r, c], int(count)))
            first_new = first_new or f
    return first_new


@renamed_arguments({"elem": "fmt"})
def check_mx_quantize(fn: Callable, fmt: Any = "e4m3", *, scale_rule: str = "floor",
                      block_size: int = 32, inf_block: str | None = None,
                      max_examples: int = 100, **_: Any) -> ConformanceReport:
    """Check an MX quantiser ``fn(x) -> (codes, scales)`` for ``x`` float32 of shape
    (rows, n * block_size), blocks along the last axis, against
    ``refimpl.scaling.mx_quantize`` (OCP MX v1.0 section 6.3) with the same rule.
    Element codes and E8M0 scale codes are compared exactly; element codes under an
    expected NaN scale are not compared (no reader can use them). Blocks holding NaN or
    Inf are swept and drawn only when ``inf_block`` names the policy ``fn`` follows, and
    then always (so contradicting policies cannot all pass). The fixed sweep includes blocks
    whose amax lies in 2^-137 .. 2^-119, around the smallest scale 2^-127.

    Raises:
        ConformanceError: every kind of failing block, each with its simplest example.
    """
    # deferred: oracle.strategies imports hypothesis, only when a check runs
    from oracle.strategies import BLOCK_KINDS, mx_blocks

    max_examples = check_max_examples(max_examples)
    if inf_block is not None and inf_block not in INF_BLOCK_POLICIES:
        raise ValueError(f"inf_block must be one of {INF_BLOCK_POLICIES} or None, "
                         f"got {inf_block!r}")
    policy = inf_block or "nan"
    fmt_name = fmt if isinstance(fmt, str) else getattr(fmt, "name", str(fmt))
    opts = f"scale_rule={scale_rule}, block_size={block_size}" + (
        f", inf_block={inf_block}" if inf_block else "")
    title = f"MX {fmt_name} quantiser ({opts})"
    col = Collector(title, f"MX {fmt_name} quantiser")

    def one(x: np.ndarray, phase: str, count: bool) -> Failure | None:
        q = mx_quantize(x, fmt, block_size=block_size, scale_rule=scale_rule,
                        inf_block=policy)
        got = invoke(fn, x)
        if not (isinstance(got, tuple) and len(got) == 2):
            raise ConformanceError(f"{title}: the MX quantiser must return (codes, scales)")
        codes = extension_codes(got[0], q.fmt, f"{title}: the codes")
        scales = extension_codes(got[1], "e8m0", f"{title}: the scales")
        known = {(r, b): n for r, b, n in mx_codes_behaviours(
            x, q.scales, scales, q.codes, codes, q.fmt, block_size)} \
            if codes.shape == q.codes.shape and scales.shape == q.scales.shape else {}
        return _compare_blocks(col, title, x, block_size,
                               [("scales", scales, q.scales, 1),
                                ("codes", codes, q.codes, block_size)],
                               phase, count, 0xFF, q.fmt, known)

    rng = CaseRandom(0, "conformance")
    # tiny maxima (2^-137 .. 2^-119) around E8M0's smallest scale 2^-127: a quantiser that
    # divides by max(scale, 2^-126) while storing 0x00 differs only there
    blocks = special_blocks(rng, block_size, fmt_name) + tiny_amax_blocks(rng, block_size)
    if inf_block:
        blocks = blocks + nonfinite_blocks(block_size)
    x = np.stack(blocks)
    col.placed = len(blocks)
    one(x, f"sweep of {len(blocks)} special blocks", True)
    kinds = [k for k in BLOCK_KINDS if inf_block or k not in ("nan", "inf")]

    def drawn(v: np.ndarray) -> None:
        col.examples += 1
        f = one(v, "hypothesis, shrunk", False)
        if f is not None:
            raise NewKind(f)

    hunt(col, mx_blocks(fmt_name, block_size=block_size, max_blocks=2, rows=1,
                         kinds=kinds), drawn, max_examples)
    return col.finish()


def check_nvfp4_quantize(fn: Callable, *, scale_rule: str = "te", max_examples: int = 100,
                         **_: Any) -> ConformanceReport:
    """Check an NVFP4 quantiser ``fn(x) -> (codes, scales, global_scale)`` for ``x``
    float32 of shape (rows, n * 16), 1x16 blocks along the last axis, against
    ``refimpl.scaling.nvfp4_quantize`` with the same rule (``"te"``, ``"te_kernel"``,
    ``"torchao"``): E2M1 element codes (one per byte) and E4M3 block-scale codes
    exactly, the float32 global scale bitwise. Element codes under an expected NaN
    block scale (0x7F) are not compared. A fourth element ``dequantized`` (float32,
    the shape of x) is compared bitwise with ``NVFP4Array.dequantize()`` (NaNs one
    class): ``q * sf / S_enc`` for the te rules, ``q * (p * sf)`` for torchao.

    Raises:
        ConformanceError: every kind of failing block, each with its simplest example.
    """
    # deferred: oracle.strategies imports hypothesis, only when a check runs
    from oracle.strategies import BLOCK_KINDS, nvfp4_blocks

    max_examples = check_max_examples(max_examples)
    if scale_rule not in NVFP4_RULES:
        raise ValueError(f"scale_rule must be one of {NVFP4_RULES}, got {scale_rule!r}")
    title = f"NVFP4 quantiser (scale_rule={scale_rule}, 1x16 blocks)"
    col = Collector(title, "NVFP4 quantiser")

    def one(x: np.ndarray, phase: str, count: bool) -> Failure | None:
        if scale_rule == "torchao" and not (np.isfinite(x).all() and np.abs(x).max() > 0):
            return None    # the torchao rule is undefined for a global amax of 0 or Inf
        try:
            q = nvfp4_quantize(x, scale_rule=scale_rule)
        except ValueError:
            if scale_rule != "torchao":
                raise
            # a global amax so small that p * sf underflows: the torchao rule divides
            # by zero there and refimpl refuses it, so such an input has no expectation
            return None
        got = invoke(fn, x)
        if not (isinstance(got, tuple) and len(got) in (3, 4)):
            raise ConformanceError(f"{title}: the NVFP4 quantiser must return "
                                   "(codes, scales, global_scale) or (codes, scales, "
                                   "global_scale, dequantized)")
        codes = extension_codes(got[0], "e2m1", f"{title}: the codes")
        scales = extension_codes(got[1], "e4m3", f"{title}: the scales")
        known = None
        if scale_rule == "torchao" and codes.shape == q.codes.shape:
            known = {(r, b): n for r, b, n in nvfp4_codes_behaviours(
                x, q.global_scale, q.scales, scales, q.codes, codes)}
        if len(got) == 4:
            f = _compare_dequantized(col, title, x, 16, np.asarray(got[3]), q.dequantize(),
                                     phase, count, known)
            if f is not None and not count:
                return f
        gs = np.asarray(got[2])
        want_gs = np.asarray(q.global_scale, np.float32).reshape(())
        got_gs = gs.astype(np.float32).reshape(()) if gs.size == 1 else None
        same = got_gs is not None and (
            got_gs.view(np.uint32) == want_gs.view(np.uint32)
            or (np.isnan(got_gs) and np.isnan(want_gs)))
        if count:
            col.count("global_scale", 1, int(not same))
        if not same:
            kind = "global_scale differs"
            f = Failure(kind, phase,
                        f"  input    {x.shape} float32, amax "
                        f"{float(np.nanmax(np.abs(x))) if x.size else 0:.9g}\n"
                        f"  expected {format_value(want_gs[()], None)}\n"
                        f"  got      {gs!r}", x, want_gs, gs, int(count))
            if kind not in col.kinds:
                if count:
                    col.add(f)
                return f
            if count:
                col.kinds[kind].count += 1
        return _compare_blocks(col, title, x, 16,
                               [("scales", scales, q.scales, 1),
                                ("codes", codes, q.codes, 16)],
                               phase, count, 0x7F, E2M1, known)

    rng = CaseRandom(0, "conformance.nvfp4")
    blocks = special_blocks(rng, 16, "e2m1")
    if scale_rule != "torchao":
        blocks = blocks + nonfinite_blocks(16)[2:3]           # a NaN block
    # each block alone (its own global amax) and all rows together (one global scale)
    col.placed = len(blocks)
    for i, b in enumerate(blocks):
        one(b[None, :], f"sweep, special block {i} alone", True)
    finite = [b for b in blocks if np.isfinite(b).all()]
    one(np.stack(finite), f"sweep, {len(finite)} special blocks as one tensor", True)
    if scale_rule == "torchao":
        # a tensor with a tiny amax, whose 1 / p overflows float32 (a zero among small
        # elements): where torchao's reciprocal form departs from the rule
        tiny = np.float32(2.0 ** -126) * np.arange(-8, 8, dtype=np.float32) / 4
        col.placed += 1
        one(tiny[None, :], "sweep, a tensor with a tiny amax", True)
    kinds = [k for k in BLOCK_KINDS if k not in ("inf",)
             and (scale_rule != "torchao" or k != "nan")]

    def drawn(v: np.ndarray) -> None:
        col.examples += 1
        f = one(v, "hypothesis, shrunk", False)
        if f is not None:
            raise NewKind(f)

    hunt(col, nvfp4_blocks(max_blocks=2, rows=2, kinds=kinds), drawn, max_examples)
    return col.finish()
