"""Paired contrasts between raced combinations, with the comparisons and the repeated looks controlled.

Why: contenders share every race block (and its baseline), so the difference
of two contenders' log throughputs within a block cancels the block's drift
and its baseline entirely. Comparing their separate intervals ("they overlap")
ignores that pairing and is about twice as strict: a combination far slower
than its leader kept racing because the intervals overlapped
(docs/evidence.md, "Evidence: the race"). So:

- **The contrast** of the leader with another combination is the mean, over
  the race blocks both ran in, of the difference of their log throughputs,
  with a paired t interval from that difference's own spread (robust to the
  two being unequally noisy).
- **K comparisons, and a leader the data chose:** the leader is whichever
  combination looks fastest, so "leader against each other" is not a fixed
  set of K hypotheses: in a six-way tie the leader is the luckiest of six,
  and Holm's procedure on those contrasts broke such ties far above its alpha
  (docs/measuring.md, "Paired contrasts decide who drops out"). Each contrast
  is judged instead against the studentized range of all the combinations in
  the look (Tukey's simultaneous test, with each
  pair's own variance as in Games-Howell), which covers every pair at once
  and so also the pairs the data picked: the chance that any true tie is
  declared broken is at most the look's alpha. With two combinations it is
  the paired t test.
- **Repeated looks:** the race looks after each of its blocks from
  `MIN_RACE_BLOCKS` on; the family-wise alpha is spent over those looks,
  growing with the cube of the look's number (most at the last look, where
  a race that has not stopped has the most data), and the spent amounts sum
  to `ALPHA` less what screening spent (Bonferroni over looks).
- **One interval per decision:** a contrast carries the alpha and the field
  size its decision used, and `simultaneous()` is the interval that decision
  amounts to: the difference plus or minus the studentized range's quantile
  over sqrt(2) standard errors. "Told apart" is exactly "its simultaneous
  interval lies above zero", so the interval printed beside a verdict never
  contradicts it (a pointwise 95% interval often excluded x1.00 where the race
  could not tell a gap apart: docs/evidence.md, "Evidence: the race").
  `p_adjusted` is the same decision as a p-value: below `ALPHA` exactly when
  told apart.
- **Two-level processes:** bf16 emulated on a CPU runs at one of two speeds
  about 40% apart per process. A run of processes at one level gives a pair a
  large mean difference and a small spread together, which the t and the range
  test (mean and spread independent) read as a real gap (docs/measuring.md,
  "Two-level processes"). So on `GUARDED_BLOCKS` shared race blocks or fewer
  (where all of them drew one level in 2 / 2**5 = 6% of races or more) a contrast is
  `guarded`: told apart only where a test such a run cannot fool agrees,
  the range test against a lead of `HALF_GAP` (half the gap between the two
  levels: as far as a run at one level moves the mean), or the exact
  sign-flip test of the differences (`ablate.stats.flips`) at the same
  alpha. The first keeps the early stop for a leader far ahead; the second
  can reject only from 2 / 2**values, so it decides where a pair shares
  many blocks. From the sixth block on, the range test alone decides, with
  the pair's shared screening block in its spread (a process at the other
  level there widens it): guarding the sixth too cost much of the race's
  power on normal noise. The interval printed beside a guarded decision is
  the range's widened by `HALF_GAP` either side, or where the sign flips
  decided, the hull of theirs and the range's. Such a tie is still broken
  within the bound, nearly all at the sixth block: six race blocks at one level
  look like a gap to the range test there, and screening's block shows the
  other level in only half of those (tests/stats/test_bimodal_race.py;
  docs/measuring.md, "Two-level processes"; docs/evidence.md, "Evidence: the race").
- **Equivalence:** `upper(alpha)` is the one-sided upper bound of how much
  faster the leader is (the upper end of a TOST interval); `ablate.stats.answer.verdicts`
  headlines a simpler member only where it is within the study's
  `equivalence_margin`, at an alpha shared over the members it tests.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace
from typing import Generic, Hashable, Mapping, Sequence, TypeVar

import numpy as np
from numpy.polynomial.legendre import leggauss
from scipy import optimize, special, stats

from ablate.config.design import CONFIDENCE
from ablate.stats import variance
from ablate.stats.flips import sign_flip_interval, sign_flip_p, smallest_p

ALPHA = 0.05  # family-wise error over the whole race: a true tie is declared broken at most this often
SCREEN_ALPHA = 0.005  # of ALPHA, spent on screening's choice of who enters the race
RACE_ALPHA = ALPHA - SCREEN_ALPHA  # the rest, spent over the race's looks
# Of RACE_ALPHA, the share kept for the looks of a race that goes on past its planned blocks (`extra_race_blocks`).
# A quarter costs the planned looks little (the sixth block's alpha 0.022 rather than 0.029); simulated, the race's
# power and its ties' error rates: tests/stats/test_decisions.py and test_bimodal_race.py.
EXTRA_SHARE = 0.25
EQUIVALENCE_ALPHA = 0.05  # the equivalence decisions' alpha, shared over the members tested (Bonferroni)
NOISIER_ALPHA = 0.25  # a pair's own spread replaces the variance model's when it is this significantly wider
NOISIER_GUARDED_ALPHA = 0.05  # ... on a guarded look (`paired`)
GUARDED_BLOCKS = 5  # on this many shared race blocks or fewer, a two-level process's run at one level is guarded
LEVELS_APART = 1.4  # the widest two-level process guarded against: bf16 on a CPU, levels 40% apart (measured)
HALF_GAP = math.log(LEVELS_APART) / 2  # how far a run of processes at one such level moves a pair's mean (log)

Key = TypeVar("Key", bound=Hashable)  # a combination, as the caller names it


@dataclass(frozen=True)
class Contrast(Generic[Key]):
    """log(leader) - log(other), paired over their shared blocks, and the decision taken on it."""

    other: Key
    diff: float
    se: float | None  # None: fewer than two shared blocks, nothing to test
    df: int
    blocks: int
    p: float | None  # two-sided pointwise p-value of "no difference" (not the decision: see `p_adjusted`)
    alpha: float = 0.0  # the look's alpha its decision used (0: never judged)
    k: int = 2  # the combinations the studentized range covered when it was judged
    apart: bool = False  # told apart from the leader (dropped from the race)
    flip_p: float | None = None  # sign-flip p of the shared blocks; None: more than GUARDED_BLOCKS, not needed
    flipped: tuple[float, ...] = ()  # the differences that sign-flip test flipped (race, then screening blocks)

    @property
    def guarded(self) -> bool:
        """On GUARDED_BLOCKS shared race blocks or fewer: told apart only beyond HALF_GAP or by the sign flips too."""
        return self.flip_p is not None

    def interval(self, confidence: float = CONFIDENCE) -> tuple[float, float] | None:
        """The pointwise t interval (not what any decision used)."""
        if self.se is None:
            return None
        half = stats.t.ppf(0.5 + confidence / 2, self.df) * self.se if self.se > 0 else 0.0
        return self.diff - half, self.diff + half

    def simultaneous(self) -> tuple[float, float] | None:
        """The interval its decision used: the studentized range's 1 - alpha quantile for k combinations, over
        sqrt(2), standard errors either side. Told apart exactly when it lies above zero. A guarded contrast's is
        that interval widened by HALF_GAP either side, except where the sign-flip test decided it (rejected at the
        alpha, and the lead not beyond HALF_GAP): the hull of the sign-flip test's interval and the range's."""
        if self.se is None or self.alpha <= 0:
            return None
        half = range_quantile(self.alpha, self.k, self.df) / math.sqrt(2) * self.se
        low, high = self.diff - half, self.diff + half
        if not self.guarded:
            return low, high
        if low <= HALF_GAP and smallest_p(len(self.flipped)) <= self.alpha:
            flip_low, flip_high = sign_flip_interval(self.flipped, self.alpha)
            return min(low, flip_low), max(high, flip_high)
        return low - HALF_GAP, high + HALF_GAP

    @property
    def p_adjusted(self) -> float | None:
        """The decision as a p-value: the studentized range's p for the k combinations (a guarded contrast's: the
        smaller of its p against a lead of HALF_GAP and the larger of its p and the sign-flip test's), scaled by
        the share of `ALPHA` the look spent (ALPHA / alpha); below `ALPHA` exactly when told apart."""
        if self.se is None or self.alpha <= 0:
            return None
        p = self._range_p(self.diff)
        if self.flip_p is not None:
            p = min(self._range_p(self.diff - HALF_GAP), max(p, self.flip_p))
        return min(1.0, p * ALPHA / self.alpha)

    def _range_p(self, lead: float) -> float:
        """The studentized range's p-value for k combinations of a lead `lead` at this contrast's standard error."""
        assert self.se is not None
        if lead <= 0:
            return 1.0
        if self.se == 0:
            return 0.0
        t = lead / self.se
        return 2 * float(stats.t.sf(t, self.df)) if self.k == 2 else range_sf(t * math.sqrt(2), self.k, self.df)

    def upper(self, alpha: float) -> float | None:
        """The one-sided 1 - alpha upper bound of log(leader / other): the upper end of a TOST interval."""
        if self.se is None:
            return None
        return self.diff + (float(stats.t.ppf(1 - alpha, self.df)) * self.se if self.se > 0 else 0.0)


def paired(leader: Mapping[int, float], other: Mapping[int, float], key: Key,
           model: tuple[float, int] | None = None, seen: Sequence[float] = (), guarded: bool = False) -> Contrast[Key]:
    """The contrast of two combinations from their per-block log throughputs (block -> value).

    `model`: the variance model's variance of one block's difference (the two combinations' process variances
    summed, `ablate.stats.variance`) and its degrees of freedom. Its many degrees of freedom buy power that a pair's
    own few blocks cannot (t quantile 2.4 rather than 3.4 at 6 blocks, final look); the pair's own spread is
    used instead where an F test at NOISIER_ALPHA says it is noisier than the model, so a pair noisier than the
    model says is not declared apart on the model's word. (Taking the wider of the two always cost too much power:
    docs/evidence.md, "Evidence: the race".)

    `seen`: the pair's differences in the other blocks both ran in (screening). They count in the own spread and,
    on a guarded look (GUARDED_BLOCKS race blocks or fewer: `judged`), in the sign-flip test (`flip_p`), never in
    the mean (screening chose the field): a two-level process whose race blocks all drew one level may show the
    other there. On a guarded look the own spread replaces the model's only where the F test says so at
    NOISIER_GUARDED_ALPHA (`guarded`: guard it whatever its blocks): the lead must clear HALF_GAP there, which a
    pair noisier than the model reaches by chance only rarely at either level, while at NOISIER_ALPHA a spread from
    three or four values that came out wide by chance held up a clear winner for blocks (docs/evidence.md,
    "Evidence: the race").
    """
    shared = sorted(set(leader) & set(other))
    ds = [leader[b] - other[b] for b in shared]
    n = len(ds)
    mean = sum(ds) / n if n else 0.0
    if n < 2:
        return Contrast(key, mean, None, 0, n, None)
    guarded, every = guarded or n <= GUARDED_BLOCKS, [*ds, *seen]
    var, df = _variance(every), len(every) - 1
    alpha = NOISIER_GUARDED_ALPHA if guarded else NOISIER_ALPHA
    if model is not None and model[0] > 0 and var / model[0] <= variance.noisier_quantile(df, model[1], alpha):
        var, df = model
    se = math.sqrt(var / n)
    p = 1.0 if se == 0 and mean == 0 else 0.0 if se == 0 else float(2 * special.stdtr(df, -abs(mean) / se))
    if not guarded:
        return Contrast(key, mean, se, df, n, p)
    return Contrast(key, mean, se, df, n, p, flip_p=sign_flip_p(every), flipped=tuple(every))


def _variance(xs: Sequence[float]) -> float:
    """The sample variance of `xs` (two or more)."""
    mean = sum(xs) / len(xs)
    return sum((x - mean) ** 2 for x in xs) / (len(xs) - 1)


def look_alpha(look: int, looks: int, alpha: float = RACE_ALPHA, extra: int = 0) -> float:
    """The alpha spent at look `look` (1-based) of `looks`, then of `extra` looks more: each part's share
    proportional to the look's number (within the part) cubed - most at its last, where a race that has not stopped
    has the most data. The planned looks share `alpha`, less EXTRA_SHARE of it kept for the extra looks where there
    are any; the whole sums to `alpha`."""
    kept = EXTRA_SHARE * alpha if extra > 0 else 0.0
    if looks > 0 and 1 <= look <= looks:
        return (alpha - kept) * _cubed(look, looks)
    if extra > 0 and looks < look <= looks + extra:
        return kept * _cubed(look - looks, extra)
    return 0.0


def _cubed(look: int, looks: int) -> float:
    return look ** 3 / sum(i ** 3 for i in range(1, looks + 1))


def judged(contrasts: Sequence[Contrast[Key]], alpha: float, k: int | None = None) -> list[Contrast[Key]]:
    """`contrasts` (the leader against each other member of a look) judged at family-wise `alpha`: each with
    the alpha and the field size k its decision used, and `apart` where told apart from the leader. A
    contrast's t statistic, times sqrt(2), is judged against the studentized range's 1 - alpha quantile for k
    combinations (default: the leader and every contrast) and the contrast's degrees of freedom.

    Step down from the contender furthest beyond its critical value: once it is told apart, the rest are judged as
    a field one smaller (every subset tested holds the leader and is the top of the field, so they nest), stopping
    at the first that is not; the rest keep that k, and are not beyond it either, so each one's simultaneous
    interval excludes zero exactly when it was told apart. A guarded contrast (few blocks) is beyond only where its
    lead less HALF_GAP is, or its sign-flip test rejects at alpha and its lead is. (Ordered by the t statistic
    alone, a contrast with more degrees of freedom behind one with fewer could be beyond its quantile and still not
    told apart.)"""
    if alpha <= 0:
        return list(contrasts)
    field = max(2, k or len(contrasts) + 1)
    left = [c for c in contrasts if c.p is not None]
    out: dict[int, Contrast[Key]] = {}
    while left:
        c = max(left, key=lambda c: _beyond(c, alpha, field))
        if _beyond(c, alpha, field) <= 1:
            out.update({id(d): replace(d, alpha=alpha, k=field) for d in left})
            break
        out[id(c)] = replace(c, alpha=alpha, k=field, apart=True)  # only one behind the leader: one ahead stays
        left.remove(c)
        field = max(2, field - 1)
    return [out.get(id(c), c) for c in contrasts]


def _beyond(c: Contrast[Key], alpha: float, k: int) -> float:
    """How far a tested contrast's lead is beyond the range's critical value (> 1: told apart): its t statistic
    times sqrt(2) over the 1 - alpha quantile for k combinations at its df; an exact lead (se 0) is +inf, an exact
    tie or deficit -inf. A guarded contrast's: the larger of its lead less HALF_GAP's and, where its sign-flip test
    rejects at alpha, its lead's (else -inf)."""
    assert c.se is not None  # `paired` gives a contrast a p-value only with its standard error
    q = range_quantile(alpha, k, c.df)
    leads = [c.diff] if c.flip_p is None else [c.diff - HALF_GAP, *([c.diff] if c.flip_p <= alpha else [])]
    return max(-math.inf if lead <= 0 else math.inf if c.se == 0 else lead / c.se * math.sqrt(2) / q for lead in leads)


