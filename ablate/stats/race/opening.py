"""The race's opening field as screening chose it, and the members of it never raced.

Screened in full, the field is the screening leader and every eligible combination screening cannot tell apart
from it; screened on a fraction, the screening model's field (`ablate.stats.screening.factorial.race_field`).
`ablate.stats.race.racing` opens the race with it, and names at the end those of it that never got a seat.
"""
from __future__ import annotations

import dataclasses
from typing import AbstractSet, Callable, Mapping, Sequence

from ablate.stats.contrasts import SCREEN_ALPHA
from ablate.stats.protocol import SCREEN, Estimate, Key, Measurement, ProtocolSettings, estimates, screened_apart
from ablate.stats.screening import factorial


def never_raced(measurements: Sequence[Measurement[Key]], baseline: Key, eligible: AbstractSet[Key],
                techniques: Callable[[Key], frozenset], raced: set[Key], pending: list[Key],
                protocol: ProtocolSettings, screen: factorial.Fit[Key] | None = None) -> tuple[Key, ...]:
    """The race's field as screening chose it (as at the race's first step: `field`) and the pending challengers
    (best screened first), less every one that was raced."""
    screened = {c: e for c, e in estimates([m for m in measurements if m.phase == SCREEN], baseline,
                                             techniques).items() if c in eligible}
    if not screened:
        return tuple(c for c in pending if c != baseline)
    opened = field(screened, eligible, baseline, protocol.contenders, screen)
    return tuple(c for c in dict.fromkeys([*opened, *pending]) if c not in raced and c != baseline)


def field(screened: Mapping[Key, Estimate], eligible: AbstractSet[Key], baseline: Key, contenders: int,
          screen: factorial.Fit[Key] | None) -> list[Key]:
    """The race's opening field, best first. Screened in full: the screening leader (the baseline, maybe) and every
    eligible combination not screened apart from it (`screened_apart`). Screened on a fraction: the model's
    field (`factorial.race_field`, at most `contenders`, never the baseline) over the eligible combinations,
    measured or not: its predictions pool every screened cell, where one cell's own estimate rests on one
    process."""
    if screen is not None:
        allowed = {c: p for c, p in screen.predictions.items() if c in eligible}
        fit = screen if len(allowed) == len(screen.predictions) else dataclasses.replace(screen, predictions=allowed)
        return [c for c in factorial.race_field(fit, max(1, contenders), SCREEN_ALPHA) if c != baseline]
    rank = sorted(screened, key=lambda c: (-screened[c].log, str(c)))
    return [c for c in rank if c == rank[0] or not screened_apart(screened[rank[0]], screened[c], len(rank))]
