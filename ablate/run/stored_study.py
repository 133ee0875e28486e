"""A study read back from its storage: `ablate report` rebuilds its table and reports, `ablate sync` logs to MLflow
the trials it missed, and a run ends with the same analysis.

The analysis and what is made of it - the comparisons under the protocol the measurements followed (`comparisons`),
the findings, the results table, the reports attached to the MLflow parent run (`analyse_and_report`) - is one
sequence for the run's end (`ablate.run.runner`) and for both commands, so a report rebuilt from storage is the
report the run wrote. It is computed here, once, and handed to tracking/, which logs it and computes nothing.

Opening a stored study creates nothing: an SQLite file that is not there means nothing is stored (one line naming
the command that stores it), not an empty database to leave behind.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cache, partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ablate.config.validate import StudyError
from ablate.trial import library_log

if TYPE_CHECKING:
    import optuna
    import torch

    from ablate.config.study import Study
    from ablate.render.report import Report
    from ablate.stats.answer.comparison import DeviceComparisons
    from ablate.store.records import Record
    from ablate.tracking.tracker import Tracker


@dataclass(frozen=True)
class Reported:
    """What `analyse_and_report` made."""

    compared: list[DeviceComparisons]
    table: list[dict[str, Any]]  # the results table's rows; empty where it was not written (`ablate sync`)
    csv: Path  # where the results table is
    reports: list[Report]


def open_stored(shown: str, device_text: str, storage: str | None, results: Path, search: str
                ) -> tuple[torch.device, Study, optuna.Study, str]:
    """`--device` (the device type the trials ran on: no GPU needed), the study `shown` names (as the user wrote
    it), its stored Optuna study and its storage URL (`storage`, or the default under `results`); `StudyError`
    when nothing is stored. From here on library messages go to the study's log."""
    import optuna

    from ablate.config import study as studies
    from ablate.run.preflight import device
    from ablate.store.storage import check, default_storage, optuna_study_name, sqlite_path

    stored_on = device(device_text)
    study = studies.load(shown, stored_on.type)
    log = library_log.to_log_file(results / study.name / library_log.LOG_NAME, lazy=True)  # made if needed
    storage = storage or default_storage(study, results)
    check(storage)
    name = optuna_study_name(study, search, stored_on.type)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    database = sqlite_path(storage)
    try:
        if database and not database.exists():  # reading must not create an empty database
            raise KeyError(name)
        optuna_study = optuna.load_study(study_name=name, storage=storage)
    except KeyError:
        raise StudyError(f"no stored trials for {name} in {storage}; run `ablate run {shown}"
                         f"{' --search optuna --trials N' if search == 'optuna' else ''}` first") from None
    library_log.to_log_file(log)  # MLflow's loggers too, from here on
    return stored_on, study, optuna_study, storage


def comparisons(study: Study, optuna_study: optuna.Study, stored: list[Record]) -> list[DeviceComparisons]:
    """`stored` (the study's records) compared under the protocol they followed: computed once for a run's end or a
    command, and every surface - the table, the reports, the MLflow runs - renders them."""
    from ablate.stats.answer.comparison import compare_stored
    from ablate.store import study_record

    return compare_stored(study, stored, study_record.from_study(optuna_study))


def analyse_and_report(study: Study, optuna_study: optuna.Study, compared: list[DeviceComparisons], search: str,
                       results: Path, tracker: Tracker, device_type: str, table: bool = True) -> Reported:
    """From the study's comparisons (`comparisons`): the results table (unless not `table`) and each device's
    findings, computed here once, rendered into the reports attached to the study's MLflow parent run where it has
    one."""
    from ablate.render import results as results_table
    from ablate.stats.answer.findings import analyse_all
    from ablate.store import study_record
    from ablate.tracking.parent_run import write_reports

    record = study_record.from_study(optuna_study)  # its protocol, where the race ended, its parent run
    found = analyse_all(study, compared, record)  # the report, summary.json, the answer and MLflow render them
    rows, csv = (results_table.save(compared, study, results, search, device_type) if table
                 else ([], results_table.csv_path(results, study.name, search, device_type)))
    return Reported(compared, rows, csv, write_reports(study, found, search, results, tracker, record.parent_run_id))


def rebuild(study: Study, optuna_study: optuna.Study, storage: str, device: torch.device, search: str,
            results: Path) -> tuple[Reported, Tracker]:
    """`ablate report`: the table and reports again, from what is stored (a study stopped before its end, by
    Ctrl-C or a time limit, wrote none); `StudyError` where no trial is complete."""
    from ablate.store import records
    from ablate.tracking.tracker import Tracker
    from ablate.trial.machine import describe

    stored = records.load(optuna_study)
    if not any(r.complete for r in stored):
        raise StudyError(f"{optuna_study.study_name} in {storage} has no complete trial yet ({len(stored)} finished: "
                         "skipped or failed); nothing to analyse")
    tracker = Tracker(study, describe(str(device)), results)
    compared = comparisons(study, optuna_study, stored)
    return analyse_and_report(study, optuna_study, compared, search, results, tracker, device.type), tracker


@dataclass(frozen=True)
class Synced:
    """What `ablate sync` logged."""

    pushed: int  # measurements' runs logged now, or ended where an outage had cut their end off
    ended: bool  # the study's end written to its parent run now (a stop or an outage had cut it short)
    tracker: Tracker


def sync(study: Study, optuna_study: optuna.Study, device: torch.device, search: str, results: Path) -> Synced:
    """`ablate sync`: log the stored trials that have no MLflow run, then the reports to the (maybe new) parent
    run, and the study's end where it is due (`ablate.store.study_record.END_ATTR`). Under the study's lock: a
    running study logs its own trials."""
    from ablate.render.results import csv_path
    from ablate.store import records, study_record
    from ablate.store.lock import study_lock
    from ablate.tracking.parent_run import ParentRun
    from ablate.tracking.sync import push_missing
    from ablate.tracking.tracker import Tracker
    from ablate.trial.machine import describe

    with study_lock(results / study.name, study.name):
        tracker = Tracker(study, describe(str(device)), results, warn=False)  # push_missing says it, once
        csv = csv_path(results, study.name, search, device.type)
        stored = records.load(optuna_study)  # the lock holds it: push_missing writes no trial
        compared = cache(partial(comparisons, study, optuna_study, stored))  # computed where first needed, once
        pushed = push_missing(study, optuna_study, search, tracker, [study.path, csv], compared)
        due = study_record.from_study(optuna_study).end_due
        if not (pushed or due) or not any(r.complete for r in stored):
            return Synced(pushed, False, tracker)
        done = analyse_and_report(study, optuna_study, compared(), search, results, tracker, device.type, table=False)
        if due:
            parent = ParentRun(study, optuna_study, tracker, search, wait=False)
            parent.open()  # reopened to take the end; `finish` closes it
            parent.finish(stored, done.compared, done.csv)
        ended = due and study_record.from_study(optuna_study).end == study_record.END_LOGGED
        return Synced(pushed, ended, tracker)
