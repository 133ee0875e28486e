"""Every interval uses its evidence: the moderated variance of `ablate.stats.protocol.estimates` (issue 47).

A combination measured in several blocks took the wider of its own spread and the variance model's, on its own
degrees of freedom where its own was wider: a headline confirmed in three blocks got t on 2 df (4.30) although the
race had measured it in up to twelve and the model rested on about thirty. Now its own spread, pooled over its race
and confirmation blocks (each phase's about its own mean), and the model's prediction combine as a moderated
variance (Smyth 2004) on the degrees of freedom of both, the model's counted as at most `PRIOR_DF`, and its own
spread stands alone where an F test says it is noisier than the model (`variance.moderated`).

Simulated on repro16's grid (`REPRO16` of test_race_first.py) at process noise 0.08 and 0.15, "bf16 with a doubled
batch" two-level (+-0.17 about its truth on top of its process noise), each rate over whole studies run as the runner
plans them, with a Clopper-Pearson lower bound:

- As measured, every bf16-with-doubled-batch stack two-level (four, the true best among them; the full run below,
  seeds 30000-30999): the headline covered its truth in 951 of 1000 studies at 0.08 (0.938) and 949 of 998 at 0.15
  (0.938); screened, raced and confirmed estimates 0.956, 0.954, 0.943 at 0.08 and 0.968, 0.971, 0.935 at 0.15.
  Mean interval width (log scale) of every estimate 0.531 and 0.812, of the headline 0.473 and 0.649 (x1.60 and
  x1.91 high/low). Before, with the wider of the two (1000 studies at each noise on the tree before the race's
  changes of this issue, seeds 10000-10999): the headline's 0.798 and 1.063 where this rule gave 0.502 and 0.688,
  every estimate's 0.609 and 0.856 where it gave 0.567 and 0.811; the headline covered in 956 and 970 (of 997)
  before, 954 and 961 after.
- Harsher, the true best alone two-level, so the model by technique cannot see it (1600 studies at 0.08): the
  headline covered in 1509 (0.933); the wider of the two, as before, 1505 (0.930); plain moderation 1491 (0.921).
  Where the headline was the two-level stack: 916, 894 and 893 of 980 (the F test alone 913, the cap alone 912);
  its interval's mean width (log) 0.721 before, 0.412 after. Neither rule reaches 95% there: the race chose it on
  blocks that ran mostly at its high level, so their spread reads low, and its three confirmation blocks read
  tightest exactly when all three fall at one level, furthest from its mean.
- The reproducibility pair (benchmarks/reproducibility.py: two independent studies, the sum over the rows both
  estimated of z^2), over the full run's 500 pairs of 15 rows: mean 11.4 at 0.08, 2.5th-97.5th percentiles [3.0,
  28.9]; mean 9.8 at 0.15, [2.9, 24.0] (with the wider of the two on the earlier tree: means 9.1 and 8.9). Below the
  15 of chi^2 though the intervals cover their truth: a row left in screening (not raced) was left there because it
  read low, in both studies alike (0.055 low on average at 0.08 on the earlier tree), so the two studies' errors
  share a part that no interval should exclude.

The full run (ABLATE_FULL_SIMULATIONS=1, `STUDIES` whole studies at each noise, about 15 min on 2 cores) checks the
headline's coverage and every estimate's (screened, raced, confirmed) at a Clopper-Pearson lower bound of 0.93 and
prints the reproducibility band. The always-on tests: the rule itself, a vectorized coverage check of it on a
two-level combination, and one whole study at each noise.
"""
from __future__ import annotations

import functools
import math
import os

import numpy as np
import pytest
from scipy import stats
from test_decisions import BASE, Host, as_records, run_study
from test_headline import cp_lower
from test_race_first import REPRO16

from ablate.config.design import ProtocolSettings
from ablate.stats import protocol, variance
from ablate.stats.answer import verdicts
from ablate.stats.contrasts import NOISIER_ALPHA
from ablate.stats.protocol import CONFIRM, PRIOR_DF, RACE, SCREEN, Measurement

LEVEL = 0.17  # half the gap between a two-level process's levels (log): 40% apart, measured on the Xeon
# bf16 with a doubled batch, as measured: every such stack, the grid's true best among them
TWO_LEVEL = frozenset(c for c in REPRO16.truth if {"batch_size", "amp"} <= set(c.split(" + ")))
NOISES = (0.08, 0.15)
STUDIES = 1000  # per noise: 950 of 1000 puts the Clopper-Pearson lower bound at 0.937
AT_LEAST = 0.93


class TwoLevelHost(Host):
    """The simulated host, where TWO_LEVEL's stacks run at one of two levels, each fresh process drawing one at
    random."""

    def offset(self, c: str) -> float:
        normal = super().offset(c)
        return normal + (LEVEL if self.rng.random() < 0.5 else -LEVEL) if c in TWO_LEVEL else normal


# 1. The rule.

