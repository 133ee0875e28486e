"""The decisions over stored records: each combination's accuracy-parity verdict, and the recommendation.

The recommendation is the race's leader with its confirmed speed-up; where its accuracy puts it out, the race runs
again without its group (`ablate.stats.race.finalists`: race first, accuracy last). The race has
little power by design, so *not told apart* from the leader is not *as fast*: a simpler member (fewer techniques)
of the set replaces the leader only where an equivalence test shows the leader at most the margin faster
(`ablate.stats.race.simpler`): the study's `equivalence_margin`, else the smallest its design can show at the measured
noise, at most 5% (`ablate.stats.race.equivalence`; a fixed 2% never fired at 8% noise, where three blocks show 11%).
Headlining the set's simplest member without that test was simulated and rejected: it was seldom the leader and
several percent slower than the best (docs/evidence.md, "Evidence: the equivalence margin";
tests/stats/test_headline.py). Where a simpler member headlines, the leader's techniques it lacks are named with
what leaving them out may cost: the bound of its test (`Recommendation.left_out`, `Equivalence.allowed`).

The leader must also read faster than the baseline on its confirmation blocks, which its selection never saw. Where
the baseline is in its set and those blocks read the leader no faster, the race takes as many more
(`ablate.stats.race.racing`), and where all of them still do, the answer is to keep the loop
(`Recommendation.unconfirmed`): the race's leader is the largest of several estimates, high by chance in a near tie,
so where nothing helps it is most often a stack no faster than the loop (docs/evidence.md, "Evidence: the leader's
confirmation"; tests/stats/test_unconfirmed_leader.py).

The statistics live in `ablate.stats.parity` (the verdict and the parity race),
`ablate.stats.race.racing` (the race, its confirmation blocks, the set of contenders)
and `ablate.stats.contrasts` (paired contrasts, judged by the studentized range); this module feeds them
the records of one device and hands back records.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ablate.config.choices import BASELINE, parts
from ablate.config.design import ProtocolSettings
from ablate.stats import parity, speedups
from ablate.stats.contrasts import Contrast
from ablate.stats.protocol import CONFIRM
from ablate.stats.race import equivalence, finalists, racing
from ablate.stats.race.equivalence import CAP, Equivalence, Resolution

# The accuracy records' helpers live beside the final set that reads them first; their names stay here too.
from ablate.stats.race.finalists import accuracies as accuracies
from ablate.stats.race.finalists import accuracy_unmeasured as accuracy_unmeasured
from ablate.stats.race.finalists import group_of as _group
from ablate.stats.race.finalists import parity_sample_size as parity_sample_size
from ablate.stats.race.simpler import equivalent, simplest_first
from ablate.stats.screening import fractioned
from ablate.store.records import Record, baseline


def parity_by_group(records: list[Record], tolerance: float) -> dict[str, parity.Parity]:
    return parity.verdicts(accuracies(records), BASELINE, tolerance, parity_sample_size(records))


def parity_of(records: list[Record], tolerance: float,
              groups: dict[str, parity.Parity] | None = None) -> dict[str, parity.Parity]:
    """combination -> its accuracy group's verdict (combinations without a measured accuracy: none). `groups`: the
    groups' verdicts (`parity_by_group`) when the caller has them already."""
    found = parity_by_group(records, tolerance) if groups is None else groups
    return {r.combination: found[_group(r)] for r in records
            if r.complete and r.accuracy is not None and _group(r) in found}


def parity_failures(records: list[Record], tolerance: float,
                    found: dict[str, parity.Parity] | None = None) -> list[Record]:
    """Complete combinations whose accuracy group is never raced or recommended (`parity.Parity.ineligible`): `below`
    the baseline's by more than the tolerance (a test), or `uncertain` with its mean change past it (probably
    below)."""
    found = parity_of(records, tolerance) if found is None else found
    return [r for r in records if r.combination in found and found[r.combination].ineligible]


def eligible(records: list[Record], tolerance: float,
             verdicts: dict[str, parity.Parity] | None = None) -> list[Record]:
    """Complete combinations that may be raced and recommended: parity `ok`, or `uncertain` with its mean change
    within the tolerance (not probably below: `ablate.stats.parity`), or any where
    accuracy could not be measured at all (stand-in data, or the baseline's own accuracy training failed: the
    answer is then on speed alone, and the report says so). The baseline is always one: it is the reference."""
    flagged = {r.number for r in parity_failures(records, tolerance, verdicts)}
    on_speed = accuracy_unmeasured(records) is not None
    return [r for r in records
            if r.complete and r.number not in flagged
            and (r.accuracy is not None or r.accuracy_note or on_speed or r.combination == BASELINE)]


