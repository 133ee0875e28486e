"""Losses: what must stay bitwise identical, what may drift (and by how much), and Stack == hand-written loop."""
from __future__ import annotations

import itertools
import math

import pytest
import torch
from torch import nn

from strategies import (
    AMP,
    BatchSize,
    ChannelsLast,
    Compile,
    DeviceResidentData,
    FusedOptimizer,
    HalfPrecision,
    NumWorkers,
    PinMemory,
    SetToNone,
    Strategy,
    TorchScript,
    compose,
    preset,
)

from reference_loop import reference_losses, stack_losses
from tiny_cnn import make_model

STEPS = 5


@pytest.fixture(scope="module")
def bare_losses(dataset):
    return stack_losses(compose(), make_model(), dataset, STEPS)


@pytest.fixture
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


# --------------------------------------------------------------------------- numerics-preserving strategies

NEUTRAL = {"workers": lambda: NumWorkers(2), "pin": PinMemory, "set_to_none": SetToNone}
SUBSETS = [c for r in range(len(NEUTRAL) + 1) for c in itertools.combinations(NEUTRAL, r)]


@pytest.mark.parametrize("subset", SUBSETS, ids=lambda c: "+".join(c) or "none")
def test_numerics_preserving_strategies_are_bitwise_identical(subset, model, dataset, bare_losses):
    stack = compose(*(NEUTRAL[k]() for k in subset))
    assert not stack.changes_numerics
    losses = stack_losses(stack, model, dataset, STEPS)
    assert losses == bare_losses


@pytest.mark.parametrize("extra", [(), (SetToNone,), (lambda: BatchSize(32),)],
                         ids=["alone", "set_to_none", "batch_size"])
def test_device_resident_data_is_bitwise_identical_to_the_dataloader(extra, model, dataset, bare_losses):
    # Same batches in the same order (the DataLoader's shuffle), so the very same losses.
    with_loader = stack_losses(compose(*(e() for e in extra)), model, dataset, STEPS + 20)
    resident = stack_losses(compose(DeviceResidentData(), *(e() for e in extra)), model, dataset, STEPS + 20)
    assert resident == with_loader  # 25 steps of 16 or 32 samples: crosses epochs of 256 samples


def test_losses_actually_move(bare_losses):
    # Guards the == tests above against a loop that never trains.
    assert len(set(bare_losses)) == STEPS


# --------------------------------------------------------------------------- AMP drift


def test_amp_bf16_stays_close_to_fp32(model, dataset, bare_losses):
    bf16 = stack_losses(compose(AMP("bf16")), model, dataset, STEPS)
    # Tolerance: relative 1e-2 per loss over 5 steps. bf16 keeps 8 mantissa bits (rounding ~4e-3
    # relative per op); on this tiny CNN the observed drift is ~2e-4, so 1e-2 leaves wide margin
    # while still catching a broken autocast (wrong dtype, fp16 overflow, lost gradients).
    for got, want in zip(bf16, bare_losses, strict=True):
        assert got == pytest.approx(want, rel=1e-2)
    assert bf16 != bare_losses, "autocast had no effect at all: bf16 losses are bitwise fp32"


# --------------------------------------------------------------------------- the newer techniques' drift
# Tolerances are relative, per loss, over 5 steps of the tiny CNN: layout and fused-update changes only
# reorder fp32 arithmetic (observed drift ~1e-7), so 1e-5; fp16/bf16 weights round every weight and
# activation to 11 or 8 mantissa bits (observed ~1e-3), so 2e-2 - still far below what a lost gradient,
# a wrong dtype or a step on stale weights would do to these losses.

DRIFT = {
    "channels_last": (ChannelsLast, 1e-5),
    "fused_adam": (lambda: FusedOptimizer("fused"), 1e-5),
    "foreach_adam": (lambda: FusedOptimizer("foreach"), 1e-5),
    "O1": (lambda: preset("O1"), 2e-2),
    "O2": (lambda: preset("O2"), 2e-2),
    "bf16_pure": (lambda: HalfPrecision("bf16"), 2e-2),
    "bf16_master_weights": (lambda: HalfPrecision("bf16", master_weights=True), 2e-2),
}


