"""The callable contract of every ``conform`` target: how the oracle calls your function
and what it must return, with an example adapter and command. ``conform --help`` prints
this table and ``docs/conformance.md`` states it in full; a test keeps the two in step.

Low-precision results are unsigned integer codes, one code per element (FP4 and FP6
unpacked, in the low bits). An ml_dtypes array whose dtype is the expected format
(``float8_e4m3fn``, ``float4_e2m1fn``, ``float8_e8m0fnu``, ...) is read as the codes it
holds; an ml_dtypes array of another format is refused, naming both.

The example adapters are user code for other libraries (ml_dtypes, PyTorch, torchao),
never imported here: they are text, kept in ``adapters.txt`` beside this module.
"""
from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Contract", "CONTRACTS", "help_text"]


@dataclass(frozen=True)
class Contract:
    """How ``conform TARGET`` calls the implementation."""

    target: str
    call: str          # the call, e.g. "fn(x) -> codes"
    arguments: str     # what the oracle passes
    returns: str       # what the callable returns
    adapter: str       # a minimal adapter (Python source)
    command: str       # the command that checks it


def _read_adapters(path: Path) -> dict[str, str]:
    """The example adapters of ``adapters.txt``: after each ``## TARGET`` line, the
    adapter's source up to the next such line."""
    out: dict[str, list[str]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            cur = out.setdefault(line[3:].strip(), [])
        else:
            cur.append(line)
    return {k: "\n".join(v) for k, v in out.items()}


#: target -> its example adapter (Python source for the user's module)
ADAPTERS = _read_adapters(Path(__file__).with_name("adapters.txt"))

CONTRACTS: dict[str, Contract] = {c.target: c for c in (
    Contract(
        "formats.encode", "fn(x) -> codes",
        "x: a 1-D NumPy array of float32 (--dtype float16/float64 to change it) placed "
        "around FORMAT's ties, subnormals, overflow threshold, zeros, infinities and NaNs",
        "an array of x's shape holding FORMAT's codes as unsigned integers (or an "
        "ml_dtypes array of FORMAT, read as its codes); --scalar: one scalar in, one "
        "code out",
        ADAPTERS["formats.encode"],
        "python -m oracle conform formats.encode --impl mymod:to_e4m3 --format e4m3"),
    Contract(
        "formats.decode", "fn(codes) -> values",
        "codes: a 1-D array of every code of FORMAT (uint8, or uint16 for 16-bit formats)",
        "an array of the same shape of floating-point values (compared as float32 "
        "bitwise, NaNs as one class, -0.0 keeps its sign)",
        ADAPTERS["formats.decode"],
        "python -m oracle conform formats.decode --impl mymod:from_e4m3 --format e4m3"),
    Contract(
        "formats.round_to", "fn(x) -> y",
        "x: as for formats.encode",
        "an array of x's shape and dtype: x rounded to FORMAT (fake quantisation)",
        ADAPTERS["formats.round_to"],
        "python -m oracle conform formats.round_to --impl mymod:fake_quant --format bf16"),
    Contract(
        "scaling.mx_quantize", "fn(x) -> (codes, scales)",
        "x: float32 of shape (rows, n * 32), blocks of 32 along the last axis",
        "codes: (rows, n * 32) element codes of FORMAT, one per byte (FP4 packed two per "
        "byte, low nibble first: refimpl.formats.unpack(packed.ravel(), FORMAT, "
        "x.size).reshape(x.shape)); scales: (rows, n) E8M0 scale codes (uint8, or "
        "ml_dtypes float8_e8m0fnu)",
        ADAPTERS["scaling.mx_quantize"],
        "python -m oracle conform scaling.mx_quantize --impl mymod:mx --format e4m3"),
    Contract(
        "scaling.nvfp4_quantize", "fn(x) -> (codes, scales, global_scale)",
        "x: float32 of shape (rows, n * 16), 1x16 blocks along the last axis",
        "codes: (rows, n * 16) E2M1 codes, one per byte (unpack two-per-byte data first); "
        "scales: (rows, n) E4M3 codes; global_scale: a float32 scalar, S_enc for the te "
        "rules (decode x = e * s / S_enc), the decode scale p for torchao "
        "(x = e * (p * s), the scale rounded to float32 first); optionally a fourth, "
        "dequantized (float32, x's shape), compared bitwise",
        ADAPTERS["scaling.nvfp4_quantize"],
        "python -m oracle conform scaling.nvfp4_quantize --impl mymod:nvfp4 "
        "--scale-rule torchao"),
    Contract(
        "matmul.matmul", "fn(a, b) -> c",
        "a (M, K), b (K, N): float32 arrays holding FORMAT values (default bf16)",
        "c: (M, N), accumulated in float32 in any order (each element within gamma_K * "
        "sum|a_ik b_kj| of the exact product)",
        ADAPTERS["matmul.matmul"],
        "python -m oracle conform matmul.matmul --impl mymod:gemm --format bf16"),
    Contract(
        "attention.attention", "fn(q, k, v, **options) -> out",
        "q (B, Hq, Sq, D), k and v (B, Hkv, Sk, D): float32 arrays holding values exact "
        "in FP16 and BF16 (SDPA layout, Hq a multiple of Hkv); with --masks the keywords "
        "causal (bool), causal_alignment ('bottom_right' or 'top_left'), window "
        "((left, right) or None) and key_padding_mask ((B, Sk) bool, True = valid key, "
        "or None); with a padding mask, bottom_right aligns each batch entry's queries "
        "to its valid keys (query i sees key j <= i + n_b - Sq, n_b the valid keys: "
        "right padding, as FlashAttention's varlen kernels see it)",
        "out: (B, Hq, Sq, D) float32; a fully masked row gives 0. --dtype fp16|bf16: "
        "within 2x the error of the naive computation in that precision; --dtype fp32: "
        "within the float32 bound (oracle.conformance.tensors.fp32_attention_bound)",
        ADAPTERS["attention.attention"],
        "python -m oracle conform attention.attention --impl mymod:sdpa --dtype fp32"),
    Contract(
        "softmax.softmax", "fn(x) -> y",
        "x: float32 of shape (rows, L): scores with -inf entries, a fully masked row, "
        "tied maxima and large offsets; softmax along the last axis",
        "y: float32 of x's shape, 0 at -inf entries and zeros for a fully masked row; "
        "accepted within 8 + L + 2 * ceil(D) float32 ulps of the correctly rounded "
        "softmax, D the largest distance of an entry from its row's maximum "
        "(oracle.tolerance.softmax_tolerance)",
        ADAPTERS["softmax.softmax"],
        "python -m oracle conform softmax.softmax --impl mymod:softmax"),
)}


def help_text(targets: list[str] | None = None) -> str:
    """The contracts as ``conform --help`` prints them."""
    lines = ["callable contracts (full text: docs/conformance.md):", ""]
    for name in targets or list(CONTRACTS):
        c = CONTRACTS[name]
        lines.append(f"{c.target}: {c.call}")
        for label, text in (("arguments:", c.arguments), ("returns:", c.returns)):
            lines.append(textwrap.fill(text, 88, initial_indent=f"  {label:11}",
                                       subsequent_indent=" " * 13))
        lines.append("  example adapter:")
        lines.extend("    " + line for line in c.adapter.splitlines())
        lines.append(f"  example:   {c.command}")
        lines.append("")
    return "\n".join(lines)
