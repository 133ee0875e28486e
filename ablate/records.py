"""The trial record: the one place that reads and writes what a trial stored, and what MLflow gets of it.

A *measurement* is one Optuna trial: one combination in one block of the
protocol (`ablate.protocol`), in its own process. The Optuna study is the
source of truth for what ran; `load` reads it back as one `Record` per
combination and device, holding its measurements, which is what the table,
the analysis and the report read. The user attrs a trial carries are read
back here (`from_trial`); the runner and `ablate sync` still spell the keys
they write themselves.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any, Mapping

import optuna
from optuna.trial import FrozenTrial, TrialState

BASELINE = "baseline"
PARITY = "parity"  # ablate.protocol.PARITY: a training run at another seed (records does not import the protocol)


class State(str, Enum):
    """A trial's `state` user attr. COMPLETE, SKIPPED and FAILED are results; the others are not."""

    COMPLETE = "complete"
    SKIPPED = "skipped"
    FAILED = "failed"
    RUNNING = "running"  # set when it starts; still there if the study was killed during it
    INTERRUPTED = "interrupted"  # the study was stopped during it; it runs again
    DUPLICATE = "duplicate"  # another trial holds its (combination, block) (ablate.claim); never logged


DUPLICATE = State.DUPLICATE.value
# Finished trials without a result of their own: stopped before the end, or a concurrent duplicate.
NO_RESULT = (State.INTERRUPTED.value, State.RUNNING.value, State.DUPLICATE.value)
FINISHED = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)
UNKNOWN_MACHINE = {"device": "unknown", "device_name": "unknown", "torch": "unknown", "commit": "unknown",
                   "host": "unknown"}
# MLflow run status of each state; an interrupted or dead trial's run is KILLED.
MLFLOW_STATE = {"complete": "complete", "skipped": "skipped", "pruned": "skipped", "failed": "failed", "fail": "failed"}


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
    block: int = 0  # the protocol's block this measurement ran in
    phase: str = "screen"  # screen, race or full (ablate.protocol)
    position: int = 0  # its place in the block's random order
    accuracy_group: str | None = None  # combinations that change the numbers alike train to the same accuracy
    seed_index: int = 0  # which of the run's training seeds trained it (0: the run's own; 1, 2...: parity seeds)
    # A combination's record holds all its measurements with a result; a measurement's own record holds none.
    measurements: tuple[Record, ...] = field(default=(), compare=False, repr=False)
    trial: FrozenTrial | None = field(default=None, compare=False, repr=False)  # for Optuna's own Pareto front

    @property
    def complete(self) -> bool:
        return self.state == State.COMPLETE

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
    def log_throughput(self) -> float | None:
        """Mean log throughput of the timed windows: one process's measurement, as the protocol uses it."""
        if not self.complete or not self.windows:
            return None
        return sum(math.log(w) for w in self.windows) / len(self.windows)

    @property
    def batch_size(self) -> int | None:
        steps = self.metrics.get("train_steps")
        return round(self.metrics["train_samples"] / steps) if steps else None

    @property
    def device(self) -> str:
        return self.machine["device_name"]


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
        block=int(a.get("block", 0)),
        phase=a.get("phase", "screen"),
        position=int(a.get("position", 0)),
        accuracy_group=a.get("accuracy_group"),
        seed_index=int(a.get("seed_index", 0)),
        trial=trial,
    )


def has_result(trial: FrozenTrial) -> bool:
    """Finished with a result of its own: complete, skipped or failed (not interrupted, not a duplicate)."""
    return trial.state.is_finished() and trial.user_attrs.get("state", State.RUNNING) not in NO_RESULT


def load_measurements(study: optuna.Study) -> list[Record]:
    """Every trial with a result, as a record of its own, in trial order."""
    return [from_trial(t) for t in study.get_trials(deepcopy=False, states=FINISHED) if has_result(t)]


def load(study: optuna.Study) -> list[Record]:
    """One record per combination and device, holding its measurements (see `combine`)."""
    return combine(load_measurements(study))


def combine(measurements: list[Record]) -> list[Record]:
    """Measurements grouped by (device, combination) into one record each.

    The combination's record is its *primary* measurement - the one that trained (or borrowed) its accuracy,
    else its first complete one, else its last - with `measurements` set to all of them and `throughput` the
    geometric mean over its complete measurements' own (each the geometric mean of its windows; parity runs at
    other seeds left out: they train, and their windows are not paired with a baseline). That is the baseline's
    throughput in every table; another combination's row shows the baseline's times its speed-up
    (`ablate.comparison`). The analysis reads the measurements; one-off costs,
    memory and accuracy come from the primary.
    """
    groups: dict[tuple[str, str], list[Record]] = {}
    for m in measurements:
        groups.setdefault((m.device, m.combination), []).append(m)
    out = []
    for ms in groups.values():
        done = [m for m in ms if m.complete]
        primary = (next((m for m in done if m.accuracy_trained and m.seed_index == 0), None)
                   or next((m for m in done if m.phase != PARITY), None) or (done[0] if done else ms[-1]))
        metrics = dict(primary.metrics)
        if timed := [m for m in done if m.phase != PARITY]:
            metrics["throughput"] = math.exp(sum(math.log(m.throughput) for m in timed) / len(timed))
        out.append(replace(primary, metrics=metrics, measurements=tuple(ms)))
    return out


def baseline(records: list[Record]) -> Record | None:
    return next((r for r in records if r.combination == BASELINE and r.complete), None)


def by_device(records: list[Record]) -> dict[str, list[Record]]:
    """Records grouped by the device they ran on: results from different devices are never compared."""
    groups: dict[str, list[Record]] = {}
    for r in records:
        groups.setdefault(r.device, []).append(r)
    return groups


def mlflow_payload(attrs: Mapping[str, Any], fallback_state: str) -> tuple[str, str, dict[str, float], dict[str, str]]:
    """A finished trial's MLflow state, reason, metrics and tags, from its user attrs.

    The one builder for the run that `ablate run` logs live and the run that `ablate sync` logs later.
    """
    state = MLFLOW_STATE.get(attrs.get("state", fallback_state), "killed")
    tags = {"ablate.block": str(attrs.get("block", 0)), "ablate.phase": str(attrs.get("phase", "screen")),
            "ablate.position": str(attrs.get("position", 0))}
    if attrs.get("training_seed") is not None:
        tags["ablate.training_seed"] = str(attrs["training_seed"])
    metrics: dict[str, float] = {}
    if state == State.COMPLETE:
        metrics = dict(attrs.get("metrics", {}))
        if attrs.get("accuracy_group") is not None:
            tags["ablate.accuracy_group"] = str(attrs["accuracy_group"])
        if attrs.get("accuracy_note"):
            tags["ablate.accuracy_note"] = attrs["accuracy_note"]
        if attrs.get("accuracy_from") is not None:
            tags["ablate.accuracy_from"] = str(attrs["accuracy_from"])
    return state, attrs.get("reason", ""), metrics, tags
