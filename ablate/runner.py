"""Running a study: the measurement protocol (ablate.protocol) over fresh trial processes, stored in Optuna.

Every measurement is one Optuna trial, queued with its slot (combination,
block, place in the block's random order): what to measure next comes from
`ablate.planner`, asked once every queued measurement has a result; the
runner queues it, runs each measurement in a fresh process and records it. The
Optuna storage hands each queued trial to exactly one worker, so a kill, a
resume or several workers neither lose a measurement nor run one twice.
A grid search screens every combination; `--search optuna` screens the
combinations Optuna's TPE sampler picks (`--trials N` of them), with a
baseline at a random place in every block; both then race.
"""
from __future__ import annotations

import dataclasses
import os
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial, Trial, TrialState
from tqdm import tqdm

from ablate import claim, comparison, compile_cache, protocol, records, report, results, seeds, terminal, view
from ablate.interrupts import INTERRUPTED, DeferredInterrupts, Interrupted, sigterm_as_keyboard_interrupt
from ablate.machine import Machine
from ablate.recovery import Recovery
from ablate.records import State
from ablate.storage import create_study, enqueue, metric_names, optuna_study_name, shared, sqlite_path
from ablate.choices import compose_options
from ablate.study import Study, StudyError
from ablate.tracking import PARENT_ATTR, Tracker, run_ids, trial_params
from ablate.interpreters import Interpreters
from ablate.planner import Planned, Planner, accuracy_group, combination_label
from ablate.trial import ACCURACY_NOT_MEASURED, TIMELINE, TrialFailed, TrialSpec, run_in_fresh_process
from strategies import ConflictError

SEARCHES = ("grid", "optuna")
# Heartbeats have been in Optuna since 2.9 and are what its docs give for failed workers; the label is noise.
for experimental in (".*fail_stale_trials is experimental", ".*heartbeat_interval.* is an experimental feature"):
    warnings.filterwarnings("ignore", message=experimental, category=optuna.exceptions.ExperimentalWarning)

# How often a worker's running trial says it is alive (Optuna's heartbeat); stale after 3 missed beats.
HEARTBEAT_S = int(os.environ.get("ABLATE_HEARTBEAT_S", "10"))
PARENT_WAIT_S = 30  # a worker that did not create the study waits this long for its creator's MLflow parent run
PROTOCOL_ATTR = "protocol"  # the Optuna study's user attr: the protocol its measurements follow
RACE_ATTR = "race"  # the Optuna study's user attr: where the race stood when it ended


@dataclass
class Outcome:
    table: list[dict[str, Any]]
    csv: Path
    ran: int
    tracking_uri: str
    parent_run_id: str | None
    reports: list[report.Report]


