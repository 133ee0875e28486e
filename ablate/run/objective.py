"""One measurement: Optuna's objective for one trial of the protocol, and the progress line it ends with.

The runner (`ablate.run.runner`) decides what is queued; a trial arrives here
holding its slot (a queued measurement) or none (`--search optuna`: TPE
picked its combination, and it is placed in the screening blocks here). It
claims its combination (`ablate.store.claim`), starts its MLflow run, skips what
cannot run here, then trains and times it in a fresh process
(`ablate.trial.process`), with its graph's shared compile cache (`ablate.trial.compile_cache`) and, only where it
is its combination's first measurement, the profiling window (`profiles`); each way it can end is one call of its
`Recorder`. Accuracy
is trained once per accuracy group and borrowed by the group's other
combinations (`accuracy_donor`).
"""
from __future__ import annotations

import dataclasses
import errno
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import optuna
from optuna.trial import Trial, TrialState

from ablate.config.choices import BASELINE, Combination
from ablate.config.schema import Study
from ablate.run import full_disk
from ablate.run.recorder import Recorder
from ablate.stats.planner import Planner
from ablate.stats.protocol import FULL, SCREEN, TRAININGS
from ablate.store import claim, records, seeds
from ablate.store.records import Record, State
from ablate.tracking.parent_run import ParentRun
from ablate.tracking.tracker import Tracker, trial_params
from ablate.trial import compile_cache, foreign_load
from ablate.trial import metrics as metric
from ablate.trial.interpreters import Interpreters
from ablate.trial.machine import Machine
from ablate.trial.process import TrialFailed, TrialSpec, run_in_fresh_process
from strategies import ConflictError

SHARED_CPU_ENV = "ABLATE_CPU_WORKERS"  # "1" in the workers `run --workers N --device cpu` starts on one machine
QUIET_WAIT_S = 120.0  # at most this long waiting for a busy machine to quieten before measuring again
BUSY_PROBE_S = 1.0  # after a measurement kept disturbed, how long the next one looks for quiet before it starts


