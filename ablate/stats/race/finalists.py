"""Race first, accuracy last: the final set, the accuracy that decides it, and which member headlines.

Throughput decides the field. Screening and the race (`ablate.stats.race.racing`) read throughputs only, over every
runnable combination (where screening measured a fraction of the grid, those never measured too, on the screening
model's word: `ablate.stats.screening.fractioned`). Then accuracy parity (`ablate.stats.parity`) is trained only where
it decides the answer (`_wanted`): the race's leader's group with the baseline's, and where those give the
seed-to-seed spread fewer than `parity.NOISE_DF` degrees of freedom, the next-fastest groups' seeds until they do
(`seeds_wanted`). Then:

- **The leader's accuracy allows it** (neither `below` nor probably below: `parity.Parity.ineligible`): its
  confirmation blocks are measured. Confirmation waits for accuracy because a leader put out would have had its
  blocks for nothing; they are still blocks its selection never saw, since no accuracy moves a throughput. Then
  the members simpler than it are tested for equivalence (`ablate.stats.race.simpler`), and the simplest one shown
  within the margin headlines once its accuracy, trained now, allows it (where it does not, it leaves the tests
  and the next shown one is asked); none shown, the leader headlines.
- **Else a new round.** The race runs again, with every group known to be out (ineligible, or its training
  failed) left out, on screening and the new round's own blocks: the earlier round's eliminations were against
  a leader now out, so they prove nothing. Rounds are told apart in the stored records by the parity trainings
  queued between them. Handing the lead to the next eligible member in race order instead was simulated and
  rejected: members waiting past the planned blocks are ranked on few blocks, so it named the truly fastest
  eligible stack less often than a new round does.

So a member of the final set neither leading nor shown as fast is never trained for the answer: it could headline
only were the leader out, and then the race runs again. Training every final-set member's group costs more trainings
for the same headlines. Both simulated in tests/stats/test_race_first.py; figures in docs/measuring.md, "Accuracy
last, where it decides first"; docs/evidence.md, "Evidence: the final set".

Then the table (`table`; not under `protocol.quick`): once the answer is done, every group still without an
accuracy trains once, at the run's own seed, the final set's first, so that every row has one. The answer never reads
those trainings (phase `TABLE`): a study stopped during them reports the answer it had before them.

Why the order biases nothing. The field, the eliminations and the final set read throughputs only, which the
seeds' accuracies do not move (each accuracy training is a process of its own, after the race): a trained
group's verdict is the same test, on the same seeds, that it would get if every group were trained, and a group
never trained is never headlined ("accuracy not measured: not needed for the answer"). What the order changes is
which groups' verdicts exist, never what a verdict says; so the verdicts' error rates
(tests/stats/test_decisions.py) hold for the headline's group, and the chance of headlining a group truly below
the tolerance is bounded by simulation through this function (tests/stats/test_race_first.py).

Worst case, with G accuracy groups besides the baseline's: at most G + 1 rounds (each after the first puts at
least one more group out; the baseline's group is never out), each of at most `race_blocks + extra_race_blocks`
race blocks and `confirm_blocks` confirmation blocks; and never more
trainings than every group at `seeds` seeds, (G + 1) x `seeds`, what accuracy-first could train. A fast group
below the tolerance makes two rounds (the simulated case: docs/evidence.md, "Evidence: the final
set").

A pure function of the stored records: workers sharing a storage plan alike.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field, replace
from typing import Collection, Mapping, Sequence

from ablate.config.choices import BASELINE
from ablate.config.design import ProtocolSettings
from ablate.stats import parity, speedups
from ablate.stats.protocol import CONFIRM, FULL, RACE, SCREEN, Measurement
from ablate.stats.race import racing
from ablate.stats.race.equivalence import Equivalence
from ablate.stats.race.simpler import equivalent, simplest_first
from ablate.stats.screening import fractioned
from ablate.store.records import PARITY, TABLE, TRAININGS, Record, State, baseline
from ablate.trial import metrics as metric

NOT_NEEDED = "accuracy not measured: not needed for the answer"  # every surface that shows accuracy says it so
TRAINING_FAILED = "accuracy not measured: its training failed"
NOT_YET = "accuracy not measured yet: its group trains once, after the answer"  # the table pass has not reached it
NO_TRAINER = "accuracy not measured: no member of its group completed screening"  # nothing to train it with


def group_of(r: Record) -> str:
    """A combination's accuracy group (its own name where none was recorded)."""
    return r.accuracy_group or (BASELINE if r.combination == BASELINE else r.combination)