class Runner:
    def __init__(self, study: Study, machine: Machine, search: str, storage: str, results_dir: Path,
                 n_trials: int | None = None, heartbeat_s: int = HEARTBEAT_S,
                 design: protocol.Settings | None = None) -> None:
        self.study, self.machine, self.search, self.n_trials = study, machine, search, n_trials
        self.design = design or study.protocol
        self.results_dir = results_dir
        self.options = {dim: study.options(dim) for dim, _ in study.space}
        sampler = (optuna.samplers.GridSampler({d: list(o) for d, o in self.options.items()}, seed=study.budget.seed)
                   if search == "grid" else optuna.samplers.TPESampler(seed=study.budget.seed))
        if database := sqlite_path(storage):
            database.parent.mkdir(parents=True, exist_ok=True)
        optuna.logging.set_verbosity(optuna.logging.ERROR)  # our progress lines say it better, failures included
        self.tracker = Tracker(study, machine, results_dir)
        # On a shared database a dead worker's trial is found by Optuna's heartbeat (stale after the grace
        # period) and queued again; SQLite is one process's, recovered by Recovery.interrupted.
        self.heartbeat, grace_s = shared(storage), 3 * heartbeat_s
        self.recovery: Recovery | None = None
        heartbeat = dict(heartbeat_interval=heartbeat_s, grace_period=grace_s,
                         heartbeat_stale_trial_callback=lambda s, t: self.recovery.dead(s, t)) if self.heartbeat else None
        self.optuna, self.created = create_study(
            storage, heartbeat, metric_names(study.throughput_unit), sampler=sampler,
            study_name=optuna_study_name(study, search, machine.device_type),
            directions=["maximize", "maximize"])  # throughput, accuracy
        stored = self.optuna.user_attrs.get("file_hash")
        if stored and stored != study.file_hash:
            raise StudyError(f"{study.path} changed since its stored results were measured (hash {stored} -> "
                             f"{study.file_hash}); move {results_dir / study.name} away or pass --storage to start afresh")
        planned = self.optuna.user_attrs.get(PROTOCOL_ATTR)
        # A study stored before a setting existed followed its default: compare with the defaults filled in.
        if planned and {**dataclasses.asdict(protocol.Settings()), **planned} != dataclasses.asdict(self.design):
            raise StudyError(f"the stored measurements of {study.name} follow another protocol ({planned}); "
                             f"run with the same protocol, or pass --results or --storage to start afresh")
        self.optuna.set_user_attr("file_hash", study.file_hash)
        self.optuna.set_user_attr(PROTOCOL_ATTR, dataclasses.asdict(self.design))
        self.seeds = seeds.resolve(self.optuna.user_attrs.get(seeds.SEEDS_ATTR),
                                   study.budget.seed if study.seed_pinned else None)
        self.optuna.set_user_attr(seeds.SEEDS_ATTR, self.seeds)  # a resume reads them back
        if search != "grid":  # TPE's picks follow the run's protocol seed too
            self.optuna.sampler = optuna.samplers.TPESampler(seed=self.seeds[seeds.PROTOCOL])
        self.recovery = Recovery(self.optuna, self.tracker, len(self.options), self.heartbeat, grace_s)
        self.planner = Planner(study, self.design, self.seeds[seeds.PROTOCOL], machine.device, machine.device_name,
                               n_trials)
        self.parent_id: str | None = None
        self.progress: tqdm | None = None
        self.interpreters = Interpreters()  # trial interpreters started ahead (ablate.interpreters)
        self._skip_reasons: set[str] = set()
        self.signals = DeferredInterrupts()
        self.ran = 0

    # -- the protocol ---------------------------------------------------------------------------------------

    def run(self) -> Outcome:
        self.recovery.interrupted()
        if self._next_step() != "done":
            self.open_parent()
            done, planned = self._to_measure()
            with terminal.progress(planned, done) as bar, \
                    sigterm_as_keyboard_interrupt(), self.interpreters:  # the unused ones stop at the end
                self.progress = bar
                try:
                    self._work()
                except KeyboardInterrupt:
                    self.recovery.interrupted()  # the trial that was running: KILLED, queued for the next run
                    self.stop_parent()
                    raise Interrupted(f"interrupted after {self._measured()} of {self._planned()} planned "
                                      "measurements; the running trial was marked KILLED; run the same command "
                                      "again to resume") from None
        return self._finish(self.ran)

    def _work(self) -> None:
        """Measurements, one at a time, until the protocol has planned its last and every one has a result:
        from this worker and any other sharing the storage. While only others' trials run, wait: one may die
        and its trial be queued again, or its result decide the next race block."""
        while (step := self._next_step()) != "done":
            if step == "wait":
                time.sleep(claim.POLL_S * 10)
                continue
            with self.signals.held():
                self.optuna.optimize(self.signals.deliver_in(self._objective), n_trials=1,
                                     catch=(TrialFailed, claim.Duplicate), callbacks=[self._after])
            if self.progress:
                self.progress.total = max(self._to_measure()[1], self.progress.n)
                self.progress.refresh()

    def _next_step(self) -> str:
        """"run" (a queued measurement, or one for TPE to pick), "wait" (others' trials run) or "done"."""
        self.recovery.stale()
        trials = self.optuna.get_trials(deepcopy=False)
        if self.search == "grid" and not any("block" in t.user_attrs for t in trials):
            return self._queue(self.planner.screening())
        if self.search == "optuna" and (baseline := self.planner.tpe_baseline(trials)):
            return self._queue([baseline])
        if any(t.state == TrialState.WAITING for t in trials):
            return "run"
        if self.search == "optuna" and self.planner.tpe_screened(trials) < (self.n_trials or 0):
            return "run"
        if any(t.state == TrialState.RUNNING for t in trials):
            return "wait"
        stored = self._stored()
        if planned := self.planner.parity(stored):
            return self._queue(planned)
        standing, planned = self.planner.race(stored)
        if standing is not None:
            self.optuna.set_user_attr(RACE_ATTR, {"leader": standing.leader, "why": standing.why,
                                                  "race_blocks": standing.race_blocks,
                                                  "confirm_blocks": standing.confirm_blocks,
                                                  "pending": list(standing.pending)})
        return self._queue(planned) if planned else "done"

    def _stored(self) -> list[records.Record]:
        return [r for r in records.load(self.optuna) if r.device == self.machine.device_name]

    def _queue(self, planned: list[Planned]) -> str:
        for p in planned:
            labels = dict(p.slot.combination)
            enqueue(self.optuna, labels, {"block": p.slot.block, "position": p.slot.position, "phase": p.slot.phase,
                                          "combination": combination_label(self.planner.options_of(p.slot.combination)),
                                          "seed_index": p.seed_index})
        return "run"

    def _planned(self) -> int:
        trials = self.optuna.get_trials(deepcopy=False)
        owned = sum(1 for t in trials if claim.owns(t))
        return max(owned, self.n_trials or 0) if self.search == "optuna" else owned

    def _measured(self) -> int:
        return len(records.load_measurements(self.optuna))

    def _to_measure(self) -> tuple[int, int]:
        """(measurements with a result, measurements planned), neither counting combinations skipped here."""
        done = planned = 0
        for t in self.optuna.get_trials(deepcopy=False):
            if not claim.owns(t) or t.user_attrs.get("state") == State.SKIPPED:
                continue
            params = claim.params(t)
            if t.state == TrialState.WAITING and set(params) >= set(self.options) and \
                    not self.planner.runnable(tuple(sorted((d, params[d]) for d in self.options))):
                continue  # will be skipped at once
            planned += 1
            done += records.has_result(t) and t.state in records.FINISHED
        if self.search == "optuna":
            planned = max(planned, self.n_trials or 0)
        return done, planned

    def _show(self, doing: str) -> None:
        if self.progress:
            terminal.show(self.progress, doing)

    # -- one measurement ------------------------------------------------------------------------------------

    def _objective(self, trial: Trial) -> tuple[float, float]:
        labels = {dim: trial.suggest_categorical(dim, list(opts)) for dim, opts in self.options.items()}
        options = tuple(self.options[dim][label] for dim, label in labels.items())
        combination = combination_label(options)
        if "block" not in trial.user_attrs:
            if self.search == "grid":  # nothing queued was left for this worker: another took the last one
                trial.set_user_attr("state", State.DUPLICATE.value)
                raise claim.Duplicate("no queued measurement was left")
            screened, size = self.planner.tpe_screened(self.optuna.get_trials(deepcopy=False)), self.planner.tpe_block_size
            for key, value in {"block": screened // size, "position": screened % size, "phase": protocol.SCREEN,
                               "picked": True}.items():
                trial.set_user_attr(key, value)
        block = trial.user_attrs["block"]
        if self.search == "grid" and (owner := claim.earlier_owner(
                self.optuna, trial.number, labels, len(self.options), claim.slot(trial), poll=self.recovery.stale)):
            trial.set_user_attr("state", State.DUPLICATE.value)
            trial.set_user_attr("reason", f"duplicate: trial #{owner.number} has this combination in block {block}")
            raise claim.Duplicate(f"trial #{owner.number} has this combination in block {block}")
        trial.set_user_attr("combination", combination)
        trial.set_user_attr("machine", dataclasses.asdict(self.machine))
        trial.set_user_attr("worker", f"{self.machine.host}:{os.getpid()}")  # which process ran it (several per host)
        trial.set_user_attr("state", State.RUNNING.value)  # replaced when it ends; still there if the study was stopped
        where = f"block {block}: {results.short_label(combination)}"
        self._show(where)
        try:
            stack = compose_options(options)
        except ConflictError as error:
            return self._skip(trial, None, str(error))
        run_id = self.tracker.start_trial(self.parent_id, trial.number, combination,
                                          trial_params(labels, stack.params()), block=block)
        trial.set_user_attr("mlflow_run_id", run_id)
        reason = stack.check(self.machine.device)
        if reason:
            return self._skip(trial, run_id, reason)

        group = accuracy_group(options)
        trial.set_user_attr("accuracy_group", group)
        # Accuracy is trained once per group, in a screening measurement, after its timed windows; race
        # measurements time their windows only.
        phase, index = trial.user_attrs.get("phase"), int(trial.user_attrs.get("seed_index", 0))
        donor = None if phase == protocol.PARITY else self._accuracy_donor(group)
        train = phase == protocol.PARITY or (donor is None and phase in (protocol.SCREEN, protocol.FULL, None))
        trial.set_user_attr("training_seed", seeds.training(self.seeds, index))
        study = dataclasses.replace(self.study, budget=dataclasses.replace(
            self.study.budget, seed=seeds.training(self.seeds, index)))
        own = compile_cache.folder(self.results_dir / self.study.name, combination, self.machine.device_name,
                                   self.machine.torch) if compile_cache.reusable(options) else None
        spec = TrialSpec(study, options, self.machine.device, train_for_accuracy=train,
                         compile_cache=str(own) if own else None)
        try:
            metrics = run_in_fresh_process(spec, on_phase=lambda doing: self._show(f"{where} · {doing}"),
                                           interpreters=self.interpreters)
        except TrialFailed as error:
            trial.set_user_attr("state", State.FAILED.value)
            trial.set_user_attr("reason", str(error))
            self.tracker.finish_trial(run_id, *records.mlflow_payload(trial.user_attrs, "failed"))
            raise
        except KeyboardInterrupt:
            trial.set_user_attr("state", State.INTERRUPTED.value)  # Optuna fails it next; this says why
            trial.set_user_attr("reason", INTERRUPTED)
            raise
        trial.set_user_attr("timeline", metrics.pop(TIMELINE))  # when it measured, and the imports beside it
        if note := metrics.pop(ACCURACY_NOT_MEASURED, None):  # stand-in data, or a task without an accuracy
            trial.set_user_attr("accuracy_note", note)
        if train and "test_loss" in metrics:  # stand-in data trains for nothing
            trial.set_user_attr("accuracy_trained", True)
            trial.set_user_attr("accuracy_from", trial.number)
        elif donor is not None:  # every held-out figure: accuracy, loss, bits per byte
            metrics.update({k: v for k, v in donor.user_attrs["metrics"].items() if k.startswith("test_")})
            trial.set_user_attr("accuracy_from", donor.number)
        trial.set_user_attr("metrics", metrics)
        trial.set_user_attr("state", State.COMPLETE.value)
        self.tracker.finish_trial(run_id, *records.mlflow_payload(trial.user_attrs, "complete"))
        # Optuna needs a number for each objective: 0 stands for "not measured", and the note says so.
        return metrics["throughput"], metrics.get("test_accuracy", 0.0)

    def _skip(self, trial: Trial, run_id: str | None, reason: str) -> Any:
        trial.set_user_attr("state", State.SKIPPED.value)
        trial.set_user_attr("reason", reason)
        if run_id:
            self.tracker.finish_trial(run_id, *records.mlflow_payload(trial.user_attrs, "skipped"))
        raise optuna.TrialPruned(reason)

    def _accuracy_donor(self, group: str) -> FrozenTrial | None:
        for t in self.optuna.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
            # Same device only: another GPU model (or a CPU) may round differently.
            if (t.user_attrs.get("accuracy_group") == group and t.user_attrs.get("accuracy_trained")
                    and not t.user_attrs.get("seed_index")  # the run's own seed, not a parity seed's
                    and t.user_attrs.get("machine", {}).get("device_name") == self.machine.device_name):
                return t
        return None

    def _after(self, study: optuna.Study, trial: FrozenTrial) -> None:
        a = trial.user_attrs
        m = a.get("metrics", {})
        state = a.get("state", trial.state.name.lower())
        if state == State.DUPLICATE:  # another worker's trial: not this worker's progress
            return
        self.ran += 1
        if state != State.COMPLETE:
            detail = a.get("reason", "")
        elif "test_accuracy" not in m:
            detail = f"{m['throughput']:.0f} {self.study.throughput_unit}/s, accuracy not measured"
        else:
            detail = (f"{m['throughput']:.0f} {self.study.throughput_unit}/s, test acc {m['test_accuracy']:.2f}%"
                      f"{' (trained)' if a.get('accuracy_trained') else ' (from #' + str(a.get('accuracy_from')) + ')'}")
        if not self.progress:
            return
        if state == State.SKIPPED:  # each reason once: a study on the wrong device skips dozens alike
            if detail in self._skip_reasons:
                return
            self._skip_reasons.add(detail)
            detail += " (later skips for this reason are not listed; the table counts them)"
        self.progress.write(terminal.wrapped(f"#{trial.number} block {a.get('block', '?')} "
                                             f"{a.get('combination', '?')}: {state}: {detail}"))
        if state != State.SKIPPED:
            self.progress.update(1)

    # -- MLflow parent run and the end ----------------------------------------------------------------------

    def open_parent(self) -> None:
        """Start (or reopen) the study's MLflow parent run and record it in the Optuna study."""
        self.parent_id = self.parent_id or self.tracker.start_parent(self.search, self._stored_parent())
        if self.parent_id:  # offline (MLflow unreachable): keep the stored parent for resume and sync
            self.optuna.set_user_attr(PARENT_ATTR, self.parent_id)

    def stop_parent(self) -> None:
        """After Ctrl-C or SIGTERM: the parent run KILLED, unless other workers' trials still run in it."""
        if not self.optuna.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            self.tracker.finish_parent(self.parent_id, [], status="KILLED")

    def _stored_parent(self) -> str | None:
        """The study's MLflow parent run. Workers started together share one: the worker that created the Optuna
        study makes it, and the others wait (up to PARENT_WAIT_S) for its id to appear in the study."""
        deadline = time.monotonic() + (PARENT_WAIT_S if self.heartbeat and not self.created else 0)
        while (parent := self.optuna.user_attrs.get(PARENT_ATTR)) is None and time.monotonic() < deadline:
            time.sleep(claim.POLL_S * 5)
        return parent

    def _finish(self, ran: int) -> Outcome:
        stored = records.load(self.optuna)
        compared = comparison.compare(stored, self.study.accuracy_tolerance, self.design)  # once: all render it
        table, csv = results.save(compared, self.study, self.results_dir, self.search, self.machine.device_type)
        reports = write_reports(self.study, compared, self.search, self.results_dir, self.tracker,
                                self.optuna.user_attrs)
        if self.parent_id:
            # The pooled speed-up needs every block: log it at the end, on each measurement of its combination.
            ids = run_ids(self.optuna)
            pooled = view.rows(compared)
            for m in (m for r in stored for m in r.measurements):
                if ids.get(m.number) and (found := pooled.get((m.device, m.combination))):
                    self.tracker.log_metrics(ids[m.number], found.metrics, found.tags_for(m.number))
            self.tracker.finish_parent(self.parent_id, [self.study.path, csv])
        return Outcome(table, csv, ran, self.tracker.uri, self.parent_id, reports)


def write_reports(study: Study, compared: list[comparison.DeviceComparisons], search: str, results_dir: Path,
                  tracker: Tracker, attrs: dict[str, Any]) -> list[report.Report]:
    """Build the study's report(s) from its comparisons and attach them to the MLflow parent run.
    `attrs`: the Optuna study's user attrs (its protocol, where the race ended, its parent run)."""
    built = report.build(study, compared, search, results_dir / study.name / "report", attrs)
    parent_id = attrs.get(PARENT_ATTR)
    for r in built:
        if parent_id:
            tracker.log_report(parent_id, r.folder, r.metrics)
    return built
