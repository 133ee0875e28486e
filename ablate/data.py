"""Datasets a study can name, and where their files are found.

The data root is ``$ABLATE_DATA_DIR`` when set, else ``./data``. Missing files
are downloaded by torchvision; when that fails too (offline), the error says
which files were looked for, where, and how to point ABLATE_DATA_DIR at a copy.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from torch.utils.data import Dataset, Subset

from ablate.registry import lookup

DATA_ENV = "ABLATE_DATA_DIR"


class DataUnavailable(RuntimeError):
    """The dataset's files are neither on disk nor downloadable."""


def data_root() -> Path:
    return Path(os.environ.get(DATA_ENV) or "data")


@dataclass(frozen=True)
class Splits:
    train: Dataset
    test: Dataset
    throughput_only: str | None = None  # why test accuracy means nothing here (synthetic stand-in data)


def _why(error: Exception) -> str:
    return " ".join(str(error).split())[:200]  # torchvision's messages span lines


def _mnist(root: Path) -> Splits:
    from torchvision import datasets, transforms

    # The normalisation of the PyTorch MNIST example: the training set's mean and std.
    transform = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))])
    try:
        return Splits(*(datasets.MNIST(root, train=train, download=True, transform=transform) for train in (True, False)))
    except Exception as error:  # torchvision raises RuntimeError or URLError depending on where it fails
        reason = _why(error)
        folder = (root / "MNIST" / "raw").resolve()
        files = ", ".join(name.removesuffix(".gz") for name, _ in datasets.MNIST.resources)
        raise DataUnavailable(
            f"MNIST is not in {folder} (looked for {files}) and could not be downloaded ({reason}); "
            f"set {DATA_ENV} to a folder holding MNIST/raw/ in torchvision's layout"
        ) from error


def _cifar10(root: Path) -> Splits:
    """CIFAR-10; without its files and offline, torchvision's FakeData of the same shape, for throughput only."""
    from torchvision import datasets, transforms

    # The training set's per-channel mean and std.
    transform = transforms.Compose([
        transforms.ToTensor(), transforms.Normalize((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616))])
    try:
        return Splits(*(datasets.CIFAR10(root, train=train, download=True, transform=transform) for train in (True, False)))
    except Exception as error:  # offline, or a partial download
        folder = (root / datasets.CIFAR10.base_folder).resolve()
        note = (f"CIFAR-10 is not in {folder} and could not be downloaded ({_why(error)}); torchvision FakeData "
                f"(random 32x32 images, random labels) stood in: throughput only, accuracy not measured")

    def fake(size: int, offset: int) -> Dataset:
        return datasets.FakeData(size, image_size=(3, 32, 32), num_classes=10, transform=transform, random_offset=offset)

    # The real splits' sizes, so an epoch is as long; disjoint seeds for train and test.
    return Splits(fake(50_000, 0), fake(10_000, 50_000), throughput_only=note)


DATASETS: dict[str, Callable[[Path], Splits]] = {
    "mnist": _mnist,
    "cifar10": _cifar10,
}


def load(name: str, train_subset: int | None = None, test_subset: int | None = None) -> Splits:
    """The train and test splits of dataset `name`, optionally cut to their first N samples."""
    splits = lookup(DATASETS, name, "dataset")(data_root())
    cut = lambda ds, n: Subset(ds, range(min(n, len(ds)))) if n else ds  # noqa: E731
    return Splits(cut(splits.train, train_subset), cut(splits.test, test_subset), splits.throughput_only)
