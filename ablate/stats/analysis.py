"""What each technique is worth: speed-ups with confidence intervals, factorial effects, the break-even of one-off
costs, the time to a target, and the compose line that reproduces a combination (gathered for every surface, once per
device, by `ablate.stats.findings`). Speed-ups are the protocol's one estimator (`ablate.stats.protocol.estimates`:
paired against the baseline of the same block, intervals from between-process noise); effects come from a
least-squares fit (statsmodels) of every measurement's log throughput with the block as a factor. Throughput is
analysed on the log scale, so speed-ups and effects are factors (x1.30 = 30% more samples per second) and intervals
stay positive.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from itertools import combinations
from typing import Mapping, Sequence

import numpy as np
from scipy import stats

from ablate.config.choices import BASELINE, OFF
from ablate.config.study import Study
from ablate.stats import protocol
from ablate.store.records import Record, cold_measurement, fresh_start_extra_s
from ablate.trial import metrics as metric
from ablate.words import count

CONFIDENCE = 0.95
MIN_RESIDUAL_DF = 2  # fewer residual degrees of freedom leave no usable noise estimate


@dataclass(frozen=True)
class Interval:
    estimate: float
    low: float
    high: float

    @property
    def distinguishable(self) -> bool:
        """The interval excludes "no effect" (0 on an additive scale)."""
        return self.low > 0 or self.high < 0

    def exp(self) -> Interval:
        return Interval(math.exp(self.estimate), math.exp(self.low), math.exp(self.high))


@dataclass(frozen=True)
class Speedup:
    record: Record
    estimate: protocol.Estimate

    @property
    def log(self) -> Interval | None:
        bounds = self.estimate.interval(CONFIDENCE)
        return Interval(self.estimate.log, *bounds) if bounds else None

    @property
    def factor(self) -> Interval | None:
        return self.log.exp() if self.log else None

    @property
    def point(self) -> float:
        return self.estimate.factor

    def over(self, other: Speedup, confidence: float = CONFIDENCE) -> Interval | None:
        """This combination's throughput over `other`'s, as a factor with its interval.

        Both estimates are paired against the baselines of their blocks; where they share blocks their
        errors share those baselines' noise and are positively correlated, so the plain sum of variances
        (and the smaller of the two degrees of freedom) is conservative: the interval is at least as wide
        as the paired one would be.
        """
        a, b = self.estimate, other.estimate
        if a.se is None or b.se is None:
            return None
        log, se = a.log - b.log, math.hypot(a.se, b.se)
        # The baseline's own estimate is exact (x1.00).
        df = min(e.df for e, e_se in ((a, a.se), (b, b.se)) if e_se > 0) if se > 0 else 1
        half = stats.t.ppf(0.5 + confidence / 2, max(1, df)) * se
        return Interval(log, log - half, log + half).exp()


def protocol_measurements(records: Sequence[Record]) -> list[protocol.Measurement[str]]:
    """The complete measurements of combination records, as the protocol reads them (keyed by combination)."""
    return [protocol.Measurement(r.combination, m.block, m.phase, m.log_throughput)
            for r in records for m in (r.measurements or (r,))
            if m.log_throughput is not None and m.phase != protocol.PARITY]


def speedups(records: list[Record]) -> list[Speedup]:
    """Every complete combination's speed-up over the baseline of its blocks (`protocol.estimates`), fastest first."""
    found = protocol.estimates(protocol_measurements(records), BASELINE)
    out = [Speedup(r, found[r.combination]) for r in records if r.complete and r.combination in found]
    return sorted(out, key=lambda s: -s.estimate.log)


def speedup_of(records: list[Record]) -> dict[str, Speedup]:
    return {s.record.combination: s for s in speedups(records)}


def energy_ratios(records: list[Record]) -> dict[str, protocol.Estimate]:
    """Each combination's energy per sample over the baseline's, estimated as a speed-up is: `protocol.estimates`
    on log joules per sample (the protocol's per-process response, here not a throughput), paired in the blocks
    both counted energy in, its interval from those measurements' own noise. Only measurements that counted energy
    take part (`ablate.trial.energy`), so a combination has a ratio only where it and the baseline counted in a
    block they shared. Below 1: less energy per sample than the baseline."""
    counted = [protocol.Measurement(r.combination, m.block, m.phase, math.log(joules))
               for r in records for m in (r.measurements or (r,))
               if m.complete and m.phase != protocol.PARITY
               and (joules := m.metrics.get(metric.ENERGY_J_PER_SAMPLE, 0.0)) > 0]
    return protocol.estimates(counted, BASELINE)


