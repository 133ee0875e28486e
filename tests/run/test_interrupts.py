"""A failing trial does not stop the study; Ctrl-C and SIGTERM stop it cleanly, SIGKILL outright, and it resumes.

Real processes: `ablate run` in a subprocess, real signals.
"""
from __future__ import annotations

import contextlib
import csv
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import optuna
import pytest
from mlflow.tracking import MlflowClient
from optuna.trial import TrialState
from tiny_mnist import subprocess_env, tiny_study

from ablate.cli import main

STUDIES = Path(__file__).resolve().parents[1] / "studies"
FAULTY = STUDIES / "faulty.yaml"


def _trials(results: Path, name: str) -> list[optuna.trial.FrozenTrial]:
    try:
        study = optuna.load_study(study_name=f"{name}:grid:cpu", storage=f"sqlite:///{results / name / 'optuna.db'}")
        return study.get_trials(deepcopy=False)
    except Exception:  # the storage may not exist yet
        return []


def _mlflow_run(results: Path, run_id: str):
    return MlflowClient(tracking_uri=f"sqlite:///{results / 'mlflow.db'}").get_run(run_id)


@pytest.mark.slow
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


def _start(study: Path, results: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "ablate", "run", str(study), "--device", "cpu",
                             "--results", str(results)], env=subprocess_env(),
                            start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


Wanted = Callable[[optuna.trial.FrozenTrial, list[optuna.trial.FrozenTrial]], bool]


def _untrained(t: optuna.trial.FrozenTrial, trials: list[optuna.trial.FrozenTrial]) -> bool:
    """A measurement of a group not yet trained."""
    trained = {u.user_attrs.get("accuracy_group") for u in trials if u.user_attrs.get("accuracy_trained")}
    return "accuracy_group" in t.user_attrs and t.user_attrs["accuracy_group"] not in trained


def _training_with_a_run(t: optuna.trial.FrozenTrial, trials: list[optuna.trial.FrozenTrial]) -> bool:
    """A trial that trains (pinning is skipped at once on a CPU) and has stored its MLflow run's id."""
    return "mlflow_run_id" in t.user_attrs and t.params.get("pin_memory") == "off"


