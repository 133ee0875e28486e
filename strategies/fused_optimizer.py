"""FusedOptimizer: the optimizer's fused or multi-tensor (foreach) implementation."""
from __future__ import annotations

import inspect
from typing import Any

import torch
from typing_extensions import override

from strategies.base import Strategy, as_device, rebuild_optimizer

IMPLS = ("fused", "foreach")


class FusedOptimizer(Strategy):
    """Rebuilds the optimizer with ``fused=True`` or ``foreach=True``.

    The plain ("for-loop") implementation launches a handful of small kernels
    per parameter tensor per step. ``foreach`` batches each operation over all
    tensors (a few launches per step); ``fused`` does the whole update of many
    tensors in one kernel. Helps when the optimizer step is a visible share of
    the step time: many parameter tensors, small batches, launch-bound GPUs.
    Does little for compute-bound steps. On CUDA PyTorch already picks
    ``foreach`` by default, so only ``fused`` differs from the baseline there;
    on a CPU the default is the for-loop, ``fused`` has CPU kernels for
    Adam/AdamW/SGD/Adagrad and ``foreach`` falls back to a loop. Optimizers
    without the option (LBFGS, say) are rejected by `prepare_optimizer`.
    The update's arithmetic is regrouped, so rounding can differ.
    """

    name = "fused_optimizer"
    targets = frozenset({"optimizer"})  # the update in one kernel (or a few) instead of several per parameter tensor
    changes_numerics = True  # the same update, computed in another order

    def __init__(self, impl: str = "fused") -> None:
        if impl not in IMPLS:
            raise ValueError(f"FusedOptimizer: impl must be one of {', '.join(IMPLS)}, got {impl!r}")
        self.impl = impl

    @override
    def prepare_optimizer(self, optimizer: torch.optim.Optimizer) -> torch.optim.Optimizer:
        if self.impl not in inspect.signature(type(optimizer)).parameters:
            raise ValueError(f"FusedOptimizer: {type(optimizer).__name__} has no {self.impl} implementation")
        # Both set, so a default of foreach=True cannot clash with fused=True.
        return rebuild_optimizer(optimizer, fused=self.impl == "fused", foreach=self.impl == "foreach")

    @override
    def check(self, device: torch.device | str) -> str | None:
        # Fused and foreach kernels exist for CPU and CUDA; whether this optimizer has them, prepare_optimizer says.
        if as_device(device).type == "cuda" and not torch.cuda.is_available():
            return "no CUDA device is available"
        return None

    @override
    def params(self) -> dict[str, Any]:
        return {"impl": self.impl}
