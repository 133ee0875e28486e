"""`ablate compare`'s terminal table: within 100 columns, a path too long beside its label on a line of its own."""
from __future__ import annotations

import textwrap

from tabulate import tabulate

from ablate.config.choices import short_label
from ablate.render import terminal
from ablate.render.changes import (
    ComparedStudy,
    StudyChange,
    fail_above,
    headlines,
    legend,
    ordered,
    parity_changes,
    phase_table,
    rate,
    row_labels,
    side_by_side,
    speedup_cell,
    throughput_of,
    verdict,
)
from ablate.render.results import COMPACT_WIDTH, fitted_table
from ablate.stats.changes import BASELINE_ABSOLUTE, POWER
from ablate.words import count, factor, percent

VERDICT_WIDTH = 18  # the verdict column wraps here: "no change shown" above "(up to +-12%)"


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


def _who(s: ComparedStudy) -> str:
    return f"{s.name} on {s.device}, torch {s.environment.get('torch', 'unknown')}"


def _environments(change: StudyChange, width: int) -> str:
    """The environment fields and settings that differ, side by side; the rest counted and named."""
    a, b = change.a, change.b
    differ: list[list[str]] = []
    same: list[str] = []
    for kind, left, right in (("", a.environment, b.environment), ("setting ", a.settings, b.settings)):
        differ += [[kind + key, x, y] for key, x, y in side_by_side(left, right) if x != y]
        same += [kind + key for key, x, y in side_by_side(left, right) if x == y]
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
    labels = row_labels(rows)
    numbers = iter(range(1, len(rows) + 1))
    body = [["" if c.row == BASELINE_ABSOLUTE else str(next(numbers)), label,
             speedup_cell(c.a, c.row), speedup_cell(c.b, c.row),
             "" if c.ratio is None else factor(c.ratio, *(c.interval or (None, None))),
             textwrap.fill(verdict(c, change.margin) + (" !" if c.row in change.beyond else ""), VERDICT_WIDTH),
             f"{rate(throughput_of(a, c.a, c.row)) or '-'} -> {rate(throughput_of(b, c.b, c.row)) or '-'}"]
            for c, label in zip(rows, labels)]
    # One column for both throughputs, its unit above: two would take the combination's room.
    headers = ["#", "combination", "A", "B", "B/A [interval]", "verdict", f"{a.unit}\nA -> B"]
    return fitted_table(body, headers, width)


def _after(change: StudyChange, width: int) -> list[str]:
    """Below the rows: the legend, the threshold, the headlines, parity changes and the baselines' phases."""
    notes = [legend(change), _detectable(change), fail_above(change)]
    return [*(_wrap(n, width) for n in notes if n), "", *(_wrap(h, width) for h in headlines(change.a, change.b)),
            _wrap(parity_changes(change), width), "", phase_table(change.a, change.b)]


def _detectable(change: StudyChange) -> str | None:
    """The range of the rows' smallest detectable changes, naming the rows at either end."""
    seen = sorted((c for c in change.rows if c.detectable is not None and c.row != BASELINE_ABSOLUTE),
                  key=lambda c: c.detectable or 0.0)
    if not seen:
        return None
    low, high = percent(seen[0].detectable), percent(seen[-1].detectable)
    rows = "every row" if low == high else f"{short_label(seen[0].row)} to {high} for {short_label(seen[-1].row)}"
    return f"the smallest change a row reads moved {POWER:.0%} of the time: {low} for {rows}, at the two studies' noise"


def _wrap(text: str, width: int) -> str:
    return textwrap.fill(text, width, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False)
