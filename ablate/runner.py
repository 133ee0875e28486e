"""Running a study: Optuna picks the combinations, each trial runs in a fresh process.

Resuming is Optuna's: finished trials stay in the storage and the grid
sampler hands out only unvisited combinations. A trial left RUNNING by a run
that was killed is marked failed ("interrupted"), its MLflow run KILLED, and
its combination queued to run again.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import optuna
import sqlalchemy.exc
from optuna.storages import RDBStorage, fail_stale_trials
from optuna.trial import FrozenTrial, Trial, TrialState
from tqdm import tqdm

from ablate import claim, records, report, results
from ablate.machine import Machine
from ablate.study import Option, Study, StudyError
from ablate.tracking import PARENT_ATTR, Tracker, run_ids, trial_params
from ablate.trial import ACCURACY_NOT_MEASURED, TrialFailed, TrialSpec, run_in_fresh_process
from strategies import ConflictError, compose

SEARCHES = ("grid", "optuna")
# Heartbeats have been in Optuna since 2.9 and are what its docs give for failed workers; the label is noise.
for experimental in (".*fail_stale_trials is experimental", ".*heartbeat_interval.* is an experimental feature"):
    warnings.filterwarnings("ignore", message=experimental, category=optuna.exceptions.ExperimentalWarning)


def combination_label(options: tuple[Option, ...]) -> str:
    return " + ".join(o.label for o in options if o.name) or records.BASELINE


def accuracy_group(options: tuple[Option, ...]) -> str:
    """Combinations with the same numerics-changing strategies train to the same accuracy."""
    changing = [o.label for o in options if o.name and o.build().changes_numerics]
    return " + ".join(changing) or records.BASELINE


def default_storage(study: Study, results_dir: Path) -> str:
    return f"sqlite:///{(results_dir / study.name / 'optuna.db').resolve()}"


def sqlite_path(storage: str) -> Path | None:
    """The database file of an SQLite storage URL; None for any other storage."""
    return Path(storage.removeprefix("sqlite:///")) if storage.startswith("sqlite:///") else None


class Interrupted(Exception):
    """The study was stopped by Ctrl-C or SIGTERM; the message says how to resume."""


INTERRUPTED = "interrupted: the study was stopped before this trial finished"


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


@contextlib.contextmanager
def sigterm_as_keyboard_interrupt() -> Iterator[None]:
    """SIGTERM (a scheduler's or `kill`'s stop) ends the study as cleanly as Ctrl-C does."""
    if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
        yield
        return
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class DeferredInterrupts:
    """Ctrl-C and SIGTERM held back while Optuna opens or closes a grid trial, and raised inside the trial.

    Raised inside the objective, KeyboardInterrupt makes Optuna fail the trial, which `_recover_interrupted`
    then queues again. Raised during Optuna's `ask()`, it would leave a RUNNING trial with no parameters
    and no heartbeat, that no worker could tell from a live one for a while (see `Runner._fail_stale`).
    Signal handlers are the main thread's: elsewhere (tests) this does nothing.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.pending = False
        self.active = False

    def _hold(self, signum: int, frame: Any) -> None:
        self.pending = True

    def _raise_pending(self) -> None:
        if self.pending:
            self.pending = False
            raise KeyboardInterrupt

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {s: signal.signal(s, self._hold) for s in self.SIGNALS}
        self.active = True
        try:
            yield
        finally:
            self.active = False
            for s, handler in previous.items():
                signal.signal(s, handler)
        self._raise_pending()  # one that came while Optuna was closing the trial: between trials now

    def deliver_in(self, objective: Callable[[Trial], Any]) -> Callable[[Trial], Any]:
        """`objective`, with Ctrl-C and SIGTERM raised as KeyboardInterrupt while it runs."""
        def delivered(trial: Trial) -> Any:
            if not self.active:
                return objective(trial)
            for s in self.SIGNALS:
                signal.signal(s, _interrupt)
            try:
                self._raise_pending()
                return objective(trial)
            finally:
                for s in self.SIGNALS:
                    signal.signal(s, self._hold)
        return delivered


