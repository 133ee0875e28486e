"""The step clock on a fake clock: windows, first step, and time to accuracy with evaluation excluded."""
from __future__ import annotations

import math
import os
import random
import statistics
import subprocess
import sys
from typing import Callable

import pytest
import torch

from ablate.config.study import Budget
from ablate.trial import measure
from ablate.trial.measure import StepClock
from ablate.workload.tasks import Quality

STEP_S, EVAL_S, BATCH = 1.0, 100.0, 8


class FakeTime:
    """Stands in for the `time` module inside ablate.trial.measure: time moves only when told."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


@pytest.fixture
def fake_time(monkeypatch):
    fake = FakeTime()
    monkeypatch.setattr(measure, "time", fake)
    return fake


def _train(clock: StepClock, fake: FakeTime) -> None:
    for _ in clock.batches([None] * 1000):
        fake.now += STEP_S  # one training step
        clock.count(BATCH)


def _clock(fake: FakeTime, accuracies: list[float], **budget) -> StepClock:
    results = iter(accuracies)

    def evaluate() -> Quality:
        fake.now += EVAL_S  # an evaluation is slow; none of it may count as training time
        return Quality(0.5, next(results))

    budget = Budget(**{"train_samples": 64, "warmup_samples": 8, "window_samples": 16, "windows": 2, **budget})
    return StepClock(budget, torch.device("cpu"), train_for_accuracy=True, evaluate=evaluate)


def test_time_to_target_excludes_evaluation_and_reports_compilation_apart(fake_time):
    clock = _clock(fake_time, [20.0, 55.0, 70.0, 90.0], eval_every_samples=16, target_accuracy=50.0)
    _train(clock, fake_time)
    clock.evaluate_now()  # the final evaluation coincides with the last periodic one: not run twice
    assert [e.samples for e in clock.evaluations] == [16, 32, 48, 64]
    summary = clock.summary()
    assert summary["train_time_s"] == 8 * STEP_S  # eight steps; four evaluations excluded
    assert summary["samples_to_target"] == 32 and summary["target_reached"] == 1.0
    assert summary["time_to_target_e2e_s"] == 4 * STEP_S  # from the loop start, first step included
    assert summary["time_to_target_s"] == 3 * STEP_S  # first (compiling) step excluded
    assert summary["test_accuracy"] == 90.0 and summary["evaluations"] == 4
    assert summary["throughput"] == pytest.approx(BATCH / STEP_S)  # windows that spanned an evaluation do not count it


def test_a_target_not_reached_is_recorded_as_such(fake_time):
    clock = _clock(fake_time, [20.0, 30.0], eval_every_samples=32, target_accuracy=99.0)
    _train(clock, fake_time)
    clock.evaluate_now()
    summary = clock.summary()
    assert summary["target_reached"] == 0.0 and "time_to_target_s" not in summary
    assert summary["test_accuracy"] == 30.0


def test_without_an_interval_only_the_final_evaluation_runs(fake_time):
    clock = _clock(fake_time, [97.0], target_accuracy=96.0)
    _train(clock, fake_time)
    clock.evaluate_now()
    summary = clock.summary()
    assert summary["evaluations"] == 1 and summary["samples_to_target"] == 64


class FakeDeviceMemory:
    """A CUDA device's allocator statistics, as far as the clock reads them: a current level and a peak."""

    def __init__(self) -> None:
        self.level = self.peak = 0.0

    def use(self, mb: float) -> None:  # a transient allocation of `mb` on top of the current level
        self.peak = max(self.peak, self.level + mb)

    def reset(self, device) -> None:
        self.peak = self.level


