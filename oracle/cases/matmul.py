"""Golden cases for matrix products with declared accumulation (``refimpl.matmul``).

Inputs are low-precision values stored as codes of their format (``a``, ``b`` with the
format in the manifest; FP32 inputs as float32). Each case names its accumulation model:

- ``exact``: the exact sum of exact products rounded once (correctly rounded; unique).
  For FP32 output the case also ships an acceptance interval (reference arrays ``lo`` and
  ``hi``): every result of float32 accumulation in any order, with or without FMA, lies
  within gamma_K * sum|a_ik b_kj| of the exact sum (Higham, Accuracy and Stability of
  Numerical Algorithms, 2nd ed., section 3.1, with gamma_K = K u / (1 - K u),
  u = 2^-24), so a BLAS-style implementation is checked with ``interval`` and a correctly
  rounded one bit for bit against ``c``.
- ``sequential``, ``sequential_fma``, ``pairwise``, ``chunked`` and the tensor-core
  BlockFMA presets (Fasi, Higham, Mikaitis, Pranesh 2021): fully specified models, so
  the result is exact; which model an implementation follows is its choice, recorded as
  the variant ``accumulation``.
- ``matmul.tiled``: the shared-memory tiled algorithm's result and traffic counts
  (``stats``: global reads of A and B, global writes, shared writes and reads, tiles,
  K steps, padded global reads).

Outputs in a format narrower than FP32 are stored as its codes.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from oracle.cases import Area, CaseSpec, Operation
from oracle.random_stream import CaseRandom
from oracle.tolerance import Interval
from refimpl import formats as F
from refimpl import matmul as M

SPECS = {"Tensor-core model": "Fasi, Higham, Mikaitis, Pranesh, PeerJ CS 7:e330 (2021)"}


def _nf(name: str) -> tuple[int, int]:
    model = M.BlockFMA.preset(name)
    return model.n, model.fraction_bits


def _values(x: np.ndarray, fmt: str | None) -> np.ndarray:
    return x if fmt is None else F.decode(x, fmt)


def _store(c: np.ndarray, fmt: str) -> np.ndarray:
    return c if F.get(fmt).bits == 32 else F.encode(c, fmt)


def _bounds(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[c - g, c + g] rounded outward to float32, g = gamma_K * |a| |b| (slightly
    enlarged so the bound's own roundings cannot shrink it)."""
    k = a.shape[-1]
    u = 2.0 ** -24
    gamma = k * u / (1 - k * u) * (1 + 2.0 ** -20)
    mag = M.matmul(np.abs(a), np.abs(b)).astype(np.float64) * (1 + 2.0 ** -20)
    g = gamma * mag
    c64 = c.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        lo64, hi64 = c64 - g, c64 + g
        lo, hi = lo64.astype(np.float32), hi64.astype(np.float32)
        lo = np.where(lo.astype(np.float64) > lo64, np.nextafter(lo, np.float32(-np.inf)), lo)
        hi = np.where(hi.astype(np.float64) < hi64, np.nextafter(hi, np.float32(np.inf)), hi)
    nonfinite = ~np.isfinite(c)            # Inf/NaN results must be reproduced exactly
    return (np.where(nonfinite, c, lo).astype(np.float32),
            np.where(nonfinite, c, hi).astype(np.float32))


def _matmul(inputs: Mapping[str, np.ndarray], p: Mapping[str, Any]) -> dict[str, np.ndarray]:
    a = _values(inputs["a"], p["in_format"])
    b = _values(inputs["b"], p["in_format"])
    c = M.matmul(a, b, accumulate=p["accumulate"], out_format=p["out_format"])
    out = {"c": _store(c, p["out_format"])}
    if p["accumulate"] == "exact" and F.get(p["out_format"]).bits == 32:
        out["lo"], out["hi"] = _bounds(a, b, c)
    return out


def _tiled(inputs: Mapping[str, np.ndarray], p: Mapping[str, Any]) -> dict[str, np.ndarray]:
    a = _values(inputs["a"], p["in_format"])
    b = _values(inputs["b"], p["in_format"])
    c, st = M.tiled_matmul(a, b, tile=tuple(p["tile"]), accumulate=p["accumulate"])
    names = ("global_reads_a", "global_reads_b", "global_writes", "shared_writes",
             "shared_reads", "tiles", "k_steps", "padded_global_reads")
    return {"c": c, "stats": np.array([getattr(st, n) for n in names], np.int64)}


OPERATIONS = [
    Operation("matmul.matmul", _matmul,
              "c = refimpl.matmul.matmul(decode(a), decode(b), accumulate=, out_format=); "
              "lo, hi: acceptance interval of float32 accumulation in any order"),
    Operation("matmul.tiled", _tiled,
              "c, stats = refimpl.matmul.tiled_matmul(a, b, tile=, accumulate=)"),
]


