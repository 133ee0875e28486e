"""`make gpu`: what only a CUDA machine can check, as a campaign that advances in every 15-minute lease.

    python -m benchmarks.gpu [next] [--steps a,b] [--budget-s S] [--scratch DIR] [--out DIR] [--dry-run [--kind K]]
    python -m benchmarks.gpu pack              here: the wheels, data and commit a lent machine needs, in .whl/
    python -m benchmarks.gpu merge TARBALL     here: a lease's results into benchmarks/RESULTS.md and the ledger

`next` (the default) runs the ledger's plan for this GPU's kind (benchmarks/gpu/ledger.yaml, ledger.py): the most
valuable steps not yet done on it, then the stale ones, as many as fit this command's budget. `--steps` runs the named
ledger steps instead, in that order. `--dry-run` prints a 15-minute lease's plan (steps.py has the arithmetic) for
`--kind` (default: the first kind lent, an H100) and the device command.

Every step has a time limit that bounds it whole, its stop and a study's report rebuild included; --budget-s S
(from this command's start, the last summary and tarball included) shares S among the steps in proportion to their
estimates. Logs and results go to a scratch folder (default /tmp/ablate-gpu-LABEL), with `pip check` and `pip list`;
after every step `summary.md` and one tarball of that folder (with runs.json, the ledger's record of each step) go
to --out ($OUT when set, else results/gpu). Exit status: 0 when every step passed, 1 when one failed or was stopped
at its limit, and 2 at once, with one line, where there is no CUDA device.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from benchmarks.gpu import ledger
from benchmarks.gpu.bundle import RUNS_JSON, SECTION, catalogue_problems, merge, pack, study_lines
from benchmarks.gpu.lease import lease_plan
from benchmarks.gpu.steps import (
    COMMAND_END_S,
    END_RESERVE_S,
    MIN_STEP_S,
    REPORT_RESERVE_S,
    ROOT,
    STEPS,
    STOP_GRACE_S,
    Step,
    limits,
    stop_reserve,
)

NO_GPU = 2
DEFAULT_KIND = "NVIDIA H100"  # a plain device call's first kind
# The import check: what the steps import, not only the carried wheels' names - ablate's tracking (MLflow's client),
# the runner (Optuna), the report, MLflow's SQL store (SQLAlchemy, Alembic), torchao's float8.
IMPORT_CHECK = ("python3 -c 'import ablate.run.runner, ablate.render.report, mlflow.store.tracking.sqlalchemy_store, "
                "torchao.float8' || exit 1; ")
# The start of every command on a lent machine: install the carried wheels (not again on a warm machine, where a
# command before left them), unpack the data, say the commit (no .git travels), and check the imports. The install
# and the data are in step with ../shared/tools/device-wheels.sh's header, which packs .whl/.
PREFIX = ("[ -d /tmp/site/mlflow ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir "
          "--upgrade --target /tmp/site .whl/*.whl && tar xzf .whl/datasets.tgz -C /tmp && export "
          "PYTHONPATH=$PWD:/tmp/site ABLATE_DATA_DIR=/tmp/datasets ABLATE_OFFLINE=1 ABLATE_COMMIT=$(cat .whl/commit) "
          f"PYTHONUNBUFFERED=1 && {IMPORT_CHECK}")


def device_command(steps: str | None = None, end_s: int = COMMAND_END_S) -> str:
    """The whole command on a lent machine (carry .whl): the ledger's next steps, or `steps` by name (a rerun)."""
    which = f" --steps {steps}" if steps else ""
    return f"{PREFIX}python3 -m benchmarks.gpu next{which} --budget-s $(({end_s} - SECONDS))"


