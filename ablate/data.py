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

DATA_ENV = "ABLATE_DATA_DIR"


class DataUnavailable(RuntimeError):
    """The dataset's files are neither on disk nor downloadable."""


def data_root() -> Path:
    return Path(os.environ.get(DATA_ENV) or "data")


@dataclass(frozen=True)
class Splits:
    train: Dataset
    test: Dataset


def _mnist(root: Path) -> Splits:
    from torchvision import datasets, transforms

    # The normalisation of the PyTorch MNIST example: the training set's mean and std.
    transform = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))])
    try:
        return Splits(*(datasets.MNIST(root, train=train, download=True, transform=transform) for train in (True, False)))
    except Exception as error:  # torchvision raises RuntimeError or URLError depending on where it fails
        reason = " ".join(str(error).split())[:200]  # torchvision's message spans lines
        folder = (root / "MNIST" / "raw").resolve()
        files = ", ".join(name.removesuffix(".gz") for name, _ in datasets.MNIST.resources)
        raise DataUnavailable(
            f"MNIST is not in {folder} (looked for {files}) and could not be downloaded ({reason}); "
            f"set {DATA_ENV} to a folder holding MNIST/raw/ in torchvision's layout"
        ) from error


DATASETS: dict[str, Callable[[Path], Splits]] = {
    "mnist": _mnist,
}


def load(name: str, train_subset: int | None = None, test_subset: int | None = None) -> Splits:
    """The train and test splits of dataset `name`, optionally cut to their first N samples."""
    splits = DATASETS[name](data_root())
    cut = lambda ds, n: Subset(ds, range(min(n, len(ds)))) if n else ds  # noqa: E731
    return Splits(cut(splits.train, train_subset), cut(splits.test, test_subset))
