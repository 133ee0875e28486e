"""A study screened on a fraction of its grid (`ablate.stats.screening.fraction`): the runnable combinations the race
may field without a measurement, their accuracy groups, and the screening model (`ablate.stats.screening.factorial`)
that speaks for them.

Found from the study and one device's stored records alone, so that the planner, as it plans, and every surface,
long after, find the same one: the runnable combinations are the grid's less those recorded as skipped on the
device (screening records every combination it cannot run, in its first block, fraction or not); the fraction is
fixed by the study's dimension order, never by a seed; and a fraction was screened exactly where screening measured
its cells, or its cells and then the fold-over's (`Planner.plan`). A grid that could be fractioned but was screened
in full from its first block (the whole table) is found too, `whole`: the race opens on the model fitted to every
cell, as after a fold-over. A study screened by TPE, or by an ablate before fractions, measured others: None.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from ablate.config.choices import (
    BASELINE,
    Levels,
    baseline_levels,
    grid,
)
from ablate.config.study import Study
from ablate.stats.protocol import MODELLED, SCREEN, Estimate, Measurement
from ablate.stats.screening import factorial, fraction
from ablate.stats.screening.fraction import Fraction
from ablate.store.records import Record, State


@dataclass(frozen=True)
class Fractioned:
    """What the race needs to field combinations screening never measured."""

    fraction: fraction.Fraction
    cells: Mapping[str, Levels]  # every runnable combination's levels, by label (measured or not)
    groups: Mapping[str, str]  # every runnable combination's accuracy group (the stored one where it was measured)
    folded: bool  # the fold-over (`fraction.rest`) was screened too: every runnable combination has been
    whole: bool = False  # screened in full from the first block (no fraction first): nothing was folded over

    @property
    def part(self) -> Fraction | None:
        """The fraction screening measured first, where it measured one (None: the whole grid from the start)."""
        return None if self.whole else self.fraction

    @property
    def rest(self) -> tuple[str, ...]:
        """The labels of the combinations the fraction left out, in the fraction's order: the fold-over's."""
        label = {levels: c for c, levels in self.cells.items()}
        return tuple(label[levels] for levels in self.fraction.rest)

    def model(self, measurements: Sequence[Measurement[str]]) -> factorial.Fit[str] | None:
        """The screening model the race's field comes from, fitted to the screening measurements: on the fraction;
        after a fold-over, on every combination, which separates the aliased pairs. Kept after a fold-over even
        where its lack-of-fit test rejects: that test's pure error is the baselines' alone, so a noisy technique
        (bf16 on a CPU) reads as lack of fit, and the model opens the race on the true best far more often than each
        cell's own screening estimate does (docs/evidence.md, "Evidence: the screening model"). None where
        the model has too few cells for its terms: the race opens on the screening estimates then."""
        screened = [m for m in measurements if m.phase == SCREEN]
        return factorial.fit(screened, BASELINE, self.cells, None if self.folded else self.fraction)

    def read_once(self, estimates: Mapping[str, Estimate], measurements: Sequence[Measurement[str]]
                  ) -> dict[str, Estimate]:
        """The screening model's estimate of each combination whose own `estimates` rest on one screening block.

        Why: a combination read once is one process, and a table sorted by speed-up puts the luckiest of those
        readings on top. Each reading's interval holds its truth for 93-94% of such rows, but the first rows of the
        table are chosen for reading high: in whole-table studies simulated at process noise 0.15, the first row
        read once held its truth in 138 of 200. The model pools every screened cell (the cell's own reading is one of
        them), so one process's luck moves its prediction little: the first row held its truth in 188 of 200, every
        row in 96%, with an interval about a third as wide (docs/evidence.md, "Evidence: rows read once"). Rows
        measured in several blocks keep their own estimates; so does the baseline (x1.00, exact), and every row
        where the model has too few cells for its terms."""
        found = self.model(measurements)
        if found is None:
            return {}
        return {c: Estimate(p.log, p.se, p.df, e.blocks, SCREEN, MODELLED)
                for c, e in estimates.items()
                if c != BASELINE and e.blocks <= 1 and e.phase == SCREEN
                and (p := found.predictions.get(c)) is not None and p.measured}

    def fold_over(self, measurements: Sequence[Measurement[str]]) -> bool:
        """Whether to screen the fold-over (`fraction.rest`) before the race: an aliased pair of interactions is
        active in the model on the fraction (`Fit.fold_over`). Once only: never after a fold-over."""
        if self.folded:
            return False
        found = factorial.fit([m for m in measurements if m.phase == SCREEN], BASELINE, self.cells,
                              self.fraction)
        return found is not None and found.fold_over


def of(study: Study, records: Sequence[Record]) -> Fractioned | None:
    """The fraction one device's `records` screened (module docstring), or None where screening measured another
    set (every runnable combination, TPE's picks) or has not measured its set yet."""
    options = study.choices
    skipped = {r.combination for r in records if r.state == State.SKIPPED}
    found_cells = {study.combination(dict(levels)).label: levels for levels in grid(options)}
    cells = {c: levels for c, levels in found_cells.items() if c not in skipped}
    found = fraction.screening_fraction(options, list(cells.values()), baseline_levels(options))
    if found is None:
        return None
    label = {levels: c for c, levels in cells.items()}
    part, rest = {label[levels] for levels in found.cells}, {label[levels] for levels in found.rest}
    blocks: dict[str, list[int]] = {}
    for r in records:
        for m in r.every_measurement:
            if m.phase == SCREEN and m.state != State.SKIPPED:
                blocks.setdefault(r.combination, []).append(m.block)
    screened = set(blocks)
    if screened not in (part, part | rest):
        return None
    folded = screened == part | rest
    # A fold-over's blocks follow every block of the fraction's (`Planner._fold_over`); a whole screen mixes them.
    whole = folded and min(b for c in rest for b in blocks[c]) <= max(b for c in part - {BASELINE} for b in blocks[c])
    return Fractioned(found, cells, _groups(study, cells, records), folded=folded, whole=whole)


def _groups(study: Study, cells: Mapping[str, Levels], records: Sequence[Record]) -> dict[str, str]:
    """Each runnable combination's accuracy group: the one stored with its measurements, else its options' group
    (`accuracy_group`) as stored with a measured combination of the same options' group (one that trains bitwise as
    another, `ablate.run.bitwise`, stores the group it trains as), else the options' group itself."""
    own = {c: study.combination(dict(levels)).group for c, levels in cells.items()}
    stored = {r.combination: r.accuracy_group for r in records if r.accuracy_group and r.combination in cells}
    trains_as = {own[c]: g for c, g in stored.items()}
    return {c: stored.get(c) or trains_as.get(group, group) for c, group in own.items()}
