"""What a study will cost, said as it begins and refined as it goes: measurements, then minutes once some are timed.

**Counts**, from the plan (`ablate.stats.planner`), stage by stage in the protocol's order - screening, the race,
accuracy parity, confirmation (race first, accuracy last: `ablate.stats.race.finalists`):

- screening: exactly `Planner.screening`'s runnable measurements (`--search optuna`: the picks and their baselines);
- the race: from the baseline and one leader over `MIN_RACE_BLOCKS` blocks to `race_blocks` blocks of `contenders`
  and the baseline, then `extra_blocks` of the leader, its closest contender and the baseline;
- accuracy parity: from the baseline's group alone at one seed (a leader that trains as the baseline does leaves
  nothing to judge) to the final set's groups (at most `contenders`), the baseline's and those the seed-to-seed
  spread needs (`parity.NOISE_DF` degrees of freedom) at `seeds` seeds each - less the first seed where screening
  trains it (`Planner.defer_accuracy` off);
- confirmation: none (the baseline leads) to `confirm_blocks` blocks of three (the leader, the simplest member and
  the baseline);
- the table (the whole table's, not `--quick`'s): every group parity left untrained, once. At the low end parity
  trains the baseline's group alone, so the table trains every other group less those the bitwise check may merge
  into a simpler one (`ablate.run.bitwise.candidates`); at the high end parity trains its most (`Plan.parity_groups`
  groups at `seeds` each) and the table every group besides those. So each stage's low and high are its part of
  the two ends, each end a path a run can take, not the stage's own least and most: summed stage by stage, the
  table's own ends would count parity's groups twice, or as trained by neither.

Under the whole table the header says what `--quick` would cost beside it (`Plan.quick`), priced the same way.

A new round of the race (a leader put out by its accuracy: `ablate.stats.race.finalists`) goes past the high end, so
`--explain` prices one (`Plan.caveat`: the race's high end again, and the new leader's group at every seed); the
header's sentence keeps to the plan. The worst case, a round for each accuracy group, is the module docstring's of
finalists. Real runs went well past the high end where a fast leader was put out on accuracy (docs/evidence.md,
"Evidence: the cost estimate").

**Refined** as measurements land: a stage a later one has begun and with nothing queued is over (none left); any
other has its planned count less those done left, and at least what is queued. A race measured after an accuracy
training is a new round: its planned count starts again, less that round's own measurements. Once screening is
over, the table's count is no longer the plan's: it is every group neither trained nor queued (`Planner.to_train`),
less those parity may still train first at that end (at the high end, its most groups less those it has begun);
where they are not known once parity has begun, the table's own most (every group but the baseline's).

**Minutes** come from the run's own measurements, each kind from its own mean duration: a throughput-only
measurement and an accuracy training differ several-fold (docs/evidence.md, "Evidence: the cost estimate"). Until an
accuracy training is timed, one is extrapolated from the throughput-only ones, their duration plus the training
samples they lack at their own steady training time per sample (`prices.extrapolated`: a compile's one-off cost left
out, and its evaluations, an underestimate until one is timed). Where a combination's own price can be had, it
replaces the mean (`ablate.run.prices`): for each queued measurement, a training where it will train one (a training
phase, or where screening trains each group as it comes, the first queued of each group not yet trained:
`Planner.to_train`); under the whole table, once screening is over, for the table's trainings - one for each group
not yet trained, known by then, by its trainer. A training neither queued nor the table's (parity's later seeds) is
priced at what the combinations queued would train, on average. The race's and confirmation's measurements not yet
queued are priced at the baseline's: they measure the fastest stacks and the baseline, never the slow ones a
screening mean takes in. Nothing is said in minutes before `FEW` measurements are timed (the study file gives
samples, not a rate), nor while a queued measurement takes a technique no measurement has run (`untimed`): its price
would be a guess from the others', and a slow technique measured last made a single pass read far short
(docs/evidence.md, "Evidence: the cost estimate"). The study's own bookkeeping between measurements is in by the
ratio of the session's span to its measurements' time. The low end prices the counts' low end as if every compile
to come found its graph cached (a cold compile's excess is left out of the means, `prices.warmed`: many times a
warm compile's, and a graph's first compile alone pays it); the high end its counts at the means as measured. Each
end then moves out by how far the sum of its measurements to come may stray from their prices (`_spread`): a price
is a combination's earlier duration or a mean, and a duration measured again differs from it, so a known count
priced as one figure fell short of what was left as often as past it (docs/evidence.md, "Evidence: the cost
estimate").
"""
from __future__ import annotations

