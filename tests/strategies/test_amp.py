"""AMP on the CPU: fp16 loss scaling (clipping, overflow, accumulation), bf16, and argument checks."""
from __future__ import annotations

import copy
import math

import pytest
import torch
from torch.nn import functional as F

from strategies import AMP, compose

from fake_cuda import FakeCUDA

INIT_SCALE = 2.0**16


def _forward(stack, model, batch):
    inputs, targets = stack.to_device(batch, "cpu")
    with stack.autocast("cpu"):
        return F.cross_entropy(model(inputs), targets)


def _grad_norm(params) -> float:
    return torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in params])).item()


def test_clipping_sees_unscaled_gradients(model, batch, monkeypatch):
    seen: list[float] = []
    original = torch.nn.utils.clip_grad_norm_

    def recording_clip(params, max_norm, *args, **kwargs):
        params = list(params)
        seen.append(_grad_norm(params))
        return original(params, max_norm, *args, **kwargs)

    # The same loss, backpropagated without any scaling.
    plain = copy.deepcopy(model)
    with torch.autocast("cpu", dtype=torch.float16):
        F.cross_entropy(plain(batch[0]), batch[1]).backward()
    true_norm = _grad_norm(plain.parameters())

    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", recording_clip)
    amp = AMP("fp16")
    stack = compose(amp)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    stack.backward(_forward(stack, model, batch))
    stack.step(optimizer, max_grad_norm=true_norm / 2)  # clipping is active

    assert len(seen) == 1, "clip_grad_norm_ was not called exactly once"
    assert amp.loss_scale == INIT_SCALE  # the loss really was scaled (and did not overflow)...
    assert seen[0] == pytest.approx(true_norm, rel=1e-2)  # ...but clipping saw true gradients
    assert amp.skipped_steps == 0


def test_clipping_limits_the_unscaled_update(model, batch):
    # With clipping to a tiny norm and SGD, the step size is bounded by lr * max_grad_norm.
    stack = compose(AMP("fp16"))
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    before = [p.detach().clone() for p in model.parameters()]
    stack.backward(_forward(stack, model, batch))
    stack.step(optimizer, max_grad_norm=1e-3)
    moved = torch.linalg.vector_norm(torch.stack([(p - b).norm() for p, b in zip(model.parameters(), before)]))
    assert 0 < moved.item() <= 1e-3 * (1 + 1e-4)


def test_injected_overflow_skips_step_and_halves_scale(model, batch):
    amp = AMP("fp16")
    stack = compose(amp)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    stack.backward(_forward(stack, model, batch))
    assert amp.loss_scale == INIT_SCALE
    next(model.parameters()).grad.view(-1)[0] = math.inf
    before = copy.deepcopy(model.state_dict())

    stack.step(optimizer, max_grad_norm=1.0)

    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), f"{k} changed on an overflowed step"
    assert amp.loss_scale == INIT_SCALE / 2
    assert amp.skipped_steps == 1
    assert amp.metrics()["skipped_steps"] == 1.0
    assert stack.metrics()["amp.skipped_steps"] == 1.0
    assert stack.metrics()["amp.loss_scale"] == INIT_SCALE / 2

    # A clean step afterwards trains and is not counted as skipped.
    stack.backward(_forward(stack, model, batch))
    stack.step(optimizer, max_grad_norm=1.0)
    assert any(not torch.equal(v, before[k]) for k, v in model.state_dict().items())
    assert amp.skipped_steps == 1
    assert amp.loss_scale == INIT_SCALE / 2


def test_overflow_without_clipping_also_skips(model, batch):
    amp = AMP("fp16")
    stack = compose(amp)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    stack.backward(_forward(stack, model, batch))
    next(model.parameters()).grad.view(-1)[0] = math.nan
    before = copy.deepcopy(model.state_dict())
    stack.step(optimizer)
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
    assert amp.skipped_steps == 1 and amp.loss_scale == INIT_SCALE / 2


def test_gradient_accumulation_updates_scale_once_per_step(model, dataset):
    # Every clean step doubles the scale; start low so that no real fp16 overflow interferes.
    amp = AMP("fp16", init_scale=16.0, growth_interval=1)
    stack = compose(amp)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = dataset.tensors
    for step in range(3):
        for micro in range(2):
            i = (2 * step + micro) * 8
            stack.backward(_forward(stack, model, (x[i : i + 8], y[i : i + 8])))
            assert amp.loss_scale == 16.0 * 2**step, "backward must not change the scale"
        stack.step(optimizer, max_grad_norm=1.0)
        assert amp.loss_scale == 16.0 * 2 ** (step + 1), "the scale must grow once per step"
    assert amp.skipped_steps == 0


