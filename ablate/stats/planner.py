"""What to measure next: a pure function of what the study has stored (Optuna's sampler, to the runner's loop).

The runner asks once every queued measurement has a result; the planner
answers with the measurements to queue, each a `Slot` (a
combination's levels, its block, its place in the block's random order, its
phase) and the training seed it trains at. Deterministic in its input, so
workers that plan at once plan the same measurements, and `claim` keeps one
of each.

- **Screening** (`screening`): every runnable combination in blocks with
  their baselines, or where the grid allows one, a fraction of them
  (`ablate.stats.screening.fraction`: half of mnist_cnn's 48 on a CPU); combinations
  that cannot run here join block 0 and are recorded as skipped, taking no
  time. After a fraction, where an aliased pair of interactions is active
  in the screening model (`ablate.stats.screening.factorial`), the fold-over (the
  cells the fraction left out) is screened too, once, before the race.
- **TPE's baselines** (`tpe_baseline`, `--search optuna`): TPE picks the
  combinations; a baseline joins each block of its picks at random places.
- **The race** (`plan`): the next race or confirmation block (`ablate.stats.race.racing`), over every
  runnable combination, measured or not (a fraction's: the model's field, `ablate.stats.screening.fractioned`):
  throughput decides the field.
- **Accuracy last** (`plan`): the final set's accuracy groups (the leader's first), the baseline's and what
  the seed spread needs, trained seed by seed (`ablate.stats.parity`); then, where accuracy put the leader out,
  a new round of the race without the groups known to be out (`ablate.stats.race.finalists`). On a raced grid
  screening measures throughput only (`Planner.defer_accuracy`); under TPE each pick trains its first seed, and
  only finalists train more.
- **The table** (`plan`, not under `protocol.quick`): once the answer is done, every other group of a raced grid
  once, at its first seed (`ablate.stats.race.finalists.table`); the answer never reads them.
"""
from __future__ import annotations

import copy
import random
from dataclasses import dataclass
from typing import Sequence

from optuna.trial import FrozenTrial

from ablate.config.choices import (
    BASELINE,
    Levels,
    Option,
    accuracy_group,
    baseline_levels,
    compose_options,
    grid,
    levels_of,
)
from ablate.config.design import ProtocolSettings
from ablate.config.study import Study
from ablate.stats import speedups
from ablate.stats.protocol import PARITY, SCREEN, TABLE, Slot, race_plan, screening_plan
from ablate.stats.race import finalists, racing
from ablate.stats.screening import fraction, fractioned
from ablate.store import claim, records
from strategies import ConflictError


@dataclass(frozen=True)
class Planned:
    slot: Slot
    seed_index: int = 0  # 0: the run's own training seed; 1, 2...: parity seeds


