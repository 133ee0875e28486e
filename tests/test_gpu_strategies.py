"""The CUDA-only behaviour of the newer techniques; every test here is skipped cleanly without a GPU."""
from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader

from conftest import make_model
from reference_loop import stack_losses
from strategies import (
    TF32, CUDAGraphs, ChannelsLast, CudnnBenchmark, DeviceResidentData, FusedOptimizer, HalfPrecision, compose,
    fp32_precision, preset, set_fp32_precision,
)

pytestmark = pytest.mark.gpu
STEPS = 5


@pytest.fixture(scope="module")
def fp32_losses(dataset):
    set_fp32_precision("ieee")
    return stack_losses(compose(), make_model(), dataset, STEPS, device="cuda")


@pytest.fixture(autouse=True)
def _fresh_process_state():
    # Trials get a fresh process; tests share one, so undo flags and compiled graphs.
    torch._dynamo.reset()
    set_fp32_precision("ieee")
    torch.backends.cudnn.benchmark = False
    yield
    torch._dynamo.reset()
    set_fp32_precision("ieee")
    torch.backends.cudnn.benchmark = False


# Relative tolerance per loss over 5 steps: reordered fp32 arithmetic ~1e-6 (1e-4 allowed), TF32's 10-bit
# mantissa and half precision ~1e-3 (2e-2 allowed) - a lost gradient or stale weights moves them by far more.
CLOSE = {
    "device_resident_data": (DeviceResidentData, 0.0),  # same batches: identical
    "channels_last": (ChannelsLast, 1e-4),
    "cudnn_benchmark": (CudnnBenchmark, 1e-4),
    "fused_adam": (lambda: FusedOptimizer("fused"), 1e-4),
    "cuda_graphs_eager": (lambda: CUDAGraphs("eager"), 1e-4),
    "cuda_graphs_inductor": (CUDAGraphs, 1e-4),
    "tf32": (TF32, 2e-2),
    "O1": (lambda: preset("O1"), 2e-2),
    "O2": (lambda: preset("O2"), 2e-2),
    "bf16_pure": (lambda: HalfPrecision("bf16"), 2e-2),
}


@pytest.mark.parametrize("name", CLOSE)
def test_trains_on_cuda_close_to_fp32(name, dataset, fp32_losses):
    make, rel = CLOSE[name]
    stack = compose(make())
    if reason := stack.check("cuda"):
        pytest.skip(reason)
    losses = stack_losses(stack, make_model(), dataset, STEPS, device="cuda")
    if rel == 0.0:
        assert losses == fp32_losses
    for got, want in zip(losses, fp32_losses, strict=True):
        assert got == pytest.approx(want, rel=rel)


def test_resident_batches_live_on_the_device(dataset):
    loader = DeviceResidentData().make_loader(dataset, "cuda", batch_size=32, shuffle=True,
                                              generator=torch.Generator().manual_seed(0))
    want = DataLoader(dataset, batch_size=32, shuffle=True, generator=torch.Generator().manual_seed(0))
    for (inputs, targets), (cpu_inputs, cpu_targets) in zip(loader, want, strict=True):
        assert inputs.is_cuda and targets.is_cuda
        assert torch.equal(inputs.cpu(), cpu_inputs) and torch.equal(targets.cpu(), cpu_targets)


def test_o2_scales_fp16_losses_on_cuda(dataset):
    stack = preset("O2")
    stack_losses(stack, make_model(), dataset, STEPS, device="cuda")
    (half,) = stack
    assert half.scaler is not None and half.loss_scale > 1.0


def test_tf32_switches_the_process_flags():
    if reason := TF32().check("cuda"):
        pytest.skip(reason)
    TF32().prepare_model(torch.nn.Linear(2, 2))
    assert fp32_precision() == "matmul=tf32 conv=tf32"