import math
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Sequence

from ablate.config.choices import OFF, baseline_levels
from ablate.config.design import MIN_RACE_BLOCKS
from ablate.run import bitwise, prices
from ablate.run.prices import Done
from ablate.stats import parity, variance
from ablate.stats.planner import Planner
from ablate.stats.protocol import CONFIRM, FULL, PARITY, RACE, SCREEN, TABLE, TRAININGS
from ablate.store.records import Record, State
from ablate.words import count, minutes_left, span

SPREAD_Z = 1.645  # each end of the minutes: widened by this many SDs of what the durations to come may vary by
FEW = 3  # measurements timed before minutes are said: the first pays a cold start and a cold compile cache


@dataclass(frozen=True)
class Stage:
    """One stage of the protocol: the phases its measurements are stored under, and how many it takes."""

    phases: tuple[str, ...]
    low: int
    high: int
    trainings: tuple[int, int] = (0, 0)  # of them, accuracy trainings (low, high)

    @property
    def name(self) -> str:
        return self.phases[0]


@dataclass(frozen=True)
class Plan:
    stages: tuple[Stage, ...]
    train_samples: int  # what an accuracy training trains (to extrapolate one from throughput-only measurements)
    new_round: int = 0  # what a new round of the race adds at most (a leader put out on accuracy); 0: no race
    parity_groups: int = 0  # the accuracy groups parity trains at its most (the baseline's among them)
    quick: tuple[int, int] | None = None  # the measurements `--quick` would take instead (whole table only)
    # Each runnable combination's choices besides the baseline's ("dimension=choice"), by label: to price one never
    # measured from those that were (`ablate.run.prices`).
    techniques: Mapping[str, frozenset[str]] = field(default_factory=dict)

    @property
    def measurements(self) -> tuple[int, int]:
        return sum(s.low for s in self.stages), sum(s.high for s in self.stages)

    @property
    def trainings(self) -> tuple[int, int]:
        return sum(s.trainings[0] for s in self.stages), sum(s.trainings[1] for s in self.stages)

    def stored(self) -> dict[str, Any]:
        """The estimate as the study record keeps it (`ablate.store.study_record.set_cost`)."""
        return {"measurements": list(self.measurements), "accuracy_trainings": list(self.trainings),
                "by_phase": {s.name: [s.low, s.high] for s in self.stages},
                **({"quick": list(self.quick)} if self.quick else {})}

    def sentence(self) -> str:
        low, high = self.measurements
        trained = f" ({span(*self.trainings, ' to ')} accuracy trainings)" if self.trainings[1] else ""
        quick = f"; --quick: about {span(*self.quick, ' to ')}" if self.quick else ""
        return (f"expected cost: about {span(low, high, ' to ')} measurements{trained}{quick}; minutes once {FEW} "
                "are timed and every technique has run")

    def caveat(self) -> str | None:
        """What the range leaves out, for `ablate run --explain`."""
        return (f"a leader put out on its accuracy races again: up to {self.new_round} more measurements"
                if self.new_round else None)


def table_pass(groups: int) -> str:
    """Said once, as the table pass is queued: the answer is done before it (`finalists.table`), so a user who
    wants only the answer may stop here and keep it."""
    return (f"the answer is settled (its race, confirmation and accuracy seeds are done); the table pass now trains "
            f"{count(groups, 'more accuracy group')} once, so that every row has an accuracy. Ctrl-C keeps the "
            "answer (`ablate report` gives it); --quick skips this pass")


