"""The `Strategy` base class: fixed hooks that default to doing nothing.

A training loop that calls these hooks in order (see the README) picks up any
technique without knowing which one it is. Each hook has one job:

    loader_kwargs  DataLoader construction (workers, pinning, batch size)
    prepare_model  wrap or convert the model once (scripting, compilation)
    to_device      move a batch to the device
    autocast       context manager around the forward pass and loss
    backward       compute gradients from the loss         (owned by one strategy)
    step           optional clipping + optimizer step       (owned by one strategy)
    zero_grad      reset gradients after the step           (owned by one strategy)

The last three are *owned*: at most one strategy in a stack may implement each,
which is how AMP (backward + step) and SetToNone (zero_grad) compose without
knowing about each other.
"""
from __future__ import annotations

import contextlib
from typing import Any, ClassVar, ContextManager

import torch

Batch = Any  # a tensor, or a tuple/list/dict of tensors, as a DataLoader yields


class Strategy:
    """A training speed-up technique, as a set of loop hooks.

    Class attributes every subclass sets:
        name: registry key and the prefix of its params (``"amp"``).
        changes_numerics: whether switching it on may change the losses computed
            (AMP, BatchSize, graph capture) or must leave them bitwise identical
            (workers, pinning, set-to-none).
        owns: the owned hooks it implements (``"backward"``, ``"step"``, ``"zero_grad"``).
        conflicts_with: names of strategies it cannot be composed with.
        order: position when a stack applies `prepare_model`; graph capture
            (TorchScript, Compile) must wrap last, so it has the highest order.
        one_off_cost: whether it pays a one-off cost at the first step
            (compilation) that faster later steps must earn back.
    """

    name: ClassVar[str] = "strategy"
    changes_numerics: ClassVar[bool] = False
    owns: ClassVar[frozenset[str]] = frozenset()
    conflicts_with: ClassVar[frozenset[str]] = frozenset()
    order: ClassVar[int] = 0
    one_off_cost: ClassVar[bool] = False

    def loader_kwargs(self, **kwargs: Any) -> dict[str, Any]:
        return kwargs

    def prepare_model(self, model: torch.nn.Module) -> torch.nn.Module:
        return model

    def to_device(self, batch: Batch, device: torch.device | str) -> Batch:
        return batch

    def autocast(self, device: torch.device | str) -> ContextManager[None]:
        return contextlib.nullcontext()

    def backward(self, loss: torch.Tensor) -> None:
        pass

    def step(self, optimizer: torch.optim.Optimizer, max_grad_norm: float | None = None) -> None:
        pass

    def zero_grad(self, optimizer: torch.optim.Optimizer) -> None:
        pass

    def check(self, device: torch.device | str) -> str | None:
        """None when the technique can do its job on `device`, else the reason why not."""
        return None

    def params(self) -> dict[str, Any]:
        """Flat, YAML- and MLflow-loggable settings (without the name prefix)."""
        return {}

    def metrics(self) -> dict[str, float]:
        """Run-time values worth logging (AMP's loss scale, say); read them between steps."""
        return {}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params().items())
        return f"{type(self).__name__}({args})"


def move(batch: Batch, device: torch.device | str, non_blocking: bool = False) -> Batch:
    """Move every tensor in a (possibly nested) batch to `device`."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=non_blocking)
    if isinstance(batch, (list, tuple)):
        return type(batch)(move(b, device, non_blocking) for b in batch)
    if isinstance(batch, dict):
        return {k: move(v, device, non_blocking) for k, v in batch.items()}
    return batch


def as_device(device: torch.device | str) -> torch.device:
    return device if isinstance(device, torch.device) else torch.device(device)
