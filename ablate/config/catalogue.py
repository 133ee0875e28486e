"""What `ablate list` shows - the studies, the strategies and the presets - read from files, importing none of them.

`ablate list` is what a new user runs first, and it should answer in about a second. Importing the
strategies imports torch (and torchao, with its warnings): seconds spent for names and first lines. So
a study's description is read from its YAML, and the strategies (the `REGISTRY`, each class's `name`, its
`targets` and the first line of its docstring) and the presets' members from the `strategies` package's source,
with `ast`. Should that source ever take a shape this reading does not know, the listing imports the package
instead: slower, never wrong. tests/config/test_catalogue.py holds the reading to the imported registry.
"""
from __future__ import annotations

import ast
import importlib.util
from pathlib import Path
from typing import NamedTuple

import yaml

# The bundled studies, named by their file's stem; shipped in the package: a non-editable install lists them.
STUDIES_DIR = Path(__file__).resolve().parents[1] / "studies"


class _Unread(Exception):
    """The source is not in the shape this module reads."""


def available() -> list[str]:
    """The bundled studies' names (`ablate run NAME`), sorted."""
    return sorted(p.stem for p in STUDIES_DIR.glob("*.yaml"))


def studies() -> list[tuple[str, str]]:
    """(name, description) of every study in studies/, by name; the description on one line."""
    found = []
    for name in available():
        raw = yaml.safe_load((STUDIES_DIR / f"{name}.yaml").read_text(encoding="utf-8"))
        description = raw.get("description", "") if isinstance(raw, dict) else ""
        found.append((name, " ".join(str(description or "").split())))
    return found


class Listed(NamedTuple):
    """A strategy as `ablate list` shows it."""

    name: str  # its registry name
    targets: tuple[str, ...]  # what it targets (`Strategy.targets`), in `strategies.base.TARGETS`' order
    summary: str  # the first line of its docstring


def strategies() -> list[Listed]:
    """Every strategy, in `REGISTRY`'s order."""
    try:
        return _read_strategies(_package())
    except (_Unread, OSError, SyntaxError):
        from ablate.config.choices import targets_of
        from strategies import REGISTRY

        return [Listed(name, targets_of(cls), _first_line(cls.__doc__)) for name, cls in REGISTRY.items()]


def presets() -> list[tuple[str, list[str]]]:
    """(preset name, the calls that build its members, e.g. "AMP(dtype='fp16')") of every preset, in order."""
    try:
        return _read_presets(_package())
    except (_Unread, OSError, SyntaxError):
        from strategies import PRESETS, preset

        return [(name, [repr(member) for member in preset(name).members]) for name in PRESETS]


def _package() -> Path:
    spec = importlib.util.find_spec("strategies")  # finds the package without running its __init__
    if spec is None or not spec.submodule_search_locations:
        raise _Unread("no strategies package")
    return Path(next(iter(spec.submodule_search_locations)))


def _first_line(doc: str | None) -> str:
    return (doc or "").strip().splitlines()[0] if (doc or "").strip() else ""


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def _assigned(tree: ast.Module | ast.ClassDef, name: str) -> ast.expr:
    """The value assigned to `name` at the top of a module or class body."""
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return value
    raise _Unread(f"no {name} assigned")


def _imported_from(tree: ast.Module) -> dict[str, str]:
    """{class name: module name} of the package's `from strategies.X import Y` lines."""
    return {alias.asname or alias.name: node.module for node in tree.body if isinstance(node, ast.ImportFrom)
            and node.module and node.module.startswith("strategies.") for alias in node.names}


def _class(package: Path, module: str, name: str) -> ast.ClassDef:
    tree = _tree(package / f"{module.removeprefix('strategies.').replace('.', '/')}.py")
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    raise _Unread(f"no class {name} in {module}")


