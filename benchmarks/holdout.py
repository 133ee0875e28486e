"""The screening model held out on a grid measured in full: fit on half the cells, predict the other half (issue 47).

    python -m benchmarks.holdout --from RESULTS_DIR [--study mnist_cnn] [--json out.json]

Screening measures a resolution IV fraction of the grid and the screening model (`ablate.stats.screening.factorial`)
speaks for the rest; its own tests prove it by simulation. This checks it on measurements: a stored study's cells are
split as the study's fraction would split them (`ablate.stats.screening.fractioned`), the model is fitted on one half's
screening measurements only (their blocks, their baselines), as screening would fit it, and each cell of the other half
is predicted and set against its measured log speed-up over the baseline. Both ways round where both halves were
screened: the fraction fitted and the complement held out ("fraction"), and the complement (with the baseline)
fitted and the fraction held out ("complement"). A run that screened the fraction alone holds out the cells its race
and confirmation blocks measured: predicted at screening, measured after.

Two coverages, since a held-out cell's measured value is itself one or a few processes:
- **printed**: the prediction's interval as the race reads it (t on the fit's df at `CONFIDENCE`), which is what
  a user sees beside an unmeasured cell; it bounds the cell's true speed-up, not one measurement of it, so
  against a measurement it should cover less than 95%.
- **predictive**: the interval for the measurement itself: the prediction's variance plus the measured estimate's
  own (`ablate.stats.protocol.estimates`, its noise model named per cell), Welch-Satterthwaite df. Where the
  measurements hold no variance of one process (a single pass: one block, one baseline, every cell once), the
  process variance is the fitted half's residual mean square (unweighted, as the fit is without a variance model:
  lack of fit included), times (1 + 1/n) for a cell less the mean of its block's n baselines ("residual").

Beside them: Spearman's rank correlation of the held-out cells' predictions and measurements, and whether the
measured best held-out cell is in the model's race field (`factorial.race_field` at the protocol's contenders and
`SCREEN_ALPHA`, over every cell, as racing opens it). Coverage is x of n with a Clopper-Pearson interval; in a
single pass every held-out value shares the one baseline process, so the n cells are not n independent trials.
"""
from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Mapping, Sequence

from scipy import stats

from ablate.config.choices import BASELINE, Levels
from ablate.stats import variance
from ablate.stats.contrasts import SCREEN_ALPHA
from ablate.stats.protocol import CONFIDENCE, SCREEN, Estimate, Measurement, estimates
from ablate.stats.screening import factorial, fraction, fractioned

SPLITS = ("fraction", "complement")  # which half is fitted


@dataclass(frozen=True)
class Row:
    """One held-out cell: the model's word on it and the measurement's."""

    cell: str
    predicted: float  # log speed-up over the baseline
    se: float
    df: int
    printed: tuple[float, float]  # the prediction's interval, log scale
    observed: float  # the measured log speed-up (`protocol.estimates`)
    observed_se: float
    noise: str  # where the measurement's variance came from: its estimate's noise model, or "residual"
    predictive: tuple[float, float]  # the interval for the measurement, log scale

    @property
    def z(self) -> float:
        spread = math.hypot(self.se, self.observed_se)
        return (self.observed - self.predicted) / spread if spread > 0 else 0.0

    @property
    def in_printed(self) -> bool:
        return bool(self.printed[0] <= self.observed <= self.printed[1])

    @property
    def in_predictive(self) -> bool:
        return bool(self.predictive[0] <= self.observed <= self.predictive[1])


@dataclass(frozen=True)
class Holdout:
    """One split's comparison: the held-out rows and what the fit said of them together."""

    split: str
    fitted_cells: int
    rows: tuple[Row, ...]
    pairs: tuple[str, ...]  # the pair terms the fit took
    df: int
    field: tuple[str, ...]  # the model's race field, best first
    best: str | None  # the measured best held-out cell

    @property
    def best_in_field(self) -> bool | None:
        return None if self.best is None else self.best in self.field

    @property
    def spearman(self) -> float | None:
        if len(self.rows) < 3:
            return None
        rho = stats.spearmanr([r.predicted for r in self.rows], [r.observed for r in self.rows]).statistic
        return float(rho) if math.isfinite(rho) else None

    def coverage(self, which: str) -> tuple[int, int, float, float]:
        """x of n held-out measurements inside the `which` ("printed" or "predictive") intervals, with x/n's
        Clopper-Pearson interval."""
        x = sum(r.in_printed if which == "printed" else r.in_predictive for r in self.rows)
        return (x, len(self.rows), *clopper_pearson(x, len(self.rows)))