def requeue(study: optuna.Study, trial: FrozenTrial) -> None:
    """Queue `trial`'s combination to run again, keeping its grid point.

    Like `Study.enqueue_trial`, plus the trial's `grid_id`: GridSampler reads
    the grid id of every finished trial when one grid point is left, and
    raises KeyError for a queued trial that has none.
    """
    grid = {k: trial.system_attrs[k] for k in ("grid_id", "search_space") if k in trial.system_attrs}
    study.add_trial(optuna.trial.create_trial(state=TrialState.WAITING,
                                              system_attrs={"fixed_params": dict(claim.params(trial)), **grid}))


_params = claim.params
# How often a worker's running trial says it is alive (Optuna's heartbeat); stale after 3 missed beats.
HEARTBEAT_S = int(os.environ.get("ABLATE_HEARTBEAT_S", "10"))
CONNECT_ATTEMPTS = 5
PARENT_WAIT_S = 30  # a worker that did not create the study waits this long for its creator's MLflow parent run


def shared(storage: str) -> bool:
    """A server database (PostgreSQL, MySQL) that several workers share; SQLite is one process's."""
    return not storage.startswith("sqlite:")


def _create_study(storage: str, heartbeat: dict[str, Any] | None, **kwargs: Any) -> tuple[optuna.Study, bool]:
    """The study, and whether this call created it: the database lets exactly one of several workers started
    together create it (the others get DuplicatedStudyError and load it). Retried, because they also race to
    create Optuna's tables, and the losers of that get an integrity error from the database."""
    for attempt in range(CONNECT_ATTEMPTS):
        try:
            backend = RDBStorage(storage, **heartbeat) if heartbeat is not None else storage
            try:
                return optuna.create_study(storage=backend, **kwargs), True
            except optuna.exceptions.DuplicatedStudyError:
                return optuna.load_study(storage=backend, study_name=kwargs["study_name"],
                                         sampler=kwargs["sampler"]), False
        except sqlalchemy.exc.SQLAlchemyError:
            if attempt == CONNECT_ATTEMPTS - 1:
                raise
            time.sleep(0.5 * (attempt + 1))
    raise AssertionError("unreachable")


