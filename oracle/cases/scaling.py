"""Golden cases for block scaling (``refimpl.scaling``): OCP MX, NVFP4 and block FP8.

Each quantisation case stores the source tensor (float32) and, as expected outputs, the
element codes (with their format), the scale codes (E8M0 for MX, E4M3 for NVFP4) or
float32 scales (block FP8), and the dequantised tensor. Codes and scales are exact;
the dequantised values compare with NaNs as one class.

Inputs are built from the blocks that block scaling gets wrong (one block per row): all
zero (with -0.0), amax exactly a power of two and one float32 ulp below (7.9999995,
0x40FFFFFF, pinned: FLOOR takes the exponent bits), a single huge outlier with the rest
tiny, float32-subnormal amax, near-float32-max amax (scale clamp at 2^127), the E4M3
957/960 clipping case, values already representable, then random blocks. Blocks holding
NaN or Inf are separate cases, because what they become is an implementation-defined
choice (variant ``mx_inf_block``). The ``tiny_amax`` cases (every floating-point element
format under every scale rule, MXINT8 under floor) hold one block per power of two of
amax from 2^-137 to 2^-119: there the scale is clamped to code 0x00 (2^-127), and an
implementation that stores 0x00 but divides by the float32 normal minimum 2^-126 (a bug
of a widely used MX library) halves every element. Element codes in blocks whose scale
is NaN are don't-care (tolerance ``exact_unless_nan_scale``). The scale rule is a named
choice too (variant ``mx_scale_rule``: floor is OCP MX v1.0; ceil, even, rceil are in
use), as is the NVFP4 rule (variant ``nvfp4_scale_rule``: TransformerEngine or torchao).

Sources: OCP MX v1.0 sections 5-6; NVIDIA NVFP4 / TransformerEngine reference formulas;
DeepSeek-V3 technical report (block FP8).
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from oracle.cases import Area, CaseSpec, Operation
from oracle.random_stream import CaseRandom
from oracle.tolerance import AllClose, ExactNaNClass, ExactUnlessNaNScale
from refimpl import formats as F
from refimpl import scaling as Q
from refimpl.deprecation import renamed_arguments

SPECS = {"OCP MX": "1.0", "NVFP4": "NVIDIA Blackwell / TransformerEngine reference",
         "Block FP8": "DeepSeek-V3 technical report (arXiv 2412.19437)"}

VALUES_TOL = {"dequantized": ExactNaNClass()}
#: MX: element codes under a NaN scale are don't-care (every element of such a block
#: decodes to NaN, OCP MX v1.0 section 5.2); the rest is exact
MX_TOL = {"codes": ExactUnlessNaNScale("scales", 32, -1, "e8m0"),
          "dequantized": ExactNaNClass()}
#: block maxima (as powers of two) of the tiny-amax blocks: the scale exponent a rule
#: picks is clamped at -127 (code 0x00) for every element format somewhere in this range,
#: and the elements are still non-zero at its low end (E5M2's subnormals reach 2^-16,
#: E4M3's 2^-9, E2M1's 2^-1 below 2^-127 * their max)
TINY_AMAX_EXPONENTS = tuple(range(-137, -118))


def _mx(inputs: Mapping[str, np.ndarray], p: Mapping[str, Any]) -> dict[str, np.ndarray]:
    q = Q.mx_quantize(inputs["x"], p["fmt"], block_size=p["block_size"], axis=p["axis"],
                      scale_rule=p["scale_rule"], inf_block=p["inf_block"])
    return {"codes": q.codes, "scales": q.scales, "dequantized": q.dequantize()}


def _mx_matmul(inputs: Mapping[str, np.ndarray], p: Mapping[str, Any]) -> dict[str, np.ndarray]:
    a = Q.MXArray(inputs["a_codes"], inputs["a_scales"], p["fmt"], p["block_size"], -1)
    b = Q.MXArray(inputs["b_codes"], inputs["b_scales"], p["fmt"], p["block_size"], 0)
    return {"c": Q.mx_matmul(a, b)}


def _nvfp4(inputs: Mapping[str, np.ndarray], p: Mapping[str, Any]) -> dict[str, np.ndarray]:
    q = Q.nvfp4_quantize(inputs["x"], block=tuple(p["block"]), scale_rule=p["scale_rule"],
                         global_amax=p["global_amax"], hadamard=p["hadamard"])
    return {"codes": q.codes, "scales": q.scales,
            "global_scale": np.asarray(q.global_scale, dtype=np.float32).reshape(()),
            "dequantized": q.dequantize()}


def _block_fp8(inputs: Mapping[str, np.ndarray], p: Mapping[str, Any]) -> dict[str, np.ndarray]:
    q = Q.block_fp8_quantize(inputs["x"], block=tuple(p["block"]), fmt=p["fmt"],
                             power_of_two=p["power_of_two"])
    return {"codes": q.codes, "scales": q.scales, "dequantized": q.dequantize()}


def _tensor(inputs: Mapping[str, np.ndarray], p: Mapping[str, Any]) -> dict[str, np.ndarray]:
    mag = np.abs(inputs["x"])
    amax = np.float32(mag[~np.isnan(mag)].max()) if mag.size else np.float32(0)
    scale = Q.tensor_scale(amax, p["fmt"], p["margin"], power_of_two=p["power_of_two"])
    t = Q.tensor_quantize(inputs["x"], scale, p["fmt"])
    return {"scale": np.asarray(t.scale, np.float32).reshape(()), "codes": t.codes,
            "dequantized": t.dequantize()}


def _delayed(inputs: Mapping[str, np.ndarray], p: Mapping[str, Any]) -> dict[str, np.ndarray]:
    d = Q.DelayedScaling(p["fmt"], margin=p["margin"], amax_history_len=p["history"],
                         amax_compute_algo=p["algo"])
    return {"scales": np.array([d.update(a) for a in inputs["amax"]], np.float32)}


def _qerror(inputs: Mapping[str, np.ndarray], p: Mapping[str, Any]) -> dict[str, np.ndarray]:
    e = Q.quantization_error(inputs["x"], inputs["q"])
    return {"metrics": np.array([e.rmse, e.max_abs, e.sqnr_db], np.float64)}


def _hadamard(inputs: Mapping[str, np.ndarray], p: Mapping[str, Any]) -> dict[str, np.ndarray]:
    return {"y": Q.hadamard_transform(inputs["x"], size=p["size"], inverse=p["inverse"])}


OPERATIONS = [
    Operation("scaling.tensor_quantize", _tensor,
              "scale = refimpl.scaling.tensor_scale(amax(x), fmt, margin, power_of_two=); "
              "t = tensor_quantize(x, scale, fmt); codes, dequantized"),
    Operation("scaling.delayed_scaling", _delayed,
              "d = refimpl.scaling.DelayedScaling(fmt, margin, amax_history_len=, "
              "amax_compute_algo=); scales[t] = d.update(amax[t])"),
    Operation("scaling.quantization_error", _qerror,
              "metrics = [rmse, max_abs, sqnr_db] of refimpl.scaling.quantization_error(x, q)"),
    Operation("scaling.hadamard_transform", _hadamard,
              "y = refimpl.scaling.hadamard_transform(x, size=, inverse=) (TE's signs)"),
    Operation("scaling.mx_quantize", _mx,
              "q = refimpl.scaling.mx_quantize(x, fmt=, block_size=, axis=, scale_rule=, "
              "inf_block=); codes, scales, dequantized = q.codes, q.scales, q.dequantize()"),
    Operation("scaling.mx_matmul", _mx_matmul,
              "c = refimpl.scaling.mx_matmul(MXArray(a_codes, a_scales, fmt, block_size, -1), "
              "MXArray(b_codes, b_scales, fmt, block_size, 0))"),
    Operation("scaling.nvfp4_quantize", _nvfp4,
              "q = refimpl.scaling.nvfp4_quantize(x, block=, scale_rule=, global_amax=, "
              "hadamard=)"),
    Operation("scaling.block_fp8_quantize", _block_fp8,
              "q = refimpl.scaling.block_fp8_quantize(x, block=, fmt=, power_of_two=)"),
]


@renamed_arguments({"elem": "fmt"})
def special_blocks(rng: CaseRandom, size: int, fmt: str) -> list[np.ndarray]:
    """One float32 block per kind, in the order of the module docstring; ``fmt`` is the
    MX element format (``"int8"`` for MXINT8)."""
    def rand(scale_exp: int = 0) -> np.ndarray:
        return np.ldexp(rng.normal(size).astype(np.float64), scale_exp).astype(np.float32)

    blocks = []
    z = np.zeros(size, np.float32)
    z[1::3] = -0.0
    blocks.append(z)
    for target in (np.float32(8.0), np.nextafter(np.float32(8.0), np.float32(0))):
        b = np.clip(rand(), -4, 4).astype(np.float32)
        b[3] = target
        blocks.append(b)
    b = rand(-10)
    b[5] = np.float32(12345.0)
    blocks.append(b)
    blocks.append((rand() * np.float32(2.0 ** -140)).astype(np.float32))      # subnormal
    b = rand(100)
    b[0] = np.float32(3.0e38)
    blocks.append(b)
    b = np.clip(rand(4), -900, 900).astype(np.float32)
    b[0], b[1] = 960.0, 957.0                                                 # clipping
    blocks.append(b)
    if fmt != "int8":
        f = F.get(fmt)
        mags = rng.integers(0, f.max_code_magnitude + 1, size)
        vals = F.decode(mags.astype(f.code_dtype), f).astype(np.float64)
        signs = np.where(rng.integers(0, 2, size) == 1, -1.0, 1.0)
        blocks.append(np.ldexp(vals * signs, 3).astype(np.float32))          # exact
    return blocks


def tiny_amax_blocks(rng: CaseRandom, size: int) -> list[np.ndarray]:
    """One float32 block per exponent of :data:`TINY_AMAX_EXPONENTS`: random elements of
    magnitude below 2^(e+1) with one at +-1.5 * 2^e, so floor(log2(amax)) = e."""
    blocks = []
    for e in TINY_AMAX_EXPONENTS:
        m = np.clip(rng.normal(size).astype(np.float64), -1.96875, 1.96875)
        m[int(rng.integers(0, size))] = 1.5 if rng.integers(0, 2) else -1.5
        blocks.append(np.ldexp(m, e).astype(np.float32))
    return blocks


def _mx_input(elem: str, size: int, n_random: int, nonfinite: bool = False,
              tiny: bool = False):
    def build(rng: CaseRandom) -> dict[str, np.ndarray]:
        if tiny:
            rows = tiny_amax_blocks(rng, size)
        elif nonfinite:
            rows = []
            for v in (np.nan, np.inf, -np.inf):
                b = np.ldexp(rng.normal(size).astype(np.float64), 2).astype(np.float32)
                b[7] = v
                rows.append(b)
            rows.append(np.ldexp(rng.normal(size).astype(np.float64), 2).astype(np.float32))
        else:
            rows = special_blocks(rng, size, elem)
            rows += [np.ldexp(rng.normal(size).astype(np.float64),
                              int(rng.integers(-20, 21))).astype(np.float32)
                     for _ in range(n_random)]
        return {"x": np.stack(rows)}
    return build


def _mx_case(elem: str, rule: str, level: int, *, inf_block: str = "nan",
             nonfinite: bool = False, tiny: bool = False) -> CaseSpec:
    formats = {"scales": "e8m0"}
    if elem != "int8":
        formats["codes"] = elem
    suffix = f".inf_block={inf_block}" if nonfinite else (".tiny_amax" if tiny else "")
    variant = ({"choice": "mx_inf_block", "option": inf_block} if nonfinite
               else {"choice": "mx_scale_rule", "option": rule})
    return CaseSpec(
        f"scaling.mx.{elem}.{rule}{suffix}", "scaling.mx_quantize",
        {"fmt": elem, "block_size": 32, "axis": -1, "scale_rule": rule,
         "inf_block": inf_block},
        _mx_input(elem, 32, 6, nonfinite, tiny), tolerance=MX_TOL, formats=formats,
        level=level, variant=variant,
        description=f"MX {elem} elements, scale rule {rule}; one 32-element block per row"
                    + ("; blocks holding NaN, +Inf, -Inf" if nonfinite else
                       "; amax 2^-137 .. 2^-119, scale clamped to 0x00 = 2^-127" if tiny
                       else "; special blocks first, then random ones")
                    + ("; MXINT8 codes are two's complement bytes" if elem == "int8" else ""))


def _mx_matmul_input(elem: str, m: int, k: int, n: int):
    def build(rng: CaseRandom) -> dict[str, np.ndarray]:
        a = Q.mx_quantize(rng.normal((m, k)), elem, axis=-1)
        b = Q.mx_quantize(np.ldexp(rng.normal((k, n)).astype(np.float64), 3)
                          .astype(np.float32), elem, axis=0)
        return {"a_codes": a.codes, "a_scales": a.scales, "b_codes": b.codes,
                "b_scales": b.scales}
    return build


def _nvfp4_input(rows: int, cols: int):
    def build(rng: CaseRandom) -> dict[str, np.ndarray]:
        x = np.ldexp(rng.normal((rows, cols)).astype(np.float64), 2).astype(np.float32)
        x[0, :16] = 0.0                                   # all-zero block
        x[1, :16] *= np.float32(2.0 ** -30)               # tiny block
        x[2, 3] = np.float32(3000.0)                      # outlier
        return {"x": x}
    return build


def _fp8_input(rows: int, cols: int):
    def build(rng: CaseRandom) -> dict[str, np.ndarray]:
        x = rng.normal((rows, cols))
        x[0, :] = 0.0                                     # amax floored at 1e-4
        x[1, 5] = np.float32(1e5)
        return {"x": x}
    return build


def cases() -> list[CaseSpec]:
    out: list[CaseSpec] = [_mx_case("e4m3", "floor", 0)]
    for elem in ("e5m2", "e2m3", "e3m2", "e2m1", "int8"):
        out.append(_mx_case(elem, "floor", 1))
    for rule in ("ceil", "even", "rceil"):
        for elem in ("e4m3", "e2m1"):
            out.append(_mx_case(elem, rule, 1))
    for policy in ("nan", "max", "exponent"):
        out.append(_mx_case("e4m3", "floor", 1, inf_block=policy, nonfinite=True))
    out.append(_mx_case("e2m1", "floor", 2, inf_block="max", nonfinite=True))
    for elem in ("e4m3", "e5m2", "e2m3", "e3m2", "e2m1"):
        for rule in Q.SCALE_RULES:
            out.append(_mx_case(elem, rule, 1, tiny=True))
    out.append(_mx_case("int8", "floor", 1, tiny=True))
    for elem, level in (("e4m3", 1), ("e2m1", 1), ("e5m2", 2)):
        formats = {"a_codes": elem, "b_codes": elem, "a_scales": "e8m0", "b_scales": "e8m0"}
        out.append(CaseSpec(f"scaling.mx_matmul.{elem}.8x64x8", "scaling.mx_matmul",
                            {"fmt": elem, "block_size": 32}, _mx_matmul_input(elem, 8, 64, 8),
                            formats=formats, level=level,
                            description="MX dot products: exact products and sum, scales "
                                        "per block pair, one rounding to float32"))
    for rule, block, hadamard, level in (("te", (1, 16), False, 1), ("torchao", (1, 16), False, 1),
                                         ("te_kernel", (1, 16), False, 1),
                                         ("te", (16, 16), False, 1), ("te", (1, 16), True, 2)):
        tag = f"{rule}.{block[0]}x{block[1]}" + (".hadamard" if hadamard else "")
        out.append(CaseSpec(
            f"scaling.nvfp4.{tag}", "scaling.nvfp4_quantize",
            {"block": list(block), "scale_rule": rule, "global_amax": None,
             "hadamard": hadamard},
            _nvfp4_input(32, 64), tolerance=VALUES_TOL,
            formats={"codes": "e2m1", "scales": "e4m3"}, level=level,
            variant={"choice": "nvfp4_scale_rule", "option": rule},
            description=f"NVFP4 ({rule} rule), {block} blocks; all-zero, tiny and outlier "
                        "blocks included"))
    for block, p2, level in (((1, 128), False, 1), ((128, 128), False, 1),
                             ((1, 128), True, 1)):
        tag = f"{block[0]}x{block[1]}" + (".pow2" if p2 else "")
        rows, cols = (4, 200) if block[0] == 1 else (129, 130)
        out.append(CaseSpec(
            f"scaling.block_fp8.{tag}", "scaling.block_fp8_quantize",
            {"block": list(block), "fmt": "e4m3", "power_of_two": p2},
            _fp8_input(rows, cols), tolerance=VALUES_TOL, formats={"codes": "e4m3"},
            level=level, description=f"DeepSeek-V3 block FP8, {block} tiles, ragged edges"))
    for fmt_, margin, p2 in (("e4m3", 0, False), ("e5m2", 1, False), ("e4m3", 0, True)):
        tag = f"{fmt_}.margin{margin}" + (".pow2" if p2 else "")
        out.append(CaseSpec(
            f"scaling.tensor.{tag}", "scaling.tensor_quantize",
            {"fmt": fmt_, "margin": margin, "power_of_two": p2}, _fp8_input(8, 64),
            tolerance=VALUES_TOL, formats={"codes": fmt_}, level=1,
            description="per-tensor FP8 current scaling (TransformerEngine): "
                        "scale = max / amax / 2^margin, saturating encode"))
    def amaxes(rng: CaseRandom) -> dict[str, np.ndarray]:
        a = np.abs(rng.normal(40, scale=100.0))
        a[[7, 8]] = 0.0                    # zero amax: the previous scale is kept
        a[20] = np.float32(3e38)           # a spike, then it leaves the window
        return {"amax": a.astype(np.float32)}

    for algo, history in (("max", 16), ("most_recent", 16)):
        out.append(CaseSpec(
            f"scaling.delayed.{algo}.h{history}", "scaling.delayed_scaling",
            {"fmt": "e4m3", "margin": 0, "history": history, "algo": algo}, amaxes,
            level=1, variant={"choice": "amax_compute_algo", "option": algo},
            description="TransformerEngine delayed scaling: the scale of step t from the "
                        f"amax history window ({history} steps, {algo})"))
    def mxfp4_pair(rng: CaseRandom) -> dict[str, np.ndarray]:
        x = rng.normal((16, 64))
        return {"x": x, "q": Q.mx_quantize(x, "e2m1").dequantize()}

    out.append(CaseSpec(
        "scaling.quantization_error.mxfp4", "scaling.quantization_error", {}, mxfp4_pair,
        tolerance={"metrics": AllClose(1e-12, 0.0, "float64 sums in fixed order")},
        level=1, description="RMSE, max abs error and SQNR (dB) of MXFP4 on N(0,1) data"))
    had_tol = {"y": AllClose(0.0, 4e-6, "exact 16-point transform, rounded once to "
                                      "float32 (inputs |x| < 4)")}
    for inverse in (False, True):
        out.append(CaseSpec(
            "scaling.hadamard16" + (".inverse" if inverse else ""),
            "scaling.hadamard_transform", {"size": 16, "inverse": inverse},
            lambda r: {"x": r.normal((8, 64))}, tolerance=had_tol, level=1,
            description="NVFP4 random Hadamard transform: 16-point Sylvester Hadamard "
                        "with TransformerEngine's sign diagonal, / 4"))
    return out


AREA = Area("scaling", SPECS, OPERATIONS, cases)
