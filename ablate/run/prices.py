"""What one measurement of a combination will take, in seconds, for the cost estimate (`ablate.run.estimate`).

A measurement's time follows its stack's throughput: its windows and its training are counted in samples. So a
stack at a sixth of the baseline's throughput (bf16 emulated on a CPU) trains about six times as long, and priced at
the mean of faster ones it reads far too short (docs/evidence.md, "Evidence: the cost estimate"). A combination's
own price, where one can be had:

- measured before, the same kind of measurement (a training or not): what it took, less its profiling window (a
  combination's first measurement runs one, `ablate.run.objective.profiles`; the race's and parity's do not) and
  less a cold compile's excess (`warmed`: Inductor's cache keeps a graph for every later process of the run, so a
  graph's first compile alone pays it, many times what a warm one takes);
- a training it has not had: its throughput-only measurement plus what a timed training adds - its longer loop as
  work at its throughput, its evaluation and start-up as timed (they need not follow the loop's throughput);
  without such a measurement, a timed training's loop as work at its throughput and the rest as timed; no training
  timed yet, its measurement plus the training samples it lacks, at its own training time per sample;
- never measured: those figures as a fit of the combinations measured predicts them - each technique multiplies a
  figure by its own factor (main effects on the log scale, least squares) - where the fit leaves a degree of freedom
  and has seen every technique the combination takes. The single pass queues every combination at once, so until
  this fit can be made its minutes price each at the mean.

None where none can be had: the estimate prices the measurement at its kind's mean.
"""
from __future__ import annotations

import math
import statistics
from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Callable, Mapping, Sequence

import numpy as np

from ablate.config.design import TRAININGS
from ablate.store.records import Record, State
from ablate.trial import metrics as metric


@dataclass(frozen=True)
class Done:
    """A measurement with a result, as the estimate reads it."""

    phase: str
    trained: bool  # it trained for accuracy
    began: float  # Unix seconds
    ended: float
    complete: bool = True  # a failure counts as done, but its duration says nothing of the others'
    samples: float | None = None  # what it trained (`metrics.TRAIN_SAMPLES`), and in how long (`TRAIN_TIME_S`)
    train_s: float | None = None
    combination: str = ""  # its label
    rate: float | None = None  # the throughput it measured
    profiled_s: float = 0.0  # its profiling window, which only a combination's first measurement runs
    first_steps_s: float = 0.0  # of `train_s`: the first step, and steps 2-3 beyond the steady state (compilation)
    cache_warm: bool | None = None  # whether its compile found every graph cached; None: it compiled nothing

    @property
    def seconds(self) -> float:
        return self.ended - self.began

    @property
    def training(self) -> bool:
        return self.trained or self.phase in TRAININGS


def done(r: Record) -> Done | None:
    """`r` as done, or None where it has no result or was skipped (it took no time)."""
    t = r.trial
    if t is None or t.datetime_start is None or t.datetime_complete is None or r.state == State.SKIPPED:
        return None
    m = r.metrics
    return Done(r.phase, r.accuracy_trained, t.datetime_start.timestamp(), t.datetime_complete.timestamp(),
                r.complete, m.get(metric.TRAIN_SAMPLES), m.get(metric.TRAIN_TIME_S), r.combination,
                m.get(metric.THROUGHPUT), metric.profiled_s(m),
                m.get(metric.FIRST_STEP_S, 0.0) + m.get(metric.EARLY_STEPS_EXCESS_S, 0.0),
                None if (warm := m.get(metric.COMPILE_CACHE_WARM)) is None else bool(warm))


def warmed(timed: Sequence[Done]) -> list[Done]:
    """`timed` as each would take measured again, its graphs cached: one that compiled on a cold cache less its first
    steps' excess over a warm compile's (the mean of those measured warm; with none yet, all of its first steps)."""
    warm = [d.first_steps_s for d in timed if d.cache_warm]
    floor = statistics.fmean(warm) if warm else 0.0
    return [_less(d, d.first_steps_s - floor) if d.cache_warm is False and floor < d.first_steps_s < d.seconds else d
            for d in timed]


def _less(d: Done, seconds: float) -> Done:
    """`d` had its first steps taken `seconds` less."""
    return replace(d, ended=d.ended - seconds, first_steps_s=d.first_steps_s - seconds,
                   train_s=None if d.train_s is None else max(0.0, d.train_s - seconds))


def extrapolated(train_samples: int, d: Done) -> float | None:
    """A training's seconds read from a throughput-only measurement `d`: its duration plus the training samples it
    lacks at its own steady training time per sample: its one-off costs left out (a cold compile's half minute,
    spread over a short measurement's samples, priced a whole training at many times its length), and its
    evaluations, an underestimate. None where it trained nothing."""
    if not d.samples or d.train_s is None:
        return None
    steady = max(d.train_s - d.first_steps_s, 0.0) or d.train_s
    return d.seconds + max(0.0, train_samples - d.samples) * steady / d.samples


