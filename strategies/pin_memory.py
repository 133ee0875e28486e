"""PinMemory: page-locked host batches and asynchronous host-to-device copies."""
from __future__ import annotations

from typing import Any

import torch
from typing_extensions import override

from strategies.base import Batch, Strategy, as_device, move


class PinMemory(Strategy):
    """DataLoader ``pin_memory=True`` plus ``non_blocking=True`` copies in `to_device`.

    Pinned (page-locked) memory lets the copy engine DMA a batch to the GPU
    while the host queues the next kernels, so the copy overlaps compute.
    Helps on CUDA when host-to-device copies are a visible share of the step
    (large inputs, small models). Does nothing on a CPU-only machine (there is
    no copy to overlap) and costs pinning time per batch; pinning too much
    memory can starve the host.
    """

    name = "pin_memory"
    targets = frozenset({"copy"})  # page-locked batches copy to the device asynchronously, overlapping compute

    @override
    def loader_kwargs(self, **kwargs: Any) -> dict[str, Any]:
        kwargs["pin_memory"] = True
        return kwargs

    @override
    def to_device(self, batch: Batch, device: torch.device | str) -> Batch:
        # non_blocking is only asynchronous for pinned sources; harmless otherwise.
        return move(batch, device, non_blocking=True)

    @override
    def check(self, device: torch.device | str) -> str | None:
        if as_device(device).type != "cuda":
            return f"pinned memory only speeds host-to-GPU copies; the device here is {as_device(device).type}"
        if not torch.cuda.is_available():
            return "pinned memory needs CUDA, and no CUDA device is available"
        return None
