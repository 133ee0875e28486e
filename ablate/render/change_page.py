"""`ablate compare`'s page: change.md, change.html and the picture of B over A row by row, change.png."""
from __future__ import annotations

from pathlib import Path

from ablate.render import glossary
from ablate.render.changes import (
    ABSOLUTE_LABEL,
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
from ablate.stats.changes import BASELINE_ABSOLUTE, MOVED, NOT_SHOWN, POWER, PREDICTED, SAME
from ablate.store.files import replaced
from ablate.words import factor, percent

FIGURE = "change.png"
# The footnote's words: the rows' verdicts first, then the parity verdicts its parity line repeats.
WORDS = {**glossary.CHANGE_WORDS, **glossary.STUDY_WORDS}


def page(change: StudyChange, folder: Path) -> Path:
    """folder/change.md, change.html (the report's page, the picture embedded) and change.png; the Markdown's path."""
    from ablate.render.report import html_page  # the report's page maker (and matplotlib): only where a page is made

    folder.mkdir(parents=True, exist_ok=True)
    title = _title(change)
    figure = chart(change, folder / FIGURE, title)
    text = "\n".join(_markdown(change, title))
    for name, content in (("change.md", text), ("change.html", html_page(text, [figure], title))):
        with replaced(folder / name) as file:
            file.write(content)
    return folder / "change.md"


def _title(change: StudyChange) -> str:
    """The page's and the picture's title: both studies by name and device, or, where those agree, what differs
    between their environments (at most two fields: the table and the page name every one)."""
    a, b = change.a, change.b
    if (a.name, a.device) != (b.name, b.device):
        return f"What changed: {a.name} on {a.device} -> {b.name} on {b.device}"
    said = "; ".join([f"{k} {x} -> {y}" for k, x, y in side_by_side(a.environment, b.environment) if x != y][:2])
    return f"What changed: {a.name} on {a.device}, {said or 'one environment'}"


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
        cells = [name.replace("|", "\\|"), speedup_cell(c.a, c.row), speedup_cell(c.b, c.row),
                 "" if c.ratio is None else factor(c.ratio, *(c.interval or (None, None))),
                 verdict(c, change.margin) + (" !" if c.row in change.beyond else ""),
                 percent(c.detectable), rate(throughput_of(a, c.a, c.row)), rate(throughput_of(b, c.b, c.row))]
        out.append("| " + " | ".join(cells) + " |")
    out += ["", legend(change), "", *(f"{n}." for n in [fail_above(change)] if n), "",
            f"detectable: the smallest change the row reads moved {POWER:.0%} of the time, at the two studies' noise.",
            "",
            "## The recommendation, accuracy parity and where the baselines' time went", "",
            *(f"- {line}" for line in (*headlines(a, b), parity_changes(change))), "",
            "```", phase_table(a, b), "```", "", *_glossary(change),
            "## The two environments", "", "| | A | B |", "|---|---|---|"]
    for kind, left, right in (("", a.environment, b.environment), ("setting: ", a.settings, b.settings)):
        for key in dict.fromkeys([*left, *right]):
            x, y = left.get(key, "unknown"), right.get(key, "unknown")
            mark = "**" if x != y else ""
            out.append(f"| {mark}{kind}{key}{mark} | {x} | {y} |".replace("\n", " "))
    return out + ["", "Bold: differs between A and B."]


def _glossary(change: StudyChange) -> list[str]:
    """The report's footnote: the verdict words the rows and the parity line use, each with its sentence; not
    the legend's or the headlines' words ("below x1", "the same combination"), which are no verdicts."""
    said = [verdict(c, change.margin) for c in ordered(change)] + [parity_changes(change)]
    return glossary.section("\n".join(said), WORDS)


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
    ax.set_yticks(range(len(rows)), row_labels(rows), fontsize=7)
    if not rows:
        ax.set_xlim(0.8, 1.25)
    plots._factor_axis(ax)
    ax.set_xlabel("B over A (log scale): a speed-up's ratio; the top row, the baselines' throughput; each interval "
                  "the one its verdict was read from", fontsize=8)
    ax.set_title(title, fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=3, frameon=False)
    return plots._save(fig, path)
