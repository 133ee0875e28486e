"""What a resume does with what a stop left: the MLflow run of a trial stopped before it stored the run's id, the run
of one stopped after it stored its result, and a measurement whose slot a later duplicate shares.

The study killed mid-trial by SIGKILL and resumed is tests/run/test_interrupts.py's, with its Ctrl-C and SIGTERM
stops: one study to its end for the three (a resume to the end of tiny.yaml is a minute on 2 cores).
"""
from __future__ import annotations

from pathlib import Path

import optuna
from mlflow.tracking import MlflowClient
from optuna.trial import TrialState

TINY = Path(__file__).resolve().parents[1] / "studies" / "tiny.yaml"


def _stopped_beside_a_live_worker(tmp_path):
    """A study logged to MLflow with the trial a stop ends, and another worker's trial still running with its run."""
    from ablate.config.study import load
    from ablate.store import study_record
    from ablate.tracking.tracker import Tracker
    from ablate.trial.machine import describe

    tracker = Tracker(load(str(TINY), "cpu"), describe("cpu"), tmp_path)
    parent = tracker.start_parent("grid")
    study = optuna.create_study(directions=["maximize", "maximize"])
    study_record.set_parent_run(study, parent)
    stopped, live = study.ask(), study.ask()
    return tracker, parent, study, stopped, tracker.start_trial(parent, live.number, "amp(bf16)", {})


def _resumed(study, tracker) -> MlflowClient:
    from ablate.run.recovery import Recovery

    Recovery(study, tracker, n_dims=1, heartbeat=True, grace_s=60).interrupted()
    return MlflowClient(tracking_uri=tracker.uri)


def test_a_run_no_trial_recorded_is_killed_with_its_stopped_trial(tmp_path):
    # A stop that lands after MLflow created a trial's run and before the trial stored the run's id.
    tracker, parent, study, stopped, running = _stopped_beside_a_live_worker(tmp_path)
    orphan = tracker.start_trial(parent, stopped.number, "baseline", {})
    study.tell(stopped, state=TrialState.FAIL)  # what Optuna does with a trial its objective left by Ctrl-C

    client = _resumed(study, tracker)
    assert client.get_run(orphan).info.status == "KILLED"
    assert client.get_run(orphan).data.tags["ablate.state"] == "killed"
    assert client.get_run(running).info.status == "RUNNING"  # a live worker's run is not touched


def test_a_run_a_stop_left_open_after_its_trial_stored_its_result_is_closed_from_the_trial(tmp_path):
    # A stop that lands after a trial stored its result (here a skip) and before MLflow closed its run: Optuna
    # fails the trial, which keeps its result; without this its run would show as running in MLflow's UI for ever.
    from ablate.store import records

    tracker, parent, study, skipped, running = _stopped_beside_a_live_worker(tmp_path)
    run = tracker.start_trial(parent, skipped.number, "pin_memory", {})
    records.set_run(skipped, run)
    records.mark(skipped, records.State.SKIPPED, "pinned memory needs a GPU")
    study.tell(skipped, state=TrialState.FAIL)  # Ctrl-C inside the objective, before its run was closed

    client = _resumed(study, tracker)
    closed = client.get_run(run)
    assert (closed.info.status, closed.data.tags["ablate.state"]) == ("FINISHED", "skipped")
    assert closed.data.tags["ablate.reason"] == "pinned memory needs a GPU"
    assert client.get_run(running).info.status == "RUNNING"


def test_a_stopped_measurement_is_queued_again_though_a_later_duplicate_shares_its_slot(tmp_path):
    # Two workers that both plan a block queue the same measurement twice; the later trial yields to the earlier as
    # a duplicate (ablate.store.claim). A stop then ends the earlier one: the duplicate holds nothing, so the
    # measurement must be queued again, or the resumed study never measures it.
    from ablate.config.study import load
    from ablate.run.recovery import Recovery
    from ablate.store import records
    from ablate.tracking.tracker import Tracker
    from ablate.trial.machine import describe

    study = optuna.create_study(directions=["maximize", "maximize"])
    for _ in range(2):
        records.queue(study, {"amp": "off"}, block=0, position=3, phase="screen", combination="baseline", seed_index=0)
    owner, duplicate = study.ask(), study.ask()
    records.mark(duplicate, records.State.DUPLICATE, "duplicate: trial #0 has this combination in block 0")
    study.tell(duplicate, state=TrialState.FAIL)
    records.start(owner, "baseline", {}, "host:1")
    study.tell(owner, state=TrialState.FAIL)  # Ctrl-C: Optuna fails the trial its objective was running

    tracker = Tracker(load(str(TINY), "cpu"), describe("cpu"), tmp_path)
    Recovery(study, tracker, n_dims=1, heartbeat=False, grace_s=60).interrupted()

    queued = study.get_trials(deepcopy=False, states=(TrialState.WAITING,))
    assert [(t.system_attrs["fixed_params"], t.user_attrs["block"], t.user_attrs["position"]) for t in queued] == \
        [({"amp": "off"}, 0, 3)]
    Recovery(study, tracker, n_dims=1, heartbeat=False, grace_s=60).interrupted()  # a second resume: still once
    assert len(study.get_trials(deepcopy=False, states=(TrialState.WAITING,))) == 1
