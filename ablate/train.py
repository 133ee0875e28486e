"""The training loop and the evaluation, driven only through the public `strategies` API."""
from __future__ import annotations

from typing import Iterable

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

from ablate.measure import StepClock
from strategies import Stack


def train(
    stack: Stack,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    loader: Iterable,  # a DataLoader, or any iterable of batches (DeviceResidentData's)
    device: torch.device,
    clock: StepClock,
    max_grad_norm: float | None = None,
) -> None:
    """Train until `clock` says the budget is spent. `model` is the prepared (wrapped) model."""
    model.train()
    for inputs, targets in clock.batches(loader):
        inputs, targets = stack.to_device((inputs, targets), device)
        with stack.autocast(device):
            loss = F.cross_entropy(model(inputs), targets)
        stack.backward(loss)
        stack.step(optimizer, max_grad_norm)
        clock.count(len(targets), loss)


def evaluate(model: torch.nn.Module, loader: DataLoader, device: torch.device) -> tuple[float, float]:
    """Test accuracy (percent) and mean loss, in fp32 without autocast.

    Pass the unwrapped model: a scripted or compiled wrapper shares its weights,
    and evaluating through it would trigger a recompilation for eval mode.
    """
    model.eval()
    correct, loss_sum, count = 0, 0.0, 0
    with torch.inference_mode():
        for inputs, targets in loader:
            inputs, targets = inputs.to(device), targets.to(device)
            logits = model(inputs)
            loss_sum += F.cross_entropy(logits, targets, reduction="sum").item()
            correct += (logits.argmax(1) == targets).sum().item()
            count += len(targets)
    model.train()
    return 100.0 * correct / count, loss_sum / count
