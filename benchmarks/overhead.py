"""Framework overhead: ablate's training loop against the same steps written by hand.

Method: the two loops train identical copies of mnist_cnn on the same
pre-made batches (in memory, so the DataLoader is not part of the comparison).
"ablate" is `ablate.trial.loop.train` - the Stack hooks plus the StepClock that
measures every trial - and "hand" is the step a tutorial writes, with the
same techniques hard-coded. Each loop is timed over blocks of N and N/2 steps
with `torch.utils.benchmark.Timer` (which synchronises CUDA); blocks alternate
ablate/hand, with the first of each pair swapped every pair to cancel drift,
after one untimed warm-up block each. A step's cost is the difference of the
two blocks over N/2 steps, so what a block pays once - the StepClock's set-up,
its synchronisations at the first steps and at the window's edges, which a
trial pays outside its timed windows - cancels; that once-a-block cost is shown
apart. Reported: the median of the per-pair ratios of the step costs,
ablate/hand, and their range.
"""
from __future__ import annotations

import copy
import statistics
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F
from torch.utils.benchmark import Timer

from ablate.config.study import Budget
from ablate.trial.loop import train
from ablate.trial.measure import StepClock
from ablate.workload.models import MODELS
from ablate.workload.tasks import Classification
from strategies import AMP, SetToNone, Strategy, compose

BATCH = 64


@dataclass(frozen=True)
class Variant:
    name: str
    strategies: Callable[[], list[Strategy]]
    autocast: torch.dtype | None  # the hand loop's hard-coded equivalents
    set_to_none: bool
    max_grad_norm: float | None


VARIANTS = (
    Variant("baseline (fp32, zero-filled gradients)", lambda: [], None, False, None),
    Variant("set_to_none + amp(bf16) + clipping at 1.0", lambda: [SetToNone(), AMP("bf16")], torch.bfloat16, True, 1.0),
)


@dataclass(frozen=True)
class Overhead:
    variant: str
    ratios: list[float]  # ablate / hand, one per pair
    ablate_step_ms: float  # medians of a step's cost (the blocks' difference over their difference in steps)
    hand_step_ms: float
    once_ms: float = 0.0  # what an ablate block pays once beyond the hand block's once-a-block cost, median

    @property
    def median(self) -> float:
        return statistics.median(self.ratios)


def _batches(steps: int, device: torch.device) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(BATCH, 1, 28, 28, generator=g).to(device),
             torch.randint(0, 10, (BATCH,), generator=g).to(device))
            for _ in range(steps)]


def _ablate_block(variant: Variant, model: torch.nn.Module, device: torch.device, batches: list) -> Callable[[], None]:
    stack = compose(*variant.strategies())
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    samples = BATCH * len(batches)
    # No window floor and no profiling window: a block is its 40 steps, as the hand loop's is (on CUDA the floor
    # would add steps to hold the window open for half a second; the profiling window adds its own after them).
    budget = Budget(train_samples=samples, warmup_samples=BATCH, window_samples=BATCH, windows=1, min_window_seconds=0,
                    profile_steps=0)
    return lambda: train(stack, Classification(), model, optimizer, batches, device, StepClock(budget, device, True),
                         variant.max_grad_norm)


def _hand_block(variant: Variant, model: torch.nn.Module, device: torch.device, batches: list) -> Callable[[], None]:
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    def block() -> None:
        model.train()
        for inputs, targets in batches:
            inputs, targets = inputs.to(device), targets.to(device)
            with torch.autocast(device.type, dtype=variant.autocast, enabled=variant.autocast is not None):
                loss = F.cross_entropy(model(inputs), targets)
            loss.backward()
            if variant.max_grad_norm is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), variant.max_grad_norm)
            optimizer.step()
            optimizer.zero_grad(set_to_none=variant.set_to_none)
    return block


def measure(device: torch.device, pairs: int = 7, steps: int = 40) -> list[Overhead]:
    """Every variant's overhead, from `pairs` pairs of blocks of `steps` and `steps // 2` steps per loop."""
    short = steps // 2
    if short < 1:
        raise ValueError(f"overhead: blocks of {steps} steps cannot be halved; use --steps 2 or more")
    out = []
    batches = _batches(steps, device)
    for variant in VARIANTS:
        model = MODELS["mnist_cnn"]().to(device)
        models = {"ablate": copy.deepcopy(model), "hand": copy.deepcopy(model)}
        build = {"ablate": _ablate_block, "hand": _hand_block}
        blocks = {(name, n): build[name](variant, models[name], device, batches[:n])
                  for name in models for n in (steps, short)}
        for name in models:
            blocks[(name, steps)]()  # warm-up: allocator, autograd and oneDNN/cuDNN caches
        times: dict[tuple[str, int], list[float]] = {key: [] for key in blocks}
        for pair in range(pairs):
            for name in (("ablate", "hand") if pair % 2 == 0 else ("hand", "ablate")):
                for n in (steps, short):
                    times[(name, n)].append(Timer("block()", globals={"block": blocks[(name, n)]}).timeit(1).mean)
        step = {name: [(long - half) / (steps - short)
                       for long, half in zip(times[(name, steps)], times[(name, short)])] for name in models}
        once = {name: [half - short * s for half, s in zip(times[(name, short)], step[name])] for name in models}
        out.append(Overhead(variant.name, [a / h for a, h in zip(step["ablate"], step["hand"])],
                            1000 * statistics.median(step["ablate"]), 1000 * statistics.median(step["hand"]),
                            1000 * statistics.median(a - h for a, h in zip(once["ablate"], once["hand"]))))
    return out
