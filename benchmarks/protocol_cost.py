"""The cost of the blocked, raced protocol: the full grid with it and with the single pass, side by side.

    python -m benchmarks.protocol_cost [--study mnist_cnn] [--results results/cost]

Runs `ablate run STUDY` (the study's protocol) and then `ablate run STUDY
--single-pass` (one baseline, every combination once) on the same machine,
one after the other, each with a fresh results folder and a cold compile
cache, and prints their wall times and trial counts (finished Optuna trials,
skipped ones included).
"""
from __future__ import annotations

import argparse
from pathlib import Path

import optuna

from ablate.machine import default_device, describe
from benchmarks import grid


def _trials(results: Path, study: str, device: str) -> tuple[int, int]:
    """(finished trials, of which skipped) in a run's Optuna storage."""
    stored = optuna.load_study(study_name=f"{study}:grid:{device.split(':')[0]}",
                               storage=f"sqlite:///{(results / study / 'optuna.db').resolve()}")
    states = [t.user_attrs.get("state") for t in stored.get_trials(deepcopy=False)]
    return sum(s in ("complete", "skipped", "failed") for s in states), states.count("skipped")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.protocol_cost", description=__doc__.splitlines()[0])
    parser.add_argument("--study", default="mnist_cnn")
    parser.add_argument("--results", type=Path, default=Path("results/cost"))
    parser.add_argument("--device", default=default_device())
    args = parser.parse_args(argv)
    machine = describe(args.device)
    lines = [f"{args.study} on {machine.device_name}, torch {machine.torch}, commit {machine.commit}:"]
    for name, extra in (("blocked + racing", ()), ("single pass", ("--single-pass",))):
        folder = args.results / name.replace(" + ", "-").replace(" ", "-")
        done = grid.run(args.study, folder, args.device, extra)
        trials, skipped = _trials(folder, args.study, args.device)
        recommended = next((line for line in done.output.splitlines() if line.startswith("recommended:")), "")
        lines.append(f"- {name}: {done.wall_s / 60:.1f} min wall time, {trials} trials ({skipped} skipped); {recommended}")
        print(lines[-1], flush=True)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
