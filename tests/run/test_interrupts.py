"""A failing trial does not stop the study; Ctrl-C and SIGTERM stop it cleanly, and it resumes.

Real processes: `ablate run` in a subprocess, real signals.
"""
from __future__ import annotations

import csv
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

from ablate.cli import main

STUDIES = Path(__file__).resolve().parents[1] / "studies"
TINY, FAULTY = STUDIES / "tiny.yaml", STUDIES / "faulty.yaml"


def _trials(results: Path, name: str) -> list[optuna.trial.FrozenTrial]:
    try:
        study = optuna.load_study(study_name=f"{name}:grid:cpu", storage=f"sqlite:///{results / name / 'optuna.db'}")
        return study.get_trials(deepcopy=False)
    except Exception:  # noqa: BLE001 - the storage may not exist yet
        return []


def _mlflow_run(results: Path, run_id: str):
    return MlflowClient(tracking_uri=f"sqlite:///{results / 'mlflow.db'}").get_run(run_id)


def test_a_failed_trial_is_recorded_and_the_study_goes_on(mnist, tmp_path, capsys):
    assert main(["run", str(FAULTY), "--device", "cpu", "--results", str(tmp_path)]) == 0
    trials = {t.params["graph"]: t for t in _trials(tmp_path, "faulty")}
    failed, ran = trials["torchscript"], trials["off"]
    assert failed.state == TrialState.FAIL and failed.user_attrs["state"] == "failed"
    assert failed.user_attrs["reason"].startswith("compile: ")
    assert ran.state == TrialState.COMPLETE
    run = _mlflow_run(tmp_path, failed.user_attrs["mlflow_run_id"])
    assert run.info.status == "FAILED" and run.data.tags["ablate.reason"].startswith("compile: ")
    rows = {r["combination"]: r for r in csv.DictReader((tmp_path / "faulty" / "grid-cpu.csv").open())}
    assert rows["torchscript"]["state"] == "failed" and rows["torchscript"]["reason"].startswith("compile: ")
    assert "torchscript" in capsys.readouterr().out  # the printed table shows it


def _start(results: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "ablate", "run", str(TINY), "--device", "cpu", "--results", str(results)],
                            start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for_a_running_trial(results: Path) -> optuna.trial.FrozenTrial:
    """A measurement of a group not yet trained, after one has completed (so the trial processes are up, as
    mid-study)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        trials = _trials(results, "tiny")
        trained = {t.user_attrs.get("accuracy_group") for t in trials if t.user_attrs.get("accuracy_trained")}
        running = [t for t in trials if t.state == TrialState.RUNNING and "accuracy_group" in t.user_attrs
                   and t.user_attrs["accuracy_group"] not in trained]
        if running and any(t.state == TrialState.COMPLETE for t in trials):
            time.sleep(0.3)  # inside the trial process by now
            return running[0]
        time.sleep(0.05)
    pytest.fail("the study never reached a running trial after a completed one")


@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_stopping_marks_the_running_trial_killed_and_says_how_to_resume(mnist, tmp_path, how):
    process = _start(tmp_path)
    running = _wait_for_a_running_trial(tmp_path)
    if how == "ctrl-c":  # the terminal sends SIGINT to the whole foreground process group
        os.killpg(process.pid, signal.SIGINT)
    else:  # a scheduler or `kill` signals the main process only
        process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130
    assert "the running trial was marked KILLED; run the same command again to resume" in err
    assert "Traceback" not in err and "pymp-" not in err, err  # the one line, no multiprocessing finalizer noise
    stopped = next(t for t in _trials(tmp_path, "tiny") if t.number == running.number)
    assert stopped.state == TrialState.FAIL and stopped.user_attrs["state"] == "interrupted"
    assert _mlflow_run(tmp_path, stopped.user_attrs["mlflow_run_id"]).info.status == "KILLED"
    assert not [t for t in _trials(tmp_path, "tiny") if t.state == TrialState.RUNNING]
    # No trial process outlives the study: the study's process group empties (the forkserver and any
    # DataLoader worker notice their parent is gone within seconds).
    deadline = time.monotonic() + 30
    while (left := subprocess.run(["pgrep", "-a", "-g", str(process.pid)], capture_output=True, text=True).stdout.strip()):
        assert time.monotonic() < deadline, f"still running after the study stopped: {left}"
        time.sleep(0.5)

    assert main(["run", str(TINY), "--device", "cpu", "--results", str(tmp_path)]) == 0
    trials = _trials(tmp_path, "tiny")
    finished = [t for t in trials if t.user_attrs.get("state") in ("complete", "skipped")]
    slots = [(t.user_attrs["combination"], t.user_attrs["block"], t.user_attrs["position"]) for t in finished]
    assert len(slots) == len(set(slots)) and len({tuple(sorted(t.params.items())) for t in finished}) == 8
    assert (running.user_attrs["combination"], running.user_attrs["block"], running.user_attrs["position"]) in slots  # the stopped one ran again
