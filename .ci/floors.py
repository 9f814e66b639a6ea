"""Print the oldest versions pyproject.toml declares, as pip constraints.

    python .ci/floors.py            name==floor, one a line: the build requirement, the
                                    runtime dependencies and every optional extra
    python .ci/floors.py --python   the oldest Python (from requires-python)

Every requirement must be a single lower bound (``name>=X``), so that CI can install
exactly the floors and the declared range is the tested one; anything else is an error.
Needs Python 3.11 or later (tomllib).
"""
from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

FLOOR = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*>=\s*([0-9][0-9A-Za-z.]*)\s*$")


def main(argv: list[str]) -> int:
    data = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml")
                         .read_text(encoding="utf-8"))
    project = data["project"]
    if argv == ["--python"]:
        m = re.fullmatch(r">=\s*(3\.\d+)", project["requires-python"].strip())
        if not m:
            print(f"floors: requires-python {project['requires-python']!r} is not "
                  "'>=3.X'", file=sys.stderr)
            return 1
        print(m.group(1))
        return 0
    if argv:
        print(__doc__, file=sys.stderr)
        return 2
    reqs = list(data["build-system"]["requires"]) + list(project["dependencies"])
    for extra in sorted(project.get("optional-dependencies", {})):
        reqs += project["optional-dependencies"][extra]
    pins: dict[str, str] = {}
    for req in reqs:
        m = FLOOR.match(req)
        if not m:
            print(f"floors: requirement {req!r} is not a single lower bound 'name>=X'",
                  file=sys.stderr)
            return 1
        name = re.sub(r"[-_.]+", "-", m.group(1)).lower()
        if pins.get(name, m.group(2)) != m.group(2):
            print(f"floors: {name} has two floors ({pins[name]}, {m.group(2)})",
                  file=sys.stderr)
            return 1
        pins[name] = m.group(2)
    for name, version in pins.items():
        print(f"{name}=={version}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
