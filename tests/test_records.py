"""The trial record has one owner: the live run and `ablate sync` log the same MLflow payload."""
from __future__ import annotations

import optuna
import pytest
from optuna.trial import TrialState

from ablate import records
from ablate.records import State


def _trial(**attrs) -> optuna.trial.FrozenTrial:
    return optuna.trial.create_trial(state=TrialState.COMPLETE, values=[1000.0, 0.0], params={}, distributions={},
                                     user_attrs=attrs)


def test_a_throughput_only_trial_keeps_its_note_and_no_made_up_accuracy_source():
    attrs = {"state": "complete", "metrics": {"throughput": 1000.0}, "accuracy_group": "baseline",
             "accuracy_note": "random stand-in images", "block": 2, "phase": "race", "position": 3}
    state, reason, metrics, tags = records.mlflow_payload(attrs, "complete")
    assert (state, reason, metrics["throughput"]) == ("complete", "", 1000.0)
    assert tags["ablate.accuracy_note"] == "random stand-in images"
    assert "ablate.accuracy_from" not in tags  # never the string "None"
    assert (tags["ablate.block"], tags["ablate.phase"], tags["ablate.position"]) == ("2", "race", "3")


def test_states_map_to_mlflow_and_a_stopped_trial_is_killed():
    assert records.mlflow_payload({"state": "skipped", "reason": "no GPU"}, "pruned")[:2] == ("skipped", "no GPU")
    assert records.mlflow_payload({"state": "failed", "reason": "oom: x"}, "fail")[0] == "failed"
    assert records.mlflow_payload({"state": State.INTERRUPTED.value}, "fail")[0] == "killed"
    assert records.mlflow_payload({}, "pruned")[0] == "skipped"  # no state attr: Optuna's own


def test_a_combination_is_its_measurements_with_the_primary_carrying_accuracy():
    def measurement(number: int, rate: float, block: int, trained: bool = False) -> records.Record:
        return records.Record(number, "amp", {"amp": "bf16"}, "complete", block=block, accuracy_trained=trained,
                              metrics={"throughput": rate, "throughput_window_0": rate,
                                       **({"test_accuracy": 98.0} if trained else {})})

    (combined,) = records.combine([measurement(4, 1000.0, 0), measurement(7, 4000.0, 1, trained=True)])
    assert combined.number == 7 and combined.accuracy == 98.0  # the one that trained accuracy
    assert combined.throughput == pytest.approx(2000.0)  # geometric mean over its measurements
    assert [m.block for m in combined.measurements] == [0, 1]


def test_load_keeps_every_measurement_with_a_result_and_drops_stopped_ones_and_duplicates():
    study = optuna.create_study(directions=["maximize", "maximize"])
    study.add_trial(_trial(state="complete", combination="baseline", block=0, metrics={"throughput": 1.0}))
    study.add_trial(_trial(state="complete", combination="baseline", block=1, metrics={"throughput": 1.0}))
    study.add_trial(optuna.trial.create_trial(state=TrialState.FAIL, user_attrs={"state": "interrupted"}))
    study.add_trial(optuna.trial.create_trial(state=TrialState.FAIL, user_attrs={"state": "duplicate"}))
    assert [m.block for m in records.load_measurements(study)] == [0, 1]
    (baseline,) = records.load(study)
    assert len(baseline.measurements) == 2