def test_the_moderated_variance_weighs_the_model_and_its_own_spread_by_their_degrees_of_freedom():
    weight = PRIOR_DF
    assert variance.moderated((0.01, 30), (0.012, 7), NOISIER_ALPHA, PRIOR_DF) == pytest.approx(
        ((weight * 0.01 + 7 * 0.012) / (weight + 7), weight + 7, False))
    assert variance.moderated((0.01, 3), (0.012, 2), NOISIER_ALPHA, PRIOR_DF) == pytest.approx(
        ((3 * 0.01 + 2 * 0.012) / 5, 5, False))  # a prior under the cap counts whole
    assert variance.moderated((0.01, 30), (0.05, 7), NOISIER_ALPHA, PRIOR_DF) == (0.05, 7, True)  # clearly noisier
    assert variance.moderated((0.01, 30), (0.05, 0), NOISIER_ALPHA, PRIOR_DF) == (0.01, 30, False)  # no own spread
    assert variance.moderated((0.01, 0), (0.005, 2), NOISIER_ALPHA, PRIOR_DF) == (0.005, 2, True)  # no prior


def test_a_confirmed_estimate_pools_its_race_spread_but_keeps_its_confirmation_mean():
    """The leader read high in the race (selection); its confirmation blocks set its mean, and its spread is pooled
    over both phases about each phase's own mean."""
    race = {1: 0.30, 2: 0.36, 3: 0.27, 4: 0.33}
    confirm = {5: 0.20, 6: 0.26, 7: 0.17}
    others = {1: 0.10, 2: 0.05, 3: 0.12, 4: 0.08}
    ms = [Measurement(BASE, 0, SCREEN, 0.0), Measurement(BASE, 0, SCREEN, 0.01), Measurement("a", 0, SCREEN, 0.5)]
    for b, y in race.items():
        ms += [Measurement(BASE, b, RACE, 0.02 * b), Measurement("a", b, RACE, 0.02 * b + y),
               Measurement("b", b, RACE, 0.02 * b + others[b])]
    for b, y in confirm.items():
        ms += [Measurement(BASE, b, CONFIRM, -0.01 * b), Measurement("a", b, CONFIRM, -0.01 * b + y)]
    est = protocol.estimates(ms, BASE)["a"]
    squares = sum((y - np.mean(list(p.values()))) ** 2 for p in (race, confirm) for y in p.values())
    own, d = squares / 5, 3 + 2
    assert (est.phase, est.blocks, est.noise) == (CONFIRM, 3, "moderated")
    assert est.log == pytest.approx(np.mean(list(confirm.values())))  # not the race's 0.315
    prior_df = est.df - d
    assert 1 <= prior_df <= PRIOR_DF
    # Its own and the model's variance, weighted by their degrees of freedom: between the two.
    prior = (est.se ** 2 * 3 * est.df - d * own) / prior_df
    assert prior > 0 and min(prior, own) <= est.se ** 2 * 3 <= max(prior, own)


def test_a_combination_clearly_noisier_than_the_model_keeps_its_own_spread():
    rng = np.random.default_rng(3)
    ms = []
    for b in range(6):
        ms.append(Measurement(BASE, b, RACE, rng.normal(0, 0.02)))
        ms += [Measurement(c, b, RACE, 0.1 + rng.normal(0, 0.02)) for c in ("p", "q", "r", "s")]
        ms.append(Measurement("noisy", b, RACE, 0.1 + (0.3 if b % 2 else -0.3)))
    est = protocol.estimates(ms, BASE)
    assert (est["noisy"].noise, est["noisy"].df) == ("own", 5)
    assert est["noisy"].se == pytest.approx(math.sqrt(np.var([0.3, -0.3] * 3, ddof=1) / 6), rel=0.05)
    assert all(est[c].noise == "moderated" for c in ("p", "q", "r", "s"))


def _rule_coverage(sigma: float, robust: bool, n: int = 20_000, seed: int = 0) -> float:
    """Vectorized: a two-level combination's confirmed interval (3 blocks; 6 race blocks pooled in its spread) from a
    model that predicts the quiet combinations' variance on 30 df: the share of `n` intervals covering the truth.
    `robust`: the rule as built (the F test, the capped prior); else plain moderation."""
    rng = np.random.default_rng(seed)
    quiet = 2 * sigma ** 2  # one block's paired difference: the combination's process and the baseline's

    def blocks(k: int) -> np.ndarray:
        levels = np.where(rng.random((n, k)) < 0.5, LEVEL, -LEVEL)
        return levels + rng.normal(0.0, math.sqrt(quiet), (n, k))

    race, confirm = blocks(6), blocks(3)
    own = sum(((x - x.mean(1, keepdims=True)) ** 2).sum(1) for x in (race, confirm)) / 7  # each phase about its mean
    prior = quiet * rng.chisquare(30, n) / 30
    if robust:
        var, df = np.array([variance.moderated((p, 30), (o, 7), NOISIER_ALPHA, PRIOR_DF)[:2]
                            for p, o in zip(prior, own)]).T
    else:
        var, df = (30 * prior + 7 * own) / 37, np.full(n, 37)
    half = stats.t.ppf(0.975, df) * np.sqrt(var / 3)
    return float(np.mean(np.abs(confirm.mean(1)) <= half))


