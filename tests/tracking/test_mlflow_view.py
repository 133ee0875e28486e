"""The MLflow view a run prints: a real `ablate ui` (MLflow's own server) on the run's store answers the printed URL,
and what the view reads (experiment tags, the shared view, run names, tags, metrics) is there."""
from __future__ import annotations

import dataclasses
import json
import re
import socket
import sys
import urllib.request
from pathlib import Path

import pytest
from messages import one_message
from mlflow.tracking import MlflowClient

from ablate.cli import main
from ablate.config import study
from ablate.stats.parity import Parity
from ablate.tracking import view

from servers import free_port, serving

LABELS = {"baseline", "num_workers(n=1)", "amp(dtype=bf16)", "num_workers(n=1) + amp(dtype=bf16)", "pin_memory",
          "num_workers(n=1) + pin_memory", "pin_memory + amp(dtype=bf16)",
          "num_workers(n=1) + pin_memory + amp(dtype=bf16)"}
INTERVAL = re.compile(r"^x\d+\.\d\d \[\d+\.\d\d, \d+\.\d\d\]$")
ANSWER_COLUMNS = ["tags.`speed-up`", "metrics.`test_accuracy`", "tags.`accuracy change`", "tags.`parity`",
                  "tags.`ablate.state`"]
PARITY_CODES = {"ok": 1.0, "uncertain": 0.0, "uncertain, probably below": -0.5, "below": -1.0}  # docs/results.md


@pytest.fixture(scope="module")
def run(tiny_study_run) -> tuple[Path, str]:
    """The tiny study run into its own --results folder: the folder and what the run printed (the session's one run,
    tests/conftest.py, shared with tests/end_to_end/test_end_to_end.py)."""
    return tiny_study_run


def _printed(output: str) -> tuple[str, str]:
    """The UI command and the URL the run's pointer line names."""
    # `run `COMMAND`, then open` where it fits 100 columns, else the command on a line of its own (a long --results).
    found = re.search(r"^the answer in MLflow's UI: run(?: `(ablate ui[^`]*)`, then |\n  (ablate ui .*)\nthen )open\n"
                      r"  (http://\S+)$", output, re.M)
    assert found, output
    return found.group(1) or found.group(2), found.group(3)


def test_the_pointer_names_the_command_that_opens_this_runs_store(run):
    results, output = run
    command, url = _printed(output)
    assert command == f"ablate ui --results {results}"
    assert re.fullmatch(r"http://127\.0\.0\.1:5000/#/experiments/\d+/runs\?workflowType=machine_learning"
                        r"&viewStateShareKey=ablate", url)


