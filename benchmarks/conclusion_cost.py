"""What a conclusion costs: a full study run with its protocol, in wall time and in reference epochs.

    python -m benchmarks.conclusion_cost [--study mnist_cnn] [--results results/conclusion-cost] [--single-pass]

Times one reference epoch (`benchmarks.reference_epoch`, in a process of its
own), runs `ablate run STUDY` as a user does (a fresh results folder, a cold
compile cache), times the reference epoch again, and prints the run's wall
time over the mean of the two epochs, with where the time went: trials by
kind from the run's own Optuna storage, and per-trial start-up (launch to
the first batch). Dividing by an epoch timed beside the run is what lets two
runs taken at different loads, or on different machines, be compared.
`--single-pass` runs the design before blocks (every combination once, one
seed), the price the protocol's is set against.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import optuna

from ablate.trial.machine import default_device, describe
from benchmarks import cpu_time, grid


def reference_epoch() -> float:
    done = subprocess.run([sys.executable, "-m", "benchmarks.reference_epoch"], stdout=subprocess.PIPE, text=True,
                          check=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    return float(done.stdout.split()[-1])


def _kind(trial: optuna.trial.FrozenTrial) -> str:
    attrs = trial.user_attrs
    if attrs.get("state") == "skipped":
        return "skipped"
    if attrs.get("accuracy_trained"):
        return "accuracy-trained"
    return "throughput-only, compile" if "compile" in trial.params.values() else "throughput-only, eager / TorchScript"


def startup_s(metrics: dict) -> float | None:
    """Launch to the first batch: recorded as one figure since issue 21, summed from its parts before."""
    if "startup_s" in metrics:
        return metrics["startup_s"]
    parts = [metrics.get(k) for k in ("process_start_s", "data_load_s", "setup_s")]
    known = [p for p in parts if p is not None]
    return sum(known) if len(known) == len(parts) else None


def breakdown(optuna_db: Path, study_name: str) -> dict:
    trials = optuna.load_study(study_name=study_name, storage=f"sqlite:///{optuna_db.resolve()}").get_trials(
        deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    kinds: dict[str, list[float]] = {}
    starts = []
    for t in trials:
        assert t.datetime_complete is not None and t.datetime_start is not None  # a COMPLETE trial has both
        kinds.setdefault(_kind(t), []).append((t.datetime_complete - t.datetime_start).total_seconds())
        if t.user_attrs.get("state") == "complete":
            start = startup_s(t.user_attrs.get("metrics", {}))
            if start is not None:
                starts.append(start)
    return {"trials": {k: {"n": len(v), "total_s": sum(v), "median_s": statistics.median(v)}
                       for k, v in sorted(kinds.items())},
            "startup_median_s": statistics.median(starts) if starts else None,
            "startup_quartiles_s": statistics.quantiles(starts, n=4) if len(starts) > 1 else None}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.conclusion_cost", description=__doc__.splitlines()[0])
    parser.add_argument("--study", default="mnist_cnn")
    parser.add_argument("--results", type=Path, default=Path("results/conclusion-cost"))
    parser.add_argument("--device", default=default_device())
    parser.add_argument("--single-pass", action="store_true", help="every combination once, one seed: no protocol")
    args = parser.parse_args(argv)
    machine = describe(args.device)
    with cpu_time.Meter() as meter:  # steal and neighbours over the whole measurement, epochs included
        before = reference_epoch()
        print(f"reference epoch before: {before:.1f} s", flush=True)
        done = grid.run(args.study, args.results, args.device, ("--single-pass",) if args.single_pass else ())
        after = reference_epoch()
    epoch = (before + after) / 2
    name = Path(args.study).stem  # a study file's name, or the study's
    found = breakdown(args.results / name / "optuna.db", f"{name}:grid:{args.device.split(':')[0]}")
    summary = {"study": args.study, "single_pass": args.single_pass, "machine": machine.device_name,
               "torch": machine.torch, "commit": machine.commit,
               "wall_s": done.wall_s, "reference_epoch_s": [before, after],
               "reference_epochs": done.wall_s / epoch, "cpu_time_pct": meter.shares, **found}
    (args.results / "cost.json").write_text(json.dumps(summary, indent=1))
    print(f"{args.study} on {machine.device_name}, torch {machine.torch}, commit {machine.commit}: "
          f"{done.wall_s:,.0f} s = {done.wall_s / epoch:.1f} reference epochs (epoch {before:.1f} s before, "
          f"{after:.1f} s after)")
    print(f"the machine's CPU time meanwhile: {meter.describe()}")
    print("| trials | n | total s | each (median) s |\n|---|---:|---:|---:|")
    for kind, row in found["trials"].items():
        print(f"| {kind} | {row['n']} | {row['total_s']:.0f} | {row['median_s']:.1f} |")
    if found["startup_median_s"] is not None:
        q = found["startup_quartiles_s"] or [found["startup_median_s"]] * 3
        print(f"start-up, launch to first batch: median {q[1]:.2f} s (quartiles {q[0]:.2f}-{q[2]:.2f} s)")
    recommended = next((line for line in done.output.splitlines() if line.startswith("recommended:")), "")
    print(recommended)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
