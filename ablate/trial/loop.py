"""The training loop and the evaluation, driven only through the public `strategies` API.

Named `loop`, not `train`: the package exports the function `train`, and importing a submodule binds it on its
package under its own name, so a trial/train.py replaced the exported function with the module once anything had
imported it (docs/api.md, changelog). `from ablate.trial import train, evaluate` is the path to use.
"""
from __future__ import annotations

from typing import Any, Iterable, Iterator, Protocol

import torch
from torch.utils.data import DataLoader

from ablate.trial.phases import BACKWARD, COPY, FORWARD, OPTIMIZER
from ablate.workload.tasks import Quality, Task, eval_budget
from strategies import Stack


class Clock(Protocol):
    """What the loop asks of its clock (`ablate.trial.measure.StepClock` in a trial; a step count in
    `ablate.run.bitwise`)."""

    profiling: bool  # in a profiling window (`ablate.trial.phases`): the loop marks where each phase begins

    def batches(self, loader: Iterable[Any]) -> Iterator[Any]: ...

    def count(self, n: int, loss: torch.Tensor | None = None) -> None: ...

    def mark(self, phase: int) -> None: ...


def train(
    stack: Stack,
    task: Task,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    loader: Iterable,  # a DataLoader, or any iterable of batches (DeviceResidentData's)
    device: torch.device,
    clock: Clock,
    max_grad_norm: float | None = None,
) -> None:
    """Train until `clock` says the budget is spent. `model` is the prepared (wrapped) model."""
    model.train()
    for batch in clock.batches(loader):
        profiling = clock.profiling  # False outside the profiling window: each mark below costs a branch, no more
        if profiling:
            clock.mark(COPY)
        batch = stack.to_device(batch, device)
        if profiling:
            clock.mark(FORWARD)
        with stack.autocast(device):
            loss = task.loss(model, batch)
        if profiling:
            clock.mark(BACKWARD)
        stack.backward(loss)
        if profiling:
            clock.mark(OPTIMIZER)
        stack.step(optimizer, max_grad_norm)
        clock.count(task.samples(batch), loss)


def evaluate(task: Task, model: torch.nn.Module, loader: DataLoader, device: torch.device,
             logits_budget: int | None = None) -> Quality:
    """The task's held-out quality, in fp32 without autocast, within memory: the loader's batches are cut
    into forwards whose logits fit `logits_budget` bytes (the device's by default:
    `ablate.workload.tasks.eval_budget`; `ablate.workload.tasks.eval_rows` says why), and
    the loss and accuracy are running sums, so evaluation's memory does not grow with the test set.

    Pass the unwrapped model: a scripted or compiled wrapper shares its weights,
    and evaluating through it would trigger a recompilation for eval mode.
    """
    budget = eval_budget(device) if logits_budget is None else logits_budget
    model.eval()
    try:
        with torch.inference_mode():
            return task.evaluate(model, loader, device, budget)
    finally:
        model.train()
