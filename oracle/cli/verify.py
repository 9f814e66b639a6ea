"""``python -m oracle verify DIR``: schema, sha256 of every file, recomputation.

Exit 0 when everything matches, 1 with a report naming each failing case and file.
A damaged suite is reported, never loaded blindly and never a traceback.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tabulate import tabulate

from oracle.verification import verify


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", metavar="DIR", help="suite directory (holds manifest.json)")
    parser.add_argument("--no-recompute", action="store_true",
                        help="check schema and hashes only")
    parser.add_argument("--max-problems", type=int, default=50,
                        help="problems listed (default: %(default)s)")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")


def run(args: argparse.Namespace) -> int:
    if args.max_problems < 0:
        raise ValueError(f"--max-problems must be >= 0, got {args.max_problems}")
    root = Path(args.dir)
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: no such directory")
    report = verify(root, recompute=not args.no_recompute,
                    progress=None if args.quiet else sys.stderr)
    for note in report.notes[:10]:
        print(f"note: {note}")
    if len(report.notes) > 10:
        print(f"note: ... and {len(report.notes) - 10} more notes")
    if report.ok:
        print(f"ok: {report.cases} cases, {report.files} files, "
              f"{report.recomputed} recomputed bit for bit")
        return 0
    rows = [[p.case, p.file, p.message] for p in report.problems[:args.max_problems]]
    print(tabulate(rows, headers=["case", "file", "problem"]))
    more = len(report.problems) - len(rows)
    print(f"FAILED: {len(report.problems)} problems"
          + (f" ({more} not shown)" if more > 0 else "")
          + f" in {report.cases} cases")
    return 1
