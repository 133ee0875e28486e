"""Models and datasets that fail on purpose, named by study files as `faulty:<name>`.

Trials run in fresh processes, so a failure has to be built into what the
trial constructs; these are real failures (a real SIGKILL, a real NaN, a real
hang, a real scripting error), except the out-of-memory error, which a CPU
test can only raise.
"""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import numpy as np
import torch

from ablate.workload.data import Splits, load
from ablate.workload.models import MnistCNN


class Raises(MnistCNN):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise ValueError("injected failure in forward")


class Diverges(MnistCNN):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x) * float("nan")


class RunsOutOfMemory(MnistCNN):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 64.00 GiB (injected)")


class KillsItself(MnistCNN):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        os.kill(os.getpid(), signal.SIGKILL)
        raise AssertionError("unreachable")


class Hangs(MnistCNN):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(3600)
        raise AssertionError("unreachable")


class NotScriptable(MnistCNN):
    """Trains eagerly; `torch.jit.script` rejects the numpy call."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = float(np.float32(1.0))
        return super().forward(x) * scale


class _Workers(torch.utils.data.Dataset):
    """MNIST training images, except that inside a DataLoader worker `action` happens first."""

    def __init__(self, base: torch.utils.data.Dataset, action: str) -> None:
        self.base, self.action = base, action

    def __len__(self) -> int:
        return len(self.base)

    def __getitem__(self, index: int):
        if torch.utils.data.get_worker_info() is not None:
            if self.action == "die":
                os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(3600)  # "hang"
        return self.base[index]


def dying_workers(root: Path) -> Splits:
    splits = load("mnist")
    return Splits(_Workers(splits.train, "die"), splits.test)


def hanging_workers(root: Path) -> Splits:
    splits = load("mnist")
    return Splits(_Workers(splits.train, "hang"), splits.test)


class AllocatesATerabyte(MnistCNN):
    """A real out-of-memory error on any GPU there is today."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        torch.empty(2**40, dtype=torch.uint8, device=x.device)
        return super().forward(x)


def stand_in_data(root: Path) -> Splits:
    """Random MNIST-shaped images, as when a real dataset is missing: throughput only."""
    from torchvision import datasets, transforms

    def fake(size: int, offset: int) -> torch.utils.data.Dataset:
        return datasets.FakeData(size, image_size=(1, 28, 28), num_classes=10, transform=transforms.ToTensor(),
                                 random_offset=offset)

    return Splits(fake(512, 0), fake(256, 512), throughput_only="random stand-in images (test)")
