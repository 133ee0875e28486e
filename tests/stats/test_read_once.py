"""Rows read once show the screening model's estimate, so the top of the whole table holds its truth.

In the whole table most rows rest on one screening process, and the table is sorted by speed-up. Each such row's own
interval holds its truth about 95% of the time, but the rows at the top are there because their one process read
high: the top of a sorted column is where the misses collect. On the Xeon (benchmarks/RESULTS.md) one process read
num_workers(2) + batch(128) + amp(bf16) at x1.76 [1.42, 2.19], the table's first row, where the screening model of
all 48 readings put it at x1.39. So a row read once shows the model's prediction (`Fractioned.read_once`); rows
measured in several blocks, the answer among them, keep their own estimates.

Simulated whole, through the planner and the comparison every surface renders (`_study` of test_fraction_study.py:
mnist_cnn's CPU grid, 48 runnable cells, additive truth with a batch x compile pair), at process noise 0.08 and 0.15
(the Xeon's baseline moved 14% from block to block): how often the first row read once in the table's order, the
first three, and all of them hold their truth, with a Clopper-Pearson lower bound. The power check beside it: the
same studies' own readings, in the order they would sort in, miss at the top far more often than the bound allows, so
the check tells the two estimators apart. Figures (`ABLATE_FULL_SIMULATIONS=1`, 200 studies at each noise, seeds
40000-40199, about 10 min on 2 cores), the model's against the readings':

- noise 0.08: the first row read once held its truth in 188 of 200 studies (CP lower bound 0.905) against 146
  (upper 0.781); the first three 565 of 600 (0.923) against 501; every row read once 7811 of 8213 (0.947) against
  7658 of 8213.
- noise 0.15: 188 of 200 (0.905) against 138; 570 of 600 against 475; 7844 of 8200 against 7713.
- The model's intervals are about a third as wide: mean width 0.157 against 0.432 (log scale) at 0.08, 0.288
  against 0.879 at 0.15.

The first row is still chosen, now by the model's estimate, so it holds a little under 95%; 200 studies establish
90% there. docs/evidence.md, "Evidence: rows read once".

A grid with no fraction (`Unfractioned`: three two-level dimensions) has no screening model, and its rows read once
keep their readings. They hold their truth at the top all the same: there the race opens on each combination's own
screening estimate, so the luckiest readings are raced and leave the rows read once. Same seeds: the first row
read once held its truth in 194 and 197 of 200 studies (noise 0.08 and 0.15), the first three in 582 and 594 of 600,
every row in 3,300 and 3,313 of 3,400 (about 3 of the 12 minutes).
"""
from __future__ import annotations

import os
from collections import Counter

import pytest
import test_fraction_study
from test_fraction_study import CpuGrid, FullScreening, Outcome, SinglePass, _planner, _study, _truth
from test_headline import cp_lower, cp_upper

from ablate.config.choices import BASELINE, OFF, Levels, combination_label, grid
from ablate.config.design import ProtocolSettings
from ablate.stats import protocol, speedups
from ablate.stats.answer.comparison import Comparison
from ablate.stats.screening.fractioned import MODELLED

FULL = 200
# The Clopper-Pearson lower bounds the modelled rates must reach (nominal 0.95): what 200 studies can establish for
# the first row, 600 for the first three, about 8,000 rows for all of them.
FIRST, THREE, EVERY = 0.90, 0.92, 0.94
POWER = 0.85  # the upper bound the readings' first row must fall under: the check fails the old estimator


class Unfractioned(CpuGrid):
    """mnist_cnn's CPU grid with num_workers off too: batch_size x set_to_none x bf16 x graph, 24 runnable cells.
    Three two-level dimensions have no resolution IV fraction smaller than their grid (`fraction.MIN_FACTORS`)."""

    def runnable(self, levels: Levels) -> bool:
        return super().runnable(levels) and dict(levels)["num_workers"] == OFF


@pytest.fixture(autouse=True)
def _whole_table(monkeypatch):
    monkeypatch.setitem(test_fraction_study.DESIGNS, Unfractioned, ProtocolSettings())  # the default design


def _truths(seed: int, kind: type[CpuGrid] = FullScreening) -> dict[str, float]:
    planner = _planner(kind, seed)
    return {combination_label(planner.options_of(lv)): _truth(lv) for lv in grid(planner.options)
            if planner.runnable(lv)}


