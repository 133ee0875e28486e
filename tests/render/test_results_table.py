"""The results table compares each trial with the baseline of its own device (workers on several machines)."""
from __future__ import annotations

import csv

import pytest

from ablate.config.choices import BASELINE
from ablate.render import results
from ablate.stats.answer.comparison import compare
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


def test_where_no_counter_is_readable_the_energy_column_says_so_from_the_trial_to_the_table(tmp_path, monkeypatch):
    """A machine without RAPL (this folder is empty) on a CPU: the step clock claims no energy, so the table's
    energy column says it was not counted here - in every row, the full table and the CSV alike."""
    import torch

    from ablate.config.study import Budget
    from ablate.trial import energy, measure

    empty = tmp_path / "powercap"
    empty.mkdir()
    monkeypatch.setattr(energy, "POWERCAP", empty)
    records = []
    for number, (combination, seconds) in enumerate([(BASELINE, 1.0), ("amp", 0.5)]):
        now = [0.0]
        monkeypatch.setattr(measure, "time", type("Clock", (), {"perf_counter": staticmethod(lambda: now[0])}))
        clock = measure.StepClock(Budget(train_samples=64, warmup_samples=8, window_samples=16, windows=2),
                                  torch.device("cpu"), train_for_accuracy=False)
        for _ in clock.batches([None] * 100):
            now[0] += seconds
            clock.count(8)
        record = _record(number, combination, 1000, "cpu", "a")
        records.append(Record(number, combination, record.levels, "complete", metrics=clock.summary(),
                              machine=record.machine))
    assert clock.windows and clock.windows[-1].seconds >= 1  # long enough to have been counted, had it a counter
    table = results.rows(compare(records, 0.5))
    assert [r[results.ENERGY] for r in table] == [results.NOT_COUNTED] * 2
    assert table[0]["speed-up"] == pytest.approx(2.0)
    assert "not counted here" in results.render(table) and "energy" not in results.render_compact(table, 0.5)
    results.write_csv(table, tmp_path / "t.csv")
    assert {row["energy/sample"] for row in csv.DictReader((tmp_path / "t.csv").open())} == {results.NOT_COUNTED}


def test_the_full_table_shows_the_energy_ratio_with_its_interval_where_it_was_counted():
    def measured(number: int, combination: str, block: int, joules: float) -> Record:
        record = _record(number, combination, 1000, "cpu", "a")
        return Record(number, combination, record.levels, "complete", block=block, machine=record.machine,
                      metrics={**record.metrics, "energy_j_per_sample": joules, "energy_counter": 1.0})
    from ablate.store.records import combine

    records = combine([measured(0, BASELINE, 0, 2.0), measured(1, "amp", 0, 1.0), measured(2, BASELINE, 1, 2.0),
                       measured(3, "amp", 1, 1.2), measured(4, BASELINE, 2, 2.0), measured(5, "amp", 2, 1.1)])
    table = {r["combination"]: r for r in results.rows(compare(records, 0.5))}
    assert table["amp"][results.ENERGY] == pytest.approx((0.5 * 0.6 * 0.55) ** (1 / 3))
    assert table["amp"]["energy low"] < table["amp"][results.ENERGY] < table["amp"]["energy high"]
    text = results.render(list(table.values()))
    assert f"x{table['amp'][results.ENERGY]:.2f}" in text and "energy 95% CI" in text.splitlines()[0]


def test_the_recommended_line_wraps_within_100_columns_its_continuation_indented_deeper(tmp_path):
    """A long stack with a wide interval made the line 110 columns in a log (CI at 89e02a2); the lines under it
    (the compose line) are indented by two, so its own continuation takes four."""
    from ablate.render.report import Report

    stack = "num_workers(n=1) + amp(dtype=bf16) + set_to_none + batch_size(size=128)"
    pick = Record(1, stack, {"amp": "bf16"}, "complete", metrics={"throughput": 1.0})
    report = Report(device="cpu", folder=tmp_path, markdown=tmp_path / "r.md", html=tmp_path / "r.html",
                    summary_json=tmp_path / "s.json", plots=[], recommended=pick,
                    compose=("from strategies import AMP, compose", "stack = compose(AMP(dtype='bf16'))"),
                    metrics={"recommended.speedup": 0.8, "recommended.speedup.low": 0.1,
                             "recommended.speedup.high": 6.08, "recommended.blocks": 1})
    lines = report.summary().splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("recommended: "))
    assert all(len(line) <= 100 for line in lines[at:]), lines
    assert lines[at + 1].startswith("    ") and not lines[at + 1].startswith("     ")
    assert " ".join(line.strip() for line in lines[at:at + 2]).endswith("the baseline's throughput (95% range 0.10 "
                                                                         "to 6.08, 1 block)")
    assert lines[at + 2] == "  from strategies import AMP, compose"
