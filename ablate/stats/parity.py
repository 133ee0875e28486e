"""Accuracy parity as a test: `ok`, `below` or `uncertain`, with an interval, over shared training seeds.

Why: one training seed against a hard cut misleads both ways. Test accuracy
moves from seed to seed, so a group 0.4 points worse with a 0.5-point
tolerance is flagged about a third of the time, and a group truly 0.6 points
worse passes as often (docs/measuring.md, "Accuracy parity is a test").

- **Shared seeds.** Every accuracy group (combinations that change the numbers
  alike) is trained with the same seeds as the baseline: the same
  initialisation and data order, so the paired change (group - baseline at
  one seed) cancels what the seed does to both.
- **The interval** of the mean paired change: its seed-to-seed variance,
  pooled over every group with two seeds or more, divided by the number of
  seeds, plus the paired binomial error of the shared test set, which no
  number of seeds removes. The binomial term is its smallest possible value -
  two classifiers that differ by D on a test set disagree on at least |D| of
  it - since per-example predictions are not stored. t quantile with the
  pooled degrees of freedom.
- **Its own spread.** Groups' seed noise can differ (fewer steps, half
  precision): pooled alone, a group whose seed SD is three times the others'
  was passed `ok` at the tolerance about four times as often as the nominal
  2.5%. So a group's variance is the larger of the pooled one
  and its own over F(`WIDEN_AT`), the F distribution's 35% quantile at its and
  the others' degrees of freedom: an upper bound on its own variance, read at
  the level that holds the noisier group to the nominal rate. Not the pooled
  one times its F against the others: the pooled variance already holds its
  own spread, and where the others' changes barely move that product grows
  without bound (docs/evidence.md, "Evidence: accuracy parity"). A
  group at one seed has no spread of its own: it is judged on the pooled one,
  as if its noise were the others'.
- **The verdict** is a non-inferiority test at the tolerance: `ok` when the
  interval's lower bound is above -tolerance, `below` when its upper bound is
  under it, else `uncertain`.
- **Probably below**: an `uncertain` group whose mean change itself is under
  -tolerance. It keeps its verdict (the interval did not decide it), but like
  a `below` one it is never raced or recommended (`Parity.ineligible`): its
  best estimate says it loses more than the tolerance, and an interval widened
  by its own spread must not make it a candidate. Eligibility by the verdict
  alone put a group 2 points down at a tolerance of 1 out of one run and into
  the recommended stack of the next (docs/measuring.md, "Accuracy parity is a
  test"). It still gets its further seeds, as every `uncertain` group does:
  one more may move its estimate back within the tolerance.
- **The parity race:** every group worth it is trained at `MIN_SEEDS` seeds
  (from its first, where screening did not train it); one still `uncertain`
  gets another seed (and the baseline with it) until it is decided or has
  `max_seeds`, and one that decides the answer is not passed `ok` on fewer than
  `OK_SEEDS` (its own spread at 2 degrees of freedom) where `max_seeds`
  allows them. Which groups are worth it, which of them decide, and which
  train past `MIN_SEEDS` whatever their verdict, is the caller's to say
  (`ablate.stats.race.finalists.seeds_wanted`: the race's final set and the
  baseline, then the next-fastest groups only as far as the spread needs
  for `NOISE_DF` degrees of freedom).

Why this rule. Simulated as in tests/stats/test_decisions.py and tests/stats/test_probably_below.py, against the
spread pooled alone, the pooled variance times its F, a heterogeneity test, and other seed counts: it holds a group
three times noisier than the others near the nominal rate at the tolerance, where pooling alone passes it four
times as often. It pays for that in power, though no rule at three seeds does much better. `OK_SEEDS` costs about
one training a study and no power. Probably below makes a group eligible exactly where its mean paired
change is at or above -tolerance (`ok` puts the mean above it, `below` under it): the interval still says how sure
that is (the verdict, and the seeds it gets), not whether it may be raced; the price is paid within the tolerance.
The rates: docs/measuring.md, "Accuracy parity is a test"; docs/evidence.md, "Evidence: accuracy parity".
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Collection, Generic, Hashable, Mapping, TypeVar

from scipy import stats

from ablate.config.design import CONFIDENCE
from ablate.words import points

MIN_SEEDS = 2  # every group worth it: two seeds give the seed-to-seed spread its first degrees of freedom
OK_SEEDS = 3  # a group that decides the answer is passed `ok` on no fewer (where max_seeds allows): its own spread
# at one degree of freedom cannot show it is noisier than the others
NOISE_DF = 4  # the seed-to-seed spread's degrees of freedom before any verdict: seeds past each group's first,
# summed over the groups besides the baseline's (t's 97.5% quantile: 12.7 at 1, 2.78 at 4)
WIDEN_AT = 0.35  # the F quantile a group's own variance is divided by where it is above the pooled (module docstring)
OK, BELOW, UNCERTAIN = "ok", "below", "uncertain"

Group = TypeVar("Group", bound=Hashable)  # an accuracy group, as the caller names it
Accuracies = Mapping[Group, Mapping[int, float]]  # group -> seed index -> test accuracy (percent)


@dataclass(frozen=True)
class Parity:
    """A group's accuracy change from the baseline in points, with its interval and verdict."""

    verdict: str
    change: float  # mean paired change over the shared seeds (points)
    low: float
    high: float
    seeds: int  # shared seeds it rests on
    se: float
    df: float  # math.inf: no seed-to-seed spread was measured (one seed), the binomial error alone
    widened: float = 1.0  # its variance over the pooled one (above 1: its own spread was the larger)
    tolerance: float = field(kw_only=True)  # points: what the verdict was judged against

    @property
    def below(self) -> bool:
        """Worse than the baseline by more than the tolerance, as the test found."""
        return self.verdict == BELOW

    @property
    def probably_below(self) -> bool:
        """`uncertain`, its mean change itself under -tolerance: the test did not decide it, its estimate did."""
        return self.verdict == UNCERTAIN and self.change < -self.tolerance

    @property
    def ineligible(self) -> bool:
        """Never raced or recommended: `below`, or `uncertain` and probably below."""
        return self.below or self.probably_below

    @property
    def label(self) -> str:
        """The verdict as the report, the table and MLflow show it: `uncertain, probably below` where it is."""
        return f"{self.verdict}, probably below" if self.probably_below else self.verdict

    def describe(self, tolerance: float) -> str:
        seeds = f"{self.seeds} seed{'s' if self.seeds != 1 else ''}"
        own = f"; its own spread: the pooled variance x{self.widened:.1f}" if self.widened > 1 else ""
        return f"{points(self.change, self.low, self.high)} ({seeds}{own}; tolerance {tolerance:g}): {self.label}"


