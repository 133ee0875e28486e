"""The results table: one row per combination, its speed-up the protocol's one estimate (ablate.stats.protocol).

Energy per sample is a paired ratio against the baseline too (`ablate.stats.speedups.energy_ratios`); where no
measurement of a device counted energy its column says so ("not counted here") rather than stay blank, which
would read as a combination that failed to count. The default table shows it only where something was counted,
and keeps to its width then too.
"""
from __future__ import annotations

import csv
import textwrap
from collections import Counter
from pathlib import Path
from typing import Any, Mapping

from tabulate import tabulate

from ablate.config.choices import short_label
from ablate.stats.answer.comparison import Comparison, DeviceComparisons
from ablate.stats.race.finalists import NOT_NEEDED, NOT_YET
from ablate.stats.screening.fractioned import MODELLED
from ablate.store.files import replaced
from ablate.trial import metrics as metric
from ablate.words import factor, interval, points

# The throughput column is keyed as a trial's metric is (`metric.THROUGHPUT`); its header names the study's unit
# (`columns`): samples/s, or tokens/s for a language model.
COLUMNS = ["combination", "state", metric.THROUGHPUT, "speed-up", "ci low", "ci high", "blocks", "test acc %", "Δ acc",
           "acc from", "to target s", "to target e2e s", "peak MB", "energy/sample", "first step s", "data wait %",
           "reason"]
NOT_REACHED = "not reached"
ENERGY = "energy/sample"  # the energy ratio's column; "energy low" and "energy high" hold its interval
NOT_COUNTED = "not counted here"  # no measurement on the device counted energy (no RAPL or NVML counter readable)
REFERENCE = "reference"  # the baseline's accuracy cells: what every other row's change is measured from
SAME_TRAINING = "same training as baseline"  # a row whose accuracy is the baseline's training (`same_training`)
COMPACT_WIDTH = 100  # the default table fits a 100-column terminal; the full one is behind --full-table


def columns(unit: str = "samples") -> list[str]:
    """The table's columns, the throughput one named in the study's unit (tokens/s for a language model)."""
    return [_header(c, unit) for c in COLUMNS]


def _header(key: str, unit: str) -> str:
    """A column's key as its header says it: the throughput column's in the study's unit."""
    return f"{unit}/s" if key == metric.THROUGHPUT else key


def rows(compared: list[DeviceComparisons]) -> list[dict[str, Any]]:
    """One row per combination, rendered from its comparison (`ablate.stats.answer.comparison`): speed-ups, accuracy
    changes and parity verdicts against the baseline of the same device, never another's."""
    table = []
    for device in sorted(compared, key=lambda d: d.device):
        for c in device.rows:
            r, s, p, m, e = c.record, c.interval, c.parity, c.record.metrics, c.energy_interval
            table.append({
                "trial": r.number,
                "combination": r.combination,
                "state": r.state,
                metric.THROUGHPUT: c.throughput,  # the baseline's times the speed-up (`ablate.stats.answer.comparison`)
                "speed-up": c.point,
                "ci low": s.low if s else None,
                "ci high": s.high if s else None,
                "blocks": c.blocks,
                "noise": c.noise,
                "measurements": len([x for x in r.measurements if x.complete]) or None,
                "test acc %": r.accuracy,
                "Δ acc": c.accuracy_change,
                "parity": p.verdict if p else None,
                "same training": same_training(c),
                "parity probably below": p.probably_below if p else None,  # uncertain, its change past the tolerance
                "parity low": p.low if p else None,
                "parity high": p.high if p else None,
                "seeds": p.seeds if p else None,
                "acc from": r.accuracy_from,
                # Time to the study's target accuracy: measured in the trials that trained accuracy.
                "to target s": _to_target(m, metric.TIME_TO_TARGET_S),
                "to target e2e s": _to_target(m, metric.TIME_TO_TARGET_E2E_S),
                "peak MB": c.peak_memory_mb,
                ENERGY: c.energy_ratio if device.energy_counted else NOT_COUNTED,
                "energy low": e.low if e else None,
                "energy high": e.high if e else None,
                "first step s": m.get(metric.FIRST_STEP_S),
                "data wait %": 100 * m[metric.DATA_WAIT_FRACTION] if metric.DATA_WAIT_FRACTION in m else None,
                "reason": r.reason or (f"accuracy not measured: {r.accuracy_note}" if r.accuracy_note else "")
                or (c.unmeasured or ""),
                "device": c.device,
                "host": r.machine.get("host", "unknown"),
            })
    return table


