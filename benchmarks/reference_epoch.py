"""One reference epoch: the yardstick a study's cost is given in, so figures from different machines compare.

    python -m benchmarks.reference_epoch     # prints the epoch's wall time in seconds

PyTorch's classic MNIST example as most users first run it: the same network
(two convolutions, max-pool, dropout, two linear layers), fp32, batch 64,
Adam at 1e-3, ToTensor + Normalize applied per sample in the main process (no
DataLoader workers), one epoch of the 60,000 training images, on the CPU.
Written here rather than imported from ablate, so the yardstick does not move
when ablate's model or data code does. The clock covers the epoch only: the
imports and reading the files are outside it.
"""
from __future__ import annotations

import os
import time

import torch
import torch.nn.functional as F
from torch import nn


class ExampleNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(1, 32, 3, 1), nn.Conv2d(32, 64, 3, 1)
        self.drop1, self.drop2 = nn.Dropout(0.25), nn.Dropout(0.5)
        self.fc1, self.fc2 = nn.Linear(9216, 128), nn.Linear(128, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.conv2(F.relu(self.conv1(x)))), 2)
        x = self.drop2(F.relu(self.fc1(torch.flatten(self.drop1(x), 1))))
        return F.log_softmax(self.fc2(x), dim=1)


def epoch_seconds(data_root: str) -> float:
    from torchvision import datasets, transforms

    torch.manual_seed(1)
    transform = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))])
    train = datasets.MNIST(data_root, train=True, download=False, transform=transform)
    loader = torch.utils.data.DataLoader(train, batch_size=64, shuffle=True)
    model = ExampleNet()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    model.train()
    began = time.perf_counter()
    for images, labels in loader:
        optimizer.zero_grad()
        F.nll_loss(model(images), labels).backward()
        optimizer.step()
    return time.perf_counter() - began


if __name__ == "__main__":
    print(f"{epoch_seconds(os.environ.get('ABLATE_DATA_DIR') or 'data'):.2f}")