def _literal(tree: ast.Module, name: str) -> list[str]:
    """The strings of ``name = Literal[...]`` in `tree`, in order, those of a Literal it names included."""
    value = _assigned(tree, name)
    if not (isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name) and value.value.id == "Literal"):
        raise _Unread(f"{name} is not a Literal")
    found: list[str] = []
    for element in value.slice.elts if isinstance(value.slice, ast.Tuple) else [value.slice]:
        if isinstance(element, ast.Constant) and isinstance(element.value, str):
            found.append(element.value)
        elif isinstance(element, ast.Name):
            found += _literal(tree, element.id)
        else:
            raise _Unread(f"{name} holds something other than strings and Literals")
    return found


def _targets(cls: ast.ClassDef, known: list[str]) -> tuple[str, ...]:
    """A class's ``targets = frozenset({...})``, in the order of `known`."""
    value = _assigned(cls, "targets")
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "frozenset"
            and len(value.args) == 1 and isinstance(value.args[0], ast.Set)):
        raise _Unread(f"{cls.name}.targets is not frozenset({{...}})")
    named = {e.value for e in value.args[0].elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    if len(named) != len(value.args[0].elts) or not named <= set(known):
        raise _Unread(f"{cls.name}.targets names something other than {known}")
    return tuple(t for t in known if t in named)


def _read_strategies(package: Path) -> list[Listed]:
    known = _literal(_tree(package / "base.py"), "Target")
    init = _tree(package / "__init__.py")
    where = _imported_from(init)
    # REGISTRY = {cls.name: cls for cls in (NumWorkers, PinMemory, ...)}: the one tuple of class names in it
    names = [[e.id for e in node.elts if isinstance(e, ast.Name)] for node in ast.walk(_assigned(init, "REGISTRY"))
             if isinstance(node, ast.Tuple) and node.elts and all(isinstance(e, ast.Name) for e in node.elts)]
    if len(names) != 1:
        raise _Unread("REGISTRY is not one tuple of classes")
    found = []
    for class_name in names[0]:
        if class_name not in where:
            raise _Unread(f"{class_name} is not imported from a module of the package")
        cls = _class(package, where[class_name], class_name)
        name = _assigned(cls, "name")
        if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
            raise _Unread(f"{class_name}.name is not a string")
        found.append(Listed(name.value, _targets(cls, known), _first_line(ast.get_docstring(cls))))
    return found


def _read_presets(package: Path) -> list[tuple[str, list[str]]]:
    tree = _tree(package / "presets.py")
    where = {**_imported_from(_tree(package / "__init__.py")), **_imported_from(tree)}
    table = _assigned(tree, "PRESETS")
    if not isinstance(table, ast.Dict):
        raise _Unread("PRESETS is not a dict")
    found = []
    for key, value in zip(table.keys, table.values):
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str) and isinstance(value, ast.Lambda)
                and isinstance(value.body, ast.Tuple)):
            raise _Unread("a preset is not name: lambda: (members)")
        found.append((key.value, [_call(package, where, member) for member in value.body.elts]))
    return found


def _call(package: Path, where: dict[str, str], member: ast.expr) -> str:
    """A member's constructor call with its arguments named, as a study's settings name them:
    AMP("fp16") -> "AMP(dtype='fp16')"."""
    if not (isinstance(member, ast.Call) and isinstance(member.func, ast.Name) and member.func.id in where):
        raise _Unread("a preset member is not a call of a strategy class")
    init = next((n for n in _class(package, where[member.func.id], member.func.id).body
                 if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
    parameters = [a.arg for a in init.args.posonlyargs + init.args.args][1:] if init else []
    if len(member.args) > len(parameters) or any(isinstance(a, ast.Starred) for a in member.args):
        raise _Unread(f"{member.func.id}'s arguments cannot be named")
    named = [f"{p}={ast.unparse(a)}" for p, a in zip(parameters, member.args)]
    named += [f"{k.arg}={ast.unparse(k.value)}" for k in member.keywords if k.arg]
    if any(k.arg is None for k in member.keywords):
        raise _Unread("a preset member passes **kwargs")
    return f"{member.func.id}({', '.join(named)})"