def told_apart(contrasts: Sequence[Contrast[Key]], alpha: float, k: int | None = None) -> set[Key]:
    """The combinations told apart from the leader at family-wise `alpha` (`judged`)."""
    return {c.other for c in judged(contrasts, alpha, k) if c.apart}


def beyond_range(diff: float, se: float, df: int, alpha: float, k: int) -> bool:
    """`diff` (the leader's lead) is positive and its t statistic, times sqrt(2), beyond the studentized range's
    1 - alpha quantile for k combinations and df degrees of freedom (an exact lead with se 0 always is)."""
    return diff > 0 and (se == 0 or diff / se * math.sqrt(2) > range_quantile(alpha, k, df))


# The studentized range by quadrature in numpy: scipy's own integrates numerically with nquad, about 0.15 s a
# quantile, which made the race's replayed looks (and their simulations) spend 95% of their time there. Agrees with
# scipy to 1e-7 or better (tests/stats/test_decisions.py).
_Z = np.linspace(-8.5, 8.5, 341)  # the trapezoid rule on a smooth integrand: the standard normal's +-8.5 SD
_WZ = np.r_[0.5, np.ones(_Z.size - 2), 0.5] * (_Z[1] - _Z[0]) * np.exp(-_Z ** 2 / 2) / math.sqrt(2 * math.pi)
_CDF_Z = special.ndtr(_Z)
_GX, _GW = leggauss(96)  # Gauss-Legendre over log s, s = the sample SD over sigma
MAX_DF = 10 ** 4  # beyond it the quantile moves by under 1e-4: taken as this


