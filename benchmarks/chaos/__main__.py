"""Does a study survive real faults? One study run through seeded kills and outages, each time followed by the same
`ablate run` until it exits 0, then checked against an uninterrupted run's design.

    python -m benchmarks.chaos [--kills 10 --seed 1] [--random-kills] [--fixed-kills] [--mlflow-outage]
                               [--postgres-restart [--storage URL]] [--full-disk] [--reference DIR] [--work DIR]

No scenario flag: all of them. Each scenario is a fresh run of the study (benchmarks/chaos/chaos12.yaml: 12
combinations in 4 full blocks, 48 slots planned at the start, seed pinned):
- reference: one uninterrupted run, whose slots and summary.json design (protocol, seeds, each combination's blocks)
  every other scenario must reproduce (skipped with `--reference DIR`, an earlier reference's results folder);
- random kills: `--kills` SIGKILLs of the command's whole process group (the study and its trial interpreters) at
  times drawn from `--seed`, 1-30 s after each start;
- fixed kills: at each point of benchmarks/chaos/kill_at.py in turn (as the plan is queued, as a result is stored,
  after a measurement, half-way through summary.json, in the MLflow wrap-up);
- MLflow outage: `mlflow server` (SQLite backend) killed after a quarter of the slots, started again on the same
  port and store `--outage-s` later; where the run then tells the user to run `ablate sync`, that too;
- PostgreSQL restart (`--storage`, a role that may create databases; default the one `.ci/run` creates): a fresh
  database; `pg_ctlcluster` stop after a quarter of the slots, start `--pg-down-s` later (a cluster found down is
  started for it and stopped afterwards); skipped where no server can be had;
- full disk (root): the results folder on a tmpfs, filled to the last byte after half the slots, then enlarged.

Each scenario prints what was done, what the user saw (each command's exit status and last lines) and each check
PASS or FAIL (benchmarks/chaos/check.py: every slot exactly once, no finished measurement lost, nothing RUNNING in
Optuna or MLflow, one MLflow run per measurement, the end written to MLflow, summary.json valid with the reference's
design). Exit status 0 when every check of every scenario run passes. About 15 minutes on 2 cores, all scenarios:
run it alone on the machine, the measurements are real processes.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from benchmarks.chaos import check, scenarios
from benchmarks.chaos.faults import DEFAULT_POSTGRES

STUDY = Path(__file__).resolve().parent / "chaos12.yaml"
FLAGS = ("random_kills", "fixed_kills", "mlflow_outage", "postgres_restart", "full_disk")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.chaos", description=__doc__.splitlines()[0])
    parser.add_argument("--study", type=Path, default=STUDY, help="a study file with a full block design and a pinned "
                                                                  "seed (default: %(default)s)")
    parser.add_argument("--work", type=Path, default=Path("results/chaos"),
                        help="each scenario's results and logs go under it (default: %(default)s)")
    parser.add_argument("--reference", type=Path, metavar="DIR",
                        help="an uninterrupted run's results folder to hold the scenarios to, instead of running one")
    parser.add_argument("--random-kills", action="store_true", help="only the seeded random kills (with other flags: "
                                                                   "those too)")
    parser.add_argument("--fixed-kills", action="store_true", help="only the kills at fixed points")
    parser.add_argument("--mlflow-outage", action="store_true", help="only the MLflow server outage")
    parser.add_argument("--postgres-restart", action="store_true", help="only the PostgreSQL restart")
    parser.add_argument("--full-disk", action="store_true", help="only the full disk")
    parser.add_argument("--kills", type=int, default=10, help="random kills (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=1, help="the random kills' seed (default: %(default)s)")
    parser.add_argument("--outage-s", type=float, default=60, help="MLflow down this long (default: %(default)s)")
    parser.add_argument("--pg-down-s", type=float, default=20, help="PostgreSQL down this long (default: %(default)s)")
    parser.add_argument("--storage", default=DEFAULT_POSTGRES,
                        help="PostgreSQL URL of a role that may create databases (default: %(default)s)")
    parser.add_argument("--disk-mb", type=int, default=256,
                        help="the tmpfs's size before it is doubled (default: %(default)s; `ablate run` wants 201 MiB "
                             "free at its start)")
    args = parser.parse_args(argv)
    chosen = [f for f in FLAGS if getattr(args, f)] or list(FLAGS)
    setup = scenarios.Setup(args.study, args.work.resolve())
    began = time.monotonic()
    print(f"chaos on {args.study} ({', '.join(f.replace('_', ' ') for f in chosen)}); work folder {setup.work}",
          flush=True)

    outcomes = []
    if args.reference:
        design = check.design(check.read(args.reference, setup.name))
        print(f"reference: {args.reference}: {len(design.slots)} slots, {len(design.blocks)} combinations\n")
    else:
        outcome, design = scenarios.reference(setup)
        _say(outcome)
        outcomes.append(outcome)
    slots = len(design.slots)
    run = {"random_kills": lambda: scenarios.random_kills(setup, design, args.kills, args.seed),
           "fixed_kills": lambda: scenarios.fixed_kills(setup, design),
           "mlflow_outage": lambda: scenarios.mlflow_outage(setup, design, args.outage_s, slots // 4),
           "postgres_restart": lambda: scenarios.postgres_restart(setup, design, args.storage, args.pg_down_s,
                                                                  slots // 4),
           "full_disk": lambda: scenarios.full_disk(setup, design, args.disk_mb, slots // 2)}
    for flag in chosen:
        print(f"... {flag.replace('_', ' ')}", file=sys.stderr, flush=True)
        outcome = run[flag]()
        _say(outcome)
        outcomes.append(outcome)

    print("== summary")
    for o in outcomes:
        failed = [c.name for c in o.checks if not c.passed]
        verdict = ("SKIPPED" if o.skipped else "PASS" if o.passed else f"FAIL ({len(failed)} of {len(o.checks)}: "
                   + "; ".join(failed) + ")")
        print(f"{o.title.split(':')[0]}: {verdict} in {o.seconds:.0f} s")
    print(f"all in {(time.monotonic() - began) / 60:.1f} min")
    return 0 if all(o.passed or o.skipped for o in outcomes) else 1


def _say(outcome: scenarios.Outcome) -> None:
    print("\n".join(outcome.lines()), flush=True)


if __name__ == "__main__":
    sys.exit(main())
