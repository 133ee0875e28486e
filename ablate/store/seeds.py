"""A run's seeds: the protocol's (the blocks' random orders) and training's (initialisation and data order).

Why: two runs that share one randomization and one training seed are not
independent: their screening plans and their accuracies are identical, so
comparing them measures timing noise under one fixed design. Each run draws
its own unless the study file pins `budget.seed`; they are stored with the
run's measurements (`study_record.StudyRecord.seeds`), so a resume keeps them, and printed and written to
summary.json (`seeds`). Parity's extra seeds (`ablate.stats.parity`) are the
training seed plus their index: distinct within the run, reproducible from it.
"""
from __future__ import annotations

import random
from typing import Any, Mapping

PROTOCOL, TRAINING = "protocol", "training"


def resolve(stored: Mapping[str, Any] | None, pinned: int | None) -> dict[str, int]:
    """The stored seeds (a resumed run), else the pinned one for both, else two drawn from the system's
    entropy (not Python's seeded generator: tests and libraries seed that one)."""
    if stored:
        return {PROTOCOL: int(stored[PROTOCOL]), TRAINING: int(stored[TRAINING])}
    if pinned is not None:
        return {PROTOCOL: pinned, TRAINING: pinned}
    draw = random.SystemRandom()
    return {PROTOCOL: draw.randrange(2**31), TRAINING: draw.randrange(2**31)}


def training(seeds: Mapping[str, int], index: int) -> int:
    """The training seed of parity seed `index` (0: the run's own)."""
    return seeds[TRAINING] + index


def describe(seeds: Mapping[str, int]) -> str:
    return f"protocol seed {seeds[PROTOCOL]}, training seed {seeds[TRAINING]}"
