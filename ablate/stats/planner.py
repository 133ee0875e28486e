"""What to measure next: a pure function of what the study has stored (Optuna's sampler, to the runner's loop).

The runner asks once every queued measurement has a result; the planner
answers with the measurements to queue, each a `protocol.Slot` (a
combination's levels, its block, its place in the block's random order, its
phase) and the training seed it trains at. Deterministic in its input, so
workers that plan at once plan the same measurements, and `claim` keeps one
of each.

- **Screening** (`screening`): every runnable combination in blocks with
  their baselines; combinations that cannot run here join block 0 and are
  recorded as skipped, taking no time.
- **TPE's baselines** (`tpe_baseline`, `--search optuna`): TPE picks the
  combinations; a baseline joins each block of its picks at random places.
- **The parity race** (`parity`): the accuracy groups still short of seeds,
  still `uncertain`, or `ok` on fewer than `parity.OK_SEEDS` where they can
  decide the answer (`screened_groups`), trained at the next seed
  (`ablate.stats.parity`), only those `worth_more_seeds`; on a raced grid
  their first seed too (screening then measures throughput only:
  `Planner.defer_accuracy`).
- **The race** (`race`): the next race or confirmation block (`ablate.stats.racing`).
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Sequence

from optuna.trial import FrozenTrial
from scipy import stats

from ablate.config.choices import (
    BASELINE,
    Levels,
    Option,
    accuracy_group,
    baseline_levels,
    by_dimension,
    compose_options,
    grid,
    levels_of,
)
from ablate.config.design import ProtocolSettings
from ablate.config.study import Study
from ablate.stats import analysis, contrasts, parity, protocol, racing, verdicts
from ablate.store import claim, records
from ablate.store.records import State
from strategies import ConflictError


@dataclass(frozen=True)
class Planned:
    slot: protocol.Slot
    seed_index: int = 0  # 0: the run's own training seed; 1, 2...: parity seeds


def slower_than_baseline(estimate: protocol.Estimate, k: int, alpha: float = contrasts.ALPHA) -> bool:
    """Screening found this combination slower than the baseline: its paired contrast with the baseline's
    blocks, one-sided t test at `alpha` over the `k` screened (Bonferroni). The baseline is always a candidate and
    beats it, so its accuracy is not what decides the answer."""
    if estimate.se is None or estimate.log >= 0:
        return False
    return estimate.se == 0 or -estimate.log / estimate.se > stats.t.ppf(1 - alpha / max(1, k), max(1, estimate.df))


def screened_groups(stored: Sequence[records.Record]) -> tuple[set[str], dict[str, float]]:
    """The accuracy groups that can decide the answer: those with a combination that screening did not find
    slower than the baseline (`slower_than_baseline`), the baseline's among them; and each group's fastest
    combination's screening estimate (log speed-up)."""
    screened = [m for m in analysis.protocol_measurements(stored) if m.phase in (protocol.SCREEN, protocol.FULL)]
    found = protocol.estimates(screened, BASELINE)
    best: dict[str, float] = {BASELINE: 0.0}
    deciding = {BASELINE}
    for m in (m for r in stored for m in (r.measurements or (r,))):
        if m.accuracy_group is None:  # skipped before it was placed in a group
            continue
        estimate = found.get(m.combination)
        if estimate is None or not slower_than_baseline(estimate, len(found)):
            deciding.add(m.accuracy_group)
        if estimate is not None:
            best[m.accuracy_group] = max(best.get(m.accuracy_group, -math.inf), estimate.log)
    return deciding, best


def worth_more_seeds(stored: Sequence[records.Record], max_seeds: int,
                     screened: tuple[set[str], dict[str, float]] | None = None) -> dict[str, int]:
    """The accuracy groups the parity race trains (at its first seed too, where screening deferred it), each with
    the seeds it trains to whatever its verdict: every group with a combination that screening did not find
    slower than the baseline (`slower_than_baseline`), at `parity.MIN_SEEDS`; and, until the seed-to-seed spread
    has `parity.NOISE_DF` degrees of freedom, a seed more for the fastest of those (up to `max_seeds`), and only
    then the fastest of the slower groups at `MIN_SEEDS`.

    Why: a group whose every combination the baseline beats is not what decides the answer, whatever its
    accuracy, so its training buys nothing a user acts on, and a technique far slower than the baseline on
    this machine (bf16 where the CPU emulates it) is also the dearest to train. Left untrained, it is neither
    raced nor recommended; trained once already (TPE's screening), it is judged at that seed by the same test (the
    spread pooled over the others): a wider interval, not a biased one, since the choice reads throughputs, which
    the seeds' accuracies do not move. A wrong choice leaves out a combination as fast as the baseline, in at
    most the test's 5% of studies (tests/stats/test_decisions.py). The test is not the race's studentized range at a
    tenth of its alpha: on a screening of two blocks (2 degrees of freedom) the range kept no group running at
    x0.14 (benchmarks/RESULTS.md). The spread's missing degrees of freedom come from a group trained anyway
    first: a third seed of it (and of the baseline, once) costs about two fp32 trainings, where a slower group's
    two seeds cost two of its own, seven times dearer with bf16 on such a CPU (benchmarks/RESULTS.md). Both give
    the spread a degree of freedom alike, so the verdicts' error rates do not change (tests/stats/test_decisions.py).
    With no group to judge but the baseline's, the spread serves no verdict and nothing more is trained.
    `screened`: `screened_groups`'s answer (computed here when not given).
    """
    deciding, best = screened if screened is not None else screened_groups(stored)
    fastest_first = sorted(best, key=lambda g: (-best[g], g))
    seeds = {g: parity.MIN_SEEDS for g in sorted(deciding)}
    judged = sorted(deciding - {BASELINE}, key=lambda g: (-best.get(g, 0.0), g))
    need = parity.NOISE_DF - (parity.MIN_SEEDS - 1) * len(judged)
    if not judged or max_seeds < parity.MIN_SEEDS:
        return seeds
    for extra in range(parity.MIN_SEEDS, max_seeds):  # a seed more for the fastest judged groups, one round a seed
        more = judged[:max(0, need)]
        seeds.update(dict.fromkeys(more, extra + 1))
        need -= len(more)
    for group in (g for g in fastest_first if g not in deciding):
        if need <= 0:
            break
        seeds[group] = parity.MIN_SEEDS
        need -= parity.MIN_SEEDS - 1
    return seeds