def trains_as_baseline(r: Record) -> bool:
    """Not the baseline, but in its group (no number training computes changes, or the bitwise check says so): its
    accuracy is the baseline's training and its parity interval [0, 0] by construction, not a measurement."""
    return r.combination != BASELINE and group_of(r) == BASELINE


def accuracies(records: Sequence[Record], before: int | None = None,
               without: str | None = None) -> dict[str, dict[int, float]]:
    """accuracy group -> seed index -> the test accuracy of the run that trained it at that seed (queued before
    trial number `before`, where given; not in phase `without`, where given: the answer leaves the table's out)."""
    out: dict[str, dict[int, float]] = {}
    for r in records:
        for m in r.every_measurement:
            if m.complete and m.accuracy_trained and m.accuracy is not None and (before is None or m.number < before) \
                    and m.phase != without:
                out.setdefault(group_of(m), {}).setdefault(m.seed_index, m.accuracy)
    return out


def parity_sample_size(records: Sequence[Record]) -> int | None:
    """The test set's size (the paired binomial error's n), where the trials recorded it."""
    sizes = [m.metrics.get(metric.TEST_SAMPLES) for r in records for m in r.every_measurement]
    return int(max(s for s in sizes if s)) if any(sizes) else None


def accuracy_unmeasured(records: list[Record]) -> str | None:
    """Why no accuracy could be judged at all, where that is so: the baseline completed but its accuracy training
    failed (killed, out of memory, ...), so no group has a reference. None where accuracy was measured, is yet to be,
    or was never meant to be (stand-in data: `accuracy_note`)."""
    base = baseline(records)
    if base is None or base.accuracy is not None or base.accuracy_note:
        return None
    failed = [m for r in records for m in r.measurements
              if m.phase == PARITY and not m.complete and group_of(m) == group_of(base)]
    if not failed:
        return None
    reason = next((m.reason for m in failed if m.reason), None)
    return "the baseline's accuracy training failed" + (f" ({reason})" if reason else "")


def trainers(stored: Sequence[Record]) -> dict[str, Record]:
    """Accuracy group -> the measurement whose combination trains it at every seed: the one that trained its
    first seed, else (its accuracy deferred) a measurement of the group's fastest combination, by its mean paired
    difference from the baseline (`_paired_speeds`; ties: the first screened). Every member of a group trains to
    the same numbers, so the choice moves no verdict, only the price: a training is mostly its steps, so the
    fastest member trains the group cheapest (docs/measuring.md, "Trials, caches and what is timed"). A group never
    screened has none, nor one whose accuracy cannot be measured (stand-in data, a loss-only task:
    `accuracy_note`)."""
    measured = [(g, m) for r in stored for m in r.every_measurement
                if m.complete and (g := m.accuracy_group) and not m.accuracy_note]
    trained = {g: m for g, m in measured if m.accuracy_trained and m.seed_index == 0}
    screened = {g for g, m in measured if m.phase in (SCREEN, FULL)}
    speed = {BASELINE: 0.0, **_paired_speeds(speedups.protocol_measurements(stored))}

    def pace(m: Record) -> float:
        return speed.get(m.combination, -math.inf)

    fastest: dict[str, Record] = {}
    for g, m in sorted(measured, key=lambda gm: (gm[1].phase not in (SCREEN, FULL), gm[1].block, gm[1].position)):
        if g in screened and m.phase not in TRAININGS and (g not in fastest or pace(m) > pace(fastest[g])):
            fastest[g] = m  # strictly faster: the first screened of equals stays
    return {**fastest, **trained}


