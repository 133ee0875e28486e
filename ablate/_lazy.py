"""Public names a package lists in its `__init__`, imported when first used (PEP 562).

A trial interpreter's start-up is a measured budget (docs/measuring.md): `import ablate.trial`
must not import what `ablate.stats` or `ablate.tracking` would pull in (scipy, MLflow), so a
package's `__init__` names its public objects without importing their modules.

A public name wins over a submodule of the same name. Importing `package.name` makes the import system
bind the submodule as the package's attribute `name`, which hides `__getattr__` from then on: trial's
exported function `train` lived in trial/train.py, so once anything had imported that module,
`from ablate.trial import train` gave the module, depending on what ran first. The module is trial/loop.py
now, and tests/architecture/test_layers.py fails on a public name that is also a submodule's; the package's
module class still refuses that one binding (`_Package`), so the import order can never decide what a name is.
"""
from __future__ import annotations

import importlib
import sys
import types
from typing import Any, Callable, Mapping

_WHERE: dict[str, Mapping[str, str]] = {}  # package -> its public names -> the module each lives in


class _Package(types.ModuleType):
    """A package module whose public names are not replaced by the import system's binding of a submodule."""

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, types.ModuleType) and name in _WHERE.get(self.__name__, {}):
            return  # the import system binding submodule `name`: the public name keeps resolving to its object
        super().__setattr__(name, value)


def exports(package: str, where: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """`__getattr__` and `__dir__` for `package`, whose public name N lives in module `package.where[N]`."""
    _WHERE[package] = dict(where)
    sys.modules[package].__class__ = _Package

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:  # a submodule is then imported by the import system, as without this hook
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{module}"), name)

    def __dir__() -> list[str]:
        return sorted(where)

    return __getattr__, __dir__


def public() -> Mapping[str, Mapping[str, str]]:
    """Every imported package's public names, each to the module it lives in (for the tests that check them)."""
    return _WHERE
