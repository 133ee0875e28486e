"""One Inductor cache per compiled graph: combinations that compile the same graph share it, and Inductor says which
measurement compiled cold.

What shares a cache: the combinations of a search (the Optuna study) on one device and torch version whose options
differ only in what never reaches a compiled region (`graph_key`): the loader's workers and pinning, and zeroing the
gradients to None. `num_workers` changes which process collates a batch, `pin_memory` where its host copy lives and
how it is copied, `set_to_none` the gradients' reset after the step; the compiled model and optimizer see tensors of
the same shapes, strides, dtypes and devices either way, so Inductor compiles the same graphs. Everything else - the
model, batch size, AMP's dtype, the compile mode, channels_last, any strategy a user adds - is in the key, so a
wrong guess can only split a graph's siblings into two folders (a second cold compile), never put two graphs' code
in one.

Who decides warm or cold: Inductor, not the folder. Its FX graph cache and AOTAutograd's cache key every entry on the
graph, its inputs' shapes and strides, the configuration and the torch version, and count each lookup in the
trial's process (`lookups`: hits; misses and bypasses, which both compile here). A measurement is **warm** where it
looked up at least once and every lookup hit, and **cold** otherwise. So were the key too coarse after all (a
strategy that does change the graph), the sibling's lookups miss, it compiles and is counted cold - its one-off cost
its own - and the shared folder gains that graph's entries beside the first.

Why sharing cannot bias the answer:
- A measurement's speed-up comes from its timed windows, after the first steps and the warm-up: compilation is over
  by then, cold or warm, so a warm start changes the one-off cost and nothing the windows time.
- A cache hit returns the code compiled for the same graph, configuration and torch version, so the steady-state
  code a warm measurement runs is the code its cold sibling ran.
- **Order.** With a shared cache, the first sibling of a graph to run compiles cold and the rest start warm; which
  one is first is set by the randomized block order (each screening block shuffled by the seed, the combinations
  dealt to blocks at random), so being cold falls on a sibling by chance, not by what it is. And it changes nothing
  timed: compilation happens in the first steps (the first, timed alone, and the next few whose excess is the
  one-off cost's), before the warm-up's untimed samples, so a cold sibling's windows start from the same compiled
  code in the same steady state as a warm one's - as a combination's cold and warm measurements did when each kept
  a cache of its own. What a cold process may keep after compiling, Inductor's compile worker processes, waits
  idle through the windows, and any CPU other work takes during them is read by the load guard
  (`ablate.trial.foreign_load`) in cold and warm measurements alike.
- **The one-off cost** of a warm measurement is not its own: a fresh start compiles cold. The analysis borrows it
  from a cold measurement of the same graph (`ablate.store.records.combine`): the combination's own where it has one,
  else the first cold sibling with the same `graph_key`, and the combined record names it (`Record.one_off_from`),
  as the report's break-even table does. A sibling's first step also carries its own loader's start-up, so the
  borrowed cost is the sibling's, not exactly this combination's. Where no complete cold measurement of the graph
  is left (its compiling trial's study was killed after Inductor wrote its entries), the record keeps its own warm
  one-off cost, an understatement that its stored `compile_cache_warm` (1) says.
- Autotuning modes ("max-autotune...") get no cache: they choose kernels by timing candidates, which varies between
  runs, and reusing the first measurement's choices would give every later one the same draw, so their spread would
  understate what a second study would see.
- Only a cache that persists is used: strategies whose one-off cost is Inductor compilation
  (`Strategy.caches_compiled_code`: Compile with Inductor, CUDAGraphs with Inductor's kernels, CompiledOptimizer).
  cuDNN's autotuning, TorchScript's profiling runs and moving the data to the device leave nothing a later process
  could load: such a combination gets no folder, and each measurement pays its own one-off cost.

Mechanics: the folder is ``compile-cache/<key>`` in the study's results folder, keyed by search, graph key, device
and torch version, and Inductor and Triton write into it directly: each of their entries is written to a temporary
file and renamed into place (`torch._inductor.codecache.write_atomic`, Triton's cache manager alike), so concurrent
workers and a killed trial leave whole entries or none. A measurement that fails, or is stopped, while its parent
lives has the entries it added removed (`Entries`), and so has an attempt the load guard measures again
(`ablate.run.objective`): a later sibling, or the next attempt, then compiles cold again, rather than starting warm
with no complete cold measurement to borrow from. A combination with no cache (`reusable` False) compiles in a
fresh empty folder (`Use`), removed as its trial ends.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Sequence

from ablate.config.choices import BASELINE, JOIN, Option

FOLDER = "compile-cache"
# Strategies that act only outside every compiled region (the loader, the host copy, the gradients' reset): the
# module docstring argues each. Unlisted, a strategy is taken to change the graph.
GRAPH_NEUTRAL = frozenset({"num_workers", "pin_memory", "set_to_none"})


def reusable(options: Sequence[Option]) -> bool:
    """Whether later measurements may start from a warm cache: one of its strategies compiles with Inductor, and
    none autotunes."""
    if not any(s is not None and s.caches_compiled_code() for s in (o.build() for o in options)):
        return False
    return not any("autotune" in str(v) for o in options for _, v in o.kwargs)


def graph_key(options: Sequence[Option]) -> str:
    """The combination's label without its graph-neutral choices (`GRAPH_NEUTRAL`): combinations with the same key
    compile the same graphs ("compile" for "compile + set_to_none" and "compile + num_workers(n=2)")."""
    kept = [o.label for o in options if o.name and not all(k.name in GRAPH_NEUTRAL for k in o.kinds)]
    return JOIN.join(kept) or BASELINE


def folder(results_dir: Path, search: str, graph: str, device_name: str, torch_version: str) -> Path:
    """`graph`: `graph_key`'s. `search`: the Optuna study the measurement belongs to. Why it is in the key: a study's
    results folder holds each of its searches (the grid, `--search optuna`), and a search whose compiled combinations
    all started from another search's cache would have no cold measurement to borrow their one-off cost from."""
    key = hashlib.sha256(repr((search, graph, device_name, torch_version)).encode()).hexdigest()[:16]
    return results_dir / FOLDER / key