@dataclass(kw_only=True)
class Objective:
    """Called by `optuna.Study.optimize` with each trial; returns (throughput, test accuracy)."""

    study: Study
    machine: Machine
    search: str
    optuna_study: optuna.Study
    planner: Planner
    tracker: Tracker
    parent: ParentRun
    seeds: dict[str, int]
    results_dir: Path
    interpreters: Interpreters  # trial interpreters started ahead (ablate.trial.interpreters)
    poll: Callable[[], None]  # while waiting for other workers' trials: fail the stale ones (Recovery.stale)
    show: Callable[[str], None]  # what it is doing, after the progress bar
    say: Callable[[str], None]  # a line above the progress bar, kept in the scrollback
    # CPU workers sharing this machine compete on purpose (cli warns): their load on each other is not a reason to
    # measure again.
    shared_cpu: bool = field(default_factory=lambda: os.environ.get(SHARED_CPU_ENV) == "1")
    machine_busy: bool = False  # the last measurement was kept though other work disturbed it (`measured_quietly`)

    def __call__(self, trial: Trial) -> tuple[float, float]:
        combination = self.study.combination(
            {dim: trial.suggest_categorical(dim, list(labels)) for dim, labels in self.study.choices.items()})
        end = Recorder(trial, self.tracker)
        queued = self._claimed(trial, combination, end)
        where = self._started(trial, combination, queued.place, end)
        group = self.planner.accuracy_group(combination.options)
        # Accuracy is trained after the timed windows: at every seed in parity measurements, at the first in the
        # table's, and (unless the planner defers it to them) once per group in the screening measurement that first
        # meets the group. Race measurements time their windows only.
        phase = queued.phase
        donor = None if phase in TRAININGS else accuracy_donor(self.optuna_study, group, self.machine.device_name)
        train = phase in TRAININGS or (not self.planner.defer_accuracy and donor is None and phase in (SCREEN, FULL))
        spec = self._spec(trial, combination, queued, group, train)
        metrics = self._ended(spec, where, end)
        timeline = metrics.pop(metric.TIMELINE)  # when it measured, and the imports beside it
        note = metrics.pop(metric.ACCURACY_NOT_MEASURED, None)  # stand-in data, or a task without an accuracy
        trained = train and records.trained_figures(metrics)  # stand-in data trains for nothing
        if not trained and donor is not None:  # every held-out figure: accuracy, loss, bits per byte
            metrics.update(records.held_out(donor.metrics))
        end.complete(metrics, timeline, note, accuracy_trained=trained,
                     accuracy_from=trial.number if trained else donor.number if donor else None)
        # Optuna needs a number for each objective: 0 stands for "not measured", and the note says so.
        return metrics[metric.THROUGHPUT], metrics.get(metric.TEST_ACCURACY, 0.0)

    def _started(self, trial: Trial, combination: Combination, place: str, end: Recorder) -> str:
        """The measurement started: stored as running here, its MLflow run begun; skipped where its stack conflicts
        or cannot run on this device. Returns where it is, for the progress line."""
        records.start(trial, combination.label, dataclasses.asdict(self.machine), f"{self.machine.host}:{os.getpid()}")
        try:
            stack = combination.stack()
        except ConflictError as error:
            raise end.skip(str(error))
        end.run_started(self.tracker.start_trial(self.parent.id, trial.number, combination.label,
                                                 trial_params(combination.labels, stack.params()), place=place))
        reason = stack.check(self.machine.device)
        if reason:
            raise end.skip(reason)
        # Shown once it is to be measured: a CPU study skips dozens (pinned memory), which flickered through the line.
        where = f"{place}: {combination.short}"
        self.show(where)
        return where

    def _spec(self, trial: Trial, combination: Combination, queued: Record, group: str, train: bool) -> TrialSpec:
        """What the trial process runs: the study at this measurement's training seed, profiling only where it is its
        combination's first measurement, with its graph's shared compile cache (stored as the trial's)."""
        seed = seeds.training(self.seeds, queued.seed_index)
        records.set_training(trial, group, seed)
        graph = compile_cache.graph_key(combination.options) if compile_cache.reusable(combination.options) else None
        profiling = profiles(self.optuna_study, trial.number, combination.label, self.machine.device_name, queued)
        records.set_measuring(trial, graph, profiling)
        budget = dataclasses.replace(self.study.budget, seed=seed)
        if not profiling:  # its combination's first measurement profiles; this one times and trains only
            budget = dataclasses.replace(budget, profile_steps=0)
        study = dataclasses.replace(self.study, budget=budget)
        shared = graph and compile_cache.folder(self.results_dir / self.study.name, self.optuna_study.study_name,
                                                graph, self.machine.device_name, self.machine.torch)
        return TrialSpec(study, combination.options, self.machine.device, train_for_accuracy=train,
                         compile_cache=str(shared) if shared else None,
                         evaluation_seed=seeds.training(self.seeds, 0),  # one test subsample for the whole run
                         profile_in_windows=True)  # where it is free: the profile adds no window (`phases.in_windows`)

    def _ended(self, spec: TrialSpec, where: str, end: Recorder) -> dict[str, Any]:
        """`spec` measured (`_measure`); a failure or a stop recorded as the measurement's end, and a full disk said
        as the machine's fault."""
        entries = compile_cache.Entries(Path(spec.compile_cache)) if spec.compile_cache else None
        try:
            return self._measure(spec, where, entries)
        except (TrialFailed, KeyboardInterrupt) as error:
            if entries:  # what it compiled goes with it: no sibling starts warm from a measurement never complete
                entries.discard_added()
            full = isinstance(error, TrialFailed) and full_disk.in_words(str(error))
            if isinstance(error, TrialFailed) and not full:
                end.fail(error)
            else:
                end.interrupted()  # Optuna fails it next; this says why, and a resume measures it again
            if full:  # the machine's fault, not the combination's: the run stops in one line (ablate.run.full_disk)
                raise OSError(errno.ENOSPC, f"a measurement ran out of disk space ({error})") from error
            raise

    def _claimed(self, trial: Trial, combination: Combination, end: Recorder) -> Record:
        """The slot `trial` measures `combination` in: its queued one, or (a TPE pick) one placed in the screening
        blocks now. A duplicate when no queued measurement was left, or an earlier trial holds the same slot."""
        if not records.from_trial(trial).has_slot:
            if self.search == "grid":  # nothing queued was left for this worker: another took the last one
                raise end.duplicate("no queued measurement was left")
            screened = self.planner.tpe_screened(self.optuna_study.get_trials(deepcopy=False))
            size = self.planner.tpe_block_size
            records.place(trial, screened // size, screened % size, SCREEN)
        queued = records.from_trial(trial)
        if self.search == "grid" and (owner := claim.earlier_owner(
                self.optuna_study, trial.number, combination.labels, len(combination.dimensions), queued.slot,
                poll=self.poll)):
            why = f"trial #{owner.number} has this combination in block {queued.block}"
            raise end.duplicate(why, reason=f"duplicate: {why}")
        return queued

    def _measure(self, spec: TrialSpec, where: str, entries: compile_cache.Entries | None = None) -> dict[str, Any]:
        """Train and time `spec` in a fresh process, again while the machine was busy (`measured_quietly`). Each
        attempt starts from the compile cache as the first found it (`entries`): an attempt measured again leaves
        nothing warm for the next, which compiles as the first did and so keeps a cold one-off cost its own."""
        protocol = self.planner.protocol  # the run's, stored with its results (the reports judge the load by it)
        limit = None if self.shared_cpu else protocol.foreign_load_limit

        def attempt(busy_limit: float | None) -> dict[str, Any]:
            if entries:
                entries.discard_added()
            return run_in_fresh_process(dataclasses.replace(spec, busy_limit=busy_limit),
                                        on_phase=lambda doing: self.show(f"{where} · {doing}"),
                                        interpreters=self.interpreters)

        def told(text: str) -> None:  # a measurement taken again or kept disturbed: a line, not only the bar's end
            self.say(f"{where}: {text}")
            self.show(f"{where} · {text}")

        got = measured_quietly(attempt, limit, protocol.remeasure, told, busy=self.machine_busy)
        self.machine_busy = foreign_load.too_busy(got.get(metric.FOREIGN_CORES), limit)
        return got


def measured_quietly(measure: Callable[[float | None], dict[str, Any]], limit: float | None, most: int,
                     show: Callable[[str], None],
                     wait: Callable[[float, float], bool] = foreign_load.wait_until_quiet,
                     busy: bool = False) -> dict[str, Any]:
    """`measure(busy_limit)`'s metrics; measured again, after the machine quietens, while other work used more than
    `limit` cores during its windows - at most `most` times: a machine that never quietens still gets a measurement,
    and its `metric.FOREIGN_CORES` says so. `metric.REMEASURED` counts the attempts discarded. An attempt that will be
    discarded if busy is told `limit` as its `busy_limit`, and stops as its windows close (`StepClock.cut_short`), so
    no training for accuracy is run only to be thrown away; the last attempt is told None, and measures to the end.
    A wait that found no quiet moment in `QUIET_WAIT_S` makes the next attempt the last: a neighbour busy that long
    would disturb the next one too, and each further attempt would cost another wait for nothing. `busy`: the last
    measurement was kept disturbed, so this one looks for quiet for `BUSY_PROBE_S` first and, finding none, is
    taken once: a neighbour that stays costs the study one wait, not one a measurement."""
    repeats, quiet = 0, True
    if busy and limit is not None:
        quiet = wait(limit, BUSY_PROBE_S)
        if not quiet:
            show("the machine is still busy: measuring once, kept whatever its load")
    while True:
        last = repeats >= most or not quiet
        metrics = measure(None if last else limit)
        cores = metrics.get(metric.FOREIGN_CORES)
        if last or not foreign_load.too_busy(cores, limit):
            if metrics.get(metric.CUT_SHORT):
                raise RuntimeError(f"a measurement cut short at {cores} foreign cores was kept (limit {limit})")
            break
        assert limit is not None  # too busy is over a limit
        repeats += 1
        show(f"other work used {cores:.2f} cores during its windows: measuring again ({repeats} of {most}) once the "
             "machine is quiet")
        quiet = wait(limit, QUIET_WAIT_S)
        if not quiet:
            show(f"still busy after {QUIET_WAIT_S:.0f} s: this attempt is the last, kept whatever its load")
    metrics[metric.REMEASURED] = float(repeats)
    return metrics


def profiles(optuna_study: optuna.Study, number: int, combination: str, device_name: str, queued: Record) -> bool:
    """Whether measurement `number` (its slot: `queued`) opens the profiling window (`ablate.trial.phases`): only
    its combination's first measurement on this device does - the first to start, or the next after one whose
    profile never landed (it failed or was stopped). The baseline, whose profile every ceiling and every "which phase
    moved" sentence is read against (`ablate.stats.diagnosis`), is profiled once in each screening (or full) block
    instead, so its profile is a mean over those blocks. Race, confirmation and parity measurements of a profiled
    combination profile nothing: each surface reads a combination's mean profile (`diagnosis.profile`), one is
    enough for it, and `diagnosis.MOVED_FLOOR` is set for a single profile's few steps. No decision reads a
    profile, and the window follows every timed window and the last evaluation, so no decision changes. On a GPU
    alike (docs/measuring.md says why the leader's confirmation blocks add none)."""
    per_block = combination == BASELINE and queued.phase in (SCREEN, FULL)
    for t in optuna_study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.RUNNING)):
        r = records.from_trial(t)
        if t.number == number or r.combination != combination or r.device != device_name:
            continue
        if per_block and (r.phase != queued.phase or r.block != queued.block):
            continue
        # A running one that asked for a profile will give it; a complete one gave it (one stored before the
        # request was recorded shows it by its profile).
        if (r.profiling and r.state in (State.RUNNING, State.COMPLETE)) or metric.PROFILED_STEP_S in r.metrics:
            return False
    return True


