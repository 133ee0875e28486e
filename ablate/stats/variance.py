"""Process noise per combination: a variance model by technique, and a test of equal spreads.

Why: combinations are not equally noisy from one process to the next (bf16
ones the most), so one pooled variance gives a noisy combination screened once
too narrow an interval and a quiet one too wide (docs/evidence.md, "Evidence:
noise per combination").

The model: a process's log-throughput variance is multiplicative in the
techniques switched on, log(sigma^2) = b0 + sum of b_t over its techniques,
fitted by maximum likelihood to every variance the study measured: a sample
variance with df degrees of freedom is sigma^2 chi^2_df / df, a Gamma
variable, so the fit is a Gamma GLM with a log link weighted by df
(statsmodels). The sources are the baselines' spread within blocks (no
technique) and the spread of each combination measured in several blocks.
A technique that never varies among the sources gets no coefficient (the
data say nothing about it), nor does one whose term the data do not show
(backward elimination by Wald tests), and with too few sources the model is
one pooled variance, which is what the intercept alone estimates.
"""
from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

import numpy as np
from scipy import stats

SOURCES_PER_PARAMETER = 2  # fewer sources than this per coefficient: the techniques' terms are not fitted
SPREADS_ALPHA = 0.05  # Levene's test: the raced combinations' spreads differ
TERM_ALPHA = 0.05  # a technique's variance term is kept only where its Wald test rejects "no effect" at this level


@dataclass(frozen=True)
class Source:
    """One measured variance of a process's log throughput."""

    techniques: frozenset[str]
    variance: float
    df: int


@dataclass(frozen=True)
class Model:
    """sigma^2(techniques) = exp(intercept + sum of the techniques' coefficients), within the measured range."""

    intercept: float
    coefficients: Mapping[str, float]
    df: int  # the sources' degrees of freedom, less the extra coefficients
    low: float  # the smallest and largest measured variances: the model does not extrapolate beyond them
    high: float
    covariance: tuple[tuple[float, ...], ...] = ()  # of (intercept, *coefficients); () for a pooled variance

    @property
    def by_technique(self) -> bool:
        return bool(self.coefficients)

    def _row(self, techniques: Iterable[str]) -> list[float]:
        on = set(techniques)
        return [1.0] + [float(t in on) for t in self.coefficients]

    def variance(self, techniques: Iterable[str]) -> float:
        log = self.intercept + sum(self.coefficients.get(t, 0.0) for t in techniques)
        return min(max(math.exp(log), self.low), self.high)

    def df_for(self, techniques: Iterable[str]) -> int:
        """Degrees of freedom of the predicted variance for `techniques`: a sample variance with df degrees of
        freedom has var(log s^2) = 2 / df, so 2 / var(predicted log variance). A prediction for techniques few
        sources measured rests on those few, not on every source of the study."""
        if not self.covariance:
            return self.df
        row = np.array(self._row(techniques))
        var = float(row @ np.array(self.covariance) @ row)
        return self.df if var <= 0 else max(1, min(self.df, int(2 / var)))


def moderated(prior: tuple[float, int], own: tuple[float, int], alpha: float,
              most: int) -> tuple[float, int, bool]:
    """A combination's variance from the model's prediction for it (`prior`: s0^2 on d0 degrees of freedom) and its
    own sample variance (`own`: s^2 on d), as an empirical-Bayes posterior (the moderated variance of Smyth 2004,
    Stat. Appl. Genet. Mol. Biol. 3(1), the idea behind limma): (d0 s0^2 + d s^2) / (d0 + d) on d0 + d degrees of
    freedom, with d0 at most `most`; and False. Where an F test at `alpha` (on the prior's full d0) says its own
    variance is larger than the prior allows, its own alone on its d, and True. Both guard against a combination
    noisier than the model can say (a two-level process, `ablate.stats.protocol`): the model's many degrees of
    freedom would otherwise hold it to the model's word."""
    (s0, d0), (s, d) = prior, own
    if d <= 0:
        return s0, d0, False
    if d0 <= 0 or s > s0 * noisier_quantile(d, d0, alpha):
        return s, d, True
    weight = min(d0, most)
    return (weight * s0 + d * s) / (weight + d), weight + d, False