def plan(planner: Planner, search: str) -> Plan:
    """The study's stages as `planner` will plan them (data without labels, which trains nothing, is not known yet:
    its trainings are counted), and under the whole table what `--quick` would take instead."""
    techniques = {label: frozenset(f"{d}={c}" for d, c in levels if c != OFF)
                  for label, levels in planner.runnable_labels().items()}
    found = replace(_stages(planner, search), techniques=techniques)
    if search != "grid" or planner.protocol.design != "whole table":
        return found
    quick = planner.with_protocol(replace(planner.protocol, quick=True))
    return replace(found, quick=_stages(quick, search).measurements)


def _stages(planner: Planner, search: str) -> Plan:
    protocol, study = planner.protocol, planner.study
    trains = not study.budget.throughput_only
    runnable = planner.runnable_combinations()
    base = planner.accuracy_group(planner.options_of(baseline_levels(planner.options)))
    groups = len({planner.accuracy_group(o) for o in runnable} - {base})  # besides the baseline's
    others = max(0, len(runnable) - 1)  # combinations besides the baseline
    in_screening = trains and not planner.defer_accuracy  # each group's first seed trains in screening
    if search == "grid":
        screened = sum(1 for p in planner.screening() if planner.runnable(p.slot.combination))
        first = (groups + 1, groups + 1)
    else:
        picks = planner.n_trials or 0
        screened = picks + math.ceil(picks / planner.tpe_block_size) * protocol.screen_baselines
        first = (min(1, screened), min(screened, groups + 1))
    stages = [Stage((SCREEN, FULL), screened, screened, first if in_screening else (0, 0))]
    seeds = protocol.seeds - int(in_screening)  # the seeds parity trains each group at
    round_ = 0
    if protocol.racing:
        raced = min(protocol.contenders, others) + 1  # the baseline races in every block besides the contenders
        race = Stage((RACE,), min(protocol.race_blocks, MIN_RACE_BLOCKS) * min(2, raced),
                     protocol.race_blocks * raced + protocol.extra_blocks * min(3, raced))
        stages.append(race)
        # A new round: only where some accuracy group can be put out (a loss's, or none besides the baseline's, cannot).
        if trains and study.task.has_accuracy and groups:
            round_ = race.high + max(0, seeds)  # the race again, and the new leader's group at its seeds
    low = most = 0  # parity's trainings at its least, and the groups it trains at its most
    if trains and study.task.has_accuracy and seeds > 0:  # a loss's groups train once, in screening
        # the groups the parity test's degrees of freedom may need
        spread = math.ceil(parity.NOISE_DF / (protocol.seeds - 1)) if protocol.seeds > 1 else 0
        finalists = min(groups, protocol.contenders) if protocol.racing else groups
        # At least the baseline's group once: where the race's leader trains as the baseline does (or is it), there is
        # nothing to judge, and accuracy is trained only where it decides (`finalists`).
        low = 1 - int(in_screening)
        most = min(groups, finalists + spread) + 1
        stages.append(Stage((PARITY,), low, most * seeds, (low, most * seeds)))
    if protocol.racing:
        confirmed = min(3, others + 1)
        # None where the baseline leads and is the simplest of the set: nothing to confirm (`racing._confirm`).
        # Twice the blocks at most: as many again where they read the leader no faster than the baseline (racing).
        stages.append(Stage((CONFIRM,), 0, protocol.most_confirm_blocks * confirmed))
        if trains and study.task.has_accuracy and planner.defer_accuracy and not protocol.quick:
            # Every group once (the baseline's too), less those merged (at most the candidates) and those parity
            # trains: at the low end, parity's least; at the high end, its most (more seeds train no more groups).
            merged = len(bitwise.candidates(runnable, planner.accuracy_group))
            least, left_most = max(0, groups + 1 - merged - low), max(0, groups + 1 - most)
            stages.append(Stage((TABLE,), least, left_most, (least, left_most)))
    return Plan(tuple(stages), study.budget.train_samples, round_, most)


