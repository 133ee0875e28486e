"""One contract every registered strategy must keep, driven by the SETTINGS table.

Adding a strategy to REGISTRY without a SETTINGS row (or leaving a stale row
behind) fails `test_settings_cover_registry` and the parametrised tests.
"""
from __future__ import annotations

import copy
import importlib.util
import inspect
from typing import Any, Callable, NamedTuple
from unittest import mock

import pytest
import torch
import yaml
from torch import nn
from torch.nn import functional as F
from torch.utils.checkpoint import checkpoint
from torch.utils.data import DataLoader, TensorDataset

import strategies
from strategies import (
    REGISTRY,
    ConflictError,
    NumWorkers,
    PinMemory,
    Stack,
    Strategy,
    compose,
    fp32_precision,
    set_fp32_precision,
)
from strategies.base import PHASES, TARGETS

PASSTHROUGH = {"batch_size": 8, "shuffle": True, "drop_last": False, "collate_fn": None}


# --------------------------------------------------------------------------- effect checkers


def _assert_passthrough(out: dict[str, Any], set_keys: set[str]) -> None:
    for key, value in PASSTHROUGH.items():
        if key not in set_keys:
            assert key in out and out[key] is value, f"{key} was not passed through unchanged"
    assert set(out) == set(PASSTHROUGH) | set_keys


def _train_one_step(stack: Stack, model: torch.nn.Module, batch, max_grad_norm=None,
                    optimizer: torch.optim.Optimizer | None = None) -> torch.optim.Optimizer:
    optimizer = optimizer or stack.prepare_optimizer(torch.optim.Adam(model.parameters(), lr=1e-3))
    inputs, targets = stack.to_device(batch, "cpu")
    with stack.autocast("cpu"):
        loss = F.cross_entropy(model(inputs), targets)
    stack.backward(loss)
    stack.step(optimizer, max_grad_norm=max_grad_norm)
    return optimizer


def effect_num_workers(s: Strategy, env: dict) -> None:
    out = s.loader_kwargs(**PASSTHROUGH)
    assert out["num_workers"] == 2
    assert out["persistent_workers"] is True
    _assert_passthrough(out, {"num_workers", "persistent_workers"})
    # No workers: DataLoader rejects persistent_workers=True, so it must be off.
    zero = type(s)(0).loader_kwargs(**PASSTHROUGH)
    assert zero["num_workers"] == 0 and zero["persistent_workers"] is False
    DataLoader(env["dataset"], **zero)  # accepted by DataLoader


def effect_pin_memory(s: Strategy, env: dict) -> None:
    out = s.loader_kwargs(**PASSTHROUGH)
    assert out["pin_memory"] is True
    _assert_passthrough(out, {"pin_memory"})
    # to_device still lands the batch on the device.
    moved = s.to_device(env["batch"], "cpu")
    assert all(t.device.type == "cpu" for t in moved)
    if torch.cuda.is_available():
        loader = DataLoader(env["dataset"], **out)
        inputs, targets = next(iter(loader))
        assert inputs.is_pinned() and targets.is_pinned()
        on_gpu = s.to_device((inputs, targets), "cuda")
        assert all(t.device.type == "cuda" for t in on_gpu)


def effect_batch_size(s: Strategy, env: dict) -> None:
    out = s.loader_kwargs(**PASSTHROUGH)
    assert out["batch_size"] == 32
    _assert_passthrough(out, {"batch_size"})
    inputs, _ = next(iter(DataLoader(env["dataset"], **out)))
    assert inputs.shape[0] == 32
    optimizer = torch.optim.SGD(env["model_factory"]().parameters(), lr=0.1)
    assert s.prepare_optimizer(optimizer) is optimizer and optimizer.param_groups[0]["lr"] == 0.1  # no scaling
    scaled = type(s)(32, lr_scaling="linear")
    scaled.loader_kwargs(**PASSTHROUGH)  # the baseline's batch_size: 8
    scaled.prepare_optimizer(optimizer)
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.4)