def accuracy_donor(optuna_study: optuna.Study, group: str, device_name: str) -> Record | None:
    """The measurement that trained `group`'s accuracy on this device at the run's own seed, if one has."""
    for t in optuna_study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        r = records.from_trial(t)
        # Same device only: another GPU model (or a CPU) may round differently.
        if (r.accuracy_group == group and r.accuracy_trained
                and not r.seed_index  # the run's own seed, not a parity seed's
                and r.device == device_name):
            return r
    return None


class ProgressLines:
    """The line each finished measurement prints above the progress bar; a skip's reason only the first time."""

    def __init__(self, throughput_unit: str) -> None:
        self.unit = throughput_unit
        self._skip_reasons: set[str] = set()

    def line(self, r: Record) -> str | None:
        """`r`'s line; None for a skip whose reason was already given (a study on the wrong device skips dozens
        alike)."""
        if r.state != State.COMPLETE:
            detail = r.reason
        elif r.accuracy is None:  # its group's accuracy, where one is trained, comes in a training's line
            detail = f"{r.throughput:.0f} {self.unit}/s, throughput only"
        else:
            detail = (f"{r.throughput:.0f} {self.unit}/s, test acc {r.accuracy:.2f}%"
                      f"{' (trained)' if r.accuracy_trained else ' (from #' + str(r.accuracy_from) + ')'}")
        if r.state == State.SKIPPED:
            if detail in self._skip_reasons:
                return None
            self._skip_reasons.add(detail)
            detail += " (later skips for this reason are not listed; the table counts them)"
        return f"#{r.number} {r.place if r.has_slot else 'block ?'} {r.combination}: {r.state}: {detail}"
