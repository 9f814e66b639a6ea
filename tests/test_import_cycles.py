"""No import circles among the modules of refimpl, hardware and oracle.

Every module is parsed with ``ast`` (nothing is imported), every ``import`` and
``from ... import`` statement is read, the ones inside functions included, and the
module graph is searched for strongly connected components (Tarjan, 1972). A
component of more than one module is a circle: each of its modules can only be
imported because another one is half-initialised, and a type that two modules both
need belongs to neither of them.

An edge runs from a module to the module a statement names: ``from .x import y``
names ``x`` (or ``x.y`` when that is a module), ``from . import y`` names ``y`` when
it is a submodule and the package otherwise, ``import a.b`` names ``a.b``. The
implicit import of the parent packages is not an edge: a package's ``__init__``
that re-exports its submodules is not a circle with them.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("refimpl", "hardware", "oracle")


def module_files() -> dict[str, Path]:
    """Dotted module name -> source file, for every module of PACKAGES."""
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def imported_modules(name: str, path: Path, modules: set[str]) -> set[str]:
    """The modules of ``modules`` that the source of module ``name`` imports."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    targets = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                targets.add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                if node.level > 1:
                    base = base[: len(base) - (node.level - 1)]
                base = ".".join(base)
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                targets.add(sub if sub in modules else source)
    return {t for t in targets if t in modules and t != name}


def import_graph() -> dict[str, set[str]]:
    files = module_files()
    names = set(files)
    return {name: imported_modules(name, path, names) for name, path in files.items()}


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm; each component's modules sorted, components in found order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            components.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return components


def a_cycle(component: list[str], graph: dict[str, set[str]]) -> list[str]:
    """One closed path through the component, starting at its first module."""
    members = set(component)
    start = component[0]
    # breadth-first search back to start, staying inside the component
    previous = {start: None}
    frontier = [start]
    while frontier:
        following = []
        for v in frontier:
            for w in sorted(graph[v] & members):
                if w == start:
                    path = [v]
                    while previous[path[-1]] is not None:
                        path.append(previous[path[-1]])
                    return list(reversed(path)) + [start]
                if w not in previous:
                    previous[w] = v
                    following.append(w)
        frontier = following
    raise AssertionError(f"{component} is not strongly connected")


def test_tarjan_finds_hand_built_circles():
    graph = {
        "a": {"b"},
        "b": {"c"},
        "c": {"a", "d"},
        "d": {"e"},
        "e": {"d"},
        "f": {"a"},
        "g": set(),
    }
    components = sorted(strongly_connected(graph))
    assert components == [["a", "b", "c"], ["d", "e"], ["f"], ["g"]]
    assert a_cycle(["a", "b", "c"], graph) == ["a", "b", "c", "a"]


def test_edges_read_relative_and_function_level_imports(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from .one import f\n")
    (pkg / "one.py").write_text("def f():\n    from . import two\n    from .two import g\n")
    (pkg / "two.py").write_text("import pkg.one as one\nfrom pkg import f\nimport numpy\n")
    modules = {"pkg", "pkg.one", "pkg.two"}
    assert imported_modules("pkg", pkg / "__init__.py", modules) == {"pkg.one"}
    assert imported_modules("pkg.one", pkg / "one.py", modules) == {"pkg.two"}
    assert imported_modules("pkg.two", pkg / "two.py", modules) == {"pkg", "pkg.one"}


def test_every_module_is_parsed():
    graph = import_graph()
    for package in PACKAGES:
        assert package in graph
    assert "hardware.simt.executor" in graph
    assert len(graph) > 100


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_circle(package):
    graph = import_graph()
    circles = [c for c in strongly_connected(graph)
               if len(c) > 1 and any(m.split(".")[0] == package for m in c)]
    messages = []
    for c in circles:
        inside = set(c)
        edges = [f"    {a} -> {b}" for a in c for b in sorted(graph[a] & inside)]
        messages.append(" -> ".join(a_cycle(c, graph)) + f"  ({len(c)} modules, edges:)\n"
                        + "\n".join(edges))
    assert not circles, "import circles:\n" + "\n".join(messages)


def test_layering():
    """refimpl imports nothing from hardware or oracle; hardware nothing from oracle."""
    graph = import_graph()
    allowed = {"refimpl": {"refimpl"}, "hardware": {"refimpl", "hardware"},
               "oracle": {"refimpl", "hardware", "oracle"}}
    wrong = sorted(f"{a} -> {b}" for a, targets in graph.items() for b in targets
                   if b.split(".")[0] not in allowed[a.split(".")[0]])
    assert not wrong, "imports against the layering:\n" + "\n".join(wrong)
