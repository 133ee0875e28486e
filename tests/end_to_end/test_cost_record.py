"""What the session's run of tiny.yaml (`tiny_study_run`, tests/conftest.py) says and stores of its cost: the estimate
before its first measurement, every measurement's timeline marks, the study record's and summary.json's cost, and the
split benchmarks.conclusion_cost computes from them. Reads the run only."""
from __future__ import annotations

import json

import optuna
import pytest

from ablate.run.estimate import FEW
from ablate.store import records, study_record
from ablate.trial.metrics import PROFILED_STEP_S, TIMELINE, Mark
from benchmarks import conclusion_cost


def _stored(results) -> optuna.Study:
    return optuna.load_study(study_name="tiny:grid:cpu", storage=f"sqlite:///{results / 'tiny' / 'optuna.db'}")


def test_the_run_says_its_expected_cost_before_measuring_and_stores_it_with_the_actual(tiny_study_run):
    results, log = tiny_study_run
    said = [line for line in log.splitlines() if line.startswith("expected cost: about ")]
    assert len(said) == 1 and len(said[0]) <= 100, log
    first_measurement = next(i for i, line in enumerate(log.splitlines()) if line.startswith("#"))
    assert log.splitlines().index(said[0]) < first_measurement
    cost = study_record.from_study(_stored(results)).cost_summary
    measured = [r for r in records.load_measurements(_stored(results)) if r.state != records.State.SKIPPED]
    assert cost is not None and cost["actual"]["sessions"] == 1
    assert cost["actual"]["measurements"] == len(measured) and cost["actual"]["wall_s"] > 0
    assert cost["actual"]["accuracy_trainings"] == sum(r.accuracy_trained or r.phase == "parity" for r in measured)
    low, high = cost["estimate"]["measurements"]
    assert low <= len(measured) <= high  # tiny's race keeps its eligible leader: no new round past the high end
    assert cost["minutes_estimate"]["after_measurements"] >= FEW
    summary = json.loads((results / "tiny" / "report" / "grid" / "summary.json").read_text())
    assert summary["cost"] == json.loads(json.dumps(cost))


def test_every_measurement_stores_the_marks_that_split_its_time(tiny_study_run):
    results = tiny_study_run[0]
    complete = [t for t in _stored(results).get_trials(deepcopy=False) if TIMELINE in t.user_attrs]
    assert complete
    for t in complete:
        timeline, r = t.user_attrs[TIMELINE], records.from_trial(t)
        assert {Mark.LAUNCHED, Mark.EXITED, Mark.MEASURED, Mark.FIRST_STEP, Mark.WINDOWS} <= set(timeline)
        assert (Mark.EVALUATING in timeline) == r.accuracy_trained
        # On a CPU a throughput-only measurement profiles its timed windows: no window apart (phases.in_windows).
        assert (Mark.PROFILING in timeline) == (r.profiling and r.accuracy_trained)
        assert not r.complete or (PROFILED_STEP_S in r.metrics) == r.profiling
    assert sum(Mark.HAND_OFF in t.user_attrs[TIMELINE] for t in complete) >= len(complete) - 1


def test_the_split_of_the_run_adds_up_to_its_wall_time_with_every_timeline_marked(tiny_study_run):
    found = conclusion_cost.split(_stored(tiny_study_run[0]))
    assert found["without_marks"] == 0 and found["timelines"] > 0
    assert sum(found["by_activity"].values()) == pytest.approx(found["wall_s"])
    assert sum(found["by_phase"].values()) == pytest.approx(found["wall_s"])
    assert all(found["by_activity"][a] > 0 for a in ("timed windows", "compile", "start-up", "hand-off"))
    assert found["by_activity"][conclusion_cost.OTHER] >= 0
