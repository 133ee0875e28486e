"""No import circle between ablate's modules: the floors (test_layers.py) order the packages, and this orders the
modules inside each one, so every module can be read after the ones it imports.

Every import statement counts, function-level and TYPE_CHECKING ones too (as in test_layers.py): an import kept out
of the module's top to dodge a circle, or to type one name, is still an arrow a reader follows.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _graph() -> dict[str, set[str]]:
    paths = {_module(p): p for p in (ROOT / "ablate").rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for module, path in paths.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                # `from ablate.config import study` imports the module ablate.config.study
                found |= {f"{base}.{a.name}" if f"{base}.{a.name}" in paths else base for a in node.names}
        graph[module] = {m for m in found if m in paths and m != module}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_walk_sees_the_arrows_it_must():
    graph = _graph()
    assert "ablate.config.choices" in graph["ablate.config.schema"]
    assert "ablate.config.schema" in graph["ablate.config.study"]


def test_no_module_imports_one_that_imports_it_back():
    graph = _graph()
    # A package's __init__ names its modules lazily (ablate._lazy) and imports none; a module importing its own
    # package's __init__ would close a circle through it, which is what this finds.
    assert _circles(graph) == []
