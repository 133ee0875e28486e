"""A change between two studies as `ablate compare` shows it: its sides, its rows in order and in words, change.json.

A change is two studies of one workload side by side (after a torch upgrade, on another machine, with a new model
version). `ablate.stats.changes` judges each row; `ablate.run.change` reads the two summary.json files into the
dataclasses below; this module, `change_table` (the terminal's) and `change_page` (the page and its picture) only
show them, and compute nothing (docs/contributing.md): every figure they print is in the data, a log shown as its
ratio.

What they show first is what an upgrade hides. A ratio of speed-ups is blind to a stack that got slower everywhere,
so the baselines' own throughput is the first row; the environments follow only where they differ, since the fields
that agree are most of them and say nothing; the verdicts are words with the figure they were read from, "no change
shown" always with how far the interval still allows, because it is not "same". The terminal keeps to 100 columns;
the page and the JSON carry every figure.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tabulate import tabulate

from ablate.config.choices import short_label
from ablate.stats.changes import (
    BASELINE_ABSOLUTE,
    MOVED,
    NOT_SHOWN,
    ONLY_A,
    ONLY_B,
    PREDICTED,
    SAME,
    Change,
    Side,
)
from ablate.trial import metrics as metric
from ablate.words import count, factor, percent

SCHEMA_VERSION = 1  # change.json's: raised when a field is removed, renamed or changes meaning
# Display order: what moved first, then what the studies cannot tell apart, then what they show the same; rows
# without a verdict of their own last. The baselines' absolute row precedes them all.
ORDER = (MOVED, NOT_SHOWN, SAME, PREDICTED, ONLY_A, ONLY_B)
ABSOLUTE_LABEL = "baseline throughput"  # the absolute row, as the table names it (one line: within 20 columns)


@dataclass(frozen=True)
class ComparedStudy:
    """One side as `ablate compare` read it."""

    label: str  # "A" or "B"
    source: str  # the summary.json path it was read from
    name: str  # the study's name
    device: str  # "cpu", "cuda:0"
    environment: Mapping[str, str]  # device name, host, python, torch, threads, cuda, cudnn, driver, gpu uuid, commit
    settings: Mapping[str, str]  # the study's parsed settings (model, dataset, task, budget, protocol ...)
    unit: str  # "samples/s" or "tokens/s"
    headline: str | None  # the recommended combination; None: none
    headline_speedup: tuple[float, float | None, float | None] | None  # x, low, high
    throughput: Mapping[str, float]  # combination -> its mean throughput, in `unit`
    parity: Mapping[str, str]  # combination -> its parity verdict ("ok", "below", "uncertain", "not needed", ...)
    baseline_phases: Mapping[str, float] | None  # the baseline's step: phase -> share; None: not profiled
    # combination -> its speed-up with the interval the study printed (x, low, high): the JSON's A and B intervals.
    speedups: Mapping[str, tuple[float, float | None, float | None]] = field(default_factory=dict)
    mlflow_run: str | None = None  # its parent run in MLflow, as its summary recorded it


@dataclass(frozen=True)
class StudyChange:
    """Two studies set side by side, row by row (`ablate.stats.changes.change`)."""

    a: ComparedStudy
    b: ComparedStudy
    rows: Sequence[Change]  # incl. the absolute-throughput row, `BASELINE_ABSOLUTE`
    margin: float  # "same": shown within +-margin (a fraction)
    alpha: float  # the family's level
    threshold: float | None  # --fail-above: a row moved beyond it makes the exit status non-zero
    beyond: Sequence[str]  # the rows moved beyond `threshold`
    paired_anyway: tuple[str, ...] = ()  # the workload settings that differ, compared because the user asked


def ordered(change: StudyChange) -> list[Change]:
    """The rows as every surface lists them: the baselines' absolute throughput first, then by verdict (`ORDER`),
    in the studies' own order within a verdict."""
    rank = {v: i for i, v in enumerate(ORDER)}
    return sorted(change.rows, key=lambda c: (c.row != BASELINE_ABSOLUTE, rank.get(c.verdict, len(ORDER))))


