"""Finding a model's repeated blocks, which regional compilation and activation checkpointing act on.

The convention: a repeated block is a member of an ``nn.ModuleList`` whose
members all have the same class (a transformer's ``self.blocks =
nn.ModuleList([Block(...) for _ in range(n)])``). A model without one is
refused with an error that names the convention, rather than silently left
as it was (which would be timed as if the technique were on).
"""
from __future__ import annotations

from torch import nn

CONVENTION = ("an nn.ModuleList whose members all have the same class "
              "(e.g. self.blocks = nn.ModuleList([Block(...) for _ in range(n)]))")


class NoRepeatedBlocks(ValueError):
    """The model holds no nn.ModuleList of same-class modules."""


def repeated_blocks(model: nn.Module, what: str) -> list[nn.Module]:
    """Every member of every ModuleList in `model` whose members share one class, in module order.

    Lists nested inside a block already found are left out, so no block is wrapped twice.
    Raises `NoRepeatedBlocks`, naming `what` (the technique) and the convention, when there is none.
    """
    blocks: list[nn.Module] = []
    found: list[str] = []  # qualified names of the lists taken
    for name, module in model.named_modules():
        if any(name.startswith(f"{outer}.") for outer in found):
            continue
        if isinstance(module, nn.ModuleList) and len(module) and len({type(m) for m in module}) == 1:
            found.append(name)
            blocks.extend(module)
    if not blocks:
        raise NoRepeatedBlocks(f"{what} needs the model's repeated blocks in {CONVENTION}; "
                               f"{type(model).__name__} has none")
    return blocks
