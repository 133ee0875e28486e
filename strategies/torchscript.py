"""TorchScript: ``torch.jit.script`` the model (deprecated upstream; kept for the literature)."""
from __future__ import annotations

import torch
from typing_extensions import override

from strategies.base import Strategy


class TorchScript(Strategy):
    """Replaces the model with ``torch.jit.script(model)``.

    Deprecated upstream: PyTorch recommends ``torch.compile`` and no longer
    develops TorchScript; it is here because tutorials and papers still
    measure it. Any deprecation warning PyTorch raises is left visible.
    Scripting removes Python overhead from the forward pass and lets the JIT
    fuse some pointwise ops, which can help small, launch-bound models. It
    rarely helps large compute-bound ones, fails on models that use dynamic
    Python, and cannot be combined with Compile.
    """

    name = "torchscript"
    targets = frozenset({"compute", "launch"})  # no Python in the forward (launch), some pointwise ops fused (compute)
    changes_numerics = True  # fused kernels may round differently
    may_be_bitwise_equal = True  # without a fuser (a CPU's default) it runs eager's kernels
    conflicts_with = frozenset({"compile"})
    one_off_cost = True  # scripting at prepare_model, then the JIT's profiling runs at the first steps
    order = 100  # wrap after every other model change

    @override
    def prepare_model(self, model: torch.nn.Module) -> torch.nn.Module:
        return torch.jit.script(model)