@dataclass(frozen=True)
class Left:
    """What is left of the study: measurements and accuracy trainings (low, high), and minutes once known."""

    measurements: tuple[int, int]
    trainings: tuple[int, int]
    minutes: tuple[float, float] | None = None

    def short(self, since_s: float = 0.0) -> str:
        """For the progress line: "" once nothing is left. `since_s`: seconds since it was worked out - the minutes
        count down while a measurement runs (it is worked out again as one ends)."""
        if not self.measurements[1]:
            return ""
        said = f"~{span(*self.measurements)} more"
        return said + (f" ({minutes_left(*(m - since_s / 60 for m in self.minutes))})" if self.minutes else "")


def left(plan: Plan, finished: Sequence[Done], queued: Sequence[tuple[str, str]] = (), since: float | None = None,
         to_train: Sequence[str] | None = None) -> Left:
    """What is left after `finished` (every measurement with a result), with `queued` measurements waiting, each as
    (combination, phase). `since`: when this session began (Unix seconds); its measurements alone give the
    bookkeeping's share. `to_train`: the combinations that will train the groups not yet trained (`Planner.to_train`).
    Where the plan has a table pass, those not queued to train are the table's, counted and priced once screening is
    over; elsewhere (screening trains each group as it comes) they name the queued measurements that will train."""
    trains = {c for c, phase in queued if phase in TRAININGS}
    if to_train is not None and not any(TABLE in stage.phases for stage in plan.stages):
        trains |= set(to_train)  # queued in screening: a training for a group no measurement has trained yet
        to_train = None
    coming = None if to_train is None else [c for c in to_train if c not in trains]
    waiting_in = Counter(phase for _, phase in queued)
    begun = {d.phase for d in finished} | set(waiting_in)
    trained_by = max((d.ended for d in finished if d.phase == PARITY), default=None)
    over = [not any(waiting_in[p] for p in stage.phases)
            and any(p in begun for later in plan.stages[i + 1:] for p in later.phases)
            for i, stage in enumerate(plan.stages)]
    counts, trainings, table = [0, 0], [0, 0], (0, 0)
    raced = [0, 0]  # of the counts, the race's and confirmation's not yet queued
    parity_least = 0  # parity's trainings not yet queued at its low end: each may train one of the groups left
    parity_new = 0  # the groups parity may still train first at its high end, which the table then does not
    for i, stage in enumerate(plan.stages):
        mine = [d for d in finished if d.phase in stage.phases]
        waiting = sum(waiting_in[p] for p in stage.phases)
        if RACE in stage.phases and trained_by is not None and (waiting or any(d.began > trained_by for d in mine)):
            mine = [d for d in mine if d.began > trained_by]  # a new round: the race's plan starts again
        if TABLE in stage.phases and coming is not None and over[0] and not over[i]:
            # Every group left untrained trains once: here, or first in parity while it lasts. At the low end, parity
            # trains its least, and each of those trainings may be one of these groups'.
            table = (max(0, len(coming) - parity_least), max(0, len(coming) - parity_new))
            for k in (0, 1):
                counts[k] += waiting + table[k]
                trainings[k] += waiting + table[k]
            continue
        trained = sum(d.training for d in mine)
        training = waiting if set(stage.phases) <= set(TRAININGS) else 0  # what is queued there trains
        ends = (stage.low, stage.high)
        if TABLE in stage.phases and PARITY in begun:  # parity's path is no longer the plan's: the table's own most
            ends = (stage.low, max(stage.low, stage.high + max(0, plan.parity_groups - 1)))
            stage = replace(stage, trainings=ends)
        for k, planned in enumerate(ends):
            n = waiting if over[i] else max(planned - len(mine), waiting)
            counts[k] += n
            if PARITY in stage.phases and k == 0:
                parity_least = n - waiting
            elif PARITY in stage.phases and not over[i]:  # parity trains one group by one combination, its trainer
                began_groups = {d.combination for d in mine} | {c for c, phase in queued if phase == PARITY}
                parity_new = min(n - waiting, max(0, plan.parity_groups - len(began_groups)))
            trainings[k] += min(n, max(0, stage.trainings[k] - trained, training))
            if {RACE, CONFIRM} & set(stage.phases):
                raced[k] += n - waiting
    measurements, trained_left = (counts[0], counts[1]), (trainings[0], trainings[1])
    minutes = _minutes(plan, finished, measurements, trained_left, since, [(c, c in trains) for c, _ in queued],
                       (coming or (), table), (raced[0], raced[1]))
    return Left(measurements, trained_left, minutes)


