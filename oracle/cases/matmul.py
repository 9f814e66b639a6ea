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
- ``matmul.mma``: D = A B + C on a tensor-core or matrix-core preset
  (``refimpl.matmul.presets``: every GPU and input format, one case each, FP16-output
  cases for the NVIDIA presets): random operands over a wide exponent range with zeros,
  the papers' probe inputs embedded at fixed outputs (the C-placement, rounding and
  subnormal probes of ``tests/refimpl/test_matmul_probes.py``), Inf/NaN in A, B and C.
  ``matmul.block_scaled``: the same for the Blackwell block-scaled kinds, with E8M0 or
  E4M3 scale codes.
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

SPECS = {"Tensor-core model": "Fasi, Higham, Mikaitis, Pranesh, PeerJ CS 7:e330 (2021)",
         "Tensor-core presets": "Khattak, Mikaitis, arXiv:2512.07004 (2025); Xie et al., "
                                "MMA-Sim, arXiv:2511.10909 (2025)"}


def _nf(name: str) -> tuple[int, int]:
    model = M.BlockFMA.preset(name)
    return model.n, model.fraction_bits


def values(x: np.ndarray, fmt: str | None) -> np.ndarray:
    """The values of stored operands: codes of ``fmt`` decoded, float32 arrays as they
    are (``fmt`` None)."""
    return x if fmt is None else F.decode(x, fmt)


def _store(c: np.ndarray, fmt: str) -> np.ndarray:
    return c if F.get(fmt).bits == 32 else F.encode(c, fmt)


