"""Regenerate the gallery PTX (and printf_host.txt, the host C library's output for the
printf kernel): ``python -m hardware.simt.gallery [--nvcc PATH]``."""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from . import BUILD, NAMES, directory


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--nvcc", default=shutil.which("nvcc") or "nvcc")
    args = ap.parse_args(argv)
    if shutil.which(args.nvcc) is None:
        print(f"nvcc not found ({args.nvcc}); the committed PTX is unchanged", file=sys.stderr)
        return 1
    d = directory()
    # builds with line information name their source file in .file directives: compile
    # a copy in a fixed folder, so that the PTX does not depend on where the project is
    tmp = Path(tempfile.gettempdir()) / "gallery"
    tmp.mkdir(exist_ok=True)
    for f in list(d.glob("*.cu")) + list(d.glob("*.h")):
        shutil.copy(f, tmp / f.name)
    for name in NAMES:
        cu, arch, flags = BUILD[name]
        src = (tmp if flags else d) / f"{cu}.cu"
        cmd = [args.nvcc, "-ptx", f"-arch={arch}", *flags, str(src), "-o",
               str(d / f"{name}.ptx")]
        print(" ".join(cmd), file=sys.stderr)
        subprocess.run(cmd, check=True)
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        print("no C compiler: printf_host.txt is unchanged", file=sys.stderr)
        return 0
    exe = tmp / "printf_host"
    subprocess.run([cc, "-std=c99", str(d / "printf_host.c"), "-o", str(exe)], check=True)
    (d / "printf_host.txt").write_bytes(subprocess.run([str(exe)], check=True,
                                                       capture_output=True).stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
