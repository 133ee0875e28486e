"""The step clock on a fake clock: windows, first step, and time to accuracy with evaluation excluded."""
from __future__ import annotations

import pytest
import torch

from ablate import measure
from ablate.measure import StepClock
from ablate.study import Budget

STEP_S, EVAL_S, BATCH = 1.0, 100.0, 8


class FakeTime:
    """Stands in for the `time` module inside ablate.measure: time moves only when told."""

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

    def evaluate() -> tuple[float, float]:
        fake.now += EVAL_S  # an evaluation is slow; none of it may count as training time
        return next(results), 0.5

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
    assert summary["throughput"] == BATCH / STEP_S  # windows that spanned an evaluation do not count it


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


def test_peak_memory_is_read_when_the_timed_windows_end_before_any_evaluation(fake_time, monkeypatch):
    readings = iter([111.0, 999.0])
    monkeypatch.setattr(measure, "peak_memory_mb", lambda device: next(readings))
    clock = _clock(fake_time, [20.0, 30.0, 40.0, 50.0], eval_every_samples=16)
    _train(clock, fake_time)
    clock.evaluate_now()
    assert clock.summary()["peak_memory_mb"] == 111.0  # read once, when the last window closed
