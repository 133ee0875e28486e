"""`make gpu`: what only a CUDA machine can check, in two commands that each fit a lent machine's 10 minutes.

    python -m benchmarks.gpu [--part 1|2 | --steps a,b] [--budget-s S] [--scratch DIR] [--out DIR] [--dry-run]
    python -m benchmarks.gpu pack              here: the wheels, data and commit a lent machine needs, in .whl/
    python -m benchmarks.gpu merge TARBALL     here: a part's results into benchmarks/RESULTS.md

Part 1: the GPU-marked tests, then the catalogue (every strategy and preset alone, one measurement each).
Part 2: ResNet-18 under AMP and channels_last, the GPU bench, then every transformer strategy alone.
Without --part or --steps both parts run, one after the other. mnist_cnn and gpt_kjv run by name (--steps).

Every step has a time limit (benchmarks/gpu/steps.py); --budget-s scales them down to fit. Logs and results go
to a scratch folder (default /tmp/ablate-gpu-LABEL); after every step `summary.md` and one tarball of that folder
go to --out ($OUT when set, else results/gpu). Exit status: 0 when every step passed, 1 when one failed or was
stopped at its limit, and 2 at once, with one line, where there is no CUDA device.
"""
from __future__ import annotations

import argparse
import os
import shlex
import signal
import subprocess
import sys
import tarfile
import time
from datetime import datetime, timezone
from pathlib import Path

from benchmarks.gpu.bundle import SECTION, catalogue_problems, merge, pack, study_lines
from benchmarks.gpu.steps import PARTS, ROOT, STEPS, Step, limits

NO_GPU = 2
REPORT_RESERVE_S = 30  # of a study step's limit: to rebuild its report when it was stopped at the limit
STOP_GRACE_S = 20  # SIGTERM, then this long for the study to record what finished, then SIGKILL
MIN_STEP_S = 15
# The start of every command on a lent machine: install the carried wheels, unpack the data, and say the commit
# (no .git travels). In step with ../shared/tools/device-wheels.sh's header, which packs .whl/.
PREFIX = ("python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "
          ".whl/*.whl && tar xzf .whl/datasets.tgz -C /tmp && export PYTHONPATH=$PWD:/tmp/site "
          "ABLATE_DATA_DIR=/tmp/datasets ABLATE_OFFLINE=1 ABLATE_COMMIT=$(cat .whl/commit) PYTHONUNBUFFERED=1 && "
          "python3 -c 'import mlflow, optuna, torchao' || exit 1; ")


def device_command(part: int) -> str:
    """The whole command for part `part` on a lent machine (carry .whl, time limit 600 s)."""
    return f"{PREFIX}python3 -m benchmarks.gpu --part {part}"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu", description=__doc__.splitlines()[0])
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--part", type=int, choices=sorted(PARTS), help="one of the lent machine's two commands")
    which.add_argument("--steps", help="comma-separated steps, in this order: " + ", ".join(STEPS))
    parser.add_argument("--budget-s", type=float, help="all the chosen steps together may take this long "
                                                       "(default: the sum of their limits)")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or "results/gpu"))
    parser.add_argument("--scratch", type=Path, help="logs and results (default: /tmp/ablate-gpu-LABEL)")
    parser.add_argument("--dry-run", action="store_true", help="print the plan and the lent machine's commands")
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["merge"]:
        return _merge(argv[1:])
    if argv[:1] == ["pack"]:
        return _pack()
    parser = _parser()
    args = parser.parse_args(argv)
    if args.steps:
        names = args.steps.split(",")
        if unknown := [s for s in names if s not in STEPS]:
            parser.error(f"unknown step {', '.join(unknown)}; choose from {', '.join(STEPS)}")
        label = "-".join(names)
    else:
        parts = [args.part] if args.part else sorted(PARTS)
        names = [n for p in parts for n in PARTS[p]]
        label = f"part{args.part}" if args.part else "all"
    if args.budget_s is not None and args.budget_s < MIN_STEP_S:
        parser.error(f"--budget-s must be at least {MIN_STEP_S}")
    budget = args.budget_s or sum(STEPS[n].limit_s for n in names)
    if args.dry_run:
        print(_plan(names, budget))
        return 0
    import torch

    if not torch.cuda.is_available():
        print("make gpu: no CUDA device here (torch.cuda.is_available() is False); nothing was run", file=sys.stderr)
        return NO_GPU
    return _run(names, budget, label, args.scratch or Path(f"/tmp/ablate-gpu-{label}"), args.out.absolute())


