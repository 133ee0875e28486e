"""Whether a combination's processes ran at two speed levels: a flag for the report, not a decision of the race.

Why: bf16 emulated on a CPU runs at one of two speeds about 40% apart, each fresh process drawing one, where the
baseline moves by a few percent (docs/measuring.md, "Two-level processes"). Such a combination's mean speed-up is
no typical process's, and a user who deploys it gets one level or the other. The race guards its decisions against
such processes (`ablate.stats.contrasts`); this says which combinations showed two levels.

The rule: sort a combination's per-block paired differences from the baseline; of every split into a low and a
high group (two values or more each), take the one whose means are furthest apart in units of the two groups'
pooled SD about their own means; flag it where that separation is beyond what FLAG_ALPHA of normal samples of
the same size show (their quantile, simulated once per size with a fixed seed, so the flag is a pure function of
the measurements). So the false-flag rate on normal noise is FLAG_ALPHA whatever the noise's size. With few values
it has little power (tests/stats/test_bimodal_race.py; docs/measuring.md, "The two-level flag";
docs/evidence.md, "Evidence: the two-level flag").
"""
from __future__ import annotations

import functools
from typing import Sequence

import numpy as np

FLAG_ALPHA = 0.025  # a normal process is flagged this often
SIDE = 2  # values each side of the split at least
DRAWS = 20_000  # normal samples per size simulated for the critical value


def separation(values: np.ndarray) -> np.ndarray:
    """The largest separation over the splits of each row of `values` (sorted along the last axis, 2 * SIDE values
    or more) with SIDE values or more each side: the high group's mean less the low group's, over the groups'
    pooled SD about their own means."""
    n = values.shape[-1]
    cum, cum2 = np.cumsum(values, axis=-1), np.cumsum(values ** 2, axis=-1)
    total, total2 = cum[..., -1:], cum2[..., -1:]
    low = np.arange(SIDE, n - SIDE + 1)  # values in the low group
    s_low, s2_low = cum[..., low - 1], cum2[..., low - 1]
    s_high, s2_high = total - s_low, total2 - s2_low
    within = (s2_low - s_low ** 2 / low) + (s2_high - s_high ** 2 / (n - low))
    gap = s_high / (n - low) - s_low / low
    with np.errstate(divide="ignore", invalid="ignore"):
        found = gap / np.sqrt(np.maximum(within, 0) / (n - 2))
    return np.nan_to_num(found, nan=0.0, posinf=np.inf).max(axis=-1)


@functools.lru_cache(maxsize=64)
def critical(n: int) -> float:
    """The separation that FLAG_ALPHA of normal samples of n values exceed."""
    draws = np.sort(np.random.default_rng(n).standard_normal((DRAWS, n)), axis=-1)
    return float(np.quantile(separation(draws), 1 - FLAG_ALPHA))


def two_levels(values: Sequence[float]) -> bool:
    """The values fall in two levels (see the module's rule); never with fewer than 2 * SIDE values."""
    if len(values) < 2 * SIDE:
        return False
    return bool(separation(np.sort(np.asarray(values, dtype=float))) > critical(len(values)))