def seeds_wanted(finalists: Sequence[str], others: Sequence[str], have: Mapping[str, int],
                 max_seeds: int) -> dict[str, int]:
    """Each group's floor of shared seeds: the baseline's and every finalist's at `parity.MIN_SEEDS` (the parity
    race adds more where uncertain, and `OK_SEEDS` for an `ok` finalist); then, until the spread has
    `parity.NOISE_DF` degrees of freedom (counting the seeds groups already `have`), a seed more for the
    finalists, and only then the next-fastest of `others` (fastest first), each to as many seeds as the spread
    still needs, at most `max_seeds`. A third seed of a group trained anyway costs one training for one degree of
    freedom, and so does the filler's third, where a further filler's first two buy one."""
    floor = min(parity.MIN_SEEDS, max_seeds)
    seeds = {BASELINE: floor, **dict.fromkeys((g for g in finalists if g != BASELINE), floor)}
    judged = [g for g in seeds if g != BASELINE]
    if not judged:
        return seeds

    def df() -> int:
        return sum(max(seeds.get(g, 0), have.get(g, 0)) - 1 for g in {*seeds, *have}
                   if g != BASELINE and max(seeds.get(g, 0), have.get(g, 0)) > 0)

    for extra in range(floor, max_seeds):  # a seed more for the finalists, one round a seed
        for g in judged:
            if df() < parity.NOISE_DF:
                seeds[g] = max(seeds[g], extra + 1)
    for g in others:
        if (short := parity.NOISE_DF - df()) <= 0:
            break
        if g not in seeds:  # a group with k seeds gives k - 1 degrees of freedom
            seeds[g] = min(max_seeds, max(floor, max(1, have.get(g, 0)) + short))
    return seeds


@dataclass(frozen=True)
class Final:
    """Where race-first stands: the current round's race, its final set, and what to measure next."""

    standing: racing.Race[str]
    measurements: list[Measurement[str]]  # the round's: screening, its race and confirmation blocks
    round: int  # 0: the first race; more where every member of an earlier final set was out on accuracy
    excluded: frozenset[str]  # accuracy groups out of this round's race
    members: tuple[str, ...] = ()  # the final set in race order (the leader first); () while racing
    eligible: tuple[str, ...] = ()  # members not known to be out on accuracy (allowed, or never trained), race order
    parity_step: tuple[int, list[str]] | None = None  # the next parity seed and the groups it trains
    next_block: tuple[str, ...] | None = None  # the next race block, or confirmation block once accuracy allows
    phase: str = RACE
    tested: Mapping[str, Equivalence] = field(default_factory=dict)  # the eligible simpler members' equivalence
    # tests against the leader, once it is confirmed (`ablate.stats.race.simpler.equivalent`): what the headline reads

    @property
    def headline(self) -> str | None:
        """The member that leads the answer: the first eligible one in race order."""
        return self.eligible[0] if self.eligible else None


def _rounds(records: Sequence[Record]) -> list[tuple[set[int], int]]:
    """The race and confirmation blocks of each round, in order, with the trial number its first race block was
    queued as: a race block queued after a parity training that was itself queued after the round's own race
    blocks starts the next round (trial numbers are queue order)."""
    ms = sorted((m for r in records for m in r.every_measurement
                 if m.phase in (RACE, CONFIRM, PARITY)), key=lambda m: m.number)
    out: list[tuple[set[int], int]] = [(set(), 0)]
    trained_since = False
    for m in ms:
        if m.phase == PARITY:
            trained_since = bool(out[-1][0])
        elif m.phase == RACE and trained_since:
            out.append(({m.block}, m.number))
            trained_since = False
        else:
            out[-1][0].add(m.block)
    return out


