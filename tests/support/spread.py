"""Independent simulated studies spread over this machine's cores: `spread(study, seeds)`.

For the simulations whose replicate count the bound they establish needs (thousands of whole studies through
ablate.stats, minutes in one process): each study is a function of its seed alone, so the same studies come back in
the order of their seeds, and every count a test asserts is the one a single process finds; on CI's 2 cores in
about half the time.

Spawned, not forked: the suite's process holds torch's thread pools, which a fork copies in an unknown state. A
spawned child imports the study's module by its name (pytest puts the tests' folders on `sys.path`, which the child
inherits), so `study` is a function at the top of a module, and what it returns pickles.
"""
from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from typing import Callable, Sequence, TypeVar

T = TypeVar("T")


def spread(study: Callable[[int], T], seeds: Sequence[int]) -> list[T]:
    """[study(seed) for seed in seeds], run over the cores this process may use (in this process where it has one)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if cores < 2 or len(seeds) < 2:
        return [study(seed) for seed in seeds]
    # Chunks of a few dozen studies: few enough round trips, and the cores finish within a chunk of each other.
    with ProcessPoolExecutor(cores, mp_context=get_context("spawn")) as pool:
        return list(pool.map(study, seeds, chunksize=max(1, len(seeds) // (8 * cores))))
