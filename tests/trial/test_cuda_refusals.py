"""CUDA's own refusals, played on a CPU (see fake_cuda.py): each test here failed on the code before its fix."""
from __future__ import annotations

import copy

import pytest
import torch
from torch.nn import functional as F

from strategies import AMP, AttentionBackend, Compile, CUDAGraphs, HalfPrecision, SetToNone, compose

from fake_cuda import FakeAllocator, FakeCUDA, GraphPool
from tiny_cnn import make_dataset, make_model
from tiny_transformer import make_transformer


def test_the_fake_refuses_an_index_less_device_as_torch_does(monkeypatch):
    fake = FakeCUDA().install(monkeypatch)
    with pytest.raises(ValueError, match="Expected a torch.device with a specified index"):
        torch.cuda.set_device(torch.device("cuda"))
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        torch.cuda.set_device("cuda:2")
    torch.cuda.set_device("cuda:1")
    assert fake.current == 1


def test_the_fakes_read_a_device_s_properties_and_memory_as_torch_does(monkeypatch):
    # torch.cuda.get_device_properties: None or "cuda" is the current device; a CPU or a missing index is refused.
    fake = FakeCUDA(current=1).install(monkeypatch)
    assert torch.cuda.get_device_name() == torch.cuda.get_device_name("cuda") == FakeCUDA.NAME
    assert torch.cuda.get_device_capability(torch.device("cuda:0")) == (9, 0) and fake.asked == [1, 1, 0]
    with pytest.raises(ValueError, match="Expected a cuda device, but got: cpu"):
        torch.cuda.get_device_name("cpu")
    with pytest.raises(AssertionError, match="Invalid device id"):
        torch.cuda.get_device_capability("cuda:2")
    # The allocator's statistics and synchronize: the current device by default, no index beyond the devices.
    FakeAllocator().install(monkeypatch)
    torch.cuda.synchronize("cuda")
    torch.cuda.reset_peak_memory_stats()
    assert torch.cuda.max_memory_reserved(torch.device("cuda")) == 0
    with pytest.raises(RuntimeError, match="Invalid device argument 2"):
        torch.cuda.max_memory_allocated("cuda:2")
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        torch.cuda.synchronize(2)
    with pytest.raises(ValueError, match="Expected a cuda device"):
        torch.cuda.synchronize(torch.device("cpu"))


def test_a_bare_cuda_device_becomes_the_current_one_in_the_record_and_its_tags(monkeypatch):
    from ablate.run.preflight import device
    from ablate.trial.machine import describe

    FakeCUDA(current=1).install(monkeypatch)
    assert device("cuda") == torch.device("cuda:1")
    machine = describe("cuda")
    assert machine.device == "cuda:1" and machine.tags()["ablate.device"] == "cuda:1"
    assert machine.device_name == FakeCUDA.NAME


def test_a_cuda_device_this_machine_lacks_is_refused_in_one_line(monkeypatch):
    from ablate.config.study import StudyError
    from ablate.run.preflight import runnable

    FakeCUDA(count=2).install(monkeypatch)
    with pytest.raises(StudyError, match=r"--device cuda:2: this machine has 2 CUDA device\(s\), cuda:0 to cuda:1"):
        runnable(torch.device("cuda:2"))


class _Stop(Exception):
    pass


def test_a_trial_on_a_bare_cuda_device_sets_the_current_device(monkeypatch):
    # `ablate run --device cuda` (what `make gpu` passes) reached torch.cuda.set_device(torch.device("cuda")).
    from test_trial_process import _spec

    from ablate.trial import process

    fake = FakeCUDA(current=1).install(monkeypatch)

    def loading_data(text):
        raise _Stop(text)  # past set_device: the trial goes on to load data, which needs no GPU to be reached

    monkeypatch.setattr(process, "phase", loading_data)
    spec = _spec()
    with pytest.raises(_Stop, match="loading data"):
        process.run(process.TrialSpec(spec.study, spec.options, "cuda", train_for_accuracy=False))
    assert fake.set_to == [1]


def _train(model: torch.nn.Module, steps: int, zero_grad) -> torch.nn.Module:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    data = make_dataset(64)
    for step in range(steps):
        inputs, targets = data.tensors[0][step * 16:(step + 1) * 16], data.tensors[1][step * 16:(step + 1) * 16]
        F.cross_entropy(model(inputs), targets).backward()
        optimizer.step()
        zero_grad(optimizer)
    return model


def _weights(model: torch.nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in model.parameters()]


ZERO_FILL = lambda optimizer: optimizer.zero_grad(set_to_none=False)  # noqa: E731 - the baseline's loop
TO_NONE = lambda optimizer: optimizer.zero_grad(set_to_none=True)  # noqa: E731


def test_without_gradients_outside_the_pool_a_zero_filling_loop_trains_on_overwritten_memory():
    # The stand-in reproduces the crash's cause: the first backward's gradients are adopted from the pool.
    want = _weights(_train(make_model(), 3, ZERO_FILL))
    got = _weights(_train(GraphPool(make_model()), 3, ZERO_FILL).inner)
    # The replay wrote the next gradients where the adopted ones were, and autograd then added them to themselves.
    assert not all(torch.equal(a, b) for a, b in zip(want, got, strict=True))


@pytest.mark.parametrize("strategy", [CUDAGraphs(), CUDAGraphs("eager"), Compile(mode="reduce-overhead"),
                                      Compile(mode="max-autotune")], ids=repr)
