"""Regenerate the gallery PTX: ``python -m hardware.simt.gallery [--nvcc PATH] [--arch sm_90]``."""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys

from . import NAMES, directory


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--nvcc", default=shutil.which("nvcc") or "nvcc")
    ap.add_argument("--arch", default="sm_90")
    args = ap.parse_args(argv)
    if shutil.which(args.nvcc) is None:
        print(f"nvcc not found ({args.nvcc}); the committed PTX is unchanged", file=sys.stderr)
        return 1
    d = directory()
    for name in NAMES:
        cmd = [args.nvcc, "-ptx", f"-arch={args.arch}", str(d / f"{name}.cu"), "-o",
               str(d / f"{name}.ptx")]
        print(" ".join(cmd), file=sys.stderr)
        subprocess.run(cmd, check=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
