"""Every measurement's MLflow run carries its accuracy after the study's end, so MLflow's table sorts the grid by
accuracy: its group's test accuracy (its own training's, else borrowed from the trial `ablate.accuracy_from` names),
the accuracy change and the parity verdict. The whole table trains every group (after the answer, those it did not
need), so every complete run has them; a group never trained (`--quick`) would carry why, and no figure
(tests/stats/test_table_pass.py). tests/tracking/test_end_resumed.py: a second end writes the same again."""
from __future__ import annotations

import re
from pathlib import Path

import optuna
from mlflow.entities import Run
from mlflow.tracking import MlflowClient

from ablate.store import records
from ablate.store.records import ACCURACY_FROM_TAG

VERDICT = re.compile(r"(ok|below|uncertain(, probably below)?) \[[+-]\d+\.\d\d, [+-]\d+\.\d\d\] \(\d+ seeds?\)")


def _optuna(results: Path) -> optuna.Study:
    return optuna.load_study(study_name="tiny:grid:cpu", storage=f"sqlite:///{results / 'tiny' / 'optuna.db'}")


def _children(results: Path) -> list[Run]:
    client = MlflowClient(tracking_uri=f"sqlite:///{results / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("ablate/tiny")
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    return [r for r in runs if "mlflow.parentRunId" in r.data.tags]


def test_every_measured_run_carries_its_groups_accuracy(tiny_study_run):
    results = tiny_study_run[0]
    optuna_study = _optuna(results)
    combined = {r.combination: r for r in records.load(optuna_study)}
    trials = {t.number: t for t in optuna_study.get_trials()}
    complete = [r for r in _children(results) if r.data.tags["ablate.state"] == "complete"]
    sources = set()
    for run in complete:
        m, tags = run.data.metrics, run.data.tags
        trial, record = trials[int(tags["ablate.trial_number"])], combined[tags["ablate.combination"]]
        assert record.accuracy is not None, tags  # the whole table: every group trained, once at least
        own = trial.user_attrs["metrics"]
        # A training (a parity seed's too) keeps its own figures, and so does a measurement taken after its group
        # trained (it stored them, and their source); one taken before borrows the table's at the end.
        accuracy, source = ((own["test_accuracy"], trial.user_attrs["accuracy_from"]) if records.trained_figures(own)
                            else (record.accuracy, record.accuracy_from))
        assert (m["test_accuracy"], tags[ACCURACY_FROM_TAG]) == (accuracy, str(source)), tags["mlflow.runName"]
        assert tags["accuracy change"] == f"{m['accuracy_change']:+.2f} pts"
        assert VERDICT.fullmatch(tags["parity"]), tags["parity"]
        sources.add((tags["ablate.combination"], trials[source].user_attrs["combination"]))
    # The baseline's group trains once, by the baseline or num_workers (the same numerics): the other borrows it.
    assert any(borrower != trainer for borrower, trainer in sources), sources