def effect_compiled_optimizer(s: Strategy, env: dict) -> None:
    model = env["model_factory"]()
    plain = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.8, 0.9))
    with mock.patch("torch.compile", wraps=torch.compile) as spy:
        compiled = s.prepare_optimizer(plain)
    spy.assert_called_once()
    assert type(compiled) is torch.optim.Adam and compiled is not plain and compiled.defaults["betas"] == (0.8, 0.9)
    lr = compiled.param_groups[0]["lr"]
    assert isinstance(lr, torch.Tensor) and lr.item() == pytest.approx(1e-3)
    before = [p.detach().clone() for p in model.parameters()]
    _train_one_step(compose(s), model, env["batch"], optimizer=compiled)
    assert all(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
    with pytest.raises(ConflictError, match="declared incompatible"):
        compose(s, REGISTRY["fused_optimizer"]())


def effect_float8(s: Strategy, env: dict) -> None:
    from strategies.float8 import float8_eligible

    assert s.recipe == "tensorwise"
    assert float8_eligible(nn.Linear(32, 16), "head") and not float8_eligible(nn.Linear(32, 10), "head")
    assert not float8_eligible(nn.Conv2d(16, 16, 1), "conv")
    assert "CUDA-only" in s.check("cpu")
    if importlib.util.find_spec("torchao") is None:
        with pytest.raises(RuntimeError, match=r"needs torchao.*pip install 'ablate\[float8\]'"):
            s.prepare_model(nn.Linear(16, 16))
        return
    from torchao.float8.float8_linear import Float8Linear

    model = s.prepare_model(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 10)))
    assert isinstance(model[0], Float8Linear) and type(model[2]) is nn.Linear  # 10 outputs: kept
    with pytest.raises(ValueError, match="divisible by 16"):
        s.prepare_model(env["model_factory"]())  # the CNN's only linear has 10 outputs


def effect_attention_backend(s: Strategy, env: dict) -> None:
    q = torch.randn(2, 2, 8, 4)
    with s.autocast("cpu"):
        flash = F.scaled_dot_product_attention(q, q, q, is_causal=True)
    torch.testing.assert_close(flash, F.scaled_dot_product_attention(q, q, q, is_causal=True))
    with type(s)("efficient").autocast("cpu"), pytest.raises(RuntimeError, match="No viable backend"):
        F.scaled_dot_product_attention(q, q, q, is_causal=True)  # forced, not a silent fallback
    assert s.check("cpu") is None and "CUDA-only" in type(s)("cudnn").check("cpu")


def effect_activation_checkpointing(s: Strategy, env: dict) -> None:
    from tiny_transformer import make_text, make_transformer, next_byte_loss

    model = make_transformer(depth=3)
    prepared = s.prepare_model(model)
    assert prepared is model and all("forward" in vars(b) for b in model.blocks)
    inputs, targets = make_text(4)
    with mock.patch("strategies.activation_checkpointing.checkpoint", wraps=checkpoint) as spy:
        next_byte_loss(model, inputs, targets).backward()
    assert spy.call_count == 3 and all(c.kwargs["use_reentrant"] is False for c in spy.call_args_list)
    every_other = type(s)(2).prepare_model(make_transformer(depth=3))
    assert ["forward" in vars(b) for b in every_other.blocks] == [True, False, True]
    with pytest.raises(ValueError, match="nn.ModuleList whose members all have the same class"):
        s.prepare_model(env["model_factory"]())


def effect_set_to_none(s: Strategy, env: dict) -> None:
    model = env["model_factory"]()
    _train_one_step(compose(s), model, env["batch"])
    assert all(p.grad is None for p in model.parameters())
    # Without it, the bare loop zero-fills.
    bare = env["model_factory"]()
    _train_one_step(compose(), bare, env["batch"])
    for p in bare.parameters():
        assert p.grad is not None and torch.count_nonzero(p.grad) == 0


def effect_amp(s: Strategy, env: dict) -> None:
    assert s.dtype == "fp16"
    assert not torch.is_autocast_enabled("cpu")
    with s.autocast("cpu"):
        assert torch.is_autocast_enabled("cpu")
        assert torch.get_autocast_dtype("cpu") == torch.float16
        assert env["model_factory"]()(env["batch"][0]).dtype == torch.float16
    assert not torch.is_autocast_enabled("cpu")
    _train_one_step(compose(s), env["model_factory"](), env["batch"])
    assert s.scaler is not None

    bf16 = type(s)("bf16")
    with bf16.autocast("cpu"):
        assert torch.get_autocast_dtype("cpu") == torch.bfloat16
    _train_one_step(compose(bf16), env["model_factory"](), env["batch"])
    assert bf16.scaler is None


