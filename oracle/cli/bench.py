"""``python -m oracle bench [AREA ...]``: speed benchmarks (never timed tests).

Each area is a module ``oracle.bench.AREA`` with ``run(args) -> int`` that prints a
table of figures measured in one run, so ratios are meaningful on a noisy machine.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util

#: area -> module; one registry, read by the CLI and the tests
AREAS: dict[str, str] = {
    "formats": "oracle.bench.formats",
    "scaling": "oracle.bench.scaling",
    "matmul": "oracle.bench.matmul",
    "tensorcore": "oracle.bench.tensorcore",
    "attention": "oracle.bench.attention",
    "fa3": "oracle.bench.fa3",
    "simt": "oracle.bench.simt",
    "kvcache": "oracle.bench.kvcache",
    "generate": "oracle.bench.generate",
}


def available() -> list[str]:
    return [a for a, m in AREAS.items() if importlib.util.find_spec(m) is not None]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "areas", nargs="*", metavar="AREA",
        help=f"areas to run (default: all available; known: {', '.join(AREAS)})",
    )
    parser.add_argument("--quick", action="store_true",
                        help="smaller sizes, for a smoke run")


def run(args: argparse.Namespace) -> int:
    areas = args.areas or available()
    for area in areas:
        if area not in AREAS:
            raise ValueError(f"unknown bench area {area!r}; known: {', '.join(AREAS)}")
        if importlib.util.find_spec(AREAS[area]) is None:
            raise ValueError(f"bench area {area!r} is not available in this version")
    status = 0
    for area in areas:
        print(f"== {area} ==", flush=True)
        status |= int(importlib.import_module(AREAS[area]).run(args) or 0)
    return status