def _read_once(o: Outcome) -> list[Comparison]:
    """The table's rows resting on one screening block, in its order."""
    return [c for c in o.found.rows if c.speedup and c.combination != BASELINE and c.speedup.estimate.blocks <= 1
            and c.speedup.estimate.phase == protocol.SCREEN]


def _held(o: Outcome, truth: dict[str, float]) -> tuple[list[bool], list[bool]]:
    """Whether each row read once holds its truth, in the table's order: as shown (the model's, where the grid has
    a fraction), and as its own reading would show it (its paired estimate, sorted by it)."""
    shown = _read_once(o)
    own = speedups.speedup_of(list(o.found.records))
    read = sorted((own[c.combination] for c in shown), key=lambda s: -s.estimate.log)

    def holds(s: speedups.Speedup) -> bool:
        iv = s.log
        return iv is not None and iv.low <= truth[s.record.combination] <= iv.high

    return [holds(c.speedup) for c in shown if c.speedup], [holds(s) for s in read]


def test_a_row_read_once_shows_the_models_estimate_and_a_raced_one_its_own():
    """One whole study: every row resting on one screening block shows the model's estimate, every other row its
    own; the table is sorted by what it shows; the answer's speed-up is its leader's own confirmation estimate."""
    o = _study(FullScreening, 40000)
    rows = [c for c in o.found.rows if c.speedup]
    modelled = [c for c in rows if c.speedup.estimate.noise == MODELLED]
    assert len(modelled) > 30
    assert all(c.speedup.estimate.blocks == 1 and c.speedup.estimate.phase == protocol.SCREEN for c in modelled)
    assert all(c.speedup.estimate.blocks > 1 for c in rows if c not in modelled and c.combination != BASELINE)
    points = [c.speedup.point for c in rows]
    assert points == sorted(points, reverse=True)
    rec = o.found.recommendation
    assert rec is not None and rec.speedup is not None and rec.speedup.estimate.noise != MODELLED
    own = speedups.speedup_of(list(o.found.records))
    assert rec.speedup.estimate == own[rec.leader.combination].estimate


def test_the_single_pass_keeps_every_reading_as_measured():
    """No race chose rows there, and its answer already ranks by the model: its rows stay its readings."""
    o = _study(SinglePass, 40000)
    assert not any(c.speedup and c.speedup.estimate.noise == MODELLED for c in o.found.rows)


def test_a_grid_with_no_fraction_keeps_its_readings():
    """No screening model there (`fractioned.of` finds none): each row read once shows its own reading."""
    o = _study(Unfractioned, 40000)
    assert o.found.screened is None
    once = _read_once(o)
    own = speedups.speedup_of(list(o.found.records))
    assert len(once) > 10 and all(c.speedup == own[c.combination] for c in once)
    assert not any(c.speedup and c.speedup.estimate.noise == MODELLED for c in o.found.rows)


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("ABLATE_FULL_SIMULATIONS"),
                    reason=f"{FULL} whole simulated studies at each of two noises on two grids, ~12 min on 2 cores: "
                           "ABLATE_FULL_SIMULATIONS=1 runs them (figures in docs/evidence.md)")
@pytest.mark.parametrize("kind", [FullScreening, Unfractioned])
@pytest.mark.parametrize("noise", [0.08, 0.15])
def test_the_first_rows_read_once_hold_their_truth(noise, kind, monkeypatch):
    monkeypatch.setattr(test_fraction_study, "NOISE", noise)
    n = Counter[str]()
    for seed in range(40000, 40000 + FULL):
        shown, read = _held(_study(kind, seed), _truths(seed, kind))
        n["first"], n["first read"] = n["first"] + shown[0], n["first read"] + read[0]
        n["three"], n["three read"] = n["three"] + sum(shown[:3]), n["three read"] + sum(read[:3])
        n["all"], n["all read"], n["rows"] = n["all"] + sum(shown), n["all read"] + sum(read), n["rows"] + len(shown)
    print(f"{kind.__name__}, noise {noise}: the first row read once held its truth in {n['first']}/{FULL} studies "
          f"(its own reading: {n['first read']}), the first three {n['three']}/{3 * FULL} ({n['three read']}), "
          f"every row {n['all']}/{n['rows']} ({n['all read']})")
    assert cp_lower(n["first"], FULL) >= FIRST
    assert cp_lower(n["three"], 3 * FULL) >= THREE
    assert cp_lower(n["all"], n["rows"]) >= EVERY
    if kind is FullScreening:  # the readings fail where the model holds
        assert cp_upper(n["first read"], FULL) < POWER
