"""Compare two golden suites written by different Python/NumPy versions.

    python .ci/compare_suites.py REFERENCE OTHER

Every file but ``manifest.json`` must exist in both and be byte-identical. The two
manifests must be identical (same keys in the same order, same values) except for
``runtime``, the recorded Python and NumPy versions, and ``content_sha256``, which hashes
the rest of the manifest and so follows ``runtime`` (``verify`` checks it). Exit 0 when
they agree, 1 with the differences listed; standard library only.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

MANIFEST = "manifest.json"
MAY_DIFFER = ("runtime", "content_sha256")


def files(root: Path) -> dict[str, Path]:
    return {p.relative_to(root).as_posix(): p for p in sorted(root.rglob("*"))
            if p.is_file()}


def compare(ref: Path, other: Path) -> list[str]:
    problems = []
    a, b = files(ref), files(other)
    if MANIFEST not in a or MANIFEST not in b:
        return [f"{MANIFEST} missing from {ref if MANIFEST not in a else other}"]
    if len(a) < 2:
        return [f"{ref} holds no arrays: nothing would be compared"]
    for rel in sorted(set(a) - set(b)):
        problems.append(f"{rel}: only in {ref}")
    for rel in sorted(set(b) - set(a)):
        problems.append(f"{rel}: only in {other}")
    for rel in sorted(set(a) & set(b)):
        if rel != MANIFEST and a[rel].read_bytes() != b[rel].read_bytes():
            problems.append(f"{rel}: bytes differ")
    ma, mb = (json.loads(p[MANIFEST].read_text(encoding="utf-8")) for p in (a, b))
    for m, where in ((ma, ref), (mb, other)):
        if not isinstance(m, dict) or not isinstance(m.get("runtime"), dict):
            problems.append(f"{where}/{MANIFEST}: no runtime recorded")
    if isinstance(ma, dict) and isinstance(mb, dict):
        ka = [k for k in ma if k not in MAY_DIFFER]
        kb = [k for k in mb if k not in MAY_DIFFER]
        if ka != kb:
            problems.append(f"{MANIFEST}: fields differ: {ka} vs {kb}")
        for k in ka:
            if k in mb and ma[k] != mb[k]:
                problems.append(f"{MANIFEST}: {k!r} differs")
    return problems


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    ref, other = (Path(p) for p in argv)
    for d in (ref, other):
        if not d.is_dir():
            print(f"compare_suites: {d}: no such directory", file=sys.stderr)
            return 2
    problems = compare(ref, other)
    if problems:
        for p in problems[:40]:
            print(f"DIFFERS: {p}")
        if len(problems) > 40:
            print(f"DIFFERS: ... and {len(problems) - 40} more")
        print(f"golden suites {ref} and {other} differ ({len(problems)} problems)")
        return 1
    ra = json.loads((ref / MANIFEST).read_text())["runtime"]
    rb = json.loads((other / MANIFEST).read_text())["runtime"]
    n = len(files(ref)) - 1
    print(f"golden suites agree: {n} files byte-identical, manifest.json equal but for the "
          f"recorded versions (Python {ra['python']}, NumPy {ra['numpy']} vs "
          f"Python {rb['python']}, NumPy {rb['numpy']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
