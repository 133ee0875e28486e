"""How one measurement ends, one call each: its Optuna record written, then its MLflow run finished from it.

Every ending writes the trial's state (and why) through `ablate.store.records`
first, so the Optuna storage, the source of truth, has it before MLflow is
told; the run is then finished from the stored record by `records.mlflow_payload`,
the builder `ablate sync` uses too, so a live run and a synced one agree. A
duplicate and an interruption finish no run here: a duplicate never starts one,
and an interrupted one's run is KILLED by `ablate.run.recovery` (`Recovery.interrupted`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import optuna
from optuna.trial import Trial

from ablate.store import claim, records
from ablate.store.records import State
from ablate.tracking.tracker import Tracker
from ablate.trial.failures import INTERRUPTED
from ablate.trial.process import TrialFailed


@dataclass
class Recorder:
    """One trial's endings. `duplicate` and `skip` return the exception that ends the trial, for the caller to
    raise; `fail` and `interrupted` record the exception the caller is handling, which it raises again."""

    trial: Trial
    tracker: Tracker
    run_id: str | None = None  # its MLflow run, once `run_started` names it

    def run_started(self, run_id: str | None) -> None:
        """Its MLflow run (None while MLflow is unreachable: `ablate sync` logs one later)."""
        self.run_id = run_id
        records.set_run(self.trial, run_id)

    def duplicate(self, why: str, reason: str | None = None) -> claim.Duplicate:
        """Another trial holds its measurement (`ablate.store.claim`); `reason`: what is stored with it."""
        records.mark(self.trial, State.DUPLICATE, reason)
        return claim.Duplicate(why)

    def skip(self, reason: str) -> optuna.TrialPruned:
        """It cannot run here (its choices do not compose, or this machine cannot run them)."""
        records.mark(self.trial, State.SKIPPED, reason)
        self._finish_run()
        return optuna.TrialPruned(reason)

    def fail(self, error: TrialFailed) -> None:
        records.mark(self.trial, State.FAILED, str(error))
        self._finish_run()

    def interrupted(self) -> None:
        """Stopped during it (Ctrl-C, SIGTERM): Optuna fails it next; this says why."""
        records.mark(self.trial, State.INTERRUPTED, INTERRUPTED)

    def complete(self, metrics: Mapping[str, float], timeline: Any, accuracy_note: str | None,
                 accuracy_trained: bool, accuracy_from: int | None) -> None:
        """Measured (`records.result`)."""
        records.result(self.trial, metrics, timeline, accuracy_note, accuracy_trained=accuracy_trained,
                       accuracy_from=accuracy_from)
        self._finish_run()

    def _finish_run(self) -> None:
        if self.run_id:
            self.tracker.finish_trial(self.run_id, *records.mlflow_payload(records.from_trial(self.trial)))