class Planner:
    def __init__(self, study: Study, protocol: ProtocolSettings, protocol_seed: int, device: str, device_name: str,
                 n_trials: int | None = None, defer_accuracy: bool = False) -> None:
        """`defer_accuracy`: screening measures throughput only, and the final set's groups train every seed, their
        first included, after the race (the raced grid; TPE needs an accuracy per pick)."""
        self.study, self.protocol, self.seed, self.n_trials = study, protocol, protocol_seed, n_trials
        self.defer_accuracy = defer_accuracy
        self.device, self.device_name = device, device_name
        self.options = study.choices
        self._can_run: dict[Levels, bool] = {}
        self.trains_as: dict[str, str] = {}  # accuracy group -> the one it trains as here (ablate.run.bitwise)

    def with_protocol(self, protocol: ProtocolSettings) -> Planner:
        """The same grid on the same device under another protocol, its runnable cells already found (the cost
        estimate prices `--quick` with it)."""
        other = copy.copy(self)
        other.protocol = protocol
        return other

    def accuracy_group(self, options: Sequence[Option]) -> str:
        """The group whose accuracy `options` train to on this device: their own, or the one `ablate.run.bitwise`
        found they train bitwise as."""
        group = accuracy_group(options)
        return self.trains_as.get(group, group)

    def options_of(self, levels: Levels) -> tuple[Option, ...]:
        return self.study.combination(dict(levels)).options

    def runnable(self, levels: Levels) -> bool:
        """Whether a combination can run here at all (else it is recorded as skipped, taking no time)."""
        if levels not in self._can_run:  # asked again for each queued trial at every step of the progress line
            try:
                self._can_run[levels] = compose_options(self.options_of(levels)).check(self.device) is None
            except ConflictError:
                self._can_run[levels] = False
        return self._can_run[levels]

    def runnable_combinations(self) -> list[tuple[Option, ...]]:
        return [self.options_of(levels) for levels in grid(self.options) if self.runnable(levels)]

    def runnable_labels(self) -> dict[str, Levels]:
        """Each runnable combination's levels by its label (the label a queued trial records)."""
        return {self.study.combination(dict(levels)).label: levels for levels in grid(self.options)
                if self.runnable(levels)}

    def screened_fraction(self) -> fraction.Fraction | None:
        """The fraction of the runnable grid screening measures here (`ablate.stats.screening.fraction`), or None: all
        of it. A fraction only under `quick`: the whole table measures every combination. None too where the protocol
        does not race (screening only, `--single-pass`, a full randomized block design): there screening's
        measurements are the answer, and a combination never measured could be none."""
        if not self.protocol.racing or not self.protocol.quick:
            return None
        runnable = [levels for levels in grid(self.options) if self.runnable(levels)]
        return fraction.screening_fraction(self.options, runnable, baseline_levels(self.options))

    def screening(self) -> list[Planned]:
        """Screening's blocks: the fraction's cells where there is one (`screened_fraction`), else every runnable
        combination; every combination that cannot run here is recorded as skipped (which `fractioned.of` reads)."""
        runnable: list[Levels] = []
        unrunnable: list[Levels] = []
        for levels in grid(self.options):
            (runnable if self.runnable(levels) else unrunnable).append(levels)
        part = self.screened_fraction()
        measured = list(part.cells) if part else runnable
        plan = screening_plan(measured, baseline_levels(self.options), self.protocol, self.seed, unrunnable)
        return [Planned(slot) for slot in plan]

    def describe(self) -> str:
        """The protocol in a sentence, true to this grid on this device: what screening measures besides the
        baseline, and the fraction where there is one."""
        part = self.screened_fraction()
        screened = len(part.cells) if part else len(self.runnable_combinations())
        return self.protocol.describe(screened - 1, part.describe() if part else None)

    def plain(self) -> str:
        """The plan in the run's header, in a practitioner's words (`ProtocolSettings.plain`)."""
        runnable = len(self.runnable_combinations())
        accuracy = ("none" if not self.study.task.has_accuracy or self.study.budget.throughput_only
                    else "each group" if not self.defer_accuracy else "finalists" if self.protocol.quick else "table")
        if self.n_trials:  # TPE's picks and the baseline
            return self.protocol.plain(min(self.n_trials + 1, runnable), runnable, accuracy, picked=True)
        part = self.screened_fraction()
        return self.protocol.plain(len(part.cells) if part else runnable, runnable, accuracy)

    @property
    def tpe_block_size(self) -> int:
        """`--search optuna`: TPE's picks per screening block (no more than it picks in all)."""
        return min(self.protocol.block_size, max(1, self.n_trials or 1))

    @staticmethod
    def tpe_screened(trials: list[FrozenTrial]) -> int:
        """Screening measurements TPE picked (queued baselines not counted)."""
        return sum(1 for t in trials if records.from_trial(t).picked and claim.owns(t))

    def tpe_baseline(self, trials: list[FrozenTrial]) -> Planned | None:
        """`--search optuna`: a baseline of the current screening block when one of its random places comes, or
        when screening has ended without it."""
        screened, size = self.tpe_screened(trials), self.tpe_block_size
        done = screened >= (self.n_trials or 0)
        block = (screened - 1) // size if done else screened // size
        if block < 0:
            return None
        places = sorted(random.Random(f"{self.seed}:{block}:baseline").choices(
            range(size), k=self.protocol.screen_baselines))
        due = len(places) if done else sum(1 for p in places if p <= screened - block * size)
        have = sum(1 for t in trials if claim.owns(t) and (r := records.from_trial(t)).slot is not None
                   and r.block == block and r.combination == BASELINE and r.phase == SCREEN)
        if have >= due:
            return None
        return Planned(Slot(baseline_levels(self.options), block, places[have], SCREEN))

    def plan(self, stored: list[records.Record]) -> tuple[racing.Race[str] | None, list[Planned]]:
        """Where the race stands (None where this protocol does not race), and what to measure next: a race or
        confirmation block, else the final set's next parity seed (`ablate.stats.race.finalists`); none: done. Where a
        fraction was screened and its model calls for the fold-over, that first (no race yet: None)."""
        screened = fractioned.of(self.study, stored)
        if screened is not None and (folding := self._fold_over(stored, screened)):
            return None, folding
        found = finalists.final(stored, self.study.accuracy_tolerance, self.protocol, screened)
        standing = found.standing if self.protocol.racing else None
        if found.next_block is not None:
            # A combination the race fields may have no record yet (a fraction's, never screened): its grid levels.
            by_label = {**(screened.cells if screened else {}), **{r.combination: levels_of(r.levels) for r in stored}}
            block = 1 + max((m.block for m in speedups.protocol_measurements(stored)), default=-1)  # every round's
            slots = race_plan([by_label[c] for c in found.next_block], by_label[BASELINE], block,
                                       self.seed, found.phase)
            return standing, [Planned(slot) for slot in slots]
        trainers = finalists.trainers(stored)
        if found.parity_step is None:
            return standing, self._table(stored, found, trainers)
        index, groups = found.parity_step
        # Blocks below zero: one per parity seed, apart from the protocol's (claim keeps one per slot).
        return standing, [Planned(Slot(levels_of(trainers[g].levels), -1 - index, place, PARITY),
                                  index) for place, g in enumerate(groups)]

    def _table(self, stored: list[records.Record], found: finalists.Final,
               trainers: dict[str, records.Record]) -> list[Planned]:
        """The table pass (`finalists.table`): every group the answer left untrained, once at the first seed, all
        queued at once (in order: the final set's first; workers share them out). Only where accuracy waited for the
        race (`defer_accuracy`: elsewhere screening trained each group) and the study wants the whole table (not
        `protocol.quick`). Their places at the first seed's block come after every place a parity seed can take
        there (one per group with a trainer), so no slot is one of parity's."""
        if not self.defer_accuracy or self.protocol.quick:
            return []
        return [Planned(Slot(levels_of(trainers[g].levels), -1, len(trainers) + place, TABLE))
                for place, g in finalists.table(stored, found)]

    def to_train(self, stored: list[records.Record], queued: Sequence[str] = ()) -> list[str] | None:
        """The combinations that will train each accuracy group whose first seed has not been trained, for the cost
        estimate to count and price. Where the table pass trains every group (`_table`): each group's trainer
        (`finalists.trainers`), by parity or the table pass. Where screening trains each group as it comes
        (`defer_accuracy` off): the first of `queued` (labels, in the order they run) in each group no measurement
        has trained. None where the study trains no accuracy, or under `--quick` (only the answer's groups train)."""
        if not self.study.task.has_accuracy or self.study.budget.throughput_only:
            return None
        if self.defer_accuracy:
            if self.protocol.quick:
                return None
            trainers = finalists.trainers(stored)
            return [trainers[g].combination for g in sorted(trainers.keys() - finalists.first_seed_ended(stored))]
        trained = {g for g, seeds in finalists.accuracies(stored).items() if 0 in seeds}
        group = {label: self.accuracy_group(self.options_of(levels))
                 for label, levels in self.runnable_labels().items()}
        first: dict[str, str] = {}
        for label in queued:
            if label in group and group[label] not in trained:
                first.setdefault(group[label], label)
        return list(first.values())

    def _fold_over(self, stored: list[records.Record], screened: fractioned.Fractioned) -> list[Planned]:
        """The fold-over's screening blocks (`fraction.rest`, numbered after screening's), where the model on the
        fraction calls for it and nothing past screening was measured yet; else none."""
        every = [m for r in stored for m in r.every_measurement]
        if any(m.phase != SCREEN for m in every) or not screened.fold_over(
                speedups.protocol_measurements(stored)):
            return []
        first = 1 + max(m.block for m in every)
        rest = [screened.cells[c] for c in screened.rest]
        return [Planned(slot) for slot in screening_plan(rest, baseline_levels(self.options), self.protocol,
                                                                  self.seed, first=first)]