def _known_out(records: Sequence[Record], found: Mapping[str, parity.Parity], before: int | None = None) -> set[str]:
    """Accuracy groups that can headline nothing: ineligible by their verdict (`found`), or trained without one
    (failed); from the trainings queued before trial number `before` where given - what was known as a round began
    (`found` then the verdicts of those trainings alone)."""
    tried = {group_of(m) for r in records for m in r.every_measurement
             if m.phase == PARITY and (before is None or m.number < before)}
    return {g for g, p in found.items() if p.ineligible} | {g for g in tried if g not in found and g != BASELINE}


def _tested(ms: Sequence[Measurement[str]], standing: racing.Race[str], open_: Sequence[str],
            protocol: ProtocolSettings) -> dict[str, Equivalence]:
    """The equivalence tests of the members simpler than the confirmed leader (`ablate.stats.race.simpler.equivalent`),
    among those not known to be out, simplest first: the tests the headline is chosen by."""
    contrasts = {k.other: k for k in standing.contrasts}
    assert standing.leader is not None  # a final set has its leader
    return equivalent(list(ms), standing.leader, simplest_first(open_), contrasts, protocol.equivalence_margin)


def _wanted(leader: str, tested: Mapping[str, Equivalence], group: Mapping[str, str], teachers: Mapping[str, Record],
            on_speed: bool) -> list[str]:
    """The members whose accuracy decides the answer: the leader, and once it is confirmed the simplest member
    shown equivalent to it, trained as the parity race asks (it headlines if allowed; if not, it leaves the tests
    and the next shown one is asked). Members neither shown nor the leader could headline only if the leader
    were out, and then the race runs again without it: their accuracy is never needed."""
    shown = [c for c, e in tested.items() if e.shown]  # simplest first, as the tests were run (`_tested`)
    trainable = [c for c in shown[:1] if not on_speed and group[c] in teachers]
    return [leader, *trainable]  # the first shown headlines once allowed (the known out are never tested)


def _legacy_out(records: Sequence[Record], found: Mapping[str, parity.Parity]) -> set[str]:
    """A study stored by an ablate that trained accuracy before the race: the groups its race already kept out
    (ineligible, trained before the first race block), so the replay is the race it ran."""
    numbers = [m.number for r in records for m in r.every_measurement if m.phase == RACE]
    first = min(numbers, default=None)
    if first is None:
        return set()
    before = {group_of(m) for r in records for m in r.every_measurement if m.phase == PARITY and m.number < first}
    return {g for g in before if g in found and found[g].ineligible}


def _paired_speeds(ms: Sequence[Measurement[str]]) -> dict[str, float]:
    """Each combination but the baseline: its mean log-throughput difference from its blocks' baselines."""
    base: dict[int, list[float]] = {}
    for m in ms:
        if m.combination == BASELINE:
            base.setdefault(m.block, []).append(m.log_throughput)
    diffs: dict[str, list[float]] = {}
    for m in ms:
        if m.combination != BASELINE and m.block in base:
            diffs.setdefault(m.combination, []).append(m.log_throughput - statistics.fmean(base[m.block]))
    return {c: statistics.fmean(ds) for c, ds in diffs.items()}


def _fastest_groups(ms: Sequence[Measurement[str]], group: Mapping[str, str]) -> list[str]:
    """Accuracy groups, fastest first by their fastest combination's mean paired difference from the baseline."""
    best: dict[str, float] = {}
    for c, speed in _paired_speeds(ms).items():
        g = group.get(c, c)
        best[g] = max(best.get(g, -float("inf")), speed)
    return sorted(best, key=lambda g: (-best[g], g))


