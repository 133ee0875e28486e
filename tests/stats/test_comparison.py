"""One comparison per combination (ablate.stats.answer.comparison): a row's throughput is the baseline's times its
speed-up."""
from __future__ import annotations

import math

import pytest

from ablate.config.choices import BASELINE
from ablate.render import results
from ablate.stats.answer.comparison import compare
from ablate.store.records import Record, combine
from ablate.tracking import view


def _measured(number: int, combination: str, block: int, windows: list[float]) -> Record:
    metrics = {"throughput": math.exp(sum(map(math.log, windows)) / len(windows)), "test_accuracy": 98.0,
               **{f"throughput_window_{i}": w for i, w in enumerate(windows)}}
    levels = {"amp": "off" if combination == BASELINE else combination}
    return Record(number, combination, levels, "complete", block=block, metrics=metrics,
                  accuracy_trained=block == 0, accuracy_group=combination)


def _stored() -> list[Record]:
    # The baseline in three blocks; `amp` in two of them, with windows that make its own mean differ from
    # baseline x speed-up (the baseline was slow in the block amp missed).
    return combine([_measured(0, BASELINE, 0, [1000, 1010]), _measured(1, "amp", 0, [1500, 1560]),
                    _measured(2, BASELINE, 1, [980, 1000]), _measured(3, "amp", 1, [1480, 1500]),
                    _measured(4, BASELINE, 2, [700, 720]), _measured(5, "solo", 7, [2000, 2100])])


def test_a_rows_throughput_is_the_baselines_times_its_speedup_on_every_surface():
    (device,) = compare(_stored(), tolerance=0.5)
    base, amp = device[BASELINE], device["amp"]
    assert amp.throughput / base.throughput == pytest.approx(amp.point, rel=1e-12)
    assert amp.throughput != pytest.approx(amp.record.throughput)  # its own mean would not agree with its speed-up
    table = {r["combination"]: r for r in results.rows([device])}
    assert table["amp"]["throughput"] / table[BASELINE]["throughput"] == pytest.approx(table["amp"]["speed-up"])
    row = view.rows([device])[(amp.device, "amp")]
    assert row.metrics["speedup"] == pytest.approx(table["amp"]["speed-up"])


def test_a_combination_no_baseline_shared_a_block_with_keeps_its_own_throughput_and_gets_no_speedup():
    (device,) = compare(_stored(), tolerance=0.5)
    solo = device["solo"]
    assert solo.speedup is None and solo.point is None and solo.throughput == pytest.approx(solo.record.throughput)
    assert device.rows[-1] is solo  # rows without a speed-up sort last
    assert "speedup" not in view.rows([device])[(solo.device, "solo")].metrics


def _counted(record: Record, joules_per_sample: float) -> Record:
    return Record(record.number, record.combination, record.levels, record.state, block=record.block,
                  metrics={**record.metrics, "energy_j_per_sample": joules_per_sample, "energy_counter": 1.0},
                  accuracy_trained=record.accuracy_trained, accuracy_group=record.accuracy_group)


def test_energy_per_sample_is_a_paired_ratio_against_the_baseline_of_the_same_blocks_like_a_speedup():
    # The baseline spends 2.0 and 2.2 J a sample in blocks 0 and 1, and 3.0 in block 2, which amp missed; amp spends
    # 1.0 and 1.21: ratios 0.5 and 0.55 in its blocks. Paired, block 2's baseline does not pull amp's ratio down
    # (against the baseline's overall mean it would read 1.1 / 2.37 = 0.46).
    stored = combine([_counted(_measured(0, BASELINE, 0, [1000]), 2.0), _counted(_measured(1, "amp", 0, [1500]), 1.0),
                      _counted(_measured(2, BASELINE, 1, [1000]), 2.2), _counted(_measured(3, "amp", 1, [1500]), 1.21),
                      _counted(_measured(4, BASELINE, 2, [1000]), 3.0), _measured(5, "solo", 2, [2000])])
    (device,) = compare(stored, tolerance=0.5)
    assert device.energy_counted
    assert device["amp"].energy_ratio == pytest.approx(math.sqrt(0.5 * 0.55))
    low, high = device["amp"].energy_interval.low, device["amp"].energy_interval.high
    assert low < math.sqrt(0.5 * 0.55) < high
    assert device[BASELINE].energy_ratio == 1.0
    assert device["solo"].energy_ratio is None and device["solo"].point is not None  # it counted no energy


def test_no_energy_ratio_where_the_baseline_counted_none():
    stored = combine([_measured(0, BASELINE, 0, [1000]), _counted(_measured(1, "amp", 0, [1500]), 1.0)])
    (device,) = compare(stored, tolerance=0.5)
    assert device.energy_counted and device["amp"].energy_ratio is None and device["amp"].point is not None
    (uncounted,) = compare(combine([_measured(0, BASELINE, 0, [1000]), _measured(1, "amp", 0, [1500])]), 0.5)
    assert not uncounted.energy_counted and uncounted["amp"].energy is None
