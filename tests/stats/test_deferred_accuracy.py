"""Accuracy last: a grid trains accuracy after throughput has chosen its final set, for the answer only that set's
groups, the baseline's and the spread's (`Planner.defer_accuracy`, `ablate.stats.race.finalists`): what it plans, and
what the table and report show. The planner here screens only (`race_blocks: 0`): its final set is screening's
leader; the race's own rounds and hand-overs are simulated in tests/stats/test_race_first.py. Under `protocol.quick`
(here) that is all; by default every other group trains once after the answer (tests/stats/test_table_pass.py)."""
from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

from ablate.config import study as studies
from ablate.config.choices import BASELINE
from ablate.config.design import ProtocolSettings
from ablate.render import answer
from ablate.stats import parity
from ablate.stats.answer import comparison, verdicts
from ablate.stats.planner import Planner
from ablate.stats.race import finalists
from ablate.store.records import Record, combine

TINY = Path(__file__).resolve().parents[1] / "studies" / "tiny.yaml"
# Combination -> its accuracy group and true speed-up: one group as fast as the baseline, five far slower (bf16
# where a CPU emulates it), and a combination that trains as the baseline does (NumWorkers), a little slower (so the
# baseline trains its group: `finalists.trainers` picks the fastest member).
COMBINATIONS = {BASELINE: (BASELINE, 1.0), "workers": (BASELINE, 0.95), "fast": ("fast", 1.1),
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


def _planner(seeds: int = 2, quick: bool = True) -> Planner:
    return Planner(studies.load(str(TINY), "cpu"), ProtocolSettings(seeds=seeds, race_blocks=0, quick=quick), 0,
                   "cpu", "test cpu", defer_accuracy=True)


def _parity(planner: Planner, stored: list[Record]) -> list:
    standing, planned = planner.plan(stored)
    assert standing is None  # this protocol does not race
    return planned


def test_after_screening_the_final_sets_group_the_baseline_and_the_spread_train_their_first_seed():
    planned = _parity(_planner(), combine(_screened()))
    # The baseline, the leader's group ("fast"), and the next-fastest groups until the spread has its four degrees
    # of freedom at two seeds (`seeds`: 2).
    assert [dict(p.slot.combination)["g"] for p in planned] == [BASELINE, "fast", "slow4", "slow3", "slow2"]
    assert {(p.slot.block, p.slot.phase, p.seed_index) for p in planned} == {(-1, "parity", 0)}
    assert [p.slot.position for p in planned] == list(range(5))


def test_the_next_seed_follows_for_the_same_groups_and_the_rest_are_not_finalists():
    stored = _screened()
    stored += [_trained(100 + i, g, 0, 90.0) for i, g in enumerate([BASELINE, "fast", "slow4", "slow3", "slow2"])]
    planned = _parity(_planner(), combine(stored))
    assert [dict(p.slot.combination)["g"] for p in planned] == [BASELINE, "fast", "slow4", "slow3", "slow2"]
    assert {(p.slot.block, p.seed_index) for p in planned} == {(-2, 1)}
    stored += [_trained(200 + i, g, 1, 90.5) for i, g in enumerate([BASELINE, "fast", "slow4", "slow3", "slow2"])]
    assert _parity(_planner(), combine(stored)) == []  # every trained group decided at its two seeds (seeds: 2)

    combined = {r.combination: r for r in combine(stored)}
    # A combination measured before its group trained shows the group's first seed, and says from which trial.
    assert (combined["workers"].accuracy, combined["workers"].accuracy_from) == (90.0, 100)
    assert (combined["fast"].accuracy, combined["fast"].accuracy_from) == (90.0, 101)
    assert combined["slow0"].accuracy is None and combined["slow1"].accuracy is None
    compared = comparison.compare(list(combined.values()), 0.5, _planner().protocol)[0]
    lines = answer.parity_lines(compared.groups, list(combined.values()), 0.5, compared.untrained, quick=True)
    assert f"| slow0 | {finalists.NOT_NEEDED} | 0 | | | 1 |" in lines
    assert f"| slow1 | {finalists.NOT_NEEDED} | 0 | | | 1 |" in lines
    rec = verdicts.recommendation(list(combined.values()), 0.5, _planner().protocol)
    assert rec is not None and rec.pick.combination == "fast"


def test_each_row_without_an_accuracy_says_why():
    """The table, summary.json and MLflow read `Comparison.unmeasured`: a group never trained is not a finalist, one
    whose training failed says so, and rows with an accuracy (or the baseline) say nothing."""
    groups = [BASELINE, "fast", "slow4", "slow3", "slow2"]
    stored = _screened() + [_trained(100 + i, g, s, 90.0 + s / 2) for s in range(2) for i, g in enumerate(groups)]
    stored.append(Record(300, "slow1", {"g": "slow1"}, "failed", block=-1, phase="parity", seed_index=0,
                         accuracy_group="slow1", reason="out of memory"))
    rows = {c.combination: c.unmeasured for c in comparison.compare(combine(stored), 0.5, _planner().protocol)[0].rows}
    assert rows["slow0"] == finalists.NOT_NEEDED and rows["slow1"] == finalists.TRAINING_FAILED
    assert {c: why for c, why in rows.items() if why} == {"slow0": finalists.NOT_NEEDED,
                                                        "slow1": finalists.TRAINING_FAILED}


def test_the_spread_takes_a_third_seed_of_a_finalist_then_the_next_fastest_groups_seeds():
    # One finalist group: at three seeds it gives the spread 2 of its 4 degrees of freedom, the next-fastest group
    # at three the rest (9 trainings with the baseline's). With two seeds at most, three more groups do.
    assert finalists.seeds_wanted(["fast"], ["slow4", "slow3"], {}, 3) == {BASELINE: 2, "fast": 3, "slow4": 3}
    assert finalists.seeds_wanted(["fast"], ["slow4", "slow3", "slow2"], {}, 2) == \
        {BASELINE: 2, "fast": 2, "slow4": 2, "slow3": 2, "slow2": 2}
    assert finalists.seeds_wanted(["a", "b"], ["slow4"], {}, 3) == {BASELINE: 2, "a": 3, "b": 3}
    # Nothing to judge but the baseline's group: no spread is needed, and no other group trains for one.
    assert finalists.seeds_wanted([BASELINE], ["slow4"], {}, 3) == {BASELINE: 2}


def test_the_third_seed_for_the_spread_is_planned_whatever_the_verdicts():
    stored = _screened()
    for index in range(2):
        planned = _parity(_planner(seeds=3), combine(stored))
        assert [dict(p.slot.combination)["g"] for p in planned] == [BASELINE, "fast", "slow4"]
        assert {(p.slot.block, p.seed_index) for p in planned} == {(-1 - index, index)}
        stored += [_trained(100 * (index + 1) + i, g, index, 90.0) for i, g in enumerate([BASELINE, "fast", "slow4"])]
    planned = _parity(_planner(seeds=3), combine(stored))
    assert [(dict(p.slot.combination)["g"], p.seed_index) for p in planned] == \
        [(BASELINE, 2), ("fast", 2), ("slow4", 2)]
    stored += [_trained(300 + i, g, 2, 90.0) for i, g in enumerate([BASELINE, "fast", "slow4"])]
    assert _parity(_planner(seeds=3), combine(stored)) == []
    groups = verdicts.parity_by_group(combine(stored), 0.5)
    assert groups["fast"].df == parity.NOISE_DF  # (3 - 1) + (3 - 1), the baseline's group apart


def test_nothing_is_planned_where_accuracy_cannot_be_measured():
    # A loss-only task (or stand-in data) trains for its held-out loss in screening and notes it has no accuracy:
    # a parity step could never add a seed there, and must not be planned again and again.
    note = "task nll is a loss function, with no accuracy"
    stored = [Record(r.number, r.combination, r.levels, r.state, block=r.block, position=r.position, phase=r.phase,
                     metrics={**r.metrics, "test_loss": 0.3}, accuracy_note=note, accuracy_group=r.accuracy_group,
                     accuracy_trained=r.block == 0, accuracy_from=r.number)
              for r in _screened()]
    assert finalists.trainers(combine(stored)) == {}
    assert _parity(_planner(), combine(stored)) == []


def test_a_study_stored_before_the_deferral_resumes_without_training_a_first_seed_again():
    """A grid screened by an ablate that trained each group's first seed in screening (the screening block's
    first combination of the group), resumed by this one: the finalists' parity goes on at the second seed, and
    the other groups keep the seed they have."""
    stored, first = [], set()
    for r in _screened():
        trains = r.block == 0 and r.accuracy_group not in first
        first.add(r.accuracy_group)
        stored.append(Record(r.number, r.combination, r.levels, r.state, block=r.block, position=r.position,
                             phase=r.phase, seed_index=0 if trains else None, accuracy_trained=trains,
                             accuracy_from=r.number if trains else None, accuracy_group=r.accuracy_group,
                             metrics={**r.metrics, **({"test_accuracy": 90.0, "test_loss": 0.1} if trains else {})}))
    planned = _parity(_planner(), combine(stored))
    assert {p.seed_index for p in planned} == {1}
    assert [dict(p.slot.combination)["g"] for p in planned] == [BASELINE, "fast", "slow4", "slow3", "slow2"]
    combined = {r.combination: r for r in combine(stored)}
    assert combined["slow0"].accuracy == 90.0  # trained before the upgrade: its accuracy is kept and shown


def test_a_group_trains_as_its_fastest_measured_member_and_keeps_the_one_that_trained_its_first_seed():
    # "workers" trains to the baseline's numbers (NumWorkers changes none); measured faster than the baseline (not
    # than the leader), it trains the baseline's group: the same verdicts for less time (a training is its steps).
    faster = [replace(r, metrics={**r.metrics, "throughput_window_0": 1.1 * r.metrics["throughput_window_0"]})
              if r.combination == "workers" else r for r in _screened()]
    assert finalists.trainers(combine(faster))[BASELINE].combination == "workers"
    assert [dict(p.slot.combination)["g"] for p in _parity(_planner(), combine(faster))][:2] == ["workers", "fast"]
    # Once a member trained the first seed, it trains every seed, whatever is measured after.
    stored = _screened() + [_trained(100, BASELINE, 0, 90.0)]
    assert finalists.trainers(combine(stored))[BASELINE].number == 100
    # Without a throughput to rank by, the group's first screened member trains it.
    blind = [replace(r, metrics={k: v for k, v in r.metrics.items() if k != "throughput_window_0"})
             for r in _screened()]
    assert finalists.trainers(combine(blind))[BASELINE].combination == BASELINE
