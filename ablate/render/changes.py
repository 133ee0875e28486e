"""How a change between two studies reads (`ablate compare A B`): the terminal's table, a page with its picture, and
the JSON for scripts, all rendered from one `StudyChange`.

A change is two studies of one workload side by side (after a torch upgrade, on another machine, with a new model
version). `ablate.stats.changes` judges each row; `ablate.run.change` reads the two summary.json files into the
dataclasses below; this module only shows them, and computes nothing (docs/contributing.md): every figure it prints
is in the data, a log shown as its ratio.

What it shows first is what an upgrade hides. A ratio of speed-ups is blind to a stack that got slower everywhere, so
the baselines' own throughput is the first row; the environments follow only where they differ, since the fields
that agree are most of them and say nothing; the verdicts are words with the figure they were read from, "no change
shown" always with how far the interval still allows, because it is not "same". The terminal keeps to 100 columns
(a path that does not fit beside its label on a line of its own); the page and the JSON carry every figure.
"""
from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tabulate import tabulate

from ablate.config.choices import short_label
from ablate.render import terminal
from ablate.render.results import COMPACT_WIDTH, _fitted
from ablate.stats.changes import (
    BASELINE_ABSOLUTE,
    MOVED,
    NOT_SHOWN,
    ONLY_A,
    ONLY_B,
    POWER,
    PREDICTED,
    SAME,
    Change,
    Side,
)
from ablate.store.files import replaced
from ablate.trial import metrics as metric
from ablate.words import count, factor

SCHEMA_VERSION = 1  # change.json's: raised when a field is removed, renamed or changes meaning
FIGURE = "change.png"
# Display order: what moved first, then what the studies cannot tell apart, then what they show the same; rows
# without a verdict of their own last. The baselines' absolute row precedes them all.
ORDER = (MOVED, NOT_SHOWN, SAME, PREDICTED, ONLY_A, ONLY_B)
VERDICT_WIDTH = 18  # the verdict column wraps here: "no change shown" above "(up to +-12%)"
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
    """Two studies set side by side, row by row (`ablate.stats.changes.compare`)."""

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
        return f"moved {_percent(c.ratio - 1, signed=True)}"
    if c.verdict == SAME:
        return f"same (within +-{100 * margin:g}%)"
    if c.verdict == NOT_SHOWN:
        return f"no change shown (up to +-{_percent(c.bound)})" if c.bound is not None else \
            "no change shown (no interval)"
    return c.verdict


def table(change: StudyChange, width: int = COMPACT_WIDTH) -> str:
    """The terminal's text, within `width` columns but for a path alone on its line."""
    a, b = change.a, change.b
    parts = [_wrap(f"A: {_who(a)}  ->  B: {_who(b)}", width),
             terminal.addressed("A", a.source), terminal.addressed("B", b.source)]
    if change.paired_anyway:
        parts.append(_wrap(f"paired anyway (--pair-anyway): the workloads differ in {', '.join(change.paired_anyway)}",
                           width))
    parts += ["", _environments(change, width), "", _rows(change, width), "", *_after(change, width)]
    return "\n".join(parts)


def _title(change: StudyChange) -> str:
    """The page's and the picture's title: both studies by name and device, or, where those agree, what differs
    between their environments (at most two fields: the table and the page name every one)."""
    a, b = change.a, change.b
    if (a.name, a.device) != (b.name, b.device):
        return f"What changed: {a.name} on {a.device} -> {b.name} on {b.device}"
    said = "; ".join([f"{k} {x} -> {y}" for k, x, y in _sides(a.environment, b.environment) if x != y][:2])
    return f"What changed: {a.name} on {a.device}, {said or 'one environment'}"