def means(train_samples: int, timed: Sequence[Done]) -> tuple[float | None, float | None]:
    """The mean seconds of a throughput-only measurement and of an accuracy training (`extrapolated` from the
    throughput-only ones until one is timed); None where there is none of the kind."""
    fast = [d for d in timed if not d.training]
    slow = [d.seconds for d in timed if d.training] or [
        s for d in fast if (s := extrapolated(train_samples, d)) is not None]
    return (statistics.fmean(d.seconds for d in fast) if fast else None, statistics.fmean(slow) if slow else None)


def own(timed: Sequence[Done], train_samples: int,
        techniques: Mapping[str, frozenset[str]]) -> Callable[[str, bool], float | None]:
    """`price(combination, training)`: a measurement's own price in seconds, or None (the module docstring).
    `techniques`: each combination's choices besides the baseline's, to predict those never measured."""
    took: dict[str, list[float]] = defaultdict(list)  # a throughput-only measurement's seconds, by combination
    rates: dict[str, list[float]] = defaultdict(list)
    guessed: dict[str, list[float]] = defaultdict(list)
    loops: dict[str, list[float]] = defaultdict(list)  # a throughput-only measurement's loop, by combination
    again: dict[tuple[str, bool], list[float]] = defaultdict(list)  # measured again: no profiling window
    for d in timed:
        again[d.combination, d.training].append(d.seconds - d.profiled_s)
        if d.rate:
            rates[d.combination].append(d.rate)
        if not d.training:
            took[d.combination].append(d.seconds)
            loops[d.combination].append(_loop(d))
            if (read := extrapolated(train_samples, d)) is not None:
                guessed[d.combination].append(read)
    measured = {c: statistics.fmean(s) for c, s in took.items()}
    rate, timing, guess = (_fitted({c: statistics.fmean(v) for c, v in by.items()}, techniques)
                           for by in (rates, took, guessed))
    # What a training adds to its combination's throughput-only measurement, and what a whole one takes: its loop's
    # time in samples' worth of work (it follows the stack's throughput), the rest in seconds (evaluation and
    # start-up, which do not).
    trained = [d for d in timed if d.training and d.combination in rate]
    added = [(max(0.0, _loop(d) - statistics.fmean(loops[c])) * rate[c], d.seconds - _loop(d) - measured[c]
              + statistics.fmean(loops[c])) for d in trained if (c := d.combination) in measured]
    whole = [(_loop(d) * rate[d.combination], d.seconds - _loop(d)) for d in trained]

    def price(combination: str, training: bool) -> float | None:
        if (combination, training) in again:
            return statistics.fmean(again[combination, training])
        if not training:
            return timing.get(combination)
        if added and combination in timing and combination in rate:
            return timing[combination] + _at(added, rate[combination])
        if whole and combination in rate:  # no measurement of its own to add to (the single pass trains as it goes)
            return _at(whole, rate[combination])
        return guess.get(combination)

    return price


def missed(timed: Sequence[Done], train_samples: int, techniques: Mapping[str, frozenset[str]]) -> float | None:
    """How far a training's `own` price misses where it is read from its combination's throughput-only measurement
    and what the other trainings added: the mean square of log(took / price) over the trainings of each combination
    trained and measured throughput-only, priced without its own trainings (left out one combination at a time).
    None with fewer than two such combinations."""
    both = {d.combination for d in timed if d.training} & {d.combination for d in timed if not d.training}
    errors = []
    for c in sorted(both):
        price = own([d for d in timed if not (d.training and d.combination == c)], train_samples, techniques)(c, True)
        if price is not None and price > 0:
            errors += [math.log(d.seconds / price) ** 2 for d in timed if d.training and d.combination == c
                       and d.seconds > 0]
    return statistics.fmean(errors) if len(both) > 1 and errors else None


def _loop(d: Done) -> float:
    """The seconds of `d`'s training loop, its evaluations and profiling left out (`metrics.TRAIN_TIME_S`); all of
    its time where that was not stored."""
    return d.seconds if d.train_s is None else min(d.train_s, d.seconds)


def _at(extra: Sequence[tuple[float, float]], rate: float) -> float:
    """The mean of `extra` (samples' worth of work, seconds) as seconds at `rate`."""
    return statistics.fmean(work / rate + seconds for work, seconds in extra)


def _fitted(values: Mapping[str, float], techniques: Mapping[str, frozenset[str]]) -> dict[str, float]:
    """`values` (positive, by combination), and for each combination of `techniques` without one, what a fit of
    their logs on the techniques predicts: where the fit has a residual degree of freedom, full rank, and has seen
    each of the combination's techniques."""
    known = {c: v for c, v in values.items() if c in techniques and v > 0}
    seen = sorted(set().union(*(techniques[c] for c in known))) if known else []
    if len(known) <= len(seen) + 1:
        return dict(values)
    x = np.array([[1.0, *(float(t in techniques[c]) for t in seen)] for c in known])
    if np.linalg.matrix_rank(x) < x.shape[1]:
        return dict(values)
    beta = np.linalg.lstsq(x, np.log(list(known.values())), rcond=None)[0]
    effect = dict(zip(seen, beta[1:], strict=True))
    predicted = {c: float(np.exp(beta[0] + sum(effect[t] for t in ts)))
                 for c, ts in techniques.items() if c not in values and ts <= effect.keys()}
    return {**predicted, **values}
