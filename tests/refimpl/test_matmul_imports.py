"""The import graph of refimpl.matmul: no cycle, no private name crossing a module, and
the preset table imported by no model (it registers its lookup instead).

The graph is read from the source with ``ast`` (every import statement, also those
inside functions), not from what the interpreter happens to have loaded."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

import refimpl.matmul as package

PACKAGE = package.__name__
ROOT = Path(package.__file__).parent
MODULES = sorted(p.stem for p in ROOT.glob("*.py") if p.stem != "__init__")


def _imports(module: str) -> list[tuple[str, str, int]]:
    """(imported module, name or "", line) for every import of ``module``'s source that
    reaches into the package; ``from refimpl.matmul import x`` is an import of the
    submodule ``x`` when there is one, else of the package itself (``__init__``)."""
    tree = ast.parse((ROOT / f"{module}.py").read_text(), filename=f"{module}.py")
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name[len(PACKAGE) + 1:] or "__init__", "", node.lineno)
                      for a in node.names if a.name.startswith(PACKAGE + ".")]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == PACKAGE:
                found += [(a.name if a.name in MODULES else "__init__",
                           "" if a.name in MODULES else a.name, node.lineno)
                          for a in node.names]
            elif node.module.startswith(PACKAGE + "."):
                sub = node.module[len(PACKAGE) + 1:]
                found += [(sub, a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level:
            pytest.fail(f"{module}.py:{node.lineno}: a relative import (the package "
                        "imports by absolute name)")
    return found


GRAPH = {m: _imports(m) for m in MODULES}


def test_the_graph_reads_the_known_edges():
    # the parser sees module-level and function-level imports alike (hand-checked edges)
    edges = {m: {t for t, _, _ in imps} for m, imps in GRAPH.items()}
    assert {"accumulation", "blockfma", "blockscaled", "matrixcore"} <= edges["presets"]
    assert "alignment" in edges["blockfma"] and "screening" in edges["exact"]


def test_no_import_cycle():
    edges = {m: sorted({t for t, _, _ in imps}) for m, imps in GRAPH.items()}
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(m: str, path: list[str]) -> None:
        if state.get(m) == 2:
            return
        if state.get(m) == 1:
            cycle = path[path.index(m):] + [m]
            pytest.fail("import cycle: " + " -> ".join(cycle))
        state[m] = 1
        for t in edges.get(m, ()):
            if t == "__init__":
                pytest.fail(f"{m} imports the package refimpl.matmul itself, which imports "
                            "every module (a cycle)")
            visit(t, path + [m])
        state[m] = 2

    for m in MODULES:
        visit(m, [])


def test_no_private_name_crosses_a_module():
    bad = [f"{m}.py:{line}: {name} from {t}" for m, imps in GRAPH.items()
           for t, name, line in imps if name.startswith("_")]
    assert not bad, "private names imported from another module: " + "; ".join(bad)


def test_no_model_imports_the_preset_table():
    importers = [m for m, imps in GRAPH.items() if any(t == "presets" for t, _, _ in imps)]
    assert importers == []


def test_the_preset_table_is_registered_and_resolves_through_the_models():
    from refimpl.matmul import BlockFMA, block_scaled_matmul, matmul  # noqa: F401
    from refimpl.matmul.accumulation import preset_model, resolve_accumulation

    assert repr(preset_model("h200-fp16")) == "BlockFMA.preset('H100-FP16')"
    assert BlockFMA.preset("A100-FP16").n == 8  # the published n
    with pytest.raises(ValueError, match="unknown tensor-core preset 'Z9-FP16'"):
        resolve_accumulation("Z9-FP16")
    with pytest.raises(ValueError, match="block-scaled preset"):
        resolve_accumulation("B200-MXF4")