def test_peak_memory_covers_the_timed_windows_without_warm_up_or_evaluations(fake_time, monkeypatch):
    memory = FakeDeviceMemory()
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    monkeypatch.setattr(measure, "peak_memory_mb", lambda device: memory.peak)
    monkeypatch.setattr(measure, "reset_peak_memory", memory.reset, raising=False)

    def evaluate():
        memory.use(1000.0)  # the test set's batches: not training memory
        return Quality(0.5, 50.0)

    budget = Budget(train_samples=64, warmup_samples=8, window_samples=16, windows=2, eval_every_samples=16)
    clock = StepClock(budget, torch.device("cuda"), train_for_accuracy=True, evaluate=evaluate)
    for _ in clock.batches([None] * 1000):
        fake_time.now += STEP_S
        memory.use(500.0 if clock.steps == 0 else 10.0)  # the first step compiles, with large temporaries
        clock.count(BATCH)
    assert any(e.samples > 8 for e in clock.evaluations)  # some evaluations ran while the windows were open
    assert clock.summary()["peak_memory_mb"] == 10.0


_LINUX_PEAK = pytest.mark.skipif(not os.path.exists(measure._CLEAR_REFS), reason="needs Linux's /proc/self/clear_refs")
_CHILD_PEAK = ("import torch; from ablate.trial.measure import peak_memory_mb; "
               "print(peak_memory_mb(torch.device('cpu')))")


@_LINUX_PEAK
def test_a_cpu_peak_is_reset_to_what_the_process_holds_now():
    cpu = torch.device("cpu")
    ballast = bytearray(b"\x01") * (256 * 2**20)  # written, so resident
    held = measure.peak_memory_mb(cpu)
    del ballast
    measure.reset_peak_memory(cpu)
    assert measure.peak_memory_mb(cpu) < held - 200