@functools.lru_cache(maxsize=4096)
def noisier_quantile(df_own: int, df_model: int, alpha: float) -> float:
    """The F quantile above which an own variance (`df_own`) is noisier than the model's (`df_model`) at `alpha`:
    the one test of "noisier than the model", for an estimate's moderated variance (`moderated`) and a race pair's
    spread (`ablate.stats.contrasts.paired`). Cached: the race recomputes every estimate at each of its steps."""
    return float(stats.f.ppf(1 - alpha, df_own, df_model))


def satterthwaite(parts: Sequence[tuple[float, int]]) -> int:
    """Degrees of freedom of a sum of independent variance estimates, each (variance, its df) (Welch-Satterthwaite)."""
    total = sum(v for v, _ in parts)
    spread = sum(v * v / max(1, d) for v, d in parts)
    return max(1, int(total * total / spread)) if spread > 0 else max(1, min(d for _, d in parts))


def of_difference(a: tuple[float, int], b: tuple[float, int]) -> tuple[float, int]:
    """The variance of a difference of two independent processes, each (variance, its df), with its
    Welch-Satterthwaite df."""
    return a[0] + b[0], satterthwaite([a, b])


def pooled(sources: Sequence[Source]) -> Model | None:
    df = sum(s.df for s in sources)
    if not df:
        return None
    var = sum(s.variance * s.df for s in sources) / df
    return Model(math.log(var) if var > 0 else -math.inf, {}, df, var, var)


def fit(sources: Sequence[Source]) -> Model | None:
    """The variance model from the measured variances; None with no degrees of freedom at all."""
    sources = [s for s in sources if s.df > 0]
    base = pooled(sources)
    if base is None or not all(s.variance > 0 for s in sources):
        return base
    seen = sorted({t for s in sources for t in s.techniques})
    columns = [t for t in seen if any(t not in s.techniques for s in sources)]  # varies among the sources
    if not columns or len(sources) < SOURCES_PER_PARAMETER * (len(columns) + 1):
        return base
    import statsmodels.api as sm

    y = np.array([s.variance for s in sources])
    # Backward elimination: a technique keeps its term only while the data show it (Wald test at TERM_ALPHA).
    # A term fitted on a few sources by chance extrapolates to combinations no source measured: a screened
    # combination of two such techniques got a third of its true standard error (docs/evidence.md, "Evidence:
    # noise per combination").
    while columns:
        x = np.array([[1.0] + [float(t in s.techniques) for t in columns] for s in sources])
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # convergence chatter on small fits: checked below
                result = sm.GLM(y, x, family=sm.families.Gamma(sm.families.links.Log()),
                                var_weights=np.array([float(s.df) for s in sources])).fit()
        except (ValueError, np.linalg.LinAlgError):
            return base
        params, p = np.asarray(result.params, dtype=float), np.asarray(result.pvalues, dtype=float)[1:]
        if not np.all(np.isfinite(params)) or not np.all(np.isfinite(p)):
            return base
        if p.max() <= TERM_ALPHA:
            df = max(1, base.df - len(columns))
            # Sample variances have dispersion 2 (var(s^2) = 2 sigma^4 / df); a fit whose residuals look tighter
            # than that is lucky, not precise.
            cov = np.asarray(result.cov_params(), dtype=float) * max(1.0, 2.0 / float(result.scale))
            return Model(float(params[0]), dict(zip(columns, map(float, params[1:]))), df, float(y.min()),
                         float(y.max()), tuple(map(tuple, cov.tolist())))
        columns = [c for i, c in enumerate(columns) if i != int(p.argmax())]
    return base


def spreads_differ(samples: Mapping[object, Sequence[float]]) -> float | None:
    """Levene's test (median-centred: robust to outliers) that the samples' spreads are equal: its p-value, or
    None when fewer than two samples have three values."""
    usable = [list(v) for v in samples.values() if len(v) >= 3]
    if len(usable) < 2 or all(np.ptp(v) == 0 for v in usable):
        return None
    return float(stats.levene(*usable, center="median").pvalue)
