"""Where a study's time went (benchmarks.conclusion_cost's split), on a storage written by hand: by activity from the
measurements' timelines, each moment once, and by protocol phase; a timeline stored before the marks, and a failed
measurement, leave their time to "other"."""
from __future__ import annotations

import datetime
from pathlib import Path

import optuna
import pytest

from ablate.store import study_record
from ablate.trial.metrics import TIMELINE, Mark
from benchmarks import conclusion_cost
from benchmarks.conclusion_cost import OTHER, OUTSIDE

BEGAN = datetime.datetime(2026, 1, 1, 12, 0, 0)

THROUGHPUT_ONLY = {  # perf_counter readings: launch, start-up to 104, compile to 108, warm-up, windows, profiling
    Mark.LAUNCHED: 100.0, Mark.MEASURED: [[104.0, 106.0], [109.0, 136.0]], Mark.FIRST_STEP: [105.0, 108.0],
    Mark.WINDOWS: [110.0, 130.0], Mark.PROFILING: [131.0, 135.0], Mark.EXITED: 140.0, Mark.IMPORTS: []}
TRAINED = {  # handed off from the one above; an evaluation inside its windows, and one after its training
    Mark.HAND_OFF: [140.0, 150.0], Mark.LAUNCHED: 150.0, Mark.MEASURED: [[154.0, 200.0]],
    Mark.FIRST_STEP: [155.0, 157.0], Mark.WINDOWS: [160.0, 170.0], Mark.EVALUATING: [[165.0, 166.0], [190.0, 195.0]],
    Mark.EXITED: 200.0}
BEFORE_THE_MARKS = {Mark.LAUNCHED: 300.0, Mark.MEASURED: [[303.0, 350.0]], Mark.IMPORTS: []}


def _trial(start_s: float, end_s: float, phase: str, timeline: dict | None, trained: bool = False,
           state: str = "complete") -> optuna.trial.FrozenTrial:
    attrs = {"block": 0, "phase": phase, "state": state, "accuracy_trained": trained,
             **({TIMELINE: timeline} if timeline else {})}
    trial = optuna.trial.create_trial(state=optuna.trial.TrialState.COMPLETE, values=[1.0, 0.0], user_attrs=attrs)
    trial.datetime_start = BEGAN + datetime.timedelta(seconds=start_s)
    trial.datetime_complete = BEGAN + datetime.timedelta(seconds=end_s)
    return trial


def _stored(storage: str | None = None, name: str | None = None, sessions: bool = True) -> optuna.Study:
    study = optuna.create_study(storage=storage, study_name=name, directions=["maximize", "maximize"])
    for trial in (_trial(0, 50, "screen", THROUGHPUT_ONLY), _trial(50, 110, "parity", TRAINED, trained=True),
                  _trial(200, 260, "race", BEFORE_THE_MARKS), _trial(300, 310, "race", None, state="failed")):
        study.add_trial(trial)
    if sessions:
        study_record.set_cost(study, estimate={"measurements": [3, 6]}, session={
            "began": BEGAN.timestamp(), "ended": BEGAN.timestamp() + 1000, "measurements": 4,
            "accuracy_trainings": 1})
    return study


def test_the_split_counts_each_moment_once_and_leaves_what_no_mark_holds_to_other():
    found = conclusion_cost.split(_stored())
    assert found["wall_s"] == 1000 and found["wall_from"] == "the runs' stored sessions"
    assert found["by_activity"] == pytest.approx({
        "start-up": 4 + 4 + 3, "compile": 4 + 3, "warm-up": 2 + 3, "timed windows": 20 + 10 - 1, "profiling": 4,
        "evaluation": 1 + 5, "accuracy training": 30 - 5, "hand-off": 10, OTHER: 1000 - 97})
    assert found["by_phase"] == pytest.approx({"screen": 50, "parity": 60, "race": 70, OUTSIDE: 1000 - 180})
    assert (found["timelines"], found["without_marks"]) == (3, 1)
    assert found["cost"]["actual"]["measurements"] == 4


