"""The `Strategy` base class: fixed hooks that default to doing nothing.

A training loop that calls these hooks in order (docs/strategies.md) picks up any
technique without knowing which one it is. Each hook has one job:

    loader_kwargs      DataLoader construction (workers, pinning, batch size)
    make_loader        build the batch iterable from the dataset     (owned by one strategy)
    prepare_model      wrap or convert the model once (scripting, compilation, layout, dtype)
    prepare_optimizer  rebuild the optimizer once (fused kernels, fp32 master weights)
    to_device          move a batch to the device
    autocast           context manager around the forward pass and loss
    backward           compute gradients from the loss               (owned by one strategy)
    step               optional clipping + optimizer step             (owned by one strategy)
    zero_grad          reset gradients after the step                 (owned by one strategy)

Owned hooks: at most one strategy in a stack may implement each, which is how
AMP (backward + step), SetToNone (zero_grad) and DeviceResidentData
(make_loader) compose without knowing about each other. Overriding one makes a
strategy its owner even if `owns` does not say so (see `strategies.stack`).

What a strategy sets out to improve is declared, not inferred from its hooks (a
hook says where it acts, not what for: BatchSize edits the loader's arguments to
cut per-step launch and optimizer costs): `targets`, from `TARGETS` - a phase of
the step (`PHASES`) or the step's memory.
"""
from __future__ import annotations

import contextlib
from collections.abc import Sized
from typing import Any, Callable, ClassVar, ContextManager, Iterable, Literal, cast, get_args

import torch
from torch.utils.data import DataLoader, Dataset, RandomSampler
from typing_extensions import override

Batch = Any  # a tensor, or a tuple/list/dict of tensors, as a DataLoader yields

# The phases of a training step whose time a strategy can cut: loading and preparing batches on the host (data), the
# host-to-device copy (copy), the forward and backward kernels (compute), the optimizer's update and the gradients'
# reset (optimizer), and the host's cost of issuing work - Python, dispatch, kernel launches (launch overhead).
Phase = Literal["data", "copy", "compute", "optimizer", "launch"]
# What a strategy targets: a phase, or memory for one that spends time to free it (activation checkpointing).
Target = Literal[Phase, "memory"]
PHASES: tuple[Phase, ...] = get_args(Phase)
TARGETS: tuple[Target, ...] = get_args(Target)  # the order `ablate list` and docs/strategies.md name them in


class Strategy:
    """A training speed-up technique, as a set of loop hooks.

    Class attributes every subclass sets:
        name: registry key and the prefix of its params (``"amp"``).
        changes_numerics: whether switching it on may change the losses computed
            (AMP, BatchSize, graph capture) or must leave them bitwise identical
            (workers, pinning, set-to-none).
        may_be_bitwise_equal: whether a strategy that may change the numbers may still,
            on a given machine and model, compute bitwise what the stack without it
            computes (a graph capture that fuses nothing, a memory layout), so a caller
            may compare the two bit for bit there before training its accuracy apart.
        owns: the owned hooks it implements (``"backward"``, ``"step"``, ``"zero_grad"``,
            ``"make_loader"``).
        conflicts_with: names of strategies it cannot be composed with.
        order: position when a stack applies `prepare_model` and `prepare_optimizer`:
            conversions (Float8 10, ActivationCheckpointing 50) before graph capture
            (TorchScript, Compile: 100), which must wrap last; the compiled optimizer step
            (150) and BatchSize's lr scaling and warm-up (200) after every optimizer rebuild.
        targets: what it sets out to improve (`TARGETS`): one or more phases of the step, or memory; each
            class says why beside it.
        one_off_cost: whether it pays a one-off cost at the first step
            (compilation) that faster later steps must earn back; `caches_compiled_code`
            says whether a later process can start from what it compiled.
    """

    name: ClassVar[str] = "strategy"
    changes_numerics: ClassVar[bool] = False
    may_be_bitwise_equal: ClassVar[bool] = False
    owns: ClassVar[frozenset[str]] = frozenset()
    conflicts_with: ClassVar[frozenset[str]] = frozenset()
    order: ClassVar[int] = 0
    targets: ClassVar[frozenset[Target]] = frozenset()  # every registered strategy declares its own
    one_off_cost: ClassVar[bool] = False

    def loader_kwargs(self, **kwargs: Any) -> dict[str, Any]:
        return kwargs

    def make_loader(self, dataset: Dataset, device: torch.device | str, **kwargs: Any) -> Iterable[Batch]:
        """The batches of `dataset`; `kwargs` are DataLoader arguments (after `loader_kwargs`).

        Epoch after epoch in the same order whether workers persist or not (see `same_order_every_epoch`).
        """
        return DataLoader(dataset, **same_order_every_epoch(dataset, kwargs))

    def prepare_model(self, model: torch.nn.Module) -> torch.nn.Module:
        return model

    def prepare_optimizer(self, optimizer: torch.optim.Optimizer) -> torch.optim.Optimizer:
        """Call after `prepare_model` and before the first step; use the optimizer it returns."""
        return optimizer

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

    def check_with(self, others: tuple[Strategy, ...], device: torch.device | str) -> str | None:
        """Like `check`, for what the technique needs from the rest of its stack (`others`); None when it has it."""
        return None

    def params(self) -> dict[str, Any]:
        """Flat, YAML- and MLflow-loggable settings (without the name prefix)."""
        return {}

    def caches_compiled_code(self) -> bool:
        """Whether its one-off cost is Inductor compilation, whose results Inductor's on-disk caches (FX graph,
        AOTAutograd and Triton's, under ``TORCHINDUCTOR_CACHE_DIR``) keep for a later process to start from.
        A one-off cost nothing keeps across processes (cuDNN's autotuning, TorchScript's profiling runs, moving
        the data to the device) is paid again by every process: False."""
        return False

    def metrics(self) -> dict[str, float]:
        """Run-time values worth logging (AMP's loss scale, say); read them between steps."""
        return {}

    @override
    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params().items())
        return f"{type(self).__name__}({args})"


