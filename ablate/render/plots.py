"""The report's figures (matplotlib, PNG): each readable on its own, with a title and axis labels that say what is
shown."""
from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; no display on build machines or servers
import matplotlib.pyplot as plt
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from ablate.stats.answer.comparison import Comparison, DeviceComparisons
from ablate.stats.answer.explained import Explanation
from ablate.stats.screening.effects import EffectFit
from ablate.trial import metrics as metric

FACTOR_TICKS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1, 1.1, 1.25, 1.5, 1.75, 2, 2.5, 3, 4, 5, 7, 10, 20, 50)
GOOD, FLAGGED, NOISE, PICK = "tab:blue", "tab:red", "tab:gray", "tab:green"
# One colour per step phase, the same in every study's picture (tab10, none of them the picture's PICK).
PHASE_COLOURS = {"data": "tab:orange", "copy": "tab:brown", "forward": "tab:blue", "backward": "tab:cyan",
                 "optimizer": "tab:purple", "other": "tab:gray"}
PHASE_LEGEND = {"data": "data: waiting for a batch", "copy": "copy to the device", "forward": "forward",
                "backward": "backward", "optimizer": "optimizer step", "other": "other: the loop's bookkeeping"}


def speedup_chart(path: Path, compared: DeviceComparisons, picked: int | None, title: str) -> Path:
    rows = [c for c in compared.rows if c.interval][::-1]  # fastest at the top
    fig, ax = plt.subplots(figsize=(11, 1.6 + 0.27 * len(rows)))
    for y, c in enumerate(rows):
        f = c.interval
        assert f is not None  # rows keeps only those with an interval
        color = PICK if c.record.number == picked else FLAGGED if c.parity_failed else GOOD
        ax.errorbar(f.point, y, xerr=[[f.point - f.low], [f.high - f.point]], fmt="o", color=color,
                    ecolor=color, capsize=3, markersize=4)
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_yticks(range(len(rows)), [c.combination for c in rows], fontsize=7)
    _factor_axis(ax)
    ax.set_xlabel("speed-up over the baseline (throughput ratio, log scale), "
                  "95% CI from the blocks (between-process noise)")
    ax.set_title(f"{title}\ngreen: recommended; red: accuracy below the baseline by more than the tolerance, or "
                 "probably so", fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    return _save(fig, path)


def effects_chart(path: Path, throughput: EffectFit | str, accuracy: EffectFit | str, title: str) -> Path:
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 1.8 + 0.3 * max(_rows(throughput), _rows(accuracy))))
    _forest(left, throughput, log=True, xlabel="throughput factor when switched on (log scale), 95% CI")
    _forest(right, accuracy, log=False, xlabel="test accuracy change, percentage points, 95% CI")
    left.set_title("effect on throughput", fontsize=10)
    right.set_title("effect on accuracy", fontsize=10)
    fits = [f for f in (throughput, accuracy) if isinstance(f, EffectFit)]
    shown = ("main effects (circles) and two-way interactions (a x b, squares)"
             if any(f.pairs() for f in fits) else "main effects of each technique")
    fig.suptitle(f"{title}\n{shown}; grey: not distinguishable from noise", fontsize=10)
    return _save(fig, path)


def _rows(fit: EffectFit | str) -> int:
    return len(fit.effects) if isinstance(fit, EffectFit) else 1


def _forest(ax: plt.Axes, fit: EffectFit | str, log: bool, xlabel: str) -> None:
    if isinstance(fit, str):
        ax.text(0.5, 0.5, "not estimated:\n" + textwrap.fill(fit, 60), ha="center", va="center", fontsize=9)
        ax.set_axis_off()
        return
    effects = fit.effects[::-1]
    for y, e in enumerate(effects):
        i = e.interval.exp() if log else e.interval
        color = GOOD if e.interval.distinguishable else NOISE
        ax.errorbar(i.point, y, xerr=[[i.point - i.low], [i.high - i.point]],
                    fmt="s" if e.interaction else "o", color=color, ecolor=color, capsize=3, markersize=4)
    ax.axvline(1.0 if log else 0.0, color="black", linewidth=0.8)
    ax.set_yticks(range(len(effects)), [e.term for e in effects], fontsize=7)
    if log:
        _factor_axis(ax)
    ax.set_xlabel(xlabel, fontsize=8)
    ax.grid(axis="x", alpha=0.3)


