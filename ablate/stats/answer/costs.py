"""What a technique costs besides its speed-up, in time: when a one-off cost (compilation) has paid for itself, and
how long training takes to reach the study's target.

- **Break-even** (`break_even`): a technique with a one-off cost against the same combination with it off (its eager
  counterpart): the extra one-off seconds, the saving per training step from the paired speed-up over that
  counterpart (`ablate.stats.speedups.Speedup.over`, so drift between their blocks cancels), the steps until the one
  repays the other with 95% bounds, and the time to train the study's budget both ways.
- **Time to target** (`time_to_target`): each accuracy group's training time until it first reached the study's
  target accuracy (or loss), per seed, and end to end as a fresh start pays it (compiling cold).

Both are read from the stored records' own timings; the intervals are t intervals over the measurements or seeds.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import stats

from ablate.config.choices import OFF
from ablate.config.study import Study
from ablate.stats.protocol import CONFIDENCE, TRAININGS
from ablate.stats.speedups import Interval, Speedup, speedup_of
from ablate.store.records import Record, cold_measurement, fresh_start_extra_s
from ablate.trial import metrics as metric


@dataclass(frozen=True)
class BreakEven:
    record: Record
    eager: Record  # the same combination with the technique off
    technique: str
    extra_s: float  # one-off cost over the eager counterpart: preparation plus first step
    saving_per_step_s: float
    steps: float | None  # training steps until the one-off cost is repaid; None: never (slower per step)
    budget_s: float  # time to train the study's budget, one-off cost included
    eager_budget_s: float
    measured: bool  # budget times measured end to end (both trained the full budget), else estimated
    # 95% bounds on `steps` from the intervals of the speed-up over the eager counterpart and of the eager step
    # time (the one-off cost taken as measured); a None bound: never (not faster per step at that end).
    steps_interval: tuple[float | None, float | None] | None = None


def _half_width(xs: Sequence[float]) -> float | None:
    """Half the 95% t interval of the mean of `xs` (None: fewer than two)."""
    if len(xs) < 2:
        return None
    return float(stats.t.ppf(0.5 + CONFIDENCE / 2, len(xs) - 1) * np.std(xs, ddof=1) / math.sqrt(len(xs)))


def _steps(extra_s: float, eager_step_s: float, factor: float) -> float | None:
    """Steps until `extra_s` is repaid by running `factor` times as fast as a step of `eager_step_s`."""
    saving = eager_step_s * (1 - 1 / factor)
    return max(0.0, extra_s / saving) if saving > 0 else None


def _one_off_s(r: Record) -> float:
    if metric.ONE_OFF_S in r.metrics:  # the trial's own sum, which includes steps 2-3's one-off work
        return r.metrics[metric.ONE_OFF_S]
    return r.metrics.get(metric.PREPARE_MODEL_S, 0.0) + r.metrics.get(metric.FIRST_STEP_S, 0.0)


def _budget_s(r: Record, budget_samples: int, units_per_sample: int) -> tuple[float, bool]:
    # A training that started from a warm compile cache did not pay the one-off cost a fresh start pays: its
    # budget time is estimated from the cold one-off cost (ablate.store.records.combine) instead.
    if r.accuracy_trained and r.metrics.get(metric.TRAIN_TIME_S) and not r.metrics.get(metric.COMPILE_CACHE_WARM):
        return r.metrics.get(metric.PREPARE_MODEL_S, 0.0) + r.metrics[metric.TRAIN_TIME_S], True
    rest = max(0, budget_samples - (r.batch_size or 0))
    throughput = r.throughput
    assert throughput is not None, r.combination  # a complete record's
    return _one_off_s(r) + rest * units_per_sample / throughput, False


def break_even(records: list[Record], study: Study, found: dict[str, Speedup] | None = None) -> list[BreakEven]:
    """When each technique with a one-off cost (compilation) has paid for itself; `found`: the speed-ups, if known."""
    index = {tuple(sorted(r.levels.items())): r for r in records if r.complete}
    per_sample = study.task.units_per_sample  # throughput counts tokens for a language model; steps count samples
    found = speedup_of(records) if found is None else found
    out = []
    for r in records:
        if not r.complete:
            continue
        for dim, level in r.levels.items():
            option = study.options(dim).get(level)
            if not option or not option.one_off_cost:
                continue
            eager = index.get(tuple(sorted({**r.levels, dim: OFF}.items())))
            if eager is None or not r.batch_size:
                continue
            rate, eager_rate = r.throughput, eager.throughput
            assert rate is not None and eager_rate is not None  # complete records
            extra = _one_off_s(r) - _one_off_s(eager)
            eager_step_s = r.batch_size * per_sample / eager_rate
            # The paired speed-up over the eager counterpart where both have one: drift between their blocks cancels.
            mine, theirs = found.get(r.combination), found.get(eager.combination)
            factor = mine.over(theirs) if mine and theirs else None
            point = factor.point if factor else rate / eager_rate
            spread = _half_width([m.log_throughput for m in eager.every_measurement
                                  if m.log_throughput is not None and m.phase not in TRAININGS])
            # Steps fall as the eager step time and the speed-up grow: each bound takes both at their matching ends
            # (two 95% intervals: the pair covers at least 90%, and in practice more, since the ends rarely meet).
            bounds = ((_steps(extra, eager_step_s * math.exp(spread), factor.high),
                       _steps(extra, eager_step_s * math.exp(-spread), factor.low))
                      if factor and spread is not None else None)
            (budget, m1), (eager_budget, m2) = (_budget_s(r, study.budget.train_samples, per_sample),
                                                _budget_s(eager, study.budget.train_samples, per_sample))
            out.append(BreakEven(r, eager, level, extra, eager_step_s * (1 - 1 / point),
                                 _steps(extra, eager_step_s, point), budget, eager_budget, m1 and m2, bounds))
    return out


@dataclass(frozen=True)
class TimeToTarget:
    """Training time until an accuracy group first reached the study's target, at each of its seeds."""

    group: str
    seconds: tuple[float | None, ...]  # per seed; None: not reached within the budget
    e2e_seconds: tuple[float | None, ...]

    @property
    def reached(self) -> int:
        return sum(s is not None for s in self.seconds)

    def mean(self, e2e: bool = False) -> float | None:
        """The mean over the seeds that reached the target; None: none did."""
        reached = [x for x in (self.e2e_seconds if e2e else self.seconds) if x is not None]
        return float(np.mean(reached)) if reached else None

    def interval(self, e2e: bool = False) -> Interval | None:
        """`mean` with a 95% t interval from the seeds' spread; None unless every seed (two or more) reached it."""
        xs = self.e2e_seconds if e2e else self.seconds
        reached = [x for x in xs if x is not None]
        mean, half = self.mean(e2e), _half_width(reached)
        if len(xs) < 2 or len(reached) < len(xs) or mean is None or half is None:
            return None
        return Interval(mean, mean - half, mean + half)