@pytest.mark.parametrize("sigma", NOISES)
def test_plain_moderation_undercovers_a_two_level_combination_and_the_robust_rule_covers_it(sigma):
    """What the F test and the cap are for: a model blind to the two levels holds plain moderation to its word."""
    plain, robust = _rule_coverage(sigma, False), _rule_coverage(sigma, True)
    print(f"noise {sigma}: plain moderation covers {plain:.3f}, the rule {robust:.3f}")
    assert robust >= AT_LEAST and robust > plain + 0.03, (plain, robust)


# 2. Whole studies: the headline and every estimate, and the reproducibility pair.

def _study(noise: float, seed: int) -> tuple[dict[str, protocol.Estimate], str | None]:
    """One study of REPRO16 on the two-level host, raced and confirmed as the runner plans it: every estimate, and the
    headline (the recommendation's pick: speed alone, every combination eligible)."""
    ms, _ = run_study(REPRO16.truth, dict.fromkeys(REPRO16.truth, noise), ProtocolSettings(), seed, TwoLevelHost)
    found = verdicts.recommendation(as_records(ms), 1.0)
    return protocol.estimates(ms, BASE), found.pick.combination if found else None


@functools.lru_cache(maxsize=None)
def _studies(noise: float, n: int) -> tuple[tuple[dict[str, protocol.Estimate], str | None], ...]:
    return tuple(_study(noise, 30_000 + i) for i in range(n))


def _covers(e: protocol.Estimate, truth: float) -> bool:
    interval = e.interval()
    assert interval is not None, e
    return interval[0] <= truth <= interval[1]


def _coverage(found) -> dict[str, tuple[int, int]]:
    counts = {k: [0, 0] for k in ("headline", SCREEN, RACE, CONFIRM)}
    for est, pick in found:
        for c, e in est.items():
            if c == BASE:
                continue
            hit = _covers(e, REPRO16.truth[c])
            for key in {e.phase} | ({"headline"} if c == pick else set()):
                counts[key][0] += hit
                counts[key][1] += 1
    return {k: (hit, n) for k, (hit, n) in counts.items()}


def _chi2(found) -> np.ndarray:
    """The reproducibility pair's statistic over pairs of independent studies: the sum over the rows both estimated of
    z^2, z = the difference of their log speed-ups over the root of their squared standard errors summed."""
    return np.array([sum((a[c].log - b[c].log) ** 2 / (a[c].se ** 2 + b[c].se ** 2) for c in a if c != BASE and c in b)
                     for (a, _), (b, _) in zip(found[0::2], found[1::2])])


@pytest.mark.parametrize("noise", NOISES)
def test_one_study_at_each_noise_moderates_its_raced_intervals(noise):
    """The smoke test of the full run below: one study, its confirmed headline moderated (or its own spread alone)
    on more degrees of freedom than its three confirmation blocks give."""
    (est, pick), = _studies(noise, 1)
    assert pick is not None and est[pick].phase == CONFIRM
    assert est[pick].noise in ("moderated", "own") and est[pick].df > 2, est[pick]
    assert all(e.noise in ("moderated", "own") for c, e in est.items() if c != BASE and e.blocks > 1)
    assert all(e.interval() is not None for e in est.values())


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("ABLATE_FULL_SIMULATIONS"),
                    reason=f"{STUDIES} whole simulated studies at each of two noises, about 15 min on 2 cores: "
                           "ABLATE_FULL_SIMULATIONS=1 runs them (the smoke test above runs always)")
@pytest.mark.parametrize("noise", NOISES)
def test_the_headline_and_every_estimate_cover_their_truth(noise):
    """Clopper-Pearson lower bounds >= 0.93: the headline's interval, and every screened, raced and confirmed one."""
    found = _studies(noise, STUDIES)
    counts = _coverage(found)
    chi2 = _chi2(found)
    rows = np.mean([sum(1 for c in a if c != BASE and c in b) for (a, _), (b, _) in zip(found[0::2], found[1::2])])
    widths = [np.diff(e.interval()).item() for est, _ in found for c, e in est.items() if c != BASE]
    heads = [np.diff(est[pick].interval()).item() for est, pick in found if pick is not None]
    print(f"noise {noise}: coverage {counts}; CP lower bounds "
          f"{ {k: round(cp_lower(h, n), 3) for k, (h, n) in counts.items()} }; mean width (log) {np.mean(widths):.3f}, "
          f"headline {np.mean(heads):.3f}; reproducibility pair over {len(chi2)} pairs, {rows:.1f} rows: sum of z^2 "
          f"mean {chi2.mean():.2f}, band [{np.percentile(chi2, 2.5):.1f}, {np.percentile(chi2, 97.5):.1f}]")
    for key, (hit, n) in counts.items():
        assert n >= STUDIES * 0.9 and cp_lower(hit, n) >= AT_LEAST, (key, hit, n)
    assert chi2.mean() <= rows  # no narrower than honest: the rows' selection keeps it below (see the docstring)
