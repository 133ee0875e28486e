"""Dynamic loss scaling with a GradScaler, shared by AMP and HalfPrecision.

Both scale fp16 losses the same way (AMP under autocast, HalfPrecision for its
fp32 master weights) and report the same numbers about it, so the scaler, the
scaled backward and step, and the skipped-step count live here once: a fix to
one cannot miss the other.
"""
from __future__ import annotations

import torch
from typing_extensions import override

from strategies.base import Strategy
from strategies.stack import clip_and_step, clip_gradients


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


class LossScaling(Strategy):
    """A strategy that may scale its losses with a GradScaler, and reports the scale and the skipped steps.

    A subclass creates ``self.scaler`` when it needs one (fp16, on the loss's
    device type) and calls `_scaled_backward` and `_scaled_step` from its own
    `backward` and `step`. Those hooks stay in the subclass: a stack infers
    hook ownership from overriding, and this class owns nothing by itself.
    """

    def __init__(self) -> None:
        self.scaler: torch.amp.GradScaler | None = None
        self._skipped = SkipCounter()

    def _scaled_backward(self, loss: torch.Tensor) -> None:
        (self.scaler.scale(loss) if self.scaler else loss).backward()

    def _scaled_step(self, optimizer: torch.optim.Optimizer, max_grad_norm: float | None) -> None:
        """Optional clipping and the optimizer step through the scaler (plain without one); counts a skipped step."""
        if self.scaler is None:
            clip_and_step(optimizer, max_grad_norm)
            return
        if max_grad_norm is not None:
            self.scaler.unscale_(optimizer)  # so the threshold applies to the true gradients
            clip_gradients(optimizer, max_grad_norm)
        self.scaler.step(optimizer)  # skips the step if any gradient is inf/nan
        self._skipped.add(self.scaler, optimizer)
        self.scaler.update()

    @property
    def skipped_steps(self) -> int:
        """Steps skipped for inf/nan gradients so far (waits for the device: read between steps)."""
        return self._skipped.value

    @property
    def loss_scale(self) -> float:
        """The current loss scale (1.0 when no scaler is used)."""
        return self.scaler.get_scale() if self.scaler else 1.0

    @override
    def metrics(self) -> dict[str, float]:
        return {"loss_scale": self.loss_scale, "skipped_steps": float(self.skipped_steps)}
