"""The factorial effects: what switching each technique on does to throughput and to accuracy, on average over the
other techniques, and what two techniques do together beyond their separate effects (the report's effects section,
`ablate.render.effects`).

Each technique is a 0/1 column and each crossed pair of techniques an interaction column, in a least-squares fit
(statsmodels) of every measurement's response with the block as a factor (`fit_effects`): log throughput, so an
effect on throughput is a factor, as a speed-up is (`ablate.stats.speedups`); or test accuracy, in points. The same
design columns serve the screening model (`ablate.stats.screening.factorial`). Where the measurements cannot support a
fit, the fit is the reason, in words.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from itertools import combinations
from typing import Mapping, Sequence

import numpy as np

from ablate.config.choices import OFF
from ablate.stats.protocol import CONFIDENCE, TRAININGS
from ablate.stats.speedups import Interval
from ablate.store.records import Record
from ablate.words import count

MIN_RESIDUAL_DF = 2  # fewer residual degrees of freedom leave no usable noise estimate


@dataclass(frozen=True)
class Effect:
    techniques: tuple[str, ...]  # one for a main effect, two for an interaction
    dims: tuple[str, ...]  # their dimensions
    interval: Interval  # on the response's scale (log throughput, or accuracy points); simultaneous (fit_effects)
    p_value: float  # Bonferroni-adjusted over the fit's terms, as the interval is

    @property
    def term(self) -> str:
        return " x ".join(self.techniques)

    @property
    def interaction(self) -> bool:
        return len(self.techniques) == 2


@dataclass(frozen=True)
class EffectFit:
    response: str
    effects: tuple[Effect, ...]
    n: int
    residual_df: int
    full_factorial: bool
    interactions: bool
    note: str

    def main(self) -> list[Effect]:
        return [e for e in self.effects if not e.interaction]

    def pairs(self) -> list[Effect]:
        return [e for e in self.effects if e.interaction]


@dataclass(frozen=True)
class Observation:
    levels: dict[str, str]
    value: float
    block: int | None = None  # None: no block factor (one value per combination)


def throughput_observations(records: list[Record]) -> list[Observation]:
    """Every complete measurement's log throughput, with its block."""
    return [Observation(dict(m.levels), m.log_throughput, m.block)
            for r in records for m in r.every_measurement
            if m.log_throughput is not None and m.phase not in TRAININGS]


def accuracy_observations(records: list[Record]) -> list[Observation]:
    """Accuracy of the trials that trained it (inherited copies would count one measurement many times)."""
    return [Observation(dict(r.levels), r.accuracy) for r in records
            if r.complete and r.accuracy_trained and r.accuracy is not None]


def technique_columns(levels: Sequence[Mapping[str, str]], dims: Sequence[str]) -> dict[tuple[str, str], np.ndarray]:
    """Each technique (a dimension's non-off choice among `levels`), in `dims` order, as a 0/1 column over `levels`:
    the design matrix of the effect fits (`fit_effects`, `ablate.stats.screening.factorial`)."""
    techniques = [(d, level) for d in dims for level in sorted({lv.get(d, OFF) for lv in levels} - {OFF})]
    return {(d, level): np.array([float(lv.get(d, OFF) == level) for lv in levels]) for d, level in techniques}


def crossed_pairs(columns: Mapping[tuple[str, str], np.ndarray]) -> list[tuple[tuple[str, str], tuple[str, str]]]:
    """The pairs of techniques from different dimensions whose four on/off combinations all occur in `columns`:
    those whose interaction the rows can estimate."""
    return [(t1, t2) for t1, t2 in combinations(columns, 2)
            if t1[0] != t2[0] and all(((columns[t1] == i) & (columns[t2] == j)).any() for i in (0, 1) for j in (0, 1))]


def fit_effects(observations: list[Observation], dims: list[str], name: str) -> EffectFit | str:
    """Main effects and two-way interactions of the techniques in `dims` on `response`.

    Each technique (a dimension's non-off choice) is a 0/1 column; each pair of
    techniques from different dimensions adds the product of their centred
    columns. In a full factorial this makes a main effect's coefficient the
    average change when the technique is switched on, over every combination
    of the others, and an interaction's coefficient the extra change when both
    are on beyond the sum of their separate changes. Observations with a block
    add the block as a factor (a column per block but the first), so drift
    between blocks does not pass for an effect. The residual (three-way and
    higher interactions plus process-to-process noise) is the noise estimate.
    Returns the reason instead when the observations cannot support a fit.

    The intervals are simultaneous over the reported terms (Bonferroni: each at 1 - 0.05 / terms), since the
    report prints a decision on each ("distinguishable"): with pointwise intervals one null term in twenty
    would be called distinguishable, and a table of 20 terms would call one in most studies. The familywise
    rate is simulated in tests/stats/test_analysis.py.
    """
    rows = [(r, r.value) for r in observations if math.isfinite(r.value)]
    columns = technique_columns([r.levels for r, _ in rows], dims)
    techniques = list(columns)
    if not rows or not techniques:
        return "no varied technique has a measured result"
    y = np.array([v for _, v in rows])
    x = {f"{d}={lv}": col for (d, lv), col in columns.items()}
    labels = {f"{d}={lv}": lv for d, lv in techniques}
    pair_cols = {}
    for (d1, l1), (d2, l2) in crossed_pairs(columns):
        a, b = x[f"{d1}={l1}"], x[f"{d2}={l2}"]
        pair_cols[(f"{d1}={l1}", f"{d2}={l2}")] = (a - a.mean()) * (b - b.mean())
    blocks = sorted({r.block for r, _ in rows if r.block is not None})
    block_cols = [np.array([float(r.block == b) for r, _ in rows]) for b in blocks[1:]]
    chosen = _terms(y, x, pair_cols, block_cols)
    if isinstance(chosen, str):
        return chosen
    cols, design, residual_df, with_pairs = chosen
    per_cell = Counter(tuple(sorted(r.levels.items())) for r, _ in rows)
    levels_per_dim = [1 + sum(1 for d, _ in techniques if d == dim) for dim in dict.fromkeys(d for d, _ in techniques)]
    full = len(per_cell) == math.prod(levels_per_dim)
    note = _note(per_cell, full, len(y), len(blocks), residual_df, with_pairs)
    return EffectFit(name, _effects(y, design, cols, labels), len(y), residual_df, full, with_pairs, note)


