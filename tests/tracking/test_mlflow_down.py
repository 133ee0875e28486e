"""MLflow unreachable: the study runs, Optuna keeps the results, `ablate report` works, `ablate sync` pushes them
later."""
from __future__ import annotations

import socket
from pathlib import Path

import optuna
import pytest
from messages import one_message
from mlflow.tracking import MlflowClient
from tiny_mnist import tiny_text

from ablate.cli import main
from ablate.config.study import load
from ablate.store import records
from ablate.store.study_record import RUNS_ATTR
from ablate.tracking.tracker import Tracker
from ablate.trial.machine import describe

TINY = Path(__file__).resolve().parents[1] / "studies" / "tiny.yaml"
# tiny.yaml without the workers dimension: two combinations run on a CPU, two are skipped (pinning). On a small CNN
# (tests/support/tiny_mnist.py): the same study, its trials in a fraction of mnist_cnn's time.
SMALL = tiny_text().replace("  num_workers: [off, {num_workers: {n: 1}}]\n", "") + "name: down\n"


@pytest.fixture
def closed_port() -> int:
    with socket.socket() as s:  # bound, then closed: nothing listens there
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def mlflow_down(monkeypatch, closed_port) -> str:
    uri = f"http://127.0.0.1:{closed_port}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    return uri


def _optuna(results: Path) -> optuna.Study:
    return optuna.load_study(study_name="down:grid:cpu", storage=f"sqlite:///{results / 'down' / 'optuna.db'}")


def test_tracker_goes_offline_at_once_and_its_methods_do_nothing(tmp_path, mlflow_down, capsys):
    tracker = Tracker(load(str(TINY), "cpu"), describe("cpu"), tmp_path)
    assert tracker.offline and "Connection refused" in tracker.offline_reason
    err = capsys.readouterr().err
    assert mlflow_down in one_message(err) and "Connection refused" in err
    assert tracker.start_parent("grid") is None
    assert tracker.start_trial("parent", 0, "baseline", {}) is None
    assert tracker.finish_trial("run", "complete", metrics={"throughput": 1.0}) is None
    assert tracker.finish_parent(None, []) is None
    assert not any(tmp_path.iterdir())  # nothing written for a remote store


def test_a_tracking_failure_mid_study_turns_the_tracker_offline(tmp_path, capsys):
    tracker = Tracker(load(str(TINY), "cpu"), describe("cpu"), tmp_path)
    parent = tracker.start_parent("grid")
    assert parent and not tracker.offline

    def broken(*args, **kwargs):
        raise ConnectionError("server went away")

    tracker.client.log_batch = broken
    assert tracker.start_trial(parent, 0, "baseline", {"dim.amp": "off"}) is None
    assert tracker.offline and "server went away" in tracker.offline_reason
    assert tracker.finish_trial("any", "failed", "error: x") is None  # offline from now on: no call is made
    assert "server went away" in capsys.readouterr().err


@pytest.mark.slow
def test_study_runs_with_mlflow_down_and_sync_pushes_the_runs_later(mnist, tmp_path, monkeypatch, mlflow_down,
                                                                     capsys):
    study_file = tmp_path / "down.yaml"
    study_file.write_text(SMALL)
    results = tmp_path / "results"
    args = [str(study_file), "--device", "cpu", "--results", str(results)]

    assert main(["run", *args]) == 0
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    warning = one_message(captured.err[captured.err.rindex("ablate: warning: MLflow"):])  # the last, wrapped
    assert mlflow_down in warning and "unreachable" in warning and f"ablate sync {study_file}" in warning
    trials = _optuna(results).get_trials()
    states = [t.user_attrs["state"] for t in trials]
    assert states.count("skipped") == 2 and set(states) == {"complete", "skipped"}  # baselines per block, a race
    assert not any(t.user_attrs.get("mlflow_run_id") for t in trials)
    assert not (results / "mlflow.db").exists()
    assert (results / "down" / "grid-cpu.csv").exists()

    assert main(["report", *args]) == 0  # still works, the report is not attached
    captured = capsys.readouterr()
    assert "recommended:" in captured.out and "unreachable" in captured.err

    assert main(["sync", *args]) == 2  # still down: one line, nothing pushed
    assert "nothing synced" in one_message(capsys.readouterr().err)
    assert RUNS_ATTR not in _optuna(results).user_attrs

    monkeypatch.delenv("MLFLOW_TRACKING_URI")  # MLflow is back: the default store under results/
    assert main(["sync", *args]) == 0
    assert f"{len(trials)} runs" in capsys.readouterr().out
    stored = _optuna(results)
    mapping = stored.user_attrs[RUNS_ATTR]
    assert sorted(mapping) == sorted(str(t.number) for t in trials)

    client = MlflowClient(tracking_uri=f"sqlite:///{results / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("ablate/down")
    runs = client.search_runs([experiment.experiment_id], max_results=100)
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = {r.info.run_id: r for r in runs if "mlflow.parentRunId" in r.data.tags}
    assert len(parents) == 1 and parents[0].info.run_id == stored.user_attrs["mlflow_parent_run_id"]
    assert set(children) == set(mapping.values())
    assert {a.path for a in client.list_artifacts(parents[0].info.run_id)} >= {"down.yaml", "grid-cpu.csv"}
    combined = {r.combination: r for r in records.load(stored)}
    for t in trials:
        run = children[mapping[str(t.number)]]
        assert run.data.tags["mlflow.parentRunId"] == parents[0].info.run_id
        assert run.data.tags["ablate.trial_number"] == str(t.number)
        assert run.data.tags["ablate.state"] == t.user_attrs["state"]
        assert run.data.tags["ablate.reason"] == t.user_attrs.get("reason", "")
        assert run.data.tags["ablate.device"] == "cpu"
        assert run.data.params["dim.amp"] == t.params["amp"]
        assert run.data.params["dim.pin_memory"] == t.params["pin_memory"]
        assert run.info.status == "FINISHED"
        assert run.info.start_time == int(t.datetime_start.timestamp() * 1000)
        if t.user_attrs["state"] == "complete":
            assert run.data.metrics["throughput"] == t.user_attrs["metrics"]["throughput"]
            assert "speedup" in run.data.metrics
            # Measured before its group trained (Planner.defer_accuracy): its group's accuracy, as the table shows it.
            # A group never trained (accuracy only where it decides) has none to show.
            trained_by = t.user_attrs.get("accuracy_from", combined[t.user_attrs["combination"]].accuracy_from)
            if combined[t.user_attrs["combination"]].accuracy is not None:
                assert run.data.tags["ablate.accuracy_from"] == str(trained_by) and "test_accuracy" in run.data.metrics
            else:
                assert "ablate.accuracy_from" not in run.data.tags and "test_accuracy" not in run.data.metrics
            assert run.data.tags["speed-up"].startswith(f"x{run.data.metrics['speedup']:.2f}")
    # As `ablate run` logs them: one run per combination is its row in the MLflow view, named after it.
    rows = [r for r in children.values() if r.data.tags["ablate.row"] == "combination"]
    assert sorted(r.info.run_name for r in rows) == sorted({t.user_attrs["combination"] for t in trials})

    assert main(["sync", *args]) == 0  # idempotent: nothing is pushed twice
    assert "nothing to sync" in capsys.readouterr().out
    assert len(client.search_runs([experiment.experiment_id], max_results=100)) == len(runs)
