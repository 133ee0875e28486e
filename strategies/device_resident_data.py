"""DeviceResidentData: the whole dataset on the device, batched and shuffled there."""
from __future__ import annotations

from typing import Any, Iterator

import torch
from torch.utils.data import DataLoader, Dataset
from typing_extensions import override

from strategies.base import Batch, Strategy, as_device

ACCEPTED = ("batch_size", "shuffle", "drop_last", "generator")
COLLATE_BATCH = 1024  # samples per chunk when the dataset is read once


class DeviceBatches:
    """Batches of a dataset held in device memory; re-iterable, one shuffle per epoch.

    The dataset is read once, through a DataLoader (so transforms run once and
    collation is the default one), at the first `iter()` - which the first
    step pays, as it pays compilation. Each epoch draws from `generator`
    exactly as ``DataLoader(shuffle=True, generator=...)`` does (one int64 for
    the workers' base seed, a ``randperm``, and one more at the epoch's end),
    so the batches are the same samples in the same order as the
    DataLoader's; the contract test checks that against the installed torch.
    """

    def __init__(self, dataset: Dataset, device: torch.device, batch_size: int = 1, shuffle: bool = False,
                 drop_last: bool = False, generator: torch.Generator | None = None) -> None:
        self.dataset, self.device, self.batch_size = dataset, device, batch_size
        self.shuffle, self.drop_last, self.generator = shuffle, drop_last, generator
        self.tensors: tuple[torch.Tensor, ...] | None = None

    def _load(self) -> tuple[torch.Tensor, ...]:
        # Its own generator: reading the data must not consume the global RNG the shuffle may draw from.
        chunks = list(DataLoader(self.dataset, batch_size=COLLATE_BATCH, generator=torch.Generator()))
        columns = [torch.cat(column) for column in zip(*chunks)]
        if self.device.type == "cuda":
            needed, (free, _) = sum(c.nbytes for c in columns), torch.cuda.mem_get_info(self.device)
            if needed > free // 2:  # leave the other half for the model and its activations
                raise ValueError(f"DeviceResidentData: the dataset needs {needed / 2**20:.0f} MiB on "
                                 f"{self.device}, more than half of the {free / 2**20:.0f} MiB free")
        return tuple(c.to(self.device) for c in columns)

    def __len__(self) -> int:
        n = len(self.dataset)  # type: ignore[arg-type]
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def __iter__(self) -> Iterator[Batch]:
        if self.tensors is None:
            self.tensors = self._load()
        n = len(self.tensors[0])
        # The draws DataLoader makes, in its order: the iterator's base seed for workers, then
        # RandomSampler's permutation (from a generator seeded off the global RNG if none was given).
        torch.empty((), dtype=torch.int64).random_(generator=self.generator)
        order = torch.arange(n)
        if self.shuffle:
            generator = self.generator
            if generator is None:
                generator = torch.Generator().manual_seed(int(torch.empty((), dtype=torch.int64).random_().item()))
            order = torch.randperm(n, generator=generator)
        order = order.to(self.device)
        stop = n - n % self.batch_size if self.drop_last else n
        for start in range(0, stop, self.batch_size):
            index = order[start:start + self.batch_size]
            yield tuple(t[index] for t in self.tensors)
        if self.shuffle:  # RandomSampler draws its (empty) `num_samples % n` tail when an epoch runs out
            torch.randperm(n, generator=generator)


class DeviceResidentData(Strategy):
    """Replaces the DataLoader: the dataset is moved to the device once and batched there.

    A DataLoader indexes, transforms and collates every sample of every epoch
    on the host, then copies each batch to the device. For a dataset that fits
    in device memory (MNIST is 188 MB as fp32; CIFAR-10 600 MB) all of that
    can be done once: each step is then one gather on the device. This is the
    largest single win for MNIST-sized data on a GPU (airbench and
    hlb-CIFAR10 train this way), and it also saves the per-sample transforms
    on a CPU. Does not help, or cannot work, when the data does not fit, when
    augmentation must differ per epoch (transforms run once), or for
    streaming datasets. Batches are the DataLoader's, same samples, same
    order, so numerics are unchanged. Workers and pinned memory have nothing
    left to do, so composing it with NumWorkers or PinMemory is an error.
    """

    name = "device_resident_data"
    targets = frozenset({"data", "copy"})  # no loading or copy per batch: one gather on the device
    owns = frozenset({"make_loader"})
    conflicts_with = frozenset({"num_workers", "pin_memory"})
    one_off_cost = True  # the dataset is read and moved at the first step

    @override
    def make_loader(self, dataset: Dataset, device: torch.device | str, **kwargs: Any) -> DeviceBatches:
        # DataLoader defaults (None, False, 0) ask for nothing; any other setting would be silently lost.
        unsupported = sorted(k for k, v in kwargs.items() if k not in ACCEPTED and v not in (None, False, 0))
        if unsupported:
            raise ValueError(f"DeviceResidentData: cannot honour DataLoader option(s) {', '.join(unsupported)}; "
                             f"it takes {', '.join(ACCEPTED)}")
        return DeviceBatches(dataset, as_device(device), **{k: v for k, v in kwargs.items() if k in ACCEPTED})
