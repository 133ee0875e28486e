"""Models a study can name, looked up by name in `MODELS`."""
from __future__ import annotations

from typing import Callable

import torch
from torch import nn
import torch.nn.functional as F


class MnistCNN(nn.Module):
    """The classic PyTorch MNIST example network (pytorch/examples, mnist/main.py)."""

    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = self.dropout1(F.max_pool2d(x, 2))
        x = F.relu(self.fc1(torch.flatten(x, 1)))
        return self.fc2(self.dropout2(x))  # logits; the study's loss is cross-entropy


def resnet18_cifar(num_classes: int = 10) -> nn.Module:
    """torchvision's ResNet-18 for 32x32x3 images: a 3x3 stride-1 stem and no max-pool.

    The ImageNet stem (7x7 stride 2, then a max-pool) would shrink a 32x32
    image to 8x8 before the first block; the usual CIFAR adaptation keeps
    the full resolution there, which is also where most of the compute is.
    """
    from torchvision.models import resnet18

    model = resnet18(num_classes=num_classes)
    model.conv1 = nn.Conv2d(3, 64, kernel_size=3, stride=1, padding=1, bias=False)
    model.maxpool = nn.Identity()
    return model


MODELS: dict[str, Callable[..., nn.Module]] = {
    "mnist_cnn": MnistCNN,
    "resnet18_cifar": resnet18_cifar,
}
