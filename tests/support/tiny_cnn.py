"""A tiny CNN and a small synthetic data set, both deterministic: the models and data most unit tests use."""
from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import TensorDataset

N_SAMPLES = 256
N_CLASSES = 10


class TinyCNN(nn.Module):
    """conv 1->4 3x3, relu, flatten, linear -> 10, on 1x8x8 inputs."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3)
        self.fc = nn.Linear(4 * 6 * 6, N_CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(torch.relu(self.conv(x)), 1))


def make_model(seed: int = 0) -> TinyCNN:
    """A TinyCNN whose weights depend only on `seed` (the global RNG is left untouched)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return TinyCNN()


def make_dataset(n: int = N_SAMPLES, seed: int = 1234) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    inputs = torch.randn(n, 1, 8, 8, generator=g)
    targets = torch.randint(0, N_CLASSES, (n,), generator=g)
    return TensorDataset(inputs, targets)
