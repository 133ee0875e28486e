"""`make gpu`: what only a CUDA machine can check, in two commands that each fit a lent machine's 10 minutes.

    python -m benchmarks.gpu [--part 1|2 | --steps a,b] [--budget-s S] [--scratch DIR] [--out DIR] [--dry-run]
    python -m benchmarks.gpu pack              here: the wheels, data and commit a lent machine needs, in .whl/
    python -m benchmarks.gpu merge TARBALL     here: a part's results into benchmarks/RESULTS.md

Part 1: the GPU-marked tests, then the catalogue (every strategy and preset alone, one measurement each).
Part 2: ResNet-18 under AMP and channels_last, the GPU bench, then every transformer strategy alone.
Without --part or --steps both parts run, one after the other. mnist_cnn and gpt_kjv run by name (--steps).

Every step has a time limit that bounds it whole, its stop and a study's report rebuild included; --budget-s S
(from this command's start, the last summary and tarball included) shares S among the steps in proportion to their
shares. benchmarks/gpu/steps.py has the arithmetic; --dry-run prints it. Logs and results go to a scratch folder
(default /tmp/ablate-gpu-LABEL), with `pip check` and `pip list`; after every step `summary.md` and one tarball of
that folder go to --out ($OUT when set, else results/gpu). Exit status: 0 when every step passed, 1 when one failed
or was stopped at its limit, and 2 at once, with one line, where there is no CUDA device.
"""
from __future__ import annotations

import argparse
import os
import shlex
import signal
import subprocess
import sys
import tarfile
import textwrap
import time
from datetime import datetime, timezone
from pathlib import Path

from benchmarks.gpu.bundle import SECTION, catalogue_problems, merge, pack, study_lines
from benchmarks.gpu.steps import (
    COMMAND_END_S,
    COMMAND_S,
    END_RESERVE_S,
    MIN_STEP_S,
    PARTS,
    REPORT_RESERVE_S,
    ROOT,
    SETUP_PLANNED_S,
    STEPS,
    STOP_GRACE_S,
    Step,
    limits,
    stop_reserve,
)

NO_GPU = 2
# The import check: what the steps import, not only the carried wheels' names - ablate's tracking (MLflow's client),
# the runner (Optuna), the report, MLflow's SQL store (SQLAlchemy, Alembic), torchao's float8.
IMPORT_CHECK = ("python3 -c 'import ablate.run.runner, ablate.render.report, mlflow.store.tracking.sqlalchemy_store, "
                "torchao.float8' || exit 1; ")
# The start of every command on a lent machine: install the carried wheels (not again on a warm machine, where a
# part before left them), unpack the data, say the commit (no .git travels), and check the imports. The install and
# the data are in step with ../shared/tools/device-wheels.sh's header, which packs .whl/.
PREFIX = ("[ -d /tmp/site/mlflow ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir "
          "--upgrade --target /tmp/site .whl/*.whl && tar xzf .whl/datasets.tgz -C /tmp && export "
          "PYTHONPATH=$PWD:/tmp/site ABLATE_DATA_DIR=/tmp/datasets ABLATE_OFFLINE=1 ABLATE_COMMIT=$(cat .whl/commit) "
          f"PYTHONUNBUFFERED=1 && {IMPORT_CHECK}")
BUDGET = f"$(({COMMAND_END_S} - SECONDS))"  # bash: the seconds left to COMMAND_END_S since the command began


def device_command(part: int) -> str:
    """The whole command for part `part` on a lent machine (carry .whl, time limit COMMAND_S)."""
    return f"{PREFIX}python3 -m benchmarks.gpu --part {part} --budget-s {BUDGET}"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu", description=__doc__.splitlines()[0])
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--part", type=int, choices=sorted(PARTS), help="one of the lent machine's two commands")
    which.add_argument("--steps", help="comma-separated steps, in this order: " + ", ".join(STEPS))
    parser.add_argument("--budget-s", type=float, help="seconds from this command's start to its end, the last "
                                                       "summary and tarball included (default: the steps' shares "
                                                       f"and {END_RESERVE_S} s)")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or "results/gpu"))
    parser.add_argument("--scratch", type=Path, help="logs and results (default: /tmp/ablate-gpu-LABEL)")
    parser.add_argument("--dry-run", action="store_true", help="print the plan and the lent machine's commands")
    return parser


def main(argv: list[str] | None = None) -> int:
    started = time.monotonic()  # --budget-s counts from here: the interpreter's start is a few ms before
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
    least = END_RESERVE_S + MIN_STEP_S + STOP_GRACE_S
    if args.budget_s is not None and args.budget_s < least:
        parser.error(f"--budget-s must be at least {least} s (got {args.budget_s:g}): the set-up before it took "
                     "too long")
    budget = args.budget_s or sum(STEPS[n].limit_s for n in names) + END_RESERVE_S
    if args.dry_run:
        print(_plan(names, budget))
        return 0
    import torch

    if not torch.cuda.is_available():
        print("make gpu: no CUDA device here (torch.cuda.is_available() is False); nothing was run", file=sys.stderr)
        return NO_GPU
    return _run(names, budget, label, args.scratch or Path(f"/tmp/ablate-gpu-{label}"), args.out.absolute(),
                STEPS, started)


