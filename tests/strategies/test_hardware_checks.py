"""`check(device)` names the real reason a technique cannot run on a machine, simulated here by patching torch (the
CUDA device by tests/support/fake_cuda.py's FakeCUDA, which refuses what torch.cuda refuses)."""
from __future__ import annotations

import contextlib
import importlib.util
from typing import Iterator
from unittest import mock

import pytest
import torch

from strategies import (
    AMP,
    REGISTRY,
    TF32,
    AttentionBackend,
    Compile,
    CompiledOptimizer,
    CUDAGraphs,
    CudnnBenchmark,
    DeviceResidentData,
    Float8,
    FusedOptimizer,
    HalfPrecision,
)

from fake_cuda import FakeCUDA


@pytest.fixture
def volta(monkeypatch) -> FakeCUDA:
    """torch reports one CUDA device, a V100 (compute capability 7.0)."""
    return FakeCUDA(count=1, name="Tesla V100", capability=(7, 0)).install(monkeypatch)


@pytest.fixture
def pascal(monkeypatch) -> FakeCUDA:
    return FakeCUDA(count=1, name="GTX 1080", capability=(6, 1)).install(monkeypatch)


@pytest.mark.parametrize("strategy, what", [
    (TF32(), "TensorFloat-32"), (CudnnBenchmark(), "cuDNN autotuning"), (CUDAGraphs(), "CUDA graph capture"),
    (CUDAGraphs("eager"), "CUDA graph capture"),
], ids=repr)
def test_cuda_only_techniques_say_so_on_a_cpu(strategy, what):
    assert strategy.check("cpu") == f"{what} is CUDA-only; the device here is cpu"


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_without_cuda_every_cuda_check_says_no_device(name):
    reason = REGISTRY[name]().check("cuda") if name not in ("num_workers", "batch_size") else None
    if name in ("channels_last", "device_resident_data", "set_to_none", "torchscript", "num_workers", "batch_size",
                "activation_checkpointing"):
        assert reason is None  # device-independent techniques
    else:
        assert "no CUDA device is available" in reason, reason


def test_tf32_needs_ampere(volta):
    assert TF32().check("cuda") == "TensorFloat-32 needs compute capability >= 8.0; Tesla V100 has 7.0"
    volta.capability = (8, 0)
    assert TF32().check("cuda") is None


def test_bf16_needs_native_support(volta):
    for strategy in (AMP("bf16"), HalfPrecision("bf16"), HalfPrecision("bf16", master_weights=True)):
        assert strategy.check("cuda") == "native bf16 needs compute capability >= 8.0; Tesla V100 has 7.0"
    assert AMP("fp16").check("cuda") is None and HalfPrecision("fp16").check("cuda") is None


def test_inductor_needs_triton_and_volta(pascal):
    assert Compile().check("cuda").endswith("needs compute capability >= 7.0; GTX 1080 has 6.1")
    assert CUDAGraphs().check("cuda").endswith("needs compute capability >= 7.0; GTX 1080 has 6.1")
    assert CUDAGraphs("eager").check("cuda") is None  # eager kernels in graphs: no Triton involved
    assert Compile(backend="eager").check("cuda") is None
    with mock.patch("importlib.util.find_spec", return_value=None):
        assert Compile().check("cuda") == "inductor on CUDA needs Triton, which is not installed"
        assert CUDAGraphs().check("cuda") == "inductor on CUDA needs Triton, which is not installed"


def test_inductor_on_cpu_needs_a_cxx_compiler():
    with mock.patch("shutil.which", return_value=None):
        assert "needs a C++ compiler" in Compile().check("cpu")
    with mock.patch("shutil.which", return_value="/usr/bin/g++"):
        assert Compile().check("cpu") is None


def test_cudnn_autotuning_needs_cudnn(volta):
    assert CudnnBenchmark().check("cuda") is None
    with mock.patch("torch.backends.cudnn.is_available", return_value=False):
        assert CudnnBenchmark().check("cuda") == "this PyTorch build has no cuDNN"


def test_fused_optimizer_and_resident_data_run_on_cpu():
    assert FusedOptimizer("fused").check("cpu") is None and FusedOptimizer("foreach").check("cpu") is None
    assert DeviceResidentData().check("cpu") is None


def test_resident_data_that_does_not_fit_is_refused(volta, dataset):
    loader = DeviceResidentData().make_loader(dataset, "cuda", batch_size=16)
    with mock.patch("torch.cuda.mem_get_info", return_value=(1000, 10**9)):
        with pytest.raises(ValueError, match="needs 0 MiB on cuda, more than half of the 0 MiB free"):
            iter(loader).__next__()


@contextlib.contextmanager
def _torchao(installed: bool) -> Iterator[None]:
    real = importlib.util.find_spec

    def find_spec(name, *a):
        return (object() if installed else None) if name == "torchao" else real(name, *a)

    with mock.patch("importlib.util.find_spec", side_effect=find_spec):
        yield


def test_float8_needs_ada_or_hopper(volta):
    with _torchao(installed=True):
        assert Float8().check("cuda") == \
            "float8 training (tensorwise) needs compute capability >= 8.9; Tesla V100 has 7.0"
        volta.capability = (8, 9)
        assert Float8("tensorwise").check("cuda") is None
        assert Float8("rowwise").check("cuda").startswith("float8 training (rowwise) needs compute capability >= 9.0")
        volta.capability = (9, 0)
        assert Float8("rowwise").check("cuda") is None


def test_float8_without_torchao_says_how_to_install_it(volta):
    volta.capability = (9, 0)
    with _torchao(installed=False):
        assert Float8().check("cuda") == \
            "float8 training needs torchao, which is not installed (pip install 'ablate[float8]')"
    assert Float8().check("cpu") == "float8 training is CUDA-only; the device here is cpu"  # before torchao: moot


def test_attention_backends_need_their_gpus(pascal):
    assert AttentionBackend("flash").check("cuda") == \
        "the flash attention kernel needs compute capability >= 8.0; GTX 1080 has 6.1"
    assert AttentionBackend("cudnn").check("cuda").startswith("the cudnn attention kernel needs compute capability")
    assert AttentionBackend("efficient").check("cuda") is None and AttentionBackend("math").check("cuda") is None
    with mock.patch("torch.backends.cudnn.is_available", return_value=False):
        assert AttentionBackend("cudnn").check("cuda") == "this PyTorch build has no cuDNN"


def test_attention_backends_on_a_cpu():
    assert AttentionBackend("flash").check("cpu") is None and AttentionBackend("math").check("cpu") is None
    for backend in ("efficient", "cudnn"):
        assert AttentionBackend(backend).check("cpu") == \
            f"the {backend} attention kernel is CUDA-only; on a CPU PyTorch has flash and math only"


def test_compiled_optimizer_needs_inductor(pascal):
    assert CompiledOptimizer().check("cuda").endswith("needs compute capability >= 7.0; GTX 1080 has 6.1")
    with mock.patch("shutil.which", return_value=None):
        assert "needs a C++ compiler" in CompiledOptimizer().check("cpu")
