"""``python -m oracle conform TARGET --impl package.module:function [options]``: run the
ready property tests of :mod:`oracle.conformance` against your own callable.

Example: ``python -m oracle conform formats.encode --impl mypkg.fp8:to_e4m3 --format e4m3``.
Exit 0 when it conforms, 1 with the (shrunk) counterexample when it does not.
"""
from __future__ import annotations

import argparse

from oracle.conformance import CHECKS, ConformanceError, resolve_callable


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", choices=sorted(CHECKS), help="what the callable implements")
    parser.add_argument("--impl", required=True, metavar="MODULE:FUNCTION",
                        help="your callable, e.g. mypkg.fp8:to_e4m3")
    parser.add_argument("--format", required=True, help="number format, e.g. e4m3, bf16")
    parser.add_argument("--rounding", default="nearest_even",
                        help="rounding mode the callable implements (default: %(default)s)")
    parser.add_argument("--saturate", action="store_true",
                        help="the callable saturates overflow to +-max (SATFINITE)")
    parser.add_argument("--dtype", default="float32", choices=["float16", "float32", "float64"],
                        help="input dtype for encoders (default: %(default)s)")
    parser.add_argument("--scalar", action="store_true",
                        help="call the callable with one scalar at a time")
    parser.add_argument("--max-examples", type=int, default=200,
                        help="hypothesis examples after the sweep (default: %(default)s)")


def run(args: argparse.Namespace) -> int:
    fn = resolve_callable(args.impl)
    check = CHECKS[args.target]
    kwargs: dict = {"vectorized": not args.scalar}
    if args.target != "formats.decode":
        kwargs.update(rounding=args.rounding, saturate=args.saturate, dtype=args.dtype,
                      max_examples=args.max_examples)
    try:
        check(fn, args.format, **kwargs)
    except ConformanceError as exc:
        print(f"FAILED: {args.impl}\n{exc}")
        return 1
    print(f"ok: {args.impl} conforms ({args.target}, {args.format})")
    return 0