def _plan(names: list[str], budget: float) -> str:
    lines = [f"On a lent GPU machine: carry [\".whl\"] (made here by `python -m benchmarks.gpu pack`), time limit "
             f"{COMMAND_S} s, and run each part as one command:", ""]
    for part in PARTS:
        lines += [f"part {part}:", "", f"    {device_command(part)}", ""]
    lines += [textwrap.fill(
        f"A part is to end {COMMAND_END_S} s into its command ({COMMAND_S - COMMAND_END_S} s to spare). bash's "
        "SECONDS counts from the command's start, so the install, unpack and import check come out of the part's "
        f"budget: --budget-s {BUDGET}. Of the budget, {END_RESERVE_S} s are kept for the last summary and tarball; "
        "the rest is shared among the steps in proportion to their shares, and time a step leaves unused goes to the "
        f"next. A step's limit bounds it whole: it gets SIGTERM at its limit less {STOP_GRACE_S} s of grace before "
        f"SIGKILL, and a study {REPORT_RESERVE_S} s earlier still, to rebuild its report from what finished. The "
        f"limits below are for a set-up of {SETUP_PLANNED_S} s (a warm machine reinstalls nothing: the steps then "
        "get more).", width=110), ""]
    for part, steps in PARTS.items():
        lines += _limits_table(f"part {part}", list(steps), COMMAND_END_S - SETUP_PLANNED_S, SETUP_PLANNED_S)
    every = sum(STEPS[n].limit_s for p in PARTS.values() for n in p)
    lines += [f"both parts: {every / 60:.1f} min of steps. Then here: python -m benchmarks.gpu merge TARBALL", ""]
    lines += _limits_table(f"this invocation ({', '.join(names)})", names, budget, None)
    return "\n".join(lines).rstrip()


def _limits_table(title: str, names: list[str], budget: float, setup: float | None) -> list[str]:
    """Each step's limit and its SIGTERM within `budget`, and where the part ends at the worst."""
    steps_s = budget - END_RESERVE_S
    at = f"at a set-up of {setup:.0f} s: --budget-s {budget:.0f}" if setup is not None else f"--budget-s {budget:.0f}"
    lines = [f"{title}, {at} = {steps_s:.0f} s of steps + {END_RESERVE_S} s for the last summary and tarball:", "",
             f"    {'step':<13} {'share':>5}  {'limit':>6}  {'SIGTERM at':>10}  then"]
    for name, limit in limits(names, steps_s).items():
        step = STEPS[name]
        then = f"{STOP_GRACE_S} s grace" + (f" + {REPORT_RESERVE_S} s report" if step.study else "")
        sigterm = limit - stop_reserve(step, STOP_GRACE_S, REPORT_RESERVE_S)
        lines.append(f"    {name:<13} {step.limit_s:>3} s  {limit:>4.0f} s  " + (
            f"{sigterm:>8.0f} s  {then:<26} {step.what}" if sigterm >= MIN_STEP_S else "   not run: too little time"))
    if setup is not None:
        lines.append(f"    at the worst, the part ends {setup:.0f} + {budget:.0f} = {setup + budget:.0f} s into its "
                     f"command (limit {COMMAND_S} s)")
    return lines + [""]


def _run(names: list[str], budget: float, label: str, scratch: Path, out: Path,
         steps: dict[str, Step] = STEPS, started: float | None = None) -> int:
    """The named steps, each within its limit, all within `budget` seconds of `started` (default: now)."""
    started = time.monotonic() if started is None else started
    deadline = started + budget - END_RESERVE_S  # the last summary and tarball fit after it
    scratch.mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    machine = _machine()
    rows: list[str] = []
    details: list[str] = _environment(scratch, deadline)
    failed, carried = False, 0.0
    for name, share in limits(names, budget - END_RESERVE_S, steps).items():
        step = steps[name]
        limit = min(share + carried, deadline - time.monotonic())  # never past the part's deadline
        reserve = stop_reserve(step, STOP_GRACE_S, REPORT_RESERVE_S)  # kept after its SIGTERM, within its limit
        if limit - reserve < MIN_STEP_S:
            rows.append(f"| {name} | not run: the command's budget was spent | {max(limit, 0):.0f} | |")
            failed = True
            _write(label, machine, rows, details, scratch, out)
            continue
        print(f"make gpu: {name} (limit {limit:.0f} s, SIGTERM at {limit - reserve:.0f} s): "
              f"{shlex.join(step.command(scratch))}", flush=True)
        began = time.monotonic()
        outcome, notes = _run_step(step, limit, reserve, scratch)
        took = time.monotonic() - began
        carried = max(0.0, limit - took)  # a step that ends early leaves its time to the next
        failed |= outcome != "passed"
        rows.append(f"| {name} | {outcome} | {limit:.0f} | {took:.0f} |")
        details += ([f"### {name}", "", *notes, ""] if notes else [])
        print(f"make gpu: {name}: {outcome} ({took:.0f} s)", flush=True)
        _write(label, machine, rows, details, scratch, out)
    print((scratch / "summary.md").read_text())
    return 1 if failed else 0