@pytest.mark.parametrize("name", DRIFT)
def test_newer_techniques_stay_close_to_fp32(name, model, dataset, bare_losses):
    make, rel = DRIFT[name]
    losses = stack_losses(compose(make()), model, dataset, STEPS)
    for got, want in zip(losses, bare_losses, strict=True):
        assert got == pytest.approx(want, rel=rel)


def test_pure_fp16_adam_breaks_down_as_documented(model, dataset, bare_losses):
    # O3 with Adam: eps=1e-8 is zero in fp16 and small squared gradients underflow, so 0/0 appears.
    # A real limit of pure fp16 (the report's parity check flags it), not a bug of HalfPrecision.
    losses = stack_losses(preset("O3"), model, dataset, STEPS)
    assert losses[0] == pytest.approx(bare_losses[0], rel=2e-2)  # the forward pass itself is fine
    assert any(math.isnan(loss) for loss in losses[1:])


def test_master_weights_keep_updates_that_pure_half_precision_rounds_away(model, dataset):
    # bf16 keeps 8 mantissa bits: an Adam step of 1e-6 on weights of size ~0.1 is below half an ulp,
    # so pure bf16 weights never move, while fp32 master weights accumulate it.
    def trained(strategy: Strategy) -> list[torch.Tensor]:
        stack = compose(strategy)
        net = stack.prepare_model(make_model())
        optimizer = stack.prepare_optimizer(torch.optim.SGD(net.parameters(), lr=1e-6))
        start = [p.detach().clone() for p in net.parameters()]
        for inputs, targets in itertools.islice(stack.make_loader(dataset, "cpu", batch_size=16), 8):
            stack.backward(nn.functional.cross_entropy(net(inputs).float(), targets))
            stack.step(optimizer)
        return [torch.equal(a, b) for a, b in zip(start, net.parameters())]

    assert all(trained(HalfPrecision("bf16")))  # every update lost
    assert not all(trained(HalfPrecision("bf16", master_weights=True)))


# --------------------------------------------------------------------------- Stack == hand-written reference

CONFIGS = {
    "bare": ((), {}, {}),
    "bare+clip": ((), {}, {"max_grad_norm": 0.05}),
    "workers+pin+batch_size+set_to_none": (
        (NumWorkers(2), PinMemory(), BatchSize(32), SetToNone()),
        {"workers": 2, "pin": True, "batch_size": 32, "set_to_none": True},
        {},
    ),
    "amp_fp16+clip": ((AMP("fp16"),), {"amp": "fp16"}, {"max_grad_norm": 0.05}),
    "amp_bf16": ((AMP("bf16"),), {"amp": "bf16"}, {}),
    "amp_bf16+clip": ((AMP("bf16"),), {"amp": "bf16"}, {"max_grad_norm": 0.05}),
    "torchscript": ((TorchScript(),), {"graph": "torchscript"}, {}),
    "compile_eager": ((Compile(backend="eager"),), {"graph": "compile", "compile_backend": "eager"}, {}),
    "amp_fp16+set_to_none+clip+compile_eager": (
        (AMP("fp16"), SetToNone(), Compile(backend="eager")),
        {"amp": "fp16", "set_to_none": True, "graph": "compile", "compile_backend": "eager"},
        {"max_grad_norm": 0.05},
    ),
}


@pytest.mark.parametrize("config", CONFIGS)
def test_stack_reproduces_reference(config, model, dataset, fresh_dynamo):
    members, ref_kwargs, common = CONFIGS[config]
    members = tuple(type(m)(**m.params()) for m in members)  # fresh state (AMP's scaler) per run
    want = reference_losses(model, dataset, STEPS, **ref_kwargs, **common)
    torch._dynamo.reset()
    got = stack_losses(compose(*members), model, dataset, STEPS, **common)
    assert got == want


@pytest.mark.parametrize("amp", [None, "fp16", "bf16"])
def test_clipping_is_active_in_reference_configs(amp, model, dataset):
    # Otherwise the "+clip" configurations above would not test clipping at all.
    clipped = reference_losses(model, dataset, STEPS, amp=amp, max_grad_norm=0.05)
    unclipped = reference_losses(model, dataset, STEPS, amp=amp)
    assert clipped != unclipped


