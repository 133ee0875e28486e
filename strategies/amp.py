"""AMP: automatic mixed precision with torch.autocast (and a GradScaler for fp16)."""
from __future__ import annotations

from typing import Any, ContextManager

import torch

from strategies.base import Strategy, as_device, capability_reason
from strategies.stack import clip_and_step, clip_gradients

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


class SkipCounter:
    """Steps a GradScaler skipped, counted on the device and read only when asked.

    Reading the scale (``get_scale()``) or a found-inf flag on the host waits for
    the device, and a fused optimizer lets GradScaler step with no such wait at
    all; so the count is a device tensor, summed without leaving the device, and
    read by `metrics()` between steps.
    """

    def __init__(self) -> None:
        self._count: torch.Tensor | None = None

    def add(self, scaler: torch.amp.GradScaler, optimizer: torch.optim.Optimizer) -> None:
        """Call after ``scaler.step(optimizer)`` and before ``scaler.update()`` (which forgets the flags)."""
        flags = list(scaler._found_inf_per_device(optimizer).values())  # 1.0 per device with an inf/nan gradient
        if not flags:
            return
        skipped = flags[0] if len(flags) == 1 else torch.stack([f.to(flags[0].device) for f in flags]).amax()
        self._count = skipped.clone() if self._count is None else self._count.add_(skipped)

    @property
    def value(self) -> int:
        """The count so far (waits for the device)."""
        return 0 if self._count is None else int(self._count.item())


def scaled_step(scaler: torch.amp.GradScaler | None, optimizer: torch.optim.Optimizer,
                max_grad_norm: float | None, skipped: SkipCounter) -> None:
    """Optional clipping and the optimizer step through `scaler` (plain without one); a skipped step is counted in `skipped`."""
    if scaler is None:
        clip_and_step(optimizer, max_grad_norm)
        return
    if max_grad_norm is not None:
        scaler.unscale_(optimizer)  # so the threshold applies to the true gradients
        clip_gradients(optimizer, max_grad_norm)
    scaler.step(optimizer)  # skips the step if any gradient is inf/nan
    skipped.add(scaler, optimizer)
    scaler.update()


class AMP(Strategy):
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
        self.scaler: torch.amp.GradScaler | None = None
        self._skipped = SkipCounter()

    def _ensure_scaler(self, device_type: str) -> None:
        if self.dtype == "fp16" and self.scaler is None:
            self.scaler = torch.amp.GradScaler(
                device_type, init_scale=self.init_scale, growth_interval=self.growth_interval
            )

    def autocast(self, device: torch.device | str) -> ContextManager[None]:
        device_type = as_device(device).type
        self._ensure_scaler(device_type)
        return torch.autocast(device_type=device_type, dtype=DTYPES[self.dtype])

    def backward(self, loss: torch.Tensor) -> None:
        self._ensure_scaler(loss.device.type)
        (self.scaler.scale(loss) if self.scaler else loss).backward()

    def step(self, optimizer: torch.optim.Optimizer, max_grad_norm: float | None = None) -> None:
        scaled_step(self.scaler, optimizer, max_grad_norm, self._skipped)

    @property
    def skipped_steps(self) -> int:
        """Steps skipped for inf/nan gradients so far (waits for the device: read between steps)."""
        return self._skipped.value

    @property
    def loss_scale(self) -> float:
        """The current loss scale (1.0 when no scaler is used)."""
        return self.scaler.get_scale() if self.scaler else 1.0

    def check(self, device: torch.device | str) -> str | None:
        return half_dtype_reason(device, self.dtype, "autocast")

    def params(self) -> dict[str, Any]:
        return {"dtype": self.dtype, "init_scale": self.init_scale, "growth_interval": self.growth_interval}

    def metrics(self) -> dict[str, float]:
        return {"loss_scale": self.loss_scale, "skipped_steps": float(self.skipped_steps)}
