"""A training for accuracy's evaluations on their own, without a clock: when one is due, at most one per point in
training, none once it is over, and time to target read from them."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from ablate.config.study import Budget
from ablate.trial import metrics as metric
from ablate.trial.accuracy import Evaluations
from ablate.workload.tasks import Quality


class _Run:
    """Evaluations whose n-th returns accuracies[n], paused by a stand-in for the clock whose training time is
    10 s a sample; `paused_at` holds the training time it handed each evaluation that ran."""

    def __init__(self, accuracies: list[float], **budget) -> None:
        results = iter(accuracies)
        self.evaluations = Evaluations(Budget(**{"train_samples": 64, **budget}), lambda: Quality(0.5, next(results)))
        self.samples = 0
        self.paused_at: list[float] = []

    @contextmanager
    def paused(self) -> Iterator[float]:
        self.paused_at.append(10.0 * self.samples)
        yield self.paused_at[-1]

    def at(self, samples: int) -> None:
        self.samples = samples
        self.evaluations.now(samples, self.paused)

    def end(self, samples: int) -> None:
        self.samples = samples
        self.evaluations.end(samples, self.paused)


def test_a_periodic_evaluation_is_due_every_interval_and_the_schedule_moves_past_what_ran() -> None:
    run = _Run([10.0, 20.0], eval_every_samples=16)
    assert not run.evaluations.due(8) and run.evaluations.due(16)
    run.at(20)  # a batch that crossed 16: the next is due at 32, not at 36
    assert not run.evaluations.due(31) and run.evaluations.due(32)


def test_one_evaluation_per_point_in_training_and_none_once_it_is_over() -> None:
    run = _Run([10.0, 20.0, 30.0], eval_every_samples=16)
    run.at(16)
    run.at(16)  # the same point: the same evaluation, not another
    run.end(64)
    run.at(80)  # the windows went on; the training for accuracy did not
    assert [e.samples for e in run.evaluations.evaluations] == [16, 64] and run.paused_at == [160.0, 640.0]
    assert run.evaluations.over and not run.evaluations.due(10_000)


def test_without_an_interval_none_is_due_and_without_a_held_out_set_none_runs() -> None:
    assert not _Run([], eval_every_samples=None).evaluations.due(10_000)
    silent = Evaluations(Budget(train_samples=64), None)
    assert silent.now(64, _Run([]).paused) is None and silent.summary(1.0) == {}


def test_time_to_target_is_the_first_evaluation_that_reached_it() -> None:
    run = _Run([40.0, 60.0, 70.0], eval_every_samples=16, target_accuracy=50.0)
    for samples in (16, 32, 48):
        run.at(samples)
    summary = run.evaluations.summary(first_step_s=5.0)
    assert summary[metric.SAMPLES_TO_TARGET] == 32 and summary[metric.TARGET_REACHED] == 1.0
    assert summary[metric.TIME_TO_TARGET_E2E_S] == 320.0 and summary[metric.TIME_TO_TARGET_S] == 315.0
    assert summary[metric.TEST_ACCURACY] == 70.0 and summary[metric.EVALUATIONS] == 3
