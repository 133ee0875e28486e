"""What a model is made of, as far as some techniques care: its attention layers, its 2-d convolutions, and the
Linear layers float8 can convert. A technique that acts on a part the model lacks does nothing there, so
`ablate diagnose` says it does not apply rather than that it can help (`ablate.stats.diagnosis.does_not_apply`).

- **Attention.** What the attention kernel choice (`attention_backend`) acts on is a call of
  `torch.nn.functional.scaled_dot_product_attention`, which no module type declares. The rule: a module is an
  attention layer where it is an `nn.MultiheadAttention` (it calls SDPA), where its class name contains
  "attention" (any case: Hugging Face's `LlamaAttention`, `GPT2Attention`, `BertSdpaSelfAttention`, timm's
  `Attention`, nanoGPT's `CausalSelfAttention`), or where its class's own `forward` names
  `scaled_dot_product_attention` in its source (ablate's `byte_gpt` blocks, a user's block that calls it
  directly). A model that calls SDPA from elsewhere (a helper function) is seen by naming the module that calls it
  `...Attention`. The class-name rule is broad on purpose: a miss would say "does not apply" of a model the kernel
  acts on, while a module named for attention that calls no SDPA (a convolutional network's channel attention)
  only leaves the prediction as it was before parts were known, a ceiling from the compute share.
- **Convolutions**: `nn.Conv2d` and `nn.ConvTranspose2d`, the 4-d layers a channels-last layout changes.
- **float8's Linear layers**: those `strategies.float8.float8_eligible` accepts (in and out features multiples of
  16), the filter the conversion itself uses.

The model is built on PyTorch's meta device: shapes without storage, so a model of billions of parameters costs no
memory or time to inspect. A model that cannot be built there (its constructor reads a tensor's values) has no
parts known (`None`), and nothing is claimed of them.
"""
from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from typing import Any, Callable

SDPA = "scaled_dot_product_attention"


@dataclass(frozen=True)
class Parts:
    """How many of each part a model holds (module docstring)."""

    attention: int  # modules that compute attention
    convolutions: int  # 2-d convolutions
    float8_linears: int  # Linear layers float8 converts


def _calls_sdpa(module: Any) -> bool:
    """Whether the module's class's own `forward` names SDPA in its source."""
    forward = type(module).__dict__.get("forward")
    return forward is not None and _names_sdpa(forward)


@functools.cache  # once per class's forward: a model repeats a block dozens of times
def _names_sdpa(forward: Callable[..., Any]) -> bool:
    try:
        return SDPA in inspect.getsource(forward)
    except (OSError, TypeError):  # no source (a compiled or generated class): the class name rule still holds
        return False


def parts(model: Any) -> Parts:
    """The parts of an `nn.Module` (module docstring)."""
    from torch import nn

    from strategies.float8 import float8_eligible

    modules = list(model.modules())
    attention = sum(isinstance(m, nn.MultiheadAttention) or "attention" in type(m).__name__.lower()
                    or _calls_sdpa(m) for m in modules)
    convolutions = sum(isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)) for m in modules)
    return Parts(attention, convolutions, sum(float8_eligible(m, "") for m in modules))


def parts_of(factory: Callable[..., Any], kwargs: dict[str, Any]) -> Parts | None:
    """The parts of `factory(**kwargs)` built on the meta device; None where it cannot be built there."""
    import torch

    try:
        with torch.device("meta"):
            return parts(factory(**kwargs))
    except Exception:  # a constructor that needs real tensors: its parts stay unknown
        return None