def _range_sf_known(w: np.ndarray, k: int) -> np.ndarray:
    """P(range of k standard normals > w), elementwise."""
    inner = _CDF_Z - special.ndtr(_Z - w[..., None])
    return 1 - k * (inner ** (k - 1)) @ _WZ


def range_sf(q: float, k: int, df: float) -> float:
    """P(Q > q) for the studentized range of k means with df degrees of freedom: the known-variance range's
    tail averaged over the distribution of s = sqrt(chi2(df) / df)."""
    df = min(df, MAX_DF)
    lo, hi = np.sqrt(stats.chi2.ppf([1e-10, 1 - 1e-12], df) / df)
    a, b = math.log(lo), math.log(hi)
    s = np.exp((b - a) / 2 * _GX + (a + b) / 2)
    log_f = (df / 2) * math.log(df / 2) - special.gammaln(df / 2) + math.log(2) + (df - 1) * np.log(s) - df * s * s / 2
    return float(np.sum((b - a) / 2 * _GW * np.exp(log_f) * s * _range_sf_known(q * s, k)))


@functools.lru_cache(maxsize=4096)
def range_quantile(alpha: float, k: int, df: int) -> float:
    """The studentized range's 1 - alpha quantile for k means and df degrees of freedom (cached: the race replays
    its looks). For k = 2 it is sqrt(2) times the two-sided t's."""
    if k == 2:  # exact
        return math.sqrt(2) * float(stats.t.ppf(1 - alpha / 2, df))
    high = 10.0
    while range_sf(high, k, df) > alpha:
        high *= 4
    return float(optimize.brentq(lambda q: range_sf(q, k, df) - alpha, 0.5, high, xtol=1e-10, rtol=1e-12))
