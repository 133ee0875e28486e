"""ChannelsLast: model and inputs in the channels_last (NHWC) memory format."""
from __future__ import annotations

import torch
from typing_extensions import override

from strategies.base import Batch, Strategy, map_tensors, move


def _nhwc(t: torch.Tensor) -> torch.Tensor:
    # Only 4-d image batches have a channels_last layout; targets and the like pass through.
    return t.contiguous(memory_format=torch.channels_last) if t.dim() == 4 and t.is_floating_point() else t


class ChannelsLast(Strategy):
    """``model.to(memory_format=torch.channels_last)`` and every 4-d input batch converted to match.

    Tensor-core convolutions (cuDNN on Volta and newer, in fp16/bf16 above
    all) work natively in NHWC; given NCHW they transpose before and after
    every convolution. Storing weights and activations channels-last removes
    those transposes: NVIDIA and PyTorch report 10-30% for ResNets under AMP.
    Helps convolutional networks on tensor-core GPUs, most with AMP. Does
    little in fp32 without TF32, for tiny convolutions that are launch-bound
    (the MNIST CNN), for models without convolutions, and on CPUs it can go
    either way (oneDNN prefers blocked layouts). Kernels change, so rounding
    may too.
    """

    name = "channels_last"
    targets = frozenset({"compute"})  # convolution kernels without the layout transposes
    changes_numerics = True  # other convolution kernels, other rounding
    may_be_bitwise_equal = True  # where the backend's kernels for both layouts accumulate alike
    order = 10  # after PinMemory's non-blocking copy (order 0), so the layout change runs on the device

    @override
    def prepare_model(self, model: torch.nn.Module) -> torch.nn.Module:
        return model.to(memory_format=torch.channels_last)

    @override
    def to_device(self, batch: Batch, device: torch.device | str) -> Batch:
        # Move first: converting on the host would copy the batch twice.
        return map_tensors(move(batch, device), _nhwc)
