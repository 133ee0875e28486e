"""The stored study checked against its design, read through Optuna's and MLflow's own clients, not ablate's.

What a study that says it is complete must hold, however often it was killed or cut off on the way:
- every planned slot (combination, block, position, phase, seed index) measured exactly once, none missing, none
  doubled, none outside the design;
- nothing left RUNNING or WAITING in Optuna, nothing RUNNING in MLflow (the parent or a measurement's run);
- one MLflow run per measurement with a result, of the status its result says, none for a duplicate, an
  interrupted one's KILLED; one parent run, the one summary.json names; the end written to MLflow (each complete
  measurement's run has its combination's pooled speed-up, each combination one row run);
- summary.json parses, and its design - the protocol's settings, the seeds, each combination with its blocks -
  equals the reference's, as do the slots;
- (`kept`) every measurement finished before a fault still there afterwards, with the same result.

A reference is an uninterrupted run's `Design` (`design`), or one written down from the study file (`Design`
with positions left out: `positions=False`).
"""
from __future__ import annotations

import json
import sqlite3
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna
from mlflow.tracking import MlflowClient
from optuna.trial import FrozenTrial, TrialState

BASELINE = "baseline"
RESULTS = ("complete", "skipped", "failed")  # a trial's `state` user attr when it has a result of its own
Slot = tuple[str, int, int, str, int]  # combination, block, position, phase, seed index


@dataclass(frozen=True)
class Check:
    name: str
    passed: bool
    detail: str

    def line(self) -> str:
        return f"{'PASS' if self.passed else 'FAIL'}  {self.name}: {self.detail}"


@dataclass(frozen=True)
class Design:
    """What a run of the study plans and reports: its slots, and summary.json's protocol, seeds and blocks."""

    slots: tuple[Slot, ...]
    blocks: dict[str, int]  # combination -> the blocks its speed-up (the baseline: its level) rests on
    seeds: dict[str, int] = field(default_factory=dict)
    protocol: dict[str, Any] = field(default_factory=dict)  # compared on the keys given here
    positions: bool = True  # False: a design written down by hand, without the blocks' random orders


@dataclass
class Stored:
    """A study as its stores hold it."""

    trials: list[FrozenTrial]
    runs: list[Any]  # MLflow runs of the study's experiment
    summary_path: Path | None
    summary: dict[str, Any] | None
    summary_error: str | None
    storage: str
    tracking_uri: str


def storage_of(results: Path, study: str) -> str:
    return f"sqlite:///{(results / study / 'optuna.db').resolve()}"


def tracking_uri_of(results: Path) -> str:
    return f"sqlite:///{(results / 'mlflow.db').resolve()}"


def read(results: Path, study: str, storage: str | None = None, tracking_uri: str | None = None,
         search: str = "grid", device_type: str = "cpu") -> Stored:
    """The study `study` (its name in the study file) under `results`; `storage` and `tracking_uri` default to
    `ablate run`'s (an SQLite file under results/STUDY/, results/mlflow.db)."""
    storage = storage or storage_of(results, study)
    tracking_uri = tracking_uri or tracking_uri_of(results)
    trials: list[FrozenTrial] = []
    database = Path(storage.removeprefix("sqlite:///")) if storage.startswith("sqlite:///") else None
    if database is None or database.exists():  # else nothing was stored (and SQLite would make an empty file)
        try:
            trials = optuna.load_study(study_name=f"{study}:{search}:{device_type}",
                                       storage=storage).get_trials(deepcopy=False)
        except KeyError:  # no such study: nothing was stored
            pass
    client = MlflowClient(tracking_uri=tracking_uri)
    experiment = client.get_experiment_by_name(f"ablate/{study}")
    runs = [] if experiment is None else client.search_runs([experiment.experiment_id], max_results=5000)
    found = sorted((results / study / "report").glob("*/summary.json"))
    summary, error = None, None
    if len(found) != 1:
        error = f"{len(found)} summary.json files under {results / study / 'report'}"
    else:
        try:
            summary = json.loads(found[0].read_text())
        except (OSError, ValueError) as e:
            error = f"{found[0]} does not parse: {e}"
    return Stored(trials, runs, found[0] if len(found) == 1 else None, summary, error, storage, tracking_uri)


def has_result(t: FrozenTrial) -> bool:
    return t.state in (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL) and t.user_attrs.get("state") in RESULTS


def slot(t: FrozenTrial) -> Slot:
    a = t.user_attrs
    return a["combination"], int(a["block"]), int(a["position"]), a["phase"], int(a.get("seed_index", 0))


