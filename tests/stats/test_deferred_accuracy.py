"""A raced grid trains accuracy after screening, only for the groups that can decide the answer
(`Planner.defer_accuracy`, `planner.worth_more_seeds`): what it plans, and what the table and report show."""
from __future__ import annotations

import math
from pathlib import Path

import pytest

from ablate.config import study as studies
from ablate.config.choices import BASELINE
from ablate.config.design import ProtocolSettings
from ablate.render import answer
from ablate.stats import parity, verdicts
from ablate.stats.planner import Planner, worth_more_seeds
from ablate.store.records import Record, combine

pytestmark = pytest.mark.real_screening  # the verdict these tests are about

TINY = Path(__file__).resolve().parents[1] / "studies" / "tiny.yaml"
# Combination -> its accuracy group and true speed-up: one group as fast as the baseline, five far slower (bf16
# where a CPU emulates it), and a combination that trains as the baseline does (NumWorkers).
COMBINATIONS = {BASELINE: (BASELINE, 1.0), "workers": (BASELINE, 1.0), "fast": ("fast", 1.1),
                **{f"slow{i}": (f"slow{i}", 0.2 + 0.01 * i) for i in range(5)}}
GROUPS = sorted({group for group, _ in COMBINATIONS.values()})


def _screened() -> list[Record]:
    """Three screening blocks of every combination and the baseline, a little host noise, no accuracy trained."""
    out, number = [], 0
    for block in range(3):
        for position, (combination, (group, speedup)) in enumerate(COMBINATIONS.items()):
            v = 100 * speedup * math.exp(0.01 * ((number * 7) % 5 - 2))
            out.append(Record(number, combination, {"g": combination}, "complete", block=block, position=position,
                              phase="screen",
                              metrics={"throughput": v, "throughput_window_0": v, "test_samples": 256.0},
                              accuracy_group=group))
            number += 1
    return out


def _trained(number: int, group: str, seed_index: int, accuracy: float) -> Record:
    """A parity measurement of the group's first screened combination (the group's name, here), as stored."""
    return Record(number, group, {"g": group}, "complete", block=-1 - seed_index, phase="parity",
                  seed_index=seed_index, accuracy_trained=True, accuracy_from=number, accuracy_group=group,
                  metrics={"throughput": 1.0, "test_accuracy": accuracy, "test_loss": 0.1, "test_samples": 256.0})


def _planner(seeds: int = 2) -> Planner:
    return Planner(studies.load(str(TINY), "cpu"), ProtocolSettings(seeds=seeds), 0, "cpu", "test cpu",
                   defer_accuracy=True)


def test_after_screening_the_groups_that_can_decide_and_enough_others_train_their_first_seed():
    planned = _planner().parity(combine(_screened()))
    # The baseline, the fast group, and the fastest slow ones until four groups besides the baseline's train.
    assert [dict(p.slot.combination)["g"] for p in planned] == [BASELINE, "fast", "slow2", "slow3", "slow4"]
    assert {(p.slot.block, p.slot.phase, p.seed_index) for p in planned} == {(-1, "parity", 0)}
    assert [p.slot.position for p in planned] == list(range(5))


def test_the_next_seed_follows_for_the_same_groups_and_the_slowest_stay_untrained():
    stored = _screened()
    stored += [_trained(100 + i, g, 0, 90.0) for i, g in enumerate([BASELINE, "fast", "slow2", "slow3", "slow4"])]
    planned = _planner().parity(combine(stored))
    assert [dict(p.slot.combination)["g"] for p in planned] == [BASELINE, "fast", "slow2", "slow3", "slow4"]
    assert {(p.slot.block, p.seed_index) for p in planned} == {(-2, 1)}
    stored += [_trained(200 + i, g, 1, 90.5) for i, g in enumerate([BASELINE, "fast", "slow2", "slow3", "slow4"])]
    assert _planner().parity(combine(stored)) == []  # every trained group decided at its two seeds (seeds: 2)

    combined = {r.combination: r for r in combine(stored)}
    # A combination measured before its group trained shows the group's first seed, and says from which trial.
    assert (combined["workers"].accuracy, combined["workers"].accuracy_from) == (90.0, 100)
    assert (combined["fast"].accuracy, combined["fast"].accuracy_from) == (90.0, 101)
    assert combined["slow0"].accuracy is None and combined["slow1"].accuracy is None
    eligible = {r.combination for r in verdicts.eligible(list(combined.values()), 0.5)}
    assert eligible == {BASELINE, "workers", "fast", "slow2", "slow3", "slow4"}  # untrained: never raced
    groups = verdicts.parity_by_group(list(combined.values()), 0.5)
    lines = answer.parity_lines(groups, list(combined.values()), 0.5)
    assert "| slow0 | not trained: slower than the baseline in screening | 0 | | | 1 |" in lines
    assert "| slow1 | not trained: slower than the baseline in screening | 0 | | | 1 |" in lines


