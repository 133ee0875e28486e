"""NumWorkers: load and collate batches in worker processes."""
from __future__ import annotations

import os
from typing import Any

import torch
from typing_extensions import override

from strategies.base import Strategy


class NumWorkers(Strategy):
    """Sets the DataLoader's ``num_workers`` (and keeps the workers alive across epochs).

    Helps when per-sample work (decoding, augmentation, ``ToTensor``/``Normalize``)
    stalls the training step: workers prepare the next batches in parallel.
    Does not help when the data is already in memory as tensors or the step is
    so long that loading hides behind it; each worker costs a process, start-up
    time and memory, and more workers than cores only adds contention.
    ``persistent=True`` avoids re-spawning workers every epoch.

    Numerics are unchanged, epoch after epoch, in a DataLoader built from
    `loader_kwargs` alone or through a stack's `make_loader`: the same
    batches as without workers. Under a seeded shuffle (``shuffle=True,
    generator=g``) the workers do not persist: a DataLoader draws its
    workers' base seed from ``g`` each time it starts them, so persistent
    workers would skip that draw from epoch 2 on and shuffle differently from
    the plain loop. That costs a re-spawn per epoch, not a step: the first
    epoch, all a short benchmark measures, is the same either way.
    """

    name = "num_workers"
    targets = frozenset({"data"})  # worker processes load and transform the next batches while the step runs

    def __init__(self, n: int, persistent: bool = True, prefetch_factor: int | None = None) -> None:
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise ValueError(f"NumWorkers: n must be a whole number >= 0, got {n!r}")
        if prefetch_factor is not None and (not isinstance(prefetch_factor, int) or prefetch_factor < 1):
            raise ValueError(
                f"NumWorkers: prefetch_factor must be a whole number >= 1 or None, got {prefetch_factor!r}")
        self.n, self.persistent, self.prefetch_factor = n, bool(persistent), prefetch_factor

    @override
    def loader_kwargs(self, **kwargs: Any) -> dict[str, Any]:
        kwargs["num_workers"] = self.n
        seeded_shuffle = bool(kwargs.get("shuffle")) and kwargs.get("generator") is not None
        # DataLoader rejects both options when there are no workers.
        kwargs["persistent_workers"] = self.persistent and self.n > 0 and not seeded_shuffle
        if self.prefetch_factor is not None and self.n > 0:
            kwargs["prefetch_factor"] = self.prefetch_factor
        return kwargs

    @override
    def check(self, device: torch.device | str) -> str | None:
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        if self.n > cpus:
            return f"{self.n} workers on {cpus} CPUs only adds contention"
        return None

    @override
    def params(self) -> dict[str, Any]:
        return {"n": self.n, "persistent": self.persistent, "prefetch_factor": self.prefetch_factor}
