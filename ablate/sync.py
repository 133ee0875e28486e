"""`ablate sync`: give every stored trial that has no MLflow run one, as `ablate run` would have logged it.

For trials that ran while MLflow was unreachable (or were logged to another
tracking URI). The Optuna storage is the source: params, metrics, tags, state,
reason, status and start/end times are rebuilt from each trial. Finished
trials' user attrs are frozen in Optuna, so the new run ids are recorded in
the Optuna study's user attrs (`tracking.RUNS_ATTR`), after each run, so an
interrupted sync never logs a trial twice.
"""
from __future__ import annotations

import dataclasses
from datetime import datetime
from pathlib import Path

import optuna
from optuna.trial import FrozenTrial

from ablate import records, report, view
from ablate.machine import Machine
from ablate.interrupts import INTERRUPTED
from ablate.planner import combination_label
from ablate.choices import Option, compose_options
from ablate.study import Study, StudyError
from ablate.tracking import PARENT_ATTR, RUNS_ATTR, Tracker, run_ids, trial_params
from strategies import ConflictError, Stack


def push_missing(study: Study, stored: optuna.Study, search: str, tracker: Tracker, artifacts: list[Path]) -> int:
    """Create the missing parent and child runs; returns how many child runs were created."""
    if tracker.offline:
        raise StudyError(f"MLflow at {tracker.uri} is unreachable ({tracker.offline_reason}); nothing synced")
    known = run_ids(stored)
    missing = [(t, built) for t in stored.get_trials(deepcopy=False, states=records.FINISHED)
               if t.user_attrs.get("state") != records.DUPLICATE  # a concurrent duplicate never had a run of its own
               and (built := _composed(study, t)) is not None and not tracker.has_run(known.get(t.number))]
    if not missing:
        return 0
    parent = stored.user_attrs.get(PARENT_ATTR)
    created = not tracker.has_run(parent)
    if created:
        parent = tracker.new_parent(search)
        if parent:
            stored.set_user_attr(PARENT_ATTR, parent)
    loaded = records.load(stored)
    by_combination = view.rows(report.compare(study, loaded, stored.user_attrs))
    mapping = dict(stored.user_attrs.get(RUNS_ATTR, {}))
    pushed = 0
    for trial, (options, stack) in missing:
        device = {**records.UNKNOWN_MACHINE, **trial.user_attrs.get("machine", {})}["device_name"]
        row = by_combination.get((device, trial.user_attrs.get("combination")))
        run_id = _push(tracker, parent, trial, options, stack, row)
        if not run_id:
            break  # MLflow went away mid-sync: the Tracker said so; what was pushed is recorded
        mapping[str(trial.number)] = run_id
        stored.set_user_attr(RUNS_ATTR, mapping)
        pushed += 1
    if created:
        tracker.finish_parent(parent, [p for p in artifacts if p.exists()])
    if tracker.offline:
        raise StudyError(f"MLflow at {tracker.uri} became unreachable ({tracker.offline_reason}) after {pushed} of "
                         f"{len(missing)} runs; run the same command again to push the rest")
    return pushed


def _composed(study: Study, trial: FrozenTrial) -> tuple[tuple[Option, ...], Stack] | None:
    """The trial's options and their stack; None where `ablate run` logs no run (they do not compose)."""
    try:
        options = tuple(study.options(dim)[trial.params[dim]] for dim, _ in study.space)
        return options, compose_options(options)
    except (KeyError, ConflictError):  # a combination that does not compose is skipped before its run starts
        return None


def _push(tracker: Tracker, parent: str | None, trial: FrozenTrial, options: tuple[Option, ...], stack: Stack,
          row: view.Row | None) -> str | None:
    a = trial.user_attrs
    combination = a.get("combination") or combination_label(options)
    machine = Machine(**{f.name: {**records.UNKNOWN_MACHINE, **a.get("machine", {})}[f.name]
                         for f in dataclasses.fields(Machine)})
    run_id = tracker.start_trial(parent, trial.number, combination, trial_params(trial.params, stack.params()),
                                 machine=machine, start_time=_ms(trial.datetime_start), block=a.get("block", 0))
    state, reason, metrics, tags = records.mlflow_payload(a, trial.state.name.lower())
    if row:  # its combination's pooled comparisons, and whether it is the combination's row in the view
        tags = {**tags, **row.tags_for(trial.number)}
        metrics = {**metrics, **row.metrics} if state == "complete" else metrics
    reason = INTERRUPTED if state == "killed" else reason
    tracker.finish_trial(run_id, state, reason, metrics=metrics, tags=tags, end_time=_ms(trial.datetime_complete))
    return None if tracker.offline else run_id


def _ms(when: datetime | None) -> int | None:
    return int(when.timestamp() * 1000) if when else None
