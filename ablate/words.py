"""Words and figures in the sentences ablate prints: counted nouns ("1 block", "2 blocks"), and a speed-up or an
accuracy change with its interval, written the same way on every surface."""
from __future__ import annotations

import math


def count(n: float, noun: str, plural: str | None = None) -> str:
    """`n` and `noun`, plural unless `n` is one; `plural` where adding an s is wrong. Whole numbers print as
    such (a float count from a metric included); others with the digits they have."""
    shown = f"{n:,.0f}" if float(n).is_integer() else f"{n:g}"
    return f"{shown} {noun if n == 1 else plural or noun + 's'}"


def span(low: float, high: float, between: str = "-") -> str:
    """A range of counts or minutes, `3-7`; one figure where its ends agree."""
    return f"{low}" if low == high else f"{low}{between}{high}"


def minute_ends(low: float, high: float) -> tuple[int, int]:
    """Minutes left as said: each end rounded, except a low end under half a minute, which is 0 ("under N min"), its
    high end then rounded up and at least one: "1 min", said with seconds left, would not hold."""
    return (0, max(1, math.ceil(high))) if round(low) < 1 else (round(low), round(high))


def minutes_left(low: float, high: float) -> str:
    """`12-30 min`, or `under 3 min` (`minute_ends`): an overrun never says that nothing is left."""
    said_low, said_high = minute_ends(low, high)
    return f"{span(said_low, said_high)} min" if said_low else f"under {said_high} min"


def confidence(alpha: float) -> str:
    """An interval's confidence, `97.5%` or `99.96%`: as many decimals as its alpha needs, so a look's small alpha
    never reads as a certain `100.0%`."""
    decimals = max(1, -math.floor(math.log10(100 * alpha))) if alpha > 0 else 1
    return f"{100 * (1 - alpha):.{decimals}f}%"


def percent(share: float | None, signed: bool = False) -> str:
    """A share as a percentage: a tenth of a point below 10% (`4.6%`, `+2.5%`, `5%`), whole from there (`12%`). A
    margin or a move computed from a spread is no more precise than that, and `4.63477%` reads as if it were.
    `None` (nothing computed): ""."""
    if share is None:
        return ""
    shown = f"{100 * share:{'+' if signed else ''}.{0 if abs(share) >= 0.1 else 1}f}"
    return f"{shown.removesuffix('.0')}%"


def interval(low: float, high: float, signed: bool = False) -> str:
    """`[0.98, 1.17]`: two decimals, since the interval is wider than that; `signed`: `[-0.30, +0.54]`."""
    return f"[{low:+.2f}, {high:+.2f}]" if signed else f"[{low:.2f}, {high:.2f}]"


def factor(point: float, low: float | None = None, high: float | None = None, no_interval: str = "") -> str:
    """A speed-up as every surface prints it, `x1.07 [0.98, 1.17]`; `no_interval` follows the point where there is
    none."""
    return f"x{point:.2f}" + (f" {interval(low, high)}" if low is not None and high is not None else no_interval)


def points(change: float, low: float | None = None, high: float | None = None) -> str:
    """An accuracy change in points as every surface prints it, `+0.12 [-0.30, +0.54]`."""
    return f"{change:+.2f}" + (f" {interval(low, high, signed=True)}" if low is not None and high is not None else "")
