"""`ablate compare A B`: two studies' summaries set side by side - a study against itself moves nothing, a row made
to move reads moved and sets the exit status a CI job reads, two different workloads are refused in one line
with nothing written, unless paired anyway, and the change is a run in B's MLflow store linking both studies'
parent runs, with the address of MLflow's compare-runs page on them."""
from __future__ import annotations

import copy
import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest
from messages import LINE, one_message

from ablate.cli import main
from ablate.stats import changes
from ablate.tracking.change_run import EXPERIMENT_PREFIX, SIDE_TAG
from ablate.tracking.tracker import tracking_uri

SUMMARY = Path("tiny") / "report" / "grid" / "summary.json"


@pytest.fixture(scope="module")
def written(tiny_study_run) -> dict[str, Any]:
    """The session's tiny study's summary.json, as its run wrote it."""
    return json.loads((tiny_study_run[0] / SUMMARY).read_text())


def _save(summary: dict[str, Any], folder: Path) -> Path:
    path = folder / SUMMARY
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(summary))
    return folder


def _compare(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = main(["compare", *argv])
    except SystemExit as stopped:  # argparse refuses a bad option this way, as `ablate` exits on it
        code = stopped.code
    out, err = capsys.readouterr()
    return code, out, err


def test_a_summary_carries_what_a_change_needs(written):
    assert written["workload"]["model"] and written["workload"]["budget"]["train_samples"] > 0
    assert {"python", "threads", "torch", "commit"} <= set(written["machine"])
    level = written["baseline_level"]
    assert level["blocks"] >= 2 and level["log_se"] > 0
    assert math.exp(level["log"]) == pytest.approx(level["throughput"])


def test_a_study_against_itself_moves_nothing_and_writes_the_page_and_json(tiny_study_run, tmp_path, capsys):
    results = shutil.copytree(tiny_study_run[0], tmp_path / "results")  # the change is logged to its store
    code, out, _ = _compare(capsys, str(results), str(results / SUMMARY), "--out", str(tmp_path / "c"),
                            "--fail-above", "1")
    assert code == 0, out
    assert all(len(line) <= LINE or " " not in line.strip() for line in out.splitlines()), out
    found = json.loads((tmp_path / "c" / "change.json").read_text())
    verdicts = {r["verdict"] for r in found["rows"]}
    assert changes.MOVED not in verdicts and verdicts <= {changes.SAME, changes.NOT_SHOWN}
    assert any(r["row"] == changes.BASELINE_ABSOLUTE for r in found["rows"])
    assert (tmp_path / "c" / "change.md").exists() and (tmp_path / "c" / "change.png").exists()
    assert str(tmp_path / "c" / "change.json") in [line.strip() for line in out.splitlines()]


def test_a_row_made_to_move_reads_moved_and_fails_the_threshold(written, tmp_path, capsys):
    b = copy.deepcopy(written)
    moved = next(e for e in b["speedups"] if e["combination"] != "baseline" and e["log_se"])
    moved["speedup"] *= math.exp(8 * moved["log_se"] + 0.3)  # far beyond its noise, and by more than 30%
    a_dir, b_dir = _save(written, tmp_path / "a"), _save(b, tmp_path / "b")
    code, out, _ = _compare(capsys, str(a_dir), str(b_dir), "--fail-above", "20", "--out", str(tmp_path / "c"))
    assert code == 1, out
    rows = {r["row"]: r for r in json.loads((tmp_path / "c" / "change.json").read_text())["rows"]}
    assert rows[moved["combination"]]["verdict"] == changes.MOVED
    assert [r for r, v in rows.items() if v["verdict"] == changes.MOVED] == [moved["combination"]]
    code, _, _ = _compare(capsys, str(a_dir), str(b_dir), "--out", str(tmp_path / "d"))
    assert code == 0  # moved, but no threshold asked for: the exit status is for CI jobs that set one


def test_different_workloads_are_refused_in_one_line_with_nothing_written_unless_paired_anyway(written, tmp_path,
                                                                                                capsys):
    b = copy.deepcopy(written)
    b["workload"]["budget"]["train_samples"] *= 2
    b["device"] = "cuda:0"
    a_dir, b_dir = _save(written, tmp_path / "a"), _save(b, tmp_path / "b")
    code, out, err = _compare(capsys, str(a_dir), str(b_dir), "--out", str(tmp_path / "c"))
    said = one_message(err)
    assert code == 2 and not out and "budget.train_samples" in said and "device type" in said
    assert "--pair-anyway" in said and not (tmp_path / "c").exists()
    code, out, _ = _compare(capsys, str(a_dir), str(b_dir), "--out", str(tmp_path / "c"), "--pair-anyway")
    assert code == 0 and "budget.train_samples" in out
    assert json.loads((tmp_path / "c" / "change.json").read_text())["paired_anyway"]


def test_a_summary_written_before_its_workload_pairs_by_the_study_files_hash(written, tmp_path, capsys):
    old = {k: v for k, v in written.items() if k not in ("workload", "machine", "baseline_level")}
    other = {**old, "study_hash": "0" * 16}
    a_dir, b_dir, c_dir = (_save(s, tmp_path / n) for s, n in ((old, "a"), (old, "b"), (other, "c")))
    assert _compare(capsys, str(a_dir), str(b_dir), "--out", str(tmp_path / "o"))[0] == 0
    code, _, err = _compare(capsys, str(a_dir), str(c_dir), "--out", str(tmp_path / "p"))
    assert code == 2 and "study file" in one_message(err) and not (tmp_path / "p").exists()


@pytest.mark.parametrize("argv, says", [
    (["{empty}", "{empty}"], "no report's summary.json"),
    (["{missing}", "{empty}"], "no such file or folder"),
    (["{empty}", "{empty}", "--margin", "0"], "above 0 and below 100"),
    (["{empty}", "{empty}", "--fail-above", "ten"], "not a percentage"),
])
def test_bad_input_is_one_line_exit_2(tmp_path, capsys, argv, says):
    (tmp_path / "empty").mkdir()
    names = {"empty": tmp_path / "empty", "missing": tmp_path / "missing"}
    code, out, err = _compare(capsys, *(a.format(**names) for a in argv))
    assert code == 2 and not out and says in one_message(err)


def test_the_change_is_a_run_in_b_s_store_linking_both_studies_parent_runs(tiny_study_run, written, tmp_path,
                                                                          capsys):
    from mlflow.tracking import MlflowClient

    store = shutil.copytree(tiny_study_run[0], tmp_path / "results")
    client = MlflowClient(tracking_uri(store))
    a_run = written["mlflow_parent_run"]
    b_run = client.create_run(client.get_run(a_run).info.experiment_id, run_name="tiny again").info.run_id
    b_summary = store / "tiny" / "report" / "again" / "summary.json"  # a second report in the same results folder
    b_summary.parent.mkdir(parents=True)
    b_summary.write_text(json.dumps({**written, "mlflow_parent_run": b_run}))
    code, out, err = _compare(capsys, str(store / SUMMARY), str(b_summary), "--out", str(tmp_path / "c"))
    assert code == 0, err
    experiment = client.get_experiment_by_name(f"{EXPERIMENT_PREFIX}tiny")
    [run] = client.search_runs([experiment.experiment_id])
    assert run.data.tags[SIDE_TAG.format(side="a")] == a_run and run.data.tags[SIDE_TAG.format(side="b")] == b_run
    assert run.data.metrics["rows_moved"] == 0 and run.data.metrics["headline_changed"] == 0
    assert "change.json" in {f.path for f in client.list_artifacts(run.info.run_id)}
    lines = out.splitlines()
    url = lines[lines.index(next(line for line in lines if line.startswith("in MLflow"))) + 1].strip()
    runs = json.loads(url.split("runs=")[1].split("&")[0])
    assert runs == [a_run, b_run, run.info.run_id] and "#/compare-runs?" in url
    assert "another store" not in out and "no MLflow run" not in out


def test_a_side_whose_parent_run_is_in_another_store_is_named_not_linked(written, tmp_path, capsys):
    a_dir, b_dir = _save(written, tmp_path / "a"), _save({**written, "mlflow_parent_run": None}, tmp_path / "b")
    code, out, _ = _compare(capsys, str(a_dir), str(b_dir), "--out", str(tmp_path / "c"))
    assert code == 0 and (tmp_path / "b" / "mlflow.db").exists()  # B's results folder holds the change's run
    assert "study A: its parent run" in out and "in another store" in out
    assert "study B: its summary recorded no MLflow run" in out