def time_to_target(records: list[Record]) -> list[TimeToTarget]:
    """Every accuracy group's time to the target accuracy (or loss), one value per training seed, fastest first;
    end to end as a fresh start pays it, compiling cold (`records.fresh_start_extra_s`)."""
    found: dict[str, dict[int, tuple[float | None, float | None]]] = {}
    by_number = {m.number: m for r in records for m in r.every_measurement}
    for r in records:  # its own cold measurement, else the sibling's it borrowed its one-off cost from
        cold = cold_measurement(r.measurements) or (None if r.one_off_from is None else by_number.get(r.one_off_from))
        for m in r.every_measurement:
            if m.complete and m.accuracy_trained and metric.TARGET_REACHED in m.metrics:
                reached, e2e = bool(m.metrics[metric.TARGET_REACHED]), m.metrics.get(metric.TIME_TO_TARGET_E2E_S)
                found.setdefault(m.accuracy_group or m.combination, {}).setdefault(m.seed_index, (
                    m.metrics.get(metric.TIME_TO_TARGET_S) if reached else None,
                    e2e + fresh_start_extra_s(m, cold) if reached and e2e is not None else None))
    out = [TimeToTarget(g, tuple(by_seed[k][0] for k in sorted(by_seed)), tuple(by_seed[k][1] for k in sorted(by_seed)))
           for g, by_seed in found.items()]
    return sorted(out, key=lambda t: (-t.reached, np.mean([s for s in t.seconds if s is not None] or [math.inf])))