@dataclass(frozen=True)
class Effect:
    techniques: tuple[str, ...]  # one for a main effect, two for an interaction
    dims: tuple[str, ...]  # their dimensions
    interval: Interval  # on the response's scale (log throughput, or accuracy points); simultaneous (fit_effects)
    p_value: float  # Bonferroni-adjusted over the fit's terms, as the interval is

    @property
    def term(self) -> str:
        return " x ".join(self.techniques)

    @property
    def interaction(self) -> bool:
        return len(self.techniques) == 2


@dataclass(frozen=True)
class EffectFit:
    response: str
    effects: tuple[Effect, ...]
    n: int
    residual_df: int
    full_factorial: bool
    interactions: bool
    note: str

    def main(self) -> list[Effect]:
        return [e for e in self.effects if not e.interaction]

    def pairs(self) -> list[Effect]:
        return [e for e in self.effects if e.interaction]


@dataclass(frozen=True)
class Observation:
    levels: dict[str, str]
    value: float
    block: int | None = None  # None: no block factor (one value per combination)


def throughput_observations(records: list[Record]) -> list[Observation]:
    """Every complete measurement's log throughput, with its block."""
    return [Observation(dict(m.levels), m.log_throughput, m.block)
            for r in records for m in (r.measurements or (r,))
            if m.log_throughput is not None and m.phase != protocol.PARITY]


def accuracy_observations(records: list[Record]) -> list[Observation]:
    """Accuracy of the trials that trained it (inherited copies would count one measurement many times)."""
    return [Observation(dict(r.levels), r.accuracy) for r in records
            if r.complete and r.accuracy_trained and r.accuracy is not None]


def technique_columns(levels: Sequence[Mapping[str, str]], dims: Sequence[str]) -> dict[tuple[str, str], np.ndarray]:
    """Each technique (a dimension's non-off choice among `levels`), in `dims` order, as a 0/1 column over `levels`:
    the design matrix of the effect fits (`fit_effects`, `ablate.stats.factorial`)."""
    techniques = [(d, level) for d in dims for level in sorted({lv.get(d, OFF) for lv in levels} - {OFF})]
    return {(d, level): np.array([float(lv.get(d, OFF) == level) for lv in levels]) for d, level in techniques}


def crossed_pairs(columns: Mapping[tuple[str, str], np.ndarray]) -> list[tuple[tuple[str, str], tuple[str, str]]]:
    """The pairs of techniques from different dimensions whose four on/off combinations all occur in `columns`:
    those whose interaction the rows can estimate."""
    return [(t1, t2) for t1, t2 in combinations(columns, 2)
            if t1[0] != t2[0] and all(((columns[t1] == i) & (columns[t2] == j)).any() for i in (0, 1) for j in (0, 1))]