@dataclass
class Recorder:
    """What the ledger needs of each step a command ran, written to runs.json beside the summary."""

    kind: str
    torch: str
    commit: str
    hashes: dict[str, str]
    title: str
    entries: list[dict] = field(default_factory=list)

    def add(self, step: Step, outcome: str, limit: float, took: float, notes: list[str]) -> None:
        said = ("passed" if outcome == "passed" else "stopped" if outcome.startswith("stopped") else
                "not run" if outcome.startswith("not run") else "failed")
        self.entries.append({
            "step": step.name, "kind": self.kind, "torch": self.torch, "commit": self.commit,
            "date": f"{datetime.now(timezone.utc):%Y-%m-%d}", "outcome": said, "said": outcome, "limit_s": limit,
            "actual_s": took, "paths_hash": self.hashes.get(step.name), "title": self.title, "notes": notes})


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu", description=__doc__.splitlines()[0])
    parser.add_argument("--steps", help="comma-separated ledger steps, in this order: " + ", ".join(STEPS))
    parser.add_argument("--budget-s", type=float, help="seconds from this command's start to its end, the last "
                                                       "summary and tarball included (default: the steps' estimates "
                                                       f"and {END_RESERVE_S} s)")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or "results/gpu"))
    parser.add_argument("--scratch", type=Path, help="logs and results (default: /tmp/ablate-gpu-LABEL)")
    parser.add_argument("--dry-run", action="store_true", help="print a 15-minute lease's plan and its command")
    parser.add_argument("--kind", default=DEFAULT_KIND, help=f"--dry-run: the device kind (default: {DEFAULT_KIND})")
    parser.add_argument("--torch", help="--dry-run: the device's torch (default: the kind's recorded, else any kind's)")
    return parser


def main(argv: list[str] | None = None) -> int:
    started = time.monotonic()  # --budget-s counts from here: the interpreter's start is a few ms before
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["merge"]:
        return _merge(argv[1:])
    if argv[:1] == ["pack"]:
        return _pack()
    parser = _parser()
    args = parser.parse_args(argv[1:] if argv[:1] == ["next"] else argv)
    names = args.steps.split(",") if args.steps else None
    if names is not None and (unknown := [s for s in names if s not in STEPS]):
        parser.error(f"unknown step {', '.join(repr(s) for s in unknown)}; choose from {', '.join(STEPS)}")
    least = END_RESERVE_S + MIN_STEP_S + STOP_GRACE_S
    if args.budget_s is not None and args.budget_s < least:
        parser.error(f"--budget-s must be at least {least} s (got {args.budget_s:g}): the set-up before it took "
                     "too long")
    steps = ledger.load()
    hashes = ledger.paths_hashes(steps, ROOT)
    if args.dry_run:
        recorded = [r.torch for s in steps for k, r in s.runs.items() if k == args.kind] or [
            r.torch for s in steps for r in s.runs.values()]  # this kind's torch, else any kind's
        torch_version = args.torch or (recorded[0] if recorded else "unknown")
        print(lease_plan(steps, args.kind, hashes, torch_version, names, device_command))
        return 0
    import torch

    if not torch.cuda.is_available():
        print("make gpu: no CUDA device here (torch.cuda.is_available() is False); nothing was run", file=sys.stderr)
        return NO_GPU
    kind, version = _device()
    from ablate.trial.machine import commit

    if names is None:
        steps_s = (args.budget_s or COMMAND_END_S) - END_RESERVE_S
        chosen = ledger.plan(steps, kind, hashes, version, steps_s)
        estimates = {p.step.name: p.estimate_s for p in chosen}
        if not chosen:
            print(f"make gpu: every ledger step is done on {kind} at torch {version}; nothing to run")
            return 0
    else:
        estimates = {n: float(STEPS[n].limit_s) for n in names}
    budget = args.budget_s or sum(estimates.values()) + END_RESERVE_S
    stamp = f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M}"
    recorder = Recorder(kind, version, commit(), hashes, f"`make gpu` on {kind} at {commit()}, {stamp} UTC")
    label = f"{ledger.slug(kind)}-{stamp.replace(' ', '-').replace(':', '')}"
    return _run(list(estimates), budget, label, args.scratch or Path(f"/tmp/ablate-gpu-{label}"),
                args.out.absolute(), STEPS, started, estimates, recorder)


def _device() -> tuple[str, str]:
    """This GPU's kind and torch's version."""
    import torch

    return ledger.device_kind(torch.cuda.get_device_name(0)), torch.__version__


