"""CompiledOptimizer: the optimizer's step compiled with ``torch.compile``."""
from __future__ import annotations

import types
from typing import Any

import torch
from typing_extensions import override

from strategies.base import Strategy, rebuild_optimizer
from strategies.compile import inductor_reason


class CompiledOptimizer(Strategy):
    """Rebuilds the optimizer with its learning rate held as a tensor, and compiles its ``step``.

    Inductor turns the update of all parameter tensors into a few generated,
    horizontally fused kernels (PyTorch's compiled-optimizer tutorial measures
    an Adam step 747 -> 392 us). The learning rate becomes a 0-d tensor
    (``lr=torch.tensor(lr)``), an input of the compiled graph rather than a
    constant baked into it, so a scheduler that changes it (BatchSize's
    warm-up, say) fills the tensor in place and nothing recompiles.

    Helps where the optimizer step is a visible share of the step: many
    parameter tensors, small batches, launch-bound GPUs. Does little for
    compute-bound steps, and costs a compilation at the first step (seconds;
    longer with many parameters). The step stays outside the model's graph,
    so it composes with Compile, AMP (GradScaler calls the compiled step when
    the gradients are finite) and HalfPrecision's master weights. The
    optimizer's step hooks run inside the compiled call; hooks that must not
    be traced should be wrapped in ``torch.compiler.disable`` (BatchSize's is).

    Cannot be composed with FusedOptimizer: both choose how the update is
    computed, and a ``fused=True`` step is one opaque kernel that compiling
    would only wrap. Optimizers that take a closure (LBFGS) are refused.
    """

    name = "compiled_optimizer"
    targets = frozenset({"optimizer"})  # the update as a few generated, fused kernels
    changes_numerics = True  # Inductor's generated update rounds differently from the eager one
    conflicts_with = frozenset({"fused_optimizer"})
    one_off_cost = True  # the step compiles at the first call
    # After the strategies that rebuild the optimizer (fp32 masters): a rebuild would drop the compiled step.
    order = 150

    @override
    def prepare_optimizer(self, optimizer: torch.optim.Optimizer) -> torch.optim.Optimizer:
        if any(isinstance(g["lr"], torch.Tensor) for g in optimizer.param_groups):
            raise ValueError("CompiledOptimizer: the optimizer's lr is already a tensor (prepared twice?)")
        device = next((p.device for g in optimizer.param_groups for p in g["params"]), torch.device("cpu"))
        rebuilt = rebuild_optimizer(optimizer)
        for group, old in zip(rebuilt.param_groups, optimizer.param_groups, strict=True):
            # On the parameters' device: a CPU lr for CUDA parameters would be a host input of every step.
            group["lr"] = torch.tensor(float(old["lr"]), device=device)
        eager_step = rebuilt.step

        def update() -> None:
            eager_step()

        update = torch.compile(update)  # the step's hooks and the closure check may break the graph: not fullgraph

        def step(self: torch.optim.Optimizer, closure: Any = None) -> None:
            if closure is not None:
                raise ValueError("CompiledOptimizer: optimizers that take a closure (LBFGS) are not supported")
            update()

        # A bound method, as the class's step is: LR schedulers wrap `optimizer.step.__func__`. Replacing it on
        # the instance is the point, which mypy's method-assign check exists to question.
        rebuilt.step = types.MethodType(step, rebuilt)  # type: ignore[method-assign]
        return rebuilt

    @override
    def check(self, device: torch.device | str) -> str | None:
        return inductor_reason(device)

    @override
    def caches_compiled_code(self) -> bool:
        return True  # torch.compile's default backend, Inductor
