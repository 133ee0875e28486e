"""The trial record: the one place that reads and writes what a trial stored, and what MLflow gets of it.

A *measurement* is one Optuna trial: one combination in one block of the
protocol (`ablate.stats.protocol`), in its own process. The Optuna study is the
source of truth for what ran; `load` reads it back as one `Record` per
combination and device, holding its measurements, which is what the table,
the analysis and the report read.

This module is the only one that spells a trial's stored key. A trial's
user attrs are read back as a typed `Record` (`from_trial`) and written by
the small functions below (`queue`, `place`, `start`, `mark`, `result`...);
the Optuna study's own attrs are `ablate.store.study_record`'s, and the keys
inside a trial's `metrics` are `ablate.trial.metrics`'s. Why one owner: the
stored format is what resumes, `ablate sync` and `ablate report` read back,
so a key spelled twice is a key that can drift apart.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any, Mapping, Sequence

import optuna
from optuna.trial import FrozenTrial, Trial, TrialState

from ablate.config.choices import BASELINE

# A training for accuracy parity at one of the run's seeds (ablate.stats.parity), or the table's once after the answer:
# no speed-up or throughput comes from either (`combine`). The phases' one home is ablate.config.design.
from ablate.config.design import PARITY as PARITY
from ablate.config.design import TABLE as TABLE
from ablate.config.design import TRAININGS as TRAININGS
from ablate.store.study_record import from_study
from ablate.trial import metrics as metric


class State(str, Enum):
    """A trial's `state` user attr. COMPLETE, SKIPPED and FAILED are results; the others are not."""

    COMPLETE = "complete"
    SKIPPED = "skipped"
    FAILED = "failed"
    RUNNING = "running"  # set when it starts; still there if the study was killed during it
    INTERRUPTED = "interrupted"  # the study was stopped during it; it runs again
    DUPLICATE = "duplicate"  # another trial holds its (combination, block) (ablate.store.claim); never logged


DUPLICATE = State.DUPLICATE.value
# Finished trials without a result of their own: stopped before the end, or a concurrent duplicate.
NO_RESULT = (State.INTERRUPTED.value, State.RUNNING.value, State.DUPLICATE.value)
FINISHED = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)
# A trial's stored machine before anything is known of it: every field of ablate.trial.machine.Machine (spelled
# here, not imported: the store does not import torch; tests/trial/test_machine.py holds the two alike). A record
# stored before a field existed reads "unknown" for it (`from_trial` lays the stored dict over this one).
UNKNOWN_MACHINE = {key: "unknown" for key in ("device", "device_name", "torch", "commit", "host", "python", "threads",
                                              "cuda", "cudnn", "driver", "gpu_uuid")}
# MLflow run status of each state; an interrupted or dead trial's run is KILLED.
MLFLOW_STATE = {"complete": "complete", "skipped": "skipped", "pruned": "skipped", "failed": "failed", "fail": "failed"}
# The user attrs a queued trial carries into its run: where it sits in the protocol, the training seed it
# trains at (a parity run's), and whether TPE picked it (a requeued pick still counts as one).
_SLOT = ("block", "position", "phase", "combination", "seed_index", "picked")
ACCURACY_FROM_TAG = "ablate.accuracy_from"  # an MLflow run's tag: the trial whose training gave its test accuracy


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
    phase: str = "screen"  # screen, race or full (ablate.stats.protocol)
    position: int = 0  # its place in the block's random order
    accuracy_group: str | None = None  # combinations that change the numbers alike train to the same accuracy
    seed_index: int = 0  # which of the run's training seeds trained it (0: the run's own; 1, 2...: parity seeds)
    training_seed: int | None = None  # the seed that one is (ablate.store.seeds.training)
    picked: bool = False  # `--search optuna`: TPE picked it (a queued baseline was not picked)
    compile_graph: str | None = None  # its compile cache's graph key (ablate.trial.compile_cache); None: no cache
    profiling: bool = False  # it was asked for the profiling window (ablate.run.objective.profiles)
    # A combined record whose one-off costs are another combination's measurement (a cold one of the same compiled
    # graph: every measurement of its own started warm): that measurement's number.
    one_off_from: int | None = None
    # Whether it holds a place in the protocol (block, position): a queued trial does from the start, one TPE
    # picks once it is placed; a grid trial that found nothing queued never does.
    has_slot: bool = True
    # A combination's record holds all its measurements with a result; a measurement's own record holds none.
    measurements: tuple[Record, ...] = field(default=(), compare=False, repr=False)
    trial: FrozenTrial | None = field(default=None, compare=False, repr=False)  # for Optuna's own Pareto front

    @property
    def complete(self) -> bool:
        return self.state == State.COMPLETE

    @property
    def place(self) -> str:
        """Where it ran, in words: its block, or for an accuracy training (stored in blocks below zero, one a seed)
        its training seed, counted from 1."""
        return f"accuracy seed {self.seed_index + 1}" if self.phase in TRAININGS else f"block {self.block}"

    @property
    def every_measurement(self) -> tuple[Record, ...]:
        """The measurements it stands for: a combination's record its measurements, a measurement's record itself."""
        return self.measurements or (self,)

    @property
    def throughput(self) -> float | None:
        return self.metrics.get(metric.THROUGHPUT)

    @property
    def accuracy(self) -> float | None:
        return self.metrics.get(metric.TEST_ACCURACY)

    @property
    def windows(self) -> tuple[float, ...]:
        """Throughput of each timed window, in order."""
        return metric.windows(self.metrics)

    @property
    def log_throughput(self) -> float | None:
        """Mean log throughput of the timed windows: one process's measurement, as the protocol uses it."""
        if not self.complete or not self.windows:
            return None
        return metric.log_mean(self.windows)

    @property
    def batch_size(self) -> int | None:
        steps = self.metrics.get(metric.TRAIN_STEPS)
        return round(self.metrics[metric.TRAIN_SAMPLES] / steps) if steps else None

    @property
    def device(self) -> str:
        return self.machine["device_name"]

    @property
    def slot(self) -> tuple[int, int] | None:
        """Where it sits in the protocol, (block, position); None before it has a place."""
        return (self.block, self.position) if self.has_slot else None