@dataclass(frozen=True)
class Spread(Generic[Group]):
    """The seed-to-seed spread of the paired changes: each group's sum of squares about its mean change and its
    degrees of freedom (its shared seeds less one), for the groups with two seeds or more."""

    own: Mapping[Group, tuple[float, int]] = field(default_factory=dict)

    @property
    def df(self) -> int:
        return sum(df for _, df in self.own.values())

    @property
    def pooled(self) -> float | None:
        """One seed's variance, pooled over the groups (None: no group has two seeds)."""
        return sum(ss for ss, _ in self.own.values()) / self.df if self.df else None

    def variance(self, group: Group) -> float | None:
        """One seed's variance for `group`'s interval: the pooled one, or where its own spread is the larger its own
        variance over the F distribution's `WIDEN_AT` quantile at its and the others' degrees of freedom (module
        docstring); None where no group has two seeds."""
        pooled = self.pooled
        ss, df = self.own.get(group, (0.0, 0))
        if pooled is None or not df or df == self.df or ss <= 0:
            return pooled
        return max(pooled, (ss / df) / _f_quantile(df, self.df - df))


@functools.cache
def _f_quantile(df: int, others_df: int) -> float:
    return float(stats.f.ppf(WIDEN_AT, df, others_df))


@functools.cache
def _t_quantile(confidence: float, df: float) -> float:
    """The two-sided interval's quantile: t's, or the normal's where no spread was measured (df inf)."""
    return float(stats.norm.ppf(0.5 + confidence / 2) if math.isinf(df) else stats.t.ppf(0.5 + confidence / 2, df))


def _paired(accuracies: Accuracies[Group], group: Group, baseline: Group) -> list[float]:
    """The group's change from the baseline at every seed both were trained with."""
    base, mine = accuracies.get(baseline, {}), accuracies.get(group, {})
    return [mine[s] - base[s] for s in sorted(mine) if s in base]


def seed_noise(accuracies: Accuracies[Group], baseline: Group) -> Spread[Group]:
    """Every group's seed-to-seed spread of its paired change (groups with two shared seeds or more)."""
    own = {}
    for group in accuracies:
        if group == baseline:
            continue
        ds = _paired(accuracies, group, baseline)
        if len(ds) > 1:
            mean = sum(ds) / len(ds)
            own[group] = (sum((d - mean) ** 2 for d in ds), len(ds) - 1)
    return Spread(own)


