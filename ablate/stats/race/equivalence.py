"""The equivalence margin a design can show, a simpler member's test against the leader, and whether more race
blocks could settle a near tie.

Why: a simpler member of the race's final set stands in for its leader only where a one-sided bound shows the
leader at most the margin faster (`ablate.stats.answer.verdicts`). That bound is the observed difference plus t standard
errors, so no margin below t standard errors can ever be shown: at 8% process noise, three confirmation blocks
(a block's difference SD 0.08 x sqrt(2), over sqrt(3)) show nothing below about 11%: a fixed 2% margin never
fires there, and extra race blocks of two members would chase a tie no block could settle. So:

- **The default margin** is the smallest the design can show, at most `CAP`: the bound of the test it will run
  (its blocks, its share of `EQUIVALENCE_ALPHA`, at the measured noise) where the difference observed is none.
  A margin a study sets is kept; where it is below what its design can show, the report says so once, with the
  smallest it can and the blocks that would show the study's (`Resolution`).
- **Past the planned race blocks** the race goes on only while more blocks can still change its answer
  (`settled`): it stops where the blocks left could not tell the leader and its closest contender apart (the
  last look's range test at the standard error all of them would give, on the largest gap the data allow) and the
  leader is shown within the margin of every member still in (a one-sided bound at `EQUIVALENCE_ALPHA` shared
  over them: whichever of them is truly fastest, the leader is at most the margin slower). Stopping also where the
  blocks left could not show the pair *equivalent* (two-sided, the gap as observed) was simulated and rejected: at 8%
  noise no twelve blocks show 5% either way, so every race stopped at its planned six, a 6% near tie included,
  and two runs agreed less often. The rule kept agrees as often as every extra block does and saves a few
  measurements. A tie's blocks are the price of the near ties beside it: at this noise a 6% gap reads as a tie
  after six blocks as often as not. Figures: docs/evidence.md, "Evidence: the equivalence margin"
  (tests/stats/test_repeat.py, test_margin.py).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Sequence

from scipy import stats

from ablate.stats.contrasts import EQUIVALENCE_ALPHA, Contrast, beyond_range
from ablate.words import percent

CAP = 0.05  # the default margin is at most 5%: a stack more than 5% slower is not "as fast" whatever the noise


@functools.lru_cache(maxsize=1024)
def _t(alpha: float, df: int) -> float:
    """The one-sided t quantile at `alpha` (cached: the race asks at every block, simulations far more)."""
    return float(stats.t.ppf(1 - alpha, max(1, df)))


def showable(se: float, df: int, alpha: float) -> float:
    """The smallest margin (a fraction) a one-sided bound at `alpha` can show at standard error `se` (`df`): its
    bound where the difference observed is none."""
    return math.expm1(_t(alpha, df) * se)


def blocks_for(margin: float, block_sd: float, df: int, alpha: float) -> int:
    """The blocks a test at `alpha` needs to show `margin` where the difference observed is none; `block_sd`: the
    SD of one block's difference (the contrast's standard error times the square root of its blocks)."""
    return max(2, math.ceil((_t(alpha, df) * block_sd / math.log1p(margin)) ** 2))


@dataclass(frozen=True)
class Resolution:
    """What the design's equivalence test can show at the measured noise: the margin it used and the smallest it
    can show; `below`: the margin is below that (no member can be shown within it but by chance)."""

    margin: float
    smallest: float  # a fraction: the test's bound where the difference observed is none
    blocks: int  # the blocks the test uses
    needed: int  # the blocks that would show `margin` at this noise
    study_set: bool  # the study set the margin; else it is derived (`CAP` at most)

    @property
    def below(self) -> bool:
        return self.margin < self.smallest

    def describe(self) -> str:
        """The warning, where the margin is below what the design can show; else ""."""
        if not self.below:
            return ""
        whose = (f"the study's margin of {percent(self.margin)}" if self.study_set else
                 f"the default margin, {percent(self.margin)} (its cap),")
        return (f"{whose} is below the smallest this design can show at the measured noise "
                f"({100 * self.smallest:.1f}% on {self.blocks} blocks), so a simpler stack is shown within it only "
                f"by chance; about {self.needed} blocks of both would show {percent(self.margin)}")


@dataclass(frozen=True)
class Equivalence:
    """A simpler member tested against the leader: the one-sided upper bound of leader / it."""

    contrast: Contrast[str]  # log(leader) - log(it), on the blocks the test used
    data: str  # CONFIRM (blocks no selection saw, both measured) or RACE
    alpha: float  # its share of EQUIVALENCE_ALPHA (Bonferroni over the members tested)
    margin: float
    bound: float  # the upper bound of leader / it, a factor (1.015: the leader at most 1.5% faster)
    resolution: Resolution | None = None  # what the weakest of the tests run beside it could show

    @property
    def shown(self) -> bool:
        return self.bound <= 1 + self.margin

    @property
    def allowed(self) -> float:
        """How much faster the leader may be than it, a fraction (0.015: up to +1.5%): what leaving out the
        techniques it lacks may cost."""
        return max(0.0, self.bound - 1)


def resolution(contrast: Contrast, blocks: int, alpha: float, margin: float | None) -> Resolution | None:
    """The design's test of `contrast` (leader less a simpler member, log) on `blocks` blocks at `alpha`, and the
    margin: the study's (`margin`), else the smallest that test can show, at most `CAP`. None without a spread."""
    if contrast.se is None or contrast.blocks < 1:
        return None
    block_sd = contrast.se * math.sqrt(contrast.blocks)
    smallest = showable(block_sd / math.sqrt(max(1, blocks)), contrast.df, alpha)
    used = margin if margin is not None else min(CAP, smallest)
    return Resolution(used, smallest, blocks, blocks_for(used, block_sd, contrast.df, alpha), margin is not None)


