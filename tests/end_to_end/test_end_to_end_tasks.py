"""`ablate run` on studies that are not image classification: a byte-level transformer on the King James
Bible (tokens/s, next-byte accuracy, bits per byte), and a user's own loss function named by import path."""
from __future__ import annotations

from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from tiny_mnist import tiny_text

from ablate.cli import main
from ablate.render import terminal
from ablate.workload import data

STUDIES = Path(__file__).resolve().parents[1] / "studies"
KJV = data.data_root() / "kjv" / "kjv.txt"


def _children(results: Path, name: str):
    client = MlflowClient(tracking_uri=f"sqlite:///{results / 'mlflow.db'}")
    experiment = client.get_experiment_by_name(f"ablate/{name}")
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    return [r for r in runs if "mlflow.parentRunId" in r.data.tags]


@pytest.mark.slow
@pytest.mark.skipif(not KJV.is_file(), reason=f"the KJV corpus is not at {KJV} (set ABLATE_DATA_DIR)")
def test_the_tiny_transformer_study_runs_end_to_end_in_tokens_per_second(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(terminal, "live", lambda stream: True)  # the bar a terminal redraws, not a log's plain line
    assert main(["run", str(STUDIES / "tiny_gpt.yaml"), "--device", "cpu", "--results", str(tmp_path)]) == 0
    out = capsys.readouterr()
    assert "tokens/s" in out.out + out.err
    # The progress line says what the running trial does; library chatter goes to the log file instead.
    assert "measured |" in out.err and "timed window 2 of 3" in out.err and "training for accuracy" in out.err
    log = (tmp_path / "tiny_gpt" / "ablate.log").read_text()
    assert "Creating initial MLflow database tables" in log
    assert "Creating initial MLflow database tables" not in out.out + out.err and " INFO " not in out.out + out.err
    assert max(len(line) for line in out.out.split("results table:")[0].splitlines()[-12:]) <= 100
    children = _children(tmp_path, "tiny_gpt")
    complete = [r for r in children if r.data.tags["ablate.state"] == "complete"]
    assert len(complete) == len(children) > 4  # every combination, blocks of baselines, a race
    for run in complete:
        assert run.data.tags["ablate.task"] == "next_token" and run.data.tags["ablate.throughput_unit"] == "tokens/s"
        m = run.data.metrics
        if "test_accuracy" in m:  # accuracy only where it decides: a group never trained has none
            assert 0 < m["test_accuracy"] <= 100 and m["test_bits_per_byte"] > 0
            assert m["test_bits_per_byte"] == pytest.approx(m["test_loss"] / 0.6931471805599453)
        assert "mfu" not in m  # no known peak for a CPU: no figure rather than a guess
    trained = [r for r in complete if r.data.tags.get("ablate.accuracy_from") == r.data.tags["ablate.trial_number"]]
    assert trained and all("target_reached" in r.data.metrics for r in trained)
    assert all(0 < r.data.metrics["test_accuracy"] <= 100 for r in trained)
    report = (tmp_path / "tiny_gpt" / "report" / "grid" / "report.md").read_text()
    assert "| tokens/s |" in report and "sequences of 32 tokens" in report and "samples/s" not in report
    assert "peak MB (vs baseline)" in report and "peak resident set size" in report  # what checkpointing saves
    assert "MFU" not in report  # no peak known for this CPU


@pytest.mark.slow
def test_a_users_own_loss_function_is_trained_and_judged_on_its_held_out_loss(tmp_path, mnist):
    study = tmp_path / "own_loss.yaml"
    # tiny.yaml on a small CNN (tests/support/tiny_mnist.py): a loss is a loss on any model, in a fraction of the time.
    study.write_text(tiny_text()
                     .replace("dataset: mnist\n", "dataset: mnist\ntask: custom_tasks:nll\n")
                     .replace("target_accuracy: 99.0", "target_loss: 0.5")
                     .replace("space:\n  num_workers: [off, {num_workers: {n: 1}}]\n  pin_memory: [off, pin_memory]\n",
                              "space:\n"))
    results = tmp_path / "results"
    assert main(["run", str(study), "--device", "cpu", "--results", str(results)]) == 0
    children = _children(results, "own_loss")
    assert children and all(r.data.tags["ablate.state"] == "complete" for r in children)
    for run in children:
        assert run.data.tags["ablate.task"] == "custom_tasks:nll"
        assert "test_accuracy" not in run.data.metrics and run.data.metrics["test_loss"] > 0
        assert "accuracy parity is not judged" in run.data.tags["ablate.accuracy_note"]
    assert any(r.data.metrics.get("target_loss") == 0.5 for r in children)
