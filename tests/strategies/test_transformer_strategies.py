"""The transformer techniques on a tiny transformer (tests/support/tiny_transformer.py): numerics against references.

Tolerances are per loss over 5 Adam steps (losses ~5.5, ln 256). Reordered fp32 arithmetic (recomputation,
a compiled update, another attention kernel) drifts by ~1e-6 relative here, so 1e-4 is "equal within float
tolerance" while a lost gradient, a stale weight or a wrong mask moves a loss by far more.
"""
from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from strategies import (
    AMP,
    ActivationCheckpointing,
    AttentionBackend,
    BatchSize,
    Compile,
    CompiledOptimizer,
    Float8,
    compose,
)

from tiny_transformer import make_text, make_transformer, next_byte_loss, transformer_losses

FLOAT_TOLERANCE = 1e-4


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.fixture(scope="module")
def eager_losses():
    return transformer_losses(compose())


def assert_close(got: list[float], want: list[float], rel: float) -> None:
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert a == pytest.approx(b, rel=rel)


def test_losses_move(eager_losses):
    assert len(set(eager_losses)) == len(eager_losses)  # guards the comparisons below against a loop that never trains


# --------------------------------------------------------------------------- activation checkpointing


@pytest.mark.parametrize("every", [1, 2])
def test_checkpointing_equals_the_plain_loop(every, eager_losses):
    assert_close(transformer_losses(compose(ActivationCheckpointing(every)), depth=2), eager_losses, FLOAT_TOLERANCE)


def _saved_bytes(model: torch.nn.Module) -> int:
    """Bytes autograd keeps for the backward of one forward."""
    total = 0

    def pack(t: torch.Tensor) -> torch.Tensor:
        nonlocal total
        total += t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        next_byte_loss(model, *make_text(8))
    return total


def test_checkpointing_keeps_fewer_activations_for_the_backward():
    plain = _saved_bytes(make_transformer(depth=4))
    every_other = _saved_bytes(ActivationCheckpointing(2).prepare_model(make_transformer(depth=4)))
    every = _saved_bytes(ActivationCheckpointing(1).prepare_model(make_transformer(depth=4)))
    assert every < every_other < plain


# --------------------------------------------------------------------------- attention kernels


def test_flash_attention_on_a_cpu_stays_close_to_math(eager_losses):
    math = transformer_losses(compose(AttentionBackend("math")))
    flash = transformer_losses(compose(AttentionBackend("flash")))
    assert_close(flash, math, FLOAT_TOLERANCE)
    assert_close(math, eager_losses, FLOAT_TOLERANCE)


def test_a_forced_kernel_that_cannot_run_errors_instead_of_falling_back():
    stack = compose(AttentionBackend("efficient"))  # no CPU kernel
    with pytest.raises(RuntimeError, match="No viable backend"):
        transformer_losses(stack, steps=1)


@pytest.mark.slow
def test_a_forced_kernel_is_respected_under_compile():
    # Compile traces the forward inside the context, so the constraint reaches the traced attention too.
    if reason := Compile().check("cpu"):
        pytest.skip(reason)
    with pytest.raises(Exception, match="fake tensor"):
        transformer_losses(compose(Compile(), AttentionBackend("efficient")), steps=1)


def test_the_forced_kernel_is_the_one_that_runs():
    q = torch.randn(2, 2, 8, 4)
    with torch.profiler.profile() as prof, AttentionBackend("math").autocast("cpu"):
        F.scaled_dot_product_attention(q, q, q, is_causal=True)
    names = {e.name for e in prof.events()}
    assert "aten::_scaled_dot_product_attention_math" in names
    assert not any("flash" in n for n in names)
    with torch.profiler.profile() as prof, AttentionBackend("flash").autocast("cpu"):
        F.scaled_dot_product_attention(q, q, q, is_causal=True)
    assert any("flash_attention" in e.name for e in prof.events())


# --------------------------------------------------------------------------- compiled optimizer and regional compile


