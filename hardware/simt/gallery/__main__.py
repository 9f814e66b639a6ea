"""Regenerate the gallery PTX: ``python -m hardware.simt.gallery [--nvcc PATH]``."""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys

from . import BUILD, NAMES, directory


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--nvcc", default=shutil.which("nvcc") or "nvcc")
    args = ap.parse_args(argv)
    if shutil.which(args.nvcc) is None:
        print(f"nvcc not found ({args.nvcc}); the committed PTX is unchanged", file=sys.stderr)
        return 1
    d = directory()
    for name in NAMES:
        cu, arch = BUILD[name]
        cmd = [args.nvcc, "-ptx", f"-arch={arch}", str(d / f"{cu}.cu"), "-o",
               str(d / f"{name}.ptx")]
        print(" ".join(cmd), file=sys.stderr)
        subprocess.run(cmd, check=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
