"""The CUDA-only behaviour of the newer techniques; every test here is skipped cleanly without a GPU."""
from __future__ import annotations

import math

import pytest
import torch
from torch.utils.data import DataLoader

from strategies import (
    TF32,
    ChannelsLast,
    CUDAGraphs,
    CudnnBenchmark,
    DeviceResidentData,
    FusedOptimizer,
    HalfPrecision,
    compose,
    fp32_precision,
    preset,
    set_fp32_precision,
)

from reference_loop import stack_losses
from tiny_cnn import make_model

pytestmark = pytest.mark.gpu
STEPS = 5


@pytest.fixture(autouse=True, scope="module")
def _deterministic_cudnn():
    # The exact comparisons (DeviceResidentData's losses equal the DataLoader's) need run-to-run identical
    # kernels: cuDNN's default convolution backward may accumulate with atomics in any order.
    torch.backends.cudnn.deterministic = True
    yield
    torch.backends.cudnn.deterministic = False


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


def test_tf32_changes_a_convolutions_result():
    # Behaviour, not flags: TF32 rounds the inputs' mantissa to 10 bits, so the result moves by ~1e-3 relative.
    if reason := TF32().check("cuda"):
        pytest.skip(reason)
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(8, 64, 32, 32, device="cuda", generator=g)
    w = torch.randn(64, 64, 3, 3, device="cuda", generator=g)
    set_fp32_precision("ieee")
    strict = torch.nn.functional.conv2d(x, w, padding=1)
    exact = torch.nn.functional.conv2d(x.double(), w.double(), padding=1)
    TF32().prepare_model(torch.nn.Identity())
    tf32 = torch.nn.functional.conv2d(x, w, padding=1)
    assert not torch.equal(strict, tf32)
    assert (tf32.double() - exact).abs().max() > 10 * (strict.double() - exact).abs().max()
    assert torch.get_float32_matmul_precision() == "high"  # the getter Inductor's max-autotune calls still works


def test_cuda_graphs_really_replay(dataset):
    from torch._dynamo.utils import counters
    from torch.profiler import ProfilerActivity, profile

    stack = compose(CUDAGraphs("eager"))
    if reason := stack.check("cuda"):
        pytest.skip(reason)
    counters.clear()
    model = stack.prepare_model(make_model().cuda())
    optimizer = stack.prepare_optimizer(torch.optim.SGD(model.parameters(), lr=0.1))
    inputs, targets = dataset.tensors[0][:16].cuda(), dataset.tensors[1][:16].cuda()

    def step():
        stack.backward(torch.nn.functional.cross_entropy(model(inputs), targets))
        stack.step(optimizer)

    for _ in range(3):  # warm-up, then recording
        step()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    assert counters["inductor"]["cudagraph_skips"] == 0
    assert any("cudaGraphLaunch" in event.name for event in prof.events())


def _fused_fp16(dataset):
    """AMP fp16 with fused Adam on a fresh model, and a function that runs one forward and backward."""
    from strategies import AMP

    amp = AMP("fp16")
    stack = compose(amp, FusedOptimizer("fused"))
    model = make_model().cuda()
    optimizer = stack.prepare_optimizer(torch.optim.Adam(model.parameters(), lr=1e-3))
    inputs, targets = dataset.tensors[0][:16].cuda(), dataset.tensors[1][:16].cuda()

    def forward_backward():
        with stack.autocast("cuda"):
            loss = torch.nn.functional.cross_entropy(model(inputs), targets)
        stack.backward(loss)

    return amp, stack, model, optimizer, forward_backward


def test_fp16_loss_scaling_skips_an_injected_overflow_on_cuda(dataset):
    amp, stack, model, optimizer, forward_backward = _fused_fp16(dataset)
    forward_backward()
    next(model.parameters()).grad.view(-1)[0] = float("inf")
    before = [p.detach().clone() for p in model.parameters()]
    stack.step(optimizer)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
    assert amp.skipped_steps == 1 and amp.loss_scale == 2.0**15


