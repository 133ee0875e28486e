"""Where a step's time goes (ablate.trial.phases): the profiling window, through the real StepClock and train loop.

The loops here spend known times in each phase: real sleeps (on a CPU's clock), or a fake clock moved by each hook
(exact, and on CUDA through fakes of its events and kernel trace that refuse what PyTorch refuses).
"""
from __future__ import annotations

import contextlib
import time
from typing import Any, Callable, Iterator

import pytest
import torch
from fake_time import FakeTime, installed

from ablate.config.study import Budget
from ablate.trial import metrics as metric
from ablate.trial import phases
from ablate.trial.loop import train
from ablate.trial.measure import StepClock
from ablate.workload.tasks import Quality

from fake_cuda import FakeAllocator, FakeCUDA, FakeEvents, FakeTrace

BATCH = 8
NAMED = metric.STEP_PHASES[:-1]  # the loop's five phases; the last, "other", is the rest of the step
CPU = torch.device("cpu")
PHASE_KEYS = {metric.PROFILED_STEP_S, metric.PROFILED_STEPS, metric.PROFILE_COST, metric.GPU_IDLE_SHARE,
              *(metric.phase_s(n) for n in metric.STEP_PHASES), *(metric.phase_share(n) for n in metric.STEP_PHASES)}


class Loop:
    """A loader, a Stack and a Task in one, each hook spending its phase's seconds (`spend`); `epoch` batches an
    epoch."""

    def __init__(self, seconds: dict[str, float], spend: Callable[[str, float], None], epoch: int = 10**9) -> None:
        self.seconds, self._spend, self.epoch = seconds, spend, epoch

    def spend(self, phase: str) -> None:
        self._spend(phase, self.seconds[phase])

    def __iter__(self) -> Iterator[torch.Tensor]:
        for _ in range(self.epoch):
            self.spend("data")  # inside the loader's next()
            yield torch.zeros(1)

    def to_device(self, batch: Any, device: torch.device) -> Any:
        self.spend("copy")
        return batch

    def autocast(self, device: torch.device) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    def loss(self, model: torch.nn.Module, batch: Any) -> torch.Tensor:
        self.spend("forward")
        return torch.tensor(1.0)

    def backward(self, loss: torch.Tensor) -> None:
        self.spend("backward")

    def step(self, optimizer: Any, max_grad_norm: float | None = None) -> None:
        self.spend("optimizer")

    def samples(self, batch: Any) -> int:
        return BATCH


def _budget(**settings: Any) -> Budget:
    return Budget(**{"train_samples": 4 * BATCH, "warmup_samples": BATCH, "window_samples": 2 * BATCH,
                     "windows": 2, "profile_steps": 4, "profile_seconds": 0, **settings})


def _timed(summary: dict[str, float]) -> dict[str, float]:
    """What a trial reports but the phases, and the peak resident set (this test process's own, not the fake's)."""
    return {k: v for k, v in summary.items() if k not in PHASE_KEYS and k != metric.PEAK_MEMORY_MB}


def _run(loop: Loop, clock: StepClock) -> dict[str, float]:
    train(loop, loop, torch.nn.Linear(1, 1), None, loop, clock.device, clock)
    return clock.summary()


SLEEPS = {"data": 0.020, "copy": 0.005, "forward": 0.010, "backward": 0.015, "optimizer": 0.005}


