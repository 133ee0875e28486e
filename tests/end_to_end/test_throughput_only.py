"""A study on stand-in data measures throughput and says everywhere that accuracy was not measured."""
from __future__ import annotations

import csv
from pathlib import Path

import optuna
import pytest
from mlflow.tracking import MlflowClient

from ablate.cli import main

STUDY = Path(__file__).resolve().parents[1] / "studies" / "stand_in.yaml"


@pytest.mark.slow
def test_accuracy_not_measured_is_said_in_the_table_the_report_and_mlflow(tmp_path, capsys):
    assert main(["run", str(STUDY), "--device", "cpu", "--results", str(tmp_path)]) == 0
    trials = optuna.load_study(study_name="stand_in:grid:cpu",
                               storage=f"sqlite:///{tmp_path / 'stand_in' / 'optuna.db'}").get_trials()
    assert {t.user_attrs["combination"] for t in trials} == {"baseline", "amp(dtype=bf16)"}
    for t in trials:
        assert t.user_attrs["state"] == "complete" and "test_accuracy" not in t.user_attrs["metrics"]
        assert t.user_attrs["accuracy_note"] == "random stand-in images (test)"
        run = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}").get_run(t.user_attrs["mlflow_run_id"])
        assert run.data.tags["ablate.accuracy_note"] == "random stand-in images (test)"
    rows = list(csv.DictReader((tmp_path / "stand_in" / "grid-cpu.csv").open()))
    assert all(r["test acc %"] == "" and r["reason"].startswith("accuracy not measured") for r in rows)
    report = (tmp_path / "stand_in" / "report" / "grid" / "report.md").read_text()
    assert "**Accuracy was not measured**: random stand-in images (test)" in report
    # The winner depends on the CPU's bf16 speed; either way the accuracy line says what was not measured.
    said = next(line for line in report.splitlines() if line.startswith("- **Is accuracy safe?**"))
    assert "random stand-in images (test)" in said
    assert ("not measured: the answer is on speed alone" in said) != ("**Keep your loop as it is**" in report)
    assert "stack = compose(" in report  # still recommends the fastest
