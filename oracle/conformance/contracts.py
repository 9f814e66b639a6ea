"""The callable contract of every ``conform`` target: how the oracle calls your function
and what it must return, with an example adapter and command. ``conform --help`` prints
this table and ``docs/conformance.md`` states it in full; a test keeps the two in step.

Low-precision results are unsigned integer codes, one code per element (FP4 and FP6
unpacked, in the low bits). An array whose dtype is the expected format from ml_dtypes
(``float8_e4m3fn``, ``float4_e2m1fn``, ``float8_e8m0fnu``, ...) is read as the codes it
holds; an ml_dtypes array of another format is refused, naming both.
"""
from __future__ import annotations

import textwrap
from dataclasses import dataclass

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


CONTRACTS: dict[str, Contract] = {c.target: c for c in (
    Contract(
        "formats.encode", "fn(x) -> codes",
        "x: a 1-D NumPy array of float32 (--dtype float16/float64 to change it) placed "
        "around FORMAT's ties, subnormals, overflow threshold, zeros, infinities and NaNs",
        "an array of x's shape holding FORMAT's codes as unsigned integers (or an "
        "ml_dtypes array of FORMAT, read as its codes); --scalar: one scalar in, one "
        "code out",
        "import ml_dtypes\n"
        "def to_e4m3(x):\n"
        "    return x.astype(ml_dtypes.float8_e4m3fn)",
        "python -m oracle conform formats.encode --impl mymod:to_e4m3 --format e4m3"),
    Contract(
        "formats.decode", "fn(codes) -> values",
        "codes: a 1-D array of every code of FORMAT (uint8, or uint16 for 16-bit formats)",
        "an array of the same shape of floating-point values (compared as float32 "
        "bitwise, NaNs as one class, -0.0 keeps its sign)",
        "import ml_dtypes\n"
        "def from_e4m3(codes):\n"
        "    return codes.view(ml_dtypes.float8_e4m3fn).astype('float32')",
        "python -m oracle conform formats.decode --impl mymod:from_e4m3 --format e4m3"),
    Contract(
        "formats.round_to", "fn(x) -> y",
        "x: as for formats.encode",
        "an array of x's shape and dtype: x rounded to FORMAT (fake quantisation)",
        "import ml_dtypes\n"
        "def fake_quant(x):\n"
        "    return x.astype(ml_dtypes.bfloat16).astype(x.dtype)",
        "python -m oracle conform formats.round_to --impl mymod:fake_quant --format bf16"),
    Contract(
        "scaling.mx_quantize", "fn(x) -> (codes, scales)",
        "x: float32 of shape (rows, n * 32), blocks of 32 along the last axis",
        "codes: (rows, n * 32) element codes of FORMAT, one per byte (FP4 packed two per "
        "byte, low nibble first: refimpl.formats.unpack(packed.ravel(), FORMAT, "
        "x.size).reshape(x.shape)); scales: (rows, n) E8M0 scale codes (uint8, or "
        "ml_dtypes float8_e8m0fnu)",
        "import torch\n"
        "from torchao.prototype.mx_formats.mx_tensor import to_mx\n"
        "def mx(x):\n"
        "    s, d = to_mx(torch.from_numpy(x), torch.float8_e4m3fn, 32)\n"
        "    return d.view(torch.uint8).numpy(), s.view(torch.uint8).numpy()",
        "python -m oracle conform scaling.mx_quantize --impl mymod:mx --format e4m3"),
    Contract(
        "scaling.nvfp4_quantize", "fn(x) -> (codes, scales, global_scale)",
        "x: float32 of shape (rows, n * 16), 1x16 blocks along the last axis",
        "codes: (rows, n * 16) E2M1 codes, one per byte (unpack two-per-byte data first); "
        "scales: (rows, n) E4M3 codes; global_scale: a float32 scalar, S_enc for the te "
        "rules (decode x = e * s / S_enc), the decode scale p for torchao "
        "(x = e * (p * s), the scale rounded to float32 first); optionally a fourth, "
        "dequantized (float32, x's shape), compared bitwise",
        "import torch\n"
        "from torchao.prototype.mx_formats.nvfp4_tensor import (\n"
        "    NVFP4Tensor, per_tensor_amax_to_scale)\n"
        "from refimpl.formats import unpack\n"
        "def nvfp4(x):\n"
        "    t = torch.from_numpy(x)\n"
        "    p = per_tensor_amax_to_scale(t.abs().max())\n"
        "    q = NVFP4Tensor.to_nvfp4(t, per_tensor_scale=p)\n"
        "    codes = unpack(q.qdata.view(torch.uint8).numpy().ravel(), 'e2m1', x.size)\n"
        "    return (codes.reshape(x.shape), q.scale.view(torch.uint8).numpy(),\n"
        "            q.per_tensor_scale.numpy(), q.dequantize(torch.float32).numpy())",
        "python -m oracle conform scaling.nvfp4_quantize --impl mymod:nvfp4 "
        "--scale-rule torchao"),
    Contract(
        "matmul.matmul", "fn(a, b) -> c",
        "a (M, K), b (K, N): float32 arrays holding FORMAT values (default bf16)",
        "c: (M, N), accumulated in float32 in any order (each element within gamma_K * "
        "sum|a_ik b_kj| of the exact product)",
        "import torch\n"
        "def gemm(a, b):\n"
        "    return (torch.from_numpy(a).bfloat16() @ torch.from_numpy(b).bfloat16()\n"
        "            ).float().numpy()",
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
        "import torch\n"
        "def sdpa(q, k, v):\n"
        "    t = [torch.from_numpy(a) for a in (q, k, v)]\n"
        "    return torch.nn.functional.scaled_dot_product_attention(\n"
        "        *t, enable_gqa=True).numpy()",
        "python -m oracle conform attention.attention --impl mymod:sdpa --dtype fp32"),
    Contract(
        "softmax.softmax", "fn(x) -> y",
        "x: float32 of shape (rows, L): scores with -inf entries, a fully masked row, "
        "tied maxima and large offsets; softmax along the last axis",
        "y: float32 of x's shape, 0 at -inf entries and zeros for a fully masked row; "
        "accepted within 8 + L + 2 * ceil(D) float32 ulps of the correctly rounded "
        "softmax, D the largest distance of an entry from its row's maximum "
        "(oracle.tolerance.softmax_tolerance)",
        "import torch\n"
        "def softmax(x):\n"
        "    y = torch.softmax(torch.from_numpy(x), dim=-1)\n"
        "    return torch.nan_to_num(y, nan=0.0).numpy()   # masked rows: zeros",
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
