"""AMP: automatic mixed precision with torch.autocast (and a GradScaler for fp16)."""
from __future__ import annotations

from typing import Any, ContextManager

import torch
from typing_extensions import override

from strategies.base import as_device, capability_reason
from strategies.loss_scaling import LossScaling

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def half_dtype_reason(device: torch.device | str, dtype: str, what: str) -> str | None:
    """Why `what` in `dtype` ("fp16"/"bf16") cannot run on `device`; None when it can."""
    device = as_device(device)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            return "no CUDA device is available"
        if dtype == "bf16" and not torch.version.hip:
            # Native bf16 on `device` itself: torch.cuda.is_bf16_supported() asks about the current device and
            # counts emulation (a V100 or T4 runs bf16 emulated, slower than fp32), which is not worth timing.
            return capability_reason(device, (8, 0), "native bf16")
    elif device.type != "cpu":
        return f"{what} for {device.type} is not supported by this strategy"
    return None


class AMP(LossScaling):
    """Runs the forward pass under ``torch.autocast`` in fp16 or bf16; scales fp16 losses.

    Autocast runs matmuls and convolutions in half precision (keeping
    reductions and the weights in fp32), which roughly doubles math throughput
    and halves activation memory on tensor-core GPUs. fp16's narrow range needs
    a GradScaler: the loss is scaled up so small gradients do not flush to
    zero; a step whose gradients overflow is skipped and the scale lowered.
    bf16 has fp32's range, so needs no scaler. Helps on GPUs with tensor cores
    (Volta+ for fp16, Ampere+ for bf16) and compute-bound models. Does little
    for small, launch-bound models, and on CPUs without native bf16/fp16
    instructions it can be slower than fp32.

    With clipping, gradients are unscaled first so ``max_grad_norm`` applies to
    the true gradients. With gradient accumulation (several `backward` calls
    per `step`), the scale is updated once per `step`.
    """

    name = "amp"
    targets = frozenset({"compute"})  # matmuls and convolutions in half precision on tensor cores
    changes_numerics = True
    owns = frozenset({"backward", "step"})

    def __init__(self, dtype: str = "fp16", init_scale: float = 2.0**16, growth_interval: int = 2000) -> None:
        if dtype not in DTYPES:
            raise ValueError(f"AMP: dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
        if not init_scale > 0:
            raise ValueError(f"AMP: init_scale must be > 0, got {init_scale!r}")
        if not isinstance(growth_interval, int) or growth_interval < 1:
            raise ValueError(f"AMP: growth_interval must be a whole number >= 1, got {growth_interval!r}")
        self.dtype, self.init_scale, self.growth_interval = dtype, float(init_scale), growth_interval
        super().__init__()

    def _ensure_scaler(self, device_type: str) -> None:
        if self.dtype == "fp16" and self.scaler is None:
            self.scaler = torch.amp.GradScaler(
                device_type, init_scale=self.init_scale, growth_interval=self.growth_interval
            )

    @override
    def autocast(self, device: torch.device | str) -> ContextManager[None]:
        device_type = as_device(device).type
        self._ensure_scaler(device_type)
        return torch.autocast(device_type=device_type, dtype=DTYPES[self.dtype])

    @override
    def backward(self, loss: torch.Tensor) -> None:
        self._ensure_scaler(loss.device.type)
        self._scaled_backward(loss)

    @override
    def step(self, optimizer: torch.optim.Optimizer, max_grad_norm: float | None = None) -> None:
        self._scaled_step(optimizer, max_grad_norm)

    @override
    def check(self, device: torch.device | str) -> str | None:
        return half_dtype_reason(device, self.dtype, "autocast")

    @override
    def params(self) -> dict[str, Any]:
        return {"dtype": self.dtype, "init_scale": self.init_scale, "growth_interval": self.growth_interval}