@pytest.mark.slow
def test_stack_reproduces_reference_compile_inductor(model, dataset, fresh_dynamo):
    if (reason := Compile().check("cpu")) is not None:
        pytest.skip(reason)
    want = reference_losses(model, dataset, STEPS, graph="compile")
    torch._dynamo.reset()
    got = stack_losses(compose(Compile()), model, dataset, STEPS)
    assert got == want


# --------------------------------------------------------------------------- order


class Wrap(Strategy):
    """Test-only model wrapper with the default order 0: graph capture must wrap *it*, not the reverse."""

    name = "wrap"

    class Module(nn.Module):
        def __init__(self, inner: nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.inner(x)

    def prepare_model(self, model: nn.Module) -> nn.Module:
        return Wrap.Module(model)


def test_order_of_compose_arguments_does_not_matter(model, dataset):
    a = compose(TorchScript(), Wrap(), SetToNone(), AMP("bf16"), PinMemory())
    b = compose(PinMemory(), AMP("bf16"), SetToNone(), Wrap(), TorchScript())
    assert [m.name for m in a][-1] == "torchscript" == [m.name for m in b][-1]
    assert isinstance(a.prepare_model(model), torch.jit.ScriptModule)
    assert isinstance(b.prepare_model(model), torch.jit.ScriptModule)
    assert stack_losses(a, model, dataset, STEPS) == stack_losses(b, model, dataset, STEPS)


def test_members_sorted_by_order_ties_kept_in_given_order():
    stack = compose(Compile(backend="eager"), SetToNone(), AMP("bf16"), PinMemory())
    assert [m.name for m in stack] == ["set_to_none", "amp", "pin_memory", "compile"]


def test_workers_keep_the_batch_order_over_several_epochs(model, dataset):
    # Persistent workers draw the DataLoader's per-epoch seed only once; from epoch 2 on the order must still be
    # the plain loop's (256 samples in batches of 16: three epochs).
    plain = stack_losses(compose(), model, dataset, 48)
    for workers in (NumWorkers(2), NumWorkers(2, persistent=False)):
        assert stack_losses(compose(workers), model, dataset, 48) == plain


def test_a_loader_built_from_loader_kwargs_alone_draws_the_plain_batches_every_epoch(dataset):
    """A user's own DataLoader from `stack.loader_kwargs(...)`: the same batches as without workers, in epoch 3 as
    in epoch 1 (persistent workers under a seeded shuffle shuffled differently from epoch 2)."""
    from torch.utils.data import DataLoader

    def epochs(**kwargs) -> list[list[torch.Tensor]]:
        loader = DataLoader(dataset, **kwargs)
        return [[targets for _, targets in loader] for _ in range(3)]

    plain = epochs(batch_size=64, shuffle=True, generator=torch.Generator().manual_seed(7))
    for workers in (NumWorkers(2), NumWorkers(2, persistent=False)):
        mine = epochs(**compose(workers).loader_kwargs(batch_size=64, shuffle=True,
                                                        generator=torch.Generator().manual_seed(7)))
        assert all(torch.equal(a, b) for e, f in zip(plain, mine) for a, b in zip(e, f)), workers.params()
    unseeded = NumWorkers(2).loader_kwargs(batch_size=64, shuffle=True)
    assert unseeded["persistent_workers"] is True  # nothing to keep in step: the workers persist


def test_o2_masters_follow_channels_last(model, dataset):
    # The fp32 masters are copied before ChannelsLast converts the model: they must take its layout, or the
    # fused optimizer pairs master and gradient elements wrongly.
    def run(*extra):
        half = HalfPrecision("bf16", master_weights=True)
        stack = compose(half, FusedOptimizer("fused"), *extra)
        return stack_losses(stack, model, dataset, 3), half

    plain, _ = run()
    nhwc, half = run(ChannelsLast())
    assert all(m.stride() == p.stride() for p, m in half._pairs)
    assert nhwc == pytest.approx(plain, rel=1e-3)
