"""The race's measurements by block: each combination's value in every block of a phase, and its paired differences.

A block measures its combinations back to back with the baseline, so a difference within a block cancels the
block's drift: the race, its confirmation and the report's two-level flag all read the measurements this way.
"""
from __future__ import annotations

import statistics
from typing import Iterable, Sequence

from ablate.stats.protocol import CONFIRM, RACE, SCREEN, Key, Measurement


def by_block(measurements: Iterable[Measurement[Key]], phase: str) -> dict[Key, dict[int, float]]:
    """combination -> block -> its mean log throughput there, over the blocks of `phase`."""
    acc: dict[Key, dict[int, list[float]]] = {}
    for m in measurements:
        if m.phase == phase:
            acc.setdefault(m.combination, {}).setdefault(m.block, []).append(m.log_throughput)
    return {c: {b: statistics.fmean(v) for b, v in by.items()} for c, by in acc.items()}


def relative(values: dict[Key, dict[int, float]], c: Key, baseline: Key, blocks: Sequence[int]) -> float | None:
    """c's mean paired difference from the baseline over `blocks` (race-only estimate)."""
    base, mine = values.get(baseline, {}), values.get(c, {})
    ds = [mine[b] - base[b] for b in blocks if b in mine and b in base]
    return statistics.fmean(ds) if ds else None


def differences(values: dict[Key, dict[int, float]], a: Key, b: Key) -> list[float]:
    """a's value less b's in every block of `values` that measured both."""
    mine, theirs = values.get(a, {}), values.get(b, {})
    return [mine[k] - theirs[k] for k in sorted(set(mine) & set(theirs))]


def from_baseline(measurements: Sequence[Measurement[Key]], baseline: Key) -> dict[Key, list[float]]:
    """combination -> its per-block paired differences from the block's baselines (their mean), over every block it
    shared with one: screening, race and confirmation."""
    out: dict[Key, list[float]] = {}
    for phase in (SCREEN, RACE, CONFIRM):
        found = by_block(measurements, phase)
        base = found.get(baseline, {})
        for c, mine in found.items():
            out.setdefault(c, []).extend(mine[b] - base[b] for b in sorted(mine) if b in base)
    return out
