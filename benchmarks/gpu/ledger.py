"""The ledger of GPU steps (benchmarks/gpu/ledger.yaml): what each step measures, and where each device kind stands.

A lent GPU comes by chance (about one session in five) for 15 minutes of device time, so no plan may need two
leases in a row. The ledger is the campaign's memory instead: every lease runs the most valuable steps this device
kind has not done, records what it did, and the next lease - on whatever kind - starts where that one stopped.

Each step names the source it measures (`paths`, globs). A run is recorded per device kind with a SHA-256 of those
files' contents, not a git commit, because no `.git` travels to a lent machine: the hash is computed there, from
the carried tree, exactly as here. A passed run is *stale* when that hash or torch's version has changed since;
its figures stay (labelled with their commit) and it reruns after every step never run on that kind. A run that
failed reruns once its paths change (running the same code again would only fail again), a stopped one at once.

Durations: a step's `planned_s` is its limit in a command, its stop reserve included. A step that ran is planned at
its last actual duration plus a quarter (`HEADROOM`), within `CORRECTION` of its planned figure; one never run at
its planned figure times the median overrun of the steps that ran slower than planned (every first GPU run so far
was slower than its estimate), never less.
"""
from __future__ import annotations

import fnmatch
import hashlib
import os
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
LEDGER = HERE / "ledger.yaml"
RUNS = HERE / "runs"  # the compact exports of each step's records, per device kind
OUTCOMES = ("passed", "failed", "stopped")
COMMANDS = ("pytest", "bench", "study", "repro")
MAX_PLANNED_S = 210  # a step lasts at most about 3.5 minutes, so a stopped lease still lands its finished steps
# ... except a study whose whole table must be measured in one command (`alone`): it takes a command of its own,
# up to the steps' budget at the planned set-up (`benchmarks.gpu.steps.PLANNED_STEPS_S`).
MAX_ALONE_S = 470
HEADROOM = 1.25
CORRECTION = (0.6, 3.0)
HEADER = """\
# The ledger of GPU steps: `make gpu` (python -m benchmarks.gpu next) runs the first steps, in this order of value,
# that the lent machine's device kind has not done; `python -m benchmarks.gpu merge TARBALL` records what a lease
# did. benchmarks/gpu/ledger.py explains the format: planned_s is a step's limit (its stop reserve included), paths
# the source it measures (a run is stale when their contents or torch changed), runs one record per device kind.
# Edit the steps by hand (order, planned_s, paths); the runs are written by merge.
"""


@dataclass
class Run:
    """One device kind's last run of a step."""

    commit: str
    date: str
    torch: str
    outcome: str  # passed, failed or stopped
    planned_s: float | None = None  # the step's limit in that command
    actual_s: float | None = None  # its wall time; None where it was not measured
    paths_hash: str | None = None
    figures: str | None = None  # the RESULTS.md section's anchor
    export: str | None = None  # the compact export under benchmarks/gpu/runs/


@dataclass
class LedgerStep:
    name: str
    what: str
    command: str  # pytest, bench, study or repro
    paths: list[str]
    planned_s: int
    study: str | None = None  # a study file, relative to the repository's root
    args: list[str] = field(default_factory=list)
    alone: bool = False  # its whole table in one command: planned above MAX_PLANNED_S, with no other step beside it
    runs: dict[str, Run] = field(default_factory=dict)  # device kind -> its last run


def load(path: Path | None = None) -> list[LedgerStep]:
    """The ledger's steps, in their order of value; a malformed entry is one line naming it."""
    path = path or LEDGER
    raw = yaml.safe_load(path.read_text()) or {}
    steps = []
    for entry in raw.get("steps", []):
        try:
            runs = {kind: Run(**run) for kind, run in (entry.pop("runs", None) or {}).items()}
            step = LedgerStep(**entry, runs=runs)
        except TypeError as error:
            raise ValueError(f"{path}: step {entry.get('name')!r}: {error}") from None
        if step.command not in COMMANDS:
            raise ValueError(f"{path}: step {step.name!r}: command {step.command!r}; choose from {', '.join(COMMANDS)}")
        if bad := [r.outcome for r in runs.values() if r.outcome not in OUTCOMES]:
            raise ValueError(f"{path}: step {step.name!r}: outcome {bad[0]!r}; choose from {', '.join(OUTCOMES)}")
        steps.append(step)
    return steps


def save(steps: list[LedgerStep], path: Path | None = None) -> None:
    def entry(step: LedgerStep) -> dict[str, Any]:
        data = {k: v for k, v in vars(step).items() if k != "runs" and v is not False and v not in (None, [])}
        data["runs"] = {kind: {k: v for k, v in vars(run).items() if v is not None} for kind, run in step.runs.items()}
        return data

    text = yaml.safe_dump({"steps": [entry(s) for s in steps]}, sort_keys=False, width=120, allow_unicode=True)
    (path or LEDGER).write_text(HEADER + text)


def device_kind(name: str) -> str:
    """A GPU's kind from its name: the memory size and type dropped ("NVIDIA H100 80GB HBM3" -> "NVIDIA H100"),
    the form factor kept (a PCIe H100 is slower than an SXM one)."""
    return re.sub(r"[- ]\d+\s?GB.*$", "", name.strip()) or name


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _matches(relative: str, globs: list[str]) -> bool:
    # fnmatch's * crosses folders, so "ablate/**/*.py" also matches "ablate/x.py" through "ablate/*.py" below
    return any(fnmatch.fnmatchcase(relative, g) or fnmatch.fnmatchcase(relative, g.replace("**/", ""))
               for g in globs)


