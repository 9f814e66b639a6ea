"""``python -m oracle check DIR --results RESULTS_DIR``: compare another
implementation's outputs with a suite.

RESULTS_DIR holds one ``.npy`` per expected output, at the same relative path as in the
suite (``<case id>/<output>.npy``), with the same dtype (codes for low-precision
outputs). Each is compared under its case's typed tolerance; failures are tabulated
(case, output, index, input, expected, got, error) with a failure count per output.
Exit 0 when every selected output was compared and passed, 1 otherwise: a missing
result fails unless ``--allow-missing REASON`` says why, and a check that compared
nothing, or an ``--only`` that selects no case, fails.
"""
from __future__ import annotations

import argparse
import textwrap

from tabulate import tabulate

from oracle import variants as V
from oracle.suite import SuiteError
from oracle.verification import RESULTS_LAYOUT, check
from oracle.wording import count

_LISTED = 20


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = "results layout:\n  " + "\n  ".join(_wrap(RESULTS_LAYOUT, 76))
    parser.add_argument("dir", metavar="DIR", help="golden suite directory")
    parser.add_argument("--results", required=True, metavar="RESULTS_DIR",
                        help="directory of results named like the expected outputs: "
                             "<case id>/<output>.npy, or <case id>/<output>.txt in the "
                             "text layout (see below)")
    parser.add_argument("--only", metavar="PATTERN", help="only case ids matching PATTERN "
                        "(a pattern that matches no case fails)")
    parser.add_argument("--id", action="append", dest="ids", metavar="CASE_ID",
                        help="only this exact case id (repeatable; an id that is no case "
                             "of the suite is an error). --only is a pattern: an id also "
                             "matches its .satfinite sibling")
    parser.add_argument("--max-problems", type=int, default=_LISTED, metavar="N",
                        help="problems listed (default: %(default)s); --all lists every one")
    parser.add_argument("--all", action="store_true", help="list every problem")
    parser.add_argument("--variant", action="append", default=[], metavar="CHOICE=OPTION",
                        help="skip cases of CHOICE marked with another option (repeatable; an "
                             "unknown CHOICE or OPTION is an error)")
    parser.add_argument("--allow-missing", metavar="REASON",
                        help="missing result files are listed but do not fail; REASON "
                             "(why they are missing) is printed with the summary")
    parser.add_argument("--strict", action="store_true",
                        help="a missing result file fails even with --allow-missing")
    parser.add_argument("--rows", type=int, default=5,
                        help="failing elements shown per output (default: %(default)s)")


def _wrap(text: str, width: int) -> list[str]:
    return textwrap.wrap(text, width)


def run(args: argparse.Namespace) -> int:
    if args.rows < 0:
        raise ValueError(f"--rows must be >= 0, got {args.rows}")
    if args.max_problems < 0:
        raise ValueError(f"--max-problems must be >= 0, got {args.max_problems}")
    listed = None if args.all else args.max_problems
    variants = V.parse(args.variant)
    try:
        report = check(args.dir, args.results, only=args.only, variants=variants,
                       strict=args.strict, allow_missing=args.allow_missing,
                       rows_per_output=args.rows, ids=args.ids)
    except SuiteError as exc:
        print(f"the golden suite fails verification: {exc}")
        return 1
    if report.failures:
        print(tabulate(report.failures, headers=["case", "output", "index", "input",
                                                 "expected", "got", "error"]))
    missing = len(report.missing)
    summary = (f"{report.passed}/{report.checked} outputs pass"
               + (f", {count(missing, 'result file')} missing" if missing else "")
               + (f", {count(report.skipped, 'case')} of other variants skipped"
                  if report.skipped else ""))
    if missing and report.allow_missing is not None:
        print(f"missing results allowed: {report.allow_missing}")
    if report.ok:
        print(f"ok: {summary}")
        return 0
    # one line per failing output (with its failure count) or other problem
    problems = sorted(report.problems, key=lambda p: p.case != "-")   # suite-wide first
    for p in problems[:listed]:
        where = [w for w in (p.case, p.file) if w != "-"]
        if len(where) == 2 and p.file.startswith(p.case + "/"):
            where = [p.file]            # the file's path begins with the case id
        print(": ".join([*where, p.message]))
    if listed is not None and len(report.problems) > listed:
        print(f"... and {len(report.problems) - listed} more (--all lists them)")
    print(f"FAILED: {count(len(report.problems), 'problem')}; {summary}")
    return 1