def _wait_for_a_running_trial(results: Path, complete_before: set[int], wanted: Wanted) -> optuna.trial.FrozenTrial:
    """A running trial `wanted` picks, after one has completed in this run (so the trial processes are up, as
    mid-study); `complete_before`: the trials a run before this one completed."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        trials = _trials(results, "tiny")
        running = [t for t in trials if t.state == TrialState.RUNNING and wanted(t, trials)]
        if running and any(t.state == TrialState.COMPLETE and t.number not in complete_before for t in trials):
            time.sleep(0.3)  # inside the trial process by now
            return running[0]
        time.sleep(0.05)
    pytest.fail("the study never reached a running trial after a completed one")


@dataclass
class _Stop:
    """One stop of the study, as found right after it (the resume that follows changes the storage)."""

    returncode: int
    err: str
    running: optuna.trial.FrozenTrial  # the trial running when the signal came
    stopped: optuna.trial.FrozenTrial | None  # that trial as stored once the study had stopped
    mlflow_status: str  # of its MLflow run
    left_running: list[optuna.trial.FrozenTrial]  # trials still RUNNING in the storage
    left_processes: str  # what of the study's process group was still alive 30 s after it stopped
    complete: set[int]  # the trials complete when it stopped


def _stop(study: Path, results: Path, how: str) -> _Stop:
    complete_before = {t.number for t in _trials(results, "tiny") if t.state == TrialState.COMPLETE}
    process = _start(study, results)
    # SIGKILL: a trial whose MLflow run the resume must find and mark KILLED (no chance to do it itself).
    running = _wait_for_a_running_trial(results, complete_before,
                                        _training_with_a_run if how == "sigkill" else _untrained)
    if how == "ctrl-c":  # the terminal sends SIGINT to the whole foreground process group
        os.killpg(process.pid, signal.SIGINT)
    elif how == "sigterm":  # a scheduler or `kill` signals the main process only
        process.send_signal(signal.SIGTERM)
    else:  # the study and its trial process killed outright, no chance to clean up
        os.killpg(process.pid, signal.SIGKILL)
    _, err = process.communicate(timeout=60)
    trials = _trials(results, "tiny")
    stopped = next((t for t in trials if t.number == running.number), None)
    run_id = stopped.user_attrs.get("mlflow_run_id") if stopped else None
    # No trial process outlives the study: the study's process group empties (the forkserver and any
    # DataLoader worker notice their parent is gone within seconds).
    deadline = time.monotonic() + 30
    while (left := subprocess.run(["pgrep", "-a", "-g", str(process.pid)], capture_output=True,
                                  text=True).stdout.strip()) and time.monotonic() < deadline:
        time.sleep(0.5)
    if left:  # the test fails on it; the next run must not find them holding the study
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    return _Stop(process.returncode, err, running, stopped,
                 _mlflow_run(results, run_id).info.status if run_id else "no MLflow run id stored",
                 [t for t in trials if t.state == TrialState.RUNNING], left,
                 {t.number for t in trials if t.state == TrialState.COMPLETE})


@dataclass
class _Stopped:
    stops: dict[str, _Stop]  # by how it was stopped
    code: int  # the last resume's exit status
    trials: list[optuna.trial.FrozenTrial]  # what it left
    results: Path


@pytest.fixture(scope="module")
def stopped(tmp_path_factory, mnist) -> _Stopped:
    """The tiny study (on a small CNN: tests/support/tiny_mnist.py) stopped by Ctrl-C, its resume stopped by SIGTERM,
    that one's resume killed by SIGKILL, then resumed to its end: each stop as found right after it, the last
    resume's exit status and the trials it left.

    One study for the three ways of stopping (each had its own): every stop is followed by a resume, and a resume to
    the end of tiny.yaml is minutes on 2 cores. The later stops are stops of a resumed study, mid-study all the same.
    """
    study, results = tiny_study(tmp_path_factory.mktemp("study")), tmp_path_factory.mktemp("stopped")
    stops = {how: _stop(study, results, how) for how in ("ctrl-c", "sigterm", "sigkill")}
    code = main(["run", str(study), "--device", "cpu", "--results", str(results)])
    return _Stopped(stops, code, _trials(results, "tiny"), results)


def _slot(t: optuna.trial.FrozenTrial) -> tuple[str, int, int]:
    return t.user_attrs["combination"], t.user_attrs["block"], t.user_attrs["position"]


def _finished(trials: list[optuna.trial.FrozenTrial]) -> list[optuna.trial.FrozenTrial]:
    return [t for t in trials if t.user_attrs.get("state") in ("complete", "skipped")]


@pytest.mark.slow
@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_stopping_marks_the_running_trial_killed_and_says_how_to_resume(stopped, how):
    stops, code, trials = stopped.stops, stopped.code, stopped.trials
    stop = stops[how]
    running, err = stop.running, stop.err
    assert stop.returncode == 130
    assert "the running trial was marked KILLED; run the same command again to resume" in " ".join(err.split())
    assert "Traceback" not in err and "pymp-" not in err, err  # the one line, no multiprocessing finalizer noise
    stopped = stop.stopped
    assert stopped is not None and stopped.state == TrialState.FAIL and stopped.user_attrs["state"] == "interrupted"
    assert stop.mlflow_status == "KILLED"
    assert not stop.left_running
    assert not stop.left_processes, f"still running after the study stopped: {stop.left_processes}"

    assert code == 0  # the resume
    finished = _finished(trials)
    slots = [_slot(t) for t in finished]
    assert len(slots) == len(set(slots)) and len({tuple(sorted(t.params.items())) for t in finished}) == 8
    assert _slot(running) in slots  # the stopped one ran again


@pytest.mark.slow
def test_a_study_killed_outright_resumes_with_its_finished_trials_kept_and_the_lost_one_run_again(stopped):
    """SIGKILL mid-trial: the study and its trial process gone at once, the trial left RUNNING in the storage and its
    MLflow run RUNNING. The resume marks it interrupted and its run KILLED, runs it again, and runs no finished trial
    again."""
    killed, trials = stopped.stops["sigkill"], stopped.trials
    assert killed.returncode == -signal.SIGKILL and killed.stopped is not None
    assert killed.stopped.state == TrialState.RUNNING and killed.mlflow_status == "RUNNING"  # nobody cleaned up

    assert stopped.code == 0  # the resume
    assert not [t for t in trials if t.state == TrialState.RUNNING]
    interrupted = {t.number for t in trials if t.user_attrs.get("state") == "interrupted"}
    assert interrupted == {stop.running.number for stop in stopped.stops.values()}  # the three stopped, no other
    finished = _finished(trials)
    slots = [_slot(t) for t in finished]
    assert len(slots) == len(set(slots))  # no measurement twice
    assert len({combination for combination, _, _ in slots}) == 8  # every combination measured
    assert _slot(killed.running) in slots  # the lost one run again
    assert killed.complete <= {t.number for t in finished}  # finished trials were not run again
    run = _mlflow_run(stopped.results, killed.running.user_attrs["mlflow_run_id"])
    assert run.info.status == "KILLED" and run.data.tags["ablate.state"] == "killed"