def test_without_stored_sessions_the_wall_is_the_trials_span_and_a_timed_run_gives_its_own():
    assert conclusion_cost.split(_stored(sessions=False))["wall_s"] == 310
    assert conclusion_cost.split(_stored(), wall_s=1200.0)["by_activity"][OTHER] == pytest.approx(1200 - 97)


def test_from_a_results_folder_it_prints_both_splits_and_the_cost_against_the_estimate(tmp_path: Path, capsys):
    (tmp_path / "mini").mkdir()
    _stored(f"sqlite:///{tmp_path / 'mini' / 'optuna.db'}", "mini:grid:cpu")
    assert conclusion_cost.main(["--from", str(tmp_path), "--study", "mini"]) == 0
    out = capsys.readouterr().out
    assert "| activity | s | share |" in out and "| protocol phase | s | share |" in out
    assert f"| {OTHER} | 903 | 90.3% |" in out and f"| {OUTSIDE} | 820 | 82.0% |" in out
    assert "of 3 stored timelines, 1 predate the marks" in out
    assert "expected as it began: about 3-6 measurements; actual: 4 measurements, 17 min" in out


def test_a_timeline_stored_before_the_marks_gets_those_its_metrics_give():
    older = {Mark.LAUNCHED: 0.0, Mark.MEASURED: [[2.0, 5.0], [8.0, 30.0]], Mark.IMPORTS: []}
    # A window apart stored its cost beside its steps (none where the windows' own steps were profiled).
    metrics = {"prepare_model_s": 1.0, "first_step_s": 1.5, "profiled_steps": 4.0, "profiled_step_s": 0.5,
               "profile_cost": 1.0}
    found = conclusion_cost.derived(older, metrics, trained=False)
    assert (found[Mark.FIRST_STEP], found[Mark.PROFILING], found[Mark.WINDOWS]) == ([3.0, 4.5], [28.0, 30.0],
                                                                                    [8.0, 28.0])
    assert Mark.WINDOWS not in conclusion_cost.derived(older, metrics, trained=True)  # mixed with its training
    assert Mark.EVALUATING not in conclusion_cost.derived(older, metrics, trained=True)  # no training time stored
    assert conclusion_cost.derived(THROUGHPUT_ONLY, metrics, trained=False) is THROUGHPUT_ONLY  # marked: as stored


def test_a_trained_timeline_before_the_marks_splits_its_loop_into_training_and_the_evaluations_its_time_leaves_out():
    # The loop from 3 (after the model's preparation) to the profiling window at 28: 25 s, of which 20 s training.
    older = {Mark.LAUNCHED: 0.0, Mark.MEASURED: [[2.0, 30.0]], Mark.IMPORTS: []}
    metrics = {"prepare_model_s": 1.0, "first_step_s": 1.5, "profiled_steps": 4.0, "profiled_step_s": 0.5,
               "profile_cost": 1.0, "train_time_s": 20.0}
    found = conclusion_cost.derived(older, metrics, trained=True)
    assert found[Mark.EVALUATING] == [[23.0, 28.0]]
    painted = conclusion_cost.paint(conclusion_cost.activities(found, trained=True))
    assert painted == pytest.approx({"start-up": 2.0, "compile": 2.5, "accuracy training": 18.5, "evaluation": 5.0,
                                     "profiling": 2.0})
    assert sum(painted.values()) == pytest.approx(30.0)  # the launch to the measured stretch's end, once each
    untrained = conclusion_cost.paint(conclusion_cost.activities(conclusion_cost.derived(older, metrics, False), False))
    assert "accuracy training" not in untrained and "evaluation" not in untrained


def test_a_study_whose_session_has_not_ended_says_so_and_counts_what_finished(tmp_path: Path, capsys):
    (tmp_path / "mini").mkdir()
    study = _stored(f"sqlite:///{tmp_path / 'mini' / 'optuna.db'}", "mini:grid:cpu", sessions=False)
    study_record.set_cost(study, estimate={"measurements": [3, 6]})  # as a run stores it before its first trial
    assert conclusion_cost.main(["--from", str(tmp_path), "--study", "mini"]) == 0
    out = capsys.readouterr().out
    assert "actual: 0 measurements" not in out
    assert "actual: not stored yet (no session has ended: still running, or killed), 4 finished so far" in out