def final(records: list[Record], tolerance: float, protocol: ProtocolSettings,
          screened: fractioned.Fractioned | None = None) -> Final:
    """The current round's race and what follows it (module docstring), from the stored records of one device.
    `screened`: where screening measured a fraction of the grid (`ablate.stats.screening.fractioned.of`), the runnable
    combinations never measured are candidates too (their groups from it), and the race opens on the model. The
    table's trainings (`table`) are never read: the answer is the same with and without them."""
    found = parity.verdicts(accuracies(records, without=TABLE), BASELINE, tolerance, parity_sample_size(records))
    complete = {r.combination: r for r in records if r.complete}
    recorded = {r.combination for r in records}
    never = {c: g for c, g in screened.groups.items() if c not in recorded} if screened else {}
    group = {**never, **{c: group_of(r) for c, r in complete.items()}}
    teachers = trainers(records)
    on_speed = accuracy_unmeasured(records) is not None
    everything = speedups.protocol_measurements(records)
    screening = [m for m in everything if m.phase in (SCREEN, FULL)]
    model = screened.model(screening) if screened else None  # screening is every round's: fitted once
    rounds = _rounds(records)
    excluded = frozenset(_legacy_out(records, found))
    for n in range(len(group) + 1):  # each round after the first puts one group more out: it ends
        blocks = rounds[n][0] if n < len(rounds) else set()
        ms = screening + [m for m in everything if m.block in blocks and m.phase in (RACE, CONFIRM)]
        candidates = {c for c, g in group.items() if g not in excluded or c == BASELINE}
        standing = racing.race(ms, BASELINE, candidates, protocol, screen=model)
        here = Final(standing, ms, n, excluded)
        if standing.next_block is not None and standing.phase != CONFIRM:
            return replace(here, next_block=standing.next_block, phase=standing.phase)
        if standing.leader is None:
            return here
        members = tuple(dict.fromkeys([standing.leader, *standing.contenders]))
        known_out = _known_out(records, found)
        # Members not known to be out: trained and allowed, never to be trained (no accuracy, or none needed), or
        # untrained. Only the leader's group and a simpler member that could headline are trained (`_wanted`).
        open_ = tuple(c for c in members if c == BASELINE or on_speed or group[c] not in known_out)
        confirmed = standing.next_block is None and bool(open_) and open_[0] == standing.leader
        tested = _tested(ms, standing, open_, protocol) if confirmed else {}
        wanted = _wanted(standing.leader, tested, group, teachers, on_speed)
        step = None if on_speed else _parity_step(records, found, wanted, group, teachers, ms, protocol.seeds,
                                                   tolerance)
        if step is not None:
            return Final(standing, ms, n, excluded, members, open_, step, tested=tested)
        if open_ and open_[0] == standing.leader:  # confirmed only now: a leader out would waste its blocks
            return Final(standing, ms, n, excluded, members, open_, next_block=standing.next_block,
                         phase=standing.phase, tested=tested)
        # What was known out as the next round began, where it is stored: a group a later round's own parity
        # training put out was still in that round's race, which its blocks replay.
        began = rounds[n + 1][1] if n + 1 < len(rounds) else None
        known = found if began is None else parity.verdicts(accuracies(records, began, TABLE), BASELINE, tolerance,
                                                            parity_sample_size(records))
        out = _known_out(records, known, began)
        if out <= excluded:  # nothing new to leave out (cannot happen: the members' groups are out)
            return Final(standing, ms, n, excluded, members)
        excluded = excluded | out
    raise AssertionError("more rounds than accuracy groups")  # pragma: no cover - each round puts one more out