@_LINUX_PEAK
def test_a_cpu_peak_is_the_trial_process_s_own_not_that_of_the_process_that_started_it():
    # getrusage's ru_maxrss in a new interpreter starts from its parent's high-water mark: every trial of a study
    # read the study process's peak.
    ballast = bytearray(b"\x01") * (2 * 2**30)
    child = subprocess.run([sys.executable, "-c", _CHILD_PEAK], stdout=subprocess.PIPE, text=True, check=True,
                           env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert float(child.stdout) < len(ballast) / 2**20
    del ballast


class _OpCounter(torch.utils._python_dispatch.TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func not in (torch.ops.aten.detach.default, torch.ops.aten.alias.default):  # views: no kernel
            self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


def test_the_divergence_check_costs_one_kernel_a_step(fake_time):
    clock = StepClock(Budget(train_samples=64, warmup_samples=8, window_samples=1000, windows=1),
                      torch.device("cpu"), train_for_accuracy=False)
    steps = iter(clock.batches([None] * 1000))
    for _ in range(3):
        next(steps)
        clock.count(BATCH, torch.tensor(2.3))
    next(steps)
    counter, loss = _OpCounter(), torch.tensor(2.3)
    with counter:
        clock.count(BATCH, loss)  # inside a timed window
    assert len(counter.ops) <= 1, counter.ops
    with pytest.raises(measure.Diverged):
        next(steps)
        clock.count(BATCH, torch.tensor(float("nan")))
        clock._sync()


def test_steps_after_the_first_that_pay_a_one_off_cost_are_reported(fake_time):
    clock = _clock(fake_time, [], warmup_samples=24)  # steps 2 and 3 end before the first window opens
    for _ in clock.batches([None] * 1000):
        # CUDA-graph recording or TorchScript's optimisation at steps 2 and 3; 1 s a step after that.
        fake_time.now += 5 * STEP_S if clock.steps in (1, 2) else STEP_S
        clock.count(BATCH)
    assert clock.summary()["early_steps_excess_s"] == pytest.approx(2 * 4 * STEP_S)


def test_the_clock_says_which_phase_the_run_is_in(fake_time):
    heard = []
    clock = _clock(fake_time, [20.0, 30.0, 40.0, 50.0], eval_every_samples=32, target_accuracy=99.0)
    clock.on_phase = heard.append
    _train(clock, fake_time)
    assert heard[:3] == ["first step (compilation, worker start-up)", "warm-up", "timed window 1 of 2"]
    assert "timed window 2 of 2" in heard and any(h.startswith("evaluating at ") for h in heard)
    assert heard.index("timed window 2 of 2") < heard.index(next(h for h in heard if h.startswith("training for")))


@pytest.mark.parametrize("for_accuracy", [False, True])
def test_only_a_throughput_runs_warm_up_is_left_untimed_and_its_wait_is_not_training_time(fake_time, for_accuracy):
    heard = []

    def untimed(begins: bool) -> float:
        heard.append((begins, clock.steps, len(clock.windows)))
        if not begins:
            fake_time.now += 50.0  # waiting for an interpreter to finish importing
            return 50.0
        return 0.0

    clock = _clock(fake_time, [90.0], warmup_samples=40)
    clock.train_for_accuracy, clock.on_untimed = for_accuracy, untimed
    _train(clock, fake_time)
    if for_accuracy:  # time to accuracy runs from the first step: nothing in it is left untimed
        assert heard == []
        return
    # After the steps that may still pay a one-off cost; before the first window opens.
    assert heard == [(True, measure.ONE_OFF_STEPS, 0), (False, 1 + 40 // BATCH, 0)]
    assert clock.train_time_s == pytest.approx(clock.steps * STEP_S)  # the wait is paused time
    assert all(w.seconds == pytest.approx(w.samples / BATCH * STEP_S) for w in clock.windows)


def _throughput_run(fake: FakeTime, step_s: Callable[[], float], **budget) -> StepClock:
    budget = Budget(**{"train_samples": 64, "warmup_samples": 8, "window_samples": 16, "windows": 3, **budget})
    clock = StepClock(budget, torch.device("cpu"), train_for_accuracy=False)
    for _ in clock.batches(iter(lambda: None, 0)):
        fake.now += step_s()
        clock.count(BATCH)
    return clock


def test_a_window_of_a_slow_run_closes_at_the_first_step_past_window_seconds(fake_time):
    slow = _throughput_run(fake_time, lambda: 2.0, window_samples=10 * BATCH, window_seconds=5.0)
    assert [(w.samples, w.seconds) for w in slow.windows] == [(3 * BATCH, 6.0)] * 3  # 3 steps of 2 s, not 10
    assert slow.summary()["throughput"] == pytest.approx(BATCH / 2.0)
    fast = _throughput_run(fake_time, lambda: 0.1, window_samples=10 * BATCH, window_seconds=5.0)
    assert [w.samples for w in fast.windows] == [10 * BATCH] * 3  # 1 s a window: samples close it
    uncapped = _throughput_run(fake_time, lambda: 2.0, window_samples=10 * BATCH, window_seconds=None)
    assert [w.samples for w in uncapped.windows] == [10 * BATCH] * 3


@pytest.mark.parametrize("cap_in_steps", [0.5, 2.5, 6.0])
def test_closing_windows_by_time_biases_log_throughput_no_more_than_a_ratio_of_as_many_steps(fake_time, cap_in_steps):
    """Step times with a 10% spread (lognormal, mean 1 s): the windows' geometric mean, which the speed-ups
    average in logs, lands within 1% of the true rate whether the cap closes a window after one step or six."""
    rng = random.Random(7)
    cv = 0.10
    sigma = math.sqrt(math.log(1 + cv ** 2))
    logs, steps = [], []
    for _ in range(1_000):
        clock = _throughput_run(fake_time, lambda: rng.lognormvariate(-sigma ** 2 / 2, sigma),
                                window_samples=1_000 * BATCH, window_seconds=cap_in_steps)
        logs.append(math.log(clock.summary()["throughput"]))
        steps += [w.samples // BATCH for w in clock.windows]
    assert abs(statistics.fmean(logs) - math.log(BATCH / 1.0)) < 0.01
    assert statistics.fmean(steps) == pytest.approx(math.floor(cap_in_steps) + 1, abs=0.5)
