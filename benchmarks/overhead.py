"""Framework overhead: ablate's training loop against the same steps written by hand.

Method: the two loops train identical copies of mnist_cnn on the same
pre-made batches (in memory, so the DataLoader is not part of the comparison).
"ablate" is `ablate.trial.loop.train` - the Stack hooks plus the StepClock that
measures every trial - and "hand" is the step a tutorial writes, with the
same techniques hard-coded. Each block is 40 steps timed with
`torch.utils.benchmark.Timer` (which synchronises CUDA); blocks alternate
ablate/hand, with the first of each pair swapped every pair to cancel drift,
after one untimed warm-up block each. Reported: the median of the per-pair
ratios ablate/hand and their range.
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
    ablate_step_ms: float  # medians
    hand_step_ms: float

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
    out = []
    batches = _batches(steps, device)
    for variant in VARIANTS:
        model = MODELS["mnist_cnn"]().to(device)
        blocks = {"ablate": _ablate_block(variant, copy.deepcopy(model), device, batches),
                  "hand": _hand_block(variant, copy.deepcopy(model), device, batches)}
        for block in blocks.values():
            block()  # warm-up: allocator, autograd and oneDNN/cuDNN caches
        times: dict[str, list[float]] = {"ablate": [], "hand": []}
        for pair in range(pairs):
            for name in (("ablate", "hand") if pair % 2 == 0 else ("hand", "ablate")):
                times[name].append(Timer("block()", globals={"block": blocks[name]}).timeit(1).mean)
        ratios = [a / h for a, h in zip(times["ablate"], times["hand"])]
        out.append(Overhead(variant.name, ratios, 1000 * statistics.median(times["ablate"]) / steps,
                            1000 * statistics.median(times["hand"]) / steps))
    return out
