"""The GPU part of RESULTS.md's front page: what each GPU kind last ran, and where its figures are explained.

A lease's section says what one command did; what is current on a GPU kind is its last run of each step, which is
what the ledger holds. So after a merge the front page's GPU table is written again from the ledger, and a lease's
section that no run in the ledger points at any more (every step it reported has run again on that kind since)
moves to benchmarks/history/gpu.md: the front page and the sections under it then hold today's GPU figures only.
"""
from __future__ import annotations

import os
from pathlib import Path

from benchmarks.gpu import ledger
from benchmarks.sections import HISTORY, kinds, retire, rewrite, section_pattern

FRONT = "front-gpu"  # the front page's generated GPU table
LEASE = "gpu-"  # a lease's section: gpu-KIND-DATE (benchmarks/gpu/__main__.py)
ROOT = ledger.HERE.parents[1]  # the ledger's figures are relative to the checkout
HISTORY_FILE = "gpu.md"
HISTORY_HEADING = """\
# History: GPU sections

Sections `python -m benchmarks.gpu merge` moved here from [RESULTS.md](../RESULTS.md) because a later lease on the
same GPU kind ran every step they reported again, or a later `make bench` on a GPU replaced its section; oldest
first. Their figures were current on that kind until then.
"""


def table(steps: list[ledger.LedgerStep], results: Path) -> str:
    """The front page's GPU table, markers included: one row per step a GPU kind has run, by kind."""
    rows = [(kind, step, run) for step in steps for kind, run in step.runs.items()]
    lines = [f"<!-- bench:{FRONT}:start (written by `python -m benchmarks.gpu merge` from "
             "benchmarks/gpu/ledger.yaml; edit the ledger, not this table) -->"]
    if not rows:
        lines.append("No GPU step has run yet.")
    else:
        lines += ["| GPU | step: what it measures | last run | commit | date | torch | explained in |",
                  "|---|---|---|---|---|---|---|"]
        for kind, step, run in sorted(rows, key=lambda r: r[0]):  # stable: the ledger's order within a kind
            took = f", {run.actual_s:g} s" if run.actual_s is not None else ""
            what = step.what.replace("|", "\\|")
            lines.append(f"| {kind} | `{step.name}`: {what} | {run.outcome}{took} | {run.commit} | {run.date} | "
                         f"{run.torch} | {_link(run.figures, results)} |")
    text = results.read_text() if results.exists() else ""
    if (bench := section_pattern("cuda").search(text)) and (heading := _heading(bench.group(0))):
        lines += ["", f"`make bench` on a GPU, the last one merged: [{heading.replace('`', '')}]"
                      f"(#{ledger.anchor(heading)})."]
    lines.append(f"<!-- bench:{FRONT}:end -->")
    return "\n".join(lines)


def refresh(results: Path, ledger_path: Path, keep: str | None = None) -> list[str]:
    """Write the GPU table into `results`' front page from the ledger at `ledger_path`, and move the lease sections
    no run points at any more (except `keep`, the one just merged) to the history; returns the kinds moved."""
    steps = ledger.load(ledger_path)
    current = {figures.partition("#")[2] for step in steps for run in step.runs.values()
               if (figures := run.figures) and _target(figures) == results.resolve()}
    moved = []
    text = results.read_text() if results.exists() else ""
    for kind in kinds(text, LEASE):
        found = section_pattern(kind).search(text)
        if kind != keep and ledger.anchor(_heading(found.group(0)) if found else "") not in current:
            retire(results, kind, history(results), HISTORY_HEADING)
            moved.append(kind)
    rewrite(results, FRONT, table(steps, results), new_at_top=True)
    return moved


def _heading(section: str) -> str:
    return next((line[3:] for line in section.splitlines() if line.startswith("## ")), "")


def history(results: Path) -> Path:
    return results.parent / HISTORY / HISTORY_FILE


def _target(figures: str) -> Path:
    path = Path(figures.partition("#")[0])
    return (path if path.is_absolute() else ROOT / path).resolve()


def _link(figures: str | None, results: Path) -> str:
    """A Markdown link from `results` to a run's figures ("path#anchor", relative to the checkout)."""
    if not figures:
        return ""
    anchor = figures.partition("#")[2]
    target = _target(figures)
    here = "" if target == results.resolve() else Path(os.path.relpath(target, results.resolve().parent)).as_posix()
    return f"[its section]({here}#{anchor})" if anchor else f"[its section]({here})"