def _sides(left: Mapping[str, str], right: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """Each field of either side, in order, with both sides' values ("unknown" where a side lacks it)."""
    return [(k, left.get(k, "unknown"), right.get(k, "unknown")) for k in dict.fromkeys([*left, *right])]


def _who(s: ComparedStudy) -> str:
    return f"{s.name} on {s.device}, torch {s.environment.get('torch', 'unknown')}"


def _environments(change: StudyChange, width: int) -> str:
    """The environment fields and settings that differ, side by side; the rest counted and named."""
    a, b = change.a, change.b
    differ: list[list[str]] = []
    same: list[str] = []
    for kind, left, right in (("", a.environment, b.environment), ("setting ", a.settings, b.settings)):
        differ += [[kind + key, x, y] for key, x, y in _sides(left, right) if x != y]
        same += [kind + key for key, x, y in _sides(left, right) if x == y]
    # Counted, not named: the fields that agree are most of them (change.json lists each side's every field).
    settings = sum(k.startswith("setting ") for k in same)
    alike = f"{count(len(same) - settings, 'environment field')} and {count(settings, 'setting')}"
    if not differ:
        return _wrap(f"environment and settings: the same in both ({alike})", width)
    room = (width - max(len(r[0]) for r in differ) - 4) // 2
    shown = tabulate(differ, headers=["differs", "A", "B"], disable_numparse=True, maxcolwidths=[None, room, room])
    return shown + ("\n" + _wrap(f"the same in both: {alike}", width) if same else "")


def _rows(change: StudyChange, width: int) -> str:
    a, b = change.a, change.b
    rows = ordered(change)
    labels = _labels(rows)
    numbers = iter(range(1, len(rows) + 1))
    body = [["" if c.row == BASELINE_ABSOLUTE else str(next(numbers)), label,
             _speedup(c.a, c.row), _speedup(c.b, c.row),
             "" if c.ratio is None else factor(c.ratio, *(c.interval or (None, None))),
             textwrap.fill(verdict(c, change.margin) + (" !" if c.row in change.beyond else ""), VERDICT_WIDTH),
             f"{_rate(_throughput(a, c.a, c.row)) or '-'} -> {_rate(_throughput(b, c.b, c.row)) or '-'}"]
            for c, label in zip(rows, labels)]
    # One column for both throughputs, its unit above: two would take the combination's room.
    headers = ["#", "combination", "A", "B", "B/A [interval]", "verdict", f"{a.unit}\nA -> B"]
    return _fitted(body, headers, width)


def _labels(rows: Sequence[Change]) -> list[str]:
    """The rows' names as the table and the picture show them: shortened as the results table shortens them."""
    labels = [ABSOLUTE_LABEL if c.row == BASELINE_ABSOLUTE else short_label(c.row) for c in rows]
    if len(set(labels)) < len(labels):  # shortening must never make two rows read the same
        labels = [ABSOLUTE_LABEL if c.row == BASELINE_ABSOLUTE else c.row for c in rows]
    return labels


def _after(change: StudyChange, width: int) -> list[str]:
    """Below the rows: the legend, the threshold, the headlines, parity changes and the baselines' phases."""
    notes = [_legend(change), _detectable(change), _threshold(change)]
    return [*(_wrap(n, width) for n in notes if n), "", *(_wrap(h, width) for h in _headlines(change.a, change.b)),
            _wrap(_parity(change), width), "", _phases(change.a, change.b)]


def _legend(change: StudyChange) -> str:
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


def _detectable(change: StudyChange) -> str | None:
    """The range of the rows' smallest detectable changes, naming the rows at either end."""
    seen = sorted((c for c in change.rows if c.detectable is not None and c.row != BASELINE_ABSOLUTE),
                  key=lambda c: c.detectable or 0.0)
    if not seen:
        return None
    low, high = _percent(seen[0].detectable), _percent(seen[-1].detectable)
    rows = "every row" if low == high else f"{short_label(seen[0].row)} to {high} for {short_label(seen[-1].row)}"
    return f"the smallest change a row reads moved {POWER:.0%} of the time: {low} for {rows}, at the two studies' noise"


def _threshold(change: StudyChange) -> str | None:
    if change.threshold is None:
        return None
    if not change.beyond:
        return f"moved beyond +-{100 * change.threshold:g}% (--fail-above): none"
    rows = ", ".join(ABSOLUTE_LABEL if r == BASELINE_ABSOLUTE else short_label(r) for r in change.beyond)
    return f"exit status 1: moved beyond +-{100 * change.threshold:g}% (--fail-above; marked !): {rows}"


def _headlines(a: ComparedStudy, b: ComparedStudy) -> list[str]:
    """Each study's recommendation, and whether B's is A's."""
    def one(s: ComparedStudy) -> str:
        if s.headline is None or s.headline_speedup is None:
            return f"recommended in {s.label}: none"
        return f"recommended in {s.label}: {s.headline} ({factor(*s.headline_speedup)})"
    same = "the same combination" if a.headline == b.headline else "it changed"
    return [one(a), f"{one(b)}: {same}"]


def _parity(change: StudyChange) -> str:
    """The combinations whose accuracy parity verdict differs between the studies."""
    a, b = change.a, change.b
    moved = [f"{short_label(c.row)}: {a.parity[c.row]} -> {b.parity[c.row]}" for c in ordered(change)
             if c.row in a.parity and c.row in b.parity and a.parity[c.row] != b.parity[c.row]]
    return f"accuracy parity changed ({len(moved)}): {'; '.join(moved)}" if moved else \
        "accuracy parity: no verdict changed"


def _phases(a: ComparedStudy, b: ComparedStudy) -> str:
    """The baselines' step, phase by phase, A above B."""
    if a.baseline_phases is None and b.baseline_phases is None:
        return "where the baselines' time went: neither study profiled its baseline"
    phases = list(dict.fromkeys([*metric.STEP_PHASES, *(a.baseline_phases or {}), *(b.baseline_phases or {})]))
    body = [[s.label, *(("not profiled",) if s.baseline_phases is None else
                        (f"{100 * s.baseline_phases[p]:.0f}%" if p in s.baseline_phases else "" for p in phases))]
            for s in (a, b)]
    return tabulate(body, headers=["baseline's step", *phases], disable_numparse=True)


def _speedup(side: Side | None, row: str) -> str:
    if side is None or row == BASELINE_ABSOLUTE:  # the absolute row's figures are throughputs, in their columns
        return ""
    return ("~" if side.predicted else "") + factor(math.exp(side.log))


def _throughput(study: ComparedStudy, side: Side | None, row: str) -> float | None:
    """A row's throughput in one study: the baseline's level the absolute row compares, else the combination's."""
    if side is None:
        return None
    return math.exp(side.log) if row == BASELINE_ABSOLUTE else study.throughput.get(row)


def _rate(value: float | None) -> str:
    return "" if value is None else f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def _percent(fraction: float | None, signed: bool = False) -> str:
    """12%, 2.5%: a whole percent from 10%, a tenth below."""
    if fraction is None:
        return ""
    shown = f"{100 * fraction:{'+' if signed else ''}.{0 if abs(fraction) >= 0.1 else 1}f}"
    return f"{shown}%"


def _wrap(text: str, width: int) -> str:
    return textwrap.fill(text, width, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False)


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
            metric.THROUGHPUT: _throughput(study, side, row), "parity": None if absolute else study.parity.get(row)}


