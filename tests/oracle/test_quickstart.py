"""docs/quickstart.md runs exactly as written: its ``# file:`` blocks are saved, its
``$`` commands run in that folder (``python`` is this interpreter), each exiting 0, or 1
where the line says ``# exits 1``. Sections whose files say ``# needs: LIB`` run only
when LIB is importable."""
from __future__ import annotations

import importlib.util
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "quickstart.md"


def _sections() -> list[tuple[str, list[tuple[str, str]], list[str]]]:
    """(title, files [(name, source)], commands) per ``##`` section."""
    out = []
    for part in re.split(r"^## ", DOC.read_text(encoding="utf-8"), flags=re.M)[1:]:
        title = part.splitlines()[0]
        files, commands = [], []
        for lang, body in re.findall(r"```(\w*)\n(.*?)```", part, flags=re.S):
            first = body.splitlines()[0] if body.strip() else ""
            if lang == "python" and first.startswith("# file: "):
                files.append((first[len("# file: "):].strip(), body))
            elif lang == "":
                commands += [ln[2:] for ln in body.splitlines() if ln.startswith("$ ")]
        out.append((title, files, commands))
    return out


SECTIONS = _sections()


def test_the_quickstart_has_runnable_sections() -> None:
    runnable = [s for s in SECTIONS if s[2]]
    assert len(runnable) >= 4
    assert any("generate" in c for _, _, cmds in SECTIONS for c in cmds)


@pytest.mark.parametrize("title, files, commands",
                         [s for s in SECTIONS if s[2]], ids=[s[0] for s in SECTIONS if s[2]])
def test_quickstart_section_runs_as_written(tmp_path: Path, title: str, files, commands,
                                            request) -> None:
    # earlier sections' files stay available (a section may use them)
    for _, fs, _ in SECTIONS:
        for name, source in fs:
            (tmp_path / name).write_text(source)
    needs = [m for _, src in files for m in re.findall(r"^# needs: (\S+)", src, flags=re.M)]
    for lib in needs:
        if importlib.util.find_spec(lib) is None:
            pytest.skip(f"needs {lib}")
    path = [str(tmp_path), str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path))
    for line in commands:
        cmd, _, note = line.partition("  # ")
        want = 1 if note.strip() == "exits 1" else 0
        argv = shlex.split(cmd)
        assert argv[0] == "python", line
        r = subprocess.run([sys.executable, *argv[1:]], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == want, f"{line}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"


def test_the_readme_check_commands_run_as_written(tmp_path: Path) -> None:
    """README's "Check your implementation" block, after its first command's
    ``generate --out golden``, with the quickstart's ``my_fp16.py``: each exits 0."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"## Check your implementation\n+```\n(.*?)```", readme, re.S)
    assert block is not None
    commands = ["python -m oracle generate --out golden"] + \
        [ln for ln in block.group(1).splitlines() if ln.strip()]
    assert len(commands) == 4 and "check" in commands[-1]
    for name, source in (f for _, fs, _ in SECTIONS for f in fs):
        if name == "my_fp16.py":
            (tmp_path / name).write_text(source)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT)]))
    for line in commands:
        argv = shlex.split(line)
        r = subprocess.run([sys.executable, *argv[1:]], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, f"{line}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
