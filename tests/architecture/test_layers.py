"""ablate's packages are floors: a module imports only from its own floor and those below it.

The walk reads every import statement (function-level and TYPE_CHECKING ones too) with `ast`, so an
import put inside a function to keep start-up light still counts: it runs upward all the same.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ABLATE = Path(__file__).resolve().parents[2] / "ablate"
# Bottom to top. A package imports only its own floor and the ones below; docs/contributing.md draws it.
FLOORS = [
    {"_lazy", "words"},
    {"workload"},
    {"config"},
    {"trial"},
    {"store"},
    {"stats"},
    {"render"},
    {"tracking"},
    {"run"},
    {"scaffold", "diagnose"},
    {"cli", "__main__"},
]
FLOOR = {part: i for i, parts in enumerate(FLOORS) for part in parts}


def _part(module: str) -> str | None:
    """`ablate.stats.racing` -> "stats"; None for what is not ablate's."""
    names = module.split(".")
    return names[1] if names[0] == "ablate" and len(names) > 1 else None


def _imports(path: Path) -> list[tuple[int, str]]:
    module = ".".join(path.relative_to(ABLATE.parent).with_suffix("").parts)
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the module's own package
                base = ".".join(module.split(".")[:-node.level] + ([base] if base else []))
            found += [(node.lineno, f"{base}.{alias.name}" if base == "ablate" else base) for alias in node.names]
    return found


def _modules() -> list[Path]:
    return sorted(p for p in ABLATE.rglob("*.py") if p.name != "__init__.py" or p.parent != ABLATE)


def upward_imports(paths: list[Path]) -> list[str]:
    bad = []
    for path in paths:
        here = _part(".".join(path.relative_to(ABLATE.parent).with_suffix("").parts))
        for line, imported in _imports(path):
            there = _part(imported)
            if here is None or there is None:
                continue
            if FLOOR[there] > FLOOR[here]:
                bad.append(f"{path.relative_to(ABLATE.parent)}:{line} imports {imported} ({there} is above {here})")
    return bad


def test_every_part_of_ablate_has_a_floor() -> None:
    parts = {p.relative_to(ABLATE).parts[0].removesuffix(".py") for p in _modules()} - {"studies"}
    assert parts <= set(FLOOR), f"no floor for {sorted(parts - set(FLOOR))}: add it to FLOORS"


def test_no_import_runs_upward() -> None:
    assert upward_imports(_modules()) == []


def test_the_walk_catches_an_upward_import_inside_a_function(tmp_path: Path) -> None:
    fake = ABLATE / "trial" / "_upward_probe.py"
    fake.write_text("def f():\n    from ablate.stats import racing\n    return racing\n")
    try:
        assert upward_imports([fake]) == [
            "ablate/trial/_upward_probe.py:2 imports ablate.stats (stats is above trial)"]
    finally:
        fake.unlink()


@pytest.mark.parametrize("package", sorted(p.name for p in ABLATE.iterdir() if (p / "__init__.py").exists()))
def test_a_package_lists_its_public_names(package: str) -> None:
    import importlib

    imported = importlib.import_module(f"ablate.{package}")
    assert imported.__doc__ and imported.__all__
    for name in imported.__all__:
        assert getattr(imported, name) is not None
