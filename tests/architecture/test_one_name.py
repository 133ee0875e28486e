"""One name for each thing: no two classes of ablate and strategies share a name. Six did (two `Study`, `Check`,
`Profile`, `Prediction`, `Source`, `Logged`), and a reader who met one in a traceback or a type hint had to find out
which module's it was."""
from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_class_name_is_defined_once() -> None:
    where: dict[str, list[str]] = defaultdict(list)
    for path in sorted(p for package in ("ablate", "strategies") for p in (ROOT / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                where[node.name].append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert where
    twice = {name: places for name, places in where.items() if len(places) > 1}
    assert not twice, f"class names defined more than once (give each its own name): {twice}"