def bounds(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
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
    a = values(inputs["a"], p["in_format"])
    b = values(inputs["b"], p["in_format"])
    c = M.matmul(a, b, accumulate=p["accumulate"], out_format=p["out_format"])
    out = {"c": _store(c, p["out_format"])}
    if p["accumulate"] == "exact" and F.get(p["out_format"]).bits == 32:
        out["lo"], out["hi"] = bounds(a, b, c)
    return out


def _tiled(inputs: Mapping[str, np.ndarray], p: Mapping[str, Any]) -> dict[str, np.ndarray]:
    a = values(inputs["a"], p["in_format"])
    b = values(inputs["b"], p["in_format"])
    c, st = M.tiled_matmul(a, b, block=tuple(p["tile"]), accumulate=p["accumulate"])
    names = ("global_reads_a", "global_reads_b", "global_writes", "shared_writes",
             "shared_reads", "tiles", "k_steps", "padded_global_reads")
    return {"c": c, "stats": np.array([getattr(st, n) for n in names], np.int64)}


def _mma(inputs: Mapping[str, np.ndarray], p: Mapping[str, Any]) -> dict[str, np.ndarray]:
    a = values(inputs["a"], p["in_format"])
    b = values(inputs["b"], p["in_format"])
    c = values(inputs["c"], None if p["out_format"] == "fp32" else p["out_format"])
    with np.errstate(invalid="ignore", over="ignore"):
        d = M.matmul(a, b, c, accumulate=p["accumulate"], out_format=p["out_format"])
    return {"d": _store(d, p["out_format"])}


def _block_scaled(inputs: Mapping[str, np.ndarray], p: Mapping[str, Any]
                  ) -> dict[str, np.ndarray]:
    fmt, sfmt = p["in_format"], p["scale_format"]
    vals = [F.decode(inputs[k], fmt).astype(np.float64) for k in ("a", "b")]
    scales = [np.abs(F.decode(inputs[k], sfmt).astype(np.float64))
              for k in ("a_scales", "b_scales")]
    with np.errstate(invalid="ignore", over="ignore"):
        d = M.block_scaled_matmul(vals[0], scales[0], vals[1], scales[1], inputs["c"],
                                  accumulate=p["accumulate"], in_format=fmt)
    return {"d": d}


OPERATIONS = [
    Operation("matmul.matmul", _matmul,
              "c = refimpl.matmul.matmul(decode(a), decode(b), accumulate=, out_format=); "
              "lo, hi: acceptance interval of float32 accumulation in any order"),
    Operation("matmul.tiled", _tiled,
              "c, stats = refimpl.matmul.tiled_matmul(a, b, block=tile, accumulate=)"),
    Operation("matmul.mma", _mma,
              "d = refimpl.matmul.matmul(decode(a), decode(b), c, accumulate=PRESET, "
              "out_format=): D = A B + C on a tensor-core/matrix-core preset"),
    Operation("matmul.block_scaled", _block_scaled,
              "d = refimpl.matmul.block_scaled_matmul(decode(a), decode(a_scales), decode(b), "
              "decode(b_scales), c, accumulate=PRESET, in_format=)"),
]


_SPECIAL = {"fp16": np.inf, "bf16": np.inf, "tf32": np.inf, "e5m2": np.inf,
            "e4m3": np.nan, "e4m3fnuz": np.nan, "e5m2fnuz": np.nan}


def _mma_operands(fmt: str, m: int, k: int, n: int, out_fmt: str):
    """Random values of ``fmt`` (exponents over +-12 binades, zeros), C of ``out_fmt``;
    probes at fixed outputs: (0, 0) rounding (c = 2048, 1.75 2^-6 * 2^-6), (1, 1) C
    placement (c = 256, 0.75 2^-6 * 2^-9), (2, 2) a subnormal operand (the format's
    smallest subnormal times 1, c = 0), (3, 3) exact cancellation with c = -0;
    row 4 of A and column 5 of B hold the format's Inf (or NaN), C[6, 6] is Inf and
    C[7, 7] NaN (FP16 output: C[6, 6] = 65504 with products pushing it over)."""
    f = F.get(fmt)

    def draw(rng: CaseRandom, shape: tuple[int, int]) -> np.ndarray:
        mant = rng.normal(shape)
        expo = rng.integers(-12, 13, shape).astype(np.int32)
        x = np.ldexp(mant.astype(np.float64), expo)
        x = np.asarray(F.round_to(x, f, saturate=True), np.float64)
        x[rng.uniform(shape) < 0.1] = 0.0
        return x

    def build(rng: CaseRandom) -> dict[str, np.ndarray]:
        a, b = draw(rng, (m, k)), draw(rng, (k, n))
        c = rng.normal((m, n)) * 4.0
        c = np.asarray(F.round_to(c, out_fmt, saturate=True), np.float64)
        for i, (x, y, cv) in enumerate(((1.75 * 2**-6, 2.0**-6, 2048.0),
                                        (0.75 * 2**-6, 2.0**-9, 256.0),
                                        (f.min_subnormal, 1.0, 0.0),
                                        (1.0, 1.0, -0.0))):
            a[i, :], b[:, i] = 0.0, 0.0
            a[i, 0], b[0, i], c[i, i] = x, y, cv
        a[3, 1], b[1, 3] = -1.0, 1.0                       # 1 - 1 + (-0): +0
        a[4, 2], b[3, 5] = _SPECIAL[fmt], _SPECIAL[fmt]
        if out_fmt == "fp32":
            c[6, 6], c[7, 7] = np.inf, np.nan
        else:
            c[6, 6] = 65504.0
            a[6, :], b[:, 6] = 0.0, 0.0
            a[6, 0], b[0, 6] = 4.0, 4.0                     # 65504 + 16: Inf in FP16
        out = {"a": F.encode(a, f), "b": F.encode(b, f)}
        out["c"] = c.astype(np.float32) if out_fmt == "fp32" else F.encode(c, out_fmt)
        return out
    return build


def _block_scaled_operands(fmt: str, sfmt: str, m: int, k: int, n: int, bs: int):
    """Element codes of ``fmt``, scale codes of ``sfmt`` (E8M0 exponents within +-8 of 1;
    UE4M3 positive values), a random FP32 C; one E8M0 NaN scale (row 5 of A's scales)."""
    def build(rng: CaseRandom) -> dict[str, np.ndarray]:
        vals = [np.asarray(F.round_to(rng.normal(shape) * 2.0, fmt, saturate=True),
                           np.float64) for shape in ((m, k), (k, n))]
        if sfmt == "e8m0":
            sa = (127 + rng.integers(-8, 9, (m, k // bs))).astype(np.uint8)
            sb = (127 + rng.integers(-8, 9, (k // bs, n))).astype(np.uint8)
            sa[5, 0] = 0xFF
        else:
            sa = F.encode(np.abs(rng.normal((m, k // bs))) + 0.01, "e4m3")
            sb = F.encode(np.abs(rng.normal((k // bs, n))) + 0.01, "e4m3")
        return {"a": F.encode(vals[0], fmt), "a_scales": sa, "b": F.encode(vals[1], fmt),
                "b_scales": sb, "c": (rng.normal((m, n)) * 4.0).astype(np.float32)}
    return build


def operands(m: int, k: int, n: int, fmt: str | None, *, specials: bool = False):
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

    add("matmul.exact.bf16.24x64x16", p("exact", "bf16"), operands(24, 64, 16, "bf16"),
        0, "bf16", desc="correctly rounded BF16 GEMM, FP32 out, with acceptance interval")
    add("matmul.exact.fp32.16x300x8", p("exact", None), operands(16, 300, 8, None), 1,
        None, desc="correctly rounded FP32 GEMM, K = 300")
    add("matmul.exact.e4m3.16x128x16", p("exact", "e4m3"), operands(16, 128, 16, "e4m3"),
        1, "e4m3", desc="correctly rounded E4M3 GEMM")
    add("matmul.exact.fp16.specials", p("exact", "fp16"),
        operands(8, 40, 8, "fp16", specials=True), 1, "fp16",
        desc="Inf and NaN propagate as IEEE sums do")
    add("matmul.exact.bf16.out_bf16", p("exact", "bf16", "bf16"),
        operands(16, 64, 16, "bf16"), 1, "bf16", "bf16",
        desc="exact sum rounded once to BF16 (codes)")
    for acc in ("sequential", "sequential_fma", "pairwise", "chunked"):
        add(f"matmul.{acc}.bf16.16x300x8", p(acc, "bf16"), operands(16, 300, 8, "bf16"),
            1, "bf16", variant={"choice": "accumulation", "option": acc},
            desc=f"{acc} accumulation in FP32")
    preset_formats = {"V100-FP16": "fp16", "A100-FP16": "fp16", "A100-BF16": "bf16",
                      "A100-TF32": "tf32", "H100-FP16": "fp16", "H100-BF16": "bf16",
                      "H100-FP8": "e4m3", "B200-FP8": "e4m3"}
    for preset, fmt in preset_formats.items():
        add(f"matmul.blockfma.{preset.lower()}.16x96x16", p(preset, fmt),
            operands(16, 96, 16, fmt), 1, fmt,
            variant={"choice": "accumulation", "option": preset},
            desc=f"tensor-core block FMA model {preset} (n, F) = {_nf(preset)}")
    for name, pre in M.PRESETS.items():
        variant = {"choice": "accumulation", "option": name}
        if pre.block_scaled:
            model = pre.model()
            fmt = "e2m1" if model.kind == "mxf4nvf4" else "e4m3"
            out.append(CaseSpec(
                f"matmul.mma.{name.lower()}.16x128x8", "matmul.block_scaled",
                {"accumulate": name, "in_format": fmt, "scale_format": model.scale_format},
                _block_scaled_operands(fmt, model.scale_format, 16, 128, 8,
                                       model.scale_block),
                formats={"a": fmt, "b": fmt, "a_scales": model.scale_format,
                         "b_scales": model.scale_format}, level=1, variant=variant,
                description=f"D = A B + C on {name} ({pre.instruction}): {pre.note}"))
            continue
        outs = ("fp32", "fp16") if pre.arch not in ("CDNA1", "CDNA2", "CDNA3") else ("fp32",)
        for out_fmt in outs:
            fmts = {"a": pre.in_format, "b": pre.in_format}
            if out_fmt != "fp32":
                fmts.update(c=out_fmt, d=out_fmt)
            suffix = "" if out_fmt == "fp32" else ".fp16out"
            out.append(CaseSpec(
                f"matmul.mma.{name.lower()}.16x64x8{suffix}", "matmul.mma",
                {"accumulate": name, "in_format": pre.in_format, "out_format": out_fmt},
                _mma_operands(pre.in_format, 16, 64, 8, out_fmt), formats=fmts, level=1,
                variant=variant,
                description=f"D = A B + C on {name} ({pre.instruction}), {out_fmt} "
                            f"accumulator: random, probe and special inputs"))
    for (m, k, n), tile, level in (((33, 40, 20), (16, 16, 8), 1),
                                   ((64, 64, 64), (16, 16, 16), 2)):
        out.append(CaseSpec(
            f"matmul.tiled.{m}x{k}x{n}.tile{'x'.join(map(str, tile))}", "matmul.tiled",
            {"tile": list(tile), "accumulate": "exact", "in_format": "bf16"},
            operands(m, k, n, "bf16"), formats={"a": "bf16", "b": "bf16"}, level=level,
            description="shared-memory tiled product: values and traffic counts"))
    return out


AREA = Area("matmul", SPECS, OPERATIONS, cases)