def fit_effects(observations: list[Observation], dims: list[str], name: str) -> EffectFit | str:
    """Main effects and two-way interactions of the techniques in `dims` on `response`.

    Each technique (a dimension's non-off choice) is a 0/1 column; each pair of
    techniques from different dimensions adds the product of their centred
    columns. In a full factorial this makes a main effect's coefficient the
    average change when the technique is switched on, over every combination
    of the others, and an interaction's coefficient the extra change when both
    are on beyond the sum of their separate changes. Observations with a block
    add the block as a factor (a column per block but the first), so drift
    between blocks does not pass for an effect. The residual (three-way and
    higher interactions plus process-to-process noise) is the noise estimate.
    Returns the reason instead when the observations cannot support a fit.

    The intervals are simultaneous over the reported terms (Bonferroni: each at 1 - 0.05 / terms), since the
    report prints a decision on each ("distinguishable"): with pointwise intervals one null term in twenty
    would be called distinguishable, and a table of 20 terms would call one in most studies. The familywise
    rate is simulated in tests/stats/test_analysis.py.
    """
    import statsmodels.api as sm

    rows = [(r, r.value) for r in observations if math.isfinite(r.value)]
    columns = technique_columns([r.levels for r, _ in rows], dims)
    techniques = list(columns)
    if not rows or not techniques:
        return "no varied technique has a measured result"
    y = np.array([v for _, v in rows])
    x = {f"{d}={lv}": col for (d, lv), col in columns.items()}
    labels = {f"{d}={lv}": lv for d, lv in techniques}
    main_cols = list(x)
    pair_cols = {}
    for (d1, l1), (d2, l2) in crossed_pairs(columns):
        a, b = x[f"{d1}={l1}"], x[f"{d2}={l2}"]
        pair_cols[(f"{d1}={l1}", f"{d2}={l2}")] = (a - a.mean()) * (b - b.mean())

    per_cell = Counter(tuple(sorted(r.levels.items())) for r, _ in rows)
    cells = set(per_cell)
    levels_per_dim = [1 + sum(1 for d, _ in techniques if d == dim) for dim in dict.fromkeys(d for d, _ in techniques)]
    full = len(cells) == math.prod(levels_per_dim)
    blocks = sorted({r.block for r, _ in rows if r.block is not None})
    block_cols = [np.array([float(r.block == b) for r, _ in rows]) for b in blocks[1:]]

    for with_pairs in (True, False):
        cols = main_cols + (list(pair_cols) if with_pairs else [])
        design = np.column_stack([np.ones(len(y))] + [x[c] if isinstance(c, str) else pair_cols[c] for c in cols]
                                 + block_cols)
        residual_df = len(y) - design.shape[1]
        separable = np.linalg.matrix_rank(design) == design.shape[1]
        if residual_df >= MIN_RESIDUAL_DF and separable:
            break
    else:
        if residual_df < MIN_RESIDUAL_DF:
            return (f"{count(len(y), 'measured combination')} are too few to separate "
                    f"{count(len(main_cols), 'technique')} from noise "
                    f"(need at least {len(main_cols) + 1 + MIN_RESIDUAL_DF})")
        return "the measured combinations cannot tell some techniques apart (they were always switched together)"

    fit = sm.OLS(y, design).fit()
    ci = fit.conf_int(alpha=(1 - CONFIDENCE) / len(cols))
    effects = []
    for i, col in enumerate(cols, start=1):  # the block columns come after: nuisance, not reported
        keys = (col,) if col in labels else col
        effects.append(Effect(tuple(labels[k] for k in keys), tuple(k.split("=", 1)[0] for k in keys),
                              Interval(float(fit.params[i]), float(ci[i][0]), float(ci[i][1])),
                              min(1.0, float(fit.pvalues[i]) * len(cols))))
    blocked = f", with the block as a factor ({len(blocks)} blocks)" if len(blocks) > 1 else ""
    if full:
        # Least squares weighs every measurement alike, so a raced combination measured many times pulls the
        # averages towards itself: say how unequal the weights are rather than claim an equal average.
        most, least = max(per_cell.values()), min(per_cell.values())
        weights = ("averages over every combination of the other techniques, each weighing equally" if most == least
                   else f"averages over every combination of the other techniques, each weighted by its number of "
                        f"measurements ({least} to {most}: the baseline and the raced ones weigh up to "
                        f"{most / least:g} times as much as one measured {'once' if least == 1 else f'{least} times'})")
        note = (f"Full factorial ({len(cells)} combinations, {len(y)} measurements{blocked}): main effects are "
                f"{weights}; the noise estimate is the residual after "
                f"main effects{' and two-way interactions' if with_pairs else ''} ({residual_df} degrees of freedom).")
    else:
        note = (f"Not a full factorial ({len(cells)} measured combinations{blocked}): effects are least-squares "
                f"estimates from "
                f"what was run, and are biased where the untried combinations would have behaved differently"
                f"{'' if with_pairs else '; too few trials to estimate interactions'}.")
    return EffectFit(name, tuple(effects), len(y), residual_df, full, with_pairs, note)


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
            point = factor.estimate if factor else rate / eager_rate
            spread = _half_width([m.log_throughput for m in eager.measurements or (eager,)
                                  if m.log_throughput is not None and m.phase != protocol.PARITY])
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
    by_number = {m.number: m for r in records for m in r.measurements or (r,)}
    for r in records:  # its own cold measurement, else the sibling's it borrowed its one-off cost from
        cold = cold_measurement(r.measurements) or (None if r.one_off_from is None else by_number.get(r.one_off_from))
        for m in r.measurements or (r,):
            if m.complete and m.accuracy_trained and metric.TARGET_REACHED in m.metrics:
                reached, e2e = bool(m.metrics[metric.TARGET_REACHED]), m.metrics.get(metric.TIME_TO_TARGET_E2E_S)
                found.setdefault(m.accuracy_group or m.combination, {}).setdefault(m.seed_index, (
                    m.metrics.get(metric.TIME_TO_TARGET_S) if reached else None,
                    e2e + fresh_start_extra_s(m, cold) if reached and e2e is not None else None))
    out = [TimeToTarget(g, tuple(by_seed[k][0] for k in sorted(by_seed)), tuple(by_seed[k][1] for k in sorted(by_seed)))
           for g, by_seed in found.items()]
    return sorted(out, key=lambda t: (-t.reached, np.mean([s for s in t.seconds if s is not None] or [math.inf])))


def compose_line(record: Record, study: Study) -> tuple[str, str]:
    """The import and the `compose(...)` line that reproduce `record`'s combination in a user's loop."""
    options = [study.options(d)[label] for d, label in record.levels.items() if label != OFF]
    calls = [o.code for o in options if o.name]
    names = sorted({c.split("(")[0] for c in calls} | {"compose"})
    return f"from strategies import {', '.join(names)}", f"stack = compose({', '.join(calls)})"