def _finite(value: float | None) -> float | None:
    return value if value is None or math.isfinite(value) else None


def page(change: StudyChange, folder: Path) -> Path:
    """folder/change.md, change.html (the report's page, the picture embedded) and change.png; the Markdown's path."""
    from ablate.render.report import _html  # the report's page maker (and matplotlib): only where a page is made

    folder.mkdir(parents=True, exist_ok=True)
    title = _title(change)
    figure = chart(change, folder / FIGURE, title)
    text = "\n".join(_markdown(change, title))
    for name, content in (("change.md", text), ("change.html", _html(text, [figure], title))):
        with replaced(folder / name) as file:
            file.write(content)
    return folder / "change.md"


def _markdown(change: StudyChange, title: str) -> list[str]:
    a, b = change.a, change.b
    out = [f"# {title}", "", f"- A: `{a.source}` (torch {a.environment.get('torch', 'unknown')})",
           f"- B: `{b.source}` (torch {b.environment.get('torch', 'unknown')})", ""]
    if change.paired_anyway:
        out += [f"Paired anyway (`--pair-anyway`): the workloads differ in {', '.join(change.paired_anyway)}.", ""]
    out += [f"![B over A, row by row]({FIGURE})", "", "## Row by row", "",
            f"| combination | A | B | B/A [interval] | verdict | detectable | A {a.unit} | B {b.unit} |",
            "|---|---|---|---|---|---|---|---|"]
    for c in ordered(change):
        name = ABSOLUTE_LABEL if c.row == BASELINE_ABSOLUTE else c.row
        cells = [name.replace("|", "\\|"), _speedup(c.a, c.row), _speedup(c.b, c.row),
                 "" if c.ratio is None else factor(c.ratio, *(c.interval or (None, None))),
                 verdict(c, change.margin) + (" !" if c.row in change.beyond else ""),
                 _percent(c.detectable), _rate(_throughput(a, c.a, c.row)), _rate(_throughput(b, c.b, c.row))]
        out.append("| " + " | ".join(cells) + " |")
    out += ["", _legend(change), "", *(f"{n}." for n in [_threshold(change)] if n), "",
            f"detectable: the smallest change the row reads moved {POWER:.0%} of the time, at the two studies' noise.",
            "",
            "## The recommendation, accuracy parity and where the baselines' time went", "",
            *(f"- {line}" for line in (*_headlines(a, b), _parity(change))), "",
            "```", _phases(a, b), "```", "", "## The two environments", "", "| | A | B |", "|---|---|---|"]
    for kind, left, right in (("", a.environment, b.environment), ("setting: ", a.settings, b.settings)):
        for key in dict.fromkeys([*left, *right]):
            x, y = left.get(key, "unknown"), right.get(key, "unknown")
            mark = "**" if x != y else ""
            out.append(f"| {mark}{kind}{key}{mark} | {x} | {y} |".replace("\n", " "))
    return out + ["", "Bold: differs between A and B."]