@pytest.mark.slow
def test_compiled_optimizer_equals_the_eager_step(eager_losses):
    if reason := CompiledOptimizer().check("cpu"):
        pytest.skip(reason)
    assert_close(transformer_losses(compose(CompiledOptimizer())), eager_losses, FLOAT_TOLERANCE)


def test_the_compiled_step_is_prepared_after_the_master_weights_whatever_the_order():
    from strategies import HalfPrecision

    for members in ((CompiledOptimizer(), HalfPrecision("bf16", master_weights=True)),
                    (HalfPrecision("bf16", master_weights=True), CompiledOptimizer())):
        stack = compose(*members)
        model = stack.prepare_model(make_transformer())
        optimizer = stack.prepare_optimizer(torch.optim.Adam(model.parameters(), lr=1e-3))
        assert "step" in vars(optimizer)  # the compiled one, on the instance
        assert all(p.dtype == torch.float32 for g in optimizer.param_groups for p in g["params"])  # the masters


@pytest.mark.slow
def test_compiled_optimizer_does_not_recompile_when_the_warm_up_changes_the_lr():
    from torch._dynamo.utils import counters

    if reason := CompiledOptimizer().check("cpu"):
        pytest.skip(reason)
    counters.clear()
    warm = BatchSize(8, warmup_steps=4)
    warm.loader_kwargs(batch_size=8)
    stack = compose(CompiledOptimizer(), warm)
    eager = compose(BatchSize(8, warmup_steps=4))
    eager.loader_kwargs(batch_size=8)
    assert_close(transformer_losses(stack, steps=5), transformer_losses(eager, steps=5), FLOAT_TOLERANCE)
    assert counters["stats"]["unique_graphs"] == 1
    assert warm.scheduler.get_last_lr()[0].item() == pytest.approx(1e-3)  # warmed up, in the tensor


@pytest.mark.slow
def test_regional_compile_compiles_one_block_for_all():
    from torch._dynamo.utils import counters

    if reason := Compile().check("cpu"):
        pytest.skip(reason)
    captured = {}
    for regional in (False, True):
        torch._dynamo.reset()
        counters.clear()
        losses = transformer_losses(compose(Compile(regional=regional), ActivationCheckpointing()), depth=3)
        assert_close(losses, transformer_losses(compose(), depth=3), FLOAT_TOLERANCE)
        assert counters["stats"]["unique_graphs"] == 1  # regional: three blocks, one graph - the code is reused
        captured[regional] = counters["stats"]["calls_captured"]
    # What is traced and compiled, the one-off cost's source: one block's ops, not the three blocks' and the rest.
    assert captured[True] * 3 < captured[False]


# --------------------------------------------------------------------------- batch size with a scaled learning rate


@pytest.mark.parametrize("rule, factor", [("none", 1.0), ("linear", 4.0), ("sqrt", 2.0)])
def test_lr_scaling_rules(rule, factor):
    strategy = BatchSize(64, lr_scaling=rule)
    stack = compose(strategy)
    assert stack.loader_kwargs(batch_size=16, shuffle=True)["batch_size"] == 64
    optimizer = stack.prepare_optimizer(torch.optim.SGD(make_transformer().parameters(), lr=0.1))
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.1 * factor)


def test_lr_scaling_needs_the_baselines_batch_size():
    with pytest.raises(RuntimeError, match="relative to the baseline's batch size"):
        BatchSize(64, lr_scaling="linear").prepare_optimizer(torch.optim.SGD(make_transformer().parameters(), lr=0.1))