def optuna_study_name(study: Study, search: str, device_type: str) -> str:
    return f"{study.name}:{search}:{device_type}"


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
                 n_trials: int | None = None, heartbeat_s: int = HEARTBEAT_S) -> None:
        self.study, self.machine, self.search, self.n_trials = study, machine, search, n_trials
        self.results_dir = results_dir
        self.options = {dim: study.options(dim) for dim, _ in study.space}
        sampler = (optuna.samplers.GridSampler({d: list(o) for d, o in self.options.items()}, seed=study.budget.seed)
                   if search == "grid" else optuna.samplers.TPESampler(seed=study.budget.seed))
        if database := sqlite_path(storage):
            database.parent.mkdir(parents=True, exist_ok=True)
        optuna.logging.set_verbosity(optuna.logging.ERROR)  # our progress lines say it better, failures included
        self.tracker = Tracker(study, machine, results_dir)
        # On a shared database a dead worker's trial is found by Optuna's heartbeat (stale after the grace
        # period) and queued again by _stale; SQLite is one process's, recovered by _recover_interrupted.
        self.heartbeat, self.grace_s = shared(storage), 3 * heartbeat_s
        heartbeat = dict(heartbeat_interval=heartbeat_s, grace_period=self.grace_s,
                         heartbeat_stale_trial_callback=self._stale) if self.heartbeat else None
        self.optuna, self.created = _create_study(storage, heartbeat, sampler=sampler,
                                                  study_name=optuna_study_name(study, search, machine.device_type),
                                                  directions=["maximize", "maximize"])  # throughput, accuracy
        stored = self.optuna.user_attrs.get("file_hash")
        if stored and stored != study.file_hash:
            raise StudyError(f"{study.path} changed since its stored results were measured (hash {stored} -> "
                             f"{study.file_hash}); move {results_dir / study.name} away or pass --storage to start afresh")
        self.optuna.set_user_attr("file_hash", study.file_hash)
        self.parent_id: str | None = None
        self.progress: tqdm | None = None
        self.signals = DeferredInterrupts()
        self.paramless_since: dict[int, float] = {}  # RUNNING trials without parameters -> first seen (monotonic)

    def remaining(self) -> int:
        if self.search == "grid":  # combinations with a result (interrupted attempts and duplicates have none)
            return self.study.size - len(records.load(self.optuna))
        finished = self.optuna.get_trials(deepcopy=False, states=records.FINISHED)
        return max(0, (self.n_trials or 0) - len(finished))

    def run(self) -> Outcome:
        self._recover_interrupted()
        todo = self.remaining() + len(self.optuna.get_trials(deepcopy=False, states=(TrialState.WAITING,)))
        ran = 0
        # A grid worker also stays while only others' trials run: one may die and its trial be queued again.
        if todo or (self.search == "grid" and self._next_step() != "done"):
            self.open_parent()
            total = self.study.size if self.search == "grid" else (self.n_trials or todo)
            with tqdm(total=total, initial=total - todo, unit="trial", desc=self.study.name, dynamic_ncols=True) as bar, \
                    sigterm_as_keyboard_interrupt():
                self.progress = bar
                try:
                    if self.search == "grid":
                        self._work()
                    else:
                        self.optuna.optimize(self._objective, n_trials=todo, catch=(TrialFailed,),
                                             callbacks=[self._after])
                except KeyboardInterrupt:
                    self._recover_interrupted()  # the trial that was running: KILLED, queued for the next run
                    self.stop_parent()
                    done = len(records.load(self.optuna))
                    raise Interrupted(f"interrupted after {done} of {total} combinations; the running trial was "
                                      "marked KILLED; run the same command again to resume") from None
            ran = todo
        return self._finish(ran)

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

    def _work(self) -> None:
        """Grid trials, one at a time, until every combination has a result: from this worker and any other
        sharing the storage. While only others' trials run, wait: one may die and its trial be queued again."""
        while (step := self._next_step()) != "done":
            if step == "wait":
                time.sleep(claim.POLL_S * 10)
                continue
            with self.signals.held():
                self.optuna.optimize(self.signals.deliver_in(self._objective), n_trials=1,
                                     catch=(TrialFailed, claim.Duplicate), callbacks=[self._after])

    def _next_step(self) -> str:
        """"run" (a queued trial or an unclaimed combination), "wait" (others' trials run) or "done"."""
        self._fail_stale()
        trials = self.optuna.get_trials(deepcopy=False)
        held = {tuple(sorted(_params(t).items())) for t in trials if claim.owns(t) and len(_params(t)) == len(self.options)}
        if any(t.state == TrialState.WAITING for t in trials) or len(held) < self.study.size:
            return "run"
        return "wait" if any(t.state == TrialState.RUNNING for t in trials) else "done"

    def _objective(self, trial: Trial) -> tuple[float, float]:
        labels = {dim: trial.suggest_categorical(dim, list(opts)) for dim, opts in self.options.items()}
        if self.search == "grid" and (owner := claim.earlier_owner(
                self.optuna, trial.number, labels, len(self.options), poll=self._fail_stale)):
            trial.set_user_attr("state", claim.DUPLICATE)
            trial.set_user_attr("reason", f"duplicate: trial #{owner.number} has this combination")
            raise claim.Duplicate(f"trial #{owner.number} has this combination")
        options = tuple(self.options[dim][label] for dim, label in labels.items())
        combination = combination_label(options)
        trial.set_user_attr("combination", combination)
        trial.set_user_attr("machine", dataclasses.asdict(self.machine))
        trial.set_user_attr("worker", f"{self.machine.host}:{os.getpid()}")  # which process ran it (several per host)
        trial.set_user_attr("state", "running")  # replaced when it ends; still there if the study was stopped
        if self.progress:
            self.progress.set_postfix_str(combination)
        strategies = [s for s in (o.build() for o in options) if s is not None]
        try:
            stack = compose(*strategies)
        except ConflictError as error:
            return self._skip(trial, None, str(error))
        run_id = self.tracker.start_trial(self.parent_id, trial.number, combination, trial_params(labels, stack.params()))
        trial.set_user_attr("mlflow_run_id", run_id)
        reason = stack.check(self.machine.device)
        if reason:
            return self._skip(trial, run_id, reason)

        group = accuracy_group(options)
        trial.set_user_attr("accuracy_group", group)
        donor = self._accuracy_donor(group)
        spec = TrialSpec(self.study, options, self.machine.device, train_for_accuracy=donor is None)
        try:
            metrics = run_in_fresh_process(spec)
        except TrialFailed as error:
            trial.set_user_attr("state", "failed")
            trial.set_user_attr("reason", str(error))
            self.tracker.finish_trial(run_id, "failed", str(error))
            raise
        except KeyboardInterrupt:
            trial.set_user_attr("state", "interrupted")  # Optuna fails it next; this says why
            trial.set_user_attr("reason", INTERRUPTED)
            raise
        tags = {"ablate.accuracy_group": group}
        if note := metrics.pop(ACCURACY_NOT_MEASURED, None):  # stand-in data: throughput only
            trial.set_user_attr("accuracy_note", note)
            tags["ablate.accuracy_note"] = note
        elif donor is None:
            trial.set_user_attr("accuracy_trained", True)
            trial.set_user_attr("accuracy_from", trial.number)
        else:
            donated = donor.user_attrs["metrics"]
            metrics.update(test_accuracy=donated["test_accuracy"], test_loss=donated["test_loss"])
            trial.set_user_attr("accuracy_from", donor.number)
        if "accuracy_from" in trial.user_attrs:
            tags["ablate.accuracy_from"] = str(trial.user_attrs["accuracy_from"])
        trial.set_user_attr("metrics", metrics)
        trial.set_user_attr("state", "complete")
        self.tracker.finish_trial(run_id, "complete", metrics=metrics, tags=tags)
        # Optuna needs a number for each objective: 0 stands for "not measured", and the note says so.
        return metrics["throughput"], metrics.get("test_accuracy", 0.0)

    def _skip(self, trial: Trial, run_id: str | None, reason: str) -> Any:
        trial.set_user_attr("state", "skipped")
        trial.set_user_attr("reason", reason)
        if run_id:
            self.tracker.finish_trial(run_id, "skipped", reason)
        raise optuna.TrialPruned(reason)

    def _accuracy_donor(self, group: str) -> FrozenTrial | None:
        for t in self.optuna.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
            # Same device only: another GPU model (or a CPU) may round differently.
            if (t.user_attrs.get("accuracy_group") == group and t.user_attrs.get("accuracy_trained")
                    and t.user_attrs.get("machine", {}).get("device_name") == self.machine.device_name):
                return t
        return None

    def _after(self, study: optuna.Study, trial: FrozenTrial) -> None:
        a = trial.user_attrs
        m = a.get("metrics", {})
        state = a.get("state", trial.state.name.lower())
        if state == claim.DUPLICATE:  # another worker's trial: not this worker's progress
            return
        if state != "complete":
            detail = a.get("reason", "")
        elif "test_accuracy" not in m:
            detail = f"{m['throughput']:.0f} samples/s, accuracy not measured"
        else:
            detail = (f"{m['throughput']:.0f} samples/s, test acc {m['test_accuracy']:.2f}%"
                      f"{'' if a.get('accuracy_trained') else ' (from #' + str(a.get('accuracy_from')) + ')'}")
        if self.progress:
            self.progress.write(f"#{trial.number} {a.get('combination', '?')}: {state}: {detail}")
            self.progress.update(1)

    def _recover_interrupted(self) -> None:
        """Trials a stopped run left unfinished: failed in Optuna, KILLED in MLflow, their combinations queued again.

        That is trials still RUNNING (the run was killed outright) and failed
        trials marked "interrupted" or still "running" (Ctrl-C or SIGTERM;
        Optuna fails the trial it was running). A combination is queued once: not when a later
        trial, queued ones included, already has it.
        """
        # With a heartbeat, RUNNING trials may be live workers': Optuna fails only the stale ones (see _stale).
        for t in [] if self.heartbeat else self.optuna.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            self.optuna._storage.set_trial_user_attr(t._trial_id, "state", "interrupted")  # still RUNNING: updatable
            self.optuna.tell(t.number, state=TrialState.FAIL)
        trials = self.optuna.get_trials(deepcopy=False)
        ids = run_ids(self.optuna)
        for t in trials:
            if t.state != TrialState.FAIL or t.user_attrs.get("state", "running") not in ("running", "interrupted"):
                continue
            if run_id := ids.get(t.number):
                self.tracker.finish_trial(run_id, "killed", INTERRUPTED)
            later = any(u.number > t.number and _params(u) == _params(t) for u in trials)
            if not later and len(_params(t)) == len(self.options):
                requeue(self.optuna, t)

    def _fail_stale(self) -> None:
        """Dead workers' trials: failed, their runs KILLED and their combinations queued again (see _stale).

        Optuna's heartbeat check finds those whose worker stopped beating. It cannot see a trial whose
        worker died inside `ask()`, before its first beat: RUNNING, without parameters, forever. A live
        worker gives its trial parameters within moments, so one seen without them for the heartbeat's
        grace period (on this worker's clock: machines' clocks may disagree) is failed here.
        """
        if not self.heartbeat:
            return
        fail_stale_trials(self.optuna)
        now = time.monotonic()
        paramless = {t.number: t for t in self.optuna.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
                     if not t.params}
        self.paramless_since = {n: self.paramless_since.get(n, now) for n in paramless}
        for number, since in self.paramless_since.items():
            if now - since > self.grace_s:
                trial = paramless[number]
                try:
                    failed = self.optuna._storage.set_trial_state_values(trial._trial_id, TrialState.FAIL)
                except optuna.exceptions.UpdateFinishedTrialError:  # another worker failed it first
                    failed = False
                if failed:
                    self._stale(self.optuna, trial)

    def _stale(self, study: optuna.Study, trial: FrozenTrial) -> None:
        """Optuna's heartbeat callback for a trial whose worker died (called once, by the worker that failed it):
        its MLflow run KILLED, its combination queued again."""
        self.tracker.finish_trial(trial.user_attrs.get("mlflow_run_id"), "killed", INTERRUPTED)
        if len(_params(trial)) == len(self.options):  # a queued combination it had taken counts too
            requeue(study, trial)

    def _finish(self, ran: int) -> Outcome:
        stored = records.load(self.optuna)
        table = results.rows(stored)
        csv = results.csv_path(self.results_dir, self.study.name, self.search, self.machine.device_type)
        results.write_csv(table, csv)
        reports = write_reports(self.study, stored, self.search, self.results_dir, self.tracker,
                                self.optuna.user_attrs.get(PARENT_ATTR))
        if self.parent_id:
            # Speed-ups need the baseline, which may have run after the trial: log them at the end.
            ids = run_ids(self.optuna)
            for row in table:
                if ids.get(row["trial"]) and (found := results.comparisons(row)):
                    self.tracker.log_metrics(ids[row["trial"]], found)
            self.tracker.finish_parent(self.parent_id, [self.study.path, csv])
        return Outcome(table, csv, ran, self.tracker.uri, self.parent_id, reports)


def write_reports(study: Study, stored: list[records.Record], search: str, results_dir: Path, tracker: Tracker,
                  parent_id: str | None) -> list[report.Report]:
    """Build the study's report(s) from stored trials and attach them to the MLflow parent run."""
    built = report.build(study, stored, search, results_dir / study.name / "report")
    for r in built:
        if parent_id:
            tracker.log_report(parent_id, r.folder, r.metrics)
    return built
