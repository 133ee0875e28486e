"""What users import stays put: the public names of `ablate` cost no torch to import and are the objects their
modules define, whatever was imported first; an old path keeps working, with a warning, until the release it names.

The checks that depend on what a process has imported run in a fresh interpreter: in the suite's own, other tests
have imported half the tree already.
"""
from __future__ import annotations

import ast
import importlib
import json
import re
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
import tomllib

import ablate
from ablate._moved import MOVED

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "scipy", "mlflow", "optuna", "matplotlib", "statsmodels")


def _fresh(code: str) -> str:
    """Run `code` in a fresh interpreter at the repository's root; its stdout."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def test_import_ablate_pulls_in_no_torch_scipy_or_mlflow() -> None:
    loaded = json.loads(_fresh(f"""
        import json, sys
        import ablate
        ablate.__all__, dir(ablate)
        print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"""))
    assert loaded == []


def test_import_strategies_pulls_in_torch_alone() -> None:
    """strategies depends on torch only (docs/strategies.md): nothing of ablate, its statistics or its tracking.
    Every name it exports is a torch object, so deferring torch's import would only move it to the first use."""
    loaded = json.loads(_fresh(f"""
        import json, sys
        import strategies
        print(json.dumps([m for m in ("ablate", *{HEAVY!r}) if m in sys.modules]))"""))
    assert loaded == ["torch"]


@pytest.mark.slow
def test_every_public_name_is_its_modules_object_after_every_submodule_is_imported() -> None:
    """Importing a submodule binds it on its package, which used to hide a public name of the same name (trial's
    `train`, a function then in trial/train.py): every package's names are checked once every module is imported."""
    found = json.loads(_fresh("""
        import importlib, json, pkgutil, sys, warnings
        import ablate
        from ablate import _lazy
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # the shims of old paths say they moved
            for module in pkgutil.walk_packages(ablate.__path__, "ablate."):
                importlib.import_module(module.name)
        wrong, listed = [], {}
        for package, where in _lazy.public().items():
            listed[package] = sorted(where) == sorted(sys.modules[package].__all__)
            for name, module in where.items():
                defined = getattr(importlib.import_module(f"{package}.{module}"), name)
                if getattr(sys.modules[package], name) is not defined:
                    wrong.append(f"{package}.{name} is {getattr(sys.modules[package], name)!r}")
        print(json.dumps({"wrong": wrong, "listed": listed}))"""))
    assert found["wrong"] == []
    packages = {"ablate", *(f"ablate.{p.parent.name}" for p in (ROOT / "ablate").glob("*/__init__.py"))}
    assert set(found["listed"]) == packages  # every package exports its names through `ablate._lazy`
    assert all(found["listed"].values()), found["listed"]  # and lists them all in `__all__`


def test_the_exported_train_is_the_function_though_its_module_was_imported_first() -> None:
    kinds = json.loads(_fresh("""
        import json, types
        import ablate.trial.loop as loop_module  # what the trial process does before any `from ablate.trial ...`
        from ablate.trial import train
        from ablate.trial.loop import evaluate
        import ablate.trial
        print(json.dumps([callable(train), isinstance(train, types.ModuleType), ablate.trial.train is train,
                          train is loop_module.train, evaluate.__module__]))"""))
    assert kinds[:4] == [True, False, True, True]
    assert kinds[4] == "ablate.trial.loop"  # the module is importable by its own path


def test_type_checkers_see_every_public_name_of_ablate() -> None:
    """`ablate/__init__.py` imports its names under TYPE_CHECKING, so a user's checker (py.typed) sees real types,
    not `__getattr__`'s Any; the list must be the lazy exports' own."""
    tree = ast.parse((ROOT / "ablate" / "__init__.py").read_text())
    (block,) = [node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"]
    seen = {alias.asname or alias.name for node in block.body if isinstance(node, ast.ImportFrom)
            for alias in node.names}
    assert seen == set(ablate.__all__)


def test_py_typed_ships_with_both_packages() -> None:
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    for package in ("ablate", "strategies"):
        assert (ROOT / package / "py.typed").is_file()
        assert "py.typed" in package_data[package]


def test_a_users_module_written_against_the_old_splits_path_imports_with_the_warning(tmp_path, monkeypatch) -> None:
    """A study's dataset module as docs/studies.md taught it before the move (1c7cf22): it imports, warns where the
    user's line is, and its splits load through ablate as before."""
    user = tmp_path / "old_style_data.py"
    user.write_text("from ablate.data import Splits\n\n\ndef splits(root):\n    return Splits([1.0, 2.0], [3.0])\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "ablate.data", raising=False)  # a shim warns when first imported
    with pytest.warns(FutureWarning, match=r"ablate\.data .* goes away in ablate 0\.3\.0: write `from ablate import "
                                           r"Splits") as warned:
        importlib.import_module("old_style_data")
    assert [Path(w.filename) for w in warned] == [user]  # the line to change, not the shim's

    from ablate.workload import data

    loaded = data.load("old_style_data:splits")
    assert isinstance(loaded, ablate.Splits) and list(loaded.train) == [1.0, 2.0]


def test_the_old_loop_path_still_gives_the_loop(monkeypatch) -> None:
    from ablate.trial import evaluate, train

    monkeypatch.delitem(sys.modules, "ablate.train", raising=False)
    with pytest.warns(FutureWarning, match="ablate.train is deprecated"):
        old = importlib.import_module("ablate.train")
    assert old.train is train and old.evaluate is evaluate


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_warns_and_gives_the_names_where_they_live_now(old: str, monkeypatch) -> None:
    """Every shim forwards every public name of the module it moved to, and what its warning says to write
    instead imports without a warning."""
    moved = MOVED[old]
    monkeypatch.delitem(sys.modules, old, raising=False)  # a shim warns when first imported
    with pytest.warns(FutureWarning, match=rf"{re.escape(old)} is deprecated and goes away in ablate "
                                           rf"{re.escape(moved.removed_in)}: write `{re.escape(moved.instead)}`"):
        shim = importlib.import_module(old)
    now = importlib.import_module(moved.now)
    names = [name for name in dir(now) if not name.startswith("_")]
    assert names and all(getattr(shim, name) is getattr(now, name) for name in names)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        exec(moved.instead, {})


def test_the_version_is_pyprojects() -> None:
    assert ablate.__version__ == tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


@pytest.mark.parametrize("old", sorted(MOVED))
def test_a_shim_goes_in_the_release_it_names(old: str) -> None:
    """Fails once the project's version reaches the release a shim names: remove the shim (ablate/_moved.py, its
    module, its row in docs/api.md) and keep the changelog's line."""
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert _version(version)[:2] < _version(MOVED[old].removed_in)[:2], \
        f"ablate {version} has reached {MOVED[old].removed_in}: remove the shim {old}"
