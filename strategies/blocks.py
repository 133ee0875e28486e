"""Finding a model's repeated blocks, which regional compilation and activation checkpointing act on.

The convention: a repeated block is a member of an ``nn.ModuleList`` whose
members all have the same class (a transformer's ``self.blocks =
nn.ModuleList([Block(...) for _ in range(n)])``: Hugging Face's decoders'
``model.layers`` and GPT-2's ``transformer.h``), or of an ``nn.Sequential`` of
two or more members of one class defined outside ``torch.nn`` (timm's ViT keeps
its ``blocks`` in a Sequential, torchvision's ResNets their ``layerN``). The
``torch.nn`` exclusion keeps a Sequential of plain layers (``Linear, Linear``)
from counting as blocks: checkpointing or compiling single layers is not what
either technique is for. A model without one is refused with an error that
names the convention, rather than silently left as it was (which would be
timed as if the technique were on).
"""
from __future__ import annotations

from torch import nn

CONVENTION = ("an nn.ModuleList whose members all have the same class "
              "(e.g. self.blocks = nn.ModuleList([Block(...) for _ in range(n)])), or an nn.Sequential of two or "
              "more blocks of one class of your own (not torch.nn layers)")


class NoRepeatedBlocks(ValueError):
    """The model holds no nn.ModuleList of same-class modules, nor a Sequential of repeated blocks."""


def repeated_blocks(model: nn.Module, what: str) -> list[nn.Module]:
    """Every member of every list of repeated blocks in `model` (see the convention above), in module order.

    Lists nested inside a block already found are left out, so no block is wrapped twice.
    Raises `NoRepeatedBlocks`, naming `what` (the technique) and the convention, when there is none.
    """
    blocks: list[nn.Module] = []
    found: list[str] = []  # qualified names of the lists taken
    for name, module in model.named_modules():
        if any(name.startswith(f"{outer}.") for outer in found):
            continue
        if _repeats(module):
            found.append(name)
            blocks.extend(module)
    if not blocks:
        raise NoRepeatedBlocks(f"{what} needs the model's repeated blocks in {CONVENTION}; "
                               f"{type(model).__name__} has none")
    return blocks


def _repeats(module: nn.Module) -> bool:
    """Whether `module` is a list of repeated blocks: a ModuleList of one class, or a Sequential of 2+ blocks."""
    classes = {type(m) for m in module.children()}
    if isinstance(module, nn.ModuleList):
        return len(module) > 0 and len(classes) == 1
    if isinstance(module, nn.Sequential) and len(module) > 1 and len(classes) == 1:
        return not next(iter(classes)).__module__.startswith("torch.nn")
    return False
