"""CudnnBenchmark: let cuDNN time its convolution algorithms and keep the fastest."""
from __future__ import annotations

import torch
from typing_extensions import override

from strategies.base import Strategy, cuda_reason


class CudnnBenchmark(Strategy):
    """``torch.backends.cudnn.benchmark = True`` (process-wide, set in `prepare_model`).

    For each new convolution shape cuDNN runs every applicable algorithm once
    and caches the fastest, instead of picking one by heuristics. Helps
    convolutional networks with fixed input shapes on CUDA (often 5-20% for
    ResNets). Does nothing without convolutions or on a CPU, and hurts when
    shapes keep changing (variable image sizes, a ragged last batch): every
    new shape pays the autotuning again. The first step pays it, and the
    chosen algorithms may round differently from the default ones.
    """

    name = "cudnn_benchmark"
    targets = frozenset({"compute"})  # the fastest convolution algorithm, measured, for each shape
    changes_numerics = True  # other algorithms, other rounding
    one_off_cost = True  # autotuning at the first step of each shape

    @override
    def prepare_model(self, model: torch.nn.Module) -> torch.nn.Module:
        torch.backends.cudnn.benchmark = True
        return model

    @override
    def check(self, device: torch.device | str) -> str | None:
        if reason := cuda_reason(device, "cuDNN autotuning"):
            return reason
        if not torch.backends.cudnn.is_available():
            return "this PyTorch build has no cuDNN"
        return None