@pytest.mark.slow
def test_a_real_mlflow_ui_on_the_store_answers_the_url_with_one_row_per_combination_fastest_first(run, tmp_path):
    results, output = run
    command, url = _printed(output)
    port = free_port()
    argv = [sys.executable, "-m", "ablate", *command.split()[1:], "--port", str(port)]
    with serving(argv, port, tmp_path / "ui.log") as uri:
        page = url.replace("http://127.0.0.1:5000", uri)
        assert f"ablate/tiny: {page}\n" in (tmp_path / "ui.log").read_text()  # `ablate ui` names it on its port
        with urllib.request.urlopen(page, timeout=30) as answer:
            assert answer.status == 200 and b"<html" in answer.read().lower()
        experiment_id = re.search(r"/experiments/(\d+)/", page).group(1)
        client = MlflowClient(tracking_uri=uri)
        experiment = client.get_experiment(experiment_id)
        assert experiment.name == "ablate/tiny"
        assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"  # not the GenAI view
        state = json.loads(experiment.tags["mlflow.sharedViewState.ablate"])  # what viewStateShareKey=ablate opens
        assert state["orderByKey"] == "metrics.`speedup`" and state["orderByAsc"] is False
        assert state["columnOrder"][1:] == state["selectedColumns"]
        assert state["selectedColumns"][:5] == ANSWER_COLUMNS
        assert state["selectedColumns"][5:] == ["params.`dim.num_workers`", "params.`dim.pin_memory`",
                                                "params.`dim.amp`"]

        charts = {c["type"]: c for c in state["compareRunCharts"]}  # the chart view: compareRunsMode=CHART
        assert charts["PARALLEL"]["selectedParams"] == ["dim.num_workers", "dim.pin_memory", "dim.amp"]
        assert charts["PARALLEL"]["selectedMetrics"] == ["test_accuracy", "speedup"]
        assert charts["BAR"]["metricKey"] == "speedup"
        assert (charts["SCATTER"]["xaxis"]["key"], charts["SCATTER"]["yaxis"]["key"]) == ("speedup", "accuracy_change")
        assert {c["metricSectionId"] for c in charts.values()} == {s["uuid"] for s in state["compareRunSections"]}
        with urllib.request.urlopen(page + "&compareRunsMode=CHART", timeout=30) as answer:
            assert answer.status == 200

        rows = client.search_runs([experiment_id], filter_string=state["searchFilter"],
                                  order_by=["metrics.speedup DESC"])
        assert sorted(r.info.run_name for r in rows) == sorted(LABELS)  # one row per combination, named after it
        complete = [r for r in rows if r.data.tags["ablate.state"] == "complete"]
        assert len(complete) == 4 and rows[:4] == complete  # measured ones first, fastest first
        speedups = [r.data.metrics["speedup"] for r in complete]
        assert speedups == sorted(speedups, reverse=True)
        for r in complete:
            m, tags = r.data.metrics, r.data.tags
            assert m["speedup_low"] <= m["speedup"] <= m["speedup_high"]  # full precision: the data
            assert INTERVAL.match(tags["speed-up"]), tags["speed-up"]  # rounded: the display
            assert tags["speed-up"].startswith(f"x{m['speedup']:.2f}")
            # Every group trained (the whole table: those the answer did not need, once after it).
            assert tags["accuracy change"] == f"{m['accuracy_change']:+.2f} pts"
            # The verdict with its interval; which verdict depends on the run's drawn training seeds
            # (ablate.store.seeds).
            assert re.fullmatch(r"(ok|below|uncertain) \[[+-]\d+\.\d\d, [+-]\d+\.\d\d\] \(\d+ seeds?\)", tags["parity"])
            assert m["parity_verdict"] == PARITY_CODES[tags["parity"].split(" [")[0]]
            for column in state["selectedColumns"]:
                kind, key = column.split(".", 1)
                assert key.strip("`") in {"params": r.data.params, "metrics": m, "tags": tags}[kind], column
        baseline = next(r for r in complete if r.info.run_name == "baseline")
        assert baseline.data.tags["speed-up"] == "x1.00 [1.00, 1.00]"
        assert all(r.data.tags["ablate.state"] == "skipped" and "speed-up" not in r.data.tags for r in rows[4:])
        # Measurements that are not their combination's row keep their own names and stay out of the view.
        others = client.search_runs([experiment_id], filter_string="tags.`ablate.row` = 'measurement'")
        assert others and all(re.search(r" · (block \d+|accuracy seed \d+) · #\d+$", r.info.run_name) for r in others)