PIP_TIMEOUT_S = 60


def _environment(scratch: Path, deadline: float) -> list[str]:
    """`pip check` and `pip list` into the scratch folder (so into the tarball); pip check's verdict for the summary."""
    said = []
    for what in ("check", "list"):
        path = scratch / f"pip-{what}.txt"
        timeout = max(1.0, min(PIP_TIMEOUT_S, deadline - time.monotonic() - MIN_STEP_S))
        try:
            done = subprocess.run([sys.executable, "-m", "pip", what], capture_output=True, text=True,
                                  timeout=timeout)
            path.write_text(done.stdout + done.stderr)
            first = (done.stdout + done.stderr).strip().splitlines()[:1]
        except (OSError, subprocess.SubprocessError) as error:
            path.write_text(f"pip {what} could not run: {error}\n")
            first = [f"could not run: {error}"]
        if what == "check":
            said = [f"pip check ({path.name}, with pip list in pip-list.txt): {first[0] if first else 'no output'}",
                    ""]
    return said


def _run_step(step: Step, limit: float, reserve: float, scratch: Path) -> tuple[str, list[str]]:
    """The step, stopped at `limit - reserve`, so that its stop and a study's report rebuild end by `limit`."""
    log_path = scratch / f"{step.name}.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(step.command(scratch), cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)  # its own group: stopping it stops its trials too
        try:
            status = process.wait(timeout=limit - reserve)
            outcome = "passed" if status == 0 else f"FAILED (exit {status})"
        except subprocess.TimeoutExpired:
            _stop(process)
            outcome = f"stopped at its limit ({limit:.0f} s), partial results kept"
            if step.study:
                try:
                    subprocess.run(step.report_command(scratch), cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                   timeout=REPORT_RESERVE_S)
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

    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        smi = ""
    return (f"{torch.cuda.get_device_name(0)}, driver {smi or 'unknown'}, CUDA {torch.version.cuda}, "
            f"torch {torch.__version__}, commit {commit()}, {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC")


def _write(label: str, machine: str, rows: list[str], details: list[str], scratch: Path, out: Path) -> None:
    """summary.md and the part's RESULTS.md section in the scratch folder; summary.md and the tarball to `out`."""
    scratch.mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    summary = "\n".join([f"Machine: {machine}", "", "| step | outcome | limit s | took s |", "|---|---|---|---|",
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


def _pack(root: Path | None = None) -> int:
    """Here, before lending: the wheels and data (device-wheels.sh), the commit, and the size of what travels."""
    from ablate.trial.machine import commit

    root = root or ROOT  # the checkout: a clone, or a git worktree
    script = root.parent / "shared" / "tools" / "device-wheels.sh"
    if not script.exists():
        print(f"pack: {script} not found (it packs the wheels a lent machine lacks)", file=sys.stderr)
        return 2
    # The script notes .whl/ in git's info/exclude, which a clone may lack; in a worktree .git is a file, and
    # git says where that worktree's exclude file is.
    exclude = subprocess.run(["git", "rev-parse", "--path-format=absolute", "--git-path", "info/exclude"], cwd=root,
                             capture_output=True, text=True)
    if exclude.returncode == 0 and exclude.stdout.strip():
        Path(exclude.stdout.strip()).parent.mkdir(parents=True, exist_ok=True)
    if subprocess.run(["bash", str(script)], cwd=root).returncode != 0:
        return 1
    (root / ".whl" / "commit").write_text(commit(root) + "\n")
    size = carried_bytes(root)
    print(f"pack: .whl/commit says {commit(root)}; a device call carries {size / 2**20:.1f} MiB (limit 64 MiB)")
    return 0 if size <= 64 * 2**20 else 1


def carried_bytes(root: Path | None = None) -> int:
    """What a device call carries: the files git tracks or would add, plus .whl/."""
    root = root or ROOT
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root,
                            capture_output=True, text=True, check=True).stdout.split("\0")
    files = [root / f for f in listed if f] + [p for p in (root / ".whl").rglob("*") if p.is_file()]
    return sum(f.stat().st_size for f in files if f.is_file())


if __name__ == "__main__":
    sys.exit(main())
