"""The study's MLflow parent run: opened before the first measurement, shared by workers, closed at the end.

Each measurement's MLflow run is a child of it. A resumed study reopens its
stored parent; workers started together share the one the worker that
created the Optuna study made. At the end the parent gets the table and the
reports, and every measurement's run its combination's pooled comparisons
(they need every block, so they are known only then).
"""
from __future__ import annotations

import time
from pathlib import Path

import optuna
from optuna.trial import TrialState

from ablate.config.study import Study, StudyError
from ablate.render import report
from ablate.stats.answer.comparison import DeviceComparisons
from ablate.stats.answer.findings import Findings
from ablate.store import claim, records, study_record
from ablate.store.records import Record
from ablate.tracking import view
from ablate.tracking.sync import push_missing
from ablate.tracking.tracker import Tracker

PARENT_WAIT_S = 30  # a worker that did not create the study waits this long for its creator's MLflow parent run


class ParentRun:
    def __init__(self, study: Study, optuna_study: optuna.Study, tracker: Tracker, search: str, wait: bool) -> None:
        """`wait`: another worker creates the parent run (this one did not create the Optuna study)."""
        self.study, self.optuna_study, self.tracker = study, optuna_study, tracker
        self.search, self.wait = search, wait
        self.id: str | None = None

    def open(self) -> None:
        """Start (or reopen) the study's MLflow parent run and record it in the Optuna study."""
        self.id = self.id or self.tracker.start_parent(self.search, self._stored())
        if self.id:  # offline (MLflow unreachable): keep the stored parent for resume and sync
            study_record.set_parent_run(self.optuna_study, self.id)

    def stop(self) -> None:
        """After Ctrl-C or SIGTERM: the parent run KILLED, unless other workers' trials still run in it."""
        if not self.optuna_study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            self.tracker.finish_parent(self.id, [], status="KILLED")

    def _stored(self) -> str | None:
        """The study's stored parent run. Workers started together share one: the worker that created the Optuna
        study makes it, and the others wait (up to PARENT_WAIT_S) for its id to appear in the study."""
        deadline = time.monotonic() + (PARENT_WAIT_S if self.wait else 0)
        while ((parent := study_record.from_study(self.optuna_study).parent_run_id) is None
               and time.monotonic() < deadline):
            time.sleep(claim.POLL_S * 5)
        return parent

    def finish(self, stored: list[Record], compared: list[DeviceComparisons], csv: Path) -> int:
        """The end: each measurement's run gets its combination's pooled comparisons; the parent, the table. Once:
        stored as logged only when MLflow took all of it, so a stop or an outage part-way leaves the end due for
        the next `ablate run` or `ablate sync` (`ablate.store.study_record.END_ATTR`). How many measurements' runs
        it logged or ended that MLflow had missed."""
        if not self.id or study_record.from_study(self.optuna_study).end == study_record.END_LOGGED:
            return 0
        try:  # first every measurement's run: a run an outage kept MLflow from is logged, one it cut short ended
            pushed = push_missing(self.study, self.optuna_study, self.search, self.tracker, [], lambda: compared)
        except StudyError:  # MLflow is away: the end stays due
            return 0
        # The pooled speed-up needs every block: log it at the end, on each measurement of its combination.
        ids = records.run_ids(self.optuna_study)
        pooled = view.rows(compared)
        for m in (m for r in stored for m in r.measurements):
            if ids.get(m.number) and (found := pooled.get((m.device, m.combination))):
                metrics, tags = found.lent(m.metrics) if m.complete else ({}, {})
                self.tracker.log_metrics(ids[m.number], {**found.metrics, **metrics},
                                         {**found.tags_for(m.number), **tags})
        self.tracker.finish_parent(self.id, [self.study.path, csv])
        if not self.tracker.offline:
            study_record.set_end(self.optuna_study, study_record.END_LOGGED)
        return pushed


def write_reports(study: Study, found: list[Findings], search: str, results_dir: Path, tracker: Tracker,
                  parent_id: str | None) -> list[report.Report]:
    """Build the study's report(s) from each device's findings (`ablate.run.stored_study` computes them, once: the
    report, summary.json, the terminal's answer and the parent run's metrics all render them) and attach them to the
    MLflow parent run `parent_id` where there is one."""
    built = report.build(study, found, search, results_dir / study.name / "report")
    for r in built:
        if parent_id:
            tracker.log_report(parent_id, r.folder, r.metrics)
    return built
