"""A study's trials as plain records: what the table, the analysis and the report read.

Read back from the Optuna study (the source of truth for what ran), one record
per combination: a combination re-run after an interruption replaces the
interrupted attempt.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import optuna
from optuna.trial import FrozenTrial, TrialState

BASELINE = "baseline"
DUPLICATE = "duplicate"  # a trial that found its combination held by another (ablate.claim); never logged
# Finished trials without a result of their own: stopped before the end, or a concurrent duplicate.
NO_RESULT = ("interrupted", "running", DUPLICATE)
FINISHED = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)
UNKNOWN_MACHINE = {"device": "unknown", "device_name": "unknown", "torch": "unknown", "commit": "unknown",
                   "host": "unknown"}


@dataclass(frozen=True)
class Record:
    number: int
    combination: str
    levels: Mapping[str, str]  # dimension -> option label; "off" for the baseline's choice
    state: str  # complete, skipped, failed
    reason: str = ""
    metrics: Mapping[str, float] = field(default_factory=dict)
    accuracy_trained: bool = False
    accuracy_from: int | None = None
    machine: Mapping[str, str] = field(default_factory=lambda: dict(UNKNOWN_MACHINE))
    mlflow_run_id: str | None = None
    accuracy_note: str | None = None  # why accuracy was not measured (stand-in data)
    trial: FrozenTrial | None = field(default=None, compare=False, repr=False)  # for Optuna's own Pareto front

    @property
    def complete(self) -> bool:
        return self.state == "complete"

    @property
    def throughput(self) -> float | None:
        return self.metrics.get("throughput")

    @property
    def accuracy(self) -> float | None:
        return self.metrics.get("test_accuracy")

    @property
    def windows(self) -> tuple[float, ...]:
        """Throughput of each timed window, in order."""
        n = sum(1 for k in self.metrics if k.startswith("throughput_window_"))
        return tuple(self.metrics[f"throughput_window_{i}"] for i in range(n))

    @property
    def batch_size(self) -> int | None:
        steps = self.metrics.get("train_steps")
        return round(self.metrics["train_samples"] / steps) if steps else None


def from_trial(trial: FrozenTrial) -> Record:
    a = trial.user_attrs
    return Record(
        number=trial.number,
        combination=a.get("combination", str(trial.number)),
        levels=dict(trial.params),
        state=a.get("state", trial.state.name.lower()),
        reason=a.get("reason", ""),
        metrics=a.get("metrics", {}),
        accuracy_trained=bool(a.get("accuracy_trained")),
        accuracy_from=a.get("accuracy_from"),
        machine={**UNKNOWN_MACHINE, **a.get("machine", {})},
        mlflow_run_id=a.get("mlflow_run_id"),
        accuracy_note=a.get("accuracy_note"),
        trial=trial,
    )


def load(study: optuna.Study) -> list[Record]:
    """The last finished trial of each combination, as records."""
    latest: dict[str, FrozenTrial] = {}
    for trial in study.get_trials(deepcopy=False, states=FINISHED):
        if trial.user_attrs.get("state", "running") in NO_RESULT:  # stopped before it finished, or a duplicate
            continue
        latest[trial.user_attrs.get("combination", str(trial.number))] = trial
    return [from_trial(t) for t in latest.values()]


def baseline(records: list[Record]) -> Record | None:
    return next((r for r in records if r.combination == BASELINE and r.complete), None)


def by_device(records: list[Record]) -> dict[str, list[Record]]:
    """Records grouped by the device they ran on: results from different devices are never compared."""
    groups: dict[str, list[Record]] = {}
    for r in records:
        groups.setdefault(r.machine["device_name"], []).append(r)
    return groups
