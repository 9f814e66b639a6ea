"""``python -m oracle conform TARGET --impl package.module:function [options]``: run the
ready property tests of :mod:`oracle.conformance` against your own callable.

Examples::

    python -m oracle conform formats.encode --impl mypkg.fp8:to_e4m3 --format e4m3
    python -m oracle conform scaling.mx_quantize --impl mypkg.mx:quantize --format e2m1
    python -m oracle conform matmul.matmul --impl mypkg.gemm:bf16_gemm --format bf16
    python -m oracle conform attention.attention --impl mypkg.attn:sdpa --format fp16

Exit 0 when it conforms, 1 with the (shrunk) counterexample when it does not.
"""
from __future__ import annotations

import argparse
from typing import Any

from oracle.conformance import CHECKS, ConformanceError, resolve_callable

#: target -> what --format means for it (and whether it is required)
FORMAT_ROLE = {
    "formats.encode": "the target format (required)",
    "formats.decode": "the format decoded (required)",
    "formats.round_to": "the target format (required)",
    "scaling.mx_quantize": "the MX element format (default e4m3)",
    "matmul.matmul": "the input format (default bf16)",
    "attention.attention": "the naive reference's precision, fp16 or bf16 (default fp16)",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", choices=sorted(CHECKS), help="what the callable implements")
    parser.add_argument("--impl", required=True, metavar="MODULE:FUNCTION",
                        help="your callable, e.g. mypkg.fp8:to_e4m3")
    parser.add_argument("--format", help="; ".join(f"{t}: {r}" for t, r in FORMAT_ROLE.items()))
    parser.add_argument("--rounding", default="nearest_even",
                        help="encoders: rounding mode implemented (default: %(default)s)")
    parser.add_argument("--saturate", action="store_true",
                        help="encoders: overflow saturates to +-max (SATFINITE)")
    parser.add_argument("--dtype", default="float32", choices=["float16", "float32", "float64"],
                        help="encoders: input dtype (default: %(default)s)")
    parser.add_argument("--scalar", action="store_true",
                        help="encoders/decoders: call with one scalar at a time")
    parser.add_argument("--scale-rule", default="floor",
                        help="MX: scale rule implemented (default: %(default)s)")
    parser.add_argument("--inf-block", help="MX: policy for blocks holding Inf, if handled")
    parser.add_argument("--masks", action="store_true",
                        help="attention: also pass causal/window/key_padding_mask options")
    parser.add_argument("--max-examples", type=int, default=100,
                        help="hypothesis examples after the sweep (default: %(default)s)")


def _kwargs(args: argparse.Namespace) -> tuple[tuple[Any, ...], dict[str, Any]]:
    t = args.target
    if t.startswith("formats."):
        if not args.format:
            raise ValueError(f"{t} needs --format ({FORMAT_ROLE[t]})")
        kw: dict[str, Any] = {"vectorized": not args.scalar}
        if t != "formats.decode":
            kw.update(rounding=args.rounding, saturate=args.saturate, dtype=args.dtype,
                      max_examples=args.max_examples)
        return (args.format,), kw
    if t == "scaling.mx_quantize":
        return (args.format or "e4m3",), {"scale_rule": args.scale_rule,
                                           "inf_block": args.inf_block,
                                           "max_examples": args.max_examples}
    if t == "matmul.matmul":
        return (args.format or "bf16",), {"max_examples": args.max_examples}
    return (), {"dtype": args.format or "fp16", "masks": args.masks,
                "max_examples": args.max_examples}


def run(args: argparse.Namespace) -> int:
    fn = resolve_callable(args.impl)
    positional, kwargs = _kwargs(args)
    try:
        import hypothesis  # noqa: F401  (the checks are property tests)
    except ImportError:
        raise ValueError("conform needs hypothesis: python -m pip install hypothesis") from None
    try:
        CHECKS[args.target](fn, *positional, **kwargs)
    except ConformanceError as exc:
        print(f"FAILED: {args.impl}\n{exc}")
        return 1
    print(f"ok: {args.impl} conforms ({args.target}"
          + (f", {positional[0]}" if positional else "") + ")")
    return 0