def _store(results: Path) -> tuple[MlflowClient, str, dict]:
    """The run's store: its client, the study's experiment and the view it opens on."""
    client = MlflowClient(tracking_uri=f"sqlite:///{results / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("ablate/tiny")
    return client, experiment.experiment_id, json.loads(experiment.tags["mlflow.sharedViewState.ablate"])


def test_the_view_sorts_by_test_accuracy_in_one_click_and_charts_it_against_the_speedup(run):
    client, experiment_id, state = _store(run[0])
    assert state["selectedColumns"][:5] == ANSWER_COLUMNS and state["columnOrder"][1:] == state["selectedColumns"]
    # A column header's click sorts on its key: MLflow's search takes the column's key as its order.
    rows = client.search_runs([experiment_id], filter_string=state["searchFilter"],
                              order_by=["metrics.`test_accuracy` DESC"])
    accuracies = [r.data.metrics["test_accuracy"] for r in rows if "test_accuracy" in r.data.metrics]
    assert len(accuracies) >= 2 and accuracies == sorted(accuracies, reverse=True)
    assert [r.data.metrics.get("test_accuracy") for r in rows[:len(accuracies)]] == accuracies  # the rest after
    # MLflow 3.17's parallel-coordinates chart draws the runs that carry every param and metric it plots.
    (parallel,) = (c for c in state["compareRunCharts"] if c["type"] == "PARALLEL")
    assert parallel["selectedMetrics"] == ["test_accuracy", "speedup"]  # coloured by the last axis: the speed-up
    drawn = [r for r in rows if set(parallel["selectedParams"]) <= set(r.data.params)
             and set(parallel["selectedMetrics"]) <= set(r.data.metrics)]
    measured = [r for r in rows if r.data.tags["ablate.state"] == "complete" and "test_accuracy" in r.data.metrics]
    assert len(drawn) >= 2 and drawn == measured


def test_every_run_of_a_combination_with_a_verdict_carries_it_as_a_number(run):
    client, experiment_id, _ = _store(run[0])
    runs = [r for r in client.search_runs([experiment_id], max_results=1000) if "mlflow.parentRunId" in r.data.tags]
    judged = [r for r in runs if re.match(r"(ok|below|uncertain)\b", r.data.tags.get("parity", ""))]
    assert judged
    for r in judged:
        assert r.data.metrics["parity_verdict"] == PARITY_CODES[r.data.tags["parity"].split(" [")[0]]
    assert all("parity_verdict" not in r.data.metrics for r in runs if r not in judged)
    # Filtering on it in MLflow's search box finds those the race could recommend.
    eligible = client.search_runs([experiment_id], "metrics.parity_verdict >= 0", max_results=1000)
    assert {r.info.run_id for r in eligible} == {r.info.run_id for r in judged if r.data.metrics["parity_verdict"] >= 0}


def test_a_study_that_trains_nothing_shows_no_accuracy_column_and_charts_the_speedup_alone(tiny_study_file):
    loaded = study.load(str(tiny_study_file), "cpu")
    assert view.quality_metric(loaded) == "test_accuracy"
    quiet = dataclasses.replace(loaded, budget=dataclasses.replace(loaded.budget, throughput_only=True))
    assert view.quality_metric(quiet) is None
    state = view.shared_state(["amp"], view.quality_metric(quiet))
    assert not [c for c in state["selectedColumns"] if c.startswith("metrics.")]
    (parallel,) = (c for c in state["compareRunCharts"] if c["type"] == "PARALLEL")
    assert parallel["selectedMetrics"] == ["speedup"]
    own_loss = dataclasses.replace(loaded, task_name="custom_tasks:nll", task_options=())
    assert view.quality_metric(own_loss) == "test_loss"  # a loss task has no accuracy: its held-out loss


def test_a_verdict_sorts_by_how_safe_the_accuracy_is():
    def verdict(name: str, change: float) -> Parity:
        return Parity(name, change, change - 1, change + 1, 3, 0.5, 4.0, tolerance=1.0)

    codes = [view.parity_code(verdict(*v)) for v in
             (("ok", 0.0), ("uncertain", 0.0), ("uncertain", -1.5), ("below", -3.0))]
    assert codes == [PARITY_CODES[v] for v in ("ok", "uncertain", "uncertain, probably below", "below")]


def test_compare_view_plots_the_dimensions_first(run):
    """MLflow's Compare view plots the first three differing params in sorted order: the study's dimensions."""
    results, _ = run
    client = MlflowClient(tracking_uri=f"sqlite:///{results / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("ablate/tiny")
    rows = client.search_runs([experiment.experiment_id], filter_string="tags.`ablate.row` = 'combination'")
    params = sorted({k for r in rows for k in r.data.params})
    assert params[:3] == ["dim.amp", "dim.num_workers", "dim.pin_memory"]
    assert all(k.startswith("strategy.") for k in params[3:]) and "strategy.amp.dtype" in params


def test_ui_on_a_busy_port_is_one_line_and_exit_2(run, capsys):
    results, _ = run
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        code = main(["ui", "--results", str(results), "--port", str(busy.getsockname()[1])])
    err = capsys.readouterr().err
    said = one_message(err)  # one message, wrapped at 100 columns
    assert code == 2 and "in use" in said and "--port" in said


def test_ui_without_a_store_is_one_line_and_creates_nothing(tmp_path, capsys):
    code = main(["ui", "--results", str(tmp_path / "none")])
    err = capsys.readouterr().err
    assert code == 2 and "no MLflow store" in one_message(err)
    assert not (tmp_path / "none").exists()


def test_ui_on_a_tracking_server_says_to_open_it_instead(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")
    code = main(["ui", "--results", str(tmp_path)])
    err = capsys.readouterr().err
    said = one_message(err)
    assert code == 2 and "http://127.0.0.1:9" in said and "web browser" in said