def test_accumulated_gradients_are_the_sum_of_unscaled_micro_batches(model, dataset):
    # Two scaled backward calls, unscaled once at the step, must equal two plain backward calls.
    x, y = dataset.tensors
    halves = [(x[:8], y[:8]), (x[8:16], y[8:16])]
    plain = copy.deepcopy(model)
    for inputs, targets in halves:
        with torch.autocast("cpu", dtype=torch.float16):
            F.cross_entropy(plain(inputs), targets).backward()

    seen = {}
    amp = AMP("fp16")
    stack = compose(amp)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)  # a step that leaves params alone
    for b in halves:
        stack.backward(_forward(stack, model, b))
    # unscale_ happens inside step when clipping; read the grads the optimizer then sees.
    optimizer.register_step_pre_hook(
        lambda opt, args, kwargs: seen.update(g=[p.grad.clone() for p in model.parameters()]))
    stack.step(optimizer, max_grad_norm=1e9)
    for g, p in zip(seen["g"], plain.parameters()):
        torch.testing.assert_close(g, p.grad, rtol=1e-2, atol=1e-5)


def test_bf16_needs_no_scaler(model, batch):
    amp = AMP("bf16")
    stack = compose(amp)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    before = copy.deepcopy(model.state_dict())
    with stack.autocast("cpu"):
        assert torch.get_autocast_dtype("cpu") == torch.bfloat16
        loss = F.cross_entropy(model(batch[0]), batch[1])
    stack.backward(loss)
    stack.step(optimizer, max_grad_norm=1.0)
    assert amp.scaler is None
    assert amp.loss_scale == 1.0
    assert amp.metrics() == {"loss_scale": 1.0, "skipped_steps": 0.0}
    assert any(not torch.equal(v, before[k]) for k, v in model.state_dict().items())


def test_invalid_dtype_names_valid_choices():
    with pytest.raises(ValueError) as info:
        AMP("fp8")
    message = str(info.value)
    assert "fp16" in message and "bf16" in message and "fp8" in message


@pytest.mark.parametrize(
    "kwargs", [{"init_scale": 0.0}, {"init_scale": -1.0}, {"growth_interval": 0}, {"growth_interval": 1.5}])
def test_invalid_scaler_settings_raise(kwargs):
    with pytest.raises(ValueError):
        AMP("fp16", **kwargs)


def test_amp_check():
    assert AMP("fp16").check("cpu") is None
    assert AMP("bf16").check("cpu") is None
    reason = AMP("fp16").check("mps")
    assert isinstance(reason, str) and "mps" in reason
    if not torch.cuda.is_available():
        assert AMP("bf16").check("cuda")


def test_counting_skipped_steps_does_not_read_the_scale(model, batch, monkeypatch):
    # Each get_scale() is a device-to-host read (a sync on CUDA); with a fused optimizer GradScaler needs none,
    # so the count must stay on the device until it is read between steps.
    reads = []
    original = torch.amp.GradScaler.get_scale
    monkeypatch.setattr(torch.amp.GradScaler, "get_scale", lambda self: reads.append(1) or original(self))
    amp = AMP("fp16")
    stack = compose(amp)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for poisoned in (False, True, False):
        stack.backward(_forward(stack, model, batch))
        if poisoned:
            next(model.parameters()).grad.view(-1)[0] = math.inf
        stack.step(optimizer)
    assert reads == []
    assert amp.skipped_steps == 1


@pytest.mark.parametrize("capability, reason", [((7, 5), True), ((8, 0), False)])
def test_bf16_needs_native_support_on_the_trials_own_device(monkeypatch, capability, reason):
    from strategies import HalfPrecision

    # torch.cuda.is_bf16_supported() would say yes: it asks the current device (cuda:0), and counts emulation.
    fake = FakeCUDA(count=2, current=0, name="Tesla T4", capability=capability).install(monkeypatch)
    monkeypatch.setattr(torch.version, "hip", None)
    for strategy in (AMP("bf16"), HalfPrecision("bf16")):
        got = strategy.check("cuda:1")
        assert (got is not None) is reason
        if reason:
            assert "bf16" in got and "7.5" in got
    assert fake.asked and set(fake.asked) == {1}


@pytest.mark.parametrize("fused", [False, True], ids=["foreach", "fused"])
def test_a_step_fp16_loss_scaling_skips_advances_batch_size_s_warm_up_only_with_a_fused_optimizer(model, batch,
                                                                                               fused):
    # GradScaler does not call a plain optimizer's step on an overflow; a fused one's it always calls, the kernel
    # leaving the weights alone (torch/amp/grad_scaler.py): the warm-up's step post-hook fires. BatchSize says so.
    from strategies import BatchSize, FusedOptimizer

    warm = BatchSize(32, warmup_steps=4)
    stack = compose(AMP("fp16"), warm, *([FusedOptimizer("fused")] if fused else []))
    stack.loader_kwargs(batch_size=16)
    optimizer = stack.prepare_optimizer(torch.optim.SGD(model.parameters(), lr=0.1))
    stack.backward(_forward(stack, model, batch))
    next(model.parameters()).grad.view(-1)[0] = math.inf
    before = copy.deepcopy(model.state_dict())
    stack.step(optimizer)
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())  # skipped either way
    assert warm.scheduler is not None and warm.scheduler.last_epoch == (1 if fused else 0)
    doc = " ".join((BatchSize.__doc__ or "").split())
    assert "advances it with a fused optimizer" in doc and "does not with any other" in doc