@pytest.mark.parametrize("tensor_lr", [False, True], ids=["float_lr", "tensor_lr"])
def test_warm_up_rises_linearly_to_the_scaled_lr(tensor_lr):
    strategy = BatchSize(32, lr_scaling="linear", warmup_steps=4)
    strategy.loader_kwargs(batch_size=16)
    model = make_transformer()
    lr = torch.tensor(0.1) if tensor_lr else 0.1
    optimizer = compose(strategy).prepare_optimizer(torch.optim.SGD(model.parameters(), lr=lr))
    seen = []
    for _ in range(6):
        seen.append(float(optimizer.param_groups[0]["lr"]))
        next_byte_loss(model, *make_text(4)).backward()
        optimizer.step()
    assert seen == pytest.approx([0.05, 0.1, 0.15, 0.2, 0.2, 0.2])  # step t uses (t + 1) / 4 of 0.2
    assert isinstance(optimizer.param_groups[0]["lr"], torch.Tensor) is tensor_lr


def test_a_skipped_fp16_step_does_not_advance_the_warm_up():
    strategy = BatchSize(16, warmup_steps=4)
    strategy.loader_kwargs(batch_size=16)
    amp = AMP("fp16")
    stack = compose(amp, strategy)
    model = make_transformer()
    optimizer = stack.prepare_optimizer(torch.optim.SGD(model.parameters(), lr=0.1))
    with stack.autocast("cpu"):
        loss = next_byte_loss(model, *make_text(4))
    stack.backward(loss)
    next(model.parameters()).grad.view(-1)[0] = float("inf")
    stack.step(optimizer)
    assert amp.skipped_steps == 1 and optimizer.param_groups[0]["lr"] == pytest.approx(0.025)


# --------------------------------------------------------------------------- float8


@pytest.mark.parametrize("recipe", ["tensorwise", "rowwise"])
def test_emulated_float8_on_a_cpu_stays_close_to_fp32(recipe):
    # torchao's emulation (Float8LinearConfig(emulate=True)) casts to float8 and back as the GPU recipe does but
    # multiplies in fp32, so the conversion, the scaling and the gradients are checked without a float8 GPU.
    # Relative 1e-2 per loss over 5 steps (observed ~7e-4): e4m3's 3 mantissa bits, averaged over the matmuls.
    pytest.importorskip("torchao.float8", reason="torchao is not installed (pip install 'ablate[float8]')")
    import dataclasses
    from unittest import mock

    from torchao.float8 import Float8LinearConfig

    recipe_config = Float8LinearConfig.from_recipe_name
    with mock.patch.object(Float8LinearConfig, "from_recipe_name",
                           lambda name: dataclasses.replace(recipe_config(name), emulate=True)):
        float8 = transformer_losses(compose(Float8(recipe)), width=64, heads=4)
    fp32 = transformer_losses(compose(), width=64, heads=4)
    assert_close(float8, fp32, 1e-2)
    assert float8 != fp32, "float8 had no effect at all"




@pytest.mark.gpu
@pytest.mark.parametrize("recipe", ["tensorwise", "rowwise"])
def test_float8_stays_close_to_bf16(recipe):
    # Relative 5e-2 per loss over 5 steps: e4m3 keeps 3 mantissa bits (rounding ~6e-2 per element) but the scaled
    # matmuls average it out; a conversion that lost the gradient or the scale moves the loss far more.
    stack = compose(Float8(recipe), AMP("bf16"))
    if reason := stack.check("cuda"):
        pytest.skip(reason)
    bf16 = transformer_losses(compose(AMP("bf16")), device="cuda", width=64, heads=4)
    float8 = transformer_losses(stack, device="cuda", width=64, heads=4)
    assert_close(float8, bf16, 5e-2)
    assert float8 != bf16, "float8 had no effect at all"


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["flash", "efficient", "cudnn"])
def test_cuda_attention_kernels_stay_close_to_math(backend):
    # bf16 inputs (flash and cuDNN take no fp32): relative 2e-2 per loss, bf16's rounding with margin.
    stack = compose(AttentionBackend(backend), AMP("bf16"))
    if reason := stack.check("cuda"):
        pytest.skip(reason)
    math = transformer_losses(compose(AttentionBackend("math"), AMP("bf16")), device="cuda", width=64, heads=4)
    assert_close(transformer_losses(stack, device="cuda", width=64, heads=4), math, 2e-2)
