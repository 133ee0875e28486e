"""Compile: ``torch.compile`` the model."""
from __future__ import annotations

import importlib.util
import shutil
from typing import Any, cast

import torch
from typing_extensions import override

from strategies.base import Strategy, as_device, capability_reason, cuda_reason
from strategies.blocks import repeated_blocks

MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
CUDA_GRAPH_MODES = ("reduce-overhead", "max-autotune")  # the modes whose compiled code replays CUDA graphs


def gradients_outside_graph_pool(model: torch.nn.Module) -> torch.nn.Module:
    """Give every trainable parameter of `model` a zero-filled ``.grad`` now, before any graph is captured.

    Why: with CUDA-graph trees, the compiled backward's outputs live in the graph's memory pool, which the
    next replay overwrites. A parameter whose ``.grad`` is None at the first backward adopts that output
    as its gradient; a loop that then zero-fills (``zero_grad(set_to_none=False)``, the baseline here) or
    accumulates keeps it across the next replay and fails at the second step ("accessing tensor output of
    CUDAGraphs that has been overwritten by a subsequent run", pytorch#169545). A ``.grad`` that already
    exists is accumulated into in place, so it stays in ordinary memory. Adding to zeros is exact, so the
    first step's numbers do not change; a loop that sets gradients to None still works (its optimizer has
    used each adopted gradient before the next replay).
    """
    for parameter in model.parameters():
        if parameter.requires_grad and parameter.grad is None:
            parameter.grad = torch.zeros_like(parameter)
    return model


def refuse_cudagraph_fallback() -> None:
    """Make Inductor raise where it would run a graph without CUDA graphs ("skipping cudagraphs due to ...") instead
    of falling back to it silently: ``torch._inductor.config.triton.cudagraph_or_error``, where the running PyTorch
    has it (`cudagraph_skips` counts the fallbacks where it does not). Process-wide, as a trial has its process to
    itself. Inductor raises for CUDA graphs only: on a CPU it counts the skips and goes on."""
    from torch._inductor import config

    if hasattr(config.triton, "cudagraph_or_error"):
        config.triton.cudagraph_or_error = True


def cudagraph_skips() -> int:
    """How many times this process's ``torch.compile`` fell back from CUDA graphs ("skipping cudagraphs due to")."""
    from torch._dynamo.utils import counters

    return counters["inductor"]["cudagraph_skips"]


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

    ``mode``: "default"; "reduce-overhead" (CUDA graphs on top); "max-autotune"
    (benchmarks Triton matmul and convolution templates, then CUDA graphs: the
    longest one-off cost); "max-autotune-no-cudagraphs" (the autotuning alone).

    In the CUDA-graph modes a silent fallback is refused as CUDAGraphs refuses
    it: where a graph cannot be captured Inductor would run it without graphs
    ("skipping cudagraphs due to ..."), to be timed as graphed. `prepare_model`
    sets Inductor's ``cudagraph_or_error`` (process-wide), and `metrics`
    reports the skips (``cudagraph_skips``) for a PyTorch without that setting.

    ``regional=True`` compiles each repeated block in place (``block.compile()``
    on every repeated block - an ``nn.ModuleList`` of same-class blocks or a Sequential of them, see
    `strategies.blocks`) instead of the whole model. Dynamo compiles the first
    block and reuses that code for the identical others, so the one-off cost
    is about one block's instead of the whole network's - the break-even
    report's ``one_off_s`` shows it. It gives up fusions across block
    boundaries and leaves the embedding and output head eager, so the steady
    state can be slower than whole-model compilation; worth it for deep models
    that are recompiled often or trained briefly. A model without repeated
    blocks is refused with an error naming the convention. The model object
    itself is returned (its blocks compiled), not an ``OptimizedModule``.
    """

    name = "compile"
    targets = frozenset({"compute", "launch"})  # fused kernels (compute), fewer launches and no Python per op (launch)
    changes_numerics = True
    conflicts_with = frozenset({"torchscript"})
    one_off_cost = True  # compilation happens at the first forward and backward
    order = 100

    def __init__(
        self, mode: str = "default", fullgraph: bool = False, backend: str = "inductor", dynamic: bool | None = None,
        regional: bool = False,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"Compile: mode must be one of {', '.join(MODES)}, got {mode!r}")
        if not isinstance(regional, bool):
            raise ValueError(f"Compile: regional must be true or false, got {regional!r}")
        self.mode, self.fullgraph, self.backend, self.dynamic = mode, bool(fullgraph), backend, dynamic
        self.regional = regional

    @override
    def prepare_model(self, model: torch.nn.Module) -> torch.nn.Module:
        if torch._dynamo.config.suppress_errors:
            # With it set, a failed compilation silently runs eager, and eager speed would be reported as compiled.
            raise RuntimeError("Compile: torch._dynamo.config.suppress_errors is True, so a compilation failure "
                               "would fall back to eager unnoticed; set it to False")
        # torch.compile rejects `mode` for backends other than inductor.
        options: dict[str, Any] = {"mode": self.mode} if self.backend == "inductor" else {}
        options.update(fullgraph=self.fullgraph, backend=self.backend, dynamic=self.dynamic)
        if self.graphs:
            refuse_cudagraph_fallback()
            gradients_outside_graph_pool(model)
        if not self.regional:
            # An OptimizedModule (a Module) for a module; torch.compile's stubs only promise the callable's type.
            return cast(torch.nn.Module, torch.compile(model, **options))
        for block in repeated_blocks(model, "Compile(regional=True)"):
            # In place, so the ModuleList and the parent's loop over it stay as they are; wrappers a strategy of
            # lower order put on a block (activation checkpointing) are inside the compiled region.
            block.compile(**options)
        return model

    @property
    def graphs(self) -> bool:
        """Whether its compiled code replays CUDA graphs (Inductor in reduce-overhead or max-autotune mode)."""
        return self.backend == "inductor" and self.mode in CUDA_GRAPH_MODES

    @override
    def check(self, device: torch.device | str) -> str | None:
        return inductor_reason(device) if self.backend == "inductor" else None

    @override
    def caches_compiled_code(self) -> bool:
        return self.backend == "inductor"  # other backends (eager, aot_eager, cudagraphs) leave nothing on disk

    @override
    def metrics(self) -> dict[str, float]:
        return {"cudagraph_skips": float(cudagraph_skips())} if self.graphs else {}

    @override
    def params(self) -> dict[str, Any]:
        return {"mode": self.mode, "fullgraph": self.fullgraph, "backend": self.backend, "dynamic": self.dynamic,
                "regional": self.regional}