def clopper_pearson(x: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The exact binomial interval for x successes of n (Clopper & Pearson 1934)."""
    if n == 0:
        return 0.0, 1.0
    tail = (1 - confidence) / 2
    low = float(stats.beta.ppf(tail, x, n - x + 1)) if x > 0 else 0.0
    high = float(stats.beta.ppf(1 - tail, x + 1, n - x)) if x < n else 1.0
    return low, high


def halves(cells: Mapping[str, Levels], found: fraction.Fraction) -> dict[str, tuple[set[str], set[str]]]:
    """Each split's (fitted, held-out) labels: the fraction and its complement, the baseline always fitted (every
    prediction is a contrast with it) and never held out."""
    label = {levels: c for c, levels in cells.items()}
    part, rest = {label[lv] for lv in found.cells}, {label[lv] for lv in found.rest}
    return {"fraction": (part | {BASELINE}, rest - {BASELINE}), "complement": (rest | {BASELINE}, part - {BASELINE})}


def _residual_variance(found: factorial.Fit[str], used: Sequence[Measurement[str]]) -> float | None:
    """The fitted measurements' residual mean square about the fit: each block's intercept is the mean of its
    measurements less their cells' predictions (the least-squares intercept of an unweighted fit)."""
    by: dict[int, list[float]] = {}
    for m in used:
        by.setdefault(m.block, []).append(m.log_throughput - found.predictions[m.combination].log)
    rss = sum((z - statistics.fmean(zs)) ** 2 for zs in by.values() for z in zs)
    return rss / found.df if found.df > 0 else None


def _baselines(measurements: Sequence[Measurement[str]], cell: str) -> float:
    """The variance of a cell's measured estimate in units of one process's: the mean over its k blocks of (its
    process less the mean of the block's n baselines), sum of (1 + 1/n) over k squared."""
    blocks = {m.block for m in measurements if m.combination == cell}
    n = {b: sum(m.combination == BASELINE and m.block == b for m in measurements) for b in blocks}
    return sum(1 + 1 / n[b] for b in blocks if n[b]) / max(1, len(blocks)) ** 2


def hold_out(split: str, measurements: Sequence[Measurement[str]], cells: Mapping[str, Levels],
             found: fraction.Fraction | None, fitted: set[str], held: set[str], contenders: int) -> Holdout | None:
    """The model fitted to the screening measurements of `fitted` cells (in the blocks that screened them) against
    the measured estimates of the `held` cells; None where the fitted half was not screened or is too small."""
    screen = [m for m in measurements if m.phase == SCREEN]
    blocks = {m.block for m in screen if m.combination in fitted and m.combination != BASELINE}
    used = [m for m in screen if m.block in blocks and m.combination in fitted]
    fit = factorial.fit(used, BASELINE, cells, found)
    if fit is None:
        return None
    measured = estimates(measurements, BASELINE)  # a held-out cell's from its own blocks; the noise from them all
    process = _residual_variance(fit, used)
    rows = []
    for c in sorted(held & set(measured) & set(fit.predictions)):
        p, e = fit.predictions[c], measured[c]
        if e.se is not None:
            obs_var, obs_df, noise = e.se ** 2, e.df, e.noise
        elif process is not None:
            obs_var, obs_df, noise = process * _baselines(measurements, c), fit.df, "residual"
        else:
            continue
        printed = Estimate(p.log, p.se, p.df, 0, SCREEN, "model").interval()
        assert printed is not None  # the model's se is a number
        df = variance.satterthwaite([(p.se ** 2, p.df), (obs_var, obs_df)])
        half = float(stats.t.ppf(0.5 + CONFIDENCE / 2, df)) * math.sqrt(p.se ** 2 + obs_var)
        rows.append(Row(c, p.log, p.se, p.df, (float(printed[0]), float(printed[1])), e.log, math.sqrt(obs_var),
                        noise, (p.log - half, p.log + half)))
    field = tuple(factorial.race_field(fit, max(1, contenders), SCREEN_ALPHA))
    best = max(rows, key=lambda r: r.observed).cell if rows else None
    return Holdout(split, len(fitted & {m.combination for m in used}), tuple(rows), fit.pairs, fit.df, field, best)


