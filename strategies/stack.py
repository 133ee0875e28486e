"""Composing strategies into one `Stack` that drives a training loop.

Order, for every hook (members sorted by their `order`, ties kept in the order given):
    loader_kwargs      each member edits the keyword arguments in turn
    make_loader        `loader_kwargs` applied, then the member that owns it, else a DataLoader
    prepare_model      each member wraps the model in turn, graph capture last
    prepare_optimizer  each member rebuilds the optimizer in turn
    to_device          each member in turn, then anything not yet on the device is moved
    autocast           members' contexts entered in turn (and left in reverse)
    backward           the member that owns it, else ``loss.backward()``
    step               the member that owns it, else optional clipping + ``optimizer.step()``;
                       then `zero_grad`
    zero_grad          the member that owns it, else ``optimizer.zero_grad(set_to_none=False)``
                       (PyTorch defaults to set_to_none=True; the plain loop of the
                       literature zero-fills, and SetToNone is measured against it)
"""
from __future__ import annotations

import contextlib
from itertools import combinations
from typing import Any, Iterable, Iterator

import torch
from torch.utils.data import Dataset
from typing_extensions import override

from strategies.base import Batch, Strategy, Target, move

OWNED_HOOKS = ("make_loader", "backward", "step", "zero_grad")


def owned_hooks(strategy: Strategy) -> frozenset[str]:
    """The owned hooks `strategy` declares in `owns`, and any it overrides without declaring.

    A subclass that overrides ``step`` but forgets ``owns = {"step"}`` would
    otherwise never be called (the stack calls only an owner), and silently;
    inferring ownership from the override makes it run, and conflicts with
    another owner are then reported as for a declared one.
    """
    overridden = {h for h in OWNED_HOOKS if getattr(type(strategy), h) is not getattr(Strategy, h)}
    return frozenset(strategy.owns) | overridden


class ConflictError(ValueError):
    """Two strategies cannot be composed: same kind, same owned hook, or declared incompatible."""


def clip_gradients(optimizer: torch.optim.Optimizer, max_grad_norm: float | None) -> None:
    """Clip the total gradient norm of the optimizer's parameters (no-op for None)."""
    if max_grad_norm is not None:
        params = [p for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
        torch.nn.utils.clip_grad_norm_(params, max_grad_norm)


def clip_and_step(optimizer: torch.optim.Optimizer, max_grad_norm: float | None) -> None:
    """The plain optimizer step: optional gradient-norm clipping, then `optimizer.step()`."""
    clip_gradients(optimizer, max_grad_norm)
    optimizer.step()


class Stack(Strategy):
    """Several strategies applied as one; see the module docstring for the order."""

    name = "stack"

    def __init__(self, *members: Strategy) -> None:
        flat: list[Strategy] = []
        for member in members:
            if not isinstance(member, Strategy):
                raise TypeError(f"compose() takes Strategy objects, not {type(member).__name__}")
            flat.extend(member.members if isinstance(member, Stack) else [member])
        _raise_on_conflicts(flat)
        self.members: tuple[Strategy, ...] = tuple(sorted(flat, key=lambda s: s.order))
        self._owner = {hook: next((m for m in self.members if hook in owned_hooks(m)), None) for hook in OWNED_HOOKS}

    @property
    @override
    def changes_numerics(self) -> bool:  # type: ignore[override]
        return any(m.changes_numerics for m in self.members)

    @property
    @override
    def one_off_cost(self) -> bool:  # type: ignore[override]
        """True when any member pays a one-off cost (a preset holding a compiling strategy, say)."""
        return any(m.one_off_cost for m in self.members)

    @property
    @override
    def targets(self) -> frozenset[Target]:  # type: ignore[override]
        """What its members target, together (a preset's, say)."""
        return frozenset().union(*(m.targets for m in self.members))

    @override
    def caches_compiled_code(self) -> bool:
        return any(m.caches_compiled_code() for m in self.members)

    def get(self, name: str) -> Strategy | None:
        """The member registered under `name`, if any."""
        return next((m for m in self.members if m.name == name), None)

    def __iter__(self) -> Iterator[Strategy]:
        return iter(self.members)

    def __len__(self) -> int:
        return len(self.members)

    @override
    def loader_kwargs(self, **kwargs: Any) -> dict[str, Any]:
        for member in self.members:
            kwargs = member.loader_kwargs(**kwargs)
        return kwargs

    @override
    def make_loader(self, dataset: Dataset, device: torch.device | str, **kwargs: Any) -> Iterable[Batch]:
        kwargs = self.loader_kwargs(**kwargs)
        owner = self._owner["make_loader"]
        return owner.make_loader(dataset, device, **kwargs) if owner else super().make_loader(dataset, device, **kwargs)

    @override
    def prepare_model(self, model: torch.nn.Module) -> torch.nn.Module:
        for member in self.members:
            model = member.prepare_model(model)
        return model

    @override
    def prepare_optimizer(self, optimizer: torch.optim.Optimizer) -> torch.optim.Optimizer:
        for member in self.members:
            optimizer = member.prepare_optimizer(optimizer)
        return optimizer

    @override
    def to_device(self, batch: Batch, device: torch.device | str) -> Batch:
        for member in self.members:
            batch = member.to_device(batch, device)
        return move(batch, device)  # no-op for tensors a member already moved

    @override
    @contextlib.contextmanager
    def autocast(self, device: torch.device | str) -> Iterator[None]:
        # Enter the members' contexts on `with`, not when this is called.
        with contextlib.ExitStack() as stack:
            for member in self.members:
                stack.enter_context(member.autocast(device))
            yield

    @override
    def backward(self, loss: torch.Tensor) -> None:
        owner = self._owner["backward"]
        owner.backward(loss) if owner else loss.backward()

    @override
    def step(self, optimizer: torch.optim.Optimizer, max_grad_norm: float | None = None) -> None:
        owner = self._owner["step"]
        owner.step(optimizer, max_grad_norm) if owner else clip_and_step(optimizer, max_grad_norm)
        self.zero_grad(optimizer)

    @override
    def zero_grad(self, optimizer: torch.optim.Optimizer) -> None:
        owner = self._owner["zero_grad"]
        owner.zero_grad(optimizer) if owner else optimizer.zero_grad(set_to_none=False)

    @override
    def check(self, device: torch.device | str) -> str | None:
        for member in self.members:
            others = tuple(m for m in self.members if m is not member)
            if reason := member.check(device) or member.check_with(others, device):
                return f"{type(member).__name__}: {reason}"
        return None

    @override
    def params(self) -> dict[str, Any]:
        return {f"{m.name}.{k}": v for m in self.members for k, v in m.params().items()}

    @override
    def metrics(self) -> dict[str, float]:
        return {f"{m.name}.{k}": v for m in self.members for k, v in m.metrics().items()}

    @override
    def __repr__(self) -> str:
        return f"compose({', '.join(repr(m) for m in self.members)})"


def compose(*strategies: Strategy) -> Stack:
    """One `Stack` from several strategies; raises `ConflictError` if two cannot go together."""
    return Stack(*strategies)


def _raise_on_conflicts(members: list[Strategy]) -> None:
    for a, b in combinations(members, 2):
        why = None
        if a.name == b.name:
            why = "are the same technique"
        elif shared := sorted(owned_hooks(a) & owned_hooks(b)):
            why = f"both own {' and '.join(shared)}"
        elif b.name in a.conflicts_with or a.name in b.conflicts_with:
            why = "are declared incompatible"
        if why:
            raise ConflictError(f"{a!r} and {b!r} cannot be composed: they {why}")
