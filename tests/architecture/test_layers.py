"""ablate's packages are floors: a module imports only from its own floor and those below it.

The walk reads every import statement (function-level and TYPE_CHECKING ones too) with `ast`, so an
import put inside a function to keep start-up light still counts: it runs upward all the same.

The floors end at the command line: ablate/'s top level holds the entry points (cli.py, its parser cli_parser.py,
__main__.py), the ground floor's helpers and nothing that does work of its own; a module that does belongs in a
package (`test_the_top_level_holds_entry_points_helpers_and_shims_only`).

The shims of old import paths (`ablate._moved.MOVED`: ablate/data.py, ablate/train.py, ablate/scaffold.py,
ablate/diagnose.py) are the one exemption: they forward to a package above the ground floor by name. The exemption
is narrow: a shim must be exactly the two lines of one (`test_a_shim_is_only_a_shim`), so nothing else can live
under it.

Each package's `__init__` lists its public names; a public function or class is what its module defines, callable
however many of the package's modules were imported before (a submodule of the same name once shadowed trial's
`train`), and no public name may be a submodule's.
"""
from __future__ import annotations

import ast
import importlib
import pkgutil
import types
from pathlib import Path

import pytest

from ablate import _lazy
from ablate._moved import MOVED

ABLATE = Path(__file__).resolve().parents[2] / "ablate"
SHIMS = {ABLATE.parent.joinpath(*old.split(".")).with_suffix(".py") for old in MOVED}
# Bottom to top. A package imports only its own floor and the ones below; docs/contributing.md draws it.
FLOORS = [
    {"_lazy", "_moved", "words"},
    {"workload"},
    {"config"},
    {"trial"},
    {"store"},
    {"stats"},
    {"render"},
    {"tracking"},
    {"run"},
    {"cli", "cli_parser", "__main__"},  # the top floor: the entry points
]
FLOOR = {part: i for i, parts in enumerate(FLOORS) for part in parts}


def _part(module: str) -> str | None:
    """`ablate.stats.race.racing` -> "stats"; None for what is not ablate's."""
    names = module.split(".")
    return names[1] if names[0] == "ablate" and len(names) > 1 else None


def _imports(path: Path, root: Path) -> list[tuple[int, str]]:
    module = ".".join(path.relative_to(root).with_suffix("").parts)
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
    """Every module on a floor: all but ablate's own `__init__` and the shims of old paths."""
    return sorted(p for p in ABLATE.rglob("*.py") if (p.name != "__init__.py" or p.parent != ABLATE)
                  and p not in SHIMS)


def upward_imports(paths: list[Path], root: Path = ABLATE.parent) -> list[str]:
    """Each import in `paths` (files of an `ablate/` under `root`) that runs upward, as "FILE:LINE imports NAME
    (X is above Y)"."""
    bad = []
    for path in paths:
        here = _part(".".join(path.relative_to(root).with_suffix("").parts))
        for line, imported in _imports(path, root):
            there = _part(imported)
            if here is None or there is None:
                continue
            if FLOOR[there] > FLOOR[here]:
                bad.append(f"{path.relative_to(root)}:{line} imports {imported} ({there} is above {here})")
    return bad


def test_every_part_of_ablate_has_a_floor() -> None:
    parts = {p.relative_to(ABLATE).parts[0].removesuffix(".py") for p in _modules()} - {"studies"}
    assert parts <= set(FLOOR), f"no floor for {sorted(parts - set(FLOOR))}: add it to FLOORS"


def test_the_top_level_holds_entry_points_helpers_and_shims_only() -> None:
    """Every floor between the ground and the command line is a package; a module at the top level is an entry
    point, a ground-floor helper or a shim."""
    assert FLOORS[-1] == {"cli", "cli_parser", "__main__"}
    assert all((ABLATE / part / "__init__.py").is_file() for parts in FLOORS[1:-1] for part in parts)
    top = {p.stem for p in ABLATE.glob("*.py") if p not in SHIMS} - {"__init__"}
    assert top <= FLOORS[0] | FLOORS[-1], f"{sorted(top - FLOORS[0] - FLOORS[-1])} belong in a package"


def test_no_import_runs_upward() -> None:
    assert upward_imports(_modules()) == []


# stats/ inside, bottom to top: the parts its jobs share, then the jobs in the order a study runs them (the race
# opens on screening's model; the answer reads both), then the two modules that span them all.
STATS_FLOORS = [
    {"protocol", "variance", "contrasts", "flips", "speedups", "parity", "diagnosis"},
    {"screening"},
    {"race"},
    {"answer"},
    {"planner", "changes"},
]
STATS_FLOOR = {part: i for i, parts in enumerate(STATS_FLOORS) for part in parts}


