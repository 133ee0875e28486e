"""A whole study as the runner plans it, race first and accuracy last, on a simulated host and simulated seeds.

Every step asks `ablate.stats.finalists.final` (what `Planner.plan` turns into slots) on the stored records so far:
a race or confirmation block is measured on `test_decisions.Host`; a parity step trains each named group at that
seed, its test accuracy 99 + its true change + N(0, `seed_sd`) points; then the answer is what the report reads
(`ablate.stats.comparison.compare`). Records are built as the store holds them (numbered in queue order, combined).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from test_decisions import BASE, Host

from ablate.stats import comparison, finalists, protocol
from ablate.stats.protocol import ProtocolSettings
from ablate.store.records import PARITY, Record, combine


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


def _record(n: int, c: str, slot: protocol.Slot, y: float, group: str) -> Record:
    rate = math.exp(y)
    return Record(n, c, {"c": c}, "complete", block=slot.block, phase=slot.phase, position=slot.position,
                  metrics={"throughput": rate, "throughput_window_0": rate}, accuracy_group=group)


def run(study: Study, noise: float, settings: ProtocolSettings, seed: int) -> Outcome:
    host = Host(study.truth, dict.fromkeys(study.truth, noise), seed)
    rng = np.random.default_rng(10**6 + seed)
    trainer = {}
    for c, g in study.groups.items():
        trainer.setdefault(g, c)
    raw: list[Record] = []

    def measure(slots: list[protocol.Slot]) -> None:
        for s in slots:
            raw.append(_record(len(raw), s.combination, s, host.measure(s).log_throughput, study.groups[s.combination]))

    measure(protocol.screening_plan(list(study.truth), BASE, settings, seed))
    for _ in range(200):
        stored = combine(raw)
        found = finalists.final(stored, study.tolerance, settings)
        if found.next_block is not None:
            block = 1 + max(r.block for r in raw)
            measure(protocol.race_plan(list(found.next_block), BASE, block, seed, found.phase))
        elif found.parity_step is not None:
            index, todo = found.parity_step
            for place, g in enumerate(todo):
                acc = 99.0 + study.change[g] + rng.normal(0.0, study.seed_sd)
                raw.append(Record(len(raw), trainer[g], {"c": trainer[g]}, "complete", block=-1 - index, position=place,
                                  phase=PARITY, seed_index=index, accuracy_trained=True, accuracy_group=g,
                                  metrics={"throughput": 1.0, "test_accuracy": acc, "test_samples": 10_000.0}))
        else:
            rec = comparison.compare(stored, study.tolerance, settings)[0].recommendation
            shown = {c for c, e in rec.equivalence.items() if e.shown} | {rec.leader.combination} if rec else set()
            return Outcome(rec.pick.combination if rec else None, frozenset(shown),
                           sum(r.phase == PARITY for r in raw), sum(r.phase != PARITY for r in raw), found.round + 1,
                           len({r.block for r in raw if r.phase == protocol.CONFIRM}))
    raise AssertionError("the study never ended")