def test_the_spread_takes_a_third_seed_of_a_group_trained_anyway_before_two_of_a_slower_one():
    # One group besides the baseline's can decide ("fast"): at three seeds it gives the spread 2 of its 4 degrees
    # of freedom, and the two fastest slower groups the rest. With two seeds at most, three slower groups do.
    assert worth_more_seeds(combine(_screened()), 3) == {BASELINE: 2, "fast": 3, "slow4": 2, "slow3": 2}
    assert worth_more_seeds(combine(_screened()), 2) == {BASELINE: 2, "fast": 2, "slow4": 2, "slow3": 2, "slow2": 2}
    # Nothing to judge but the baseline's group: no spread is needed, and no slower group trains for one.
    assert worth_more_seeds(combine([r for r in _screened() if r.combination != "fast"]), 3) == {BASELINE: 2}


def test_the_third_seed_for_the_spread_is_planned_whatever_the_verdicts():
    stored = _screened()
    for index in range(2):
        planned = _planner(seeds=3).parity(combine(stored))
        assert [dict(p.slot.combination)["g"] for p in planned] == [BASELINE, "fast", "slow3", "slow4"]
        assert {(p.slot.block, p.seed_index) for p in planned} == {(-1 - index, index)}
        stored += [_trained(100 * (index + 1) + i, g, index, 90.0)
                   for i, g in enumerate([BASELINE, "fast", "slow3", "slow4"])]
    planned = _planner(seeds=3).parity(combine(stored))  # every group ok at two seeds; "fast" trains its third
    assert [(dict(p.slot.combination)["g"], p.seed_index) for p in planned] == [(BASELINE, 2), ("fast", 2)]
    stored += [_trained(300 + i, g, 2, 90.0) for i, g in enumerate([BASELINE, "fast"])]
    assert _planner(seeds=3).parity(combine(stored)) == []
    groups = verdicts.parity_by_group(combine(stored), 0.5)
    assert groups["slow4"].df == parity.NOISE_DF  # (3 - 1) + (2 - 1) + (2 - 1), the baseline's group apart


def test_a_group_screening_did_not_find_slower_is_trained_however_slow_it_looks():
    # One screening block: no spread to test with, so no group is called slower, and every group trains.
    stored = [r for r in _screened() if r.block < 1]
    planned = _planner().parity(combine(stored))
    assert sorted(dict(p.slot.combination)["g"] for p in planned) == GROUPS


def test_nothing_is_planned_where_accuracy_cannot_be_measured():
    # A loss-only task (or stand-in data) trains for its held-out loss in screening and notes it has no accuracy:
    # a parity step could never add a seed there, and must not be planned again and again.
    note = "task nll is a loss function, with no accuracy"
    stored = [Record(r.number, r.combination, r.levels, r.state, block=r.block, position=r.position, phase=r.phase,
                     metrics={**r.metrics, "test_loss": 0.3}, accuracy_note=note, accuracy_group=r.accuracy_group,
                     accuracy_trained=r.block == 0, accuracy_from=r.number)
              for r in _screened()]
    assert Planner.trainers(combine(stored)) == {}
    assert _planner().parity(combine(stored)) == []


def test_a_study_stored_before_the_deferral_resumes_without_training_a_first_seed_again():
    """A grid screened by an ablate that trained each group's first seed in screening (the screening block's
    first combination of the group), resumed by this one: the parity race goes on at the second seed for the
    groups worth it, and the groups screening found slower keep the seed they have."""
    stored, first = [], set()
    for r in _screened():
        trains = r.block == 0 and r.accuracy_group not in first
        first.add(r.accuracy_group)
        stored.append(Record(r.number, r.combination, r.levels, r.state, block=r.block, position=r.position,
                             phase=r.phase, seed_index=0 if trains else None, accuracy_trained=trains,
                             accuracy_from=r.number if trains else None, accuracy_group=r.accuracy_group,
                             metrics={**r.metrics, **({"test_accuracy": 90.0, "test_loss": 0.1} if trains else {})}))
    planned = _planner().parity(combine(stored))
    assert {p.seed_index for p in planned} == {1}
    assert sorted(dict(p.slot.combination)["g"] for p in planned) == [BASELINE, "fast", "slow2", "slow3", "slow4"]
    combined = {r.combination: r for r in combine(stored)}
    assert combined["slow0"].accuracy == 90.0  # trained before the upgrade: its accuracy is kept and shown
