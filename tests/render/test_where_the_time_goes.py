"""Where the time goes, on every surface: the report's section right after the answer with its picture, summary.json's
diagnosis and each combination's phase shares and energy, the MLflow parent run's picture and metrics, the line under
the answer on the terminal; and a study stored without profiles still renders, with one line in their place."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest
from matplotlib.image import imread
from mlflow.tracking import MlflowClient
from profiled import BOTH, INPUT_BOUND, PINNED, WORKERS, records, study_file

from ablate.config.choices import BASELINE
from ablate.render import explained, plots, report
from ablate.render.results import NOT_COUNTED
from ablate.render.terminal import LINE
from ablate.stats import diagnosis
from ablate.stats.answer.comparison import compare
from ablate.stats.answer.explained import Explanation
from ablate.stats.answer.findings import analyse_all
from ablate.stats.diagnosis import WORDS
from ablate.store.study_record import StudyRecord
from ablate.tracking import view
from ablate.tracking.parent_run import write_reports
from ablate.tracking.tracker import Tracker
from ablate.trial.machine import describe


@pytest.fixture
def study(tmp_path):
    return study_file(tmp_path)


def _built(study, folder, **kwargs) -> report.Report:
    (built,) = report.build(study, analyse_all(study, compare(records(**kwargs), 0.5)), "grid", folder / "report")
    return built


def test_the_report_explains_the_answer_right_after_it_with_its_picture(study, tmp_path):
    built = _built(study, tmp_path)
    text = built.markdown.read_text()
    assert text.index("## The answer") < text.index("## Where the time goes") < text.index(
        "## Speed-up of every combination")
    section = text[text.index("## Where the time goes"):text.index("## Speed-up of every combination")]
    assert "waiting for data 52%, the copy to the device 1%" in section and "x1.02 the timed windows'" in section
    assert f"| {PINNED} | copy | 1% | x1.01 | unlikely to help |" in section
    assert "| as predicted, within its ceiling |" in section
    assert f"| {WORKERS} | data | 52% | x2.08 | can help | x1.90 [" in section
    pick = built.recommended.combination
    assert f"- **recommended**, {pick}: waiting for data 52% -> 4% of the step" in section
    # Pinning changed no phase by more than the floor: said so, no phase named.
    assert f"- {PINNED}: no phase fell by more than 5% of the step beyond what the rest of it did" in section
    assert "![each combination's step split into phases](phases.png)" in section
    assert (built.folder / "phases.png").is_file() and built.folder / "phases.png" in built.plots
    html = built.html.read_text()
    assert '<img alt="each combination\'s step split into phases" src="data:image/png;base64,' in html


def test_the_terminal_says_where_the_recommended_stacks_time_went_in_one_short_line(study, tmp_path):
    built = _built(study, tmp_path)
    lines = built.summary().splitlines()
    moved = [line for line in lines if "where the time went" in line]
    assert moved == ["  where the time went: waiting for data 52% -> 4% of the step"]
    report = next(i for i, line in enumerate(lines) if line.startswith("report ("))
    assert lines.index(moved[0]) == report - 1  # the answer's last line, before where the report is
    assert all(len(line) <= LINE for line in moved)


@pytest.mark.parametrize("said", [diagnosis.NOTHING_MOVED, *(f"{w} 100% -> 100% of the step" for w in WORDS.values())])
def test_every_line_the_terminal_can_get_fits_its_width(said):
    found = Explanation(None, (), (), f"{BOTH}: {said}", None)
    assert len(f"  {explained.terminal_line(found, BOTH)}") <= LINE


def test_summary_json_carries_the_diagnosis_and_each_combinations_phase_shares_and_energy(study, tmp_path):
    summary = json.loads(_built(study, tmp_path).summary_json.read_text())
    d = summary["diagnosis"]
    assert d["profiled"] and d["baseline"]["phase_shares"]["data"] == pytest.approx(INPUT_BOUND["data"])
    assert d["baseline"]["profile_cost"] == pytest.approx(1.02)
    pinned = next(t for t in d["techniques"] if t["technique"] == PINNED)
    assert pinned["unlikely"] and pinned["alone"] == PINNED and pinned["check"] == "as predicted, within its ceiling"
    assert d["recommended"].endswith("waiting for data 52% -> 4% of the step")
    rows = {e["combination"]: e for e in summary["speedups"]}
    assert rows[WORKERS]["phase_shares"]["data"] == pytest.approx(0.04)
    assert all(e["energy_ratio"] == NOT_COUNTED for e in rows.values())
    assert all("phase_shares" in m and "energy_ratio" in m for m in summary["recommendation"]["members"])


def test_energy_per_sample_reaches_summary_json_the_report_and_mlflows_comparisons(study, tmp_path):
    built = _built(study, tmp_path, energy=True)
    summary = json.loads(built.summary_json.read_text())
    rows = {e["combination"]: e for e in summary["speedups"]}
    assert rows[WORKERS]["energy_ratio"] == pytest.approx(1.1 / 2.0, rel=0.01)
    assert rows[WORKERS]["energy_low"] < rows[WORKERS]["energy_ratio"] < rows[WORKERS]["energy_high"]
    member = next(m for m in summary["recommendation"]["members"] if m["combination"] in (WORKERS, BOTH))
    assert member["energy_ratio"] == pytest.approx(0.55, rel=0.01)
    assert "energy/sample vs baseline (95% CI)" in built.markdown.read_text()
    (compared,) = compare(records(energy=True), 0.5)
    row = view.rows([compared])[(compared.device, WORKERS)]
    assert row.metrics["energy_ratio"] == pytest.approx(0.55, rel=0.01) and "energy_ratio_low" in row.metrics
    assert row.tags[view.ENERGY].startswith("x0.55 [")
    (uncounted,) = compare(records(), 0.5)
    row = view.rows([uncounted])[(uncounted.device, WORKERS)]
    assert row.tags[view.ENERGY] == NOT_COUNTED and "energy_ratio" not in row.metrics


def test_a_study_stored_without_profiles_still_renders_with_one_line_and_no_picture(study, tmp_path):
    _built(study, tmp_path)  # an earlier report's picture in the same folder must go with it
    built = _built(study, tmp_path, profiled=False)
    text = built.markdown.read_text()
    section = text[text.index("## Where the time goes"):text.index("## Speed-up of every combination")]
    assert section.strip().splitlines()[1:] == ["", explained.NOT_PROFILED]
    assert not (built.folder / "phases.png").exists() and len(built.plots) == 3
    summary = json.loads(built.summary_json.read_text())
    assert summary["diagnosis"]["profiled"] is False and summary["diagnosis"]["baseline"] is None
    assert all(e["phase_shares"] is None for e in summary["speedups"])
    assert "where the time went" not in built.summary()


def test_the_picture_and_the_diagnosis_are_logged_to_the_mlflow_parent_run(study, tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)  # the local store in tmp_path
    tracker = Tracker(study, describe("cpu"), tmp_path)
    parent = tracker.start_parent("grid")
    assert parent and not tracker.offline
    found = analyse_all(study, compare(records(), 0.5), StudyRecord(parent_run_id=parent))
    (built,) = write_reports(study, found, "grid", tmp_path, tracker, parent)
    client = MlflowClient(tracking_uri=tracker.uri)
    logged = {f.path for f in client.list_artifacts(parent, f"report/{built.folder.name}")}
    assert f"report/{built.folder.name}/phases.png" in logged
    metrics = client.get_run(parent).data.metrics
    assert metrics["diagnosis.baseline.share.data"] == pytest.approx(0.52)
    assert metrics[f"diagnosis.ceiling.{PINNED}"] == pytest.approx(1 / 0.99)


def test_the_picture_stays_readable_with_48_combinations(tmp_path):
    (compared,) = compare(records(), 0.5)
    base = compared[BASELINE]
    many = (base, *(replace(compared[WORKERS if n % 2 else PINNED], record=replace(
        base.record, number=n, combination=f"combination {n}")) for n in range(1, 48)))
    few = plots.phases_chart(tmp_path / "few.png", Explanation(base.profile, many[:16], (), None, None), None, "t")
    all_ = plots.phases_chart(tmp_path / "all.png", Explanation(base.profile, many, (), None, None), None, "t")
    # Each bar keeps its height (0.27 inch at 110 dpi): the picture grows with the combinations rather than squeeze
    # their labels together.
    assert (imread(all_).shape[0] - imread(few).shape[0]) / 32 == pytest.approx(0.27 * 110, rel=0.1)
