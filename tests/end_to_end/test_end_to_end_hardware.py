"""End to end on a CPU: what this machine cannot run is recorded as skipped with the strategy's reason."""
from __future__ import annotations

import csv
from pathlib import Path

import optuna
import pytest
from mlflow.tracking import MlflowClient

from ablate.cli import main
from ablate.workload import data

STUDY = Path(__file__).resolve().parents[1] / "studies" / "tiny_hardware.yaml"
REASONS = {  # the first member of the stack that cannot run names itself and why
    "tf32": "TF32: TensorFloat-32 is CUDA-only; the device here is cpu",
    "graph": "CUDAGraphs: CUDA graph capture is CUDA-only; the device here is cpu",
}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    try:
        data.load("mnist")
    except data.DataUnavailable as error:
        pytest.skip(f"MNIST not available: {error}")
    folder = tmp_path_factory.mktemp("results")
    assert main(["run", str(STUDY), "--device", "cpu", "--results", str(folder)]) == 0
    return folder


@pytest.mark.slow
def test_cpu_runs_what_it_can_and_skips_the_rest_with_reasons(results):
    storage = f"sqlite:///{results / 'tiny_hardware' / 'optuna.db'}"
    trials = optuna.load_study(study_name="tiny_hardware:grid:cpu", storage=storage).get_trials()
    assert len({t.user_attrs["combination"] for t in trials}) == 8
    complete = [t for t in trials if t.user_attrs["state"] == "complete"]
    # The data dimension runs on a CPU: DeviceResidentData went through the trial's make_loader hook.
    assert {t.params["data"] for t in complete} == {"device_resident_data", "off"}
    assert all(t.params["tf32"] == "off" and t.params["graph"] == "off" for t in complete)
    for t in trials:
        if t.user_attrs["state"] != "complete":
            assert t.user_attrs["state"] == "skipped"
            first = "tf32" if t.params["tf32"] != "off" else "graph"
            assert t.user_attrs["reason"] == REASONS[first]
    # Same batches as the DataLoader, so the same numbers: one accuracy group, trained once.
    assert len({t.user_attrs["accuracy_group"] for t in complete}) == 1


@pytest.mark.slow
def test_the_table_mlflow_and_report_carry_the_reasons(results):
    rows = list(csv.DictReader((results / "tiny_hardware" / "grid-cpu.csv").open()))
    skipped = [r for r in rows if r["reason"]]
    assert len(skipped) == 6 and {r["reason"] for r in skipped} == set(REASONS.values())
    client = MlflowClient(tracking_uri=f"sqlite:///{results / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("ablate/tiny_hardware")
    runs = client.search_runs([experiment.experiment_id], max_results=100)
    tagged = [r for r in runs if r.data.tags.get("ablate.state") == "skipped"]
    assert {r.data.tags["ablate.reason"] for r in tagged} == set(REASONS.values())
    report = (results / "tiny_hardware" / "report" / "grid" / "report.md").read_text()
    assert all(reason in report for reason in REASONS.values())
