"""`ablate sync`: give every stored trial that has no MLflow run one, as `ablate run` would have logged it.

For trials that ran while MLflow was unreachable (or were logged to another
tracking URI). The Optuna storage is the source: params, metrics, tags, state,
reason, status and start/end times are rebuilt from each trial. Finished
trials' user attrs are frozen in Optuna, so the new run ids are recorded in
the Optuna study's record (`study_record.StudyRecord.runs`), after each run, so an
interrupted sync never logs a trial twice.
"""
from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import optuna

from ablate.config.choices import Option, combination_label, compose_options
from ablate.config.study import Study, StudyError
from ablate.stats.answer.comparison import DeviceComparisons
from ablate.store import records, study_record
from ablate.tracking import view
from ablate.tracking.tracker import Tracker, trial_params
from ablate.trial.failures import INTERRUPTED
from ablate.trial.machine import Machine
from strategies import ConflictError, Stack


def push_missing(study: Study, optuna_study: optuna.Study, search: str, tracker: Tracker, artifacts: list[Path],
                 compared: Callable[[], list[DeviceComparisons]]) -> int:
    """Create the missing parent and child runs; returns how many child runs were created. `compared`: the study's
    comparisons (`ablate.run` computes them), asked for only where a run is missing."""
    if tracker.offline:
        raise StudyError(f"MLflow at {tracker.uri} is unreachable ({tracker.offline_reason}); nothing synced")
    known = records.run_ids(optuna_study)
    parent = study_record.from_study(optuna_study).parent_run_id
    # A run MLflow still shows RUNNING for a finished trial was started before an outage cut its end off, maybe
    # before its id reached the trial (`orphans`): it is finished from the stored trial, as a missing one is logged.
    orphans = tracker.running_children(parent) or {}
    finished = optuna_study.get_trials(deepcopy=False, states=records.FINISHED)
    missing = [(r, built, run if status == "RUNNING" else orphans.get(r.number))
               for r in map(records.from_trial, finished)
               if r.state != records.DUPLICATE  # a concurrent duplicate never had a run of its own
               and (built := _composed(study, r)) is not None
               and (status := tracker.run_status(run := known.get(r.number))) in (None, "RUNNING")]
    if not missing:
        return 0
    created = not tracker.has_run(parent)
    if created:
        parent = tracker.new_parent(search)
        if parent:
            study_record.set_parent_run(optuna_study, parent)
    by_combination = view.rows(compared())
    mapping = dict(study_record.from_study(optuna_study).runs)
    pushed = 0
    for record, (options, stack), unfinished in missing:
        row = by_combination.get((record.device, record.combination))
        run_id = _push(tracker, parent, record, options, stack, row, unfinished)
        if not run_id:
            break  # MLflow went away mid-sync: the Tracker said so; what was pushed is recorded
        mapping[record.number] = run_id
        study_record.set_runs(optuna_study, mapping)
        pushed += 1
    if created:
        tracker.finish_parent(parent, [p for p in artifacts if p.exists()])
    if tracker.offline:
        raise StudyError(f"MLflow at {tracker.uri} became unreachable ({tracker.offline_reason}) after {pushed} of "
                         f"{len(missing)} runs; run the same command again to push the rest")
    return pushed


def _composed(study: Study, record: records.Record) -> tuple[tuple[Option, ...], Stack] | None:
    """The trial's options and their stack; None where `ablate run` logs no run (they do not compose)."""
    try:
        options = study.combination(record.levels).options
        return options, compose_options(options)
    except (KeyError, ConflictError):  # a combination that does not compose is skipped before its run starts
        return None


def _push(tracker: Tracker, parent: str | None, record: records.Record, options: tuple[Option, ...], stack: Stack,
          row: view.Row | None, unfinished: str | None = None) -> str | None:
    """The trial's run logged whole, or `unfinished` (its run, started but never ended) ended."""
    trial = record.trial
    assert trial is not None, record.number  # a record loaded from the storage keeps its trial
    # The label `ablate run` stores with it (a function of its levels), also for a trial stopped before it had one.
    combination = combination_label(options)
    machine = Machine.from_stored(record.machine)  # an older record's: "unknown" for the fields it predates
    run_id = unfinished or tracker.start_trial(
        parent, record.number, combination, trial_params(record.levels, stack.params()), machine=machine,
        start_time=_ms(trial.datetime_start), place=record.place)
    state, reason, metrics, tags = records.mlflow_payload(record)
    if row:  # its combination's pooled comparisons, and whether it is the combination's row in the view
        lent, lent_tags = row.lent(metrics) if state == "complete" else ({}, {})
        tags = {**tags, **row.tags_for(record.number), **lent_tags}
        metrics = {**metrics, **row.metrics, **lent} if state == "complete" else metrics
    reason = INTERRUPTED if state == "killed" else reason
    tracker.finish_trial(run_id, state, reason, metrics=metrics, tags=tags, end_time=_ms(trial.datetime_complete))
    return None if tracker.offline else run_id


def _ms(when: datetime | None) -> int | None:
    return int(when.timestamp() * 1000) if when else None