def pareto_chart(path: Path, compared: DeviceComparisons, picked: int | None, title: str,
                 unit: str = "samples") -> Path:
    done = [c for c in compared.rows if c.record.complete and c.record.accuracy is not None and c.throughput]
    fig, ax = plt.subplots(figsize=(10, 6.5))
    if not done:
        ax.text(0.5, 0.5, "accuracy was not measured: no throughput-accuracy trade-off to show",
                ha="center", va="center", fontsize=11)
        ax.set_axis_off()
        ax.set_title(title, fontsize=10)
        return _save(fig, path)
    tolerance, front, base = compared.tolerance, compared.front, compared.baseline
    ok = [c for c in done if not c.parity_failed]
    bad = [c for c in done if c.parity_failed]
    ax.scatter(*_xy(ok), color=GOOD, s=18, label="combination")
    if bad:
        ax.scatter(*_xy(bad), color=FLAGGED, marker="x", s=30,
                   label=f"below baseline by more than {tolerance:g} points, or probably so")
    if front:
        line = sorted(front, key=lambda c: c.trade_off[0])
        ax.plot(*_xy(line), color="black", linewidth=1,
                label="Pareto front (no other combination is both faster and more accurate)")
        middle = sum(ax.get_xlim()) / 2
        for c in front:  # labels point inwards so they stay inside the axes
            right = c.trade_off[0] > middle
            ax.annotate(c.combination, c.trade_off, fontsize=7, xytext=(-6 if right else 6, 6),
                        textcoords="offset points", ha="right" if right else "left")
    if base is not None and base.record.accuracy is not None:
        ax.scatter(*_xy([base]), color="black", marker="D", s=40, label="baseline", zorder=3)
        ax.axhline(base.record.accuracy - tolerance, color=FLAGGED, linestyle="--", linewidth=0.8,
                   label=f"accuracy tolerance ({tolerance:g} points)")
    chosen = next((c for c in done if c.record.number == picked), None)
    if chosen:
        ax.scatter(*_xy([chosen]), color=PICK, marker="*", s=200, label="recommended", zorder=4)
    ax.set_xlabel(f"training throughput, {unit}/s (the baseline's times the speed-up)")
    ax.set_ylabel("test accuracy, %")
    ax.set_title(f"{title}\nthroughput against accuracy", fontsize=10)
    ax.grid(alpha=0.3)
    # Below the axes, never over a point (the below-tolerance ones sit in the lower corners).
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=2, frameon=False)
    return _save(fig, path)


def phases_chart(path: Path, explanation: Explanation, picked: str | None, title: str) -> Path:
    """Each profiled combination's step per sample as a horizontal bar split into its phases, the baseline's on top
    (`picked`: the recommended combination, its label in green). Per sample, so that a bigger batch's longer step
    compares; in the unit that keeps the longest bar's figure readable."""
    # barh draws from the bottom up: reversed, the baseline (first) is the top bar.
    bars = [(c.combination, p) for c in explanation.profiled[::-1] if (p := c.profile) is not None]
    longest = max(sum(p.per_sample(phase) for phase in metric.STEP_PHASES) for _, p in bars)
    scale, unit = next((s, u) for s, u in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")) if longest >= s or u == "µs")
    fig, ax = plt.subplots(figsize=(11, 1.6 + 0.27 * len(bars)))
    left = [0.0] * len(bars)
    for phase in metric.STEP_PHASES:
        widths = [p.per_sample(phase) / scale for _, p in bars]
        ax.barh(range(len(bars)), widths, left=left, height=0.7, color=PHASE_COLOURS[phase],
                label=PHASE_LEGEND[phase])
        left = [a + b for a, b in zip(left, widths, strict=True)]
    if explanation.baseline is not None:
        ax.axvline(left[-1], color="black", linewidth=0.8, linestyle="--")  # the baseline's whole step per sample
    ax.set_yticks(range(len(bars)), [name for name, _ in bars], fontsize=7)
    for label, (name, _) in zip(ax.get_yticklabels(), bars, strict=True):
        if name == picked:
            label.set_color(PICK)
            label.set_fontweight("bold")
    ax.set_ylim(-0.6, len(bars) - 0.4)
    ax.set_xlabel(f"{unit} per sample of the profiled step (after the timed windows)"
                  + ("; dashed: the baseline's" if explanation.baseline is not None else ""))
    ax.set_title(f"{title}\nwhere each combination's step goes, phase by phase; top: the baseline"
                 + (", green: recommended" if picked else ""), fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    # Beside the axes, top-aligned: never over a bar, the same place for 2 bars or 48.
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, title="phase",
              title_fontsize=8)
    return _save(fig, path)


def _xy(rows: Sequence[Comparison]) -> tuple[list[float], list[float]]:
    """The rows' throughputs and accuracies, for rows that have both."""
    return [c.trade_off[0] for c in rows], [c.trade_off[1] for c in rows]


def _factor_axis(ax: plt.Axes) -> None:
    """A log axis labelled x0.8, x1, x1.25 rather than in powers of ten, its ticks spaced so labels never touch."""
    ax.set_xscale("log")
    low, high = ax.get_xlim()
    ax.xaxis.set_major_locator(FixedLocator(_spaced([f for f in FACTOR_TICKS if low <= f <= high], low, high)))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"x{v:g}"))
    ax.tick_params(axis="x", labelsize=7)


def _spaced(ticks: list[float], low: float, high: float, most: int = 10) -> list[float]:
    """`ticks`, thinned outwards from x1 so that neighbours are at least 1/`most` of the (log) axis apart."""
    gap = math.log(high / low) / most
    if high / low > 10:  # over a decade, the 1-2-5 ticks read best
        ticks = [t for t in ticks if f"{t:g}".strip("0.") in ("1", "2", "5")]
    kept = [1.0] if low <= 1.0 <= high else []
    for side in (sorted(t for t in ticks if t > 1.0), sorted((t for t in ticks if t < 1.0), reverse=True)):
        last = 1.0 if kept else None
        for t in side:
            if last is None or abs(math.log(t / last)) >= gap:
                kept.append(t)
                last = t
    return sorted(kept)


def _save(fig: plt.Figure, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")  # long combination labels must not be cut off
    plt.close(fig)
    return path
