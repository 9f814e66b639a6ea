"""``python -m oracle bench generate``: time to write and verify the golden suite.

Writes the default suite (the smoke suite with ``--quick``) into a temporary directory
with one worker and with two, checks that both give the same bytes, and verifies it;
prints wall times, the number of cases and files, and the suite's size on disk.
"""
from __future__ import annotations

import argparse
import hashlib
import tempfile
import time
from pathlib import Path

from tabulate import tabulate

from oracle.generation import generate
from oracle.verification import verify


def _digest(root: Path) -> tuple[str, int, int]:
    h = hashlib.sha256()
    size = files = 0
    for p in sorted(root.rglob("*")):
        if p.is_file():
            data = p.read_bytes()
            h.update(p.relative_to(root).as_posix().encode() + b"\0" + data)
            size += len(data)
            files += 1
    return h.hexdigest(), size, files


def run(args: argparse.Namespace) -> int:
    suite = "smoke" if getattr(args, "quick", False) else "default"
    rows = []
    digests = []
    with tempfile.TemporaryDirectory() as tmp:
        for jobs in (1, 2):
            out = Path(tmp) / f"jobs{jobs}"
            t0 = time.perf_counter()
            m = generate(out, suite=suite, jobs=jobs, progress=None)
            dt = time.perf_counter() - t0
            digest, size, files = _digest(out)
            digests.append(digest)
            rows.append((f"generate --jobs {jobs}", f"{dt:.2f}", len(m["cases"]), files,
                         f"{size / 2**20:.2f}"))
        t0 = time.perf_counter()
        rep = verify(Path(tmp) / "jobs1", progress=None)
        dt = time.perf_counter() - t0
        rows.append(("verify (recompute all)", f"{dt:.2f}", rep.cases, rep.files, "-"))
    print(f"{suite} suite")
    print(tabulate(rows, headers=["step", "seconds", "cases", "files", "MiB"],
                   disable_numparse=True))
    same = digests[0] == digests[1]
    print(f"--jobs 1 and --jobs 2 bytes identical: {same}; verify ok: {rep.ok}")
    return 0 if same and rep.ok else 1
