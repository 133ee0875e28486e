"""Siblings sharing a compiled graph's cache (ablate.trial.compile_cache): whichever the block order made compile cold,
the speed-ups are the same, and the warm one's one-off cost is the cold sibling's, named."""
from __future__ import annotations

from pathlib import Path

import pytest

from ablate.config import study as studies
from ablate.config.choices import BASELINE
from ablate.render.answer import break_even_rows
from ablate.stats import speedups
from ablate.stats.answer import costs
from ablate.store.records import Record, combine
from ablate.trial import metrics as metric

STUDY = """
model: mnist_cnn
dataset: mnist
space:
  set_to_none: [off, set_to_none]
  graph: [off, compile]
budget: {train_samples: 6400}
"""
COMPILED, SIBLING = "compile", "set_to_none + compile"
LEVELS = {BASELINE: {"set_to_none": "off", "graph": "off"},
          "set_to_none": {"set_to_none": "set_to_none", "graph": "off"},
          COMPILED: {"set_to_none": "off", "graph": "compile"},
          SIBLING: {"set_to_none": "set_to_none", "graph": "compile"}}
RATE = {BASELINE: 1000.0, "set_to_none": 1010.0, COMPILED: 2000.0, SIBLING: 2030.0}
DRIFT = [1.0, 0.97, 1.02]  # between blocks: pairing cancels it
COLD_S, WARM_S = 20.1, 4.1  # one-off seconds: compiling, and loading the sibling's code


def _measurement(number: int, combination: str, block: int, cold_first: str) -> Record:
    twice = number % 2 if combination == BASELINE else 0  # a block's two baselines: two processes
    jitter = 1.0 + 0.003 * ((3 * block + list(RATE).index(combination) + twice) % 5 - 2)  # each process's own
    rate = RATE[combination] * DRIFT[block] * jitter
    m = {metric.THROUGHPUT: rate, metric.window(0): rate * 0.998, metric.window(1): rate * 1.002,
         metric.TRAIN_SAMPLES: 640.0, metric.TRAIN_STEPS: 10.0, metric.PREPARE_MODEL_S: 0.0,
         metric.EARLY_STEPS_EXCESS_S: 0.0, metric.FIRST_STEP_S: 0.1, metric.ONE_OFF_S: 0.1}
    graph = None
    if "compile" in combination:
        graph = COMPILED  # both siblings' graph key
        cold = block == 0 and combination == cold_first  # the graph's first measurement in the block order
        one_off = COLD_S if cold else WARM_S
        m.update({metric.FIRST_STEP_S: one_off, metric.ONE_OFF_S: one_off, metric.COMPILE_CACHE_WARM: float(not cold),
                  metric.COMPILE_CACHE_HITS: 0.0 if cold else 3.0, metric.COMPILE_CACHE_MISSES: 3.0 if cold else 0.0})
    return Record(number, combination, LEVELS[combination], "complete", metrics=m, block=block, phase="screen",
                  compile_graph=graph)


def _records(cold_first: str) -> list[Record]:
    """Three blocks of the four combinations (baseline twice), in an order that puts `cold_first` first in block 0."""
    order = [BASELINE, cold_first, "set_to_none", BASELINE, SIBLING if cold_first == COMPILED else COMPILED]
    return combine([_measurement(5 * b + i, c, b, cold_first) for b in range(3) for i, c in enumerate(order)])


@pytest.fixture
def study(tmp_path: Path) -> studies.Study:
    path = tmp_path / "siblings.yaml"
    path.write_text(STUDY)
    return studies.load(str(path), "cpu")


@pytest.mark.parametrize("cold_first, warm", [(COMPILED, SIBLING), (SIBLING, COMPILED)])
def test_the_sibling_that_started_warm_borrows_the_cold_ones_one_off_cost_and_says_whose(study, cold_first, warm):
    by = {r.combination: r for r in _records(cold_first)}
    cold_number = next(m.number for m in by[cold_first].measurements if not m.metrics[metric.COMPILE_CACHE_WARM])
    assert by[warm].one_off_from == cold_number and by[cold_first].one_off_from is None
    assert by[warm].metrics[metric.ONE_OFF_S] == by[cold_first].metrics[metric.ONE_OFF_S] == COLD_S
    breaks = {b.record.combination: b for b in costs.break_even(list(by.values()), study)}
    assert breaks[warm].extra_s == pytest.approx(breaks[cold_first].extra_s) == pytest.approx(COLD_S - 0.1)
    rows = "\n".join(break_even_rows(list(breaks.values())))
    assert f"| {warm} | compile | {COLD_S - 0.1:.2f} (cold in #{cold_number}) |" in rows
    assert f"| {cold_first} | compile | {COLD_S - 0.1:.2f} |" in rows


def test_who_compiled_cold_changes_no_speed_up(study):
    # The windows are the same whichever sibling the block order made compile: so is every estimate the stats read.
    one, other = (speedups.speedup_of(_records(first)) for first in (COMPILED, SIBLING))
    assert one.keys() == other.keys() == set(RATE)
    for combination, s in one.items():
        e, f = s.estimate, other[combination].estimate
        assert (e.log, e.se, e.df, e.noise) == (pytest.approx(f.log), pytest.approx(f.se), f.df, f.noise)