def design(stored: Stored) -> Design:
    """An uninterrupted run's design, as a reference: the slots with a result, and summary.json's."""
    s = stored.summary or {}
    protocol = {k: v for k, v in s.get("protocol", {}).items()
                if k not in ("description", "race", "baseline_cv_across_blocks", "screened_fraction")}
    return Design(tuple(sorted(slot(t) for t in stored.trials if has_result(t) and "block" in t.user_attrs)),
                  _blocks(s), dict(s.get("seeds") or {}), protocol)


def _blocks(summary: dict[str, Any]) -> dict[str, int]:
    blocks = {e["combination"]: e["blocks"] for e in summary.get("speedups", [])}
    if level := summary.get("baseline_level"):
        blocks[BASELINE] = level["blocks"]
    return blocks


def _some(items: list[Any], most: int = 6) -> str:
    return ", ".join(map(str, items[:most])) + (f" and {len(items) - most} more" if len(items) > most else "")


def _key(s: Slot, positions: bool) -> tuple[Any, ...]:
    return s if positions else (s[0], s[1], s[3], s[4])


def check(stored: Stored, reference: Design) -> list[Check]:
    return [_slots(stored, reference), _orders(stored), _optuna(stored), *_mlflow(stored),
            _summary(stored, reference)]


def _slots(stored: Stored, reference: Design) -> Check:
    p = reference.positions
    done = Counter(_key(slot(t), p) for t in stored.trials
                   if has_result(t) and t.user_attrs.get("state") != "failed" and "block" in t.user_attrs)
    failed = [f"#{t.number} {slot(t)}: {t.user_attrs.get('reason', '')[:80]}" for t in stored.trials
              if has_result(t) and t.user_attrs.get("state") == "failed"]
    planned = Counter(_key(s, p) for s in reference.slots)
    missing = sorted((planned - done).elements())
    doubled = sorted(k for k, n in done.items() if n > 1)
    extra = sorted(k for k in done if k not in planned)
    ok = not (missing or doubled or extra or failed)
    detail = f"{sum(min(done[k], 1) for k in planned)} of {len(planned)} planned slots measured once"
    for what, items in (("missing", missing), ("doubled", doubled), ("outside the design", extra),
                        ("failed", failed)):
        if items:
            detail += f"; {len(items)} {what}: {_some(items)}"
    return Check("every planned slot measured exactly once", ok, detail)


def _orders(stored: Stored) -> Check:
    """Each block's places are 0..n-1, once each: the shape of a randomized block, whatever its order."""
    blocks: dict[tuple[int, str], list[int]] = {}
    for t in stored.trials:
        if has_result(t) and "block" in t.user_attrs:
            _, block, position, phase, _ = slot(t)
            blocks.setdefault((block, phase), []).append(position)
    bad = [f"block {b} ({phase}): places {sorted(ps)}" for (b, phase), ps in sorted(blocks.items())
           if sorted(ps) != list(range(len(ps)))]
    return Check("each block's places once each", not bad, _some(bad) if bad else f"{len(blocks)} blocks")


def _optuna(stored: Stored) -> Check:
    left = Counter(t.state.name for t in stored.trials if t.state in (TrialState.RUNNING, TrialState.WAITING))
    states = Counter(f"{t.state.name} {t.user_attrs.get('state', '-')}" for t in stored.trials)
    return Check("nothing RUNNING or WAITING in Optuna", not left and bool(stored.trials),
                 (f"{_some([f'{n} {s}' for s, n in left.items()])} left; " if left else "")
                 + f"{len(stored.trials)} trials ({_some([f'{n} {s}' for s, n in sorted(states.items())])})")


