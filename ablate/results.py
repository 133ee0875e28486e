"""The results table: one row per combination, its speed-up the protocol's one estimate (ablate.protocol)."""
from __future__ import annotations

import csv
from pathlib import Path
from typing import Any, Mapping

from tabulate import tabulate

from ablate.analysis import speedup_of
from ablate.records import BASELINE, Record, baseline, by_device

COLUMNS = ["combination", "state", "samples/s", "speed-up", "ci low", "ci high", "blocks", "test acc %", "Δ acc", "acc from",
           "to target s", "to target e2e s", "peak MB", "first step s", "data wait %", "reason"]
NOT_REACHED = "not reached"


def rows(records: list[Record]) -> list[dict[str, Any]]:
    """One row per record; speed-ups and accuracy changes against the baseline of the same device, never another's."""
    table = []
    for device, group in by_device(records).items():
        base = baseline(group)
        base_acc = base.accuracy if base else None
        found = speedup_of(group)
        for r in group:
            m = r.metrics
            rate, acc = r.throughput, r.accuracy
            s = found.get(r.combination)
            table.append({
                "trial": r.number,
                "combination": r.combination,
                "state": r.state,
                "samples/s": rate,  # geometric mean over its measurements
                "speed-up": s.point if s else None,
                "ci low": s.factor.low if s and s.factor else None,
                "ci high": s.factor.high if s and s.factor else None,
                "blocks": s.estimate.blocks if s and r.combination != BASELINE else None,
                "noise": s.estimate.noise if s else None,
                "measurements": len([x for x in r.measurements if x.complete]) or None,
                "test acc %": acc,
                "Δ acc": acc - base_acc if acc is not None and base_acc is not None else None,
                "acc from": r.accuracy_from,
                # Time to the study's target accuracy: measured in the trials that trained accuracy.
                "to target s": _to_target(m, "time_to_target_s"),
                "to target e2e s": _to_target(m, "time_to_target_e2e_s"),
                "peak MB": m.get("peak_memory_mb"),
                "first step s": m.get("first_step_s"),
                "data wait %": 100 * m["data_wait_fraction"] if "data_wait_fraction" in m else None,
                "reason": r.reason or (f"accuracy not measured: {r.accuracy_note}" if r.accuracy_note else ""),
                "device": device,
                "host": r.machine.get("host", "unknown"),
            })
    table.sort(key=lambda r: (r["device"], r["speed-up"] is None, -(r["speed-up"] or 0), -(r["samples/s"] or 0)))
    return table


def comparisons(row: dict[str, Any]) -> dict[str, float]:
    """A row's comparisons with the baseline, as MLflow metrics (those that could be computed)."""
    found = {"speedup": row.get("speed-up"), "speedup_low": row.get("ci low"), "speedup_high": row.get("ci high"),
             "speedup_blocks": row.get("blocks"), "accuracy_change": row.get("Δ acc")}
    return {k: float(v) for k, v in found.items() if v is not None}


def csv_path(results_dir: Path, study_name: str, search: str, device_type: str) -> Path:
    return results_dir / study_name / f"{search}-{device_type}.csv"


def _to_target(metrics: Mapping[str, float], key: str) -> float | str | None:
    if "target_reached" not in metrics:
        return None
    return metrics[key] if metrics["target_reached"] else NOT_REACHED


def render(table: list[dict[str, Any]]) -> str:
    def cell(key: str, value: Any) -> Any:
        if value is None:
            return ""
        if key == "speed-up":
            return f"x{value:.2f}"
        if key == "Δ acc":
            return f"{value:+.2f}"
        if key == "acc from":
            return f"#{value}"
        if isinstance(value, float):
            return f"{value:.1f}" if key != "test acc %" else f"{value:.2f}"
        return value
    # Trials from several devices (workers on different machines): each row says which, and compares within it.
    columns = (["device"] if len({r["device"] for r in table}) > 1 else []) + COLUMNS
    shown = [c for c in columns if c not in ("ci low", "ci high")]
    shown.insert(shown.index("speed-up") + 1, "95% CI")

    def value(row: dict[str, Any], key: str) -> Any:
        if key == "95% CI":
            return "" if row["ci low"] is None else f"[{row['ci low']:.2f}, {row['ci high']:.2f}]"
        return cell(key, row[key])
    return tabulate([[value(r, k) for k in shown] for r in table], headers=shown, disable_numparse=True)


def write_csv(table: list[dict[str, Any]], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["trial", *COLUMNS, "noise", "measurements", "device", "host"])
        writer.writeheader()
        writer.writerows(table)