def chart(change: StudyChange, path: Path, title: str) -> Path:
    """Each row's B/A with its interval on a log axis, a line at x1, the margin's band, markers by verdict; the
    baselines' absolute row on top."""
    from ablate.render import plots  # matplotlib: only where a picture is drawn

    rows = [c for c in ordered(change) if c.ratio is not None][::-1]  # barh-like: the first row on top
    style = {MOVED: (plots.FLAGGED, "o", "moved"), SAME: (plots.GOOD, "s", "same"),
             NOT_SHOWN: (plots.NOISE, "o", "no change shown"), PREDICTED: (plots.NOISE, "D", "a model prediction")}
    fig, ax = plots.plt.subplots(figsize=(11, 1.8 + 0.27 * max(1, len(rows))))
    ax.axvspan(1 / (1 + change.margin), 1 + change.margin, color=plots.GOOD, alpha=0.08,
               label=f"+-{100 * change.margin:g}%: what 'same' must lie within")
    labelled: set[str] = set()
    for y, c in enumerate(rows):
        colour, marker, name = style.get(c.verdict, (plots.NOISE, "o", c.verdict))
        point, span = c.ratio, c.interval
        assert point is not None  # rows keeps only those with a ratio
        error = [[point - span[0]], [span[1] - point]] if span else None
        ax.errorbar(point, y, xerr=error, fmt=marker, color=colour, ecolor=colour, capsize=3, markersize=4,
                    mfc="none" if c.verdict == PREDICTED else colour, label=None if name in labelled else name)
        labelled.add(name)
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_yticks(range(len(rows)), _labels(rows), fontsize=7)
    if not rows:
        ax.set_xlim(0.8, 1.25)
    plots._factor_axis(ax)
    ax.set_xlabel("B over A (log scale): a speed-up's ratio; the top row, the baselines' throughput; each interval "
                  "the one its verdict was read from", fontsize=8)
    ax.set_title(title, fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=3, frameon=False)
    return plots._save(fig, path)
