"""The decisions over stored records: each combination's accuracy-parity verdict, and the recommendation.

The statistics live in `ablate.stats.parity` (the verdict and the parity race),
`ablate.stats.racing` (the race, its confirmation blocks, the set of contenders)
and `ablate.stats.contrasts` (paired contrasts, judged by the studentized range); this module feeds them
the records of one device and hands back records.
"""
from __future__ import annotations

from dataclasses import dataclass

from ablate.config.choices import BASELINE, techniques
from ablate.config.design import ProtocolSettings
from ablate.stats import analysis, parity, protocol, racing
from ablate.stats.contrasts import Contrast
from ablate.store.records import Record, baseline
from ablate.trial import metrics as metric


def accuracies(records: list[Record]) -> dict[str, dict[int, float]]:
    """accuracy group -> seed index -> the test accuracy of the run that trained it at that seed."""
    out: dict[str, dict[int, float]] = {}
    for r in records:
        for m in r.measurements or (r,):
            if m.complete and m.accuracy_trained and m.accuracy is not None:
                group = m.accuracy_group or (BASELINE if m.combination == BASELINE else m.combination)
                out.setdefault(group, {}).setdefault(m.seed_index, m.accuracy)
    return out


def parity_sample_size(records: list[Record]) -> int | None:
    """The test set's size (the paired binomial error's n), where the trials recorded it."""
    sizes = [m.metrics.get(metric.TEST_SAMPLES) for r in records for m in (r.measurements or (r,))]
    return int(max(s for s in sizes if s)) if any(sizes) else None


def parity_by_group(records: list[Record], tolerance: float) -> dict[str, parity.Parity]:
    return parity.verdicts(accuracies(records), BASELINE, tolerance, parity_sample_size(records))


def _group(r: Record) -> str:
    return r.accuracy_group or (BASELINE if r.combination == BASELINE else r.combination)


def parity_of(records: list[Record], tolerance: float,
              groups: dict[str, parity.Parity] | None = None) -> dict[str, parity.Parity]:
    """combination -> its accuracy group's verdict (combinations without a measured accuracy: none). `groups`: the
    groups' verdicts (`parity_by_group`) when the caller has them already."""
    found = parity_by_group(records, tolerance) if groups is None else groups
    return {r.combination: found[_group(r)] for r in records
            if r.complete and r.accuracy is not None and _group(r) in found}


def parity_failures(records: list[Record], tolerance: float,
                    found: dict[str, parity.Parity] | None = None) -> list[Record]:
    """Complete combinations whose accuracy is `below` the baseline's by more than the tolerance (a test)."""
    found = parity_of(records, tolerance) if found is None else found
    return [r for r in records if r.combination in found and found[r.combination].below]


def eligible(records: list[Record], tolerance: float,
             verdicts: dict[str, parity.Parity] | None = None) -> list[Record]:
    """Complete combinations that may be raced and recommended: parity `ok` or `uncertain`, or any where
    accuracy could not be measured at all (stand-in data; the report says so)."""
    flagged = {r.number for r in parity_failures(records, tolerance, verdicts)}
    return [r for r in records
            if r.complete and r.number not in flagged and (r.accuracy is not None or r.accuracy_note)]


@dataclass(frozen=True)
class Recommendation:
    """The race's leader, its estimate from blocks its selection never saw, and the set it could not be told
    apart from, simplest (fewest techniques) first."""

    leader: Record
    speedup: analysis.Speedup | None
    members: tuple[Record, ...]  # the leader and its contenders, simplest first
    contrasts: dict[str, Contrast[str]]  # combination -> leader minus it (log), at the race's last look
    eliminated: tuple[str, ...]  # told apart from the leader
    pending: tuple[str, ...]  # screened once, beating the leader's race estimate, never raced: not recommended
    race: racing.Race[str]
    parity: parity.Parity | None

    @property
    def simplest(self) -> Record:
        return self.members[0]

    @property
    def confirmed(self) -> bool:
        return self.speedup is not None and self.speedup.estimate.phase == protocol.CONFIRM


def recommendation(records: list[Record], tolerance: float, settings: ProtocolSettings | None = None,
                   speedup_of: dict[str, analysis.Speedup] | None = None,
                   verdicts: dict[str, parity.Parity] | None = None) -> Recommendation | None:
    """The race's leader among the eligible combinations, never a combination screened once. `speedup_of` and
    `verdicts`: the speed-ups and parity verdicts when the caller has them already (`ablate.stats.comparison`)."""
    verdicts = parity_of(records, tolerance) if verdicts is None else verdicts
    ok = {r.combination: r for r in eligible(records, tolerance, verdicts)}
    if not ok:
        return None
    standing = racing.race(analysis.protocol_measurements(records), BASELINE, set(ok),
                             settings or ProtocolSettings())
    if standing.leader is None or standing.leader not in ok:
        return None
    order = [standing.leader, *standing.contenders]
    members = sorted((c for c in order if c in ok), key=lambda c: (techniques(c), order.index(c)))
    speedup_of = analysis.speedup_of(records) if speedup_of is None else speedup_of
    return Recommendation(ok[standing.leader], speedup_of.get(standing.leader), tuple(ok[c] for c in members),
                          {c.other: c for c in standing.contrasts}, standing.eliminated, standing.pending, standing,
                          verdicts.get(standing.leader))


def base_accuracy(records: list[Record]) -> float | None:
    base = baseline(records)
    return base.accuracy if base else None