def test_a_fused_fp16_step_does_not_synchronise(dataset):
    # GradScaler with a fused optimizer needs no host read; counting skipped steps must not add one.
    amp, stack, _, optimizer, forward_backward = _fused_fp16(dataset)
    forward_backward()
    stack.step(optimizer)  # the first step creates the scaler's state
    forward_backward()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        stack.step(optimizer)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert amp.skipped_steps == 0


def test_o2_channels_last_and_fused_adam_step_together(dataset):
    stack = compose(preset("O2"), ChannelsLast(), FusedOptimizer("fused"))
    losses = stack_losses(stack, make_model(), dataset, STEPS, device="cuda")
    (half, *_) = stack
    assert all(m.stride() == p.stride() for p, m in half._pairs)
    assert all(math.isfinite(loss) for loss in losses) and losses[-1] != losses[0]


def test_peak_memory_leaves_out_an_evaluation_inside_the_windows():
    from ablate.config.study import Budget
    from ablate.trial import measure
    from ablate.workload.tasks import Quality

    held = []

    def evaluate():
        held.append(torch.empty(256 * 2**20, dtype=torch.uint8, device="cuda"))  # 256 MiB the windows never use
        held.clear()
        return Quality(0.5, 50.0)

    torch.cuda.empty_cache()
    before = torch.cuda.memory_reserved() / 2**20  # what other tests' live tensors hold in this process
    budget = Budget(train_samples=64, warmup_samples=8, window_samples=16, windows=2, eval_every_samples=16,
                    min_window_seconds=0)
    clock = measure.StepClock(budget, torch.device("cuda"), train_for_accuracy=True, evaluate=evaluate)
    for _ in clock.batches([None] * 1000):
        torch.empty(2**20, dtype=torch.uint8, device="cuda")  # 1 MiB a step
        clock.count(8)
    summary = clock.summary()
    assert summary["peak_memory_mb"] == summary["peak_memory_reserved_mb"] < before + 64
    assert summary["peak_memory_allocated_mb"] < before + 64


def _windows_peaks(stack, batch: int = 256) -> dict[str, float]:
    """The windows' peak memory of a model whose activations (two 64-channel 32x32 maps, 64 MiB each at batch 256)
    dwarf its weights, trained by `stack` through ablate's loop and clock, on batches already on the device."""
    from ablate.config.study import Budget
    from ablate.trial.loop import train
    from ablate.trial.measure import StepClock
    from ablate.workload.tasks import Classification

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(1, 64, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
                                torch.nn.Linear(64 * 32 * 32, 10)).cuda()
    model = stack.prepare_model(model)
    optimizer = stack.prepare_optimizer(torch.optim.SGD(model.parameters(), lr=0.01))
    batches = [(torch.randn(batch, 1, 32, 32, device="cuda"), torch.randint(0, 10, (batch,), device="cuda"))
               for _ in range(4)]
    clock = StepClock(Budget(train_samples=batch, warmup_samples=4 * batch, window_samples=4 * batch, windows=2),
                      torch.device("cuda"), train_for_accuracy=False)
    train(stack, Classification(), model, optimizer, batches, torch.device("cuda"), clock)
    return clock.summary()


def test_a_cuda_graph_row_s_peak_memory_counts_its_pool_so_graphs_show_no_false_saving():
    # Replays of a recorded graph never pass through the caching allocator (torch/_inductor/cudagraph_trees.py,
    # CUDAGraphNode): max_memory_allocated leaves the activations out; max_memory_reserved holds the graph's pool.
    stack = compose(CUDAGraphs("eager"))
    if reason := stack.check("cuda"):
        pytest.skip(reason)
    eager = _windows_peaks(compose())
    torch._dynamo.reset()
    graphs = _windows_peaks(stack)
    activations = 2 * 64 * 2**20 / 2**20  # MiB
    assert eager["peak_memory_allocated_mb"] - graphs["peak_memory_allocated_mb"] > activations / 2
    assert graphs["peak_memory_mb"] == graphs["peak_memory_reserved_mb"]
    assert graphs["peak_memory_mb"] > graphs["peak_memory_allocated_mb"] + activations / 2
