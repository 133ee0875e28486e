"""BatchSize: the number of samples per optimizer step, optionally with the learning rate scaled to it."""
from __future__ import annotations

import math
from typing import Any

import torch
from typing_extensions import override

from strategies.base import Strategy

LR_SCALINGS = ("none", "linear", "sqrt")


class BatchSize(Strategy):
    """Sets the DataLoader's ``batch_size``; optionally scales the learning rate to it and warms it up.

    Larger batches amortise per-step overhead (Python, kernel launches, the
    optimizer) over more samples and fill wide hardware, so samples/s rises
    until the device is saturated or memory runs out. It changes the
    optimisation itself: fewer steps per epoch and a different gradient noise,
    so accuracy after a fixed number of epochs can drop unless the learning
    rate is retuned. Judge it by time-to-accuracy, not by samples/s: a bigger
    batch that needs more samples to reach the target is no speed-up.

    ``lr_scaling`` retunes the learning rate the way practitioners do, relative
    to the baseline's batch size (the ``batch_size`` the loop asks for, before
    this strategy overrides it): "linear" multiplies it by n / baseline
    (Goyal et al., for SGD), "sqrt" by sqrt(n / baseline) (usual for Adam);
    "none" leaves it alone. ``warmup_steps`` ramps it up linearly over the
    first steps - step t (from 0) uses (t + 1) / warmup_steps of the scaled
    rate - which large scaled rates need to stay stable early on. The warm-up
    is torch's own ``LinearLR`` scheduler, advanced by a step post-hook of the
    optimizer, so it counts the steps the optimizer was called for. A step
    fp16 loss scaling skips therefore advances it with a fused optimizer
    (FusedOptimizer's ``impl="fused"``: GradScaler calls its step every time
    and the fused kernel leaves the weights alone, torch/amp/grad_scaler.py),
    and does not with any other, whose step GradScaler does not call; a
    tensor learning rate (CompiledOptimizer) is filled in place. Both act on
    the optimizer the loop steps, so BatchSize prepares it after every strategy
    that rebuilds it (its order).
    """

    name = "batch_size"
    targets = frozenset({"optimizer", "launch"})  # per-step costs (launches, Python, the update) over more samples
    changes_numerics = True
    order = 200  # prepare_optimizer after the strategies that rebuild the optimizer (fused, compiled, masters)

    def __init__(self, n: int, lr_scaling: str = "none", warmup_steps: int = 0) -> None:
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError(f"BatchSize: n must be a whole number >= 1, got {n!r}")
        if lr_scaling not in LR_SCALINGS:
            raise ValueError(f"BatchSize: lr_scaling must be one of {', '.join(LR_SCALINGS)}, got {lr_scaling!r}")
        if not isinstance(warmup_steps, int) or isinstance(warmup_steps, bool) or warmup_steps < 0:
            raise ValueError(f"BatchSize: warmup_steps must be a whole number >= 0, got {warmup_steps!r}")
        self.n, self.lr_scaling, self.warmup_steps = n, lr_scaling, warmup_steps
        self.baseline_batch_size: int | None = None
        self.scheduler: torch.optim.lr_scheduler.LRScheduler | None = None

    @override
    def loader_kwargs(self, **kwargs: Any) -> dict[str, Any]:
        self.baseline_batch_size = kwargs.get("batch_size", self.baseline_batch_size)
        kwargs["batch_size"] = self.n
        return kwargs

    @property
    def lr_factor(self) -> float:
        """What the learning rate is multiplied by (known once `loader_kwargs` has seen the baseline's batch size)."""
        if self.lr_scaling == "none":
            return 1.0
        if not self.baseline_batch_size:
            raise RuntimeError(f"BatchSize(lr_scaling={self.lr_scaling!r}) scales relative to the baseline's "
                               "batch size: build the loader (make_loader/loader_kwargs with batch_size) first")
        ratio = self.n / self.baseline_batch_size
        return ratio if self.lr_scaling == "linear" else math.sqrt(ratio)

    @override
    def prepare_optimizer(self, optimizer: torch.optim.Optimizer) -> torch.optim.Optimizer:
        factor = self.lr_factor
        if factor != 1.0:
            for group in optimizer.param_groups:
                if isinstance(group["lr"], torch.Tensor):
                    group["lr"].mul_(factor)  # in place: a compiled step reads this very tensor
                else:
                    group["lr"] = group["lr"] * factor
        if self.warmup_steps > 1:
            self.scheduler = torch.optim.lr_scheduler.LinearLR(
                optimizer, start_factor=1 / self.warmup_steps, total_iters=self.warmup_steps - 1)
            scheduler = self.scheduler
            # Not traced when the step itself is compiled (CompiledOptimizer): the scheduler's Python state
            # would be guarded on and recompile every step.
            optimizer.register_step_post_hook(torch.compiler.disable(lambda *_: scheduler.step()))
        return optimizer

    @override
    def params(self) -> dict[str, Any]:
        return {"n": self.n, "lr_scaling": self.lr_scaling, "warmup_steps": self.warmup_steps}