def same_training(c: Comparison) -> str | None:
    """What the accuracy columns say instead of a [0, 0] interval where there is nothing to measure: the baseline is
    the reference, and a combination that trains as it does has its accuracy (`Comparison.trains_as_baseline`)."""
    if c.record.accuracy is None:
        return None
    return REFERENCE if c.is_baseline else SAME_TRAINING if c.trains_as_baseline else None


def csv_path(results_dir: Path, study_name: str, search: str, device_type: str) -> Path:
    return results_dir / study_name / f"{search}-{device_type}.csv"


def _to_target(metrics: Mapping[str, float], key: str) -> float | str | None:
    if metric.TARGET_REACHED not in metrics:
        return None
    return metrics[key] if metrics[metric.TARGET_REACHED] else NOT_REACHED


def render(table: list[dict[str, Any]], unit: str = "samples") -> str:
    """Every column (--full-table): wide, for a wide terminal or a file."""
    def cell(key: str, value: Any) -> Any:
        if value is None:
            return ""
        if key == "speed-up":
            return f"x{value:.2f}"
        if key == ENERGY and isinstance(value, float):
            return factor(value)
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
    shown.insert(shown.index(ENERGY) + 1, "energy 95% CI")

    def value(row: dict[str, Any], key: str) -> Any:
        if key == "95% CI":
            return "" if row["ci low"] is None else interval(row["ci low"], row["ci high"])
        if key == "energy 95% CI":
            return "" if row["energy low"] is None else interval(row["energy low"], row["energy high"])
        return cell(key, row[key])
    headers = [_header(k, unit) for k in shown]
    return tabulate([[value(r, k) for k in shown] for r in table], headers=headers, disable_numparse=True)


def render_compact(table: list[dict[str, Any]], tolerance: float, width: int = COMPACT_WIDTH) -> str:
    """The answer in `width` columns: rank, combination, speed-up with its interval, accuracy change with the
    parity flag, state; skipped combinations folded into one line per reason below it."""
    shown = [r for r in table if r["state"] != "skipped"]
    labels = [short_label(r["combination"]) for r in shown]
    if len(set(labels)) < len(labels):  # shortening must never make two combinations read the same
        labels = [r["combination"] for r in shown]
    several = len({r["device"] for r in table}) > 1

    def speedup(r: dict[str, Any]) -> str:
        if r["speed-up"] is None:
            return ""
        return factor(r["speed-up"], r["ci low"], r["ci high"])

    def accuracy(r: dict[str, Any]) -> str:
        if r["Δ acc"] is None:
            return {NOT_NEEDED: "not needed", NOT_YET: "not yet"}.get(r["reason"], "")
        if r.get("same training"):
            return r["same training"]
        if r.get("parity") is None:  # no shared seed with the baseline's group: a difference, but no verdict
            return f"{r['Δ acc']:+.2f} no verdict"
        probably = ", probably below" if r.get("parity probably below") else ""
        return f"{points(r['Δ acc'], r['parity low'], r['parity high'])} {r['parity']}{probably}"

    def energy(r: dict[str, Any]) -> str:  # the point: its interval would not fit beside the others (--full-table)
        return factor(r[ENERGY]) if isinstance(r.get(ENERGY), float) else ""

    counted = any(isinstance(r.get(ENERGY), float) for r in shown)  # else no column: not a column of blanks
    # Where rows rest on different numbers of blocks (a race after screening), say how many: a row measured once
    # rests on one process, or on the screening model where one was fitted, and the rank alone would not say so.
    mixed = len({r.get("blocks") for r in shown if r.get("blocks")}) > 1
    body = [[str(i) if r["speed-up"] is not None else "", label, speedup(r),
             *([str(r.get("blocks") or "")] if mixed else []), accuracy(r), *([energy(r)] if counted else []),
             r["state"] + (f" ({r['device'][:12]})" if several else "")]
            for i, (r, label) in enumerate(zip(shown, labels), start=1)]
    headers = ["#", "combination", "speed-up [95% CI]", *(["blocks"] if mixed else []), "Δ acc [95% CI] parity",
               *(["energy"] if counted else []), "state"]
    text = fitted_table(body, headers, width)
    if max(map(len, text.splitlines())) > width and all(r["state"] == "complete" for r in shown):
        # A narrow terminal: no column of "complete".
        text = fitted_table([row[:-1] for row in body], headers[:-1], width)
    notes = _notes(table, tolerance, mixed=mixed, counted=counted)
    wrapped = [textwrap.fill(n, width, subsequent_indent="  ") for n in notes]
    return text + "\n\n" + "\n".join(wrapped)


