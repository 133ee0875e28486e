"""The whole table, end to end: a raced grid of four accuracy groups (batch size x bf16) on the tiny CNN, at up to
three seeds. The answer trains the groups it needs (the leader's, the baseline's, the spread's); at three seeds two
groups give the spread its degrees of freedom, so at least one group is left, and the table pass trains it once
after the answer: a `table` measurement that trains (not only times), at the run's own seed, whose accuracy every
row of its group shows, in the store, the table and MLflow."""
from __future__ import annotations

import csv
from pathlib import Path

import optuna
import pytest
from mlflow.tracking import MlflowClient

from ablate.cli import main
from ablate.run.runner import Runner
from ablate.store import records
from ablate.words import count

STUDY = """\
description: tiny study with four accuracy groups
model: tiny_mnist:TinyMnistCNN
dataset: mnist
space:
  batch_size: [off, {batch_size: {n: 128}}]
  amp: [off, {amp: {dtype: bf16}}]
budget:
  profile_steps: 0
  train_samples: 512
  warmup_samples: 64
  window_samples: 64
  windows: 2
  train_subset: 1024
  test_subset: 256
  test_batch_size: 256
protocol:
  warm_up_trials: 0
  block_size: 2
  race_blocks: 1
  contenders: 2
  confirm_blocks: 1
  seeds: 3
accuracy_tolerance: 100.0   # no group is ever out: one round, so the answer trains no more groups than it needs
"""


@pytest.mark.slow
def test_every_group_left_by_the_answer_trains_once_after_it_and_every_row_has_its_accuracy(
        tmp_path: Path, mnist, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    study = tmp_path / "whole_table.yaml"
    study.write_text(STUDY)
    results = tmp_path / "results"
    run = ["run", str(study), "--device", "cpu", "--results", str(results)]
    # Stopped as the table pass is queued (Ctrl-C's KeyboardInterrupt), then resumed to its end.
    queue = Runner._queue

    def stop_at_the_table(runner: Runner, planned: list) -> str:
        step = queue(runner, planned)
        if planned[0].slot.phase == "table":
            raise KeyboardInterrupt
        return step

    monkeypatch.setattr(Runner, "_queue", stop_at_the_table)
    assert main(run) == 130
    said = capsys.readouterr()
    assert "the answer is settled (its race, confirmation and accuracy seeds are done); the table pass now trains" \
        in " ".join((said.out + said.err).split())
    stopped = " ".join(said.err.split())
    assert f"the answer was settled before the stop (only the table pass was left): ablate report {study} " in stopped
    assert f" --results {results} gives it" in stopped
    monkeypatch.setattr(Runner, "_queue", queue)
    assert main(run) == 0
    resumed = " ".join(capsys.readouterr().out.split())  # said again, once: its first step is the queued table pass
    assert resumed.count("the answer is settled (its race, confirmation and accuracy seeds are done)") == 1, resumed
    trials = optuna.load_study(study_name="whole_table:grid:cpu",
                               storage=f"sqlite:///{results / 'whole_table' / 'optuna.db'}").get_trials()
    table = [t for t in trials if t.user_attrs["phase"] == "table"]
    answer = [t for t in trials if t.user_attrs["phase"] in ("parity", "race", "confirm")]
    assert table and min(t.number for t in table) > max(t.number for t in answer)
    assert f"the table pass now trains {count(len(table), 'more accuracy group')} once" in resumed
    seeds = {t.user_attrs["training_seed"] for t in trials if t.user_attrs.get("seed_index") == 0
             and t.user_attrs.get("accuracy_trained")}
    assert len(seeds) == 1  # the run's own seed, as parity's first
    parity_first = {t.user_attrs["accuracy_group"] for t in trials
                    if t.user_attrs["phase"] == "parity" and t.user_attrs["seed_index"] == 0}
    for t in table:
        a = t.user_attrs
        assert a["state"] == "complete" and a["accuracy_trained"] and "test_accuracy" in a["metrics"], a
        assert (a["block"], a["seed_index"]) == (-1, 0) and a["accuracy_group"] not in parity_first
    stored = [r for r in records.load(optuna.load_study(
        study_name="whole_table:grid:cpu", storage=f"sqlite:///{results / 'whole_table' / 'optuna.db'}"))
        if r.complete]
    assert len({r.accuracy_group for r in stored}) == 4 and all(r.accuracy is not None for r in stored)
    rows = list(csv.DictReader((results / "whole_table" / "grid-cpu.csv").open()))
    assert all(r["test acc %"] for r in rows if r["state"] == "complete"), rows
    client = MlflowClient(tracking_uri=f"sqlite:///{results / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("ablate/whole_table")
    runs = [r for r in client.search_runs([experiment.experiment_id], max_results=1000)
            if "mlflow.parentRunId" in r.data.tags and r.data.tags["ablate.state"] == "complete"]
    assert runs and all("test_accuracy" in r.data.metrics for r in runs)