def from_results(source: Path, study_name: str) -> tuple[str, list[Holdout | str]]:
    """Every split a results folder's stored study allows (a split it does not: a line saying why), and a line
    naming the fraction. The storage is copied to a temporary folder first: nothing is written to `source`."""
    import optuna

    from ablate.config import study as study_file
    from ablate.stats.answer.comparison import followed
    from ablate.stats.speedups import protocol_measurements
    from ablate.store import records, study_record
    from benchmarks.conclusion_cost import stored_study

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    name = Path(study_name).stem
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / name).mkdir()
        shutil.copyfile(source / name / "optuna.db", Path(tmp) / name / "optuna.db")
        optuna_study = stored_study(Path(tmp), study_name, shown=source)
        stored, kept = records.load(optuna_study), study_record.from_study(optuna_study)
    devices = records.by_device(stored)
    if len(devices) != 1:
        raise SystemExit(f"{source}: one device's records expected, found {sorted(devices)}")
    device, mine = next(iter(devices.items()))
    study = study_file.load(study_name, "cuda" if device.startswith("cuda") else "cpu")
    screened = fractioned.of(study, mine)
    if screened is None:
        raise SystemExit(f"{source}: its screening measured no fraction of the grid, nor the whole grid")
    measurements = protocol_measurements(mine)
    contenders = followed(study, kept).contenders
    found: list[Holdout | str] = []
    for split, (fitted, held) in halves(screened.cells, screened.fraction).items():
        result = hold_out(split, measurements, screened.cells, screened.fraction, fitted, held, contenders)
        found.append(result if result is not None else f"{split}: not fitted (that half was never screened)")
    return f"{study_name} on {device}: {screened.fraction.describe()}", found


def _x(log: float) -> str:
    return f"x{math.exp(log):.3f}"


def print_table(found: Holdout) -> None:
    print(f"\nfitted: the {found.split} ({found.fitted_cells} cells, residual df {found.df}, pairs: "
          f"{', '.join(found.pairs) or 'none'}); held out: {len(found.rows)} measured cells")
    print("| cell | predicted | printed interval | predictive interval | observed | its noise | z |\n"
          "|---|---:|---:|---:|---:|---|---:|")
    for r in sorted(found.rows, key=lambda r: -r.observed):
        print(f"| {r.cell} | {_x(r.predicted)} | {_x(r.printed[0])}-{_x(r.printed[1])}"
              f"{'' if r.in_printed else ' (out)'} | {_x(r.predictive[0])}-{_x(r.predictive[1])}"
              f"{'' if r.in_predictive else ' (out)'} | {_x(r.observed)} | {r.noise} | {r.z:+.2f} |")
    for which in ("printed", "predictive"):
        x, n, low, high = found.coverage(which)
        print(f"coverage, {which}: {x} of {n} (Clopper-Pearson {100 * low:.0f}-{100 * high:.0f}%)")
    rho = found.spearman
    print(f"Spearman of held-out predicted vs observed: {'n/a' if rho is None else f'{rho:.2f}'}; measured best "
          f"held-out cell {found.best!r} {'is' if found.best_in_field else 'is not'} in the model's race field "
          f"({len(found.field)}: {', '.join(found.field)})")


def as_json(title: str, found: list[Holdout | str]) -> dict:
    out: dict = {"title": title, "splits": []}
    for h in found:
        if isinstance(h, str):
            out["splits"].append({"skipped": h})
            continue
        out["splits"].append({**asdict(h), "rows": [{**asdict(r), "z": r.z, "in_printed": r.in_printed,
                                                     "in_predictive": r.in_predictive} for r in h.rows],
                              "coverage": {w: h.coverage(w) for w in ("printed", "predictive")},
                              "spearman": h.spearman, "best_in_field": h.best_in_field})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.holdout", description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="source", type=Path, required=True, help="a results folder (read only)")
    parser.add_argument("--study", default="mnist_cnn")
    parser.add_argument("--json", type=Path, help="write the comparison here too")
    args = parser.parse_args(argv)
    stored = args.source / Path(args.study).stem / "optuna.db"
    if not stored.is_file():
        parser.error(f"--from {args.source}: no stored study of {Path(args.study).stem} there (looked for {stored}); "
                     "give the results folder of a run, as `ablate run --results` wrote it")
    title, found = from_results(args.source, args.study)
    print(title)
    print("every observed value is a measurement: one or a few processes, their noise in it (the predictive "
          "interval counts it; 'residual': no process variance was measured, the fitted half's residual mean "
          "square stands in, and a single pass's held-out values share its one baseline process)")
    for h in found:
        if isinstance(h, str):
            print(f"\n{h}")
        else:
            print_table(h)
    if args.json:
        args.json.write_text(json.dumps(as_json(title, found), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
