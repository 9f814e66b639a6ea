"""``python -m oracle conform TARGET --impl package.module:function [options]``: run the
ready property tests of :mod:`oracle.conformance` against your own callable.

Examples::

    python -m oracle conform formats.encode --impl mypkg.fp8:to_e4m3 --format e4m3
    python -m oracle conform scaling.mx_quantize --impl mypkg.mx:quantize --format e2m1 \\
        --impl-kwargs '{"fmt": "e2m1", "rule": "floor"}'
    python -m oracle conform scaling.nvfp4_quantize --impl mypkg.nvfp4:quantize
    python -m oracle conform matmul.matmul --impl mypkg.gemm:bf16_gemm --format bf16
    python -m oracle conform attention.attention --impl mypkg.attn:sdpa --dtype bf16 \\
        --masks --alignment top_left --no-window

``--impl-kwargs JSON`` passes the same keyword arguments to every call, so one adapter
serves every format and rule. Exit 0 when it conforms (saying how many inputs were
compared), 1 when it does not (every kind of failure found, each with its simplest
counterexample, and per-output failure counts; an implementation that raises is a
failure too), 2 on a usage error.
"""
from __future__ import annotations

import argparse
import functools
import json
from typing import Any

from oracle.conformance import CHECKS, ConformanceError, resolve_callable
from oracle.conformance.choices import choices_for, conform
from oracle.conformance.contracts import CONTRACTS, help_text
from oracle.variants import parse as parse_variants

#: target -> what --format means for it (and whether it is required)
FORMAT_ROLE = {
    "formats.encode": "the target format (required)",
    "formats.decode": "the format decoded (required)",
    "formats.round_to": "the target format (required)",
    "scaling.mx_quantize": "the MX element format (default e4m3)",
    "scaling.nvfp4_quantize": "not used (E2M1 elements, E4M3 scales)",
    "matmul.matmul": "the input format (default bf16)",
    "attention.attention": "the precision computed in, fp16, bf16 or fp32 (default fp16; "
                           "same as --dtype)",
}

_SOURCE_DTYPES = ("float16", "float32", "float64")
_ATTENTION_DTYPES = ("fp16", "bf16", "fp32")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # the contracts and examples are written out below the options
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = help_text([t for t in CONTRACTS if t in CHECKS]) + _variants_text()
    parser.add_argument("target", choices=sorted(CHECKS), help="what the callable implements")
    parser.add_argument("--impl", required=True, metavar="MODULE:FUNCTION",
                        help="your callable, e.g. mypkg.fp8:to_e4m3")
    parser.add_argument("--impl-kwargs", metavar="JSON", default=None,
                        help="a JSON object of keyword arguments passed to every call of "
                             "the callable, e.g. '{\"fmt\": \"e2m1\", \"rule\": \"floor\"}'")
    parser.add_argument("--format", help="; ".join(f"{t}: {r}" for t, r in FORMAT_ROLE.items()))
    parser.add_argument("--rounding", default=None,
                        help="encoders: rounding mode implemented (default: nearest_even)")
    parser.add_argument("--saturate", action="store_true",
                        help="encoders: overflow saturates to +-max (SATFINITE)")
    parser.add_argument("--dtype", default=None,
                        choices=list(_SOURCE_DTYPES) + list(_ATTENTION_DTYPES),
                        help="encoders: input dtype, float16/float32/float64 (default "
                             "float32); attention: the precision the implementation "
                             "computes in, fp16 or bf16 (within 2x the naive computation's "
                             "error) or fp32 (the float32 bound; default fp16)")
    parser.add_argument("--scalar", action="store_true",
                        help="encoders/decoders: call with one scalar at a time")
    parser.add_argument("--scale-rule", default=None,
                        help="MX: scale rule implemented (default floor); NVFP4: te, "
                             "te_kernel or torchao (default te)")
    parser.add_argument("--inf-block", choices=["nan", "max", "exponent"],
                        help="MX: the policy for blocks holding Inf or NaN; when given, "
                             "such blocks are always swept")
    parser.add_argument("--masks", action="store_true",
                        help="attention: also pass causal/window/key_padding_mask options")
    parser.add_argument("--alignment", choices=["bottom_right", "top_left"],
                        help="attention: the only causal alignment implemented (top_left "
                             "is PyTorch SDPA's is_causal); default: both are checked")
    parser.add_argument("--no-window", action="store_true",
                        help="attention: never pass a sliding window")
    parser.add_argument("--variant", action="append", default=[], metavar="CHOICE=OPTION",
                        help="the option of a documented implementation-defined choice "
                             "that the callable follows (repeatable), e.g. e8m0_zero=nan; "
                             "the choices of each target are listed below. A failure "
                             "that a documented variant explains names it")
    parser.add_argument("--max-examples", type=int, default=100,
                        help="hypothesis examples after the sweep, >= 0; 0 runs the "
                             "sweep only (default: %(default)s)")


def _variants_text() -> str:
    lines = ["documented variants (--variant CHOICE=OPTION; the default option first):"]
    for target, fmt in (("formats.encode", "e8m0"), ("formats.encode", "e2m1"),
                        ("formats.encode", "e2m3"), ("formats.encode", "e3m2"),
                        ("scaling.mx_quantize", None), ("scaling.nvfp4_quantize", None),
                        ("attention.attention", None)):
        for choice, options in choices_for(target, fmt).items():
            if target == "formats.encode":
                target = "formats.encode, formats.round_to"
            lines.append(f"  {target}" + (f" --format {fmt}" if fmt else "")
                         + f": {choice} = {' | '.join(options)}")
    return "\n".join(lines) + "\n"