SKIPPED_FOLDERS = {".git", ".venv", ".whl", "results", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache"}


def tree_files(root: Path) -> list[str]:
    """The checkout's files, relative and sorted, without the folders that differ between here and a lent machine
    (caches, bytecode, results, the carried wheels)."""
    found = []
    for folder, folders, files in os.walk(root):
        folders[:] = [f for f in folders if f not in SKIPPED_FOLDERS]
        found += [Path(folder, f).relative_to(root).as_posix() for f in files if not f.endswith(".pyc")]
    return sorted(found)


def paths_hash(globs: list[str], root: Path, files: list[str] | None = None) -> str:
    """SHA-256 of the files `globs` match under `root` (their relative paths and contents, in sorted order)."""
    digest = hashlib.sha256()
    for relative in (tree_files(root) if files is None else files):
        if _matches(relative, globs):
            digest.update(relative.encode() + b"\0" + (root / relative).read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def paths_hashes(steps: list[LedgerStep], root: Path) -> dict[str, str]:
    """Every step's paths_hash, the tree walked once."""
    files = tree_files(root)
    return {s.name: paths_hash(s.paths, root, files) for s in steps}


@dataclass(frozen=True)
class Planned:
    step: LedgerStep
    why: str  # why it runs: never run on this kind, stopped, stale (what changed), failed and changed
    estimate_s: float


def _overrun(steps: list[LedgerStep]) -> float:
    """The median of actual/planned over the runs that took longer than planned, else 1."""
    over = [r.actual_s / r.planned_s for s in steps for r in s.runs.values()
            if r.actual_s and r.planned_s and r.actual_s > r.planned_s]
    return statistics.median(over) if over else 1.0


def estimate(step: LedgerStep, kind: str, overrun: float = 1.0) -> float:
    """The seconds to plan for `step` on `kind`: its last actual duration (this kind's, else any kind's) plus
    HEADROOM, within CORRECTION of its planned figure; never run, its planned figure times `overrun`."""
    runs = [step.runs[kind]] if kind in step.runs else list(step.runs.values())
    timed = [r for r in runs if r.actual_s]
    if not timed:
        return step.planned_s * max(1.0, overrun)
    low, high = CORRECTION
    # A stopped run's duration is its limit, not its price: the step needs at least its planned figure again.
    if timed[-1].outcome == "stopped":
        low = max(low, 1.0)
    return min(max(timed[-1].actual_s * HEADROOM, low * step.planned_s), high * step.planned_s)  # type: ignore[operator]


def status(step: LedgerStep, kind: str, hashes: dict[str, str], torch: str) -> tuple[int, str] | None:
    """Where `step` stands on `kind`: (tier, why) to run it - tier 0 before tier 1 - or None when it is done."""
    run = step.runs.get(kind)
    if run is None:
        return 0, "never run on this kind"
    changed = [what for what, now, then in (("paths", hashes[step.name], run.paths_hash), ("torch", torch, run.torch))
               if then is not None and now != then]
    if run.outcome == "stopped":
        return 0, "stopped at its limit last time"
    if run.outcome == "failed":
        return (0, f"failed last time; {' and '.join(changed)} changed since") if changed else None
    if changed:
        return 1, f"stale: {' and '.join(changed)} changed since {run.commit}"
    return None


def plan(steps: list[LedgerStep], kind: str, hashes: dict[str, str], torch: str,
         budget_s: float) -> list[Planned]:
    """The steps to run in one command of `budget_s` seconds of steps on `kind`: those never run (or stopped, or
    failed and changed since) in the ledger's order of value, then the stale ones, each taken if its estimate still
    fits; a first step larger than the whole budget, or one marked `alone`, is taken alone (its limit holds it)."""
    overrun = _overrun(steps)
    tiers: list[list[Planned]] = [[], []]
    for step in steps:
        if (found := status(step, kind, hashes, torch)) is not None:
            tiers[found[0]].append(Planned(step, found[1], estimate(step, kind, overrun)))
    chosen: list[Planned] = []
    for candidate in tiers[0] + tiers[1]:
        if candidate.step.alone and chosen:
            continue
        if sum(p.estimate_s for p in chosen) + candidate.estimate_s <= budget_s or not chosen:
            chosen.append(candidate)
            if candidate.estimate_s > budget_s or candidate.step.alone:
                break
    return chosen


def record(steps: list[LedgerStep], entry: dict[str, Any], figures: str | None, export: str | None) -> None:
    """A lease's record of one step (from the tarball's runs.json) into the ledger; 'not run' changes nothing."""
    if entry["outcome"] not in OUTCOMES:
        return
    by_name = {s.name: s for s in steps}
    if entry["step"] not in by_name:
        raise ValueError(f"the tarball records step {entry['step']!r}, which the ledger does not have")
    by_name[entry["step"]].runs[entry["kind"]] = Run(
        commit=entry["commit"], date=entry["date"], torch=entry["torch"], outcome=entry["outcome"],
        planned_s=round(entry["limit_s"]), actual_s=round(entry["actual_s"]), paths_hash=entry["paths_hash"],
        figures=figures, export=export)
