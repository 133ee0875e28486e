"""A whole study as the runner plans it, race first and accuracy last, on a simulated host and simulated seeds.

Every step asks `ablate.stats.race.finalists.final` (what `Planner.plan` turns into slots) on the stored records so far:
a race or confirmation block is measured on `test_decisions.Host`; a parity step trains each named group at that
seed, its test accuracy 99 + its true change + N(0, `seed_sd`) points. Once the answer is done, the table pass
(`finalists.table`; none under `protocol.quick`) trains each group it names once at the first seed, one at a time, and
the answer (`answer_of`) must read the same after each of them, as before the first: a study stopped there reports
it. Then the answer is what the report reads (`ablate.stats.answer.comparison.compare`). Records are built as the
store holds them (numbered in queue order, combined). Each outcome also carries the parts of summary.json
`benchmarks.reproducibility.compare` reads, rendered by summary.json's own code (`ablate.render.summaries`), so a pair
of simulated studies is scored as a real pair is (tests/stats/test_calibration_band.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from test_decisions import BASE, Host

from ablate.render import summaries
from ablate.stats import speedups
from ablate.stats.answer import comparison, verdicts
from ablate.stats.protocol import CONFIRM, ProtocolSettings, Slot, baseline_cv, race_plan, screening_plan
from ablate.stats.race import finalists
from ablate.store.records import PARITY, TABLE, TRAININGS, Record, combine


@dataclass(frozen=True)
class Study:
    """A grid's truth: log speed-ups, each combination's accuracy group, each group's true accuracy change."""

    truth: dict[str, float]
    groups: dict[str, str]
    change: dict[str, float]  # points, per accuracy group (the baseline's 0)
    tolerance: float = 1.0
    seed_sd: float = 0.5  # points: one seed's test accuracy about its group's truth


@dataclass(frozen=True)
class Outcome:
    headline: str | None
    shown: frozenset[str]  # the headline's leader and the members shown within the margin of it
    trainings: int
    measurements: int
    rounds: int
    confirmations: int  # confirmation blocks measured, over every round
    summary: dict[str, Any] = field(default_factory=dict, compare=False)  # summary.json's parts (`_summary`)
    trained: frozenset[str] = frozenset()  # the accuracy groups the answer trained
    tabled: frozenset[str] = frozenset()  # the accuracy groups the table pass trained, once each, after the answer


def _record(n: int, c: str, slot: Slot, y: float, group: str) -> Record:
    rate = math.exp(y)
    return Record(n, c, {"c": c}, "complete", block=slot.block, phase=slot.phase, position=slot.position,
                  metrics={"throughput": rate, "throughput_window_0": rate}, accuracy_group=group)


def run(study: Study, noise: float, protocol: ProtocolSettings, seed: int) -> Outcome:
    host = Host(study.truth, dict.fromkeys(study.truth, noise), seed)
    rng = np.random.default_rng(10**6 + seed)
    trainer = {}
    for c, g in study.groups.items():
        trainer.setdefault(g, c)
    raw: list[Record] = []
    answered: tuple[Any, ...] | None = None  # the answer as its own trainings left it

    def measure(slots: list[Slot]) -> None:
        for s in slots:
            raw.append(_record(len(raw), s.combination, s, host.measure(s).log_throughput, study.groups[s.combination]))

    def train(g: str, index: int, place: int, phase: str) -> None:
        acc = 99.0 + study.change[g] + rng.normal(0.0, study.seed_sd)
        raw.append(Record(len(raw), trainer[g], {"c": trainer[g]}, "complete", block=-1 - index, position=place,
                          phase=phase, seed_index=index, accuracy_trained=True, accuracy_group=g,
                          metrics={"throughput": 1.0, "test_accuracy": acc, "test_samples": 10_000.0}))

    measure(screening_plan(list(study.truth), BASE, protocol, seed))
    for _ in range(200):
        stored = combine(raw)
        found = finalists.final(stored, study.tolerance, protocol)
        if found.next_block is not None:
            block = 1 + max(r.block for r in raw)
            measure(race_plan(list(found.next_block), BASE, block, seed, found.phase))
        elif found.parity_step is not None:
            index, todo = found.parity_step
            for place, g in enumerate(todo):
                train(g, index, place, PARITY)
        else:
            now = answer_of(stored, study.tolerance, protocol)
            answered = answered or now
            assert now == answered, (seed, now, answered)  # a study stopped here reports the same answer
            if table := ([] if protocol.quick else finalists.table(stored, found)):
                place, g = table[0]
                train(g, 0, len(trainer) + place, TABLE)
                continue
            return _outcome(stored, study, protocol, found, raw)
    raise AssertionError("the study never ended")


def answer_of(stored: list[Record], tolerance: float, protocol: ProtocolSettings) -> tuple[Any, ...]:
    """What the answer says: the leader, the headline, the leader's speed-up with its interval, the headline's parity
    verdict, the members and their equivalence tests, the rounds run."""
    rec = verdicts.recommendation(stored, tolerance, protocol)
    if rec is None:
        return (None,)
    s = rec.speedup
    return (rec.leader.combination, rec.pick.combination, s.estimate if s else None, s.interval if s else None,
            rec.parity, tuple(m.combination for m in rec.members), rec.equivalence, rec.rounds)


def _outcome(stored: list[Record], study: Study, protocol: ProtocolSettings, found: finalists.Final,
             raw: list[Record]) -> Outcome:
    compared = comparison.compare(stored, study.tolerance, protocol)[0]
    rec = compared.recommendation
    shown = {c for c, e in rec.equivalence.items() if e.shown} | {rec.leader.combination} if rec else set()
    return Outcome(rec.pick.combination if rec else None, frozenset(shown),
                   sum(r.phase == PARITY for r in raw), sum(r.phase not in TRAININGS for r in raw), found.round + 1,
                   len({r.block for r in raw if r.phase == CONFIRM}), _summary(compared),
                   frozenset(r.accuracy_group for r in raw if r.phase == PARITY),
                   frozenset(r.accuracy_group for r in raw if r.phase == TABLE))


def _summary(compared: comparison.DeviceComparisons) -> dict[str, Any]:
    """What summary.json would carry of this study for `benchmarks.reproducibility.compare`: its speed-ups and its
    recommendation as `ablate.render.summaries` renders them, and the baseline's spread across blocks (the host's
    noise as `ablate.stats.answer.findings` measures it, by which the benchmark picks its band)."""
    cv = baseline_cv(speedups.protocol_measurements(compared.records), BASE)
    return {"speedups": [summaries.entry(c, "samples", compared.energy_counted) for c in compared.rows if c.speedup],
            "recommendation": summaries.recommendation(compared, "samples", lambda r: ("", "")),
            "protocol": {"baseline_cv_across_blocks": cv}}