def _minutes(plan: Plan, finished: Sequence[Done], measurements: tuple[int, int], trainings: tuple[int, int],
             since: float | None, queued: Sequence[tuple[str, bool]], table: tuple[Sequence[str], tuple[int, int]],
             raced: tuple[int, int] = (0, 0)) -> tuple[float, float] | None:
    """Minutes (low, high) for what is left (`_priced`): `table`, the combinations that will train the table's groups
    and its trainings at each end; `raced`, the race's and confirmation's measurements not yet queued, of the
    counts."""
    timed = [d for d in finished if d.complete]
    if len(timed) < FEW or untimed(plan, finished, [c for c, _ in queued]):
        return None
    # Two paths: the low end's, where every compile to come finds its graph cached, the high end's as measured. A
    # combination measured before is priced warm at both: its graph is cached by then.
    warm = prices.warmed(timed)
    means = [prices.means(plan.train_samples, warm), prices.means(plan.train_samples, timed)]
    fast_s, slow_s = means[1]
    if (fast_s is None and measurements[1] > trainings[1]) or (slow_s is None and trainings[1]):
        return None  # a kind still to come has no duration yet
    session = [d for d in timed if since is None or d.began >= since]
    busy = sum(d.seconds for d in session)
    # Hand-offs between measurements (planning, storage, MLflow); below 1 where workers measure side by side.
    share = (max(d.ended for d in session) - min(d.began for d in session)) / busy if len(session) > 1 and busy else 1
    price = prices.own(warm, plan.train_samples, plan.techniques)
    combinations, counted = table
    # The race and confirmation measure the fastest stacks and the baseline, not the slow ones screening's mean takes
    # in: the baseline, in every block of theirs, stands for them.
    base = next((c for c, ts in plan.techniques.items() if not ts), None)
    kinds = ([d for d in warm if not d.training], [d for d in warm if d.training])
    missed = prices.missed(warm, plan.train_samples, plan.techniques)
    # Each end its path's prices, widened by how far the durations of its count may stray from them (`_spread`).
    low, high = ((_priced(price, queued, combinations, base, means[end], (n, k, t, r))
                  + (1 if end else -1) * _spread(kinds, (n - k, k), missed)) * share / 60
                 for end, (n, k, t, r) in enumerate(zip(measurements, trainings, counted, raced, strict=True)))
    return max(0.0, low), high


def _priced(price: Callable[[str, bool], float | None], queued: Sequence[tuple[str, bool]],
            combinations: Sequence[str], base: str | None, means: tuple[float | None, float | None],
            counts: tuple[int, int, int, int]) -> float:
    """The seconds of one end's `counts` - measurements, of them trainings, the table's trainings and the race's not
    yet queued - each kind at its mean (`means`), corrected where a combination's own price is known: each queued
    measurement's (combination, whether it trains), the table's trainings at the mean of `combinations`', and the
    race's at the baseline's (`base`)."""
    (fast_s, slow_s), (n, k, t, r) = means, counts
    own = sum(found - mean for combination, trains in queued if (mean := slow_s if trains else fast_s) is not None
              and (found := price(combination, trains)) is not None)
    each = _mean_training(price, combinations, slow_s) - (slow_s or 0.0)
    # Trainings neither named nor the table's (parity's seeds, a group whose trainer is not known): as the
    # combinations now queued would train, on average.
    named = sum(trains for _, trains in queued)
    other = _mean_training(price, [c for c, _ in queued], slow_s) - (slow_s or 0.0)
    lead = (found - fast_s) if fast_s is not None and base and (found := price(base, False)) is not None else 0.0
    return ((n - k) * (fast_s or 0.0) + k * (slow_s or 0.0) + own + t * each + max(0, k - named - t) * other
            + r * lead)


