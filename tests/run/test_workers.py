"""One study spread over worker processes: a real PostgreSQL storage, a real MLflow server, real SIGKILL.

Three `ablate worker` processes start at the same moment on one small grid; every planned measurement (a
combination in a block of the protocol) must end with exactly one result in Optuna and one finished child
run in MLflow, also when one worker is killed in the middle of a trial (its trial is found stale by
Optuna's heartbeat and run again by another).
"""
from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import optuna
import pytest
from mlflow.tracking import MlflowClient
from optuna.trial import TrialState
from tiny_mnist import subprocess_env, tiny_study

from servers import mlflow_server, postgres  # noqa: F401 - fixtures

TINY = Path(__file__).resolve().parents[1] / "studies" / "tiny.yaml"
COMBINATIONS = 8  # tiny.yaml: 2 x 2 x 2


def _start_workers(storage: str, tracking: str, tmp_path: Path, n: int = 3) -> list[subprocess.Popen]:
    env = subprocess_env(MLFLOW_TRACKING_URI=tracking, ABLATE_HEARTBEAT_S="1")
    # Each worker its own results folder, as on separate machines; all started before any is waited for.
    study = tiny_study(tmp_path / "study")  # tiny.yaml on a small CNN: the same study, in a fraction of the time
    return [subprocess.Popen([sys.executable, "-m", "ablate", "worker", str(study), "--storage", storage,
                              "--device", "cpu", "--results", str(tmp_path / f"results-{i}")],
                             env=env, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True)
            for i in range(n)]


@functools.cache
def _storage(url: str) -> optuna.storages.RDBStorage:
    """One storage (one connection pool) per database: polling through new ones would use up the server's
    connection slots faster than closed pools give them back."""
    return optuna.storages.RDBStorage(url)


def _trials(storage: str) -> list[optuna.trial.FrozenTrial]:
    try:
        return optuna.load_study(study_name="tiny:grid:cpu", storage=_storage(storage)).get_trials(deepcopy=False)
    except KeyError:  # not created yet
        return []


def _check_exactly_once(storage: str, tracking: str) -> list[optuna.trial.FrozenTrial]:
    trials = _trials(storage)
    results = [t for t in trials if t.user_attrs.get("state") in ("complete", "skipped")]
    slots = Counter((t.user_attrs["combination"], t.user_attrs["block"], t.user_attrs["position"]) for t in results)
    assert set(slots.values()) == {1}, slots  # no (combination, block) twice
    assert len({c for c, _, _ in slots}) == COMBINATIONS  # every combination measured
    assert any(t.user_attrs["phase"] == "race" for t in results)  # the race was planned once the screening ended
    # No trial lost or left over: every other trial is a duplicate that ended at once, or a killed attempt.
    assert not [t for t in trials if t.state in (TrialState.RUNNING, TrialState.WAITING)]
    for t in results:
        assert t.user_attrs["machine"]["host"] and t.user_attrs["machine"]["device"] == "cpu"
    client = MlflowClient(tracking_uri=tracking)
    experiment = client.get_experiment_by_name("ablate/tiny")
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    finished = Counter((r.data.tags["ablate.combination"], int(r.data.tags["ablate.block"]),
                        int(r.data.tags["ablate.position"])) for r in children
                       if r.info.status == "FINISHED")
    assert finished == slots, (finished, slots)
    # One parent run for the whole study, whichever worker made it, finished, with the report through the server.
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert len(parents) == 1 and {r.data.tags["mlflow.parentRunId"] for r in children} == {parents[0].info.run_id}
    assert parents[0].info.status == "FINISHED"
    assert "report/grid/report.html" in {a.path for a in client.list_artifacts(parents[0].info.run_id, "report/grid")}
    duplicates = [t for t in trials if t.user_attrs.get("state") == "duplicate"]
    assert not [t for t in duplicates if "mlflow_run_id" in t.user_attrs]  # a duplicate never logs a run
    return trials


def _wait(workers: list[subprocess.Popen]) -> None:
    for w in workers:
        out, _ = w.communicate(timeout=600)
        assert w.returncode == 0, out


@pytest.mark.slow
def test_three_workers_started_at_once_run_every_combination_exactly_once_also_when_one_is_killed_mid_trial(
        mnist, postgres, mlflow_server, tmp_path):
    """Three workers started at the same moment share the study, and the one killed in the middle of a trial has its
    trial run again by another. One study for both claims (each had its own: minutes on 2 cores): all three start and
    plan together, and the two left run it to its end, every combination exactly once."""
    _storage(postgres)  # Optuna's tables made before the workers start, so that polling never races them
    workers = _start_workers(postgres, mlflow_server, tmp_path)
    by_pid = {w.pid: w for w in workers}
    deadline = time.monotonic() + 300
    victim = None
    while victim is None:
        assert time.monotonic() < deadline, "no worker ever reached a running trial"
        running = [t for t in _trials(postgres) if t.state == TrialState.RUNNING and "mlflow_run_id" in t.user_attrs
                   and t.params.get("pin_memory") == "off"]  # one that trains (pinning is skipped at once on a CPU)
        if running:
            victim = running[0]
        time.sleep(0.2)
    pid = int(victim.user_attrs["worker"].rsplit(":", 1)[1])
    os.killpg(pid, signal.SIGKILL)  # the worker and its trial process, no chance to clean up
    by_pid.pop(pid).wait()
    _wait(list(by_pid.values()))
    trials = _check_exactly_once(postgres, mlflow_server)
    assert len({t.user_attrs["worker"] for t in trials if "worker" in t.user_attrs}) > 1  # the work was shared
    killed = next(t for t in trials if t.number == victim.number)
    assert killed.state == TrialState.FAIL and killed.user_attrs["state"] == "running"  # failed by the heartbeat
    slot = ("combination", "block", "position")
    rerun = [t for t in trials if all(t.user_attrs.get(k) == victim.user_attrs[k] for k in slot)
             and t.user_attrs.get("state") in ("complete", "skipped")]
    assert rerun and rerun[0].number > victim.number and rerun[0].user_attrs["worker"] != victim.user_attrs["worker"]
    run = MlflowClient(tracking_uri=mlflow_server).get_run(victim.user_attrs["mlflow_run_id"])
    assert run.info.status == "KILLED"


