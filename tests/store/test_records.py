"""The trial record has one owner: the live run and `ablate sync` log the same MLflow payload."""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from ablate.config.design import ProtocolSettings
from ablate.store import records, study_record
from ablate.store.records import State
from ablate.trial import metrics as metric


def _trial(**attrs) -> optuna.trial.FrozenTrial:
    return optuna.trial.create_trial(state=TrialState.COMPLETE, values=[1000.0, 0.0], params={}, distributions={},
                                     user_attrs=attrs)


def _payload(attrs: dict, state: TrialState = TrialState.COMPLETE) -> tuple:
    trial = optuna.trial.create_trial(state=state, values=[1000.0, 0.0] if state == TrialState.COMPLETE else None,
                                      params={}, distributions={}, user_attrs=attrs)
    return records.mlflow_payload(records.from_trial(trial))


def test_a_throughput_only_trial_keeps_its_note_and_no_made_up_accuracy_source():
    attrs = {"state": "complete", "metrics": {"throughput": 1000.0}, "accuracy_group": "baseline",
             "accuracy_note": "random stand-in images", "block": 2, "phase": "race", "position": 3}
    state, reason, metrics, tags = _payload(attrs)
    assert (state, reason, metrics["throughput"]) == ("complete", "", 1000.0)
    assert tags["ablate.accuracy_note"] == "random stand-in images"
    assert "ablate.accuracy_from" not in tags  # never the string "None"
    assert (tags["ablate.block"], tags["ablate.phase"], tags["ablate.position"]) == ("2", "race", "3")


def test_a_measurement_says_its_block_and_an_accuracy_training_its_seed_counted_from_one():
    """Accuracy trainings are stored in blocks below zero, one a seed; what a user reads (the progress line, MLflow's
    run name) says the seed instead."""
    place = {(phase, block, seed): records.from_trial(_trial(phase=phase, block=block, seed_index=seed)).place
             for phase, block, seed in (("screen", 0, 0), ("race", 7, 0), ("parity", -1, 0), ("parity", -3, 2),
                                        ("table", -1, 0))}
    assert place == {("screen", 0, 0): "block 0", ("race", 7, 0): "block 7", ("parity", -1, 0): "accuracy seed 1",
                     ("parity", -3, 2): "accuracy seed 3", ("table", -1, 0): "accuracy seed 1"}


def test_states_map_to_mlflow_and_a_stopped_trial_is_killed():
    assert _payload({"state": "skipped", "reason": "no GPU"}, TrialState.PRUNED)[:2] == ("skipped", "no GPU")
    assert _payload({"state": "failed", "reason": "oom: x"}, TrialState.FAIL)[0] == "failed"
    assert _payload({"state": State.INTERRUPTED.value}, TrialState.FAIL)[0] == "killed"
    assert _payload({}, TrialState.PRUNED)[0] == "skipped"  # no state attr: Optuna's own


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


def test_a_trial_written_through_the_writers_reads_back_with_the_same_fields():
    study = optuna.create_study(directions=["maximize", "maximize"])
    records.queue(study, {"amp": "bf16"}, block=2, position=1, phase="race", combination="amp", seed_index=1)

    def objective(trial: optuna.Trial) -> tuple[float, float]:
        trial.suggest_categorical("amp", ["off", "bf16"])
        records.start(trial, "amp", {**records.UNKNOWN_MACHINE, "device_name": "H100"}, "host:1")
        records.set_run(trial, "run-1")
        records.set_training(trial, "amp", 43)
        records.result(trial, {"throughput": 1000.0, "test_accuracy": 98.0}, [], accuracy_note="stand-in",
                       accuracy_trained=True, accuracy_from=trial.number)
        return 1000.0, 98.0

    study.optimize(objective, n_trials=1)
    (trial,) = study.trials
    r = records.from_trial(trial)
    assert (r.combination, dict(r.levels), r.state, r.block, r.position, r.phase, r.seed_index) == (
        "amp", {"amp": "bf16"}, State.COMPLETE, 2, 1, "race", 1)
    assert (r.device, r.mlflow_run_id, r.accuracy_group, r.training_seed) == ("H100", "run-1", "amp", 43)
    assert (r.metrics, r.accuracy_note, r.accuracy_trained, r.accuracy_from) == (
        {"throughput": 1000.0, "test_accuracy": 98.0}, "stand-in", True, trial.number)
    assert r.has_slot and r.slot == (2, 1) and not r.picked
    # The stored format itself: what studies stored before this module owned the keys read back the same.
    assert trial.user_attrs == {"block": 2, "position": 1, "phase": "race", "combination": "amp", "seed_index": 1,
                                "machine": {**records.UNKNOWN_MACHINE, "device_name": "H100"}, "worker": "host:1",
                                "state": "complete", "mlflow_run_id": "run-1", "accuracy_group": "amp",
                                "training_seed": 43, "timeline": [], "accuracy_note": "stand-in",
                                "accuracy_trained": True, "accuracy_from": trial.number,
                                "metrics": {"throughput": 1000.0, "test_accuracy": 98.0}}