class Use:
    """In the trial process: points Inductor (its FX graph and AOTAutograd caches) and Triton at the graph's shared
    folder, or, for a combination with none (`reusable` False), at a fresh empty one removed by `done`: such a
    measurement compiles cold, never from the user's default cache. Inductor reads the variables when it compiles,
    so setting them after `import torch` is in time."""

    def __init__(self, shared: str | None) -> None:
        self.temporary = None if shared else tempfile.mkdtemp(prefix="ablate-inductor-")
        path = shared or self.temporary
        assert path is not None
        Path(path).mkdir(parents=True, exist_ok=True)
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = path
        os.environ["TRITON_CACHE_DIR"] = os.path.join(path, "triton")

    def done(self) -> None:
        if self.temporary:
            shutil.rmtree(self.temporary, ignore_errors=True)


def lookups() -> tuple[int, int]:
    """This process's (hits, misses) in Inductor's FX graph cache and AOTAutograd's cache; a bypass (a graph
    Inductor will not cache) counts as a miss: it was compiled here. (0, 0) where nothing was compiled."""
    utils = sys.modules.get("torch._dynamo.utils")
    if utils is None:
        return 0, 0
    inductor, aot = utils.counters["inductor"], utils.counters["aot_autograd"]
    hits = inductor["fxgraph_cache_hit"] + aot["autograd_cache_hit"]
    misses = (inductor["fxgraph_cache_miss"] + inductor["fxgraph_cache_bypass"] + aot["autograd_cache_miss"]
              + aot["autograd_cache_bypass"])
    return int(hits), int(misses)


def warm(hits: int, misses: int) -> bool:
    """Warm: it looked up at least one graph and compiled none (module docstring)."""
    return hits > 0 and misses == 0


class Entries:
    """The files in a cache folder as a measurement starts, in the study's process: `discard_added` removes what a
    failed or stopped measurement added. Removing an entry a concurrent sibling also wrote costs that graph a
    second cold compile, never a wrong label: the next lookup misses."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.before = _files(path)

    def discard_added(self) -> None:
        for added in _files(self.path) - self.before:
            added.unlink(missing_ok=True)


def _files(path: Path) -> set[Path]:
    return {p for p in path.rglob("*") if p.is_file()} if path.is_dir() else set()
