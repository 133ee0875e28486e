"""CPU stand-ins for CUDA that refuse what CUDA refuses, so a CUDA-only bug fails CI on a machine without a GPU.

Each fake does what PyTorch's own code does where that can be done honestly without a GPU, and says so:
- `FakeCUDA.set_device` validates its argument with PyTorch's own `torch.cuda._utils._get_device_index`
  (the function `torch.cuda.set_device` calls), so an index-less ``torch.device("cuda")`` raises the same
  ValueError; it then records the index instead of creating a CUDA context, which a CPU cannot.
- `GraphPool` plays a CUDA-graph tree's memory pool: the backward's gradient outputs are views of one buffer
  that the next forward (a replay) overwrites. It does not capture or replay kernels; it reproduces only the
  memory contract (outputs live until the next replay), which is what the zero-filled-gradient crash
  (pytorch#169545) comes from. Real cudagraph trees raise on access; this one fills NaN, which a comparison of
  weights catches as surely.
"""
from __future__ import annotations

import pytest
import torch


class FakeCUDA:
    """`count` CUDA devices, the current one `current`; `set_device` records what was asked for."""

    NAME = "NVIDIA H100 80GB HBM3"

    def __init__(self, count: int = 2, current: int = 0) -> None:
        self.count, self.current, self.set_to = count, current, []

    def set_device(self, device: object) -> None:
        index = torch.cuda._utils._get_device_index(device)  # PyTorch's own refusal of "cuda" without an index
        if index >= self.count:
            raise RuntimeError("CUDA error: invalid device ordinal")  # what cudaSetDevice reports
        if index >= 0:
            self.current = index
            self.set_to.append(index)

    def install(self, monkeypatch: pytest.MonkeyPatch) -> FakeCUDA:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: self.count)
        monkeypatch.setattr(torch.cuda, "current_device", lambda: self.current)
        monkeypatch.setattr(torch.cuda, "set_device", self.set_device)
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: self.NAME)
        return self


class GraphPool(torch.nn.Module):
    """`inner` run so that its parameters' gradients come back as views of a pool the next forward overwrites."""

    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner
        self.names = [name for name, _ in inner.named_parameters()]
        self.pool = torch.empty(sum(p.numel() for p in inner.parameters()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _Replay.apply(self, x, *self.inner.parameters())


class _Replay(torch.autograd.Function):
    @staticmethod
    def forward(ctx, owner: GraphPool, x: torch.Tensor, *params: torch.Tensor) -> torch.Tensor:
        owner.pool.fill_(float("nan"))  # a replay reuses the pool: whatever still points into it is overwritten
        ctx.owner = owner
        ctx.save_for_backward(x, *params)
        return torch.func.functional_call(owner.inner, dict(zip(owner.names, params)), (x,))

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):
        x, *params = ctx.saved_tensors
        owner = ctx.owner
        with torch.enable_grad():
            leaves = [p.detach().requires_grad_() for p in params]
            out = torch.func.functional_call(owner.inner, dict(zip(owner.names, leaves)), (x,))
            grads = torch.autograd.grad(out, leaves, grad_out)
        views, offset = [], 0
        for grad in grads:  # the graph's static outputs: views of the pool, handed to autograd as they are
            view = owner.pool[offset:offset + grad.numel()].view_as(grad)
            view.copy_(grad)
            views.append(view)
            offset += grad.numel()
        return (None, None, *views)
