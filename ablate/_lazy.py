"""Public names a package lists in its `__init__`, imported when first used (PEP 562).

A trial interpreter's start-up is a measured budget (docs/measuring.md): `import ablate.trial`
must not import what `ablate.stats` or `ablate.tracking` would pull in (scipy, MLflow), so a
package's `__init__` names its public objects without importing their modules.
"""
from __future__ import annotations

import importlib
from typing import Any, Callable, Mapping


def exports(package: str, where: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """`__getattr__` and `__dir__` for `package`, whose public name N lives in module `package.where[N]`."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:  # a submodule is then imported by the import system, as without this hook
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{module}"), name)

    def __dir__() -> list[str]:
        return sorted(where)

    return __getattr__, __dir__
