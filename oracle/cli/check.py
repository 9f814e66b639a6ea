"""``python -m oracle check DIR --results RESULTS_DIR``: compare another
implementation's outputs with a suite.

RESULTS_DIR holds one ``.npy`` per expected output, at the same relative path as in the
suite (``<case id>/<output>.npy``), with the same dtype (codes for low-precision
outputs). Each is compared under its case's typed tolerance; failures are tabulated
(case, output, index, input, expected, got, error). Exit 0 when all present results
pass, 1 otherwise.
"""
from __future__ import annotations

import argparse

from tabulate import tabulate

from oracle.suite import SuiteError
from oracle.verification import check


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", metavar="DIR", help="golden suite directory")
    parser.add_argument("--results", required=True, metavar="RESULTS_DIR",
                        help="directory of result .npy files named like the expected ones")
    parser.add_argument("--only", metavar="PATTERN", help="only case ids matching PATTERN")
    parser.add_argument("--variant", action="append", default=[], metavar="CHOICE=OPTION",
                        help="skip cases of CHOICE marked with another option (repeatable; an "
                             "unknown CHOICE or OPTION is an error)")
    parser.add_argument("--strict", action="store_true",
                        help="a missing result file is a failure")
    parser.add_argument("--rows", type=int, default=5,
                        help="failing elements shown per output (default: %(default)s)")


def run(args: argparse.Namespace) -> int:
    from oracle import variants as V

    variants = V.parse(args.variant)
    try:
        report = check(args.dir, args.results, only=args.only, variants=variants,
                       strict=args.strict, rows_per_output=args.rows)
    except SuiteError as exc:
        print(f"the golden suite fails verification: {exc}")
        return 1
    if report.failures:
        print(tabulate(report.failures, headers=["case", "output", "index", "input",
                                                 "expected", "got", "error"]))
    missing = len(report.missing)
    summary = (f"{report.passed}/{report.checked} outputs pass"
               + (f", {missing} result files missing" if missing else "")
               + (f", {report.skipped} cases of other variants skipped"
                  if report.skipped else ""))
    if report.ok:
        print(f"ok: {summary}")
        return 0
    if not report.failures:
        for p in report.problems:
            print(f"{p.case}: {p.file}: {p.message}")
    print(f"FAILED: {len(report.problems)} outputs; {summary}")
    return 1
