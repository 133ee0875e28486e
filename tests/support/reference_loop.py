"""The reference the Stack must reproduce: a hand-written loop and the same loop driven by Stack hooks.

`reference_losses` hard-codes the seven techniques with plain torch calls, the
way a tutorial would write them. `stack_losses` runs the same loop using only
the public `Stack` hooks. With the same model, data, seed and settings the two
must give identical losses (==, not approximately) on the CPU.
"""
from __future__ import annotations

import copy

import torch
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset

from strategies import Stack

LR = 1e-3
AMP_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def _loader(dataset: Dataset, seed: int, **kwargs) -> DataLoader:
    return DataLoader(dataset, shuffle=True, generator=torch.Generator().manual_seed(seed), **kwargs)


def reference_losses(
    model: torch.nn.Module,
    dataset: Dataset,
    steps: int,
    *,
    workers: int = 0,
    pin: bool = False,
    batch_size: int = 16,
    set_to_none: bool = False,
    amp: str | None = None,
    graph: str | None = None,
    max_grad_norm: float | None = None,
    seed: int = 0,
    compile_backend: str = "inductor",
    device: str = "cpu",
) -> list[float]:
    """Train a copy of `model` for `steps` steps with the techniques written out by hand.

    workers/pin/batch_size: DataLoader(num_workers, persistent_workers, pin_memory, batch_size)
    set_to_none: optimizer.zero_grad(set_to_none=...) after every step (False zero-fills)
    amp: None, "fp16" (autocast + GradScaler, unscale_ before clipping) or "bf16" (autocast only)
    graph: None, "torchscript" (torch.jit.script) or "compile" (torch.compile with `compile_backend`)
    max_grad_norm: clip_grad_norm_ before the optimizer step (None: no clipping)
    """
    torch.manual_seed(seed)
    model = copy.deepcopy(model).to(device)
    if graph == "torchscript":
        model = torch.jit.script(model)
    elif graph == "compile":
        model = torch.compile(model, backend=compile_backend)
    elif graph is not None:
        raise ValueError(f"unknown graph {graph!r}")
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    scaler = torch.amp.GradScaler(torch.device(device).type) if amp == "fp16" else None
    loader = _loader(
        dataset, seed, batch_size=batch_size, num_workers=workers, persistent_workers=workers > 0, pin_memory=pin
    )
    losses: list[float] = []
    while len(losses) < steps:
        for inputs, targets in loader:
            inputs = inputs.to(device, non_blocking=pin)
            targets = targets.to(device, non_blocking=pin)
            if amp is None:
                loss = F.cross_entropy(model(inputs), targets)
            else:
                with torch.autocast(torch.device(device).type, dtype=AMP_DTYPES[amp]):
                    loss = F.cross_entropy(model(inputs), targets)
            if scaler is not None:
                scaler.scale(loss).backward()
                if max_grad_norm is not None:
                    scaler.unscale_(optimizer)
                    torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
                scaler.step(optimizer)
                scaler.update()
            else:
                loss.backward()
                if max_grad_norm is not None:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
                optimizer.step()
            optimizer.zero_grad(set_to_none=set_to_none)
            losses.append(loss.item())
            if len(losses) == steps:
                break
    return losses


def stack_losses(
    stack: Stack,
    model: torch.nn.Module,
    dataset: Dataset,
    steps: int,
    batch_size: int = 16,
    max_grad_norm: float | None = None,
    seed: int = 0,
    device: str = "cpu",
) -> list[float]:
    """The same loop as `reference_losses`, using only the public Stack hooks."""
    torch.manual_seed(seed)
    loader = stack.make_loader(
        dataset, device, batch_size=batch_size, shuffle=True, generator=torch.Generator().manual_seed(seed)
    )
    model = stack.prepare_model(copy.deepcopy(model).to(device))
    optimizer = stack.prepare_optimizer(torch.optim.Adam(model.parameters(), lr=LR))
    losses: list[float] = []
    while len(losses) < steps:
        for inputs, targets in loader:
            inputs, targets = stack.to_device((inputs, targets), device)
            with stack.autocast(device):
                loss = F.cross_entropy(model(inputs), targets)
            stack.backward(loss)
            stack.step(optimizer, max_grad_norm=max_grad_norm)
            losses.append(loss.item())
            if len(losses) == steps:
                break
    return losses