def from_trial(trial: FrozenTrial | Trial) -> Record:
    """A trial's record: a stored (frozen) trial, or the live one a worker is running (its state: running)."""
    a = trial.user_attrs
    return Record(
        number=trial.number,
        combination=a.get("combination", str(trial.number)),
        levels=dict(trial.params),
        state=a.get("state", trial.state.name.lower() if isinstance(trial, FrozenTrial) else State.RUNNING.value),
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
        training_seed=a.get("training_seed"),
        picked=bool(a.get("picked")),
        compile_graph=a.get("compile_graph"),
        profiling=bool(a.get("profiling")),
        has_slot="block" in a,
        trial=trial if isinstance(trial, FrozenTrial) else None,
    )


def has_result(trial: FrozenTrial) -> bool:
    """Finished with a result of its own: complete, skipped or failed (not interrupted, not a duplicate)."""
    return trial.state.is_finished() and trial.user_attrs.get("state", State.RUNNING) not in NO_RESULT


def stopped(trial: FrozenTrial) -> bool:
    """Failed in Optuna because its run was stopped (Ctrl-C, SIGTERM, a kill), not by its own failure: marked
    interrupted, or still running, or never got as far as a state of its own."""
    return trial.state == TrialState.FAIL and trial.user_attrs.get("state", State.RUNNING) in (
        State.RUNNING, State.INTERRUPTED)


def run_ids(optuna_study: optuna.Study) -> dict[int, str]:
    """Trial number -> MLflow run id: the trial's own `mlflow_run_id`, or the one `ablate sync` recorded."""
    ids = {t.number: t.user_attrs["mlflow_run_id"] for t in optuna_study.get_trials(deepcopy=False)
           if t.user_attrs.get("mlflow_run_id")}
    ids.update(from_study(optuna_study).runs)
    return ids


def load_measurements(optuna_study: optuna.Study) -> list[Record]:
    """Every trial with a result, as a record of its own, in trial order."""
    return [from_trial(t) for t in optuna_study.get_trials(deepcopy=False, states=FINISHED) if has_result(t)]


def load(optuna_study: optuna.Study) -> list[Record]:
    """One record per combination and device, holding its measurements (see `combine`)."""
    return combine(load_measurements(optuna_study))


