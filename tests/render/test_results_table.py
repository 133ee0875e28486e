"""The results table compares each trial with the baseline of its own device (workers on several machines)."""
from __future__ import annotations

import csv

import pytest

from ablate.config.choices import BASELINE
from ablate.render import results
from ablate.stats.comparison import compare
from ablate.store.records import UNKNOWN_MACHINE, Record


def _record(number: int, combination: str, rate: float, device: str, host: str) -> Record:
    machine = {**UNKNOWN_MACHINE, "device": "cuda:0", "device_name": device, "host": host}
    return Record(number, combination, {"amp": "bf16" if combination != BASELINE else "off"}, "complete",
                  metrics={"throughput": rate, "test_accuracy": 98.0, "throughput_window_0": rate}, machine=machine)


def test_speedups_are_against_the_baseline_of_the_same_device_and_rows_name_device_and_host(tmp_path):
    records = [_record(0, BASELINE, 1000, "H100", "a"), _record(1, "amp", 3000, "H100", "a"),
               _record(2, BASELINE, 500, "A100", "b"), _record(3, "amp", 1000, "A100", "b")]
    table = results.rows(compare(records, 0.5))
    by_trial = {r["trial"]: r for r in table}
    assert by_trial[1]["speed-up"] == pytest.approx(3.0)  # not 1000/1000 across devices
    assert by_trial[3]["speed-up"] == pytest.approx(2.0)
    assert (by_trial[3]["device"], by_trial[3]["host"]) == ("A100", "b")
    assert results.render(table).splitlines()[0].split()[0] == "device"  # several devices: the table says which
    path = tmp_path / "t.csv"
    results.write_csv(table, path)
    assert {(row["trial"], row["device"], row["host"]) for row in csv.DictReader(path.open())} >= {("3", "A100", "b")}


def test_one_device_keeps_the_table_as_it_was():
    table = results.rows(compare([_record(0, BASELINE, 1000, "H100", "a"), _record(1, "amp", 3000, "H100", "a")], 0.5))
    assert results.render(table).splitlines()[0].split()[0] == "combination"
    assert [r["trial"] for r in table] == [1, 0]  # fastest first


def test_accuracy_is_borrowed_only_from_a_trial_on_the_same_device(tmp_path):
    import optuna

    from ablate.config import study as studies
    from ablate.run.objective import accuracy_donor
    from ablate.run.runner import Runner
    from ablate.store.storage import default_storage
    from ablate.trial.machine import describe

    study = studies.load("tests/studies/tiny.yaml", "cpu")
    machine = describe("cpu")
    runner = Runner(study, machine, "grid", default_storage(study, tmp_path), tmp_path)
    for number, device_name in enumerate(("another GPU", machine.device_name)):
        runner.optuna_study.add_trial(optuna.trial.create_trial(
            params={}, distributions={}, values=[1000.0, 98.0],
            user_attrs={"accuracy_group": "amp", "accuracy_trained": True,
                        "machine": {**UNKNOWN_MACHINE, "device_name": device_name}}))
    donor = accuracy_donor(runner.optuna_study, "amp", machine.device_name)
    assert donor is not None and donor.number == 1
    assert accuracy_donor(runner.optuna_study, "baseline", machine.device_name) is None