def _operands(m: int, k: int, n: int, fmt: str | None, *, specials: bool = False):
    """Random values of ``fmt`` over a wide exponent range, with cancelling pairs, exact
    ties of the output rounding, zeros and signed zeros; ``specials`` adds Inf/NaN."""
    def draw(rng: CaseRandom, shape: tuple[int, int]) -> np.ndarray:
        mant = rng.normal(shape)
        expo = rng.integers(-6, 7, shape).astype(np.int32)
        x = np.ldexp(mant.astype(np.float64), expo).astype(np.float32)   # exact scaling
        if fmt is not None:
            x = F.round_to(x, fmt, saturate=True)
        return x

    def build(rng: CaseRandom) -> dict[str, np.ndarray]:
        a, b = draw(rng, (m, k)), draw(rng, (k, n))
        a[0, 1::2] = -a[0, 0::2][: a[0, 1::2].size]          # row 0: x, -x pairs ...
        b[1::2, 0] = b[0::2, 0][: b[1::2, 0].size]           # ... against equal b: sum 0
        a[1, :] = 0.0
        a[1, ::3] = -0.0                                     # signed zeros
        if specials:
            a[2, 0], b[0, 1] = np.inf, np.nan
        if fmt is None:
            return {"a": a, "b": b}
        return {"a": F.encode(a, fmt), "b": F.encode(b, fmt)}
    return build


def cases() -> list[CaseSpec]:
    out: list[CaseSpec] = []

    def add(cid, params, build, level, fmt, out_fmt="fp32", variant=None, desc=""):
        formats = {} if fmt is None else {"a": fmt, "b": fmt}
        tol, ref = {}, ()
        if params["accumulate"] == "exact" and out_fmt == "fp32":
            tol, ref = {"c": Interval("lo", "hi")}, ("lo", "hi")
        if out_fmt != "fp32":
            formats["c"] = out_fmt
        out.append(CaseSpec(cid, "matmul.matmul", params, build, tolerance=tol,
                            formats=formats, reference=ref, level=level, variant=variant,
                            description=desc))

    def p(acc: str, fmt: str | None, out_fmt: str = "fp32") -> dict[str, Any]:
        return {"accumulate": acc, "in_format": fmt, "out_format": out_fmt}

    add("matmul.exact.bf16.24x64x16", p("exact", "bf16"), _operands(24, 64, 16, "bf16"),
        0, "bf16", desc="correctly rounded BF16 GEMM, FP32 out, with acceptance interval")
    add("matmul.exact.fp32.16x300x8", p("exact", None), _operands(16, 300, 8, None), 1,
        None, desc="correctly rounded FP32 GEMM, K = 300")
    add("matmul.exact.e4m3.16x128x16", p("exact", "e4m3"), _operands(16, 128, 16, "e4m3"),
        1, "e4m3", desc="correctly rounded E4M3 GEMM")
    add("matmul.exact.fp16.specials", p("exact", "fp16"),
        _operands(8, 40, 8, "fp16", specials=True), 1, "fp16",
        desc="Inf and NaN propagate as IEEE sums do")
    add("matmul.exact.bf16.out_bf16", p("exact", "bf16", "bf16"),
        _operands(16, 64, 16, "bf16"), 1, "bf16", "bf16",
        desc="exact sum rounded once to BF16 (codes)")
    for acc in ("sequential", "sequential_fma", "pairwise", "chunked"):
        add(f"matmul.{acc}.bf16.16x300x8", p(acc, "bf16"), _operands(16, 300, 8, "bf16"),
            1, "bf16", variant={"choice": "accumulation", "option": acc},
            desc=f"{acc} accumulation in FP32")
    preset_formats = {"V100-FP16": "fp16", "A100-FP16": "fp16", "A100-BF16": "bf16",
                      "A100-TF32": "tf32", "H100-FP16": "fp16", "H100-BF16": "bf16",
                      "H100-FP8": "e4m3", "B200-FP8": "e4m3"}
    for preset, fmt in preset_formats.items():
        add(f"matmul.blockfma.{preset.lower()}.16x96x16", p(preset, fmt),
            _operands(16, 96, 16, fmt), 1, fmt,
            variant={"choice": "accumulation", "option": preset},
            desc=f"tensor-core block FMA model {preset} (n, F) = {_nf(preset)}")
    for (m, k, n), tile, level in (((33, 40, 20), (16, 16, 8), 1),
                                   ((64, 64, 64), (16, 16, 16), 2)):
        out.append(CaseSpec(
            f"matmul.tiled.{m}x{k}x{n}.tile{'x'.join(map(str, tile))}", "matmul.tiled",
            {"tile": list(tile), "accumulate": "exact", "in_format": "bf16"},
            _operands(m, k, n, "bf16"), formats={"a": "bf16", "b": "bf16"}, level=level,
            description="shared-memory tiled product: values and traffic counts"))
    return out


AREA = Area("matmul", SPECS, OPERATIONS, cases)