def combine(measurements: list[Record]) -> list[Record]:
    """Measurements grouped by (device, combination) into one record each.

    The combination's record is its *primary* measurement - the one that trained (or borrowed) its accuracy,
    else its first complete one, else its last - with `measurements` set to all of them and `throughput` the
    geometric mean over its complete measurements' own (each the geometric mean of its windows; accuracy trainings
    left out: they train, and their windows are not paired with a baseline). That is the baseline's
    throughput in every table; another combination's row shows the baseline's times its speed-up
    (`ablate.stats.answer.comparison`). The analysis reads the measurements; memory and accuracy come from the primary,
    and so do one-off costs, unless the primary started warm from its graph's compile cache
    (`ablate.trial.compile_cache`): then they come from a cold measurement of the same graph - the combination's own
    first, else the first of a sibling sharing its graph (`one_off_from` names it) - and its end-to-end time to the
    target adds the difference (`fresh_start_extra_s`): a fresh start compiles cold (docs/measuring.md).
    """
    groups: dict[tuple[str, str], list[Record]] = {}
    trained: dict[tuple[str, str | None], Record] = {}  # (device, accuracy group) -> its first seed's training
    colds: dict[tuple[str, str], Record] = {}  # (device, graph) -> its first complete cold measurement
    for m in measurements:
        groups.setdefault((m.device, m.combination), []).append(m)
        if m.complete and m.accuracy_trained and m.seed_index == 0:
            trained.setdefault((m.device, m.accuracy_group), m)
        if cold_measurement([m]):
            colds.setdefault((m.device, _graph(m)), m)
    out = []
    for ms in groups.values():
        done = [m for m in ms if m.complete]
        primary = (next((m for m in done if m.accuracy_trained and m.seed_index == 0), None)
                   or next((m for m in done if m.phase not in TRAININGS), None) or (done[0] if done else ms[-1]))
        metrics, one_off_from = dict(primary.metrics), None
        if metrics.get(metric.COMPILE_CACHE_WARM) and (
                cold := cold_measurement(done) or colds.get((primary.device, _graph(primary)))):
            extra = fresh_start_extra_s(primary, cold)
            one_off_from = cold.number if cold.combination != primary.combination else None
            metrics.update({k: cold.metrics[k] for k in metric.ONE_OFF_COSTS if k in cold.metrics})
            if metric.TIME_TO_TARGET_E2E_S in metrics:
                metrics[metric.TIME_TO_TARGET_E2E_S] += extra
        if timed := [m for m in done if m.phase not in TRAININGS]:
            # A complete measurement has its throughput.
            metrics[metric.THROUGHPUT] = metric.geometric_mean(m.metrics[metric.THROUGHPUT] for m in timed)
        donor = trained.get((primary.device, primary.accuracy_group)) if primary.accuracy_group else None
        if donor is not None and primary.complete and not trained_figures(metrics):  # its group trained later
            metrics.update(held_out(donor.metrics))
            primary = replace(primary, accuracy_from=donor.number)
        out.append(replace(primary, metrics=metrics, measurements=tuple(ms), one_off_from=one_off_from))
    return out


def _graph(m: Record) -> str:
    """What shares `m`'s compiled code: its graph key; stored before graphs shared a cache, its combination."""
    return m.compile_graph or m.combination


def cold_measurement(measurements: Sequence[Record]) -> Record | None:
    """A combination's first complete measurement that compiled cold (`ablate.trial.compile_cache`), if it has one."""
    return next((m for m in measurements if m.complete and not m.metrics.get(metric.COMPILE_CACHE_WARM, 1.0)), None)


def fresh_start_extra_s(measurement: Record, cold: Record | None) -> float:
    """What compiling cold adds to `measurement`'s end-to-end time: nothing unless it started warm from its graph's
    compile cache, else the `cold` measurement's (its own combination's or a sibling's of the same graph) one-off
    cost less its own. Why: a fresh start compiles cold, and a later measurement starts warm."""
    if cold is None or not measurement.metrics.get(metric.COMPILE_CACHE_WARM):
        return 0.0
    return cold.metrics.get(metric.ONE_OFF_S, 0.0) - measurement.metrics.get(metric.ONE_OFF_S, 0.0)


def held_out(metrics: Mapping[str, float]) -> dict[str, float]:
    """Every held-out figure of a training (accuracy, loss, bits per byte): what its group's other members borrow."""
    return {k: v for k, v in metrics.items() if k.startswith(metric.HELD_OUT)}


def trained_figures(metrics: Mapping[str, float]) -> bool:
    """Whether a measurement has its group's held-out figures (every training evaluates a test loss)."""
    return metric.TEST_LOSS in metrics


def baseline(records: list[Record]) -> Record | None:
    return next((r for r in records if r.combination == BASELINE and r.complete), None)


def by_device(records: list[Record]) -> dict[str, list[Record]]:
    """Records grouped by the device they ran on: results from different devices are never compared."""
    groups: dict[str, list[Record]] = {}
    for r in records:
        groups.setdefault(r.device, []).append(r)
    return groups


