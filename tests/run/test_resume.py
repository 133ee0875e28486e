"""A study killed mid-trial resumes: finished trials kept, the interrupted one re-run, its MLflow run KILLED."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from mlflow.tracking import MlflowClient
from optuna.trial import TrialState
from tiny_mnist import subprocess_env, tiny_study

from ablate.cli import main

TINY = Path(__file__).resolve().parents[1] / "studies" / "tiny.yaml"


def _trials(results: Path) -> list[optuna.trial.FrozenTrial]:
    try:
        study = optuna.load_study(study_name="tiny:grid:cpu", storage=f"sqlite:///{results / 'tiny' / 'optuna.db'}")
        return study.get_trials(deepcopy=False)
    except Exception:  # noqa: BLE001 - the storage may not exist yet
        return []


def test_sigkill_mid_study_then_resume(tmp_path, mnist):
    # tiny.yaml on a small CNN (tests/support/tiny_mnist.py): the same study, its trials in a fraction of the time.
    results, study = tmp_path / "results", tiny_study(tmp_path / "study")
    process = subprocess.Popen([sys.executable, "-m", "ablate", "run", str(study), "--device", "cpu",
                                "--results", str(results)], start_new_session=True, env=subprocess_env(),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    # Kill while a trial that trains is running, after at least one trial has completed.
    while time.monotonic() < deadline:
        trials = _trials(results)
        done = [t for t in trials if t.state == TrialState.COMPLETE]
        running = [t for t in trials if t.state == TrialState.RUNNING and "mlflow_run_id" in t.user_attrs
                   and t.params.get("pin_memory") == "off"]
        if done and running:
            break
        time.sleep(0.2)
    else:
        process.kill()
        pytest.fail("the study never reached a running trial after a completed one")
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    interrupted = running[0]

    assert main(["run", str(study), "--device", "cpu", "--results", str(results)]) == 0

    trials = _trials(results)
    assert not [t for t in trials if t.state == TrialState.RUNNING]
    assert [t.number for t in trials if t.user_attrs.get("state") == "interrupted"] == [interrupted.number]
    finished = [t for t in trials if t.user_attrs.get("state") in ("complete", "skipped")]
    slots = [(t.user_attrs["combination"], t.user_attrs["block"], t.user_attrs["position"]) for t in finished]
    assert len(slots) == len(set(slots))  # no measurement twice
    assert len({combination for combination, _, _ in slots}) == 8  # every combination measured
    # The lost one re-run.
    assert (interrupted.user_attrs["combination"], interrupted.user_attrs["block"],
            interrupted.user_attrs["position"]) in slots
    kept = {t.number for t in done}
    assert kept <= {t.number for t in finished}  # finished trials were not run again

    client = MlflowClient(tracking_uri=f"sqlite:///{results / 'mlflow.db'}")
    run = client.get_run(interrupted.user_attrs["mlflow_run_id"])
    assert run.info.status == "KILLED"
    assert run.data.tags["ablate.state"] == "killed"


def test_a_run_no_trial_recorded_is_killed_with_its_stopped_trial(tmp_path):
    # A stop that lands after MLflow created a trial's run and before the trial stored the run's id.
    from ablate.config.study import load
    from ablate.run.recovery import Recovery
    from ablate.store import study_record
    from ablate.tracking.tracker import Tracker
    from ablate.trial.machine import describe

    tracker = Tracker(load(str(TINY), "cpu"), describe("cpu"), tmp_path)
    parent = tracker.start_parent("grid")
    study = optuna.create_study(directions=["maximize", "maximize"])
    study_record.set_parent_run(study, parent)
    stopped, live = study.ask(), study.ask()  # `live`: another worker's trial, still running
    orphan = tracker.start_trial(parent, stopped.number, "baseline", {})
    running = tracker.start_trial(parent, live.number, "amp(bf16)", {})
    study.tell(stopped, state=TrialState.FAIL)  # what Optuna does with a trial its objective left by Ctrl-C

    Recovery(study, tracker, n_dims=1, heartbeat=True, grace_s=60).interrupted()

    client = MlflowClient(tracking_uri=tracker.uri)
    assert client.get_run(orphan).info.status == "KILLED"
    assert client.get_run(orphan).data.tags["ablate.state"] == "killed"
    assert client.get_run(running).info.status == "RUNNING"  # a live worker's run is not touched


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