@dataclass(frozen=True, kw_only=True)
class Recommendation:
    """The leader (the race's, or the next member of its final set where accuracy put that out), its estimate
    from blocks its selection never saw, the set it could not be told apart from (eligible, simplest first), and
    the headline: the leader, or the simplest member shown equivalent to it."""

    leader: Record
    speedup: speedups.Speedup | None  # the leader's
    members: tuple[Record, ...]  # the leader and its contenders, simplest first
    contrasts: dict[str, Contrast[str]]  # combination -> leader minus it (log), at the race's last look, judged
    eliminated: tuple[str, ...]  # told apart from the leader
    pending: tuple[str, ...]  # screened once, beating the leader's race estimate, never raced: not recommended
    race: racing.Race[str] | None
    parity: parity.Parity | None  # the headline's
    headline: Record | None = None  # None: the leader
    equivalence: dict[str, Equivalence] = field(default_factory=dict)  # the simpler members tested
    dropped: dict[str, Contrast[str]] = field(default_factory=dict)  # eliminated -> the contrast that dropped it
    not_raced: tuple[str, ...] = ()  # field members that never got a race seat (their estimates: screening's)
    margin: float = CAP  # the study's, else the smallest its design could show (`equivalence.resolution`)
    accuracy_unmeasured: str | None = None  # why the answer is on speed alone
    two_level: tuple[str, ...] = ()  # raced ones whose processes ran at two speed levels (`ablate.stats.race.levels`)
    rounds: int = 1  # races run: more where a whole final set was out on accuracy (`ablate.stats.race.finalists`)
    resolution: Resolution | None = None  # what its weakest equivalence test could show (None: none ran)
    unconfirmed: bool = False  # the baseline stands in: the leader's confirmation blocks read it no faster than it

    @property
    def pick(self) -> Record:
        """The recommended combination: the headline."""
        return self.headline or self.leader

    @property
    def simplest(self) -> Record:
        return self.members[0]

    @property
    def trains_as_baseline(self) -> bool:
        """The pick trains as the baseline does (`finalists.trains_as_baseline`): its accuracy is the loop's own."""
        return finalists.trains_as_baseline(self.pick)

    @property
    def confirmed(self) -> bool:
        return self.speedup is not None and self.speedup.estimate.phase == CONFIRM

    @property
    def left_out(self) -> tuple[str, ...]:
        """The leader's techniques the headline lacks (in the leader's order): none where the leader headlines. What
        leaving them out may cost: the headline's `Equivalence.allowed`."""
        mine = set(parts(self.pick.combination))
        return tuple(t for t in parts(self.leader.combination) if t not in mine)


def recommendation(records: list[Record], tolerance: float, protocol: ProtocolSettings | None = None,
                   speedup_of: dict[str, speedups.Speedup] | None = None,
                   verdicts: dict[str, parity.Parity] | None = None,
                   screened: fractioned.Fractioned | None = None) -> Recommendation | None:
    """The leader of the race's last round (`ablate.stats.race.finalists`: a round whose leader accuracy put out is
    raced again without it), never a combination screened once, and the headline: the simplest eligible member
    of its set shown within `protocol.equivalence_margin` of it (`equivalent`), else the leader. While the race
    runs, its leader and contenders not known to be out. `speedup_of` and `verdicts`: the speed-ups and parity
    verdicts when the caller has them already (`ablate.stats.answer.comparison`); `screened`: the fraction screening
    measured, where it measured one (`ablate.stats.screening.fractioned.of`)."""
    protocol = protocol or ProtocolSettings()
    verdicts = parity_of(records, tolerance) if verdicts is None else verdicts
    found = finalists.final(records, tolerance, protocol, screened)
    standing = found.standing
    byc = {r.combination: r for r in records if r.complete}
    order = list(found.eligible) if found.members else \
        [c for c in (standing.leader, *standing.contenders) if c is not None and not _out(c, verdicts)]
    if not order:
        return None
    leader = order[0]
    members = simplest_first(order)
    # The race's contrasts are its leader's: while it runs, a leader out on accuracy leaves them to no other.
    contrasts = {c.other: c for c in standing.contrasts} if leader == standing.leader else {}
    tested = dict(found.tested) or equivalent(found.measurements, leader, members, contrasts,
                                              protocol.equivalence_margin)
    design = next(iter(tested.values())).resolution if tested else None
    shown = [c for c in members if c in tested and tested[c].shown]
    base = tested.get(BASELINE)
    # On the extra blocks too (`racing._unconfirmed`): a study stored before them, or stopped first, keeps its leader.
    unconfirmed = (not shown and base is not None and base.data == CONFIRM and base.contrast.diff <= 0
                   and base.contrast.blocks >= protocol.most_confirm_blocks)
    headline = byc[shown[0]] if shown else byc[BASELINE] if unconfirmed else byc[leader]
    speedup_of = speedups.speedup_of(records) if speedup_of is None else speedup_of
    return Recommendation(
        leader=byc[leader], speedup=speedup_of.get(leader), members=tuple(byc[c] for c in members),
        contrasts=contrasts, eliminated=standing.eliminated, pending=standing.pending, race=standing,
        parity=verdicts.get(headline.combination), headline=headline, equivalence=tested,
        dropped={c.other: c for c in standing.dropped_by},
        not_raced=tuple(c for c in standing.not_raced if not _out(c, verdicts)),
        margin=equivalence.effective_margin(design, protocol.equivalence_margin),
        accuracy_unmeasured=accuracy_unmeasured(records), two_level=tuple(c for c in standing.two_level if c in order),
        rounds=found.round + 1, resolution=design, unconfirmed=unconfirmed)


def _out(combination: str, verdicts: dict[str, parity.Parity]) -> bool:
    """Known to be kept out on accuracy: its group's verdict is `below` or probably below."""
    return combination in verdicts and verdicts[combination].ineligible


def base_accuracy(records: list[Record]) -> float | None:
    base = baseline(records)
    return base.accuracy if base else None
