"""Each combination's speed-up over the baseline, with its confidence interval: the figure every surface leads with.

A speed-up is the protocol's one estimator (`ablate.stats.protocol.estimates`): paired against the baseline of the
same block, its interval from between-process noise. This module reads the stored records into the protocol's
measurements, keeps each estimate beside its record (`Speedup`), and puts two speed-ups against each other
(`Speedup.over`). Energy per sample is estimated the same way (`energy_ratios`), on log joules per sample.

Throughput is analysed on the log scale, so a speed-up is a factor (x1.30 = 30% more samples per second) and its
interval stays positive. `Interval` is that interval's type, on either scale; the factorial effects
(`ablate.stats.screening.effects`) and the costs (`ablate.stats.answer.costs`) give theirs in it too. One pair of names
on every type that carries a speed-up (`ablate.stats.Estimate`, `Speedup`, `comparison.Comparison`): `point`, the factor
as a float, and `interval`, the factor's interval (on `Estimate`, its log-scale bounds).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from scipy import stats

from ablate.config.choices import BASELINE
from ablate.stats.protocol import CONFIDENCE, TRAININGS, Estimate, Measurement, estimates
from ablate.store.records import Record
from ablate.trial import metrics as metric


@dataclass(frozen=True)
class Interval:
    point: float
    low: float
    high: float

    @property
    def distinguishable(self) -> bool:
        """The interval excludes "no effect" (0 on an additive scale)."""
        return self.low > 0 or self.high < 0

    def exp(self) -> Interval:
        return Interval(math.exp(self.point), math.exp(self.low), math.exp(self.high))


@dataclass(frozen=True)
class Speedup:
    record: Record
    estimate: Estimate

    @property
    def log(self) -> Interval | None:
        bounds = self.estimate.interval(CONFIDENCE)
        return Interval(self.estimate.log, *bounds) if bounds else None

    @property
    def interval(self) -> Interval | None:
        return self.log.exp() if self.log else None

    @property
    def point(self) -> float:
        return self.estimate.point

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


def protocol_measurements(records: Sequence[Record]) -> list[Measurement[str]]:
    """The complete measurements of combination records, as the protocol reads them (keyed by combination)."""
    return [Measurement(r.combination, m.block, m.phase, m.log_throughput)
            for r in records for m in r.every_measurement
            if m.log_throughput is not None and m.phase not in TRAININGS]


def speedups(records: list[Record]) -> list[Speedup]:
    """Every complete combination's speed-up over the baseline of its blocks (`estimates`), fastest first."""
    found = estimates(protocol_measurements(records), BASELINE)
    out = [Speedup(r, found[r.combination]) for r in records if r.complete and r.combination in found]
    return sorted(out, key=lambda s: -s.estimate.log)


def speedup_of(records: list[Record]) -> dict[str, Speedup]:
    return {s.record.combination: s for s in speedups(records)}


def energy_ratios(records: list[Record]) -> dict[str, Estimate]:
    """Each combination's energy per sample over the baseline's, estimated as a speed-up is: `estimates`
    on log joules per sample (the protocol's per-process response, here not a throughput), paired in the blocks
    both counted energy in, its interval from those measurements' own noise. Only measurements that counted energy
    take part (`ablate.trial.energy`), so a combination has a ratio only where it and the baseline counted in a
    block they shared. Below 1: less energy per sample than the baseline."""
    counted = [Measurement(r.combination, m.block, m.phase, math.log(joules))
               for r in records for m in r.every_measurement
               if m.complete and m.phase not in TRAININGS
               and (joules := m.metrics.get(metric.ENERGY_J_PER_SAMPLE, 0.0)) > 0]
    return estimates(counted, BASELINE)