def _notes(table: list[dict[str, Any]], tolerance: float, *, mixed: bool, counted: bool) -> list[str]:
    """The lines under the compact table: what its verdicts, block counts and energy mean, and each skip or failure's
    reason once."""
    notes = [f"Δ acc: test accuracy change in points, mean over shared training seeds; parity ok = the interval is "
             f"above -{tolerance:g}, below = under it (never recommended), uncertain = it straddles it (probably below "
             f"where the change itself is under -{tolerance:g}: never recommended either)."]
    if any(r.get("same training") == SAME_TRAINING for r in table if r["state"] != "skipped"):
        notes.append(f"{SAME_TRAINING}: its techniques change no number training computes, so it trains to "
                     "the baseline's accuracy; no interval is measured for it.")
    if mixed:
        once = ("shows the screening model's estimate, fitted to every combination's reading: one process alone can "
                "read well above its truth (docs/measuring.md, \"Rows read once\")."
                if any(r.get("noise") == MODELLED for r in table) else
                "can read well above its truth: the race measures again only the fastest by screening "
                "(docs/measuring.md).")
        notes.append(f"blocks: how many blocks a speed-up comes from, each its own process beside the baseline's."
                     f" A row from one block {once}")
    if counted:
        notes.append("energy: joules per sample over the timed windows, over the baseline's (below x1: less energy; "
                     "the interval is in --full-table); RAPL counts a CPU's whole packages, NVML the whole GPU "
                     "(docs/measuring.md).")
    for state in ("skipped", "failed"):
        reasons = Counter(r["reason"] for r in table if r["state"] == state)
        for reason, n in reasons.most_common():
            notes.append(f"{n} {'combination' if n == 1 else 'combinations'} {state}: {reason}")
    return notes


def fitted_table(body: list[list[str]], headers: list[str], width: int) -> str:
    """The table with its combination column narrowed (it wraps) until the whole table fits `width`, or 20 wide."""
    room = width
    while True:
        text = tabulate(body, headers=headers, disable_numparse=True,
                        maxcolwidths=[room if i == 1 else None for i in range(len(headers))])
        over = max(map(len, text.splitlines())) - width
        if over <= 0 or room <= 20:
            return text
        room -= over


def save(compared: list[DeviceComparisons], study: Any, results_dir: Path, search: str, device_type: str
         ) -> tuple[list[dict[str, Any]], Path]:
    """The study's results table (`rows`), written to its CSV: for `ablate run` at its end and `ablate report`
    alike, so a rebuilt table is the same table."""
    table = rows(compared)
    path = csv_path(results_dir, study.name, search, device_type)
    write_csv(table, path, study.throughput_unit)
    return table, path


def write_csv(table: list[dict[str, Any]], path: Path, unit: str = "samples") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with replaced(path, newline="") as f:  # a reader never finds half a table
        writer = csv.DictWriter(f, fieldnames=["trial", *columns(unit), "noise", "measurements", "parity", "parity low",
                                               "parity high", "parity probably below", "seeds", "same training",
                                               "energy low", "energy high", "device", "host"])
        writer.writeheader()
        writer.writerows({_header(k, unit): v for k, v in row.items()} for row in table)