@pytest.mark.parametrize("zero_grad", [ZERO_FILL, TO_NONE], ids=["zero-fill", "set-to-none"])
def test_graph_capturing_strategies_keep_gradients_outside_the_pool(strategy, zero_grad):
    want = _weights(_train(make_model(), 3, zero_grad))
    model = make_model()
    strategy.prepare_model(model)  # on a CPU this only wraps lazily; what matters is what it did to `model` first
    torch._dynamo.reset()
    assert all(p.grad is not None and not p.grad.any() for p in model.parameters())
    got = _weights(_train(GraphPool(model), 3, zero_grad).inner)
    assert all(torch.equal(a, b) for a, b in zip(want, got, strict=True))


def test_compile_without_graphs_leaves_gradients_alone():
    model = make_model()
    Compile().prepare_model(model)
    torch._dynamo.reset()
    assert all(p.grad is None for p in model.parameters())


def test_cuda_graphs_sets_inductor_to_refuse_a_silent_fallback():
    from torch._inductor import config

    CUDAGraphs().prepare_model(make_model())
    torch._dynamo.reset()
    assert config.triton.cudagraph_or_error


@pytest.mark.parametrize("mode", ["reduce-overhead", "max-autotune"])
def test_compile_in_a_cuda_graph_mode_refuses_a_silent_fallback_as_cuda_graphs_does(mode):
    # Inductor would run a graph it cannot capture without CUDA graphs ("skipping cudagraphs due to ..."), and the
    # row would be timed as graphed.
    from torch._inductor import config

    for regional in (False, True):
        config.triton.cudagraph_or_error = False
        model = make_transformer(depth=2) if regional else make_model()
        Compile(mode=mode, regional=regional).prepare_model(model)
        torch._dynamo.reset()
        assert config.triton.cudagraph_or_error, (mode, regional)
    assert set(Compile(mode=mode).metrics()) == {"cudagraph_skips"}  # for a PyTorch without the setting


@pytest.mark.parametrize("compile_", [Compile(), Compile(mode="max-autotune-no-cudagraphs"),
                                      Compile(mode="reduce-overhead", backend="aot_eager")], ids=repr)
def test_compile_without_cuda_graphs_leaves_inductor_s_fallback_setting_alone(compile_):
    from torch._inductor import config

    compile_.prepare_model(make_model())
    torch._dynamo.reset()
    assert not config.triton.cudagraph_or_error and compile_.metrics() == {}


def test_a_pytorch_without_cudagraph_or_error_is_left_to_the_trial_s_skip_check(monkeypatch):
    from types import SimpleNamespace

    import torch._inductor

    from strategies.compile import refuse_cudagraph_fallback

    older = SimpleNamespace(triton=SimpleNamespace())  # an Inductor config without the setting
    monkeypatch.setattr(torch._inductor, "config", older)
    refuse_cudagraph_fallback()  # what Compile and CUDAGraphs call: nothing to set, nothing raised
    assert vars(older.triton) == {}


def test_the_trial_refuses_a_fallback_of_any_graph_capturing_strategy():
    from ablate.trial.process import cudagraph_fallback

    assert cudagraph_fallback({"compile.cudagraph_skips": 0.0, "amp.loss_scale": 1.0}) is None
    for name in ("compile", "cuda_graphs"):
        why = cudagraph_fallback({f"{name}.cudagraph_skips": 2.0})
        assert why and why.startswith("skipping cudagraphs") and f"2 graph(s) of {name}" in why


def test_the_trial_s_skip_check_covers_compile_in_a_cuda_graph_mode(monkeypatch):
    # What `process.run` asks of the stack after training, on CUDA (on a CPU Inductor counts every graph of a
    # CUDA-graph mode as a skip, and nothing is refused there).
    from ablate.trial.process import cudagraph_fallback

    monkeypatch.setattr("strategies.compile.cudagraph_skips", lambda: 1)
    why = cudagraph_fallback(compose(Compile(mode="reduce-overhead"), SetToNone()).metrics())
    assert why and "1 graph(s) of compile without CUDA graphs" in why
    assert cudagraph_fallback(compose(Compile(), SetToNone()).metrics()) is None


def test_and_that_setting_does_not_leak_into_the_next_test():
    from torch._inductor import config

    assert not config.triton.cudagraph_or_error


@pytest.mark.parametrize("backend", ["flash", "cudnn"])
def test_fused_attention_that_needs_half_inputs_is_skipped_with_a_reason_without_amp(monkeypatch, backend):
    FakeCUDA().install(monkeypatch)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    monkeypatch.setattr(torch.backends.cudnn, "is_available", lambda: True)
    reason = compose(AttentionBackend(backend)).check("cuda:0")
    assert reason and "fp16/bf16 inputs only" in reason and "amp or half_precision" in reason
    assert compose(AttentionBackend(backend), SetToNone()).check("cuda:0") == reason
    for half in (AMP("bf16"), HalfPrecision("bf16")):
        assert compose(AttentionBackend(backend), half).check("cuda:0") is None
    assert compose(AttentionBackend("efficient")).check("cuda:0") is None  # takes fp32 too
    assert compose(AttentionBackend(backend)).check("cpu") is None or backend == "cudnn"


def test_graph_pool_stand_in_is_not_a_no_op():
    # Without a replay in between, the stand-in's gradients equal eager ones: it changes memory, not arithmetic.
    model = make_model()
    wrapped = GraphPool(copy.deepcopy(model))
    x = make_dataset(16).tensors[0]
    model(x).sum().backward()
    wrapped(x).sum().backward()
    assert all(torch.allclose(a.grad, b.grad) for a, b in zip(model.parameters(), wrapped.inner.parameters()))