Term = str | tuple[str, str]  # a technique's column name, or a crossed pair's two


def _terms(y: np.ndarray, x: Mapping[str, np.ndarray], pair_cols: Mapping[tuple[str, str], np.ndarray],
           block_cols: list[np.ndarray]) -> tuple[list[Term], np.ndarray, int, bool] | str:
    """The terms to fit: the main effects and the crossed pairs, else the main effects alone where the rows cannot
    separate the pairs too with `MIN_RESIDUAL_DF` left for the noise; with the design matrix (an intercept, the
    terms, the block columns), its residual degrees of freedom and whether it holds the pairs. Else why no fit."""
    main_cols: list[Term] = list(x)
    for with_pairs in (True, False):
        cols = main_cols + (list(pair_cols) if with_pairs else [])
        design = np.column_stack([np.ones(len(y))] + [x[c] if isinstance(c, str) else pair_cols[c] for c in cols]
                                 + block_cols)
        residual_df = len(y) - design.shape[1]
        separable = np.linalg.matrix_rank(design) == design.shape[1]
        if residual_df >= MIN_RESIDUAL_DF and separable:
            return cols, design, residual_df, with_pairs
    if residual_df < MIN_RESIDUAL_DF:
        return (f"{count(len(y), 'measured combination')} are too few to separate "
                f"{count(len(main_cols), 'technique')} from noise "
                f"(need at least {len(main_cols) + 1 + MIN_RESIDUAL_DF})")
    return "the measured combinations cannot tell some techniques apart (they were always switched together)"


def _effects(y: np.ndarray, design: np.ndarray, cols: list[Term], labels: Mapping[str, str]) -> tuple[Effect, ...]:
    """The least-squares fit of `y` on `design`: each term's effect with its interval, simultaneous over the terms
    (Bonferroni), and its adjusted p-value."""
    import statsmodels.api as sm

    fit = sm.OLS(y, design).fit()
    ci = fit.conf_int(alpha=(1 - CONFIDENCE) / len(cols))
    effects = []
    for i, col in enumerate(cols, start=1):  # the block columns come after: nuisance, not reported
        keys = (col,) if isinstance(col, str) else col
        effects.append(Effect(tuple(labels[k] for k in keys), tuple(k.split("=", 1)[0] for k in keys),
                              Interval(float(fit.params[i]), float(ci[i][0]), float(ci[i][1])),
                              min(1.0, float(fit.pvalues[i]) * len(cols))))
    return tuple(effects)


def _note(per_cell: Counter[tuple[tuple[str, str], ...]], full: bool, n: int, blocks: int, residual_df: int,
          with_pairs: bool) -> str:
    """What the fit rests on, in words: a full factorial's averages and how unequally its combinations weigh, else
    a partial one's bias; `n` measurements, `blocks` blocks."""
    blocked = f", with the block as a factor ({blocks} blocks)" if blocks > 1 else ""
    if full:
        # Least squares weighs every measurement alike, so a raced combination measured many times pulls the
        # averages towards itself: say how unequal the weights are rather than claim an equal average.
        most, least = max(per_cell.values()), min(per_cell.values())
        weights = ("averages over every combination of the other techniques, each weighing equally" if most == least
                   else f"averages over every combination of the other techniques, each weighted by its number of "
                        f"measurements ({least} to {most}: the baseline and the raced ones weigh up to "
                        f"{most / least:g} times as much as one measured {'once' if least == 1 else f'{least} times'})")
        return (f"Full factorial ({len(per_cell)} combinations, {n} measurements{blocked}): main effects are "
                f"{weights}; the noise estimate is the residual after "
                f"main effects{' and two-way interactions' if with_pairs else ''} ({residual_df} degrees of freedom).")
    return (f"Not a full factorial ({len(per_cell)} measured combinations{blocked}): effects are least-squares "
            f"estimates from "
            f"what was run, and are biased where the untried combinations would have behaved differently"
            f"{'' if with_pairs else '; too few trials to estimate interactions'}.")