class _PersistentRandomSampler(RandomSampler):
    """RandomSampler that makes, from its second epoch on, the one draw persistent workers skip.

    A DataLoader draws its workers' base seed from its generator each time it
    builds an iterator: every epoch without persistent workers, only the first
    with them. With a seeded shuffle the permutation is drawn from the same
    generator just after, so persistent workers would shuffle epoch 2 onwards
    differently from the plain loop. Drawing the missing int64 here keeps the
    generator, and so the batch order, exactly the plain loop's.
    """

    _epochs = 0

    @override
    def __iter__(self) -> Any:
        if self._epochs:
            torch.empty((), dtype=torch.int64).random_(generator=self.generator)
        self._epochs += 1
        yield from super().__iter__()


def same_order_every_epoch(dataset: Dataset, kwargs: dict[str, Any]) -> dict[str, Any]:
    """DataLoader `kwargs` whose shuffle order does not depend on whether its workers persist."""
    if kwargs.get("persistent_workers") and kwargs.get("num_workers") and kwargs.get("shuffle") \
            and kwargs.get("generator") is not None:
        kwargs = dict(kwargs, shuffle=False)  # the sampler shuffles; DataLoader rejects a sampler with shuffle
        # A shuffled dataset has a length (DataLoader's own RandomSampler takes it as Sized too).
        kwargs["sampler"] = _PersistentRandomSampler(cast(Sized, dataset), generator=kwargs["generator"])
    return kwargs


def map_tensors(batch: Batch, fn: Callable[[torch.Tensor], torch.Tensor]) -> Batch:
    """`fn` applied to every tensor in a (possibly nested) batch; anything else is kept."""
    if isinstance(batch, torch.Tensor):
        return fn(batch)
    if isinstance(batch, (list, tuple)):
        return type(batch)(map_tensors(b, fn) for b in batch)
    if isinstance(batch, dict):
        return {k: map_tensors(v, fn) for k, v in batch.items()}
    return batch


def move(batch: Batch, device: torch.device | str, non_blocking: bool = False) -> Batch:
    """Move every tensor in a (possibly nested) batch to `device`."""
    return map_tensors(batch, lambda t: t.to(device, non_blocking=non_blocking))


def as_device(device: torch.device | str) -> torch.device:
    return device if isinstance(device, torch.device) else torch.device(device)


def cuda_reason(device: torch.device | str, what: str) -> str | None:
    """Why `what`, a CUDA-only feature, cannot run on `device`; None when it can."""
    device = as_device(device)
    if device.type != "cuda":
        return f"{what} is CUDA-only; the device here is {device.type}"
    if not torch.cuda.is_available():
        return f"{what} is CUDA-only, and no CUDA device is available"
    return None


def capability_reason(device: torch.device | str, minimum: tuple[int, int], what: str) -> str | None:
    """Why `what` cannot run on CUDA `device` of too low a compute capability; None when it can."""
    have = torch.cuda.get_device_capability(device)
    if have < minimum:
        name = torch.cuda.get_device_name(device)
        return f"{what} needs compute capability >= {minimum[0]}.{minimum[1]}; {name} has {have[0]}.{have[1]}"
    return None


def rebuild_optimizer(
    optimizer: torch.optim.Optimizer,
    swap: Callable[[torch.Tensor], torch.Tensor] = lambda p: p,
    **settings: Any,
) -> torch.optim.Optimizer:
    """A new optimizer of the same type and settings, `settings` changed and each parameter `p` replaced by `swap(p)`.

    Rebuilding (rather than editing ``param_groups``) lets the constructor
    validate the new settings. Only before the first step: state is not carried.
    """
    if any(optimizer.state.values()):
        raise ValueError(f"{type(optimizer).__name__} has already stepped; prepare it before the first step")
    groups = [{**group, **settings, "params": [swap(p) for p in group["params"]]} for group in optimizer.param_groups]
    return type(optimizer)(groups, **{**optimizer.defaults, **settings})
