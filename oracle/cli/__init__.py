"""The command line: ``python -m oracle COMMAND`` (also the ``gpu-oracle`` script).

Each command lives in its own module under ``oracle.cli`` and exposes
``add_arguments(parser)`` and ``run(args) -> int``. The table below is the one registry
of commands; a module that is not present yet is simply not offered.

Exit codes: 0 success, 1 a check failed (or an I/O error: a message naming the file,
never a traceback), 2 usage error.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
from typing import Sequence

from oracle._version import __version__
from oracle.suite import runtime_versions

#: command name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "generate": ("oracle.cli.generate", "write a golden-vector suite to a directory"),
    "verify": ("oracle.cli.verify", "validate a suite: schema, hashes, recomputation"),
    "check": ("oracle.cli.check", "compare another implementation's results with a suite"),
    "conform": ("oracle.cli.conform", "run ready property tests against your own callable"),
    "run": ("oracle.cli.run", "call your functions on every case of a suite and compare"),
    "formats": ("oracle.cli.formats", "list number formats or show one with its value table"),
    "roofline": ("oracle.cli.roofline", "roofline tables and GPU comparisons"),
    "pipeline": ("oracle.cli.pipeline", "FlashAttention-3 pipeline schedule comparison"),
    "kvcache": ("oracle.cli.kvcache", "KV-cache trace simulation: contiguous vs paged memory"),
    "bench": ("oracle.cli.bench", "speed benchmarks by area"),
}


def _available() -> dict[str, tuple[str, str]]:
    return {
        name: spec
        for name, spec in COMMANDS.items()
        if importlib.util.find_spec(spec[0]) is not None
    }


def program_name() -> str:
    """How the user ran the CLI: ``gpu-oracle`` (the console script) or
    ``python -m oracle``, for usage lines and ``--version``."""
    name = os.path.basename(sys.argv[0] or "")
    return "gpu-oracle" if name.startswith("gpu-oracle") else "python -m oracle"


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    rt = runtime_versions()
    parser = argparse.ArgumentParser(
        prog=prog or program_name(),
        description="GPU numerics reference implementation and test oracle.",
    )
    parser.add_argument("--version", action="version",
                        version=f"%(prog)s {__version__} (Python {rt['python']}, "
                                f"NumPy {rt['numpy']})")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, (modname, help_text) in _available().items():
        module = importlib.import_module(modname)
        p = sub.add_parser(name, help=help_text, description=help_text)
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except BrokenPipeError:  # e.g. piped into `head`
        return 0
    except (ValueError, KeyError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:   # an I/O failure (permissions, full disk): a message, exit 1
        print(f"error: {exc}", file=sys.stderr)
        return 1