def _parity_step(records: Sequence[Record], found: Mapping[str, parity.Parity], wanted: Sequence[str],
                 group: Mapping[str, str], teachers: Mapping[str, Record], ms: Sequence[Measurement[str]],
                 max_seeds: int, tolerance: float) -> tuple[int, list[str]] | None:
    """The parity race's next seed for the groups of the members that decide the answer (`_wanted`: the leader's
    first), the baseline's and the spread's (`seeds_wanted`); None when it is over, or when a group failed at the
    seed it would train next (its verdict stays: it would fail again)."""
    accs = accuracies(records, without=TABLE)
    finalists = [g for g in dict.fromkeys(group[c] for c in wanted) if g in teachers]
    others = [g for g in _fastest_groups(ms, group) if g in teachers and g not in finalists and g != BASELINE]
    have = {g: len(v) for g, v in accs.items()}
    worth = {g: k for g, k in seeds_wanted(finalists, others, have, max_seeds).items() if g in teachers}
    step = parity.next_seed(accs, BASELINE, tolerance, parity_sample_size(records), max_seeds, worth,
                            {BASELINE, *finalists})
    if step is None:
        return None
    index, todo = step
    tried = {group_of(m) for r in records for m in r.measurements
             if m.phase == PARITY and m.seed_index == index and m.state in (State.FAILED, State.COMPLETE)}
    if tried & set(todo):
        return None
    rank = {g: i for i, g in enumerate([BASELINE, *finalists, *others])}
    return index, sorted(todo, key=lambda g: (rank.get(g, len(rank)), g))


def table(records: Sequence[Record], found: Final) -> list[tuple[int, str]]:
    """The table pass, once the answer is done (`found`: its final set, no race block and no parity seed left,
    accuracy measurable): every accuracy group with a trainer (`trainers`) and no accuracy at its first seed yet, to
    train there once - the final set's groups first in race order, then the rest fastest first - each with its
    place in that order (the same all through the pass: its trainings move no throughput). `final` never reads
    them, so the answer is the same after any number of them; a group trained once is judged on the pooled spread
    (`ablate.stats.parity`). A group whose training at its first seed ended (failed too) is not trained again.
    None while the answer is not done."""
    if (not found.members or found.next_block is not None or found.parity_step is not None
            or accuracy_unmeasured(list(records)) is not None):
        return []
    teachers = trainers(records)
    group = {r.combination: group_of(r) for r in records if r.complete}
    ranked = [*(group[c] for c in found.members if c in group),
              *_fastest_groups(speedups.protocol_measurements(records), group), *sorted(teachers)]
    order = [g for g in dict.fromkeys(ranked) if g in teachers]
    first = first_seed_ended(records)
    return [(place, g) for place, g in enumerate(order) if g not in first]


def first_seed_ended(records: Sequence[Record]) -> set[str]:
    """The accuracy groups whose training at the first seed ended, completed or failed."""
    return {g for g, seeds in accuracies(records).items() if 0 in seeds} | {
        group_of(m) for r in records for m in r.every_measurement
        if m.phase in TRAININGS and m.seed_index == 0 and m.state in (State.FAILED, State.COMPLETE)}


def untrained(records: Sequence[Record], groups: Collection[str], quick: bool) -> dict[str, str]:
    """accuracy group -> why it has no verdict where the study measures it: its training failed
    (`TRAINING_FAILED`); under `quick` (the answer only), it was in no final set nor trained to fill the spread
    (`NOT_NEEDED`); else the table pass (`table`) has not reached it yet (`NOT_YET`), or cannot train it
    (`NO_TRAINER`). `groups`: those with a verdict; none while no group has one (nothing to say yet, or the
    baseline's own training failed: `accuracy_unmeasured`)."""
    if not groups:
        return {}
    failed = {group_of(m) for r in records for m in r.every_measurement if m.phase in TRAININGS and not m.complete}
    teachers = {} if quick else trainers(records)
    return {g: TRAINING_FAILED if g in failed else NOT_NEEDED if quick else NOT_YET if g in teachers else NO_TRAINER
            for r in records if r.complete and r.accuracy is None and not r.accuracy_note and r.combination != BASELINE
            and (g := group_of(r)) not in groups}


def unmeasured(records: Sequence[Record], untrained: Mapping[str, str]) -> dict[str, str]:
    """combination -> why it shows no accuracy where the study measures it: its group's reason (`untrained`'s)."""
    return {r.combination: untrained[g] for r in records
            if r.complete and r.accuracy is None and not r.accuracy_note and (g := group_of(r)) in untrained}
