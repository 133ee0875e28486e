"""A study whose end a stop or an MLflow outage cut short - its parent run left RUNNING, a measurement's run never
ended: the next `ablate run` or `ablate sync` writes the end to the parent run and closes it, and ends the run."""
from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import optuna
import pytest
from mlflow.tracking import MlflowClient

from ablate.cli import main
from ablate.store import records, study_record


def _optuna(results: Path) -> optuna.Study:
    return optuna.load_study(study_name="tiny:grid:cpu", storage=f"sqlite:///{results / 'tiny' / 'optuna.db'}")


def _client(results: Path) -> MlflowClient:
    return MlflowClient(tracking_uri=f"sqlite:///{results / 'mlflow.db'}")


@pytest.fixture
def cut_short(tiny_study_run, tmp_path) -> Path:
    """A copy of the session's finished run, its end undone as a kill in MLflow's wrap-up leaves it."""
    first = tiny_study_run[0]
    results = shutil.copytree(first, tmp_path / "results")
    with sqlite3.connect(results / "mlflow.db") as db:  # the copy's artifacts in the copy, not the session's run
        old, new = str(first.resolve()), str(results.resolve())
        db.execute("UPDATE experiments SET artifact_location = replace(artifact_location, ?, ?)", (old, new))
        db.execute("UPDATE runs SET artifact_uri = replace(artifact_uri, ?, ?)", (old, new))
    optuna_study = _optuna(results)
    record = study_record.from_study(optuna_study)
    assert record.end == study_record.END_LOGGED and record.parent_run_id  # the session's run wrote its end
    study_record.set_end(optuna_study, study_record.END_DUE)
    _client(results).update_run(record.parent_run_id, status="RUNNING")
    return results


@pytest.mark.parametrize("command", ["run", "sync"])
def test_the_next_command_writes_a_cut_short_end_and_closes_the_parent_run(cut_short, tiny_study_file, command,
                                                                           capsys):
    argv = [command, str(tiny_study_file), "--device", "cpu", "--results", str(cut_short)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    record = study_record.from_study(_optuna(cut_short))
    assert record.end == study_record.END_LOGGED
    assert _client(cut_short).get_run(record.parent_run_id).info.status == "FINISHED"
    said = "nothing to run: the study is finished" if command == "run" else "wrote the end of the study"
    assert said in out, out
    assert main(argv) == 0 and "wrote the end" not in capsys.readouterr().out  # once


def test_sync_ends_a_measurements_run_an_outage_left_running(cut_short, tiny_study_file, capsys):
    optuna_study = _optuna(cut_short)
    study_record.set_end(optuna_study, study_record.END_LOGGED)  # only the measurement's run was cut short
    number, run_id = next(iter(sorted(records.run_ids(optuna_study).items())))
    client = _client(cut_short)
    client.update_run(run_id, status="RUNNING")
    argv = ["sync", str(tiny_study_file), "--device", "cpu", "--results", str(cut_short)]
    assert main(argv) == 0
    assert "logged 1 runs" in capsys.readouterr().out
    ended = client.get_run(run_id)
    assert ended.info.status in ("FINISHED", "FAILED", "KILLED")
    assert ended.data.tags["ablate.trial_number"] == str(number)
    assert main(argv) == 0 and "nothing to sync" in capsys.readouterr().out



def test_a_second_end_writes_each_measurements_accuracy_as_the_first_did(cut_short, tiny_study_file):
    """What the end writes on every measurement's run (tests/tracking/test_run_accuracy.py): deleted, the end due
    again, `ablate sync` writes it back as it was, and the metrics stay as they were."""
    client = _client(cut_short)
    experiment = client.get_experiment_by_name("ablate/tiny").experiment_id
    stored = {str(t.number): t.user_attrs for t in _optuna(cut_short).get_trials()}

    def logged() -> dict[str, tuple[dict[str, float], dict[str, str]]]:
        return {r.info.run_id: (r.data.metrics, r.data.tags) for r in client.search_runs([experiment], max_results=1000)
                if "mlflow.parentRunId" in r.data.tags}

    first = logged()
    for run_id, (_, tags) in first.items():
        # The source of a borrowed accuracy is the end's to write; a measurement that stored one logged it itself.
        lent = "accuracy_from" not in stored[tags["ablate.trial_number"]]
        for key in ("parity", "accuracy change", *([records.ACCURACY_FROM_TAG] if lent else [])):
            if key in tags:
                client.delete_tag(run_id, key)
    assert logged() != first
    assert main(["sync", str(tiny_study_file), "--device", "cpu", "--results", str(cut_short)]) == 0
    assert logged() == first
