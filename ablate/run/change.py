"""`ablate compare A B`: two studies' answers read back from their summary.json files and set side by side.

A change is the same study measured twice: after a torch upgrade, on another machine, with a new model version.
It reads what each study's report wrote for scripts (summary.json), never the Optuna storage: the two may sit on
different machines and the summary carries what a comparison needs - each combination's log speed-up with its
standard error and degrees of freedom, the baseline's own level across its blocks, the machine field by field and
the workload's settings. The statistics are `ablate.stats.changes`; how it reads, `ablate.render.changes` (its
table and page: `ablate.render.change_table`, `ablate.render.change_page`).

Two studies of different workloads (model, dataset, task, budget) would compare different things, so they are
refused in one line naming the settings that differ, unless the user pairs them anyway (`--pair-anyway`: a CPU
against a GPU is such a pairing, as is a deliberately changed budget). A summary written before it recorded its
workload is paired by its study file's hash instead.
"""
from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ablate.config.choices import BASELINE
from ablate.config.validate import StudyError
from ablate.render.change_page import FIGURE, page
from ablate.render.change_table import table
from ablate.render.changes import ComparedStudy, StudyChange, as_json
from ablate.stats import changes
from ablate.stats.changes import Side
from ablate.store.files import replaced
from ablate.tracking.change_run import log_change
from ablate.tracking.view import served
from ablate.trial import metrics as metric

SUMMARY = "summary.json"
SCHEMA_VERSION = 1  # the summary.json version this reads (ablate.render.summaries.SCHEMA_VERSION)
# The machine's fields in the order a reader compares them (ablate.trial.machine.Machine's), named for people.
ENVIRONMENT = (("device_name", "device name"), ("host", "host"), ("python", "python"), ("torch", "torch"),
               ("threads", "threads"), ("cuda", "cuda"), ("cudnn", "cudnn"), ("driver", "driver"),
               ("gpu_uuid", "gpu uuid"), ("commit", "commit"))
UNKNOWN = "unknown"


def find_summary(where: Path, study: str | None = None) -> Path:
    """The summary.json `where` names: the file itself, or the one report under a results or study folder (`study`
    picks among several). `StudyError` in one line where there is none, or several and no way to choose."""
    if where.is_file():
        return where
    if not where.is_dir():
        raise StudyError(f"{where}: no such file or folder; give a results folder, a study's folder in it, or a "
                         f"{SUMMARY}")
    # RESULTS/STUDY/report/SEARCH/summary.json, or a study's folder; not the copies MLflow keeps of it as artifacts
    found = sorted([*where.glob(f"*/report/*/{SUMMARY}"), *where.glob(f"report/*/{SUMMARY}")])
    if study is not None:
        found = [p for p in found if p.parents[2].name == study]
    if not found:
        named = f" for study {study}" if study else ""
        raise StudyError(f"{where}: no report's {SUMMARY}{named} under it; `ablate report STUDY --results {where}` "
                         "writes one from a stored study")
    if len(found) > 1:
        choices = sorted({f"{p.parents[2].name} ({p.parent.name})" for p in found})
        raise StudyError(f"{where} holds {len(found)} reports: {', '.join(choices)}; name the study with --study, "
                         f"or give its {SUMMARY}")
    return found[0]


def read(path: Path) -> dict[str, Any]:
    """A summary.json, refused in one line where it is not one this code reads."""
    try:
        written = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise StudyError(f"{path}: not a readable {SUMMARY} ({error})") from None
    if not isinstance(written, dict) or "speedups" not in written:
        raise StudyError(f"{path}: not an ablate {SUMMARY} (no speedups)")
    if written.get("schema_version", 1) > SCHEMA_VERSION:
        raise StudyError(f"{path}: {SUMMARY} version {written['schema_version']}, newer than this ablate reads "
                         f"({SCHEMA_VERSION}); upgrade ablate")
    return written


def differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> tuple[str, ...]:
    """The workload settings in which two summaries differ, dotted (`budget.train_samples`), and the device type
    where one measured a CPU and the other a GPU; () where they measure the same thing."""
    kinds = {_device_type(s["device"]) for s in (a, b)}
    device = ("device type",) if len(kinds) > 1 else ()
    if "workload" not in a or "workload" not in b:  # written before it recorded its workload: the file's hash
        same = a.get("study") == b.get("study") and a.get("study_hash") == b.get("study_hash")
        return device + (() if same else ("study file (a summary written before its workload was recorded)",))
    flat_a, flat_b = _flat(a["workload"]), _flat(b["workload"])
    return device + tuple(k for k in dict.fromkeys([*flat_a, *flat_b]) if flat_a.get(k) != flat_b.get(k))


def study(written: Mapping[str, Any], label: str, source: Path) -> ComparedStudy:
    """One side as the render shows it."""
    machine = written.get("machine") or {k: written.get(k, UNKNOWN) for k in ("torch", "commit")}  # before format 1
    entries = {e["combination"]: e for e in written["speedups"]}
    baseline = entries.get(BASELINE)
    rec = written.get("recommendation")
    workload = _flat(written.get("workload") or {})
    settings = {"study": str(written.get("study")), **{k: str(v) for k, v in workload.items()},
                "protocol": str(written.get("protocol", {}).get("description", UNKNOWN))}
    return ComparedStudy(
        label, str(source), str(written.get("study")), str(written.get("device")),
        {name: str(machine.get(key, UNKNOWN)) for key, name in ENVIRONMENT}, settings,
        next((str(e["throughput_unit"]) for e in entries.values() if "throughput_unit" in e), "samples/s"),
        rec["combination"] if rec else None, (rec["speedup"], rec.get("low"), rec.get("high")) if rec else None,
        {c: e[metric.THROUGHPUT] for c, e in entries.items() if e.get(metric.THROUGHPUT) is not None},
        {c: _parity(e) for c, e in entries.items()},
        baseline.get("phase_shares") if baseline else None,
        {c: (e["speedup"], e.get("low"), e.get("high")) for c, e in entries.items()},
        written.get("mlflow_parent_run"))


def sides(written: Mapping[str, Any]) -> dict[str, Side]:
    """Every row a summary can be compared on: each measured combination's log speed-up (the baseline's own x1.00,
    true by definition, is left out), each never-measured one's prediction (a fraction was screened), and the
    baseline's own level under `changes.BASELINE_ABSOLUTE`."""
    out: dict[str, Side] = {}
    level = written.get("baseline_level")
    if level:
        out[changes.BASELINE_ABSOLUTE] = Side(level["log"], level["log_se"], _df(level["df"]))
    for e in written["speedups"]:
        if e["combination"] == BASELINE:  # x1.00 by definition
            continue
        out[e["combination"]] = Side(math.log(e["speedup"]), e.get("log_se"), _df(e.get("df")))
    for e in (written.get("recommendation") or {}).get("not_raced", []):
        if e.get("measured") is False and e["combination"] not in out:
            out[e["combination"]] = Side(math.log(e["predicted_speedup"]), e.get("log_se"), _df(e.get("df")),
                                         predicted=True)
    return out


def compare(a_path: Path, b_path: Path, margin: float = changes.DEFAULT_MARGIN, threshold: float | None = None,
            pair_anyway: bool = False, alpha: float = 0.05) -> StudyChange:
    """A change from the study `a_path` reports to the one `b_path` does; `StudyError` (nothing compared) where
    they measure different workloads and the user did not pair them anyway."""
    a, b = read(a_path), read(b_path)
    differ = differences(a, b)
    if differ and not pair_anyway:
        raise StudyError(f"A and B measure different workloads ({', '.join(differ)} differ); compare them anyway "
                         "with --pair-anyway")
    rows = changes.change(sides(a), sides(b), margin=margin, alpha=alpha)
    beyond = [c.row for c in changes.moved_beyond(rows, threshold)] if threshold is not None else []
    return StudyChange(study(a, "A", a_path), study(b, "B", b_path), rows, margin, alpha, threshold, beyond,
                       differ if pair_anyway else ())


