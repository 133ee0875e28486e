"""Name lookup for the things a study names: a built-in name, or `package.module:attribute` for your own.

The import form lets a user ablate their own model or dataset without
touching this package (``model: mypackage.nets:MyNet``), and lets the tests
inject models and datasets that fail on purpose.
"""
from __future__ import annotations

import importlib
from typing import Any, Mapping


def lookup(registry: Mapping[str, Any], name: str, what: str) -> Any:
    """`registry[name]`, or the attribute an import path names; LookupError with one line otherwise."""
    if name in registry:
        return registry[name]
    if isinstance(name, str) and ":" in name:
        module, _, attribute = name.partition(":")
        try:
            return getattr(importlib.import_module(module), attribute)
        except (ImportError, AttributeError, ValueError) as error:
            raise LookupError(f"{what} {name!r} cannot be imported: {error}") from None
    raise LookupError(f"unknown {what} {name!r}; choose one of: {', '.join(sorted(registry))}, "
                      "or give package.module:attribute")