def _impl_kwargs(text: str | None) -> dict[str, Any]:
    if text is None:
        return {}
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--impl-kwargs: not valid JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise ValueError(f"--impl-kwargs must be a JSON object of keyword arguments, got "
                         f"{type(obj).__name__}")
    return obj


def _kwargs(args: argparse.Namespace) -> tuple[tuple[Any, ...], dict[str, Any]]:
    t = args.target
    if args.max_examples < 0:
        raise ValueError(f"--max-examples must be >= 0, got {args.max_examples}")
    is_attention = t == "attention.attention"
    if args.dtype in _ATTENTION_DTYPES and not is_attention:
        raise ValueError(f"--dtype {args.dtype} applies to attention.attention only; "
                         f"{t} takes {', '.join(_SOURCE_DTYPES)}")
    if args.dtype in _SOURCE_DTYPES and is_attention:
        raise ValueError(f"attention.attention takes --dtype {' or '.join(_ATTENTION_DTYPES)}, "
                         f"got {args.dtype}")
    if not is_attention and (args.alignment or args.no_window):
        raise ValueError("--alignment and --no-window apply to attention.attention only")
    if args.inf_block and t != "scaling.mx_quantize":
        raise ValueError("--inf-block applies to scaling.mx_quantize only")
    if t.startswith("formats."):
        if not args.format:
            raise ValueError(f"{t} needs --format ({FORMAT_ROLE[t]})")
        kw: dict[str, Any] = {"vectorized": not args.scalar}
        if t != "formats.decode":
            kw.update(saturate=args.saturate, dtype=args.dtype or "float32",
                      max_examples=args.max_examples)
            if args.rounding:
                kw["rounding"] = args.rounding
        return (args.format,), kw
    # an option left unset is not passed: the check's default, or a --variant, applies
    rule = {"scale_rule": args.scale_rule} if args.scale_rule else {}
    if t == "scaling.mx_quantize":
        return (args.format or "e4m3",), {**rule, "inf_block": args.inf_block,
                                           "max_examples": args.max_examples}
    if t == "scaling.nvfp4_quantize":
        if args.format:
            raise ValueError("scaling.nvfp4_quantize takes no --format (E2M1 elements, "
                             "E4M3 scales); use --scale-rule")
        return (), {**rule, "max_examples": args.max_examples}
    if t == "matmul.matmul":
        return (args.format or "bf16",), {"max_examples": args.max_examples}
    if args.format and args.dtype and args.format != args.dtype:
        raise ValueError(f"--format {args.format} and --dtype {args.dtype} disagree")
    return (), {"dtype": args.dtype or args.format or "fp16", "masks": args.masks,
                "alignment": args.alignment, "window": not args.no_window,
                "max_examples": args.max_examples}


def _resolve(spec: str) -> Any:
    """The ``--impl`` callable; a module that fails while being imported (its own
    exception, a syntax error) is a usage error naming ``--impl``, not a traceback."""
    try:
        return resolve_callable(spec)
    except ValueError as exc:
        if str(exc).startswith("--impl"):
            raise
        raise ValueError(f"--impl {spec}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - whatever the user's module raises
        raise ValueError(f"--impl {spec}: importing it failed with {type(exc).__name__}: "
                         f"{exc}") from None


def run(args: argparse.Namespace) -> int:
    fn = _resolve(args.impl)
    extra = _impl_kwargs(args.impl_kwargs)
    if extra:
        fn = functools.partial(fn, **extra)
    positional, kwargs = _kwargs(args)
    try:
        # deferred (import time): hypothesis is a dependency of the package, installed with it
        import hypothesis  # noqa: F401
    except ImportError:
        raise ValueError("conform needs hypothesis, a dependency of this package that is "
                         "missing here: python -m pip install .") from None
    selected = parse_variants(args.variant)
    try:
        report = conform(args.target, fn, *positional, variant=selected, **kwargs)
    except ConformanceError as exc:
        print(f"FAILED: {args.impl}\n{exc}")
        return 1
    named = "".join(f", {c}={o}" for c, o in selected.items())
    if args.target == "attention.attention":     # which criterion it was held to
        named = (", float32 bound" if kwargs["dtype"] == "fp32"
                 else f", 2x the naive {kwargs['dtype']} error") + named
    print(f"ok: {args.impl} conforms ({args.target}"
          + (f", {positional[0]}" if positional else "") + named
          + f"): {report.summary()}")
    left = _not_swept(args, positional, selected)
    if left:
        print(f"not checked: {left}")
    return 0


#: choices whose inputs the sweep places only when an option is named, and what they are
_SWEPT_WHEN_NAMED = {"nan_to_e2m1": "NaN inputs", "nan_to_e2m3": "NaN inputs",
                     "nan_to_e3m2": "NaN inputs", "mx_inf_block": "blocks holding Inf or NaN"}


def _not_swept(args: argparse.Namespace, positional: tuple[Any, ...],
               selected: dict[str, str]) -> str | None:
    """What a pass did not cover because no option of its choice was named (NaN into
    FP4/FP6, Inf/NaN blocks), and how to cover it; None when nothing was left out."""
    fmt = positional[0] if positional and args.target in ("formats.encode",
                                                          "formats.round_to") else None
    for choice, options in choices_for(args.target, fmt).items():
        what = _SWEPT_WHEN_NAMED.get(choice)
        if what and choice not in selected and not (choice == "mx_inf_block"
                                                    and args.inf_block):
            return (f"{what} (implementation-defined): name the option followed, "
                    f"--variant {choice}={'|'.join(options)}")
    return None
