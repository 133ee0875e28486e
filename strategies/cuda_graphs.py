"""CUDAGraphs: replay the model's forward and backward from CUDA graphs."""
from __future__ import annotations

from typing import Any, cast

import torch
from typing_extensions import override

from strategies.base import Strategy, cuda_reason
from strategies.compile import cudagraph_skips, gradients_outside_graph_pool, inductor_reason, refuse_cudagraph_fallback

KERNELS = ("inductor", "eager")


class CUDAGraphs(Strategy):
    """Captures the forward and backward into CUDA graphs with ``torch.compile`` and replays them.

    A CUDA graph records a sequence of kernel launches once and replays it
    with one launch, so the CPU no longer issues every kernel every step.
    Helps small, launch-bound models on fast GPUs (the MNIST CNN at small
    batches), where the GPU otherwise idles between tiny kernels. Does little
    when kernels are long (big batches, big models), needs static shapes
    (drop the ragged last batch), costs a capture at the first steps and
    graph-pool memory, and is CUDA-only.

    Why ``torch.compile`` and not explicit ``torch.cuda.graph`` capture: a
    hand-captured step must own the whole step - static input buffers,
    a capturable optimizer, no host syncs (GradScaler's overflow check and
    gradient clipping sync), warm-up on a side stream - which would make it
    incompatible with AMP, clipping and every other strategy's hooks.
    ``torch.compile``'s CUDA-graph trees capture the model's forward and
    backward only, copy inputs into static buffers, re-record on new shapes
    and fall back to eager where capture is impossible, so the strategy
    composes with the rest. The optimizer step stays outside the graph (use
    FusedOptimizer to shrink it). `prepare_model` gives every parameter a
    zero-filled gradient first, so gradients never live in the graph pool
    (see `strategies.compile.gradients_outside_graph_pool`): a loop that
    zero-fills gradients or accumulates them would otherwise fail at the
    second step.

    kernels="inductor" is ``mode="reduce-overhead"``: Inductor's fused Triton
    kernels, then graphs (needs Triton). kernels="eager" is the "cudagraphs"
    backend: the eager kernels, unchanged, in graphs - which isolates the
    launch-overhead saving from kernel fusion (Compile measures fusion).

    A silent fallback is refused: where ``torch.compile`` cannot capture
    (CPU tensors in the graph, an input mutation, an op graphs cannot hold)
    it logs "skipping cudagraphs due to ..." and runs without graphs, which
    would be timed as if graphed. `prepare_model` makes that an error
    (Inductor's ``cudagraph_or_error``), and `metrics` reports the number of
    skips (``cudagraph_skips``), so a caller on a PyTorch without that
    setting can still refuse the result.
    """

    name = "cuda_graphs"
    targets = frozenset({"compute", "launch"})  # the step's launches replayed as one; by default Inductor's kernels too
    changes_numerics = True  # traced and decomposed by AOTAutograd; Inductor kernels round differently
    conflicts_with = frozenset({"compile", "torchscript"})
    one_off_cost = True  # tracing, compilation and capture at the first steps
    order = 100  # graph capture wraps last

    def __init__(self, kernels: str = "inductor") -> None:
        if kernels not in KERNELS:
            raise ValueError(f"CUDAGraphs: kernels must be one of {', '.join(KERNELS)}, got {kernels!r}")
        self.kernels = kernels

    @override
    def prepare_model(self, model: torch.nn.Module) -> torch.nn.Module:
        refuse_cudagraph_fallback()
        gradients_outside_graph_pool(model)
        # An OptimizedModule (a Module) for a module; torch.compile's stubs only promise the callable's type.
        if self.kernels == "inductor":
            return cast(torch.nn.Module, torch.compile(model, mode="reduce-overhead"))
        return cast(torch.nn.Module, torch.compile(model, backend="cudagraphs"))

    @override
    def check(self, device: torch.device | str) -> str | None:
        if reason := cuda_reason(device, "CUDA graph capture"):
            return reason
        return inductor_reason(device) if self.kernels == "inductor" else None

    @override
    def params(self) -> dict[str, Any]:
        return {"kernels": self.kernels}

    @override
    def caches_compiled_code(self) -> bool:
        return self.kernels == "inductor"  # the "cudagraphs" backend compiles nothing a cache keeps

    @override
    def metrics(self) -> dict[str, float]:
        return {"cudagraph_skips": float(cudagraph_skips())}
