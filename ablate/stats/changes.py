"""What changed between two studies of one workload, row by row: B's speed-up over A's, with a verdict.

A *change* is two studies side by side: the same study after a torch upgrade, on another machine, with a new model
version (`ablate compare`; `ablate.stats.answer.comparison` stays one combination against its baseline). Each row is a
combination's log speed-up in each study (`Side`: log, standard error, degrees of freedom, whether the study only
predicted it from a screened fraction), plus the baseline's own level under `BASELINE_ABSOLUTE`: a ratio of speed-ups
hides an upgrade that slows everything, its absolute throughput does not. Reading the studies is the caller's.

- **The contrast.** d = log B - log A, se = sqrt(se_A^2 + se_B^2): the two studies are independent. Its degrees of
  freedom by Welch-Satterthwaite from each side's (a side known exactly, or on infinite df, adds none). A side with
  no spread (se None, or a spread on no degrees of freedom) gives the row no interval: "no change shown", no bound.
- **The family** is the rows that can be called moved: measured in both (a prediction in either is labelled
  `PREDICTED`, never moved nor same) with a spread, the absolute row among them; m of them.
- **Moved**: Holm's step-down on the two-sided t p-values at `alpha`, so P(any row called moved when
  none moved) <= alpha under any dependence: the rows of one study share its baselines, so they are correlated.
  Holm rejects everything Bonferroni does and more.
- **One interval per verdict.** Each row's interval is the one its verdict was read from, so a reader can check every
  verdict on the printed interval: a row Holm did not call moved shows its Bonferroni interval (two-sided 1 - alpha/m),
  which then holds zero (its p is above alpha/m); a row it called moved at step j (0-based, smallest p first) shows
  the interval at that step's level, 1 - alpha/(m - j), which excludes zero. The first step's is Bonferroni's.
- **Same**: a row not moved is the same where its interval lies within +-`margin` (|log ratio| < log(1 + margin)):
  two one-sided tests, each at alpha/(2m) (intersection-union; Bonferroni over the family), so P(any row called same
  while it moved by the margin or more) <= alpha/2. Each test at alpha/m would judge "same" on an interval narrower
  than the one printed (1 - 2 alpha/m); the printed one decides instead, for agreement, at little cost in power.
- **Neither**: `NOT_SHOWN`, with `bound`: what the interval still allows either way, exp(max(|low|, |high|)) - 1,
  "no change shown (up to +-X%)", and `detectable`: the change the row would be called moved at 80% power,
  exp((t_{1-alpha/(2m)} + t_{0.80}) se) - 1 on its df (Bonferroni's first step: a floor on Holm's power).
- **The margin**: `DEFAULT_MARGIN` is `ablate.stats.race.equivalence.CAP`, 5%, for the same reason: a stack more than 5%
  slower is not the same whatever the noise. No default derived from the design, as the protocol's is: the study
  pair's own noise would set what "same" means, and a noisy pair would call a 20% change the same. What the design
  can show is said instead: each row's `showable` (the smallest margin its interval could show were d none, as
  `equivalence.showable` for a race's pair), and `design_margin` over the rows.

Simulated on pairs of independent studies of a 16-row grid (tests/stats/test_changes.py; ABLATE_FULL_SIMULATIONS=1
runs the full counts): with nothing changed, any row reads moved within the family rate; one row changed by less
than its `detectable` is seldom called moved; a change of every throughput moves the absolute row while the
speed-ups stay within the family rate; a row moved by exactly the margin is called same within alpha/2. The rates:
docs/evidence.md, "Evidence: comparing two studies".

The absolute row's standard error is across one study's blocks: a machine that drifts between days (which two
studies do not share) reads moved there more often than the family rate; the simulations hold no such drift.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from ablate.stats.race.equivalence import CAP

BASELINE_ABSOLUTE = "baseline (absolute throughput)"  # the row of the baselines' own level (log throughput)
MOVED, SAME, NOT_SHOWN, ONLY_A, ONLY_B, PREDICTED = (
    "moved", "same", "no change shown", "only in A", "only in B", "a model prediction")
DEFAULT_MARGIN = CAP  # "same" means within 5% either way
POWER = 0.80  # `detectable`: the change a row is called moved at, this often


@dataclass(frozen=True)
class Side:
    """One study's row: a log speed-up over its baseline (the absolute row: log throughput), its standard error and
    degrees of freedom (math.inf: a known variance); `predicted`: from a model of a screened fraction, not measured."""

    log: float
    se: float | None
    df: float
    predicted: bool = False

    @property
    def spread(self) -> bool:
        """Whether it has a standard error to test with: one known exactly, or estimated on some degrees of freedom."""
        return self.se is not None and (self.se == 0 or self.df > 0)


@dataclass(frozen=True)
class Change:
    """One row of a change: B over A on the log scale, its interval (the one its verdict was read from) and verdict."""

    row: str  # a combination, or BASELINE_ABSOLUTE
    a: Side | None
    b: Side | None
    log: float | None  # log B - log A: the speed-up's ratio (the absolute row: the throughputs')
    low: float | None
    high: float | None
    verdict: str
    detectable: float | None  # a fraction: the change called moved at POWER, at the family's level
    bound: float | None  # a fraction: how far either way the interval still allows, "up to +-X%"
    showable: float | None = None  # a fraction: the smallest margin the row could be shown the same within
    se: float | None = None
    df: float | None = None
    p: float | None = None  # two-sided, of "nothing moved" (Holm adjusts the level, not this)

    @property
    def ratio(self) -> float | None:
        return None if self.log is None else math.exp(self.log)

    @property
    def interval(self) -> tuple[float, float] | None:
        return None if self.low is None or self.high is None else (math.exp(self.low), math.exp(self.high))


def welch_df(a: Side, b: Side) -> float:
    """The Welch-Satterthwaite degrees of freedom of log B - log A; math.inf where neither side's variance is
    estimated on finite degrees of freedom."""
    sides = [(s.se or 0.0, s.df) for s in (a, b)]
    parts = [se ** 4 / df for se, df in sides if se and math.isfinite(df)]
    return sum(se ** 2 for se, _ in sides) ** 2 / sum(parts) if parts else math.inf


def holm(p: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Which rows Holm's step-down calls moved, and each row's two-sided level: its step's where called moved,
    Bonferroni's (alpha/m) elsewhere. Not statsmodels' `multipletests`: it runs gc.collect() on every call (0.17 s
    here), which the simulations call thousands of times."""
    m = len(p)
    order = np.argsort(p, kind="stable")
    passed = p[order] <= alpha / (m - np.arange(m))
    called = np.zeros(m, bool)
    called[order] = np.cumprod(passed).astype(bool)  # every step up to the first it fails
    step = np.empty(m, int)
    step[order] = np.arange(m)
    return called, np.where(called, alpha / (m - step), alpha / max(1, m))


