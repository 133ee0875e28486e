"""A deliberately slow training set: every sample waits a stated number of milliseconds before it is returned.

What for: a study whose loader, not its model, bounds the step, on any machine, so that the step-phase diagnosis
(`ablate.trial.phases`, `ablate.stats.diagnosis`) can be shown and tested on a case whose answer is known
(benchmarks/studies/slow_data.yaml). A study asks for it with ``dataset_options: {sample_delay_ms: N}``; off
(0) by default.

Why `time.sleep`: it stands for a sample's I/O - a file read from a network disk or an object store, a fetch from
a remote decoding service - time in which the loading process waits and uses no core. That is the case
DataLoader workers are for: their waits overlap each other's and the training step's, even on a machine whose
cores the step already uses, so `num_workers` can remove the phase. A busy loop would stand for CPU-bound decoding
instead, which on a 2-core machine competes with the step for the same cores: it would show contention, not the
technique.

Where: the training split only (`ablate.workload.data.load` wraps it); evaluation reads the test split at full
speed, since no measurement times it. The wait is paid in `__getitem__`, around whatever the dataset returns, so
the decoded-data cache (`ablate.workload.datacache`, which holds decoded tensors, not samples) cannot save it.
The wrapper holds only the dataset and a float, so it pickles into worker processes started by spawn as well as
by fork.
"""
from __future__ import annotations

import time
from typing import Any

from torch.utils.data import Dataset

SAMPLE_DELAY = "sample_delay_ms"  # the dataset option every dataset takes (ablate.config.datasets validates it)


class SlowSamples(Dataset):
    """`dataset`, each sample returned `delay_ms` milliseconds late."""

    def __init__(self, dataset: Dataset, delay_ms: float) -> None:
        self.dataset, self.delay_ms = dataset, float(delay_ms)

    def __len__(self) -> int:
        return len(self.dataset)  # type: ignore[arg-type]  # a map-style dataset has one; Dataset does not declare it

    def __getitem__(self, index: int) -> Any:
        time.sleep(self.delay_ms / 1000)
        return self.dataset[index]
