"""The exact sign-flip test of paired differences, and its confidence interval.

Why: under a true tie each paired difference is symmetric about zero (the blocks' random order, and processes
drawn alike), so every pattern of signs is as likely as the one observed. The share of sign patterns whose |sum|
is at least the observed one is an exact p-value whatever the differences' distribution: a two-level (bimodal)
process cannot fool it, where the t and the studentized range test, which take a sample's mean and spread as
independent, read a run of processes at one level as a gap (`ablate.stats.contrasts`). The price: it cannot go
below 2 / 2**n for n differences.
"""
from __future__ import annotations

import functools
import math
from typing import Sequence

import numpy as np

EXACT_FLIPS = 16  # up to this many differences every sign pattern is enumerated; beyond, 2**16 are drawn
DRAWN_FLIPS = 2 ** 16


def smallest_p(n: int) -> float:
    """The smallest p-value `sign_flip_p` can give for n differences: all of one sign (and its mirror)."""
    return 2 / 2 ** n if n <= EXACT_FLIPS else 1 / (DRAWN_FLIPS + 1)


def sign_flip_p(ds: Sequence[float]) -> float:
    """The two-sided p-value of "no difference" of paired differences `ds`: the share of their sign flips whose |sum|
    is at least theirs. Beyond EXACT_FLIPS differences, DRAWN_FLIPS random flips (seeded: the race stays a pure
    function of its measurements), counted with the observed one so that the p-value stays valid."""
    x = np.asarray(ds, dtype=float)
    at_least = int(np.count_nonzero(np.abs(_signs(len(x)) @ x) >= abs(x.sum()) * (1 - 1e-12)))
    if len(x) <= EXACT_FLIPS:
        return at_least / 2 ** len(x)
    return (at_least + 1) / (DRAWN_FLIPS + 1)


def sign_flip_interval(ds: Sequence[float], alpha: float) -> tuple[float, float]:
    """The shifts d that `sign_flip_p` of `ds` less d does not reject at `alpha`: the sign-flip test's confidence
    interval (the whole line where no shift can be rejected).

    A sign pattern e counts at d where |sum of e (x - d)| >= |sum of (x - d)|. Unless e is all of one sign (it always
    counts), its own sum moves slower in d than the observed one, so it counts on an interval about the mean, from
    one root of that equation to the other: p(d) rises to 1 at the mean and falls beyond it, the shifts it does not
    reject are an interval, and its ends are the m-th lowest left root and the m-th highest right root, m the
    patterns that must count besides the ones that always do."""
    x = np.asarray(ds, dtype=float)
    n, total = len(x), float(x.sum())
    signs = _signs(n)
    flips, weights = signs @ x, signs.sum(axis=1)
    always = np.abs(weights) == n
    exact = n <= EXACT_FLIPS
    # p(d) = (counted + (0 if exact else 1)) / (2**n if exact else DRAWN_FLIPS + 1) > alpha, counted = always + inside
    need = math.floor(alpha * (2 ** n if exact else DRAWN_FLIPS + 1) - (0 if exact else 1) - int(always.sum())) + 1
    if need <= 0:
        return -math.inf, math.inf
    a, w = flips[~always], weights[~always]
    roots = np.stack([(a - total) / (w - n), (a + total) / (w + n)])  # e (x - d) = +-(the observed sum)
    low, high = np.sort(roots.min(axis=0)), np.sort(roots.max(axis=0))
    return float(low[need - 1]), float(high[-need])


@functools.lru_cache(maxsize=64)
def _signs(n: int) -> np.ndarray:
    """Every sign pattern of n differences as rows of +-1 (or DRAWN_FLIPS random ones beyond EXACT_FLIPS)."""
    if n <= EXACT_FLIPS:
        return ((np.arange(2 ** n)[:, None] >> np.arange(n)) & 1) * 2.0 - 1
    return np.random.default_rng(0).choice([-1.0, 1.0], size=(DRAWN_FLIPS, n))