class Planner:
    def __init__(self, study: Study, design: ProtocolSettings, protocol_seed: int, device: str, device_name: str,
                 n_trials: int | None = None, defer_accuracy: bool = False) -> None:
        """`defer_accuracy`: screening measures throughput only, and the parity race trains every group's seeds,
        its first included, for the groups `worth_more_seeds` (the raced grid; TPE needs an accuracy per pick)."""
        self.study, self.design, self.seed, self.n_trials = study, design, protocol_seed, n_trials
        self.defer_accuracy = defer_accuracy
        self.device, self.device_name = device, device_name
        self.options = by_dimension(study)
        self._can_run: dict[Levels, bool] = {}
        self.trains_as: dict[str, str] = {}  # accuracy group -> the one it trains as here (ablate.run.bitwise)

    def accuracy_group(self, options: Sequence[Option]) -> str:
        """The group whose accuracy `options` train to on this device: their own, or the one `ablate.run.bitwise`
        found they train bitwise as."""
        group = accuracy_group(options)
        return self.trains_as.get(group, group)

    def options_of(self, levels: Levels) -> tuple[Option, ...]:
        return self.study.combination(dict(levels))

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

    def screening(self) -> list[Planned]:
        runnable: list[Levels] = []
        unrunnable: list[Levels] = []
        for levels in grid(self.options):
            (runnable if self.runnable(levels) else unrunnable).append(levels)
        plan = protocol.screening_plan(runnable, baseline_levels(self.options), self.design, self.seed, unrunnable)
        return [Planned(slot) for slot in plan]

    @property
    def tpe_block_size(self) -> int:
        """`--search optuna`: TPE's picks per screening block (no more than it picks in all)."""
        return min(self.design.block_size, max(1, self.n_trials or 1))

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
            range(size), k=self.design.screen_baselines))
        due = len(places) if done else sum(1 for p in places if p <= screened - block * size)
        have = sum(1 for t in trials if claim.owns(t) and (r := records.from_trial(t)).slot is not None
                   and r.block == block and r.combination == BASELINE and r.phase == protocol.SCREEN)
        if have >= due:
            return None
        return Planned(protocol.Slot(baseline_levels(self.options), block, places[have], protocol.SCREEN))

    def parity(self, stored: list[records.Record]) -> list[Planned]:
        """The parity race's next seed (`ablate.stats.parity`): one trial per accuracy group that needs it, by the
        combination that trains the group at every seed; none when the race is over."""
        trainers = self.trainers(stored)
        screened = screened_groups(stored)
        worth = {g: n for g, n in worth_more_seeds(stored, self.design.seeds, screened).items() if g in trainers}
        step = parity.next_seed(verdicts.accuracies(stored), BASELINE, self.study.accuracy_tolerance,
                                verdicts.parity_sample_size(stored), self.design.seeds, worth, screened[0])
        if step is None:
            return []
        index, groups = step
        tried = {m.accuracy_group for r in stored for m in r.measurements
                 if m.phase == protocol.PARITY and m.seed_index == index and m.state in (State.FAILED, State.COMPLETE)}
        if tried & set(groups):  # it failed at this seed (or gave no accuracy), and would again: its verdict stays
            return []
        # Blocks below zero: one per parity seed, apart from the protocol's (claim keeps one per slot).
        return [Planned(protocol.Slot(levels_of(trainers[group].levels), -1 - index, place, protocol.PARITY), index)
                for place, group in enumerate(groups)]

    @staticmethod
    def trainers(stored: list[records.Record]) -> dict[str, records.Record]:
        """Accuracy group -> the measurement whose combination trains it at every seed: the one that trained its
        first seed, else (its accuracy deferred) its first complete screened one. Groups whose accuracy cannot
        be measured (stand-in data, a loss-only task: `accuracy_note`) have none."""
        measured = [(group, m) for r in stored for m in (r.measurements or (r,))
                    if m.complete and (group := m.accuracy_group) and not m.accuracy_note]
        out = {group: m for group, m in measured if m.accuracy_trained and m.seed_index == 0}
        for group, m in sorted(measured, key=lambda gm: (gm[1].block, gm[1].position)):
            if m.phase in (protocol.SCREEN, protocol.FULL):
                out.setdefault(group, m)
        return out

    def race(self, stored: list[records.Record]) -> tuple[racing.Race[str] | None, list[Planned]]:
        """Where the race stands, and its next block (none: it is over, or this protocol does not race)."""
        if not self.design.racing:
            return None, []
        measurements = analysis.protocol_measurements(stored)
        eligible = {r.combination for r in verdicts.eligible(stored, self.study.accuracy_tolerance)}
        standing = racing.race(measurements, BASELINE, eligible, self.design)
        if standing.next_block is None:
            return standing, []
        by_label = {r.combination: levels_of(r.levels) for r in stored}
        block = 1 + max((m.block for m in measurements), default=-1)
        slots = protocol.race_plan([by_label[c] for c in standing.next_block], by_label[BASELINE], block,
                                   self.seed, standing.phase)
        return standing, [Planned(slot) for slot in slots]