def verdict(c: Change, margin: float) -> str:
    """A row's verdict in words: `moved +12%`, `same (within +-5%)`, `no change shown (up to +-9%)`, ..."""
    if c.verdict == MOVED and c.ratio is not None:
        return f"moved {percent(c.ratio - 1, signed=True)}"
    if c.verdict == SAME:
        return f"same (within +-{100 * margin:g}%)"
    if c.verdict == NOT_SHOWN:
        return f"no change shown (up to +-{percent(c.bound)})" if c.bound is not None else \
            "no change shown (no interval)"
    return c.verdict


def side_by_side(left: Mapping[str, str], right: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """Each field of either side, in order, with both sides' values ("unknown" where a side lacks it)."""
    return [(k, left.get(k, "unknown"), right.get(k, "unknown")) for k in dict.fromkeys([*left, *right])]


def row_labels(rows: Sequence[Change]) -> list[str]:
    """The rows' names as the table and the picture show them: shortened as the results table shortens them."""
    labels = [ABSOLUTE_LABEL if c.row == BASELINE_ABSOLUTE else short_label(c.row) for c in rows]
    if len(set(labels)) < len(labels):  # shortening must never make two rows read the same
        labels = [ABSOLUTE_LABEL if c.row == BASELINE_ABSOLUTE else c.row for c in rows]
    return labels


def legend(change: StudyChange) -> str:
    """What the columns and the verdicts mean, at the change's margin and level."""
    family = sum(1 for c in change.rows if c.showable is not None)
    return ("A, B: each study's speed-up over its own baseline (~: a model's prediction for a combination a screened "
            "fraction never measured). B/A: B's over A's, with the interval its verdict was read from, at the "
            f"family's level over the {count(family, 'row')} both measured. The first row is the baselines' own "
            "throughput: below x1, B's baseline is slower, which the other rows' ratios do not show; it also carries "
            "the machine's own speed between the two sessions (its load, its clocks), which a speed-up cancels. "
            "moved: beyond "
            f"both studies' noise (Holm's step-down: at most a {change.alpha:.0%} chance that any row reads moved "
            f"when none moved); same: the interval lies within +-{100 * change.margin:g}% (two one-sided tests at "
            "the family's level); no change shown: neither, up to as far as the interval allows either way; a model "
            "prediction: never called moved.")


def fail_above(change: StudyChange) -> str | None:
    """The rows moved beyond --fail-above's threshold, or that none did; None where it was not given."""
    if change.threshold is None:
        return None
    if not change.beyond:
        return f"moved beyond +-{100 * change.threshold:g}% (--fail-above): none"
    rows = ", ".join(ABSOLUTE_LABEL if r == BASELINE_ABSOLUTE else short_label(r) for r in change.beyond)
    return f"exit status 1: moved beyond +-{100 * change.threshold:g}% (--fail-above; marked !): {rows}"


def headlines(a: ComparedStudy, b: ComparedStudy) -> list[str]:
    """Each study's recommendation, and whether B's is A's."""
    def one(s: ComparedStudy) -> str:
        if s.headline is None or s.headline_speedup is None:
            return f"recommended in {s.label}: none"
        return f"recommended in {s.label}: {s.headline} ({factor(*s.headline_speedup)})"
    same = "the same combination" if a.headline == b.headline else "it changed"
    return [one(a), f"{one(b)}: {same}"]


def parity_changes(change: StudyChange) -> str:
    """The combinations whose accuracy parity verdict differs between the studies."""
    a, b = change.a, change.b
    moved = [f"{short_label(c.row)}: {a.parity[c.row]} -> {b.parity[c.row]}" for c in ordered(change)
             if c.row in a.parity and c.row in b.parity and a.parity[c.row] != b.parity[c.row]]
    return f"accuracy parity changed ({len(moved)}): {'; '.join(moved)}" if moved else \
        "accuracy parity: no verdict changed"


def phase_table(a: ComparedStudy, b: ComparedStudy) -> str:
    """The baselines' step, phase by phase, A above B."""
    if a.baseline_phases is None and b.baseline_phases is None:
        return "where the baselines' time went: neither study profiled its baseline"
    phases = list(dict.fromkeys([*metric.STEP_PHASES, *(a.baseline_phases or {}), *(b.baseline_phases or {})]))
    body = [[s.label, *(("not profiled",) if s.baseline_phases is None else
                        (f"{100 * s.baseline_phases[p]:.0f}%" if p in s.baseline_phases else "" for p in phases))]
            for s in (a, b)]
    return tabulate(body, headers=["baseline's step", *phases], disable_numparse=True)


def speedup_cell(side: Side | None, row: str) -> str:
    """A side's speed-up as its cell: ~ before a model's prediction, blank on the absolute row."""
    if side is None or row == BASELINE_ABSOLUTE:  # the absolute row's figures are throughputs, in their columns
        return ""
    return ("~" if side.predicted else "") + factor(math.exp(side.log))


def throughput_of(study: ComparedStudy, side: Side | None, row: str) -> float | None:
    """A row's throughput in one study: the baseline's level the absolute row compares, else the combination's."""
    if side is None:
        return None
    return math.exp(side.log) if row == BASELINE_ABSOLUTE else study.throughput.get(row)


def rate(value: float | None) -> str:
    """A throughput: whole numbers from 100, three figures below."""
    return "" if value is None else f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def as_json(change: StudyChange) -> dict[str, Any]:
    """change.json: every row with its verdict and figures, both studies' environments, settings and headlines, and
    the rows moved beyond the threshold. Strict JSON: an infinite degrees of freedom (a known variance) is null."""
    return {
        "schema_version": SCHEMA_VERSION,
        "a": _study_json(change.a), "b": _study_json(change.b),
        "margin": change.margin, "alpha": change.alpha, "threshold": change.threshold,
        "beyond": list(change.beyond), "paired_anyway": list(change.paired_anyway),
        "headline_changed": change.a.headline != change.b.headline,
        "rows": [{"row": c.row, "verdict": c.verdict, "words": verdict(c, change.margin),
                  "ratio": c.ratio, "low": c.interval[0] if c.interval else None,
                  "high": c.interval[1] if c.interval else None, "log": c.log, "log_low": c.low, "log_high": c.high,
                  "log_se": c.se, "df": _finite(c.df), "p": c.p, "detectable": c.detectable, "bound": c.bound,
                  "showable": c.showable, "beyond": c.row in change.beyond,
                  "a": _side_json(change.a, c.a, c.row), "b": _side_json(change.b, c.b, c.row)}
                 for c in ordered(change)],
    }


def _study_json(s: ComparedStudy) -> dict[str, Any]:
    top = s.headline_speedup
    return {"label": s.label, "source": s.source, "name": s.name, "device": s.device, "unit": s.unit,
            "environment": dict(s.environment), "settings": dict(s.settings),
            "headline": s.headline and {"combination": s.headline, "speedup": top and top[0],
                                        "low": top and top[1], "high": top and top[2]},
            "baseline_phases": None if s.baseline_phases is None else dict(s.baseline_phases),
            "mlflow_parent_run": s.mlflow_run}


def _side_json(study: ComparedStudy, side: Side | None, row: str) -> dict[str, Any] | None:
    if side is None:
        return None
    absolute = row == BASELINE_ABSOLUTE
    printed = study.speedups.get(row)
    return {"speedup": None if absolute else math.exp(side.log),
            "low": printed[1] if printed else None, "high": printed[2] if printed else None,
            "log": side.log, "log_se": side.se, "df": _finite(side.df), "predicted": side.predicted,
            metric.THROUGHPUT: throughput_of(study, side, row), "parity": None if absolute else study.parity.get(row)}


def _finite(value: float | None) -> float | None:
    return value if value is None or math.isfinite(value) else None
