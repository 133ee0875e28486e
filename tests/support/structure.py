"""The shape of what a study leaves behind, without its numbers: what must not change when the code moves.

For a results folder: every CSV's columns, every JSON file's keys (nested, lists merged), the Optuna
studies' user-attr keys and metric names, and per kind of MLflow run (the study's parent, a measurement,
a combination's row) the names of its params, metrics and tags. Imports neither ablate nor its layout,
so the same function reads a folder written by any commit.
"""
from __future__ import annotations

import csv
import json
import sqlite3
from pathlib import Path
from typing import Any


def _keys(value: Any, prefix: str = "") -> set[str]:
    if isinstance(value, dict):
        found = set()
        for key, inner in value.items():
            # Keys that are data (a combination, a device, a trial number) are not structure.
            name = "*" if any(c in str(key) for c in "()+ :") or str(key).isdigit() else str(key)
            found |= {f"{prefix}{name}"} | _keys(inner, f"{prefix}{name}.")
        return found
    if isinstance(value, list):
        return set().union(*(_keys(v, f"{prefix}[].") for v in value)) if value else set()
    return set()


def _mlflow(db: Path) -> dict[str, dict[str, list[str]]]:
    with sqlite3.connect(db) as con:
        runs = {run_id: {"params": set(), "metrics": set(), "tags": set()} for (run_id,) in
                con.execute("SELECT run_uuid FROM runs WHERE lifecycle_stage = 'active'")}
        for table, kind in (("params", "params"), ("latest_metrics", "metrics"), ("tags", "tags")):
            for run_id, key in con.execute(f"SELECT run_uuid, key FROM {table}"):
                if run_id in runs:
                    runs[run_id][kind].add(key)
    kinds: dict[str, dict[str, set[str]]] = {}
    for names in runs.values():
        kind = ("parent" if "mlflow.parentRunId" not in names["tags"] else
                "measurement" if "ablate.trial_number" in names["tags"] else "row")
        into = kinds.setdefault(kind, {"params": set(), "metrics": set(), "tags": set()})
        for part, keys in names.items():
            into[part] |= {k for k in keys if not k.startswith("mlflow.source")}
    return {kind: {part: sorted(keys) for part, keys in parts.items()} for kind, parts in sorted(kinds.items())}


def _optuna(db: Path) -> dict[str, list[str]]:
    with sqlite3.connect(db) as con:
        trial_attrs = sorted({k for (k,) in con.execute("SELECT DISTINCT key FROM trial_user_attributes")})
        study_attrs = sorted({k for (k,) in con.execute("SELECT DISTINCT key FROM study_user_attributes")})
        metric_attrs: set[str] = set()
        for (value,) in con.execute("SELECT value_json FROM trial_user_attributes WHERE key = 'metrics'"):
            metric_attrs |= set(json.loads(value))
    return {"trial_user_attrs": trial_attrs, "study_user_attrs": study_attrs, "trial_metrics": sorted(metric_attrs)}


def structure(results: Path) -> dict[str, Any]:
    shape: dict[str, Any] = {}
    for path in sorted(results.rglob("*")):
        name = path.relative_to(results).as_posix()
        if "mlartifacts" in name or "compile-cache" in name or path.is_dir():
            continue
        if path.suffix == ".csv":
            with path.open() as f:
                shape[name] = {"columns": next(csv.reader(f))}
        elif path.suffix == ".json":
            shape[name] = {"keys": sorted(_keys(json.loads(path.read_text())))}
        elif path.name == "mlflow.db":
            shape[name] = _mlflow(path)
        elif path.name == "optuna.db":
            shape[name] = _optuna(path)
    return shape


def _outcome_free(names: list[str]) -> list[str]:
    """Names with what depends on the run's outcome taken out: the factorial terms that could be estimated, and
    the contrasts of a race that had contenders, are data, not structure."""
    kept = set()
    for name in names:
        if name.startswith("effect."):
            kind, _, rest = name.removeprefix("effect.").partition(".")
            name = f"effect.{kind}.*" + (rest[rest.rfind("."):] if rest.endswith((".high", ".low")) else "")
        if not name.startswith("recommendation.contrasts."):
            kept.add(name)
    return sorted(kept)


def comparable(shape: dict[str, Any]) -> dict[str, Any]:
    """`structure`'s shape with the outcome-dependent names normalised (two runs of one study may differ there)."""
    def walk(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return _outcome_free(value)
        return value
    return walk(shape)