def _t(q: float | np.ndarray, df: np.ndarray) -> np.ndarray:
    return np.asarray(stats.t.ppf(q, df), float)


def change(a: Mapping[str, Side], b: Mapping[str, Side], margin: float = DEFAULT_MARGIN,
           alpha: float = 0.05) -> list[Change]:
    """Every row of `a` and `b` (A's order, then B's rows A lacks), judged as the module docstring says."""
    if not 0 < margin or not 0 < alpha < 1:
        raise ValueError(f"margin above 0 and alpha in (0, 1); got {margin!r}, {alpha!r}")
    rows = [*a, *(r for r in b if r not in a)]
    family = [r for r in rows if r in a and r in b and not (a[r].predicted or b[r].predicted)
              and a[r].spread and b[r].spread]
    m = len(family)
    d = np.array([b[r].log - a[r].log for r in family], float)
    se = np.array([math.hypot(a[r].se or 0.0, b[r].se or 0.0) for r in family], float)
    df = np.array([welch_df(a[r], b[r]) for r in family], float)
    with np.errstate(divide="ignore", invalid="ignore"):  # a row known exactly: moved exactly where d is not 0
        z = np.where(se > 0, np.abs(d) / se, np.where(d == 0, 0.0, np.inf))
    p = 2 * np.asarray(stats.t.sf(z, df), float)
    moved, level = holm(p, alpha)
    half = _t(1 - level / 2, df) * se
    first = _t(1 - alpha / (2 * max(1, m)), df)  # Bonferroni's two-sided quantile: the family's own level
    detectable = np.expm1((first + _t(POWER, df)) * se)
    showable = np.expm1(first * se)
    edge = math.log1p(margin)
    judged = {r: (i, MOVED if moved[i] else SAME if abs(d[i]) + half[i] < edge else NOT_SHOWN)
              for i, r in enumerate(family)}
    out = []
    for r in rows:
        sa, sb = a.get(r), b.get(r)
        if sa is None or sb is None:
            out.append(Change(r, sa, sb, None, None, None, ONLY_B if sa is None else ONLY_A, None, None))
        elif r in judged:
            i, verdict = judged[r]
            low, high = float(d[i] - half[i]), float(d[i] + half[i])
            out.append(Change(r, sa, sb, float(d[i]), low, high, verdict,
                              float(detectable[i]), math.expm1(max(-low, high)), float(showable[i]), float(se[i]),
                              float(df[i]), float(p[i])))
        else:
            out.append(_unjudged(r, sa, sb, alpha / max(1, m)))
    return out


def _unjudged(row: str, a: Side, b: Side, level: float) -> Change:
    """A row outside the family: a prediction in either study (its interval at the family's level where both have a
    spread), or one without a spread (no interval)."""
    verdict = PREDICTED if a.predicted or b.predicted else NOT_SHOWN
    d = b.log - a.log
    if not (a.spread and b.spread):
        return Change(row, a, b, d, None, None, verdict, None, None)
    se, df = math.hypot(a.se or 0.0, b.se or 0.0), welch_df(a, b)
    half = float(stats.t.ppf(1 - level / 2, df)) * se
    return Change(row, a, b, d, d - half, d + half, verdict, None, math.expm1(abs(d) + half), None, se, df)


def moved_beyond(changes: Sequence[Change], threshold: float) -> list[Change]:
    """The rows called moved whose change is beyond `threshold` either way (0.10: B's ratio above 1.10 or below
    1/1.10, the margin's symmetric scale), on the point estimate as pyperf and asv do: what a CI job fails on."""
    return [c for c in changes if c.verdict == MOVED and c.log is not None and abs(c.log) > math.log1p(threshold)]


def design_margin(changes: Sequence[Change]) -> float | None:
    """The smallest margin every judged row could be shown the same within, were nothing changed: the largest
    `showable` (a fraction); None where no row was judged. "Same" needs a row's interval inside +-margin."""
    found = [c.showable for c in changes if c.showable is not None]
    return max(found) if found else None