def _stats_part(module: str) -> str | None:
    """`ablate.stats.race.racing` -> "race", `ablate.stats.parity` -> "parity"; None outside stats/."""
    names = module.split(".")
    return names[2] if names[:2] == ["ablate", "stats"] and len(names) > 2 else None


def test_stats_jobs_import_downward_only() -> None:
    """No stats sub-package imports one above it, and what the jobs share imports none of them."""
    paths = sorted((ABLATE / "stats").rglob("*.py"))
    modules = {p: ".".join(p.relative_to(ABLATE.parent).with_suffix("").parts) for p in paths}
    parts = {_stats_part(m) for m in modules.values()} - {"__init__", None}
    assert parts == set(STATS_FLOOR), f"give {sorted(parts - set(STATS_FLOOR))} a floor in STATS_FLOORS"
    bad = []
    for path, module in modules.items():
        here = _stats_part(module)
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import) else
                     [f"{node.module}.{alias.name}" for alias in node.names] if isinstance(node, ast.ImportFrom)
                     else [])
            for there in filter(None, map(_stats_part, names)):
                if here in STATS_FLOOR and STATS_FLOOR[there] > STATS_FLOOR[here]:
                    bad.append(f"{module}:{node.lineno} imports ablate.stats.{there}")
    assert bad == []


def test_the_walk_catches_an_upward_import_inside_a_function(tmp_path: Path) -> None:
    fake = tmp_path / "ablate" / "trial" / "_upward_probe.py"  # outside the source tree: nothing else sees it
    fake.parent.mkdir(parents=True)
    fake.write_text("def f():\n    from ablate.stats.race import racing\n    return racing\n")
    assert upward_imports([fake], tmp_path) == [
        "ablate/trial/_upward_probe.py:2 imports ablate.stats.race (stats is above trial)"]


def test_a_shim_is_only_a_shim() -> None:
    """The floors' one exemption holds nothing but the forward to where the names live now."""
    shape = ast.dump(ast.parse('"doc"\nfrom ablate._moved import forward\n__getattr__, __dir__ = forward(__name__)'))
    assert SHIMS and all(path.is_file() for path in SHIMS), sorted(map(str, SHIMS))
    for path in SHIMS:
        tree = ast.parse(path.read_text())
        assert isinstance(tree.body[0], ast.Expr) and isinstance(tree.body[0].value, ast.Constant)
        tree.body[0].value.value = "doc"
        assert ast.dump(tree) == shape, f"{path.relative_to(ABLATE.parent)} holds more than a shim's two lines"


PACKAGES = sorted(p.name for p in ABLATE.iterdir() if (p / "__init__.py").exists())


def _defined_callables(path: Path) -> set[str]:
    """The names `path` defines with `def` or `class` at its top level: read from the source, not from what an
    import left on the package."""
    return {node.name for node in ast.parse(path.read_text()).body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}


@pytest.mark.parametrize("package", PACKAGES)
def test_a_package_lists_its_public_names(package: str) -> None:
    imported = importlib.import_module(f"ablate.{package}")
    assert imported.__doc__ and imported.__all__
    # Importing a submodule binds it on its package under its own name: a public name that is also a submodule's
    # (trial's `train` beside trial/train.py, before it became loop.py) then gives the module.
    submodules = {module.name for module in pkgutil.iter_modules(imported.__path__)}
    assert not submodules & set(imported.__all__), f"ablate.{package}: a public name is also a submodule's"


@pytest.mark.parametrize("package", PACKAGES)
def test_a_packages_exported_functions_are_callable_after_every_submodule_is_imported(package: str) -> None:
    imported = importlib.import_module(f"ablate.{package}")
    for module in pkgutil.walk_packages(imported.__path__, f"ablate.{package}."):  # no shim lives in a package
        importlib.import_module(module.name)
    where = _lazy.public()[f"ablate.{package}"]
    for name in imported.__all__:
        exported = getattr(imported, name)
        assert not isinstance(exported, types.ModuleType), f"ablate.{package}.{name} is a module"
        if name in _defined_callables(ABLATE.joinpath(package, *where[name].split(".")).with_suffix(".py")):
            assert callable(exported), f"ablate.{package}.{name} is {exported!r}, not what its module defines"
