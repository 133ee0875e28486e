"""A compiled combination's own Inductor cache: its first measurement compiles cold, later ones start warm.

Why this cannot bias the answer:
- A measurement's speed-up comes from its timed windows, after the first steps
  and the warm-up: compilation is over by then, cold or warm.
- A cache hit returns the code compiled for the same graph (Inductor's FX graph
  cache keys on the graph, its inputs' shapes and strides, the configuration and
  the torch version), so the steady-state code is the code the cold measurement
  ran; only the one-off cost differs, and the analysis takes that from the
  combination's cold measurement (ablate.store.records.combine), also where a later,
  warm one (the parity race's training) carries the combination's accuracy.
- The cache is the combination's own. No combination gets faster for running
  after another, so the random order within blocks stays unbiased.
- Autotuning modes ("max-autotune...") are left out: they choose kernels by
  timing candidates, which varies between runs. Reusing the first measurement's
  choices would give every later measurement the same draw, and their spread
  would understate what a second study would see.
- Only a cache that persists is used: strategies whose one-off cost is Inductor
  compilation (`Strategy.caches_compiled_code`: Compile with Inductor,
  CUDAGraphs with Inductor's kernels, CompiledOptimizer). cuDNN's autotuning,
  TorchScript's profiling runs and moving the data to the device leave nothing
  a later process could load: such a combination gets no folder, so no
  measurement of it is labelled warm, and each pays its own one-off cost.

Mechanics: the folder is ``compile-cache/<key>`` in the study's results folder,
keyed by search (the Optuna study), combination, device and torch version. A
cold measurement compiles into a temporary folder beside it, renamed into place
only when the trial succeeded (atomic; a concurrent worker's rename wins and the
other copy is dropped), so a killed or failed trial leaves no half-filled cache;
the next cold measurement removes a dead process's temporary folder.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Sequence

from ablate.config.choices import Option
from ablate.workload.datacache import dead

FOLDER = "compile-cache"


def reusable(options: Sequence[Option]) -> bool:
    """Whether later measurements of this combination may start from its own warm cache: one of its strategies
    compiles with Inductor, and none autotunes."""
    if not any(s is not None and s.caches_compiled_code() for s in (o.build() for o in options)):
        return False
    return not any("autotune" in str(v) for o in options for _, v in o.kwargs)


def folder(results_dir: Path, search: str, combination: str, device_name: str, torch_version: str) -> Path:
    """`search`: the Optuna study the measurement belongs to. Why it is in the key: a study's results folder holds
    each of its searches (the grid, `--search optuna`), and a search whose compiled combinations all started from
    another search's cache would have no cold measurement to read their one-off cost from."""
    key = hashlib.sha256(repr((search, combination, device_name, torch_version)).encode()).hexdigest()[:16]
    return results_dir / FOLDER / key


class Use:
    """In the trial process: points Inductor and Triton at the cache (warm) or a fresh folder (cold)."""

    def __init__(self, own: str | None) -> None:
        self.own = Path(own) if own else None
        self.warm = bool(self.own and self.own.is_dir())
        if self.warm:
            self.path = str(self.own)
        else:
            parent = self.own.parent if self.own else None
            if parent:
                parent.mkdir(parents=True, exist_ok=True)
                _remove_dead(parent)
            self.path = tempfile.mkdtemp(prefix=f"cold-{os.getpid()}-", dir=parent)
        # Inductor reads the variables when it compiles, so setting them after `import torch` is in time.
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = self.path
        os.environ["TRITON_CACHE_DIR"] = os.path.join(self.path, "triton")

    def done(self, succeeded: bool) -> None:
        """Keep a cold cache as the combination's own after a successful trial; otherwise remove it."""
        if self.warm:
            return
        if succeeded and self.own:
            try:
                Path(self.path).rename(self.own)
                return
            except OSError:  # another worker's is in place already
                pass
        shutil.rmtree(self.path, ignore_errors=True)


def hits() -> int:
    """Graphs this process loaded from Inductor's FX graph cache instead of compiling them."""
    import sys

    utils = sys.modules.get("torch._dynamo.utils")
    return int(utils.counters["inductor"]["fxgraph_cache_hit"]) if utils else 0


def _remove_dead(parent: Path) -> None:
    for left in parent.glob("cold-*"):
        pid = left.name.split("-")[1]
        if pid.isdigit() and dead(int(pid)):
            shutil.rmtree(left, ignore_errors=True)