def test_the_phases_of_a_loop_with_known_sleeps_add_up_to_its_step_and_each_holds_its_own_sleep():
    # time.sleep sleeps at least as long as asked, on the clock perf_counter reads (CLOCK_MONOTONIC), and a loaded
    # machine only lengthens it: each phase holds at least its sleep, and a phase holding another's time would leave
    # that one short. The five must cover the step but for the loop's bookkeeping (microseconds against 55 ms).
    loop = Loop(SLEEPS, lambda phase, seconds: time.sleep(seconds))
    found = _run(loop, StepClock(_budget(profile_steps=10), CPU, train_for_accuracy=False))
    step = found[metric.PROFILED_STEP_S]
    assert found[metric.PROFILED_STEPS] == 10 and step >= sum(SLEEPS.values())
    for name, seconds in SLEEPS.items():
        assert found[metric.phase_s(name)] >= seconds, name
        assert found[metric.phase_share(name)] == pytest.approx(found[metric.phase_s(name)] / step)
    assert sum(found[metric.phase_s(name)] for name in NAMED) >= 0.95 * step  # they add up to it within 5%
    assert found[metric.phase_s("other")] >= 0
    assert sum(found[metric.phase_share(name)] for name in metric.STEP_PHASES) == pytest.approx(1.0)
    # The same steps, timed in the windows and in the profile: per sample on both sides, a ratio about 1 (a step
    # for a sample, or the window's samples for one step's, would be 8 times off).
    assert 0.5 < found[metric.PROFILE_COST] < 2
    assert metric.GPU_IDLE_SHARE not in found  # a CPU has no device to be idle: absent, not 0


# Binary fractions: sums of them are exact, so two runs on the fake clock agree to the bit.
FAKE = {"data": 0.25, "copy": 0.0625, "forward": 0.125, "backward": 0.1875, "optimizer": 0.0625}
FAKE_STEP = sum(FAKE.values())


@pytest.fixture
def fake_time(monkeypatch) -> FakeTime:
    return installed(monkeypatch)


def _fake_loop(fake: FakeTime, epoch: int = 10**9, on_spend: Callable[[str, float], None] | None = None) -> Loop:
    def spend(phase: str, seconds: float) -> None:
        if on_spend is not None:
            on_spend(phase, seconds)
        fake.now += seconds
    return Loop(FAKE, spend, epoch)


def test_on_a_fake_clock_each_phase_is_its_own_time_exactly_across_epoch_ends(fake_time):
    clock = StepClock(_budget(), CPU, train_for_accuracy=False)
    found = _run(_fake_loop(fake_time, epoch=3), clock)  # an epoch ends inside the profiling window
    assert found[metric.PROFILED_STEPS] == 4 and found[metric.PROFILED_STEP_S] == pytest.approx(FAKE_STEP)
    for name, seconds in FAKE.items():
        assert found[metric.phase_s(name)] == pytest.approx(seconds)
        assert found[metric.phase_share(name)] == pytest.approx(seconds / FAKE_STEP)
    assert found[metric.phase_s("other")] == pytest.approx(0.0, abs=1e-9)
    assert found[metric.PROFILE_COST] == pytest.approx(1.0)


def test_the_profiling_window_changes_nothing_the_windows_or_the_counts_say(fake_time):
    off = _run(_fake_loop(fake_time), StepClock(_budget(profile_steps=0), CPU, train_for_accuracy=False))
    fake_time.now = 0.0
    on_clock = StepClock(_budget(profile_steps=5), CPU, train_for_accuracy=False)
    on = _run(_fake_loop(fake_time), on_clock)
    assert not PHASE_KEYS & set(off)  # off writes no phase metric
    assert set(on) - set(off) == PHASE_KEYS - {metric.GPU_IDLE_SHARE}
    assert _timed(on) == _timed(off)  # windows, counts, training time: the profiled steps are in none of them
    assert on[metric.PROFILED_STEPS] == 5 and on_clock.steps == off[metric.TRAIN_STEPS] == 6  # 1 + 1 + 2 windows of 2


