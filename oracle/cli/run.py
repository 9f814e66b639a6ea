"""``python -m oracle run SUITE --impl OPERATION=module:function ...``: call your
functions on every selected case of a golden suite and compare what they return.

Each function is called as ``fn(*inputs, **params)`` (inputs in manifest order, a format
always ``fmt=``) and returns a mapping of output names to arrays, a tuple in the order
of the case's outputs, or one array (see :mod:`oracle.runner`). ``NotImplementedError``
marks a case as not supported (reported, never a pass). ``--results OUT`` writes the
outputs in the suite layout for ``check``. Exit 0 when something was compared and
everything compared passed, 1 otherwise, 2 on a usage error.
"""
from __future__ import annotations

import argparse

from oracle import variants as V
from oracle.cli.conform import _resolve
from oracle.runner import run as run_suite
from oracle.suite import SuiteError

_LISTED = 20


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = (
        "calling convention:\n"
        "  fn(*inputs, **params): the case's inputs positionally in manifest order\n"
        "  (alphabetical by name: k, q, v; or by name with --inputs-as-keywords), its\n"
        "  parameters as keywords (a format is fmt=, roundings by canonical name);\n"
        "  return {output: array}, a tuple in the order of the case's outputs, or one\n"
        "  array; raise NotImplementedError for parameters you do not support.\n"
        "example:\n"
        "  python -m oracle run golden --impl formats.encode=mymod:encode \\\n"
        "      --only 'formats.encode.e4m3.*' --results my_results\n"
        "  # mymod.py:\n"
        "  def encode(*arrays, fmt, rounding, saturate, **params):\n"
        "      if len(arrays) != 1 or fmt != 'e4m3' or rounding != 'nearest_even':\n"
        "          raise NotImplementedError(f'{fmt} {rounding}')\n"
        "      return my_lib.to_e4m3(arrays[0], saturate=saturate)   # uint8 codes\n")
    parser.add_argument("suite_dir", nargs="?", metavar="SUITE", help="golden suite directory")
    parser.add_argument("--suite", dest="suite_opt", metavar="SUITE",
                        help="the suite directory (instead of the positional SUITE)")
    parser.add_argument("--impl", action="append", default=[], required=True,
                        metavar="OPERATION=MODULE:FUNCTION",
                        help="the callable for one operation (repeatable), e.g. "
                             "formats.encode=mypkg.fp8:encode")
    parser.add_argument("--only", metavar="PATTERN",
                        help="only case ids matching PATTERN (a glob, or a substring)")
    parser.add_argument("--id", action="append", dest="ids", metavar="CASE_ID",
                        help="only this exact case id (repeatable)")
    parser.add_argument("--variant", action="append", default=[], metavar="CHOICE=OPTION",
                        help="skip cases of CHOICE marked with another option (repeatable)")
    parser.add_argument("--results", metavar="OUT",
                        help="write each output to OUT/<case id>/<output>.npy for check")
    parser.add_argument("--inputs-as-keywords", action="store_true",
                        help="pass the inputs by name (fn(q=..., k=..., v=..., **params)) "
                             "instead of positionally in manifest (alphabetical) order")
    parser.add_argument("--allow-missing", metavar="REASON",
                        help="outputs the functions do not return are listed but do not "
                             "fail; REASON is printed with the summary")
    parser.add_argument("--max-problems", type=int, default=_LISTED, metavar="N",
                        help="lines listed of each kind (not supported, failures, "
                             "missing; default: %(default)s); --all lists every one")
    parser.add_argument("--all", action="store_true", help="list every line")


def _impls(items: list[str]) -> dict:
    out = {}
    for item in items:
        op, sep, spec = item.partition("=")
        if not sep or not op or ":" not in spec:
            raise ValueError(f"--impl must be OPERATION=module:function, got {item!r}")
        if op in out:
            raise ValueError(f"--impl {op} given twice")
        out[op] = _resolve(spec)
    return out


def _listed(lines: list[str], limit: int | None, what: str) -> None:
    for line in lines[:limit]:
        print(line)
    if limit is not None and len(lines) > limit:
        print(f"... and {len(lines) - limit} more {what} (--all lists them)")


def run(args: argparse.Namespace) -> int:
    if (args.suite_dir is None) == (args.suite_opt is None):
        raise ValueError("name the suite once: run SUITE or run --suite SUITE")
    if args.max_problems < 0:
        raise ValueError(f"--max-problems must be >= 0, got {args.max_problems}")
    listed = None if args.all else args.max_problems
    impls = _impls(args.impl)
    try:
        report = run_suite(args.suite_dir or args.suite_opt, impls, only=args.only,
                           ids=args.ids, variants=V.parse(args.variant),
                           results=args.results, allow_missing=args.allow_missing,
                           inputs="keywords" if args.inputs_as_keywords else "positional")
    except SuiteError as exc:
        print(f"the golden suite fails verification: {exc}")
        return 1
    _listed([f"not supported: {c}: {why}" for c, why in report.not_supported], listed,
            "not supported")
    _listed([f"FAIL {c}: {m}" for c, m in report.failures], listed, "failures")
    _listed([f"missing: {rel}" for rel in report.missing], listed, "missing")
    if report.missing and args.allow_missing:
        print(f"missing outputs allowed: {args.allow_missing}")
    if report.ok:
        print(f"ok: {report.summary()}")
        return 0
    why = "" if report.compared else " (nothing was compared)"
    print(f"FAILED{why}: {report.summary()}")
    return 1
