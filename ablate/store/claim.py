"""Exactly once under concurrency: which of several trials on one planned measurement runs it.

Optuna's storage hands each queued trial to one worker, but two workers that
find a block finished at the same moment both plan the next one (the plan is
deterministic, so they queue the same measurements), and Optuna's GridSampler
can hand one grid point to two workers that ask at once. So every trial, once
its parameters are in the storage, looks for another trial with the same
combination in the same slot (block and place: a screening block measures the
baseline twice); the lower trial number wins and the other ends
at once as a "duplicate" (FAIL in Optuna, no MLflow run, ignored by the records).

Why this is race-free: a trial's number is fixed when the storage creates it,
before its parameters are chosen, and each trial writes its parameters before
it reads the others'. `earlier_owner` first waits until every RUNNING trial
with a lower number has written all its parameters (or ended). So of two
trials X < Y on one combination, Y always sees X and yields; X yields only to
a lower number or a finished result, never to Y. A queued (WAITING) trial's
parameters are known from the start (its fixed params), so it counts at once.
"""
from __future__ import annotations

import time
from typing import Any, Callable

import optuna
from optuna.trial import FrozenTrial, TrialState

from ablate.store.records import from_trial, has_result

POLL_S = 0.1


class Duplicate(Exception):
    """This trial's combination belongs to another trial; the message names it."""


def params(trial: FrozenTrial) -> dict[str, Any]:
    """A trial's parameters; a queued (WAITING) trial has them only as the fixed parameters it was queued with,
    and one whose worker was killed between two suggestions has some of each (the fixed ones fill the rest)."""
    return {**trial.system_attrs.get("fixed_params", {}), **trial.params}


def owns(trial: FrozenTrial) -> bool:
    """Holds its combination: queued, running, or finished with a result."""
    return trial.state in (TrialState.WAITING, TrialState.RUNNING) or has_result(trial)


def slot(trial: FrozenTrial | optuna.Trial) -> tuple[int, int] | None:
    """Where a measurement sits in the protocol: (block, place in the block's order); None before it has one."""
    return from_trial(trial).slot


def earlier_owner(optuna_study: optuna.Study, number: int, combination: dict[str, Any], n_dims: int,
                  at: tuple[int, int] | None, poll: Callable[[], None] = lambda: None) -> FrozenTrial | None:
    """The trial that holds `combination` at slot `at` (block, place) ahead of trial `number`, or None when
    `number` runs it.

    `poll` runs while waiting for lower-numbered trials to write their parameters
    (failing stale trials there ends the wait for a worker that died before writing them).
    """
    while True:
        trials = optuna_study.get_trials(deepcopy=False)
        if any(t.number < number and t.state == TrialState.RUNNING and len(params(t)) < n_dims for t in trials):
            poll()
            time.sleep(POLL_S)
            continue
        for t in trials:
            if t.number != number and params(t) == combination and slot(t) == at and (
                    has_result(t) or (t.number < number and owns(t))):
                return t
        return None