def test_on_a_cpu_a_throughput_run_can_profile_its_windows_own_steps_with_no_window_after(fake_time):
    """Reading the clock at a boundary costs a CPU's step nothing measurable, so a measurement that only times its
    windows profiles their steps: the same phases, and no steps, seconds or window added."""
    off = _run(_fake_loop(fake_time), StepClock(_budget(profile_steps=0), CPU, train_for_accuracy=False))
    fake_time.now = 0.0
    clock = StepClock(_budget(profile_steps=5), CPU, train_for_accuracy=False, profile_in_windows=True)
    on = _run(_fake_loop(fake_time), clock)
    assert _timed(on) == _timed(off) and clock.steps == off[metric.TRAIN_STEPS] == 6  # no step past the windows
    assert on[metric.PROFILED_STEPS] == 4 and on[metric.PROFILED_STEP_S] == pytest.approx(FAKE_STEP)  # 2 windows of 2
    for name, seconds in FAKE.items():
        assert on[metric.phase_s(name)] == pytest.approx(seconds)
    # Nothing was added, so there is no cost to read and no window's seconds to price apart.
    assert metric.PROFILE_COST not in on and metric.profiled_s(on) == 0.0
    assert metric.Mark.PROFILING not in clock.marks and clock.profiled is not None and not clock.profiling


@pytest.mark.parametrize("device, for_accuracy, steps, profiled", [
    ("cpu", False, 20, True), ("cuda", False, 20, False), ("cpu", True, 20, False), ("cpu", False, 0, False)])
def test_the_windows_own_steps_are_profiled_only_on_a_cpu_in_a_run_that_evaluates_nothing(device, for_accuracy,
                                                                                           steps, profiled):
    """CUDA's events and kernel trace slow the steps they time (`PROFILE_COST`), and a training for accuracy may
    evaluate inside its windows: both keep a window apart. A run that profiles nothing profiles nothing."""
    budget = _budget(profile_steps=steps)
    assert phases.in_windows(budget, torch.device(device), for_accuracy) is profiled


class _Spy(StepClock):
    heard: list[tuple[int, bool]]

    def mark(self, phase: int) -> None:
        self.heard.append((phase, self.profiling))
        super().mark(phase)


def test_outside_the_profiling_window_the_loop_marks_nothing(fake_time):
    clock = _Spy(_budget(profile_steps=3), CPU, train_for_accuracy=False)
    clock.heard = []
    _run(_fake_loop(fake_time), clock)
    assert all(profiling for _, profiling in clock.heard)
    assert [phase for phase, _ in clock.heard] == [phases.DATA, phases.COPY, phases.FORWARD, phases.BACKWARD,
                                                    phases.OPTIMIZER] * 3


def test_the_profiling_window_trains_no_accuracy_that_is_evaluated(fake_time):
    """It opens after the training for accuracy had its last evaluation, at train_samples; the trial's evaluation
    after the loop is that one, and the profiled steps count in no training figure."""
    runs = []
    for steps in (0, 5):
        evaluated: list[int] = []

        def evaluate() -> Quality:
            evaluated.append(clock.samples)
            return Quality(0.5, 90.0)

        fake_time.now = 0.0
        clock = StepClock(_budget(profile_steps=steps, train_samples=10 * BATCH, eval_every_samples=3 * BATCH,
                                  target_accuracy=99.0), CPU, train_for_accuracy=True, evaluate=evaluate)
        loop = _fake_loop(fake_time)
        train(loop, loop, torch.nn.Linear(1, 1), None, loop, CPU, clock)
        last = clock.evaluate_now()  # as the trial does after the loop, before its summary
        assert last is not None and last.samples == 10 * BATCH
        runs.append((evaluated, _timed(clock.summary())))
    (off_evaluated, off), (on_evaluated, on) = runs
    assert on_evaluated == off_evaluated == [3 * BATCH, 6 * BATCH, 9 * BATCH, 10 * BATCH]
    assert on == off  # accuracy, training time and samples alike


def _cuda_loop(fake: FakeTime, trace: FakeTrace) -> Loop:
    def kernels(phase: str, seconds: float) -> None:
        """The forward's kernels keep the device busy for 80% of its time, the backward's for all of it; one more
        copy on another device, and an annotation over the whole step, are not this device's work."""
        if phase == "forward":
            trace.run(fake.now, fake.now + 0.8 * seconds)
        elif phase == "backward":
            trace.run(fake.now, fake.now + seconds)
            trace.run(fake.now + seconds / 3, fake.now + seconds, activity="gpu_memcpy")  # overlapping: counted once
            trace.run(fake.now, fake.now + seconds, activity="gpu_memcpy", device=1)
        elif phase == "data":
            trace.run(fake.now, fake.now + FAKE_STEP, activity="gpu_user_annotation")
    return _fake_loop(fake, on_spend=kernels)


