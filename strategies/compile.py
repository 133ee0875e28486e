"""Compile: ``torch.compile`` the model."""
from __future__ import annotations

import importlib.util
import shutil
from typing import Any

import torch

from strategies.base import Strategy, as_device, capability_reason, cuda_reason

MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def inductor_reason(device: torch.device | str) -> str | None:
    """Why Inductor cannot generate kernels for `device`; None when it can."""
    device = as_device(device)
    if device.type == "cpu" and not (shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")):
        return "inductor on CPU needs a C++ compiler (g++ or clang++) on PATH, and none was found"
    if device.type == "cuda":
        if reason := cuda_reason(device, "inductor for GPUs"):
            return reason
        if importlib.util.find_spec("triton") is None:
            return "inductor on CUDA needs Triton, which is not installed"
        return capability_reason(device, (7, 0), "Triton (inductor's GPU backend)")
    return None


class Compile(Strategy):
    """Replaces the model with ``torch.compile(model, mode=..., ...)``.

    TorchDynamo captures the forward (and AOTAutograd the backward) into
    graphs, and Inductor generates fused kernels for them (Triton on GPU, C++
    and OpenMP on CPU). Helps most where the step is bound by memory traffic
    between many small pointwise ops or by Python and launch overhead.
    Costs a one-off compilation at the first step (seconds to minutes) and
    again after every recompilation (new shapes, train/eval switch), so it
    pays off only over enough steps; the first step's time is the
    compilation and must be timed apart from the steady state (call one step,
    time it, then time the rest). Compilation is lazy: `prepare_model` returns
    at once and the first forward compiles.
    """

    name = "compile"
    changes_numerics = True
    conflicts_with = frozenset({"torchscript"})
    one_off_cost = True  # compilation happens at the first forward and backward
    order = 100

    def __init__(
        self, mode: str = "default", fullgraph: bool = False, backend: str = "inductor", dynamic: bool | None = None
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"Compile: mode must be one of {', '.join(MODES)}, got {mode!r}")
        self.mode, self.fullgraph, self.backend, self.dynamic = mode, bool(fullgraph), backend, dynamic

    def prepare_model(self, model: torch.nn.Module) -> torch.nn.Module:
        if torch._dynamo.config.suppress_errors:
            # With it set, a failed compilation silently runs eager, and eager speed would be reported as compiled.
            raise RuntimeError("Compile: torch._dynamo.config.suppress_errors is True, so a compilation failure "
                               "would fall back to eager unnoticed; set it to False")
        # torch.compile rejects `mode` for backends other than inductor.
        options: dict[str, Any] = {"mode": self.mode} if self.backend == "inductor" else {}
        return torch.compile(model, fullgraph=self.fullgraph, backend=self.backend, dynamic=self.dynamic, **options)

    def check(self, device: torch.device | str) -> str | None:
        return inductor_reason(device) if self.backend == "inductor" else None

    def params(self) -> dict[str, Any]:
        return {"mode": self.mode, "fullgraph": self.fullgraph, "backend": self.backend, "dynamic": self.dynamic}