def _mlflow(stored: Stored) -> list[Check]:
    runs = stored.runs
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children: dict[int, list[Any]] = {}
    for r in runs:
        if "mlflow.parentRunId" in r.data.tags:
            children.setdefault(int(r.data.tags.get("ablate.trial_number", -1)), []).append(r)
    running = [f"{'parent' if r in parents else 'trial #' + r.data.tags.get('ablate.trial_number', '?')} "
               f"{r.info.run_id[:8]}" for r in runs if r.info.status == "RUNNING"]
    out = [Check("nothing RUNNING in MLflow", not running and bool(runs),
                 f"{len(running)} RUNNING: {_some(running)}" if running else f"{len(runs)} runs, none RUNNING")]

    by_number = {t.number: t for t in stored.trials}
    wrong = []
    for t in stored.trials:
        mine, state = children.get(t.number, []), t.user_attrs.get("state")
        if has_result(t):
            want = "FAILED" if state == "failed" else "FINISHED"
            if [r.info.status for r in mine] != [want]:
                wrong.append(f"#{t.number} {state}: {[r.info.status for r in mine] or 'no run'}")
        elif state == "duplicate" and mine:
            wrong.append(f"#{t.number} duplicate: {len(mine)} run(s)")
        elif any(r.info.status not in ("KILLED", "FAILED") for r in mine):
            wrong.append(f"#{t.number} {state or t.state.name}: {[r.info.status for r in mine]}")
    strays = [f"run {r.info.run_id[:8]} of trial {n}" for n, rs in children.items() if n not in by_number for r in rs]
    measured = sum(1 for t in stored.trials if has_result(t))
    out.append(Check("one MLflow run per measurement", not (wrong or strays),
                     f"{measured} measurements" + (f"; {len(wrong)} wrong: {_some(wrong)}" if wrong else "")
                     + (f"; {len(strays)} runs of no trial: {_some(strays)}" if strays else "")))

    named = (stored.summary or {}).get("mlflow_parent_run")
    parent_ok = (len(parents) == 1 and parents[0].info.run_id == named and parents[0].info.status == "FINISHED"
                 and all(r.data.tags["mlflow.parentRunId"] == named for rs in children.values() for r in rs))
    out.append(Check("one parent run, FINISHED, the one summary.json names", parent_ok,
                     f"{len(parents)} parent run(s) "
                     f"({_some([f'{r.info.run_id[:8]} {r.info.status}' for r in parents])}); summary.json names "
                     f"{(named or 'none')[:8]}"))

    complete = [t for t in stored.trials if has_result(t) and t.user_attrs.get("state") == "complete"]
    unpooled = [f"#{t.number}" for t in complete
                if not any("speedup" in r.data.metrics for r in children.get(t.number, []))]
    rows = Counter(r.data.tags.get("ablate.combination") for rs in children.values() for r in rs
                   if r.data.tags.get("ablate.row") == "combination")
    combinations = {str(t.user_attrs.get("combination")) for t in complete}
    bad_rows = sorted(c for c in combinations if rows[c] != 1)
    out.append(Check("the end written to MLflow", not unpooled and not bad_rows,
                     f"{len(complete) - len(unpooled)} of {len(complete)} complete measurements' runs have the pooled "
                     f"speed-up; {len(combinations) - len(bad_rows)} of {len(combinations)} combinations one row run"
                     + (f" (not: {_some(bad_rows)})" if bad_rows else "")))
    return out


def _summary(stored: Stored, reference: Design) -> Check:
    if stored.summary is None:
        return Check("summary.json valid, its design the reference's", False, stored.summary_error or "none")
    found = design(stored)
    differ = []
    if found.blocks != reference.blocks:
        differ.append(f"blocks {found.blocks} != {reference.blocks}")
    if reference.seeds and found.seeds != reference.seeds:
        differ.append(f"seeds {found.seeds} != {reference.seeds}")
    protocol = {k: found.protocol.get(k) for k in reference.protocol}
    if protocol != reference.protocol:
        differ.append(f"protocol {protocol} != {reference.protocol}")
    p = reference.positions
    if sorted(_key(s, p) for s in found.slots) != sorted(_key(s, p) for s in reference.slots):
        differ.append("the slots differ from the reference's" + ("" if p else " (positions aside)"))
    return Check("summary.json valid, its design the reference's", not differ,
                 "; ".join(differ) if differ else
                 f"{len(found.blocks)} combinations, {len(found.slots)} slots, seeds {found.seeds}")


def finished(trials: list[FrozenTrial]) -> dict[int, Any]:
    """Trial number -> its result, for every trial with one: a snapshot to hold a later store to (`kept`)."""
    return {t.number: (t.user_attrs.get("state"), t.user_attrs.get("metrics")) for t in trials if has_result(t)}


def kept(before: dict[int, Any], trials: list[FrozenTrial]) -> Check:
    after = finished(trials)
    lost = [f"#{n}" for n, r in before.items() if after.get(n) != r]
    return Check("no finished measurement lost", not lost,
                 f"{len(before)} finished before the faults, " + (f"{len(lost)} lost or changed: {_some(lost)}"
                                                                  if lost else "all kept as they were"))


def integrity(database: Path) -> Check:
    """SQLite's own check of a database file."""
    try:
        with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as connection:
            said = [row[0] for row in connection.execute("PRAGMA integrity_check")]
    except sqlite3.Error as error:
        said = [str(error)]
    return Check(f"SQLite integrity of {database.name}", said == ["ok"], "; ".join(said)[:200])