def test_a_trial_tpe_picked_is_placed_and_a_mark_keeps_its_reason():
    study = optuna.create_study()

    def objective(trial: optuna.Trial) -> float:
        assert not records.from_trial(trial).has_slot and records.from_trial(trial).slot is None
        records.place(trial, 1, 3, "screen")
        records.mark(trial, State.SKIPPED, "no GPU")
        raise optuna.TrialPruned("no GPU")

    study.optimize(objective, n_trials=1)
    r = records.from_trial(study.trials[0])
    assert (r.picked, r.slot, r.phase, r.state, r.reason) == (True, (1, 3), "screen", State.SKIPPED, "no GPU")


def test_the_study_record_reads_back_what_its_writers_stored():
    study = optuna.create_study()
    study_record.set_file_hash(study, "abc")
    study_record.set_protocol(study, ProtocolSettings())
    study_record.set_seeds(study, {"protocol": 1, "training": 2})
    study_record.set_parent_run(study, "parent")
    study_record.set_runs(study, {3: "run-3"})
    stored = study_record.from_study(study)
    assert (stored.file_hash, stored.protocol, stored.seeds) == ("abc", dataclasses.asdict(ProtocolSettings()),
                                                                 {"protocol": 1, "training": 2})
    assert (stored.parent_run_id, stored.runs, stored.race) == ("parent", {3: "run-3"}, None)
    assert study.user_attrs["mlflow_runs"] == {"3": "run-3"}  # the stored format: trial numbers as strings
    assert records.run_ids(study) == {3: "run-3"}


ROOT = Path(__file__).resolve().parents[2]
# The stored format's owners: records for a trial's user attrs, study_record for the Optuna study's own (one
# module was over 400 lines, and the two records share no key). Every other module reads their typed fields and
# writes through their writers.
FORMAT_OWNERS = {"ablate/store/records.py", "ablate/store/study_record.py"}
# Metric keys that also name something else, spelled by its own owner: the trial's `timeline` user attr (records)
# and the budget's targets (the study file).
SHARED_NAMES = {metric.TIMELINE, metric.TARGET_ACCURACY, metric.TARGET_LOSS}


def _lines(folders: tuple[str, ...], skip: set[str]):
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if (where := path.relative_to(ROOT).as_posix()) not in skip:
                for n, line in enumerate(path.read_text().splitlines(), 1):
                    yield f"{where}:{n}", line


def test_no_module_but_the_records_reads_or_writes_user_attrs():
    offenders = [where for where, line in _lines(("ablate", "strategies"), FORMAT_OWNERS)
                 if "user_attrs" in line or "set_user_attr" in line]
    assert offenders == []


def test_no_module_but_metrics_spells_a_metric_key():
    # The keys a trial's metrics are stored under: readers name them by their constants, so none drifts apart
    # from the key the trial wrote. A key ending in "_" is a prefix, caught with what follows ("test_loss").
    keys = [v for k, v in vars(metric).items() if k.isupper() and isinstance(v, str) and v not in SHARED_NAMES]
    spelled = re.compile("|".join(f"[\"']{re.escape(k)}" + ("" if k.endswith("_") else "[\"']") for k in keys))
    assert len(keys) > 30 and spelled.search('f"throughput_window_{i}"') and spelled.search("m['first_step_s']")
    assert not spelled.search('"throughput_unit"')
    offenders = [where for where, line in _lines(("ablate",), {"ablate/trial/metrics.py"}) if spelled.search(line)]
    assert offenders == []