def binomial_floor(change: float, n_test: int | None) -> float:
    """The smallest variance (points^2) of an accuracy difference measured on one shared test set of `n_test`:
    var = (p01 + p10 - D^2) / n with the disagreement p01 + p10 at least |D|."""
    if not n_test:
        return 0.0
    d = min(1.0, abs(change) / 100)
    return 1e4 * max(d - d * d, 0.0) / n_test


def judge(accuracies: Accuracies[Group], group: Group, baseline: Group, tolerance: float, n_test: int | None,
          noise: Spread[Group] | None = None, confidence: float = CONFIDENCE) -> Parity | None:
    """`group`'s parity verdict; None when it shares no seed with the baseline. `noise`: `seed_noise`'s answer
    (computed here when not given)."""
    ds = _paired(accuracies, group, baseline)
    if not ds:
        return None
    spread = noise if noise is not None else seed_noise(accuracies, baseline)
    pooled, var = spread.pooled, spread.variance(group)
    change = sum(ds) / len(ds)
    se = math.sqrt((var or 0.0) / len(ds) + binomial_floor(change, n_test))
    dof = spread.df if var is not None else math.inf
    widened = var / pooled if var and pooled else 1.0
    q = _t_quantile(confidence, dof)
    low, high = change - q * se, change + q * se
    verdict = OK if low > -tolerance else BELOW if high < -tolerance else UNCERTAIN
    return Parity(verdict, change, low, high, len(ds), se, dof, widened, tolerance=tolerance)


def verdicts(accuracies: Accuracies[Group], baseline: Group, tolerance: float,
             n_test: int | None) -> dict[Group, Parity]:
    """Every group's verdict (the baseline's own: `ok` at +0.00 by definition)."""
    noise = seed_noise(accuracies, baseline)
    out = {g: p for g in accuracies if g != baseline
           and (p := judge(accuracies, g, baseline, tolerance, n_test, noise)) is not None}
    if baseline in accuracies:
        out[baseline] = Parity(OK, 0.0, 0.0, 0.0, len(accuracies[baseline]), 0.0, math.inf, tolerance=tolerance)
    return out


def next_seed(accuracies: Accuracies[Group], baseline: Group, tolerance: float, n_test: int | None,
              max_seeds: int, worth: Mapping[Group, int] | None = None,
              deciding: Collection[Group] | None = None) -> tuple[int, list[Group]] | None:
    """The parity race's next step: (seed index, the groups to train at it, the baseline first), or None.

    Every group in `worth` (all those in `accuracies` when None) reaches its floor of shared seeds (its value in
    `worth`, else `MIN_SEEDS`; never past `max_seeds`), starting from its first (seed index 0) when it has none
    yet; after that only the `uncertain` ones get another (the probably below too: a seed may move them), up to
    `max_seeds`, and the `ok` ones in `deciding` (every one when None) with fewer than `OK_SEEDS`. Groups not in
    `worth` keep the seeds they have.
    Deterministic in its input, so workers that call it on the same results plan the same trials.
    """
    wanted = dict.fromkeys(accuracies, MIN_SEEDS) if worth is None else worth
    groups = [g for g in wanted if g != baseline]
    base = accuracies.get(baseline, {})
    if not groups:  # nothing to compare with: the baseline's own accuracy, once
        return (0, [baseline]) if worth is not None and baseline in wanted and 0 not in base else None
    floor = {g: min(wanted[g], max_seeds) for g in groups}
    found = verdicts(accuracies, baseline, tolerance, n_test)
    seeds = {g: len(_paired(accuracies, g, baseline)) for g in groups}
    settled = min(OK_SEEDS, max_seeds)
    short = [g for g in groups if seeds[g] < floor[g]]
    close = [g for g in groups if floor[g] <= seeds[g] < max_seeds and g in found
             and (found[g].verdict == UNCERTAIN
                  or found[g].verdict == OK and seeds[g] < settled and (deciding is None or g in deciding))]
    todo = short or close
    if not todo:
        return None
    index = min(seeds[g] for g in todo)  # seeds are indices 0, 1, 2...: the next one not yet trained
    todo = [g for g in todo if seeds[g] == index]
    return index, ([baseline] if index not in base else []) + sorted(todo, key=str)