def command(a_where: Path, b_where: Path, study_name: str | None, margin: float, threshold: float | None,
            pair_anyway: bool, out: Path | None, results: Path) -> int:
    """`ablate compare`: the change printed, its page and change.json written (under `out`, else `default_out`), its
    run logged to MLflow beside B's study (its results folder's store, or MLFLOW_TRACKING_URI: where B's parent run
    is); the exit status, 1 where a row moved beyond `threshold`."""
    a, b = find_summary(a_where, study_name), find_summary(b_where, study_name)
    change = compare(a, b, margin, threshold, pair_anyway)
    out = out or default_out(results, a, b)
    out.mkdir(parents=True, exist_ok=True)
    with replaced(out / "change.json") as file:
        file.write(json.dumps(as_json(change), indent=2) + "\n")
    print(table(change))
    md = page(change, out)
    print(f"page:\n  {md}\nfor scripts:\n  {out / 'change.json'}")
    store = results_of(b) or results
    logged = log_change(store, change.b.name, f"{change.a.name}: {out.name}",
                        {"A": change.a.mlflow_run, "B": change.b.mlflow_run}, mlflow_metrics(change),
                        [out / "change.json", md, md.with_suffix(".html"), out / FIGURE])
    if isinstance(logged, str):
        print(f"ablate: warning: the change is not in MLflow: {logged}", file=sys.stderr)
        return 1 if change.beyond else 0
    local = not served(logged.uri)  # a database file: `ablate ui` serves it
    print(f"in MLflow, both studies' runs side by side{' (`ablate ui --results DIR`)' if local else ''}:\n"
          f"  {logged.url}" + (f"\nDIR, the store it is in:\n  {store}" if local else ""))
    for side in logged.missing:
        run = (change.a if side == "A" else change.b).mlflow_run
        print(f"  study {side}: " + ("its summary recorded no MLflow run" if run is None else
                                     f"its parent run is in another store (its own results folder's):\n    {run}"))
    return 1 if change.beyond else 0


def default_out(results: Path, a_path: Path, b_path: Path) -> Path:
    """Where a change's page and JSON go unless the user says: under the results folder, named after both sides'
    results folders."""
    def name(p: Path) -> str:
        return (results_of(p) or p.parent).name

    return results / "changes" / f"{name(a_path)}-vs-{name(b_path)}"


def results_of(summary: Path) -> Path | None:
    """The results folder a report's summary.json sits in (RESULTS/STUDY/report/SEARCH/summary.json); None where it
    sits elsewhere."""
    parents = summary.resolve().parents
    return parents[3] if len(parents) > 3 and parents[1].name == "report" else None


def mlflow_metrics(change: StudyChange) -> dict[str, float]:
    """The change's figures as its MLflow run's metrics: the rows of each verdict, the baselines' throughput ratio
    (B / A) and whether the headline changed (1) or not (0)."""
    out = {f"rows_{verdict.replace(' ', '_')}": float(sum(c.verdict == verdict for c in change.rows
                                                          if c.row != changes.BASELINE_ABSOLUTE))
           for verdict in (changes.MOVED, changes.SAME, changes.NOT_SHOWN, changes.PREDICTED, changes.ONLY_A,
                           changes.ONLY_B)}
    absolute = next((c.ratio for c in change.rows if c.row == changes.BASELINE_ABSOLUTE and c.ratio is not None), None)
    if absolute is not None:
        out["baseline_throughput_ratio"] = absolute
    out["headline_changed"] = float(change.a.headline != change.b.headline)
    return out


def _parity(e: Mapping[str, Any]) -> str:
    if e.get("parity"):
        return str(e["parity"]["verdict"])
    return "not needed" if e.get("accuracy_unmeasured") else "not measured"


def _df(df: Any) -> float:
    return math.inf if df is None else float(df)


def _device_type(device: Any) -> str:
    return str(device).split(":")[0]


def _flat(settings: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in settings.items():
        if isinstance(v, Mapping):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out
