"""The marks a trial's timeline holds (ablate.trial.metrics.Mark): the step clock's, through the real loop on a fake
clock, and the trial process's launch, exit and hand-off from the one before it."""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Iterator

import pytest
import torch
from fake_time import FakeTime, installed

from ablate.config import study as studies
from ablate.config.study import Budget
from ablate.trial.interpreters import Interpreters
from ablate.trial.loop import train
from ablate.trial.measure import StepClock
from ablate.trial.metrics import TIMELINE, Mark
from ablate.trial.process import TrialFailed, TrialSpec, run_in_fresh_process
from ablate.workload.tasks import Quality

BATCH, STEP_S, EVAL_S = 8, 0.5, 4.0  # binary fractions: the fake clock's sums are exact
TINY = Path(__file__).resolve().parents[1] / "studies" / "tiny.yaml"


class Loop:
    """A loader, a Stack and a Task in one: each batch takes `STEP_S` on the fake clock, in the loader's next()."""

    def __init__(self, fake: FakeTime) -> None:
        self.fake = fake

    def __iter__(self) -> Iterator[torch.Tensor]:
        while True:
            self.fake.now += STEP_S
            yield torch.zeros(1)

    def to_device(self, batch: Any, device: torch.device) -> Any:
        return batch

    def autocast(self, device: torch.device) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    def loss(self, model: torch.nn.Module, batch: Any) -> torch.Tensor:
        return torch.tensor(1.0)

    def backward(self, loss: torch.Tensor) -> None:
        pass

    def step(self, optimizer: Any, max_grad_norm: float | None = None) -> None:
        pass

    def samples(self, batch: Any) -> int:
        return BATCH


@pytest.fixture
def fake_time(monkeypatch) -> FakeTime:
    return installed(monkeypatch)


def test_the_clock_marks_its_first_step_windows_evaluations_and_profiling_window(fake_time):
    def evaluate() -> Quality:
        fake_time.now += EVAL_S
        return Quality(0.5, 90.0)

    budget = Budget(train_samples=10 * BATCH, warmup_samples=BATCH, window_samples=2 * BATCH, windows=2,
                    eval_every_samples=3 * BATCH, profile_steps=3, profile_seconds=0)
    clock = StepClock(budget, torch.device("cpu"), train_for_accuracy=True, evaluate=evaluate)
    loop = Loop(fake_time)
    train(loop, loop, torch.nn.Linear(1, 1), None, loop, clock.device, clock)
    clock.evaluate_now()  # as the trial does after the loop (here the last periodic one: not run again)
    marks = clock.marks
    assert marks[Mark.FIRST_STEP] == [0.0, STEP_S]  # the loop's first batch asked for at 0
    (opened, closed), evaluations = marks[Mark.WINDOWS], marks[Mark.EVALUATING]
    assert STEP_S <= opened < closed <= marks[Mark.PROFILING][0] < marks[Mark.PROFILING][1]
    assert len(evaluations) == len(clock.evaluations) == 4  # at 3, 6 and 9 batches, and at the budget's 10
    assert all(end - start == EVAL_S for start, end in evaluations)
    inside = sum(end - start for start, end in evaluations if opened <= start and end <= closed)
    assert closed - opened - inside == sum(w.seconds for w in clock.windows)  # the windows' own time, and theirs
    assert marks[Mark.PROFILING][1] - marks[Mark.PROFILING][0] == 3 * STEP_S


def _spec() -> TrialSpec:
    study = studies.load(str(TINY), "cpu")
    return TrialSpec(study, tuple(opts[0] for _, opts in study.space), "cpu", train_for_accuracy=False)


def no_preload() -> None:
    pass


def answers(spec: TrialSpec) -> dict:
    return {"throughput": 1.0}


def fails(spec: TrialSpec) -> dict:
    raise ValueError("injected")


@pytest.mark.slow
def test_a_trial_marks_its_launch_and_exit_and_the_hand_off_from_the_one_before_failed_or_not():
    with Interpreters(preload=no_preload, keep=1) as pool:
        first = run_in_fresh_process(_spec(), answers, interpreters=pool)[TIMELINE]
        with pytest.raises(TrialFailed):
            run_in_fresh_process(_spec(), fails, interpreters=pool)
        failed_exit = pool.last_exit
        second = run_in_fresh_process(_spec(), answers, interpreters=pool)[TIMELINE]
    assert Mark.HAND_OFF not in first  # none before it
    assert first[Mark.LAUNCHED] < first[Mark.EXITED] < failed_exit
    assert second[Mark.HAND_OFF] == [failed_exit, second[Mark.LAUNCHED]]
    assert second[Mark.LAUNCHED] < second[Mark.EXITED]
