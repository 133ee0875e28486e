"""A simpler member of the race's final set shown as fast as its leader: the equivalence tests the headline rests on.

The race has little power by design, so *not told apart* from the leader is not *as fast*: a simpler member (fewer
techniques) stands in for the leader only where a one-sided bound shows the leader at most the margin faster. Two
modules read these tests: `ablate.stats.answer.verdicts` picks the headline by them, and `ablate.stats.race.finalists`
reads them first to know which simpler member could headline, so that its accuracy, and no other member's, is trained
(race first, accuracy last). One home, so both read the same test.
"""
from __future__ import annotations

import math
from typing import Sequence

from ablate.config.choices import BASELINE, techniques
from ablate.stats.contrasts import EQUIVALENCE_ALPHA, Contrast
from ablate.stats.protocol import CONFIRM, RACE, Measurement
from ablate.stats.race import confirmation, equivalence
from ablate.stats.race.equivalence import Equivalence


def simplest_first(members: Sequence[str]) -> list[str]:
    """`members` (in race order) by their number of techniques, race order breaking ties: the order the equivalence
    tests are run and read in, so the first member shown within the margin is the simplest."""
    return sorted(members, key=lambda c: (techniques(c), members.index(c)))


def equivalent(measurements: list[Measurement[str]], leader: str, members: list[str],
               contrasts: dict[str, Contrast[str]], margin: float | None) -> dict[str, Equivalence]:
    """Each member simpler than the leader (fewer techniques) tested for equivalence: the one-sided upper bound of
    leader / it at EQUIVALENCE_ALPHA shared over the m members tested (Bonferroni: each at alpha / m, so the chance
    that any member more than the margin slower is shown within it is at most alpha). The data: the confirmation
    blocks where both ran there (the race confirms the leader and the simplest member: blocks no selection saw),
    else the race's contrast at its last look (the leader, the luckiest of the field there, reads high against
    it: a conservative test). The margin: `margin`, else (None) the smallest the weakest of these tests can show,
    at most `equivalence.CAP`: every test shares it, so the report prints one; a truly slower member is shown within
    it at most alpha / m of the time whichever test set it (its bound is its own t standard errors above it).
    Each test carries the weakest test's `equivalence.Resolution`."""
    simpler = [c for c in members if techniques(c) < techniques(leader)]
    if not simpler:
        return {}
    fresh = confirmation.confirmed(measurements, BASELINE, leader, simpler)
    found = {c: (fresh[c], CONFIRM) if c in fresh else (contrasts[c], RACE)
             for c in simpler if c in fresh or (c in contrasts and contrasts[c].se is not None)}
    return equivalence_tests(found, margin)


def equivalence_tests(found: dict[str, tuple[Contrast[str], str]], margin: float | None) -> dict[str, Equivalence]:
    """The equivalence tests of `equivalent` on their contrasts (each with a spread) and data: the margin (`margin`,
    else the smallest the weakest test can show, at most `equivalence.CAP`) and each bound at alpha / m."""
    alpha = EQUIVALENCE_ALPHA / max(1, len(found))
    designs = [d for k, _ in found.values() if (d := equivalence.resolution(k, k.blocks, alpha, margin))]
    design = max(designs, key=lambda d: d.smallest, default=None)
    used = equivalence.effective_margin(design, margin)
    out = {}
    for c, (k, data) in found.items():
        bound = k.upper(alpha)
        assert bound is not None  # a standard error: checked above
        out[c] = Equivalence(k, data, alpha, used, math.exp(bound), design)
    return out
