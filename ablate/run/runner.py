"""Running a study: the measurement protocol (ablate.stats.protocol) over fresh trial processes, stored in Optuna.

Every measurement is one Optuna trial, queued with its slot (combination,
block, place in the block's random order): what to measure next comes from
`ablate.stats.planner`, asked once every queued measurement has a result; the
runner queues it, runs each measurement in a fresh process and records it. The
Optuna storage hands each queued trial to exactly one worker, so a kill, a
resume or several workers neither lose a measurement nor run one twice.
A grid search screens every combination; `--search optuna` screens the
combinations Optuna's TPE sampler picks (`--trials N` of them), with a
baseline at a random place in every block; both then race.
"""
from __future__ import annotations

import os
import time
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState
from tqdm import tqdm

from ablate.config.choices import accuracy_group, levels_of, targets_of
from ablate.config.design import TABLE, ProtocolSettings
from ablate.config.schema import Study
from ablate.render import report, terminal
from ablate.render.diagnosis import run_start
from ablate.run import baseline_profile, bitwise, estimate, outages, prices
from ablate.run.interrupts import DeferredInterrupts, Interrupted, sigterm_as_keyboard_interrupt
from ablate.run.objective import Objective, ProgressLines
from ablate.run.recovery import Recovery
from ablate.run.stored_study import analyse_and_report, comparisons
from ablate.stats import diagnosis
from ablate.stats.planner import Planned, Planner
from ablate.store import claim, plan, records, seeds, study_record
from ablate.store.records import State
from ablate.store.storage import create_study, metric_names, optuna_study_name, shared, sqlite_path
from ablate.tracking.parent_run import ParentRun
from ablate.tracking.tracker import Tracker
from ablate.trial import metrics as metric
from ablate.trial.interpreters import Interpreters
from ablate.trial.machine import Machine
from ablate.trial.process import TrialFailed, run_in_fresh_process
from ablate.workload import library_models

SEARCHES = ("grid", "optuna")
# Heartbeats have been in Optuna since 2.9 and are what its docs give for failed workers; the label is noise.
for experimental in (".*fail_stale_trials is experimental", ".*heartbeat_interval.* is an experimental feature"):
    warnings.filterwarnings("ignore", message=experimental, category=optuna.exceptions.ExperimentalWarning)

