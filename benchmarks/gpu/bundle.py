"""What a `make gpu` command brings back, and how it lands in benchmarks/RESULTS.md on the CPU machine.

On the GPU machine, after every step: `summary.md` (each step's outcome and its results in brief) and one
tarball of the scratch folder (logs, each study's CSV, report and summary.json, the bench section) go to $OUT,
so a command stopped from outside still returns everything finished before. Only 8 files come back from $OUT,
so nothing else is written there. `python -m benchmarks.gpu merge TARBALL` then, here, writes the command's section
(and the bench's cuda section, when a bench step ran) into benchmarks/RESULTS.md, each step's record (runs.json) into
the ledger, and a compact export of each step's figures under benchmarks/gpu/runs/KIND/STEP.json: results/ is not
committed and the tarball leaves out the stores, so without the export no GPU figure would outlive the lease. The
front page's GPU table is then written again from the ledger, and what the merge superseded (an older lease's
section, a replaced cuda section) moves to benchmarks/history/gpu.md (benchmarks/gpu/front.py).
"""
from __future__ import annotations

import csv
import json
import re
import tarfile
from collections import Counter
from pathlib import Path

from benchmarks.gpu import front, ledger
from benchmarks.sections import RESULTS, retire, rewrite, section_pattern

SECTION = "section.md"  # in the tarball: the command's RESULTS.md section
RUNS_JSON = "runs.json"  # in the tarball: the ledger's record of each step the command ran
BENCH = "results/*/RESULTS.md"  # in the tarball: the files a bench step rewrote, each holding its cuda section
# Stores, checkpoints and MLflow's copies of the reports: large, and the CSVs, reports and JSON say it all.
SKIP_IN_TARBALL = (".db", ".db-journal", ".pt", "mlartifacts")
# Folders left out whole: compiled combinations' Inductor and Triton caches (cubin, ptx: megabytes each, and no file
# over 16 MiB comes back from $OUT), a killed trial's cold cache (`cold-*`, ablate.trial.compile_cache) and a
# decoded-data cache (.ablate-cache, ablate.workload.datacache).
SKIP_FOLDERS = ("compile-cache", ".ablate-cache")
SKIP_FOLDER_PREFIXES = ("cold-",)


def catalogue_problems(table: Path) -> list[str]:
    """What is wrong in a catalogue's results table: a failed trial, or a skipped one without its reason."""
    if not table.exists():
        return [f"no results table at {table.name}"]
    problems = []
    for row in csv.DictReader(table.open()):
        if row["state"] == "failed":
            problems.append(f"{row['combination']} failed: {row['reason']}")
        elif row["state"] == "skipped" and not row["reason"].strip():
            problems.append(f"{row['combination']} was skipped without a reason")
    return problems


def study_lines(results: Path) -> list[str]:
    """A study's results in brief: states, every failure and skip with its reason, the speed-ups with intervals."""
    lines: list[str] = []
    for table in sorted(results.glob("*/*-cuda.csv")):
        rows = list(csv.DictReader(table.open()))
        states = Counter(row["state"] for row in rows)
        lines.append(f"- {table.parent.name}: " + ", ".join(f"{n} {state}" for state, n in sorted(states.items())))
        reasons = Counter((row["state"], row["reason"].strip()) for row in rows
                          if row["state"] in ("failed", "skipped"))
        lines += [f"  - {state} x{n}: {reason or '(no reason recorded)'}" for (state, reason), n in reasons.items()]
    for summary in sorted(results.glob("*/report/**/summary.json")):
        data = json.loads(summary.read_text())
        unit = next((s.get("throughput_unit") for s in data.get("speedups", [])), "")
        lines += ["", f"{data.get('study')} ({data.get('protocol', {}).get('description', '')}):", "",
                  f"| combination | speed-up [95% CI] | throughput ({unit}) | accuracy change | peak MB |",
                  "|---|---|---|---|---|"]
        for s in data.get("speedups", []):
            interval = f" [{s['low']:.2f}, {s['high']:.2f}]" if s.get("low") is not None else ""
            change = s.get("accuracy_change")
            lines.append(f"| {s['combination']} | x{s['speedup']:.2f}{interval} | {_number(s.get('throughput'))} | "
                         f"{'' if change is None else f'{change:+.2f} pts'} | {_number(s.get('peak_memory_mb'))} |")
        if pick := data.get("recommendation"):
            lines.append(f"\nRecommended: {pick['combination']} (x{pick['speedup']:.2f})")
    return lines


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:,.0f}"


