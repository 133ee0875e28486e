"""The confirmation blocks' contrasts: the leader against the others over blocks no selection saw."""
from __future__ import annotations

from typing import Callable, Sequence

from ablate.stats import variance
from ablate.stats.contrasts import Contrast, paired
from ablate.stats.protocol import CONFIRM, Key, Measurement, default_techniques, noise_sources
from ablate.stats.race.blocks import by_block


def planned(measurements: Sequence[Measurement[Key]], blocks: int) -> list[Measurement[Key]]:
    """The measurements with the first `blocks` confirmation blocks alone: what the race had when it chose whether to
    take more (`racing._unconfirmed`)."""
    first = sorted({m.block for m in measurements if m.phase == CONFIRM})[:blocks]
    return [m for m in measurements if m.phase != CONFIRM or m.block in first]


def confirmed(measurements: Sequence[Measurement[Key]], baseline: Key, leader: Key, others: Sequence[Key],
              techniques: Callable[[Key], frozenset] | None = None) -> dict[Key, Contrast[Key]]:
    """The leader against each of `others` over the confirmation blocks both ran in (the baseline runs in every
    one), paired as the race pairs, with the variance model's variance: blocks no selection saw. Only those
    with two shared confirmation blocks or more (so a standard error)."""
    techniques = techniques or default_techniques(baseline)
    values = by_block(measurements, CONFIRM)
    if leader not in values:
        return {}
    fitted = variance.fit(noise_sources(measurements, baseline, techniques))
    model = (lambda c: (fitted.variance(techniques(c)), fitted.df_for(techniques(c)))) if fitted else None
    found = {c: paired(values[leader], values.get(c, {}), c,
                       variance.of_difference(model(leader), model(c)) if model else None)
             for c in others if c != leader}
    return {c: k for c, k in found.items() if k.se is not None}
