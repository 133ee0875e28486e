"""The results table: one row per combination, read back from the Optuna study."""
from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState
from tabulate import tabulate

BASELINE = "baseline"
COLUMNS = ["combination", "state", "samples/s", "spread %", "speed-up", "test acc %", "Δ acc", "acc from",
           "peak MB", "first step s", "data wait %", "reason"]


def latest_per_combination(study: optuna.Study) -> list[FrozenTrial]:
    """The last finished trial of each combination (a re-run replaces an interrupted one)."""
    latest: dict[str, FrozenTrial] = {}
    for trial in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)):
        if trial.user_attrs.get("state") == "interrupted":
            continue
        latest[trial.user_attrs.get("combination", str(trial.number))] = trial
    return list(latest.values())


def rows(study: optuna.Study) -> list[dict[str, Any]]:
    trials = latest_per_combination(study)
    base = next((t for t in trials if t.user_attrs.get("combination") == BASELINE and t.state == TrialState.COMPLETE), None)
    base_rate = base.user_attrs["metrics"]["throughput"] if base else None
    base_acc = base.user_attrs["metrics"].get("test_accuracy") if base else None
    table = []
    for t in trials:
        a = {**t.user_attrs.get("metrics", {}), **t.user_attrs}
        rate, acc = a.get("throughput"), a.get("test_accuracy")
        table.append({
            "trial": t.number,
            "combination": a.get("combination", "?"),
            "state": a.get("state", t.state.name.lower()),
            "samples/s": rate,
            "spread %": a.get("throughput_spread_pct"),
            "speed-up": rate / base_rate if rate and base_rate else None,
            "test acc %": acc,
            "Δ acc": acc - base_acc if acc is not None and base_acc is not None else None,
            "acc from": a.get("accuracy_from"),
            "peak MB": a.get("peak_memory_mb"),
            "first step s": a.get("first_step_s"),
            "data wait %": 100 * a["data_wait_fraction"] if "data_wait_fraction" in a else None,
            "reason": a.get("reason", ""),
        })
    table.sort(key=lambda r: (r["samples/s"] is None, -(r["samples/s"] or 0)))
    return table


def render(table: list[dict[str, Any]]) -> str:
    def cell(key: str, value: Any) -> Any:
        if value is None:
            return ""
        if key == "speed-up":
            return f"{value:.2f}x"
        if key == "Δ acc":
            return f"{value:+.2f}"
        if key == "acc from":
            return f"#{value}"
        if isinstance(value, float):
            return f"{value:.1f}" if key != "test acc %" else f"{value:.2f}"
        return value
    return tabulate([[cell(k, r[k]) for k in COLUMNS] for r in table], headers=COLUMNS, disable_numparse=True)


def write_csv(table: list[dict[str, Any]], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["trial", *COLUMNS])
        writer.writeheader()
        writer.writerows(table)
