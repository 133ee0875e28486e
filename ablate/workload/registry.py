"""Name lookup for the things a study names: a built-in name, or `package.module:attribute` for your own.

The import form lets a user ablate their own model or dataset without
touching this package (``model: mypackage.nets:MyNet``), and lets the tests
inject models and datasets that fail on purpose.
"""
from __future__ import annotations

import difflib
import importlib
from typing import Any, Iterable, Mapping


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
    raise LookupError(unknown(what, [name], registry, tail=", or give package.module:attribute"))


def unknown(what: str, names: Iterable[Any], valid: Iterable[Any], lead: str = "choose one of", tail: str = "",
            most: int | None = None) -> str:
    """The one line for names that are not among `valid`: the valid choices, then the nearest valid name
    to each that is near one (a typo costs a glance, not a read through the list).

    `most` caps the choices listed (timm alone has over a thousand models): the `most` nearest to the first
    name, then how many more there are.
    """
    names, choices = list(names), sorted(map(str, valid))
    folded = {c.lower(): c for c in choices}  # `o2` is a typo of `O2`
    listed = choices
    if most is not None and len(choices) > most and names:
        nearest = difflib.get_close_matches(str(names[0]).lower(), list(folded), n=most, cutoff=0.0)
        listed = [*(folded[c] for c in nearest), f"... ({len(choices) - len(nearest)} more)"]
    near = {name: folded[close[0]] for name in names
            if (close := difflib.get_close_matches(str(name).lower(), list(folded), n=1))}
    hint = ""
    if len(names) == 1 and near:
        hint = f"; did you mean {next(iter(near.values()))!r}?"
    elif near:
        hint = f"; did you mean {', '.join(f'{v!r} for {k!r}' for k, v in near.items())}?"
    return (f"unknown {what} {', '.join(map(repr, names))}; {lead}: {', '.join(listed) or '(none)'}{tail}{hint}")