# How often a worker's running trial says it is alive (Optuna's heartbeat); stale after 3 missed beats.
HEARTBEAT_S = int(os.environ.get("ABLATE_HEARTBEAT_S", "10"))


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
                 protocol: ProtocolSettings | None = None) -> None:
        self.study, self.machine, self.search, self.n_trials = study, machine, search, n_trials
        self.protocol = protocol or study.protocol
        self.results_dir = results_dir
        self.choices = study.choices
        sampler = (optuna.samplers.GridSampler({d: list(o) for d, o in self.choices.items()}, seed=study.budget.seed)
                   if search == "grid" else optuna.samplers.TPESampler(seed=study.budget.seed))
        if database := sqlite_path(storage):
            database.parent.mkdir(parents=True, exist_ok=True)
        optuna.logging.set_verbosity(optuna.logging.ERROR)  # our progress lines say it better, failures included
        self.tracker = Tracker(study, machine, results_dir, reconnects=True)
        self.storage = storage
        # On a shared database a dead worker's trial is found by Optuna's heartbeat (stale after the grace
        # period) and queued again; SQLite is one process's, recovered by Recovery.interrupted.
        self.heartbeat, grace_s = shared(storage), 3 * heartbeat_s
        self.recovery: Recovery  # set below, once the study exists: its heartbeat calls back only from `optimize`
        heartbeat = None if not self.heartbeat else dict(
            heartbeat_interval=heartbeat_s, grace_period=grace_s,
            heartbeat_stale_trial_callback=lambda optuna_study, trial: self.recovery.dead(optuna_study, trial))
        self.optuna_study, self.created = create_study(
            storage, heartbeat, metric_names(study.throughput_unit), sampler=sampler,
            study_name=optuna_study_name(study, search, machine.device_type),
            directions=["maximize", "maximize"])  # throughput, accuracy
        self.protocol, self.seeds, said = study_record.run_settings(self.optuna_study, study, self.protocol,
                                                                    str(results_dir / study.name))
        if said:  # a stored study goes on under a former default
            print(terminal.wrapped(said), flush=True)
        if search != "grid":  # TPE's picks follow the run's protocol seed too
            self.optuna_study.sampler = optuna.samplers.TPESampler(seed=self.seeds[seeds.PROTOCOL])
        self.recovery = Recovery(self.optuna_study, self.tracker, len(self.choices), self.heartbeat, grace_s)
        # A raced grid trains accuracy for the race's final set only, after it (Planner.plan); TPE needs one per pick.
        defer = search == "grid" and self.protocol.racing and study.task.has_accuracy
        self.planner = Planner(study, self.protocol, self.seeds[seeds.PROTOCOL], machine.device, machine.device_name,
                               n_trials, defer_accuracy=defer)
        self.parent = ParentRun(study, self.optuna_study, self.tracker, search,
                                wait=self.heartbeat and not self.created)
        self.progress: tqdm | None = None
        # Trial interpreters started ahead (ablate.trial.interpreters), with the model's library imported too.
        self.interpreters = Interpreters(libraries=library_models.preloads(study.model))
        self.objective = Objective(
            study=study, machine=machine, search=search, optuna_study=self.optuna_study, planner=self.planner,
            tracker=self.tracker, parent=self.parent, seeds=self.seeds, results_dir=results_dir,
            interpreters=self.interpreters, poll=self.recovery.stale, show=self._show, say=self._say)
        self.lines = ProgressLines(study.throughput_unit)
        self.signals = DeferredInterrupts()
        self.ran = 0
        self.logged_late = 0  # measurements' runs MLflow missed while down, logged when it answered again
        self.diagnosed = False  # the baseline's diagnosis has been printed (`_diagnose`)
        self.table_said = False  # the answer's settled line has been said (`_table_pass`)
        self.cost: estimate.Session | None = None  # what this run measures, against what the study should cost
        self.rest: tuple[estimate.Left, float] | None = None  # what is left, and when it was worked out

    # -- the protocol ---------------------------------------------------------------------------------------

    def run(self) -> Outcome:
        self.recovery.interrupted()
        if self._next_step() != "done":
            self.parent.open()
            done, planned = self._to_measure()
            with terminal.progress(planned, done) as bar, \
                    sigterm_as_keyboard_interrupt(), self.interpreters:  # the unused ones stop at the end
                self.progress = bar
                self._expect()
                self._diagnose([r for r in records.load_measurements(self.optuna_study)
                                if r.device == self.machine.device_name])  # a resumed run's stored baseline
                try:
                    self._check_bitwise()
                    self._warm_up()
                    self._work_through_outages()
                except KeyboardInterrupt:
                    self.recovery.interrupted()  # the trial that was running: KILLED, queued for the next run
                    self.parent.stop()
                    self._spent()
                    raise Interrupted(f"interrupted after {self._measured()} of {self._planned()} planned "
                                      "measurements; the running trial was marked KILLED; run the same command "
                                      "again to resume") from None
            self._spent()
        return self._finish(self.ran)

    def _expect(self) -> None:
        """What the study should cost (`ablate.run.estimate`), said before its first measurement and stored as it
        was first said."""
        expected = estimate.plan(self.planner, self.search)
        self.cost = estimate.Session(expected)
        study_record.set_cost(self.optuna_study, estimate=expected.stored())
        self._say(expected.sentence())
        self._refine()

    def _refine(self, counted: list[tuple[FrozenTrial, records.Record]] | None = None) -> None:
        """The progress line's estimate of what is left; its first estimate in minutes stored, for the whole study.
        `counted`: the study's measurements (`_counted`), where the caller has just read them."""
        if self.cost is None or self.progress is None:
            return
        counted = self._counted() if counted is None else counted
        finished: list[prices.Done] = []
        queued: list[tuple[str, str]] = []
        for t, r in counted:
            if records.has_result(t) and t.state in records.FINISHED:
                if (d := prices.done(r)) is not None:
                    finished.append(d)
            elif t.state in (TrialState.WAITING, TrialState.RUNNING):
                queued.append((r.combination, r.phase))
        to_train = self.planner.to_train(self._stored(), [c for c, _ in queued])
        rest = estimate.left(self.cost.plan, finished, queued, since=self.cost.began, to_train=to_train)
        self.rest = (rest, time.time())
        terminal.fill(self.progress, self._to_measure(counted)[1], rest.measurements[1])
        terminal.left(self.progress, rest.short())
        if rest.minutes and not self.cost.minutes_said:
            self.cost.minutes_said = True
            before = (study_record.from_study(self.optuna_study).cost_summary or {}).get("actual", {})
            spent = (before.get("wall_s", 0.0) + time.time() - self.cost.began) / 60
            study_record.set_cost(self.optuna_study, minutes_estimate={
                "after_measurements": len(finished), "minutes": [spent + m for m in rest.minutes]})

    def _spent(self) -> None:
        """This run's part of what the study cost, stored beside what it was expected to cost."""
        if self.cost and self.cost.measurements:
            study_record.set_cost(self.optuna_study, session=self.cost.stored())

    def _check_bitwise(self) -> None:
        """Which accuracy groups train bitwise as a simpler one on this device (`ablate.run.bitwise`): checked before
        the first measurement and stored, so a resume and every worker group alike."""
        name = self.machine.device_name
        answers = study_record.from_study(self.optuna_study).bitwise.get(name)
        if answers is None:
            # A study that began without the check (an older version) keeps its groups as they trained.
            began = any(records.has_result(t) for t in self.optuna_study.get_trials(deepcopy=False))
            todo = {} if began else bitwise.candidates(self.planner.runnable_combinations(), accuracy_group)
            if todo and (why := bitwise.cannot_pay(self.study, self.protocol)):
                todo = {}
                self._say(f"accuracy groups not checked for bitwise equality: {why}")
            checks = bitwise.check(todo, self.study, self.machine.device, self.interpreters, self._show)
            answers = {c.group: (c.trains_as, c.why) for c in checks}
            study_record.set_bitwise(self.optuna_study, name, answers)
            for c in checks:
                self._say(f"accuracy group {c.group}: {c.why}")
        self.planner.trains_as = {group: trains_as for group, (trains_as, _) in answers.items()}

    def _warm_up(self) -> None:
        """`protocol.warm_up_trials` throughput-only trials of the baseline before this run's first measurement, each
        in a trial interpreter as a measurement is, none stored. Why: a run's first trial can read low (a cold start:
        the machine's caches or clocks, which a trial's own warm-up does not reach), and screening measures most
        combinations once, so whichever drew the first slot kept the error (docs/measuring.md, "A cold start"). One
        trial of the baseline, the cheapest stack to run, costs a few seconds. A warm-up that fails says so and the run
        goes on: the measurements will say why."""
        if not self.protocol.warm_up_trials:
            return
        # No profiling window: nothing reads this trial's profile, and a window apart would add a second or so.
        study = replace(self.study, budget=replace(self.study.budget, profile_steps=0))
        spec = baseline_profile.spec(study, self.machine.device)
        for i in range(self.protocol.warm_up_trials):
            self._show(f"warming the machine up: the baseline once, not stored ({i + 1} of "
                       f"{self.protocol.warm_up_trials})")
            try:
                got = run_in_fresh_process(spec, interpreters=self.interpreters)
                said = f"{got[metric.THROUGHPUT]:,.0f} {self.study.throughput_unit}/s"
            except TrialFailed as failed:
                said = f"failed ({failed}); measuring anyway"
            self._say(f"warm-up trial of the baseline, thrown away: {said}")

    def _work_through_outages(self) -> None:
        """`_work`, waiting out a server database that stops answering (`ablate.run.outages`)."""
        while True:
            try:
                return self._work()
            except Exception as error:
                if not (self.heartbeat and outages.database_lost(error)):
                    raise
                outages.wait_for_database(self.optuna_study, self.storage, error, self._say)

    def _catch_up(self, now: bool = False) -> None:
        """MLflow answering again after an outage: what it missed, logged between measurements."""
        if (pushed := outages.catch_up(self.study, self.optuna_study, self.search, self.tracker, self.parent,
                                       now)) is not None:
            self.logged_late += pushed
            self._say(f"MLflow at {self.tracker.uri} answers again: logged the {pushed} measurements it missed")

    def _say(self, line: str) -> None:
        """A line above the progress bar; before the bar exists (a resumed run plans its first step first), a line
        of its own, not lost."""
        tqdm.write(terminal.wrapped(line))

    def _work(self) -> None:
        """Measurements, one at a time, until the protocol has planned its last and every one has a result:
        from this worker and any other sharing the storage. While only others' trials run, wait: one may die
        and its trial be queued again, or its result decide the next race block."""
        while (step := self._next_step()) != "done":
            self._catch_up()
            if step == "wait":
                time.sleep(claim.POLL_S * 10)
                continue
            with self.signals.held():
                self.optuna_study.optimize(self.signals.deliver_in(self.objective), n_trials=1,
                                           catch=(TrialFailed, claim.Duplicate), callbacks=[self._after])
            if self.progress:
                counted = self._counted()  # every trial's record read once for both
                self._refine(counted)
                self.progress.refresh()
        if self.progress:
            terminal.finished(self.progress)

    def _next_step(self) -> str:
        """"run" (a queued measurement, or one for TPE to pick), "wait" (others' trials run) or "done"."""
        self.recovery.stale()
        plan.complete(self.optuna_study)  # a plan a stop left part-queued (ablate.store.plan)
        trials = self.optuna_study.get_trials(deepcopy=False)
        if self.search == "grid" and not any(records.from_trial(t).has_slot for t in trials):
            return self._queue(self.planner.screening())
        if self.search == "optuna" and (baseline := self.planner.tpe_baseline(trials)):
            return self._queue([baseline])
        if waiting := [t for t in trials if t.state == TrialState.WAITING]:
            if all(records.from_trial(t).phase == TABLE for t in waiting):  # a stop left the table pass queued
                self._table_pass(len(waiting))
            return "run"
        if self.search == "optuna" and self.planner.tpe_screened(trials) < (self.n_trials or 0):
            return "run"
        if any(t.state == TrialState.RUNNING for t in trials):
            return "wait"
        # Race first, accuracy last (ablate.stats.race.finalists): the race's blocks, then the final set's parity seeds.
        standing, planned = self.planner.plan(self._stored())
        if standing is not None:
            study_record.set_race(self.optuna_study, standing)
        if planned and planned[0].slot.phase == TABLE:  # queued at once, once the answer is done
            self._table_pass(len(planned))
        return self._queue(planned) if planned else "done"

    def _table_pass(self, groups: int) -> None:
        """Said once a run, as its table pass begins: the answer is settled, and a stop keeps it."""
        if not self.table_said:
            self.table_said = True
            self._say(estimate.table_pass(groups))

    def _stored(self) -> list[records.Record]:
        return [r for r in records.load(self.optuna_study) if r.device == self.machine.device_name]

    def _queue(self, planned: list[Planned]) -> str:
        if study_record.from_study(self.optuna_study).end is not None:  # more to measure: the end moves on
            study_record.set_end(self.optuna_study, None)
        plan.queue(self.optuna_study, [
            plan.Queued(dict(p.slot.combination), p.slot.block, p.slot.position, p.slot.phase,
                        self.study.combination(dict(p.slot.combination)).label, p.seed_index) for p in planned])
        return "run"

    def _planned(self) -> int:
        trials = self.optuna_study.get_trials(deepcopy=False)
        owned = sum(1 for t in trials if claim.owns(t))
        return max(owned, self.n_trials or 0) if self.search == "optuna" else owned

    def _measured(self) -> int:
        return len(records.load_measurements(self.optuna_study))

    def _counted(self) -> list[tuple[FrozenTrial, records.Record]]:
        """The study's measurements, queued, running or with a result, neither counting combinations skipped here."""
        counted = []
        for t in self.optuna_study.get_trials(deepcopy=False):
            if not claim.owns(t) or (r := records.from_trial(t)).state == State.SKIPPED:
                continue
            params = claim.params(t)
            if t.state == TrialState.WAITING and set(params) >= set(self.choices) and \
                    not self.planner.runnable(levels_of({d: params[d] for d in self.choices})):
                continue  # will be skipped at once
            counted.append((t, r))
        return counted

    def _to_measure(self, counted: list[tuple[FrozenTrial, records.Record]] | None = None) -> tuple[int, int]:
        """(measurements with a result, measurements planned), neither counting combinations skipped here."""
        counted = self._counted() if counted is None else counted
        planned = len(counted)
        done = sum(1 for t, _ in counted if records.has_result(t) and t.state in records.FINISHED)
        if self.search == "optuna":
            planned = max(planned, self.n_trials or 0)
        return done, planned

    def _show(self, doing: str) -> None:
        if self.progress:
            if self.rest:  # counting down through the running measurement
                terminal.left(self.progress, self.rest[0].short(time.time() - self.rest[1]), refresh=False)
            terminal.show(self.progress, doing)

    def _after(self, optuna_study: optuna.Study, trial: FrozenTrial) -> None:
        r = records.from_trial(trial)
        if r.state == State.DUPLICATE:  # another worker's trial: not this worker's progress
            return
        self.ran += 1
        if self.cost:
            self.cost.count(r)
        if line := self.lines.line(r):
            self._say(line)
        self._diagnose([r])
        if self.progress and r.state != State.SKIPPED:
            self.progress.update(1)

    def _diagnose(self, measured: list[records.Record]) -> None:
        """Once, as the baseline's first measurement with a profile is in (at the start of a resumed run: those
        stored): where its step goes, and which planned techniques that can run here act only on phases that
        cost little (`ablate.stats.diagnosis`), said before they are measured."""
        if self.diagnosed or not self.progress:
            return
        base = diagnosis.profile(r.metrics for r in measured if r.combination == records.BASELINE and r.complete)
        if base is None:
            return
        self.diagnosed = True
        kinds = {k.name: k for options in self.choices.values() for o in options.values()
                 if (built := o.build()) is not None and built.check(self.machine.device) is None for k in o.kinds}
        planned = [diagnosis.predict(base, name, targets_of(k)) for name, k in kinds.items()]
        for line in run_start(base, planned):
            self.progress.write(line)

    def _finish(self, ran: int) -> Outcome:
        """The end of the study, also where a stop cut the last run's end short: every planned measurement has a
        result, so its end is due (`study_record.END_ATTR`) until MLflow's parent run holds it."""
        self.tracker.reconnect(now=True)  # back for the end: `ParentRun.finish` logs what MLflow missed first
        if study_record.from_study(self.optuna_study).end != study_record.END_LOGGED:
            study_record.set_end(self.optuna_study, study_record.END_DUE)
            self.parent.open()  # reopened where the end was cut short: it stays RUNNING only until `finish`
        stored = records.load(self.optuna_study)
        # As `ablate report` analyses it: under the protocol stored at the start, which is `self.protocol`.
        compared = comparisons(self.study, self.optuna_study, stored)  # once: the table, reports and MLflow take it
        done = analyse_and_report(self.study, self.optuna_study, compared, self.search, self.results_dir, self.tracker,
                                  self.machine.device_type)
        self.logged_late += self.parent.finish(stored, done.compared, done.csv)
        return Outcome(done.table, done.csv, ran, self.tracker.uri, self.parent.id, done.reports)
