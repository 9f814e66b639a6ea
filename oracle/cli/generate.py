"""``python -m oracle generate --out DIR``: write a golden-vector suite.

The same arguments give the same bytes on every run, machine, BLAS and thread count,
whatever ``--jobs``; shards ``1/N .. N/N`` concatenate to the unsharded suite
(``--merge SHARD_DIR ...`` does it). Progress goes to stderr. Exit 1 when the suite
could not be written (disk full, quota, read-only filesystem: the message names the
file) or DIR appeared or changed while it was being written (it is kept as it is).
"""
from __future__ import annotations

import argparse
import sys

from tabulate import tabulate

from oracle import variants as V
from oracle.cases import SUITES, registry
from oracle.generation import (
    DEFAULT_SEED, Interrupted, SuiteWriteError, generate, merge, parse_shard, select,
    shard_slice,
)
from oracle.suite import SuiteError, variant_pairs


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", metavar="DIR",
                        help="directory to write: created, or replaced when it is empty or "
                             "a suite this tool wrote (anything else is refused, nothing "
                             "touched); the suite is written beside it and swapped in by "
                             "rename, so an interrupted run leaves the previous suite, and "
                             "only if DIR is still what was checked at the start (a folder "
                             "created or changed there meanwhile is kept: exit 1)")
    parser.add_argument("--list", action="store_true",
                        help="print the selected case ids (with operation and variant) "
                             "instead of writing anything")
    parser.add_argument("--suite", default="default", choices=list(SUITES),
                        help="which cases: smoke (seconds), default (committable), full "
                             "(larger, exhaustive 16-bit tables); default: %(default)s")
    parser.add_argument("--only", metavar="PATTERN",
                        help="only case ids matching this glob (e.g. 'formats.encode.*'); "
                             "without wildcards, ids containing PATTERN")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED,
                        help="seed of the case inputs' random streams (default: %(default)s)")
    parser.add_argument("--jobs", type=int, default=1,
                        help="worker processes (does not change the bytes written); cases are built "
                             "in this process for the first few seconds and workers start "
                             "only for what is left (each costs about a second to start), "
                             "so it pays only for suites that take longer than that (the "
                             "built-in suites are built in a few seconds and start no "
                             "worker) and never slows a quick suite down")
    parser.add_argument("--shard", metavar="I/N",
                        help="write only the I-th of N contiguous slices of the cases")
    parser.add_argument("--text", action="store_true",
                        help="also write every array as text (<case id>/<array>.txt: a "
                             "header, then hex bit patterns, one vector a line; "
                             "docs/suite-format.md) and TestFloat-style hex lines "
                             "(vectors.txt) for scalar-format cases")
    parser.add_argument("--merge", nargs="+", metavar="SHARD_DIR",
                        help="instead of generating, concatenate shard suites into --out")
    parser.add_argument("--variant", action="append", default=[], metavar="CHOICE=OPTION",
                        help="leave out the cases of CHOICE marked with another option "
                             "(repeatable; an unknown CHOICE or OPTION is an error)")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")


def _list(args: argparse.Namespace) -> int:
    cases = select(registry(), args.suite, args.only, V.parse(args.variant))
    cases = cases[shard_slice(len(cases), parse_shard(args.shard))]
    rows = [(c.id, c.operation, ", ".join(f"{ch}={o}" for ch, o in variant_pairs(c.variant)))
            for c in cases]
    print(tabulate(rows, headers=["case", "operation", "variant"]))
    print(f"{len(rows)} cases in the {args.suite} suite")
    return 0


def run(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except Interrupted as exc:
        print(f"interrupted ({exc}): no partial files left; {args.out} holds the previous "
              "suite (or the new one if the final swap had completed)", file=sys.stderr)
        return 128 + exc.signum
    except SuiteWriteError as exc:     # disk full, read-only, or --out changed meanwhile
        print(f"error: {exc}", file=sys.stderr)
        return 1


def _run(args: argparse.Namespace) -> int:
    if args.list:
        return _list(args)
    if not args.out:
        raise ValueError("--out DIR is required (or --list)")

    variants = V.parse(args.variant)
    if args.merge:
        if variants:
            raise ValueError("--variant selects cases to generate; it does not apply to "
                             "--merge")
        try:
            m = merge(args.merge, args.out)
        except SuiteError as exc:
            print(f"a shard fails verification: {exc}")
            return 1
        print(f"merged {len(args.merge)} shards: {len(m['cases'])} cases in {args.out}")
        return 0
    m = generate(args.out, suite=args.suite, only=args.only, seed=args.seed,
                 jobs=args.jobs, shard=parse_shard(args.shard), text=args.text,
                 progress=None if args.quiet else sys.stderr, variants=variants)
    arrays = [e for c in m["cases"] for role in ("inputs", "expected", "reference")
              for e in c[role].values()]
    texts = sum(1 for e in arrays if e.get("text")) + sum(1 for c in m["cases"]
                                                          if c.get("text"))
    print(f"wrote {len(m['cases'])} cases ({len(arrays)} arrays"
          + (f", {texts} text files" if texts else "") + f") to {args.out}")
    return 0
