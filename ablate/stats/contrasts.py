"""Paired contrasts between raced combinations, with the comparisons and the repeated looks controlled.

Why: contenders share every race block (and its baseline), so the difference
of two contenders' log throughputs within a block cancels the block's drift
and its baseline entirely. Comparing their separate intervals ("they overlap")
ignores that pairing and is about twice as strict: a real run kept racing a
combination 38% slower than its leader (paired p = 0.002) because the
intervals overlapped. So:

- **The contrast** of the leader with another combination is the mean, over
  the race blocks both ran in, of the difference of their log throughputs,
  with a paired t interval from that difference's own spread (robust to the
  two being unequally noisy).
- **K comparisons, and a leader the data chose:** the leader is whichever
  combination looks fastest, so "leader against each other" is not a fixed
  set of K hypotheses: in a six-way tie the leader is the luckiest of six,
  and Holm's procedure on those contrasts broke the tie in 14% of simulated
  races. Each contrast is judged instead against the studentized range of
  all the combinations in the look (Tukey's simultaneous test, with each
  pair's own variance as in Games-Howell), which covers every pair at once
  and so also the pairs the data picked: the chance that any true tie is
  declared broken is at most the look's alpha. With two combinations it is
  the paired t test.
- **Repeated looks:** the race looks after each of its blocks from
  `MIN_RACE_BLOCKS` on; the family-wise alpha is spent over those looks,
  growing with the cube of the look's number (most at the last look, where
  a race that has not stopped has the most data), and the spent amounts sum
  to `ALPHA` less what screening spent (Bonferroni over looks).
- **Equivalence:** where a contrast cannot tell two apart, its two one-sided
  tests (TOST) at 5% - the 90% interval - bound how large a difference the
  data rule out: "within +-3% of the leader".
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Generic, Hashable, Mapping, Sequence, TypeVar

from scipy import stats

ALPHA = 0.05  # family-wise error over the whole race: a true tie is declared broken at most this often
SCREEN_ALPHA = 0.005  # of ALPHA, spent on screening's choice of who enters the race
RACE_ALPHA = ALPHA - SCREEN_ALPHA  # the rest, spent over the race's looks
EQUIVALENCE_CONFIDENCE = 0.90  # two one-sided tests at 5%
NOISIER_ALPHA = 0.25  # a pair's own spread replaces the variance model's when it is this significantly wider

Key = TypeVar("Key", bound=Hashable)  # a combination, as the caller names it


@dataclass(frozen=True)
class Contrast(Generic[Key]):
    """log(leader) - log(other), paired over their shared blocks."""

    other: Key
    diff: float
    se: float | None  # None: fewer than two shared blocks, nothing to test
    df: int
    blocks: int
    p: float | None  # two-sided p-value of "no difference"

    def interval(self, confidence: float = 0.95) -> tuple[float, float] | None:
        if self.se is None:
            return None
        half = stats.t.ppf(0.5 + confidence / 2, self.df) * self.se if self.se > 0 else 0.0
        return self.diff - half, self.diff + half

    def equivalence(self) -> float | None:
        """The largest difference, as a fraction (0.03 = 3%), that the TOST 90% interval does not rule out."""
        bounds = self.interval(EQUIVALENCE_CONFIDENCE)
        return None if bounds is None else max(abs(math.expm1(b)) for b in bounds)


def paired(leader: Mapping[int, float], other: Mapping[int, float], key: Key,
           model: tuple[float, int] | None = None) -> Contrast[Key]:
    """The contrast of two combinations from their per-block log throughputs (block -> value).

    `model`: the variance model's variance of one block's difference (the two combinations' process variances
    summed, `ablate.stats.variance`) and its degrees of freedom. Its many degrees of freedom buy power that a pair's
    own few blocks cannot (t quantile 2.4 rather than 3.4 at 6 blocks, final look); the pair's own spread is
    used instead where an F test at NOISIER_ALPHA says it is noisier than the model, so a pair noisier than the
    model says is not declared apart on the model's word. (Taking the wider of the two always cost too much:
    two contenders 15% apart were told apart in 49% of simulated races, against 70% required.)
    """
    shared = sorted(set(leader) & set(other))
    ds = [leader[b] - other[b] for b in shared]
    n = len(ds)
    mean = sum(ds) / n if n else 0.0
    if n < 2:
        return Contrast(key, mean, None, 0, n, None)
    var, df = sum((d - mean) ** 2 for d in ds) / (n - 1), n - 1
    if model is not None and model[0] > 0 and var / model[0] <= stats.f.ppf(1 - NOISIER_ALPHA, n - 1, model[1]):
        var, df = model
    se = math.sqrt(var / n)
    p = 1.0 if se == 0 and mean == 0 else 0.0 if se == 0 else float(2 * stats.t.sf(abs(mean) / se, df))
    return Contrast(key, mean, se, df, n, p)


def look_alpha(look: int, looks: int, alpha: float = RACE_ALPHA) -> float:
    """The alpha spent at look `look` (1-based) of `looks`: proportional to the look's number cubed (most at
    the last, where a race that has not stopped has the most data), summing to `alpha` over all of them."""
    if looks <= 0 or not 1 <= look <= looks:
        return 0.0
    return alpha * look ** 3 / sum(i ** 3 for i in range(1, looks + 1))


def told_apart(contrasts: Sequence[Contrast[Key]], alpha: float, k: int | None = None) -> set[Key]:
    """The combinations told apart from the leader at family-wise `alpha`: a contrast's t statistic, times
    sqrt(2), beyond the studentized range's 1 - alpha quantile for the `k` combinations of the look (default:
    the leader and every contrast) and the contrast's degrees of freedom."""
    testable = [c for c in contrasts if c.p is not None]
    if not testable or alpha <= 0:
        return set()
    k = max(2, k or len(contrasts) + 1)
    # Step down from the contender furthest behind: once it is told apart, the rest are judged as a field one
    # smaller (every subset tested holds the leader and is the top of the field, so they nest), stopping at
    # the first that is not.
    out = set()
    for c in sorted(testable, key=_t, reverse=True):
        assert c.se is not None  # `paired` gives a contrast a p-value only with its standard error
        if not beyond_range(c.diff, c.se, c.df, alpha, k):
            break
        out.add(c.other)  # only a contender behind the leader drops out; one ahead (a late entrant) stays
        k = max(2, k - 1)
    return out


def _t(c: Contrast[Key]) -> float:
    """A tested contrast's t statistic; an exact difference (se 0) is +inf if positive, else -inf."""
    assert c.se is not None  # `paired` gives a contrast a p-value only with its standard error
    return c.diff / c.se if c.se > 0 else math.inf if c.diff > 0 else -math.inf


def beyond_range(diff: float, se: float, df: int, alpha: float, k: int) -> bool:
    """`diff` (the leader's lead) is positive and its t statistic, times sqrt(2), beyond the studentized range's
    1 - alpha quantile for k combinations and df degrees of freedom (an exact lead with se 0 always is)."""
    return diff > 0 and (se == 0 or diff / se * math.sqrt(2) > range_quantile(alpha, k, df))


@functools.lru_cache(maxsize=4096)
def range_quantile(alpha: float, k: int, df: int) -> float:
    """The studentized range's 1 - alpha quantile for k means and df degrees of freedom (scipy integrates it
    numerically, so the race's replayed looks are cached). For k = 2 it is sqrt(2) times the two-sided t's."""
    if k == 2:  # exact, and far cheaper than the integral
        return math.sqrt(2) * float(stats.t.ppf(1 - alpha / 2, df))
    return float(stats.studentized_range.ppf(1 - alpha, k, df))