def _plan(names: list[str], budget: float) -> str:
    lines = ["On a lent GPU machine, carry [\".whl\"] (made here by `python -m benchmarks.gpu pack`), time limit "
             "600 s, and run:", ""]
    for part, steps in PARTS.items():
        total = sum(STEPS[n].limit_s for n in steps)
        lines += [f"part {part} ({total / 60:.1f} min of steps):", "", f"    {device_command(part)}", ""]
        lines += [f"    {n:<13} {STEPS[n].limit_s:>4} s  {STEPS[n].what}" for n in steps]
        lines.append("")
    every = sum(STEPS[n].limit_s for p in PARTS.values() for n in p)
    lines += [f"both parts: {every / 60:.1f} min of steps. Then here: python -m benchmarks.gpu merge TARBALL", "",
              f"this invocation: {', '.join(names)}, within {budget:.0f} s:"]
    lines += [f"    {n:<13} {limit:>6.0f} s" for n, limit in limits(names, budget).items()]
    return "\n".join(lines)


def _run(names: list[str], budget: float, label: str, scratch: Path, out: Path,
         steps: dict[str, Step] = STEPS) -> int:
    scratch.mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    deadline, carried = time.monotonic() + budget, 0.0
    rows: list[str] = []
    details: list[str] = []
    failed = False
    for name, share in limits(names, budget, steps).items():
        step, limit = steps[name], min(share + carried, deadline - time.monotonic())
        if limit < MIN_STEP_S:
            rows.append(f"| {name} | not run: the command's budget was spent | | |")
            failed = True
            _write(label, rows, details, scratch, out)
            continue
        print(f"make gpu: {name} (limit {limit:.0f} s): {shlex.join(step.command(scratch))}", flush=True)
        began = time.monotonic()
        outcome, notes = _run_step(step, limit, scratch)
        took = time.monotonic() - began
        carried = max(0.0, limit - took)  # a step that ends early leaves its time to the next
        failed |= outcome != "passed"
        rows.append(f"| {name} | {outcome} | {limit:.0f} | {took:.0f} |")
        details += ([f"### {name}", "", *notes, ""] if notes else [])
        print(f"make gpu: {name}: {outcome} ({took:.0f} s)", flush=True)
        _write(label, rows, details, scratch, out)
    print((scratch / "summary.md").read_text())
    return 1 if failed else 0


def _run_step(step: Step, limit: float, scratch: Path) -> tuple[str, list[str]]:
    log_path = scratch / f"{step.name}.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(step.command(scratch), cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)  # its own group: stopping it stops its trials too
        reserve = REPORT_RESERVE_S if step.study and limit > 3 * REPORT_RESERVE_S else 0
        try:
            status = process.wait(timeout=limit - reserve)
            outcome = "passed" if status == 0 else f"FAILED (exit {status})"
        except subprocess.TimeoutExpired:
            _stop(process)
            outcome = f"stopped at its limit ({limit:.0f} s), partial results kept"
            if step.study:
                try:
                    subprocess.run(step.report_command(scratch), cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                   timeout=max(reserve, MIN_STEP_S))
                except subprocess.TimeoutExpired:
                    outcome += "; its report could not be rebuilt in time"
    try:
        return _judged(step, outcome, scratch, log_path)
    except Exception as error:  # noqa: BLE001 - a summary that cannot be read must not lose the next steps
        return outcome, [f"- the step's results could not be summarised: {type(error).__name__}: {error}"]


