"""compose(): conflicts, flattening, params/metrics prefixes, repr round-trip, check and autocast."""
from __future__ import annotations

import pytest
import torch
import yaml
from torch.nn import functional as F

import strategies
from strategies import (
    AMP,
    BatchSize,
    Compile,
    ConflictError,
    HalfPrecision,
    NumWorkers,
    PinMemory,
    SetToNone,
    Stack,
    Strategy,
    TorchScript,
    compose,
)


class OwnsBackwardAndStep(Strategy):
    """Test-only strategy that, like AMP, owns backward and step."""

    name = "owns_backward_and_step"
    owns = frozenset({"backward", "step"})

    def backward(self, loss):
        loss.backward()

    def step(self, optimizer, max_grad_norm=None):
        optimizer.step()


class OwnsZeroGrad(Strategy):
    name = "owns_zero_grad"
    owns = frozenset({"zero_grad"})

    def zero_grad(self, optimizer):
        optimizer.zero_grad(set_to_none=True)


@pytest.mark.parametrize(
    "a, b",
    [
        (TorchScript(), Compile()),
        (Compile(), TorchScript()),
        (AMP("fp16"), AMP("fp16")),
        (AMP("fp16"), AMP("bf16")),
        (AMP("bf16"), OwnsBackwardAndStep()),
        (OwnsBackwardAndStep(), AMP("fp16")),
        (SetToNone(), SetToNone()),
        (SetToNone(), OwnsZeroGrad()),
        (BatchSize(8), BatchSize(16)),
    ],
    ids=lambda s: type(s).__name__,
)
def test_conflicts_name_both_classes(a, b):
    with pytest.raises(ConflictError) as info:
        compose(a, b)
    message = str(info.value)
    assert type(a).__name__ in message and type(b).__name__ in message
    assert isinstance(info.value, ValueError)


def test_conflict_found_among_other_members_and_inside_nested_stacks():
    with pytest.raises(ConflictError, match="TorchScript.*Compile|Compile.*TorchScript"):
        compose(PinMemory(), TorchScript(), SetToNone(), Compile())
    with pytest.raises(ConflictError, match="AMP.*AMP"):
        compose(compose(AMP("bf16"), PinMemory()), AMP("fp16"))


def test_compatible_owners_compose():
    # AMP owns backward+step, SetToNone owns zero_grad: no overlap, no conflict.
    stack = compose(AMP("fp16"), SetToNone(), NumWorkers(1), PinMemory(), BatchSize(8), Compile())
    assert len(stack) == 6


def test_compose_rejects_non_strategies():
    with pytest.raises(TypeError, match="str"):
        compose(SetToNone(), "amp")


def test_compose_of_a_stack_flattens():
    inner = compose(AMP("bf16"), PinMemory())
    outer = compose(inner, SetToNone(), compose(BatchSize(8)))
    assert isinstance(outer, Stack)
    assert all(not isinstance(m, Stack) for m in outer)
    assert {m.name for m in outer} == {"amp", "pin_memory", "set_to_none", "batch_size"}
    assert len(outer) == 4
    assert outer.get("amp") is inner.get("amp")
    assert outer.get("compile") is None
    assert compose(compose()).members == ()


def test_stack_params_are_prefixed():
    stack = compose(AMP("bf16", init_scale=8.0), BatchSize(32), NumWorkers(2), SetToNone())
    params = stack.params()
    assert params == {
        "amp.dtype": "bf16",
        "amp.init_scale": 8.0,
        "amp.growth_interval": 2000,
        "batch_size.n": 32,
        "batch_size.lr_scaling": "none",
        "batch_size.warmup_steps": 0,
        "num_workers.n": 2,
        "num_workers.persistent": True,
        "num_workers.prefetch_factor": None,
    }
    assert yaml.safe_load(yaml.safe_dump(params)) == params
    assert compose().params() == {}


def test_stack_metrics_are_prefixed(model, batch):
    amp = AMP("fp16")
    stack = compose(amp, SetToNone())
    assert stack.metrics() == {"amp.loss_scale": 1.0, "amp.skipped_steps": 0.0}  # no scaler yet
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with stack.autocast("cpu"):
        loss = torch.nn.functional.cross_entropy(model(batch[0]), batch[1])
    stack.backward(loss)
    stack.step(optimizer)
    assert stack.metrics() == {"amp.loss_scale": amp.loss_scale, "amp.skipped_steps": 0.0}
    assert stack.metrics()["amp.loss_scale"] == 2.0**16
    assert compose(SetToNone()).metrics() == {}


