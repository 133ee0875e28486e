"""A plan of measurements stored whole: written ahead in one write, queued slot by slot, then cleared.

Optuna queues one trial per write (`enqueue_trial`), so a stop part-way through a plan left the rest of it
unplanned, and a resume that found some slots planned took the plan for whole: it measured those and reported the
study finished. So a plan is first stored as the study's pending plan (one write of the study's user attrs, atomic
in every Optuna storage), and `complete` queues whichever of its slots no trial holds
(tests/store/test_plan.py). Queueing a slot twice is harmless (`ablate.store.claim` runs it once), so two
workers completing one plan is too.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import optuna

from ablate.store import records, study_record
from ablate.store.claim import params


@dataclass(frozen=True)
class Queued:
    """One planned measurement as it is queued: its combination's levels and label, and its slot."""

    levels: Mapping[str, str]
    block: int
    position: int
    phase: str
    combination: str
    seed_index: int = 0

    def stored(self) -> dict[str, Any]:
        return {"levels": dict(self.levels), "block": self.block, "position": self.position, "phase": self.phase,
                "combination": self.combination, "seed_index": self.seed_index}

    @property
    def key(self) -> tuple[Any, ...]:
        return tuple(sorted(self.levels.items())), self.block, self.position, self.phase, self.seed_index


def queue(optuna_study: optuna.Study, plan: Sequence[Queued]) -> None:
    """Queue `plan` whole: a stop part-way leaves it pending, for `complete` to finish."""
    if not plan:
        return
    study_record.set_pending_plan(optuna_study, [q.stored() for q in plan])
    _queue(optuna_study, plan)
    study_record.set_pending_plan(optuna_study, [])


def complete(optuna_study: optuna.Study) -> int:
    """Queue the slots of a plan that a stop left part-queued which no trial holds; how many it queued."""
    pending = [Queued(**q) for q in study_record.from_study(optuna_study).pending_plan]
    if not pending:
        return 0
    held = {_key(t) for t in optuna_study.get_trials(deepcopy=False) if records.from_trial(t).has_slot}
    missing = [q for q in pending if q.key not in held]
    _queue(optuna_study, missing)
    study_record.set_pending_plan(optuna_study, [])
    return len(missing)


def _queue(optuna_study: optuna.Study, plan: Sequence[Queued]) -> None:
    for q in plan:
        records.queue(optuna_study, q.levels, q.block, q.position, q.phase, q.combination, q.seed_index)


def _key(trial: optuna.trial.FrozenTrial) -> tuple[Any, ...]:
    r = records.from_trial(trial)
    return tuple(sorted(params(trial).items())), r.block, r.position, r.phase, r.seed_index