def effect_torchscript(s: Strategy, env: dict) -> None:
    model = env["model_factory"]()
    scripted = s.prepare_model(model)
    assert isinstance(scripted, torch.jit.ScriptModule)
    torch.testing.assert_close(scripted(env["batch"][0]), model(env["batch"][0]))


def effect_compile(s: Strategy, env: dict) -> None:
    model = env["model_factory"]()
    with mock.patch("torch.compile", wraps=torch.compile) as spy:
        compiled = s.prepare_model(model)  # lazy: nothing compiles until the first forward
    assert isinstance(compiled, torch._dynamo.eval_frame.OptimizedModule)
    assert compiled._orig_mod is model
    spy.assert_called_once()
    assert spy.call_args.kwargs["backend"] == "inductor" and spy.call_args.kwargs["mode"] == "default"
    assert s.metrics() == {}  # no CUDA graphs in the default mode: no fallback from them to count
    assert set(type(s)(mode="reduce-overhead").metrics()) == {"cudagraph_skips"}

    from tiny_transformer import make_transformer

    model = make_transformer(depth=3)
    with mock.patch("torch.compile", wraps=torch.compile) as spy:
        regional = type(s)(regional=True).prepare_model(model)
    assert regional is model and spy.call_count == 3  # each block in place; embedding and head stay eager
    assert all(b._compiled_call_impl is not None for b in model.blocks) and model._compiled_call_impl is None
    assert spy.call_args.kwargs["mode"] == "default"
    with pytest.raises(ValueError, match="Compile\\(regional=True\\) needs the model's repeated blocks"):
        type(s)(regional=True).prepare_model(env["model_factory"]())


def _rgb_model() -> nn.Module:
    # Three channels: with one, NCHW and NHWC are the same layout and a conversion would not show.
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 10))


def effect_channels_last(s: Strategy, env: dict) -> None:
    model, reference = _rgb_model(), _rgb_model()
    prepared = s.prepare_model(model)
    weight = prepared[0].weight
    assert weight.is_contiguous(memory_format=torch.channels_last) and not weight.is_contiguous()
    inputs, targets = s.to_device((torch.randn(2, 3, 8, 8), torch.tensor([1, 2])), "cpu")
    assert inputs.is_contiguous(memory_format=torch.channels_last) and not inputs.is_contiguous()
    assert targets.tolist() == [1, 2]  # not 4-d: untouched
    torch.testing.assert_close(prepared(inputs), reference(inputs.contiguous()))


@pytest.fixture(autouse=True)
def _restore_backend_flags():
    # TF32 and CudnnBenchmark set process-wide flags; keep them from leaking into other tests. In the order
    # set_fp32_precision sets them, the legacy flags first: the other order leaves the getters disagreeing.
    from fp32_flags import restore, saved

    flags, benchmark = saved(), torch.backends.cudnn.benchmark
    yield
    restore(flags)
    torch.backends.cudnn.benchmark = benchmark


def effect_tf32(s: Strategy, env: dict) -> None:
    set_fp32_precision("ieee")
    assert fp32_precision() == "matmul=ieee conv=ieee"
    model = env["model_factory"]()
    assert s.prepare_model(model) is model
    assert fp32_precision() == "matmul=tf32 conv=tf32"
    assert "cpu" in s.check("cpu")


def effect_cudnn_benchmark(s: Strategy, env: dict) -> None:
    torch.backends.cudnn.benchmark = False
    model = env["model_factory"]()
    assert s.prepare_model(model) is model
    assert torch.backends.cudnn.benchmark is True
    assert "cpu" in s.check("cpu")


