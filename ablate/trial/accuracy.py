"""The evaluations of a training for accuracy: when one is due, and what they say.

A run that trains for accuracy evaluates the held-out set every `eval_every_samples` and once more at the end of
its `train_samples`, at most once per point in training, and never after that end: the timed windows may go on
past it (`ablate.trial.measure`), but every combination's accuracy is that of the same samples. What the
evaluations say is the last held-out quality and the training time at which the target (`target_accuracy`, or
for a loss target `target_loss`) was first reached, twice: from the end of the first step (compilation excluded)
and from the start of the loop (compilation included; the trial adds the model preparation time).

Apart from the clock because it is a schedule and a reading, not timing: the clock stops around each evaluation
(its time, joules and memory are none of the windows') and that pause stays with the clock's method. Which
held-out samples an evaluation reads is `ablate.workload.evaluation`'s.
"""
from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Callable

from ablate.config.study import Budget
from ablate.trial import metrics as metric
from ablate.workload.tasks import Quality


@dataclass
class Evaluation:
    samples: int
    train_s: float  # training time from the start of the loop, evaluations excluded
    quality: Quality

    def reached(self, budget: Budget) -> bool:
        if budget.target_accuracy is not None:
            return self.quality.accuracy is not None and self.quality.accuracy >= budget.target_accuracy
        return budget.target_loss is not None and self.quality.loss <= budget.target_loss


@dataclass
class Evaluations:
    """A training for accuracy's evaluations so far, when the next periodic one is due, and whether it is over.

    The clock asks only while its run trains for accuracy (`StepClock.train_for_accuracy`)."""

    budget: Budget
    evaluate: Callable[[], Quality] | None  # held-out quality; None: nothing is evaluated
    evaluations: list[Evaluation] = field(default_factory=list)
    over: bool = False  # the training for accuracy reached its train_samples: no evaluation follows
    _next: int = 0  # the samples at which the next periodic evaluation is due; 0: none is

    def __post_init__(self) -> None:
        self._next = self.budget.eval_every_samples or 0

    def due(self, samples: int) -> bool:
        """A periodic evaluation is due, `samples` into training."""
        return not self.over and bool(self._next) and samples >= self._next

    def now(self, samples: int, paused: Callable[[], AbstractContextManager[float]]) -> Evaluation | None:
        """Evaluate, `samples` into training, inside `paused()`: the clock stopped, yielding the training time so far.
        At most once per point in training, and never after the training for accuracy is over. Moves the periodic
        schedule past `samples`."""
        if self.evaluate is None:
            evaluation = None
        elif self.evaluations and (self.over or self.evaluations[-1].samples == samples):
            evaluation = self.evaluations[-1]
        else:
            with paused() as train_s:
                quality = self.evaluate()
            evaluation = Evaluation(samples, train_s, quality)
            self.evaluations.append(evaluation)
        while self._next and self._next <= samples:
            self._next += self.budget.eval_every_samples or 0
        return evaluation

    def end(self, samples: int, paused: Callable[[], AbstractContextManager[float]]) -> None:
        """The training for accuracy is over: its last evaluation, here (unless one ran at these samples already)."""
        self.now(samples, paused)
        self.over = True

    def summary(self, first_step_s: float) -> dict[str, float]:
        """The last held-out quality and, where the budget sets a target, when it was first reached."""
        if not self.evaluations:
            return {}
        last = self.evaluations[-1].quality
        out = {metric.TEST_LOSS: last.loss, metric.EVALUATIONS: float(len(self.evaluations)),
               **{f"{metric.HELD_OUT}{name}": value for name, value in last.extra}}
        if last.accuracy is not None:
            out[metric.TEST_ACCURACY] = last.accuracy
        budget = self.budget
        if budget.target_accuracy is not None or budget.target_loss is not None:
            reached = next((e for e in self.evaluations if e.reached(budget)), None)
            if budget.target_accuracy is not None:
                out[metric.TARGET_ACCURACY] = budget.target_accuracy
            elif budget.target_loss is not None:
                out[metric.TARGET_LOSS] = budget.target_loss
            out[metric.TARGET_REACHED] = float(reached is not None)
            if reached:
                out.update({metric.SAMPLES_TO_TARGET: float(reached.samples),
                            metric.TIME_TO_TARGET_S: reached.train_s - first_step_s,
                            metric.TIME_TO_TARGET_E2E_S: reached.train_s})
        return out
