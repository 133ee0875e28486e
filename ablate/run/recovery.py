"""Trials that a stopped run or a dead worker left unfinished: failed, their MLflow runs KILLED, queued again.

A measurement is queued again once, in its own block and place, so no
(combination, block) is lost and none is run twice.
"""
from __future__ import annotations

import time

import optuna
from optuna.storages import fail_stale_trials
from optuna.trial import FrozenTrial, TrialState

from ablate.store import claim, records, study_record
from ablate.store.storage import requeue
from ablate.tracking.tracker import Tracker
from ablate.trial.failures import INTERRUPTED


def _same_slot(a: FrozenTrial, b: FrozenTrial) -> bool:
    return claim.params(a) == claim.params(b) and claim.slot(a) == claim.slot(b)


class Recovery:
    def __init__(self, optuna_study: optuna.Study, tracker: Tracker, n_dims: int, heartbeat: bool,
                 grace_s: float) -> None:
        self.optuna_study, self.tracker, self.n_dims = optuna_study, tracker, n_dims
        self.heartbeat, self.grace_s = heartbeat, grace_s
        self.paramless_since: dict[int, float] = {}  # RUNNING trials without parameters -> first seen (monotonic)

    def interrupted(self) -> None:
        """Trials a stopped run left unfinished: failed in Optuna, KILLED in MLflow, queued again.

        That is trials still RUNNING (the run was killed outright) and failed
        trials marked "interrupted" or still "running" (Ctrl-C or SIGTERM;
        Optuna fails the trial it was running). A measurement is queued once:
        not when a later trial holds its slot (queued, running or with a
        result) or is queued again itself.
        """
        # With a heartbeat, RUNNING trials may be live workers': Optuna fails only the stale ones (see stale).
        for t in [] if self.heartbeat else self.optuna_study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            records.mark_interrupted(self.optuna_study, t)
            self.optuna_study.tell(t.number, state=TrialState.FAIL)
        trials = self.optuna_study.get_trials(deepcopy=False)
        ids = records.run_ids(self.optuna_study)
        stopped = [t for t in trials if records.stopped(t)]
        parent = study_record.from_study(self.optuna_study).parent_run_id
        self.tracker.kill_stopped(parent, {t.number: ids.get(t.number) for t in stopped}, INTERRUPTED)
        self._close_finished(parent, trials)
        for t in stopped:
            # A later trial on the slot takes it over if it holds it or is queued again itself; a duplicate that
            # yielded to `t` holds nothing, so `t` is queued again though the duplicate is later.
            later = any(u.number > t.number and _same_slot(u, t) and (claim.owns(u) or records.stopped(u))
                        for u in trials)
            if not later and len(claim.params(t)) == self.n_dims:
                requeue(self.optuna_study, t)

    def _close_finished(self, parent: str | None, trials: list[FrozenTrial]) -> None:
        """Runs left RUNNING for trials that have their result: a stop between the trial storing its result and
        MLflow closing its run (`Recorder._finish_run`). Closed from the stored trial, as `ablate sync` logs one."""
        finished = {t.number: t for t in trials if records.has_result(t)}
        for number, run_id in (self.tracker.running_children(parent) or {}).items():
            if number in finished:
                self.tracker.finish_trial(run_id, *records.mlflow_payload(records.from_trial(finished[number])))

    def stale(self) -> None:
        """Dead workers' trials: failed, their runs KILLED and their measurements queued again (see `dead`).

        Optuna's heartbeat check finds those whose worker stopped beating. It cannot see a trial whose
        worker died inside `ask()`, before its first beat: RUNNING, without parameters, forever. A live
        worker gives its trial parameters within moments, so one seen without them for the heartbeat's
        grace period (on this worker's clock: machines' clocks may disagree) is failed here.
        """
        if not self.heartbeat:
            return
        fail_stale_trials(self.optuna_study)
        now = time.monotonic()
        paramless = {t.number: t for t in self.optuna_study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
                     if not t.params}
        self.paramless_since = {n: self.paramless_since.get(n, now) for n in paramless}
        for number, since in self.paramless_since.items():
            if now - since > self.grace_s:
                trial = paramless[number]
                try:
                    failed = self.optuna_study._storage.set_trial_state_values(trial._trial_id, TrialState.FAIL)
                except optuna.exceptions.UpdateFinishedTrialError:  # another worker failed it first
                    failed = False
                if failed:
                    self.dead(self.optuna_study, trial)

    def dead(self, optuna_study: optuna.Study, trial: FrozenTrial) -> None:
        """Optuna's heartbeat callback for a trial whose worker died (called once, by the worker that failed it):
        its MLflow run KILLED, its measurement queued again."""
        self.tracker.kill_stopped(study_record.from_study(optuna_study).parent_run_id,
                                  {trial.number: records.from_trial(trial).mlflow_run_id}, INTERRUPTED)
        if len(claim.params(trial)) == self.n_dims:  # a queued measurement it had taken counts too
            requeue(optuna_study, trial)