def effect_fused_optimizer(s: Strategy, env: dict) -> None:
    model = env["model_factory"]()
    plain = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.8, 0.9))
    fused = s.prepare_optimizer(plain)
    assert type(fused) is torch.optim.Adam and fused is not plain
    assert fused.defaults["fused"] is True and all(g["fused"] and not g["foreach"] for g in fused.param_groups)
    assert fused.defaults["betas"] == (0.8, 0.9) and fused.defaults["lr"] == 1e-3  # settings kept
    assert [id(p) for g in fused.param_groups for p in g["params"]] == [id(p) for p in model.parameters()]
    before = [p.detach().clone() for p in model.parameters()]
    _train_one_step(compose(s), model, env["batch"], optimizer=fused)
    assert all(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
    foreach = type(s)("foreach").prepare_optimizer(torch.optim.SGD(model.parameters(), lr=0.1))
    assert foreach.defaults["foreach"] is True and foreach.defaults["fused"] is False
    with pytest.raises(ValueError, match="LBFGS has no fused implementation"):
        s.prepare_optimizer(torch.optim.LBFGS(model.parameters()))
    with pytest.raises(ValueError, match="already stepped"):
        s.prepare_optimizer(fused)


def effect_device_resident_data(s: Strategy, env: dict) -> None:
    dataset = env["dataset"]
    for drop_last in (False, True):
        kwargs = {"batch_size": 24, "shuffle": True, "drop_last": drop_last}
        want = DataLoader(dataset, generator=torch.Generator().manual_seed(3), **kwargs)
        got = s.make_loader(dataset, "cpu", generator=torch.Generator().manual_seed(3), **kwargs)
        assert len(got) == len(want)
        for _ in range(2):  # a new shuffle each epoch, the DataLoader's
            pairs = list(zip(got, want, strict=True))
            assert all(torch.equal(a, b) for g, w in pairs for a, b in zip(g, w, strict=True))
    # Without a generator, both draw from the global RNG alike.
    torch.manual_seed(5)
    want = list(DataLoader(dataset, batch_size=50, shuffle=True))
    torch.manual_seed(5)
    got = list(s.make_loader(dataset, "cpu", batch_size=50, shuffle=True, collate_fn=None, num_workers=0))
    assert all(torch.equal(a, b) for g, w in zip(got, want, strict=True) for a, b in zip(g, w))
    with pytest.raises(ValueError, match="cannot honour DataLoader option.*sampler.*batch_size"):
        s.make_loader(dataset, "cpu", batch_size=8, sampler=range(8))
    for other in (NumWorkers(2), PinMemory()):
        with pytest.raises(ConflictError, match="declared incompatible"):
            compose(s, other)


def effect_cuda_graphs(s: Strategy, env: dict) -> None:
    model = env["model_factory"]()
    with mock.patch("torch.compile", wraps=torch.compile) as spy:
        graphed = s.prepare_model(model)
        type(s)("eager").prepare_model(model)
    assert isinstance(graphed, torch._dynamo.eval_frame.OptimizedModule) and graphed._orig_mod is model
    assert spy.call_args_list[0].kwargs == {"mode": "reduce-overhead"}
    assert spy.call_args_list[1].kwargs == {"backend": "cudagraphs"}
    assert "CUDA-only" in s.check("cpu")
    with pytest.raises(ConflictError):
        compose(s, REGISTRY["compile"]())


def effect_half_precision(s: Strategy, env: dict) -> None:
    assert (s.dtype, s.master_weights) == ("fp16", True)  # O2
    model, original = env["model_factory"](), env["model_factory"]()
    stack = compose(s)
    prepared = stack.prepare_model(model)
    assert prepared is model and all(p.dtype == torch.float16 for p in model.parameters())
    assert prepared(env["batch"][0]).dtype == torch.float32  # fp32 inputs accepted, fp32 logits for the loss
    optimizer = stack.prepare_optimizer(torch.optim.Adam(model.parameters(), lr=1e-3))
    masters = [p for g in optimizer.param_groups for p in g["params"]]
    assert all(m.dtype == torch.float32 for m in masters)
    assert all(torch.equal(m, p) for m, p in zip(masters, original.parameters(), strict=True))  # exact copies
    _train_one_step(stack, model, env["batch"], optimizer=optimizer)
    for p, m, before in zip(model.parameters(), masters, original.parameters()):
        assert p.grad is None and not torch.equal(m, before)
        assert torch.equal(p, m.half())  # the half weights are refreshed from the stepped masters
    assert s.metrics() == {"loss_scale": 2.0**16, "skipped_steps": 0.0}
    with pytest.raises(RuntimeError, match="prepare_optimizer"):
        _train_one_step(stack, model, env["batch"], optimizer=torch.optim.Adam(model.parameters()))

    pure = type(s)("bf16")  # O3-style: the optimizer steps on the half weights themselves
    model = pure.prepare_model(env["model_factory"]())
    assert model(env["batch"][0]).dtype == torch.bfloat16
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    assert pure.prepare_optimizer(optimizer) is optimizer
    _train_one_step(compose(pure), model, env["batch"], optimizer=optimizer)
    assert all(p.dtype == torch.bfloat16 for g in optimizer.param_groups for p in g["params"])
    assert pure.metrics() == {"loss_scale": 1.0, "skipped_steps": 0.0}


class Setting(NamedTuple):
    kwargs: dict[str, Any]
    effect: Callable[[Strategy, dict], None]
    hooks: frozenset[str]  # the hooks it overrides; every other hook must do nothing


SETTINGS: dict[str, Setting] = {
    "num_workers": Setting({"n": 2}, effect_num_workers, frozenset({"loader_kwargs", "check", "params"})),
    "pin_memory": Setting({}, effect_pin_memory, frozenset({"loader_kwargs", "to_device", "check"})),
    "batch_size": Setting({"n": 32}, effect_batch_size, frozenset({"loader_kwargs", "prepare_optimizer", "params"})),
    "set_to_none": Setting({}, effect_set_to_none, frozenset({"zero_grad"})),
    "amp": Setting(
        {"dtype": "fp16"}, effect_amp, frozenset({"autocast", "backward", "step", "check", "params", "metrics"})
    ),
    "torchscript": Setting({}, effect_torchscript, frozenset({"prepare_model"})),
    "compile": Setting({}, effect_compile, frozenset({"prepare_model", "check", "params", "metrics"})),
    "channels_last": Setting({}, effect_channels_last, frozenset({"prepare_model", "to_device"})),
    "tf32": Setting({}, effect_tf32, frozenset({"prepare_model", "check"})),
    "cudnn_benchmark": Setting({}, effect_cudnn_benchmark, frozenset({"prepare_model", "check"})),
    "fused_optimizer": Setting(
        {"impl": "fused"}, effect_fused_optimizer, frozenset({"prepare_optimizer", "check", "params"})
    ),
    "device_resident_data": Setting({}, effect_device_resident_data, frozenset({"make_loader"})),
    "compiled_optimizer": Setting({}, effect_compiled_optimizer, frozenset({"prepare_optimizer", "check"})),
    "float8": Setting({}, effect_float8, frozenset({"prepare_model", "check", "params"})),
    "attention_backend": Setting({}, effect_attention_backend, frozenset({"autocast", "check", "params"})),
    "activation_checkpointing": Setting({}, effect_activation_checkpointing, frozenset({"prepare_model", "params"})),
    "cuda_graphs": Setting({}, effect_cuda_graphs, frozenset({"prepare_model", "check", "params", "metrics"})),
    "half_precision": Setting(
        {"dtype": "fp16", "master_weights": True}, effect_half_precision,
        frozenset({"prepare_model", "prepare_optimizer", "backward", "step", "check", "params", "metrics"}),
    ),
}

CHANGES_NUMERICS = {
    "amp": True, "batch_size": True, "compile": True, "torchscript": True, "channels_last": True, "tf32": True,
    "cudnn_benchmark": True, "fused_optimizer": True, "cuda_graphs": True, "half_precision": True,
    "compiled_optimizer": True, "float8": True, "attention_backend": True, "activation_checkpointing": True,
    "num_workers": False, "pin_memory": False, "set_to_none": False, "device_resident_data": False,
}

# What each sets out to improve (`Strategy.targets`): a phase of the step, or memory. Pinned here so that a change
# is a decision made twice, as `changes_numerics` is.
TARGETS_OF = {
    "num_workers": {"data"}, "pin_memory": {"copy"}, "device_resident_data": {"data", "copy"},
    "batch_size": {"optimizer", "launch"}, "set_to_none": {"optimizer"}, "fused_optimizer": {"optimizer"},
    "compiled_optimizer": {"optimizer"}, "amp": {"compute"}, "half_precision": {"compute"}, "float8": {"compute"},
    "tf32": {"compute"}, "channels_last": {"compute"}, "cudnn_benchmark": {"compute"}, "attention_backend": {"compute"},
    "activation_checkpointing": {"memory"}, "torchscript": {"compute", "launch"}, "compile": {"compute", "launch"},
    "cuda_graphs": {"compute", "launch"},
}

# Whether a later process can start from what it compiled (`Strategy.caches_compiled_code`): the strategies that
# compile with Inductor, whose on-disk caches persist; a one-off cost nothing keeps (cuDNN's autotuning,
# TorchScript's profiling runs, moving the data) is not a cache.
CACHES_COMPILED_CODE = {"compile", "cuda_graphs", "compiled_optimizer"}

HOOKS = ("loader_kwargs", "make_loader", "prepare_model", "prepare_optimizer", "to_device", "autocast",
         "backward", "step", "zero_grad", "check", "params", "metrics")
OWNED = {"make_loader", "backward", "step", "zero_grad"}

NAMES = sorted(set(REGISTRY) | set(SETTINGS))


def make(name: str) -> Strategy:
    if name not in REGISTRY:
        pytest.fail(f"SETTINGS has {name!r}, which is not in REGISTRY")
    if name not in SETTINGS:
        pytest.fail(f"REGISTRY has {name!r} with no row in SETTINGS: add its kwargs and effect checker")
    return REGISTRY[name](**SETTINGS[name].kwargs)


@pytest.fixture
def env(model_factory, dataset, batch):
    return {"model_factory": model_factory, "dataset": dataset, "batch": batch}


# --------------------------------------------------------------------------- the contract


def test_settings_cover_registry():
    assert set(REGISTRY) == set(SETTINGS)
    assert set(REGISTRY) == set(CHANGES_NUMERICS)
    assert set(REGISTRY) == set(TARGETS_OF)


def _exported() -> list[type[Strategy]]:
    """Every strategy class the package exports, but the base class and the stack of them."""
    values = [getattr(strategies, name) for name in strategies.__all__]
    return [v for v in values if isinstance(v, type) and issubclass(v, Strategy) and v not in (Strategy, Stack)]


def _undeclared(classes: list[type[Strategy]]) -> list[str]:
    """The classes that do not declare, in their own body, a non-empty `targets` of known names."""
    return [c.__name__ for c in classes if not vars(c).get("targets") or not vars(c)["targets"] <= set(TARGETS)]


def test_every_exported_strategy_declares_what_it_targets():
    assert set(_exported()) == set(REGISTRY.values())
    assert _undeclared(_exported()) == []

    class Forgot(NumWorkers):  # a declaration inherited is not one: the subclass may target something else
        name = "forgot"

    class Misspelt(NumWorkers):
        targets = frozenset({"dataloading"})  # what mypy refuses in the package, caught here too

    assert _undeclared([Forgot, Misspelt]) == ["Forgot", "Misspelt"]


@pytest.mark.parametrize("name", NAMES)
def test_targets(name):
    assert make(name).targets == TARGETS_OF[name]


def test_a_stack_targets_what_its_members_target():
    assert compose().targets == frozenset()
    assert compose(NumWorkers(2), REGISTRY["compile"]()).targets == {"data", "compute", "launch"}
    assert TARGETS[:len(PHASES)] == PHASES and set(TARGETS) - set(PHASES) == {"memory"}


@pytest.mark.parametrize("name", NAMES)
def test_registry_name_matches_class(name):
    s = make(name)
    assert type(s).name == name
    assert issubclass(REGISTRY[name], Strategy)


@pytest.mark.parametrize("name", NAMES)
def test_effect_is_visible(name, env):
    s = make(name)
    SETTINGS[name].effect(s, env)


@pytest.mark.parametrize("name", NAMES)
def test_declared_hooks_are_the_overridden_ones(name):
    cls = type(make(name))
    overridden = {h for h in HOOKS if getattr(cls, h) is not getattr(Strategy, h)}
    assert overridden == SETTINGS[name].hooks
    assert cls.owns == SETTINGS[name].hooks & OWNED, "owns must name exactly the owned hooks it implements"


@pytest.mark.parametrize("name", NAMES)
def test_params_round_trip_through_yaml(name):
    s = make(name)
    params = s.params()
    assert isinstance(params, dict)
    assert yaml.safe_load(yaml.safe_dump(params)) == params
    # ...name every constructor argument, so a logged run fully describes the strategy...
    assert set(params) == set(inspect.signature(type(s)).parameters)
    # ...and are enough to rebuild an equivalent strategy.
    assert type(s)(**params).params() == params


@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize("name", NAMES)
def test_check_returns_none_or_reason(name, device):
    reason = make(name).check(device)
    assert reason is None or (isinstance(reason, str) and reason.strip())


def test_pin_memory_check_on_cpu_gives_reason():
    reason = REGISTRY["pin_memory"]().check("cpu")
    assert isinstance(reason, str) and reason


@pytest.mark.parametrize("name", NAMES)
def test_changes_numerics(name):
    assert make(name).changes_numerics is CHANGES_NUMERICS[name]


@pytest.mark.parametrize("name", NAMES)
def test_only_inductor_compilation_is_a_cache_a_later_process_starts_from(name):
    assert make(name).caches_compiled_code() is (name in CACHES_COMPILED_CODE)
    assert compose(make(name)).caches_compiled_code() is (name in CACHES_COMPILED_CODE)


def test_compilation_without_inductor_caches_nothing():
    assert not REGISTRY["compile"](backend="eager").caches_compiled_code()
    assert not REGISTRY["cuda_graphs"](kernels="eager").caches_compiled_code()


def _assert_hook_does_nothing(s: Strategy, hook: str, model_factory, batch) -> None:
    """Exercise `hook` on `s` and check it behaves like the base class's do-nothing default."""
    model = model_factory()
    if hook == "loader_kwargs":
        assert s.loader_kwargs(**PASSTHROUGH) == PASSTHROUGH
    elif hook == "make_loader":
        loader = s.make_loader(TensorDataset(*batch), "cpu", **PASSTHROUGH)
        assert type(loader) is DataLoader and loader.batch_size == 8 and loader.drop_last is False
        assert len(next(iter(loader))[0]) == 8
    elif hook == "prepare_model":
        assert s.prepare_model(model) is model
    elif hook == "prepare_optimizer":
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        assert s.prepare_optimizer(optimizer) is optimizer
    elif hook == "to_device":
        assert s.to_device(batch, "cpu") is batch
    elif hook == "autocast":
        with s.autocast("cpu"):
            assert not torch.is_autocast_enabled("cpu")
            assert model(batch[0]).dtype == torch.float32
    elif hook == "backward":
        s.backward(F.cross_entropy(model(batch[0]), batch[1]))
        assert all(p.grad is None for p in model.parameters())
    elif hook in ("step", "zero_grad"):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        F.cross_entropy(model(batch[0]), batch[1]).backward()
        before = copy.deepcopy(model.state_dict())
        grads = [p.grad.clone() for p in model.parameters()]
        s.step(optimizer, max_grad_norm=1e-3) if hook == "step" else s.zero_grad(optimizer)
        for k, v in model.state_dict().items():
            assert torch.equal(v, before[k]), f"{hook} changed {k}"
        for p, g in zip(model.parameters(), grads):
            assert p.grad is not None and torch.equal(p.grad, g), f"{hook} touched the gradients"
    elif hook == "check":
        assert s.check("cpu") is None and s.check("cuda") is None
    elif hook == "params":
        assert s.params() == {}
    elif hook == "metrics":
        assert s.metrics() == {}
    else:  # pragma: no cover
        raise AssertionError(hook)


@pytest.mark.parametrize("name", NAMES)
def test_hooks_not_overridden_do_nothing(name, model_factory, batch):
    s = make(name)
    for hook in HOOKS:
        if hook not in SETTINGS[name].hooks:
            _assert_hook_does_nothing(s, hook, model_factory, batch)


def test_base_strategy_hooks_do_nothing(model_factory, batch):
    s = Strategy()
    for hook in HOOKS:
        _assert_hook_does_nothing(s, hook, model_factory, batch)
    assert s.changes_numerics is False and s.owns == frozenset() and s.conflicts_with == frozenset()
    assert repr(s) == "Strategy()"
