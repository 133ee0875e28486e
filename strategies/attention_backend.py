"""AttentionBackend: the kernel ``scaled_dot_product_attention`` may use."""
from __future__ import annotations

from typing import Any, ContextManager

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from typing_extensions import override

from strategies.base import Strategy, as_device, capability_reason

BACKENDS = {
    "flash": SDPBackend.FLASH_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
    "math": SDPBackend.MATH,
}
# The lowest compute capability each CUDA kernel runs on, from PyTorch's own checks
# (aten/src/ATen/native/transformers/sdp_utils_cpp and cuda/sdp_utils.cpp): FlashAttention-2 and cuDNN's
# fused attention need Ampere; the memory-efficient (xformers/CUTLASS) kernel runs from Maxwell on.
CUDA_CAPABILITY = {"flash": (8, 0), "efficient": (5, 0), "cudnn": (8, 0), "math": (0, 0)}
CPU_BACKENDS = ("flash", "math")  # PyTorch has CPU kernels for these two only
# CUDA kernels that take fp16/bf16 inputs only (PyTorch's check_flash_attention_dtype / cuDNN's dtype check in
# sdp_utils.cpp); the strategies that lower the precision attention's inputs arrive in.
HALF_ONLY_ON_CUDA = ("flash", "cudnn")
HALF_PRECISION = ("amp", "half_precision")


class AttentionBackend(Strategy):
    """Restricts ``F.scaled_dot_product_attention`` to one kernel with ``torch.nn.attention.sdpa_kernel``.

    By default PyTorch picks the first kernel whose constraints the inputs meet
    (flash, then memory-efficient, then math on CUDA; cuDNN first on some
    versions and GPUs). Forcing one measures what each is worth on this model:
    ``flash`` (FlashAttention-2: tiled, never materialises the T x T scores,
    fp16/bf16 only on CUDA), ``efficient`` (memory-efficient attention: tiled
    too, also fp32, more head sizes), ``cudnn`` (cuDNN's fused attention,
    often the fastest on Hopper) and ``math`` (the plain matmul-softmax-matmul,
    O(T^2) memory: the reference). The fused kernels help at long sequences,
    where the scores' memory traffic dominates; at short ones the choice barely
    shows, and a model that does not call ``scaled_dot_product_attention``
    (hand-written attention) is not affected at all.

    The context is entered around the forward and the loss (the `autocast`
    hook); the backward uses the kernel the forward chose. A forced kernel
    that cannot take the inputs (flash with fp32 inputs on CUDA - compose it
    with AMP - or an unsupported head size) raises at the first forward
    instead of falling back, so what is timed is the named kernel. On a CPU
    only flash and math exist; `check` refuses the others, and CUDA kernels
    on GPUs older than they need; `check_with` refuses flash and cuDNN on
    CUDA in a stack without AMP or HalfPrecision, whose fp32 inputs they
    cannot take.
    """

    name = "attention_backend"
    targets = frozenset({"compute"})  # which kernel computes attention
    changes_numerics = True  # the kernels accumulate in different orders (and the fused ones tile the softmax)

    def __init__(self, backend: str = "flash") -> None:
        if backend not in BACKENDS:
            raise ValueError(f"AttentionBackend: backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
        self.backend = backend

    @override
    def autocast(self, device: torch.device | str) -> ContextManager[None]:
        return sdpa_kernel(BACKENDS[self.backend])

    @override
    def check(self, device: torch.device | str) -> str | None:
        device = as_device(device)
        what = f"the {self.backend} attention kernel"
        if device.type == "cpu":
            return None if self.backend in CPU_BACKENDS else \
                f"{what} is CUDA-only; on a CPU PyTorch has {' and '.join(CPU_BACKENDS)} only"
        if device.type != "cuda":
            return f"{what} on {device.type} is not supported by this strategy"
        if not torch.cuda.is_available():
            return "no CUDA device is available"
        if self.backend == "cudnn" and not torch.backends.cudnn.is_available():
            return "this PyTorch build has no cuDNN"
        return capability_reason(device, CUDA_CAPABILITY[self.backend], what)

    @override
    def check_with(self, others: tuple[Strategy, ...], device: torch.device | str) -> str | None:
        if as_device(device).type != "cuda" or self.backend not in HALF_ONLY_ON_CUDA:
            return None
        if any(m.name in HALF_PRECISION for m in others):
            return None
        return (f"the {self.backend} attention kernel on CUDA takes fp16/bf16 inputs only, and nothing in this "
                f"combination lowers the precision; compose it with {' or '.join(HALF_PRECISION)}")

    @override
    def params(self) -> dict[str, Any]:
        return {"backend": self.backend}