def effective_margin(design: Resolution | None, margin: float | None) -> float:
    """The margin a decision uses: its design's (`resolution`), else the study's own `margin`, else `CAP` (no
    contrast with a spread to derive one from)."""
    return design.margin if design else margin or CAP


def bound(contrast: Contrast, alpha: float = EQUIVALENCE_ALPHA) -> float | None:
    """The one-sided upper bound at `alpha` of how much faster either of a pair may be than the other, a factor
    (1.08: up to 8%), the gap as observed. None without a spread."""
    if contrast.se is None:
        return None
    return math.exp(abs(contrast.diff) + _t(alpha, contrast.df) * contrast.se)


def behind(contrast: Contrast, alpha: float) -> float | None:
    """The one-sided upper bound at `alpha` of how much slower the leader may be than the other, a fraction (0.03:
    the other up to 3% faster; 0 where the bound has the leader ahead). None without a spread."""
    if contrast.se is None:
        return None
    return max(0.0, math.expm1(_t(alpha, contrast.df) * contrast.se - contrast.diff))


def could_tell_apart(contrast: Contrast, left: int, alpha: float, k: int) -> bool:
    """Whether `left` more blocks of a pair could tell it apart were its gap as large as the data allow (`bound`):
    the range test at `alpha` over `k` combinations (the last look's) on the standard error all of them would give.
    The gap as observed instead cost the race its power on real gaps, since a pair still in after the planned blocks
    is one whose gap read low (docs/evidence.md, "Evidence: the equivalence margin"). Optimistic where the look is
    guarded (its half gap and sign flips are not asked). A pair without a spread yet: it could."""
    allowed = bound(contrast)
    if allowed is None or contrast.se is None:
        return True
    se = contrast.se * math.sqrt(contrast.blocks / (contrast.blocks + max(0, left)))
    return left > 0 and beyond_range(math.log(allowed), se, contrast.df, alpha, k)


def settled(closest: Contrast, still: Sequence[Contrast], left: int, alpha: float, k: int, margin: float) -> bool:
    """Whether a race past its planned blocks is done: the `left` blocks it may still take could not tell the
    leader and its `closest` contender apart (`could_tell_apart`), and the leader is within `margin` of every
    member still in (`still`: its contrasts with them; `behind` at EQUIVALENCE_ALPHA shared over them)."""
    if could_tell_apart(closest, left, alpha, k):
        return False
    shared = EQUIVALENCE_ALPHA / max(1, len(still))
    return all((b := behind(c, shared)) is not None and b <= margin for c in still)