@pytest.mark.parametrize(
    "stack",
    [
        compose(),
        compose(AMP("bf16", init_scale=4.0, growth_interval=7), SetToNone()),
        compose(NumWorkers(2, persistent=False, prefetch_factor=3), PinMemory(), BatchSize(64)),
        compose(TorchScript(), SetToNone()),
        compose(Compile(mode="max-autotune", fullgraph=True, dynamic=False), AMP("fp16")),
        compose(Compile(backend="eager")),
    ],
    ids=repr,
)
def test_repr_rebuilds_an_equal_stack(stack):
    text = repr(stack)
    assert text.startswith("compose(")
    rebuilt = eval(text, vars(strategies))  # our own repr
    assert isinstance(rebuilt, Stack)
    assert rebuilt.params() == stack.params()
    assert [type(m) for m in rebuilt] == [type(m) for m in stack]
    assert repr(rebuilt) == text


def test_check_returns_first_reason_prefixed_with_class_name():
    # On the CPU, PinMemory has a reason; so would NumWorkers with absurdly many workers.
    stack = compose(SetToNone(), PinMemory(), NumWorkers(10_000))
    reason = stack.check("cpu")
    assert reason == f"PinMemory: {PinMemory().check('cpu')}"
    stack = compose(NumWorkers(10_000), PinMemory())
    assert stack.check("cpu") == f"NumWorkers: {NumWorkers(10_000).check('cpu')}"
    assert compose(SetToNone(), AMP("bf16"), BatchSize(4)).check("cpu") is None
    assert compose().check("cpu") is None


def test_stack_changes_numerics_if_any_member_does():
    assert compose().changes_numerics is False
    assert compose(SetToNone(), PinMemory(), NumWorkers(1)).changes_numerics is False
    assert compose(SetToNone(), AMP("bf16")).changes_numerics is True
    assert compose(BatchSize(2)).changes_numerics is True


def test_stack_autocast_enters_members_only_inside_with():
    stack = compose(SetToNone(), AMP("bf16"))
    assert not torch.is_autocast_enabled("cpu")
    ctx = stack.autocast("cpu")
    # Creating the context must not switch autocast on for the rest of the process.
    assert not torch.is_autocast_enabled("cpu")
    with ctx:
        assert torch.is_autocast_enabled("cpu")
        assert torch.get_autocast_dtype("cpu") == torch.bfloat16
    assert not torch.is_autocast_enabled("cpu")


def test_stack_autocast_leaves_autocast_on_exception():
    stack = compose(AMP("bf16"))
    with pytest.raises(RuntimeError, match="boom"):
        with stack.autocast("cpu"):
            raise RuntimeError("boom")
    assert not torch.is_autocast_enabled("cpu")


def test_stack_hooks_default_to_plain_loop(model, batch):
    stack = compose()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    assert stack.loader_kwargs(batch_size=3, shuffle=False) == {"batch_size": 3, "shuffle": False}
    assert stack.prepare_model(model) is model
    moved = stack.to_device(batch, "cpu")
    assert all(torch.equal(m, b) for m, b in zip(moved, batch))
    before = [p.detach().clone() for p in model.parameters()]
    stack.backward(torch.nn.functional.cross_entropy(model(batch[0]), batch[1]))
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())
    stack.step(optimizer)
    assert any(not torch.equal(p, b) for p, b in zip(model.parameters(), before))
    assert all(p.grad is not None and torch.count_nonzero(p.grad) == 0 for p in model.parameters())


class _OwnStep(Strategy):
    """A user's strategy that overrides step() and forgets to declare owns = {"step"}."""

    name = "own_step"

    def __init__(self) -> None:
        self.calls = 0

    def step(self, optimizer, max_grad_norm=None):
        self.calls += 1
        optimizer.step()


def test_an_undeclared_override_of_an_owned_hook_is_called(model, batch):
    own = _OwnStep()
    stack = compose(own, SetToNone())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(5):
        F.cross_entropy(model(batch[0]), batch[1]).backward()
        stack.step(optimizer)
    assert own.calls == 5


def test_an_undeclared_override_of_an_owned_hook_conflicts_like_a_declared_one():
    with pytest.raises(ConflictError, match="both own step"):
        compose(_OwnStep(), AMP("bf16"))


def test_a_stack_carries_its_members_one_off_cost():
    assert compose(Compile()).one_off_cost is True
    assert compose(SetToNone()).one_off_cost is False
    assert compose(compose(Compile()), SetToNone()).one_off_cost is True


def test_half_precision_and_torchscript_are_refused_up_front():
    # torch.jit.script cannot compile HalfPrecision's forward pre-hook: every such trial would fail.
    for master_weights in (False, True):
        with pytest.raises(ConflictError, match="declared incompatible"):
            compose(HalfPrecision("bf16", master_weights=master_weights), TorchScript())
