"""ActivationCheckpointing: recompute each repeated block's activations in the backward instead of storing them."""
from __future__ import annotations

import types
from typing import Any

import torch
from torch.utils.checkpoint import checkpoint
from typing_extensions import override

from strategies.base import Strategy
from strategies.blocks import repeated_blocks


def _checkpointed_forward(self: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
    # One function for every block (bound per block), so a compiled block's code is shared by all of them.
    return checkpoint(type(self).forward, self, *args, use_reentrant=False, **kwargs)


class ActivationCheckpointing(Strategy):
    """Wraps the forward of every `every`-th repeated block in ``torch.utils.checkpoint.checkpoint``.

    A checkpointed block keeps only its input for the backward and runs its
    forward a second time there to rebuild the activations it needs, so the
    activation memory of the blocks drops from one per layer to about one
    block's, at the price of roughly one extra forward of those blocks per
    step (about a third more compute). Non-reentrant checkpointing
    (``use_reentrant=False``), the variant PyTorch recommends: it works with
    ``torch.compile`` and with inputs that do not require gradients.

    Helps when activation memory is what limits the batch size or the model
    size: the memory it frees buys a bigger batch (with `BatchSize`) or a
    bigger model. On its own it only costs time, so judge it by the peak
    memory it saves as well as the speed it costs - the report must show both.
    ``every=2`` checkpoints every second block (the first, the third, ...):
    about half the saving for half the cost.

    Blocks are found by the convention in `strategies.blocks` (members of an
    ``nn.ModuleList`` of same-class modules, or of an ``nn.Sequential`` of two or
    more same-class blocks from outside ``torch.nn``); a model without any is refused.
    Applied before graph capture (its order is below Compile's), so compiling
    keeps the recomputation inside the compiled region. The block objects stay
    in place (their ``forward`` is replaced on the instance), so regional
    compilation still finds them. Recomputing draws fresh random numbers for
    dropout unless the RNG state is restored, which ``checkpoint`` does by
    default, so losses equal the plain loop's up to float rounding.
    """

    name = "activation_checkpointing"
    targets = frozenset({"memory"})  # frees activation memory by recomputing blocks: more compute, not less
    changes_numerics = True  # bitwise equal in eager on a CPU (observed), but a recomputation may be fused
    # or scheduled differently from the first forward under graph capture or nondeterministic GPU kernels
    may_be_bitwise_equal = True
    conflicts_with = frozenset({"torchscript"})  # torch.jit.script cannot compile torch.utils.checkpoint
    order = 50  # before graph capture (Compile, order 100): the recomputation is compiled with the block

    def __init__(self, every: int = 1) -> None:
        if not isinstance(every, int) or isinstance(every, bool) or every < 1:
            raise ValueError(f"ActivationCheckpointing: every must be a whole number >= 1, got {every!r}")
        self.every = every

    @override
    def prepare_model(self, model: torch.nn.Module) -> torch.nn.Module:
        for block in repeated_blocks(model, "ActivationCheckpointing")[::self.every]:
            if "forward" in vars(block):
                raise ValueError(f"ActivationCheckpointing: {type(block).__name__}.forward is already replaced "
                                 "on the instance (checkpointed twice?)")
            block.forward = types.MethodType(_checkpointed_forward, block)
        return model

    @override
    def params(self) -> dict[str, Any]:
        return {"every": self.every}
