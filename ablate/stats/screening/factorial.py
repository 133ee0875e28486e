"""The screening model: every cell of the grid ranked from a fraction of it (`ablate.stats.screening.fraction`).

Why: screening a resolution IV fraction measures half of mnist_cnn's 48 CPU cells; the race needs all 48
ranked. Log throughput is close to additive in the techniques, so a model of main effects and the few
two-factor interactions the data show, fitted to the screened cells, predicts the unscreened ones, and the
race opens on the cells the model cannot tell apart from its best (`race_field`), measured or not. The model
pools every measurement into each prediction, where measuring each cell once gives one noisy process per
cell, so the race opens on the true best cell far more often from the half fraction than from every cell
screened once (tests/stats/test_factorial.py; figures for this and each choice below: docs/evidence.md,
"Evidence: the screening model").

- **Blocks.** The model is fitted to every screening measurement's log throughput with the block as a
  factor (a column per block, as in `ablate.stats.screening.effects.fit_effects`), so drift between blocks cancels as
  in the protocol's paired estimate, and the baselines' two processes per block give pure error. A cell's
  prediction is its fitted difference from the baseline's cell. Subtracting each block's baseline mean from
  its cells instead would give the block's cells one shared error (that mean's), which a regression takes for
  independent errors.
- **Terms.** A main effect per technique (0/1 columns, `effects.technique_columns`), always: resolution IV
  keeps each clear of the pairs. A two-factor interaction (the product of two techniques' columns centred on
  the screened cells, as in `fit_effects`) enters only where the data show it: forward selection, the most
  significant first, each at `PAIR_ALPHA` shared over the candidates (Bonferroni). Every pair the design can
  estimate is 17 terms for mnist_cnn's 24 cells, and so nearly saturated a model predicts almost as noisily as
  the cells' own processes (effect sparsity and heredity: Box, Hunter & Hunter, Statistics for Experimenters,
  2nd ed., ch. 5-6; Wu & Hamada, Experiments, 2nd ed., ch. 4-5). Main effects alone fail where a pair reverses
  a technique (workers a loss alone, a gain with bf16). Choosing by leave-one-out error (PRESS) or shrinking
  every pair towards zero (REML ridge) did worse than selection.
- **Aliases.** In a resolution IV fraction pairs come in alias chains (num_workers x batch_size =
  set_to_none x amp on mnist_cnn's half; Montgomery, Design and Analysis of Experiments, 8th ed., 8.2), found
  from the screened cells themselves (one pair's centred column is another's up to sign once the main effects
  are out), so a grid screened in full has none: a chain is one candidate term. On the cells left out its
  members part (there set_to_none x amp = -num_workers x batch_size), and the screened half cannot say which
  member the effect is: an unscreened cell's prediction takes an equal share of each, and its standard error
  adds the spread of the members' single attributions (the chain's estimate squared times the largest such
  difference squared), so its interval holds whichever member is the active one. A chain told apart from zero
  (`ALIAS_ALPHA`, shared over the chains) calls for the fold-over: the rest of the grid, which separates every
  chain (a fraction and its complement are the full factorial).
- **Weights and standard errors.** Weighted least squares, each process weighted by the inverse of its
  variance where the variance model (`ablate.stats.variance`) has technique terms, else equally. Standard
  errors and the tests of terms are HC3 (MacKinnon & White 1985: robust to unequal variances, the least
  biased in small samples), since at screening the variance model has no technique terms yet and a bf16
  process on a CPU varies several times as much as the baseline's: with the model's variance, or HC2, a
  chain with no effect called the fold-over several times as often as with HC3.
- **Lack of fit** (the weighted residual's spread against the pure error of the baselines' replicates within
  blocks, an F test) is reported, not acted on: the pure error is the baseline's alone (three degrees of
  freedom on mnist_cnn), so a technique noisier than the baseline reads as lack of fit even where the truth is
  purely additive, and a big aliased pair moves it little.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Generic, Mapping, Sequence

import numpy as np
from scipy import stats

from ablate.config.choices import Levels
from ablate.stats import variance
from ablate.stats.contrasts import beyond_range
from ablate.stats.protocol import SCREEN, Key, Measurement, noise_sources
from ablate.stats.screening.effects import crossed_pairs, technique_columns
from ablate.stats.screening.fraction import Fraction

LACK_OF_FIT_ALPHA = 0.05  # the lack-of-fit test's level where a report names it; no decision rests on it (above)
PAIR_ALPHA = 0.05  # family-wise over the candidate pairs: a pair with no effect enters at most this often
ALIAS_ALPHA = 0.05  # family-wise over the alias chains: one with no effect calls for the fold-over at most this often
MIN_SPARE = 2  # cells beyond the model's parameters (its terms and the intercept) a fit needs
TOL = 1e-9


@dataclass(frozen=True)
class CellPrediction:
    log: float  # predicted log speed-up over the baseline
    se: float  # its standard error (robust: HC3 on the weighted fit; unscreened cells: with the aliases' spread)
    df: int
    measured: bool  # the cell was screened (its prediction is still the model's; its own estimate exists too)


@dataclass(frozen=True, eq=False)
class _Term:
    """A pair term: its members (one pair, or an alias chain), each's centred column over every cell, signed as
    the first member's on the screened cells; the term's column is their equal share."""

    members: tuple[str, ...]
    values: np.ndarray  # cells x members

    @property
    def column(self) -> np.ndarray:
        return self.values.mean(axis=1)


@dataclass(frozen=True)
class Fit(Generic[Key]):
    predictions: Mapping[Key, CellPrediction]  # every cell passed in, measured or not
    df: int  # residual df
    lack_of_fit_p: float | None  # residual spread vs the baselines' pure error; None: cannot test
    active_aliases: tuple[str, ...]  # aliased two-factor chains told apart from zero
    unscreened: bool = False  # some cells were left out of screening: a fold-over has cells to measure
    baseline: Key | None = None
    pairs: tuple[str, ...] = ()  # the pair terms the model took (a chain: its members joined by " = ")
    # What contrasts between cells need: the cells' rows of the effect terms, the terms' covariance and
    # coefficients, and per pair term its members (for the aliases' spread).
    _index: Mapping[Key, int] = field(default_factory=dict, compare=False, repr=False)
    _rows: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)), compare=False, repr=False)
    _cov: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)), compare=False, repr=False)
    _coef: np.ndarray = field(default_factory=lambda: np.zeros(0), compare=False, repr=False)
    _terms: tuple[tuple[int, _Term], ...] = field(default=(), compare=False, repr=False)

    @property
    def fold_over(self) -> bool:
        """Measure the rest of the grid: an alias chain is active, and cells were left out."""
        return self.unscreened and bool(self.active_aliases)

    def contrast(self, a: Key, b: Key) -> tuple[float, float]:
        """Cell a's predicted log throughput over b's, with its standard error (the aliases' spread included)."""
        i, j = self._index[a], self._index[b]
        d = self._rows[i] - self._rows[j]
        spread = 0.0
        for col, term in self._terms:  # a member's attribution less the equal share, at its largest
            shares = term.values[i] - term.values[j]
            spread += self._coef[col] ** 2 * float(np.max((shares - shares.mean()) ** 2))
        return float(d @ self._coef), math.sqrt(max(float(d @ self._cov @ d) + spread, 0.0))


def fit(measurements: Sequence[Measurement[Key]], baseline: Key, cells: Mapping[Key, Levels],
        fraction: Fraction | None) -> Fit[Key] | None:
    """The screening model fitted to the SCREEN measurements of `cells` (all of `measurements` feed the variance
    model), predicting every cell of `cells` whose techniques were all screened (with a fraction: every cell);
    None when the baseline was not screened or the screened cells are fewer than the main effects' parameters
    + MIN_SPARE."""
    rows = [m for m in measurements if m.phase == SCREEN and m.combination in cells]
    screened = list(dict.fromkeys(m.combination for m in rows))
    if baseline not in screened:
        return None
    dims = list(dict.fromkeys([*(fraction.factors if fraction else ()), *(d for lv in cells.values() for d, _ in lv)]))
    keys = list(cells)
    at = {k: i for i, k in enumerate(keys)}
    seen = np.array([at[k] for k in screened])
    mains = {t: col for t, col in technique_columns([dict(cells[k]) for k in keys], dims).items() if col[seen].any()}
    if not mains or len(screened) < len(mains) + 1 + MIN_SPARE:
        return None
    names = {t: t[0] if sum(1 for d, _ in mains if d == t[0]) == 1 else f"{t[0]}={t[1]}" for t in mains}
    low = dict(cells[baseline])
    known = [k for k in keys if all((d, lv) in mains or lv == low.get(d) for d, lv in cells[k])]
    blocks = sorted({m.block for m in rows})
    cell_of = np.array([at[m.combination] for m in rows])
    base = np.column_stack([np.array([[float(m.block == b) for b in blocks] for m in rows]),
                            np.column_stack(list(mains.values()))[cell_of]])
    if np.linalg.matrix_rank(base) < base.shape[1]:
        return None
    techniques = {k: frozenset(names[(d, lv)] for d, lv in cells[k] if (d, lv) in mains) for k in keys}
    model = variance.fit(noise_sources(measurements, baseline, lambda c: techniques.get(c, frozenset())))
    weights = (np.array([1 / model.variance(techniques[m.combination]) for m in rows])
               if model is not None and model.by_technique else np.ones(len(rows)))
    y = np.array([m.log_throughput for m in rows])
    candidates = _candidates(mains, seen, names)
    room = len(screened) - (len(mains) + 1 + MIN_SPARE)  # pair terms the screened cells leave room for
    chosen = _forward(y, weights, base, [t.column[cell_of] for t in candidates], room)
    chains = [i for i, t in enumerate(candidates) if len(t.members) > 1]
    active = tuple(" = ".join(candidates[i].members) for i in chains
                   if _p_value(y, weights, base, [candidates[j].column[cell_of] for j in chosen if j != i],
                               candidates[i].column[cell_of]) < ALIAS_ALPHA / len(chains))
    terms = [candidates[j] for j in sorted(chosen)]
    x = np.column_stack([base, *(t.column[cell_of] for t in terms)])
    cell_rows = np.column_stack([*mains.values(), *(t.column for t in terms)])
    return _fitted(y, x, weights, len(blocks), [(m.combination, m.block) for m in rows], cell_rows, terms,
                   baseline, keys, known, set(screened), active)


def _candidates(mains: Mapping[tuple[str, str], np.ndarray], seen: np.ndarray,
                names: Mapping[tuple[str, str], str]) -> list[_Term]:
    """Every pair term the screened cells can estimate: pairs of techniques from different dimensions whose four
    on/off combinations were screened (`effects.crossed_pairs`), aliased ones joined in chains."""
    on_seen = {t: col[seen] for t, col in mains.items()}
    clear = np.column_stack([np.ones(len(seen)), *on_seen.values()])
    found: list[tuple[list[str], list[np.ndarray]]] = []
    for t1, t2 in crossed_pairs(on_seen):
        a, b = mains[t1], mains[t2]
        pair = (a - a[seen].mean()) * (b - b[seen].mean())  # centred on the screened cells, each once
        name = f"{names[t1]} x {names[t2]}"
        if not _in_span(np.column_stack([clear, *(v[0][seen] for _, v in found)]), pair[seen]):
            found.append(([name], [pair]))
            continue
        for members, values in found:  # aliased: with which term, up to sign, once the main effects are out
            sign = _collinear(clear, values[0][seen], pair[seen])
            if sign:
                members.append(name)
                values.append(sign * pair)
                break
        # else in the span but no one term's alias (a fraction that is no regular one): not estimable
    return [_Term(tuple(members), np.column_stack(values)) for members, values in found]


def _in_span(x: np.ndarray, v: np.ndarray) -> bool:
    coef, *_ = np.linalg.lstsq(x, v, rcond=None)
    return bool(np.linalg.norm(x @ coef - v) <= TOL * max(1.0, float(np.linalg.norm(v))))


def _collinear(base: np.ndarray, u: np.ndarray, v: np.ndarray) -> int:
    """+1 or -1 when u and v, with `base`'s span taken out of each, are equal or opposite; else 0."""
    ru = u - base @ np.linalg.lstsq(base, u, rcond=None)[0]
    rv = v - base @ np.linalg.lstsq(base, v, rcond=None)[0]
    nu, nv = np.linalg.norm(ru), np.linalg.norm(rv)
    if nu <= TOL or nv <= TOL:
        return 0
    cos = float(ru @ rv / (nu * nv))
    return 1 if cos > 1 - 1e-6 else -1 if cos < -1 + 1e-6 else 0


def _p_value(y: np.ndarray, weights: np.ndarray, base: np.ndarray, others: list[np.ndarray],
             column: np.ndarray) -> float:
    """The two-sided p-value of `column`'s coefficient in the weighted fit of `base`, `others` and it: a t test
    on its HC3 standard error (1 where there is none)."""
    import statsmodels.api as sm

    x = np.column_stack([base, *others, column])
    if len(y) - x.shape[1] < 1 or np.linalg.matrix_rank(x) < x.shape[1]:
        return 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a row of leverage 1 leaves HC3 undefined: a nan p-value, taken as 1
        p = float(np.asarray(sm.WLS(y, x, weights=weights).fit(cov_type="HC3", use_t=True).pvalues)[-1])
    return p if math.isfinite(p) else 1.0


def _forward(y: np.ndarray, weights: np.ndarray, base: np.ndarray, columns: list[np.ndarray], room: int) -> list[int]:
    """Forward selection of pair terms: the most significant candidate enters while its p-value is under
    PAIR_ALPHA / candidates, at most `room` of them."""
    chosen: list[int] = []
    while len(chosen) < room:
        pool = [j for j in range(len(columns)) if j not in chosen]
        scored = [(_p_value(y, weights, base, [columns[i] for i in chosen], columns[j]), j) for j in pool]
        if not scored or min(scored)[0] >= PAIR_ALPHA / len(columns):
            break
        chosen.append(min(scored)[1])
    return chosen


def _fitted(y: np.ndarray, x: np.ndarray, weights: np.ndarray, n_blocks: int, groups: list[tuple[Key, int]],
            cell_rows: np.ndarray, terms: list[_Term], baseline: Key, keys: list[Key], known: list[Key],
            screened: set[Key], active: tuple[str, ...]) -> Fit[Key]:
    """The weighted fit with HC3 standard errors, and every known cell's prediction."""
    import statsmodels.api as sm

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # HC3 divides by 1 - leverage: a row the fit passes through is checked below
        result = sm.WLS(y, x, weights=weights).fit(cov_type="HC3")
    cov = np.asarray(result.cov_params(), dtype=float)[n_blocks:, n_blocks:]
    if not np.all(np.isfinite(cov)):  # a row of leverage 1 leaves HC3 undefined: the model's variance
        cov = np.asarray(sm.WLS(y, x, weights=weights).fit().cov_params(), dtype=float)[n_blocks:, n_blocks:]
    df = int(round(result.df_resid))
    n_mains = cell_rows.shape[1] - len(terms)
    out: Fit[Key] = Fit(predictions={}, df=df, lack_of_fit_p=_lack_of_fit(y, np.asarray(result.fittedvalues),
                                                                           weights, groups, df),
                        active_aliases=active, unscreened=any(k not in screened for k in known), baseline=baseline,
                        pairs=tuple(" = ".join(t.members) for t in terms),
                        _index={k: keys.index(k) for k in known}, _rows=cell_rows,
                        _cov=cov, _coef=np.asarray(result.params, dtype=float)[n_blocks:],
                        _terms=tuple((n_mains + i, t) for i, t in enumerate(terms)))
    predictions = {}
    for k in known:
        log, se = out.contrast(k, baseline)
        predictions[k] = CellPrediction(log, se, df, k in screened)
    object.__setattr__(out, "predictions", predictions)  # they are the fit's own contrasts
    return out


def _lack_of_fit(y: np.ndarray, fitted: np.ndarray, weights: np.ndarray, groups: list[tuple[Key, int]],
                 df: int) -> float | None:
    """The F test of the weighted residual's spread beyond the pure error of replicates (a cell measured twice in
    one block: the baselines); None without pure error or without degrees of freedom beyond it."""
    by: dict[tuple[Key, int], list[int]] = {}
    for i, g in enumerate(groups):
        by.setdefault(g, []).append(i)
    pure = sum(float(weights[ix] @ (y[ix] - np.average(y[ix], weights=weights[ix])) ** 2)
               for ix in map(np.array, by.values()) if len(ix) > 1)
    df_pure = sum(len(ix) - 1 for ix in by.values())
    df_lack = df - df_pure
    if df_pure < 1 or df_lack < 1 or pure <= 0:
        return None
    lack = float(weights @ (y - fitted) ** 2) - pure
    return float(stats.f.sf(max(lack, 0.0) / df_lack / (pure / df_pure), df_lack, df_pure))


def race_field(found: Fit[Key], k: int, alpha: float) -> list[Key]:
    """The race's opening field from the model: the predicted best and every cell not told apart from it (the
    studentized range over the predicted cells at `alpha`, one-sided, as `racing._screened_apart` judges
    measured estimates, on the model's contrast), best first, at most k; never the baseline."""
    ranked = sorted((c for c in found.predictions if c != found.baseline),
                    key=lambda c: (-found.predictions[c].log, str(c)))
    if not ranked or k < 1:
        return []
    best, n = ranked[0], max(2, len(found.predictions))
    opening = [best]
    for c in ranked[1:]:
        if len(opening) >= k:
            break
        diff, se = found.contrast(best, c)
        if not beyond_range(diff, se, max(1, found.df), alpha, n):
            opening.append(c)
    return opening