def _kept(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    """`info`, or None for what stays out of the tarball (a folder left out takes what it holds with it)."""
    name = Path(info.name).name
    if info.name.endswith(SKIP_IN_TARBALL):
        return None
    if info.isdir() and (name in SKIP_FOLDERS or name.startswith(SKIP_FOLDER_PREFIXES)):
        return None
    return info


def pack(scratch: Path, tarball: Path) -> None:
    """The scratch folder as one gzipped tarball, written whole or not at all."""
    tarball.parent.mkdir(parents=True, exist_ok=True)
    partial = tarball.with_suffix(".part")
    with tarfile.open(partial, "w:gz") as tar:
        tar.add(scratch, arcname=scratch.name, filter=_kept)
    partial.replace(tarball)


def merge(tarball: Path, into: Path = RESULTS, unpack_to: Path = Path("results/gpu"),
          ledger_path: Path | None = None, runs: Path | None = None) -> tuple[list[str], list[str]]:
    """Unpack `tarball` under `unpack_to`, write its sections into `into`, its steps' records into the ledger and
    their exports under `runs`; returns the sections' names and the steps recorded as done."""
    with tarfile.open(tarball) as tar:  # read before anything is made: a file that is no tarball leaves nothing
        top = {Path(name).parts[0] for name in tar.getnames()}
        if len(top) != 1:
            raise ValueError(f"{tarball} is not a `make gpu` tarball (one top folder expected, found {len(top)})")
        unpack_to.mkdir(parents=True, exist_ok=True)
        tar.extractall(unpack_to, filter="data")
    folder = unpack_to / top.pop()
    written = []
    section = folder / SECTION
    if not section.exists():
        raise ValueError(f"{tarball} holds no {SECTION}: was it written by `python -m benchmarks.gpu`?")
    text = section.read_text()
    kind = re.search(r"<!-- bench:(\S+):start", text)
    if kind is None:
        raise ValueError(f"{section} has no section markers")
    rewrite(into, kind.group(1), text.strip())
    written.append(kind.group(1))
    benches = [found.group(0) for bench in sorted(folder.glob(BENCH))  # in the order the steps ran
               if (found := section_pattern("cuda").search(bench.read_text()))]
    current = section_pattern("cuda").search(into.read_text()) if into.exists() else None
    # The cuda section merged before goes to the history; within one lease, the later bench's stays. A rerun on the
    # warm machine that reuses the lease's scratch folder brings the same section back: nothing to retire.
    if benches and not (current and benches == [current.group(0)]):
        retire(into, "cuda", front.history(into), front.HISTORY_HEADING)
    for found_section in benches:
        rewrite(into, "cuda", found_section)
        written.append("cuda")
    done = _record(folder, ledger_path or ledger.LEDGER, runs or ledger.RUNS, into)
    front.refresh(into, ledger_path or ledger.LEDGER, keep=kind.group(1))
    return written, done


def _record(folder: Path, ledger_path: Path, runs: Path, results: Path) -> list[str]:
    """runs.json's steps into the ledger, each with its export; the names of those now done (passed)."""
    if not (folder / RUNS_JSON).exists():
        return []
    entries = json.loads((folder / RUNS_JSON).read_text())
    steps = ledger.load(ledger_path)
    for entry in entries:
        if entry["outcome"] not in ledger.OUTCOMES:
            continue
        target = runs / ledger.slug(entry["kind"]) / f"{entry['step']}.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(export(entry, folder / "results" / entry["step"]), indent=1) + "\n")
        figures = f"{_relative(results)}#{ledger.anchor(entry['title'])}"
        ledger.record(steps, entry, figures, _relative(target))
    ledger.save(steps, ledger_path)
    return [e["step"] for e in entries if e["outcome"] == "passed"]


def _relative(path: Path) -> str:
    from benchmarks.gpu.steps import ROOT

    path = path.absolute()
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.as_posix()


def export(entry: dict, results: Path) -> dict:
    """One step's figures, small enough to commit: its record and notes, each results table's rows without their
    empty cells, each report's speed-ups, and a bench's section."""
    tables = {t.relative_to(results).as_posix(): [{k: v for k, v in row.items() if v not in ("", None)}
                                                  for row in csv.DictReader(t.open())]
              for t in sorted(results.glob("**/*-cuda.csv"))}
    speedups = {s.relative_to(results).as_posix(): json.loads(s.read_text()).get("speedups", [])
                for s in sorted(results.glob("**/report/**/summary.json"))}
    bench = results / "RESULTS.md"
    found = section_pattern("cuda").search(bench.read_text()) if bench.exists() else None
    return {"record": {k: v for k, v in entry.items() if k != "notes"}, "notes": entry.get("notes", []),
            "tables": tables, "speedups": speedups, "bench_section": found.group(0) if found else None}