@pytest.mark.slow
def test_run_with_workers_spreads_the_study_over_processes_and_ctrl_c_stops_every_worker_then_it_resumes(
        mnist, postgres, mlflow_server, tmp_path):
    """`ablate run --workers 2` on this machine: Ctrl-C stops every worker, and the same command run again spreads
    what is left over two worker processes to the study's end, its table and report. One study for both claims
    (each had its own: minutes on 2 cores): the resumed run is a run with workers to the end all the same."""
    _storage(postgres)
    env = subprocess_env(MLFLOW_TRACKING_URI=mlflow_server)
    study = tiny_study(tmp_path / "study")  # tiny.yaml on a small CNN: the same study, in a fraction of the time
    command = [sys.executable, "-m", "ablate", "run", str(study), "--workers", "2", "--storage", postgres,
               "--device", "cpu", "--results", str(tmp_path / "results")]
    first = subprocess.Popen(command, env=env, start_new_session=True, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    # A measurement, not a skip (a skipped trial also runs for a moment with an MLflow run of its own).
    while not [t for t in _trials(postgres) if t.state == TrialState.RUNNING and "accuracy_group" in t.user_attrs]:
        assert time.monotonic() < deadline and first.poll() is None, "no worker ever reached a running trial"
        time.sleep(0.2)
    os.killpg(first.pid, signal.SIGINT)  # Ctrl-C in the terminal: the coordinator passes it on to its workers
    out, err = first.communicate(timeout=120)
    assert first.returncode == 130, out + err
    assert "run the same command again" in err
    trials = _trials(postgres)
    assert not [t for t in trials if t.state == TrialState.RUNNING]  # every worker stopped its trial
    # "running": stopped before its trial process started; recovery treats it as interrupted (ablate.run.recovery).
    interrupted = [t for t in trials if t.user_attrs.get("state") in ("interrupted", "running")]
    assert interrupted and all(t.state == TrialState.FAIL for t in interrupted)
    # Each one's MLflow run KILLED, also one whose id the stop kept its trial from storing (Tracker.kill_stopped).
    client = MlflowClient(tracking_uri=mlflow_server)
    runs = client.search_runs([client.get_experiment_by_name("ablate/tiny").experiment_id], max_results=1000)
    numbers = {str(t.number) for t in interrupted}
    assert {r.info.status for r in runs if r.data.tags.get("ablate.trial_number") in numbers} <= {"KILLED"}
    assert {client.get_run(t.user_attrs["mlflow_run_id"]).info.status
            for t in interrupted if "mlflow_run_id" in t.user_attrs} == {"KILLED"}
    assert not [r for r in runs if "mlflow.parentRunId" in r.data.tags and r.info.status == "RUNNING"]

    stopped_at = max(t.number for t in trials)
    again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stdout + again.stderr
    resumed = [t for t in _check_exactly_once(postgres, mlflow_server)  # each interrupted combination ran again, once
               if t.number > stopped_at]
    assert len({t.user_attrs["worker"] for t in resumed if "worker" in t.user_attrs}) == 2  # spread over both
    assert "baseline" in again.stdout and "recommended:" in again.stdout  # the table and report, once all finished


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:Heartbeat of storage is supposed to be used with Study.optimize")
def test_a_trial_a_worker_left_without_parameters_is_failed_after_the_grace_period(mnist, postgres, tmp_path):
    # A worker killed inside Optuna's ask() leaves a RUNNING trial with no parameters and no heartbeat,
    # which Optuna's own stale check never finds.
    from ablate.config import study as studies
    from ablate.run.runner import Runner
    from ablate.trial.machine import describe

    runner = Runner(studies.load(str(TINY), "cpu"), describe("cpu"), "grid", postgres, tmp_path, heartbeat_s=1)
    combination = {dim: list(options)[-1] for dim, options in runner.choices.items()}
    runner.optuna_study.enqueue_trial(combination)
    took_queued = runner.optuna_study.ask()  # died holding a queued combination
    took_fresh = runner.optuna_study.ask()  # died before its grid point had parameters
    runner.recovery.stale()
    assert {t.state for t in _trials(postgres)} == {TrialState.RUNNING}  # too early to tell from a live worker
    time.sleep(runner.recovery.grace_s + 0.5)
    runner.recovery.stale()
    trials = {t.number: t for t in _trials(postgres)}
    assert trials[took_queued.number].state == trials[took_fresh.number].state == TrialState.FAIL
    waiting = [t for t in trials.values() if t.state == TrialState.WAITING]
    assert [t.system_attrs["fixed_params"] for t in waiting] == [combination]  # the queued one runs again
