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
- **K comparisons:** at one look the leader's p-values against its K
  contenders go through Holm's step-down procedure (statsmodels), so the
  chance that any true tie is declared broken is at most the look's alpha.
- **Repeated looks:** the race looks after each of its blocks from
  `MIN_RACE_BLOCKS` on; the family-wise alpha is spent over those looks,
  growing with the square of the look's number (most at the last look),
  and the spent amounts sum to `ALPHA` (Bonferroni over looks: conservative).
- **Equivalence:** where a contrast cannot tell two apart, its two one-sided
  tests (TOST) at 5% - the 90% interval - bound how large a difference the
  data rule out: "within +-3% of the leader".
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Hashable, Mapping, Sequence

from scipy import stats

ALPHA = 0.05  # family-wise error over the whole race: a true tie is declared broken at most this often
EQUIVALENCE_CONFIDENCE = 0.90  # two one-sided tests at 5%
NOISIER_ALPHA = 0.25  # a pair's own spread replaces the variance model's when it is this significantly wider

Key = Hashable


@dataclass(frozen=True)
class Contrast:
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
           model: tuple[float, int] | None = None) -> Contrast:
    """The contrast of two combinations from their per-block log throughputs (block -> value).

    `model`: the variance model's variance of one block's difference (the two combinations' process variances
    summed, `ablate.variance`) and its degrees of freedom. Its many degrees of freedom buy power that a pair's
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


def look_alpha(look: int, looks: int, alpha: float = ALPHA) -> float:
    """The alpha spent at look `look` (1-based) of `looks`: proportional to the look's number squared (most at
    the last, where a race that has not stopped has the most data), summing to `alpha` over all of them."""
    if looks <= 0 or not 1 <= look <= looks:
        return 0.0
    return alpha * look ** 2 / sum(i ** 2 for i in range(1, looks + 1))


def told_apart(contrasts: Sequence[Contrast], alpha: float) -> set[Key]:
    """The combinations Holm's procedure at `alpha` tells apart from the leader (only the testable ones count
    towards K)."""
    testable = [c for c in contrasts if c.p is not None]
    if not testable or alpha <= 0 or min(c.p for c in testable) > alpha / len(testable):
        return set()  # Holm's first step rejects nothing: neither does any later one
    reject = _holm(tuple(c.p for c in testable), alpha)
    # Only a contender behind the leader drops out; one ahead on the blocks both ran in (a late entrant) stays.
    return {c.other for c, r in zip(testable, reject) if r and c.diff > 0}


def _holm(p_values: tuple[float, ...], alpha: float) -> tuple[bool, ...]:
    """Holm's step-down rejections: the i-th smallest p-value is compared with alpha / (K - i), stopping at the
    first that fails. Written here rather than called from statsmodels because its Holm branch runs a full
    `gc.collect()` on every call (0.1-0.7 s in a large process) and the race replays its looks on every call;
    tests/test_decisions.py checks it against `statsmodels.stats.multitest.multipletests(method="holm")`."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    reject = [False] * len(p_values)
    for rank, i in enumerate(order):
        if p_values[i] > alpha / (len(p_values) - rank):
            break
        reject[i] = True
    return tuple(reject)