def _run(names: list[str], budget: float, label: str, scratch: Path, out: Path,
         steps: dict[str, Step] = STEPS, started: float | None = None, estimates: dict[str, float] | None = None,
         recorder: Recorder | None = None) -> int:
    """The named steps, each within its limit, all within `budget` seconds of `started` (default: now)."""
    started = time.monotonic() if started is None else started
    deadline = started + budget - END_RESERVE_S  # the last summary and tarball fit after it
    scratch.mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    machine = _machine()
    rows: list[str] = []
    details: list[str] = _environment(scratch, deadline)
    failed, carried = False, 0.0
    for name, share in limits(names, budget - END_RESERVE_S, steps, estimates).items():
        step = steps[name]
        limit = min(share + carried, deadline - time.monotonic())  # never past the command's deadline
        reserve = stop_reserve(step, STOP_GRACE_S, REPORT_RESERVE_S)  # kept after its SIGTERM, within its limit
        if limit - reserve < MIN_STEP_S:
            outcome, took, notes = "not run: the command's budget was spent", 0.0, list[str]()
            rows.append(f"| {name} | {outcome} | {max(limit, 0):.0f} | |")
        else:
            print(f"make gpu: {name} (limit {limit:.0f} s, SIGTERM at {limit - reserve:.0f} s): "
                  f"{shlex.join(step.command(scratch))}", flush=True)
            began = time.monotonic()
            outcome, notes = _run_step(step, limit, reserve, scratch)
            took = time.monotonic() - began
            carried = max(0.0, limit - took)  # a step that ends early leaves its time to the next
            rows.append(f"| {name} | {outcome} | {limit:.0f} | {took:.0f} |")
            details += ([f"### {name}", "", *notes, ""] if notes else [])
            print(f"make gpu: {name}: {outcome} ({took:.0f} s)", flush=True)
        failed |= outcome != "passed"
        if recorder is not None:
            recorder.add(step, outcome, limit, took, notes)
        _write(label, machine, rows, details, scratch, out, recorder)
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
            if step.rebuilds_report:
                try:
                    subprocess.run(step.report_command(scratch), cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                   timeout=REPORT_RESERVE_S)
                except subprocess.TimeoutExpired:
                    outcome += "; its report could not be rebuilt in time"
    try:
        return _judged(step, outcome, scratch, log_path)
    except Exception as error:  # a summary that cannot be read must not lose the next steps
        return outcome, [f"- the step's results could not be summarised: {type(error).__name__}: {error}"]


def _judged(step: Step, outcome: str, scratch: Path, log_path: Path) -> tuple[str, list[str]]:
    """The step's outcome, with a catalogue's problems, and its notes for the summary."""
    notes: list[str] = []
    log = log_path.read_text().splitlines()
    if step.command_kind == "pytest":
        notes = [f"- {line}" for line in log if line.startswith(("FAILED", "ERROR")) or line is log[-1]]
    elif step.command_kind == "repro":  # the comparison it prints: agreement, widths, the load guard's repeats
        notes = [line for line in log if line.startswith(("Reproducibility of", "- "))]
    elif step.study:
        results = step.results(scratch)
        if "--single-pass" in step.ablate_args:
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


def _write(label: str, machine: str, rows: list[str], details: list[str], scratch: Path, out: Path,
           recorder: Recorder | None = None) -> None:
    """summary.md, the RESULTS.md section and runs.json in the scratch folder; summary.md and the tarball to `out`."""
    scratch.mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    summary = "\n".join([f"Machine: {machine}", "", "| step | outcome | limit s | took s |", "|---|---|---|---|",
                         *rows, "", *details]) + "\n"
    (scratch / "summary.md").write_text(summary)
    (out / "summary.md").write_text(summary)
    kind = f"gpu-{label}"
    title = recorder.title if recorder else f"`make gpu` {label}"
    (scratch / SECTION).write_text(f"<!-- bench:{kind}:start (written by `make gpu`, merged with `python -m "
                                   f"benchmarks.gpu merge`) -->\n## {title}\n\n{summary}"
                                   f"<!-- bench:{kind}:end -->\n")
    if recorder is not None:
        (scratch / RUNS_JSON).write_text(json.dumps(recorder.entries, indent=1) + "\n")
    pack(scratch, out / f"gpu-{label}.tgz")


def _merge(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu merge",
                                     description="write a `make gpu` tarball's sections into benchmarks/RESULTS.md, "
                                                 "its steps into the ledger and their exports into benchmarks/gpu/runs")
    parser.add_argument("tarball", type=Path)
    args = parser.parse_args(argv)
    if not args.tarball.is_file():
        print(f"merge: no such file: {args.tarball}", file=sys.stderr)
        return 2
    try:
        written, done = merge(args.tarball)
    except (ValueError, OSError, tarfile.TarError, json.JSONDecodeError) as error:
        print(f"merge: {' '.join(str(error).split())}", file=sys.stderr)
        return 2
    print(f"merge: wrote the {', '.join(written)} section(s) of benchmarks/RESULTS.md; results unpacked in "
          "results/gpu/" + (f"; the ledger records {', '.join(done)} (exports in benchmarks/gpu/runs/)" if done else
                            "; no ledger record in this tarball"))
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
