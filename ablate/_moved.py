"""Old import paths that still work, each until the release it names: the shims' one table (docs/api.md, "Moved
names").

When ablate/ became packages, `ablate.data` - where docs/studies.md told a study's own dataset function
to find `Splits` - and `ablate.train` - the loop docs/contributing.md pointed at - moved, and a user's module
written against them stopped importing, with no word of why. Each old path is now a module of two lines that
forwards every attribute to where it lives now and warns once, on import, naming what to import instead and the
release that removes it (a test fails once pyproject's version reaches that release, so the shim goes on time).
The same holds for the modules that left the top level when it became entry points only: `ablate.scaffold`
(into config/) and `ablate.diagnose` (into run/), which a script may have imported.

A FutureWarning, not a DeprecationWarning: the import that warns is in the user's own module, which ablate imports
(a study's dataset, model or loss), and Python shows a DeprecationWarning only where `__main__` triggers it, so
the person who must change the line would never see it. A FutureWarning is shown by default, and under
`ablate run` reaches the results folder's log (ablate.log) with the other library warnings.
"""
from __future__ import annotations

import importlib
import warnings
from typing import Any, Callable, NamedTuple


class Moved(NamedTuple):
    now: str  # the module whose attributes the old path forwards to
    instead: str  # what to write instead, from the public names (docs/api.md)
    removed_in: str  # the release without the old path


MOVED: dict[str, Moved] = {
    "ablate.data": Moved("ablate.workload.data", "from ablate import Splits, DataUnavailable, DATASETS", "0.3.0"),
    "ablate.train": Moved("ablate.trial", "from ablate.trial import train, evaluate", "0.3.0"),
    # When the top level became entry points only: `ablate new`'s study writer and `ablate diagnose`.
    "ablate.scaffold": Moved("ablate.config.scaffold", "from ablate.config import scaffold", "0.3.0"),
    "ablate.diagnose": Moved("ablate.run.diagnose", "from ablate.run import diagnose", "0.3.0"),
}


def forward(old: str) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Warn that `old` moved, pointing at the line that imports it (the shim's importer); then `__getattr__` and
    `__dir__` for the shim, which reach the module where the names live now."""
    moved = MOVED[old]
    # 3: past this function and the shim's body to its importer (the import system's own frames are skipped).
    warnings.warn(f"{old} is deprecated and goes away in ablate {moved.removed_in}: write `{moved.instead}` "
                  "(docs/api.md, Moved names)", FutureWarning, stacklevel=3)

    def __getattr__(name: str) -> Any:
        return getattr(importlib.import_module(moved.now), name)

    def __dir__() -> list[str]:
        return dir(importlib.import_module(moved.now))

    return __getattr__, __dir__