def _judged(step: Step, outcome: str, scratch: Path, log_path: Path) -> tuple[str, list[str]]:
    """The step's outcome, with a catalogue's problems, and its notes for the summary."""
    notes: list[str] = []
    if step.name == "gpu-tests":
        notes = [f"- {line}" for line in log_path.read_text().splitlines() if line.startswith(("FAILED", "ERROR"))]
        notes += [f"- {line}" for line in log_path.read_text().splitlines()[-1:]]
    if step.study:
        results = step.results(scratch)
        if step.name in ("catalogue", "transformers"):
            problems = [p for t in results.glob("*/*-cuda.csv") for p in catalogue_problems(t)]
            if problems and outcome == "passed":
                outcome = "FAILED (a trial failed or skipped without a reason)"
            notes += [f"- problem: {p}" for p in problems]
        notes += study_lines(results)
    return outcome, notes


def _stop(process: subprocess.Popen) -> None:
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def _machine() -> str:
    import torch

    from ablate.trial.machine import commit

    smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True)
    return (f"{torch.cuda.get_device_name(0)}, driver {smi.stdout.strip() or 'unknown'}, CUDA {torch.version.cuda}, "
            f"torch {torch.__version__}, commit {commit()}, {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC")


def _write(label: str, rows: list[str], details: list[str], scratch: Path, out: Path) -> None:
    """summary.md and the part's RESULTS.md section in the scratch folder; summary.md and the tarball to `out`."""
    summary = "\n".join([f"Machine: {_machine()}", "", "| step | outcome | limit s | took s |", "|---|---|---|---|",
                         *rows, "", *details]) + "\n"
    (scratch / "summary.md").write_text(summary)
    (out / "summary.md").write_text(summary)
    kind = f"gpu-{label}"
    (scratch / SECTION).write_text(f"<!-- bench:{kind}:start (written by `make gpu`, merged with `python -m "
                                   f"benchmarks.gpu merge`) -->\n## `make gpu` {label}\n\n{summary}"
                                   f"<!-- bench:{kind}:end -->\n")
    pack(scratch, out / f"gpu-{label}.tgz")


def _merge(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu merge",
                                     description="write a `make gpu` tarball's sections into benchmarks/RESULTS.md")
    parser.add_argument("tarball", type=Path)
    args = parser.parse_args(argv)
    if not args.tarball.is_file():
        print(f"merge: no such file: {args.tarball}", file=sys.stderr)
        return 2
    try:
        written = merge(args.tarball)
    except (ValueError, OSError, tarfile.TarError) as error:
        print(f"merge: {' '.join(str(error).split())}", file=sys.stderr)
        return 2
    print(f"merge: wrote the {', '.join(written)} section(s) of benchmarks/RESULTS.md; "
          "results unpacked in results/gpu/")
    return 0


def _pack() -> int:
    """Here, before lending: the wheels and data (device-wheels.sh), the commit, and the size of what travels."""
    from ablate.trial.machine import commit

    script = ROOT.parent / "shared" / "tools" / "device-wheels.sh"
    if not script.exists():
        print(f"pack: {script} not found (it packs the wheels a lent machine lacks)", file=sys.stderr)
        return 2
    (ROOT / ".git" / "info").mkdir(parents=True, exist_ok=True)  # the script notes .whl/ there; a clone may lack it
    if subprocess.run(["bash", str(script)], cwd=ROOT).returncode != 0:
        return 1
    (ROOT / ".whl" / "commit").write_text(commit() + "\n")
    size = carried_bytes()
    print(f"pack: .whl/commit says {commit()}; a device call carries {size / 2**20:.1f} MiB (limit 64 MiB)")
    return 0 if size <= 64 * 2**20 else 1


def carried_bytes() -> int:
    """What a device call carries: the files git tracks or would add, plus .whl/."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.split("\0")
    files = [ROOT / f for f in listed if f] + [p for p in (ROOT / ".whl").rglob("*") if p.is_file()]
    return sum(f.stat().st_size for f in files if f.is_file())


if __name__ == "__main__":
    sys.exit(main())