def _spread(kinds: Sequence[Sequence[Done]], counts: Sequence[int], missed: float | None = None) -> float:
    """How far the seconds of `counts` measurements of each kind to come (throughput-only, trainings) may stray from
    their price, either way: `SPREAD_Z` standard deviations of their sum. Each kind's relative spread is its
    repeatability: how one combination's durations differ when measured again (a combination's own price is its
    earlier durations'), pooled over those of that kind measured twice or more (`variance.pooled`); a kind with none
    takes the other's, and where no combination was measured twice yet (a single pass), each kind takes how its
    combinations' durations differ, which bounds it. A training priced from its combination's throughput-only
    measurement misses by more than a repeat differs: the trainings' spread is at least how far such prices missed
    (`missed`, `prices.missed`). The sum's variance counts each measurement's own spread (n s^2) and its price's, read
    from m durations (n^2 s^2 / m)."""
    found = []  # each kind's (variance of log seconds measured again or None, of all, durations, mean seconds)
    for done in kinds:
        logs: dict[str, list[float]] = {}
        for d in done:
            logs.setdefault(d.combination, []).append(math.log(d.seconds))
        again = variance.pooled([variance.Source(frozenset(), statistics.variance(xs), len(xs) - 1)
                                 for xs in logs.values() if len(xs) > 1])
        every = [x for xs in logs.values() for x in xs]
        found.append((again.variance(()) if again else None, statistics.variance(every) if len(every) > 1 else 0.0,
                      len(done), statistics.fmean(d.seconds for d in done) if done else 0.0))
    repeated = [v for v, *_ in found if v is not None]
    total = 0.0
    for kind, ((again_v, every_v, m, mean), n) in enumerate(zip(found, counts, strict=True)):
        if m and n:
            relative = again_v if again_v is not None else max(repeated) if repeated else every_v
            if kind and missed is not None:
                relative = max(relative, missed)
            total += (n + n ** 2 / m) * mean ** 2 * relative
    return SPREAD_Z * math.sqrt(total)


def untimed(plan: Plan, finished: Sequence[Done], queued: Sequence[str]) -> set[str]:
    """The techniques ("dimension=choice") the `queued` combinations take that no `finished` measurement ran - one
    that failed ran: a technique that fails each time is priced by its failures."""
    ran = set().union(*(plan.techniques.get(d.combination, frozenset()) for d in finished))
    return set().union(*(plan.techniques.get(c, frozenset()) for c in queued)) - ran


def _mean_training(price: Callable[[str, bool], float | None], combinations: Sequence[str],
                   slow_s: float | None) -> float:
    """The mean price of a training of each of `combinations`, its own where there is one, else `slow_s`."""
    found = [p if (p := price(c, True)) is not None else slow_s or 0.0 for c in combinations]
    return statistics.fmean(found) if found else slow_s or 0.0


@dataclass
class Session:
    """One `ablate run`'s part of the study: its plan, when it began, what it measured."""

    plan: Plan
    began: float = field(default_factory=time.time)  # Unix seconds
    measurements: int = 0  # with a result, failures included (skips take no time)
    trainings: int = 0
    minutes_said: bool = False  # its first estimate in minutes was stored

    def count(self, r: Record) -> None:
        if r.state != State.SKIPPED:
            self.measurements += 1
            self.trainings += r.accuracy_trained or r.phase in TRAININGS

    def stored(self) -> dict[str, float]:
        """The session as the study record keeps it (`ablate.store.study_record.set_cost`)."""
        return {"began": self.began, "ended": time.time(), "measurements": self.measurements,
                "accuracy_trainings": self.trainings}
