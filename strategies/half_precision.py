"""HalfPrecision: the whole model in fp16 or bf16, without autocast."""
from __future__ import annotations

from typing import Any

import torch
from typing_extensions import override

from strategies.amp import DTYPES, half_dtype_reason
from strategies.base import map_tensors, rebuild_optimizer
from strategies.loss_scaling import LossScaling
from strategies.stack import clip_and_step


class HalfPrecision(LossScaling):
    """Converts weights (and, by a forward pre-hook, floating inputs) to fp16 or bf16.

    Every op then runs in half precision - no per-op casts as under autocast,
    half the weight and activation memory - so this is the speed ceiling AMP
    is compared against. Two of Apex's classic levels:

    - ``master_weights=False`` (O3, "pure" half): the optimizer updates the
      half weights directly and nothing is scaled. Small updates round away
      against large weights and fp16 gradients can underflow, so accuracy
      may suffer; the report's parity check says by how much. With Adam in
      fp16 it breaks down: eps=1e-8 is zero in fp16 and small squared
      gradients underflow, so updates become 0/0 (bf16 has fp32's range).
    - ``master_weights=True`` (O2): the optimizer steps on fp32 copies of the
      weights (`prepare_optimizer` rebuilds it over them) and the half
      weights are refreshed from them after each step; the logits are cast
      back to fp32 for the loss; fp16 losses are scaled dynamically (a
      GradScaler on the fp32 gradients). Gradients are copied to the masters
      and the half ones released at every step.

    Helps on tensor-core GPUs for compute- or memory-bound models (fp16 on
    Volta+, bf16 on Ampere+). Does little for launch-bound small models; on
    CPUs without native half instructions it is slower than fp32. Norm
    layers run in half too. Cannot be composed with AMP: both own backward
    and step. Cannot be composed with TorchScript: the input-casting forward
    pre-hook cannot be scripted. Evaluation through the same model runs in
    half precision too.
    """

    name = "half_precision"
    targets = frozenset({"compute"})  # every op in half precision: faster math, half the memory traffic
    changes_numerics = True
    owns = frozenset({"backward", "step"})
    conflicts_with = frozenset({"torchscript"})  # torch.jit.script cannot compile the forward pre-hook

    def __init__(self, dtype: str = "fp16", master_weights: bool = False) -> None:
        if dtype not in DTYPES:
            raise ValueError(f"HalfPrecision: dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
        if not isinstance(master_weights, bool):
            raise ValueError(f"HalfPrecision: master_weights must be true or false, got {master_weights!r}")
        self.dtype, self.master_weights = dtype, master_weights
        self._masters: dict[torch.Tensor, torch.Tensor] = {}  # half parameter -> its fp32 master
        self._pairs: list[tuple[torch.Tensor, torch.Tensor]] = []  # in the rebuilt optimizer's order
        super().__init__()

    def _cast_inputs(self, module: torch.nn.Module, args: tuple[Any, ...]) -> tuple[Any, ...]:
        dtype = DTYPES[self.dtype]
        return map_tensors(args, lambda t: t.to(dtype) if t.is_floating_point() else t)

    @override
    def prepare_model(self, model: torch.nn.Module) -> torch.nn.Module:
        if self.master_weights:  # copied before the conversion, so the masters start exact
            self._masters = {p: p.detach().clone().float() for p in model.parameters()}
        model.to(DTYPES[self.dtype])  # in place: an optimizer built earlier still holds these parameters
        model.register_forward_pre_hook(self._cast_inputs)
        if self.master_weights:
            model.register_forward_hook(
                lambda m, a, out: map_tensors(out, lambda t: t.float() if t.is_floating_point() else t))
        return model

    @override
    def prepare_optimizer(self, optimizer: torch.optim.Optimizer) -> torch.optim.Optimizer:
        if not self.master_weights:
            return optimizer
        self._pairs = []

        def master(p: torch.Tensor) -> torch.Tensor:
            m = self._masters.get(p)
            if m is None:  # a parameter prepare_model did not see
                m = p.detach().float()
            elif m.stride() != p.stride():
                # A later prepare_model (ChannelsLast) changed the parameter's layout after the masters were
                # copied: the master must share it, or its gradient (p.grad.float(), in p's layout) does not
                # match it - fused optimizers then pair the wrong elements, foreach ones leave their fast path.
                m = torch.empty_like(p, dtype=torch.float32).copy_(m)
                self._masters[p] = m
            self._pairs.append((p, m))
            return m

        return rebuild_optimizer(optimizer, swap=master)

    @override
    def backward(self, loss: torch.Tensor) -> None:
        if self.master_weights and self.dtype == "fp16" and self.scaler is None:
            self.scaler = torch.amp.GradScaler(loss.device.type)
        self._scaled_backward(loss)

    @override
    def step(self, optimizer: torch.optim.Optimizer, max_grad_norm: float | None = None) -> None:
        if not self.master_weights:
            clip_and_step(optimizer, max_grad_norm)
            return
        if not self._pairs or optimizer.param_groups[0]["params"][0] is not self._pairs[0][1]:
            raise RuntimeError("HalfPrecision(master_weights=True): the optimizer must be the one "
                               "prepare_optimizer returned (it steps on the fp32 master weights)")
        for p, m in self._pairs:
            m.grad = None if p.grad is None else p.grad.float()
            p.grad = None  # copied; the optimizer's zero_grad only reaches the masters
        self._scaled_step(optimizer, max_grad_norm)
        with torch.no_grad():
            for p, m in self._pairs:
                p.copy_(m)

    @override
    def check(self, device: torch.device | str) -> str | None:
        return half_dtype_reason(device, self.dtype, "half precision")

    @override
    def params(self) -> dict[str, Any]:
        return {"dtype": self.dtype, "master_weights": self.master_weights}
