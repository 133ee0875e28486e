"""`ablate compare A B`: two studies' summaries set side by side - a study against itself moves nothing, a row made
to move reads moved and sets the exit status a CI job reads, and two different workloads are refused in one line
with nothing written, unless paired anyway."""
from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import pytest
from messages import LINE, one_message

from ablate.cli import main
from ablate.stats import changes

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
    results = tiny_study_run[0]
    code, out, _ = _compare(capsys, str(results), str(results / SUMMARY), "--out", str(tmp_path / "c"),
                            "--fail-above", "1")
    assert code == 0, out
    assert all(len(line) <= LINE or " " not in line.strip() for line in out.splitlines()), out
    found = json.loads((tmp_path / "c" / "change.json").read_text())
    verdicts = {r["verdict"] for r in found["rows"]}
    assert changes.MOVED not in verdicts and verdicts <= {changes.SAME, changes.NOT_SHOWN}
    assert any(r["row"] == changes.BASELINE_ABSOLUTE for r in found["rows"])
    assert (tmp_path / "c" / "change.md").exists() and (tmp_path / "c" / "change.png").exists()
    assert str(tmp_path / "c" / "change.json") in out.splitlines()[-1]


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
