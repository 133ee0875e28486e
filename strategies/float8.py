"""Float8: torchao's float8 training of the model's linear layers."""
from __future__ import annotations

import importlib.util
from typing import Any

import torch
from typing_extensions import override

from strategies.base import Strategy, capability_reason, cuda_reason

# The lowest compute capability of each recipe's matmul: tensorwise scaling uses cuBLAS's float8 GEMM (Ada
# and Hopper tensor cores: 8.9); rowwise uses a CUTLASS kernel PyTorch builds for Hopper (pytorch#145728).
RECIPES = {"tensorwise": (8, 9), "rowwise": (9, 0)}
INSTALL = "pip install 'ablate[float8]'"


def float8_eligible(module: torch.nn.Module, fqn: str) -> bool:
    """Whether torchao can convert `module`: a Linear whose in and out features are multiples of 16.

    float8 GEMMs (``torch._scaled_mm``) need both matrix dimensions divisible
    by 16; a layer that is not - a byte-level model's 256-way head is, a
    10-way classifier head is not - stays in high precision instead of
    failing at the first step.
    """
    return isinstance(module, torch.nn.Linear) and module.in_features % 16 == 0 and module.out_features % 16 == 0


class Float8(Strategy):
    """Swaps the model's ``nn.Linear`` layers for torchao's ``Float8Linear`` (``convert_to_float8_training``).

    Each linear's three matmuls (forward, grad-input, grad-weight) cast their
    operands to float8 with dynamic scales and run on float8 tensor cores,
    twice bf16's peak on an H100; weights, optimizer and everything else stay
    as they were. ``recipe``: "tensorwise" (one scale per tensor; the fastest)
    or "rowwise" (one per row; more accurate, Hopper only).

    Helps large, matmul-bound models: torchao reports up to 1.5x at scale and
    torchtitan Llama-3.1-8B 6,667 -> 8,532 tokens/s/GPU with compile. Slower on
    small shapes, where the casts and amax reductions cost more than the
    faster matmul saves (torchao's own table: 0.80x at 1024x2048x1024) - the
    reason users find it slower than bf16. Without ``torch.compile`` the casts
    are unfused and it is rarely faster: compose it with Compile (Float8
    converts first, Compile wraps the converted model). Usually combined with
    AMP bf16 for everything that is not a converted linear. Needs CUDA
    compute capability >= 8.9 (9.0 for rowwise) and torchao, an optional
    dependency (``pip install 'ablate[float8]'``). Layers whose dimensions are
    not multiples of 16 are left in high precision (see `float8_eligible`).
    """

    name = "float8"
    targets = frozenset({"compute"})  # the linear layers' matmuls on float8 tensor cores
    changes_numerics = True  # float8 keeps 3 mantissa bits (e4m3)
    conflicts_with = frozenset({"torchscript"})  # Float8Linear's tensor subclasses cannot be scripted
    order = 10  # converts before graph capture (Compile, order 100) wraps the model

    def __init__(self, recipe: str = "tensorwise") -> None:
        if recipe not in RECIPES:
            raise ValueError(f"Float8: recipe must be one of {', '.join(RECIPES)}, got {recipe!r}")
        self.recipe = recipe

    @override
    def prepare_model(self, model: torch.nn.Module) -> torch.nn.Module:
        try:
            from torchao.float8 import Float8LinearConfig, convert_to_float8_training
        except ImportError as error:
            raise RuntimeError(f"Float8 needs torchao, which is not installed ({INSTALL})") from error
        if not any(float8_eligible(m, n) for n, m in model.named_modules()):
            raise ValueError("Float8: the model has no nn.Linear with in and out features divisible by 16")
        config = Float8LinearConfig.from_recipe_name(self.recipe)
        return convert_to_float8_training(model, module_filter_fn=float8_eligible, config=config)

    @override
    def check(self, device: torch.device | str) -> str | None:
        if reason := cuda_reason(device, "float8 training"):
            return reason  # first: installing torchao would not help
        if importlib.util.find_spec("torchao") is None:
            return f"float8 training needs torchao, which is not installed ({INSTALL})"
        return capability_reason(device, RECIPES[self.recipe], f"float8 training ({self.recipe})")

    @override
    def params(self) -> dict[str, Any]:
        return {"recipe": self.recipe}