def mlflow_payload(record: Record) -> tuple[str, str, dict[str, float], dict[str, str]]:
    """A finished trial's MLflow state, reason, metrics and tags.

    The one builder for the run that `ablate run` logs live and the run that `ablate sync` logs later.
    """
    state = MLFLOW_STATE.get(record.state, "killed")
    tags = {"ablate.block": str(record.block), "ablate.phase": str(record.phase),
            "ablate.position": str(record.position)}
    if record.training_seed is not None:
        tags["ablate.training_seed"] = str(record.training_seed)
    metrics: dict[str, float] = {}
    if state == State.COMPLETE:
        metrics = dict(record.metrics)
        if record.accuracy_group is not None:
            tags["ablate.accuracy_group"] = str(record.accuracy_group)
        if record.accuracy_note:
            tags["ablate.accuracy_note"] = record.accuracy_note
        if record.accuracy_from is not None:
            tags[ACCURACY_FROM_TAG] = str(record.accuracy_from)
    return state, record.reason, metrics, tags


# -- writing a trial: each step of a measurement, in the order the worker takes them ------------------------

def queue(optuna_study: optuna.Study, levels: Mapping[str, str], block: int, position: int, phase: str,
          combination: str, seed_index: int) -> None:
    """Queue one planned measurement with its slot; Optuna's storage hands each queued trial to exactly one worker."""
    optuna_study.enqueue_trial(dict(levels), user_attrs={"block": block, "position": position, "phase": phase,
                                                        "combination": combination, "seed_index": seed_index})


def waiting_copy(trial: FrozenTrial, system_attrs: Mapping[str, Any]) -> FrozenTrial:
    """A queued (WAITING) trial that measures `trial`'s slot again (`ablate.store.storage.requeue`)."""
    slot = {k: trial.user_attrs[k] for k in _SLOT if k in trial.user_attrs}
    return optuna.trial.create_trial(state=TrialState.WAITING, user_attrs=slot, system_attrs=dict(system_attrs))


def place(trial: Trial, block: int, position: int, phase: str) -> None:
    """A trial TPE picked, given its place in the screening blocks (a queued trial came with its own)."""
    for key, value in {"block": block, "position": position, "phase": phase, "picked": True}.items():
        trial.set_user_attr(key, value)


def start(trial: Trial, combination: str, machine: Mapping[str, str], worker: str) -> None:
    """The measurement starts: its label, where it runs (`worker`: host and process; several run per host)."""
    trial.set_user_attr("combination", combination)
    trial.set_user_attr("machine", dict(machine))
    trial.set_user_attr("worker", worker)
    trial.set_user_attr("state", State.RUNNING.value)  # replaced when it ends; still there if the study was stopped


def set_run(trial: Trial, run_id: str | None) -> None:
    """Its MLflow run (None while MLflow is unreachable: `ablate sync` logs one later)."""
    trial.set_user_attr("mlflow_run_id", run_id)


def set_measuring(trial: Trial, compile_graph: str | None, profiling: bool) -> None:
    """What it measures beside its windows: its compile cache's graph key (None: no cache), and whether it asks for
    the profiling window."""
    if compile_graph is not None:
        trial.set_user_attr("compile_graph", compile_graph)
    trial.set_user_attr("profiling", profiling)


def set_training(trial: Trial, accuracy_group: str, training_seed: int) -> None:
    """What it trains as: its accuracy group (`ablate.config.choices.accuracy_group`) and its training seed."""
    trial.set_user_attr("accuracy_group", accuracy_group)
    trial.set_user_attr("training_seed", training_seed)


def mark(trial: Trial, state: State, reason: str | None = None) -> None:
    """Its state, and why (skipped, failed, interrupted, a duplicate); no reason: none is stored."""
    trial.set_user_attr("state", state.value)
    if reason is not None:
        trial.set_user_attr("reason", reason)


def mark_interrupted(optuna_study: optuna.Study, trial: FrozenTrial) -> None:
    """A trial still RUNNING after its run was killed outright: interrupted (through the storage: a frozen trial
    has no setter, and the trial is still updatable until it is failed)."""
    optuna_study._storage.set_trial_user_attr(trial._trial_id, "state", State.INTERRUPTED.value)


def result(trial: Trial, metrics: Mapping[str, float], timeline: Any, accuracy_note: str | None = None,
           accuracy_trained: bool = False, accuracy_from: int | None = None) -> None:
    """Its measurement, complete: `accuracy_from` names the trial whose training gave its accuracy (its own
    number when `accuracy_trained`); `timeline`: when it measured, and the imports beside it."""
    trial.set_user_attr("timeline", timeline)
    if accuracy_note:  # stand-in data, or a task without an accuracy
        trial.set_user_attr("accuracy_note", accuracy_note)
    if accuracy_trained:
        trial.set_user_attr("accuracy_trained", True)
    if accuracy_from is not None:
        trial.set_user_attr("accuracy_from", accuracy_from)
    trial.set_user_attr("metrics", dict(metrics))
    trial.set_user_attr("state", State.COMPLETE.value)