def _on_fake_cuda(monkeypatch, fake: FakeTime, cupti: bool = True) -> tuple[FakeEvents, FakeTrace]:
    FakeCUDA().install(monkeypatch)
    FakeAllocator().install(monkeypatch)
    return FakeEvents(fake.perf_counter).install(monkeypatch), FakeTrace(cupti).install(monkeypatch)


def test_on_cuda_the_phases_come_from_events_read_after_one_synchronisation_and_the_idle_share_from_the_trace(
        fake_time, monkeypatch):
    events, trace = _on_fake_cuda(monkeypatch, fake_time)
    clock = StepClock(_budget(min_window_seconds=0), torch.device("cuda:0"), train_for_accuracy=False)
    found = _run(_cuda_loop(fake_time, trace), clock)  # an elapsed_time before the synchronisation would raise
    for name, seconds in FAKE.items():
        assert found[metric.phase_s(name)] == pytest.approx(seconds)
    assert found[metric.GPU_IDLE_SHARE] == pytest.approx(1 - (0.8 * FAKE["forward"] + FAKE["backward"]) / FAKE_STEP)
    assert events.recorded == 6 * 4 and trace.traces == 1  # no event, no trace, outside the profiling window


@pytest.mark.parametrize("cupti", [False, True])
def test_on_cuda_without_a_kernel_trace_there_is_no_idle_share(fake_time, monkeypatch, cupti):
    # Without CUPTI, or with a trace that saw no device work (one that failed to start would read as an idle GPU).
    _on_fake_cuda(monkeypatch, fake_time, cupti)
    clock = StepClock(_budget(min_window_seconds=0), torch.device("cuda:0"), train_for_accuracy=False)
    found = _run(_fake_loop(fake_time), clock)
    assert metric.GPU_IDLE_SHARE not in found and found[metric.phase_s("data")] == pytest.approx(FAKE["data"])


def test_the_fakes_refuse_what_pytorch_refuses(fake_time, monkeypatch):
    events, trace = _on_fake_cuda(monkeypatch, fake_time)
    start, end, untimed = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True), torch.cuda.Event()
    with pytest.raises(ValueError, match="must be recorded"):
        start.elapsed_time(end)
    start.record()
    end.record()
    untimed.record()
    with pytest.raises(RuntimeError, match="must be completed"):
        start.elapsed_time(end)
    torch.cuda.synchronize()
    with pytest.raises(ValueError, match="enable_timing=True"):
        start.elapsed_time(untimed)
    assert start.elapsed_time(end) == 0.0
    from torch.profiler import ProfilerActivity, profile

    first, second = profile(activities=[ProfilerActivity.CUDA]), profile(activities=[ProfilerActivity.CUDA])
    assert first.profiler is None
    first.start()
    assert first.profiler.kineto_results is None  # results exist once it stops
    with pytest.raises(RuntimeError, match="already enabled"):
        second.start()
    first.stop()
    assert first.profiler.kineto_results.events() == []


@pytest.mark.parametrize("typed", [True, False], ids=["activity-types", "torch-2.11-events"])
def test_device_busy_time_counts_overlapping_work_once_and_only_this_device_s(typed: bool):
    trace = FakeTrace(typed=typed)
    trace.recording = []
    trace.run(0.0, 1.0)
    trace.run(0.5, 2.0, activity="gpu_memcpy")
    trace.run(3.0, 4.0, activity="gpu_memset")
    trace.run(0.0, 10.0, activity="gpu_user_annotation")
    trace.run(5.0, 6.0, device=1)
    assert phases.device_busy_s(trace.recording, torch.device("cuda:0")) == pytest.approx(3.0)
    assert phases.device_busy_s(trace.recording, torch.device("cuda:1")) == pytest.approx(1.0)
    assert phases.device_busy_s([], torch.device("cuda:0")) is None
