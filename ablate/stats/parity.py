"""Accuracy parity as a test: `ok`, `below` or `uncertain`, with an interval, over shared training seeds.

Why: one training seed against a hard cut misleads both ways. The baseline's
test accuracy moves by about 0.13 points from seed to seed on MNIST, so a
group 0.4 points worse with a 0.5-point tolerance is flagged about a third of
the time, and a group truly 0.6 points worse passes as often.

- **Shared seeds.** Every accuracy group (combinations that change the numbers
  alike) is trained with the same seeds as the baseline: the same
  initialisation and data order, so the paired change (group - baseline at
  one seed) cancels what the seed does to both.
- **The interval** of the mean paired change: its seed-to-seed variance,
  pooled over every group with two seeds or more (the groups share the
  seed's noise model), divided by the number of seeds, plus the paired
  binomial error of the shared test set, which no number of seeds removes. The
  binomial term is its smallest possible value - two classifiers that differ
  by D on a test set disagree on at least |D| of it - since per-example
  predictions are not stored. t quantile with the pooled degrees of freedom.
- **The verdict** is a non-inferiority test at the tolerance: `ok` when the
  interval's lower bound is above -tolerance, `below` when its upper bound is
  under it, else `uncertain`.
- **The parity race:** every group worth it is trained at `MIN_SEEDS` seeds
  (from its first, where screening did not train it); one still `uncertain`
  gets another seed (and the baseline with it) until it is decided or has
  `max_seeds`. Which groups are worth it, and which of them train past
  `MIN_SEEDS` whatever their verdict, is the caller's to say
  (`ablate.stats.planner.worth_more_seeds`: not those that cannot be the answer, as
  long as the spread gets `NOISE_DF` degrees of freedom); a group left at one
  seed is judged by the same test, on the spread pooled over the others.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Hashable, Mapping, TypeVar

from scipy import stats

from ablate.words import points

CONFIDENCE = 0.95
MIN_SEEDS = 2  # every group worth it: two seeds give the seed-to-seed spread its first degrees of freedom
NOISE_DF = 4  # the seed-to-seed spread's degrees of freedom before any verdict: seeds past each group's first,
# summed over the groups besides the baseline's (t's 97.5% quantile: 12.7 at 1, 2.78 at 4)
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

    @property
    def below(self) -> bool:
        """Worse than the baseline by more than the tolerance, as the test found: never raced or recommended."""
        return self.verdict == BELOW

    def describe(self, tolerance: float) -> str:
        seeds = f"{self.seeds} seed{'s' if self.seeds != 1 else ''}"
        return f"{points(self.change, self.low, self.high)} ({seeds}; tolerance {tolerance:g}): {self.verdict}"


def _paired(accuracies: Accuracies[Group], group: Group, baseline: Group) -> list[float]:
    """The group's change from the baseline at every seed both were trained with."""
    base, mine = accuracies.get(baseline, {}), accuracies.get(group, {})
    return [mine[s] - base[s] for s in sorted(mine) if s in base]


def seed_noise(accuracies: Accuracies[Group], baseline: Group) -> tuple[float | None, int]:
    """The variance of one seed's paired change, pooled over the groups with two seeds or more, and its df."""
    ss, df = 0.0, 0
    for group in accuracies:
        if group == baseline:
            continue
        ds = _paired(accuracies, group, baseline)
        if len(ds) > 1:
            mean = sum(ds) / len(ds)
            ss += sum((d - mean) ** 2 for d in ds)
            df += len(ds) - 1
    return (ss / df, df) if df else (None, 0)


def binomial_floor(change: float, n_test: int | None) -> float:
    """The smallest variance (points^2) of an accuracy difference measured on one shared test set of `n_test`:
    var = (p01 + p10 - D^2) / n with the disagreement p01 + p10 at least |D|."""
    if not n_test:
        return 0.0
    d = min(1.0, abs(change) / 100)
    return 1e4 * max(d - d * d, 0.0) / n_test


def judge(accuracies: Accuracies[Group], group: Group, baseline: Group, tolerance: float, n_test: int | None,
          noise: tuple[float | None, int] | None = None, confidence: float = CONFIDENCE) -> Parity | None:
    """`group`'s parity verdict; None when it shares no seed with the baseline. `noise`: `seed_noise`'s answer
    (computed here when not given)."""
    ds = _paired(accuracies, group, baseline)
    if not ds:
        return None
    var, df = noise if noise is not None else seed_noise(accuracies, baseline)
    change = sum(ds) / len(ds)
    se = math.sqrt((var or 0.0) / len(ds) + binomial_floor(change, n_test))
    dof = df if var is not None else math.inf
    q = stats.t.ppf(0.5 + confidence / 2, dof) if var is not None else stats.norm.ppf(0.5 + confidence / 2)
    low, high = change - q * se, change + q * se
    verdict = OK if low > -tolerance else BELOW if high < -tolerance else UNCERTAIN
    return Parity(verdict, change, low, high, len(ds), se, dof)


def verdicts(accuracies: Accuracies[Group], baseline: Group, tolerance: float,
             n_test: int | None) -> dict[Group, Parity]:
    """Every group's verdict (the baseline's own: `ok` at +0.00 by definition)."""
    noise = seed_noise(accuracies, baseline)
    out = {g: p for g in accuracies if g != baseline
           and (p := judge(accuracies, g, baseline, tolerance, n_test, noise)) is not None}
    if baseline in accuracies:
        out[baseline] = Parity(OK, 0.0, 0.0, 0.0, len(accuracies[baseline]), 0.0, math.inf)
    return out


def next_seed(accuracies: Accuracies[Group], baseline: Group, tolerance: float, n_test: int | None,
              max_seeds: int, worth: Mapping[Group, int] | None = None) -> tuple[int, list[Group]] | None:
    """The parity race's next step: (seed index, the groups to train at it, the baseline first), or None.

    Every group in `worth` (all those in `accuracies` when None) reaches its floor of shared seeds (its value in
    `worth`, else `MIN_SEEDS`; never past `max_seeds`), starting from its first (seed index 0) when it has none
    yet; after that only the `uncertain` ones get another, up to `max_seeds`. Groups not in `worth` keep the
    seeds they have. Deterministic in its input, so workers that call it on the same results plan the same
    trials.
    """
    wanted = dict.fromkeys(accuracies, MIN_SEEDS) if worth is None else worth
    groups = [g for g in wanted if g != baseline]
    base = accuracies.get(baseline, {})
    if not groups:  # nothing to compare with: the baseline's own accuracy, once
        return (0, [baseline]) if worth is not None and baseline in wanted and 0 not in base else None
    floor = {g: min(wanted[g], max_seeds) for g in groups}
    found = verdicts(accuracies, baseline, tolerance, n_test)
    seeds = {g: len(_paired(accuracies, g, baseline)) for g in groups}
    short = [g for g in groups if seeds[g] < floor[g]]
    close = [g for g in groups if floor[g] <= seeds[g] < max_seeds and found.get(g) and found[g].verdict == UNCERTAIN]
    todo = short or close
    if not todo:
        return None
    index = min(seeds[g] for g in todo)  # seeds are indices 0, 1, 2...: the next one not yet trained
    todo = [g for g in todo if seeds[g] == index]
    return index, ([baseline] if index not in base else []) + sorted(todo, key=str)
