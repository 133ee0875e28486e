"""Does `ablate compare` see a change where there is one? Measure it directly, back to back, and set it beside the
interval the comparison printed.

    python -m benchmarks.change_check --change results/changes/A-vs-B/change.json --env-b OMP_NUM_THREADS=1
        [--study benchmarks/studies/repro16.yaml] [--rows COMBINATION ...] [--pairs 6] [--seed 0]

Two studies run minutes or hours apart; their comparison's intervals carry both studies' noise. This check takes
the rows the comparison printed (by default those it read as moved) and measures each against the baseline under
both environments, A (this process's) and B (`--env-b`: the environment variables that made study B differ, e.g.
OMP_NUM_THREADS=1), in `--pairs` back-to-back pairs: each pair runs both environments in a random order and, within
each, the baseline and the rows in a random order, every measurement a fresh trial interpreter as a study runs it
(throughput only, the study's own budget). Per pair, a row's change is its log speed-up under B minus under A: the
pairs' mean with a t interval on pairs - 1 degrees of freedom is the change measured directly, paired in time, and
so with none of the drift between two studies. The comparison's interval should cover it; a direct point outside
is a comparison whose intervals are narrower than its evidence (or a change that drifted since).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
from pathlib import Path

from scipy import stats

from ablate.config import study as studies
from ablate.config.choices import BASELINE, grid
from ablate.config.study import Study
from ablate.stats.changes import BASELINE_ABSOLUTE, MOVED, PREDICTED
from ablate.trial.interpreters import Interpreters
from ablate.trial.machine import default_device, describe
from ablate.trial.process import TrialSpec, run_in_fresh_process

STUDY = Path(__file__).resolve().parent / "studies" / "repro16.yaml"


def specs(study: Study, rows: list[str], device: str) -> dict[str, TrialSpec]:
    """Throughput-only trials of the baseline and `rows`, by their labels."""
    by_label = {c.label: c for c in (study.combination(dict(levels)) for levels in grid(study.choices))}
    unknown = [r for r in rows if r not in by_label]
    if unknown:
        raise SystemExit(f"not combinations of {study.name}: {', '.join(unknown)}")
    return {r: TrialSpec(study, by_label[r].options, device, train_for_accuracy=False) for r in [BASELINE, *rows]}


def measure(trials: dict[str, TrialSpec], env_b: dict[str, str], pairs: int, seed: int
            ) -> dict[str, dict[str, list[float]]]:
    """environment ("A", "B") -> label -> its log throughputs, pair by pair."""
    rng = random.Random(seed)
    base_env = {k: os.environ.get(k) for k in env_b}

    def use(side: str) -> None:  # a trial interpreter inherits the environment it was started in
        for k, v in (env_b.items() if side == "B" else base_env.items()):
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    out: dict[str, dict[str, list[float]]] = {"A": {}, "B": {}}
    pools = {}
    for side in ("A", "B"):
        use(side)
        pools[side] = Interpreters()
    try:
        for p in range(pairs):
            for side in rng.sample(["A", "B"], 2):
                use(side)
                for label in rng.sample(list(trials), len(trials)):
                    m = run_in_fresh_process(trials[label], interpreters=pools[side])
                    out[side].setdefault(label, []).append(math.log(m["throughput"]))
                    print(f"pair {p + 1}/{pairs} {side} {label}: {m['throughput']:.0f}/s", flush=True)
    finally:
        use("A")
        for pool in pools.values():
            pool.close()
    return out


def direct(logs: dict[str, dict[str, list[float]]], row: str) -> tuple[float, float, float]:
    """A row's change B over A measured pair by pair: the mean log change and its 95% t interval (for the baseline
    row: its throughput's change)."""
    def speedup(side: str) -> list[float]:
        mine, base = logs[side][row if row != "absolute" else BASELINE], logs[side][BASELINE]
        return mine if row == "absolute" else [m - b for m, b in zip(mine, base)]

    d = [b - a for a, b in zip(speedup("A"), speedup("B"))]
    mean, se = statistics.fmean(d), statistics.stdev(d) / math.sqrt(len(d))
    half = stats.t.ppf(0.975, len(d) - 1) * se
    return mean, mean - half, mean + half


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.change_check", description=__doc__.splitlines()[0])
    parser.add_argument("--change", type=Path, required=True, help="the change.json `ablate compare` wrote")
    parser.add_argument("--env-b", nargs="+", required=True, metavar="NAME=VALUE", help="what made B differ")
    parser.add_argument("--study", default=str(STUDY))
    parser.add_argument("--rows", nargs="*", help="combinations to check (default: the rows read as moved)")
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default=default_device())
    args = parser.parse_args(argv)
    change = json.loads(args.change.read_text())
    printed = {r["row"]: r for r in change["rows"]}
    rows = args.rows or [r for r, v in printed.items() if v["verdict"] == MOVED and r in _measurable(change)]
    env_b = dict(item.split("=", 1) for item in args.env_b)
    study = studies.load(args.study, args.device.split(":")[0])
    print(f"{describe(args.device).device_name}: {len(rows)} rows, {args.pairs} pairs, B = {env_b}", flush=True)
    logs = measure(specs(study, rows, args.device), env_b, args.pairs, args.seed)
    absolute = BASELINE_ABSOLUTE if BASELINE_ABSOLUTE in printed else None
    inside = 0
    for row in [*rows, *(["absolute"] if absolute else [])]:
        mean, low, high = direct(logs, row)
        shown = printed.get(absolute if row == "absolute" else row, {})
        covered = shown.get("low") is not None and shown["low"] <= math.exp(mean) <= shown["high"]
        inside += covered
        print(f"{row}: measured directly x{math.exp(mean):.3f} [{math.exp(low):.3f}, {math.exp(high):.3f}]; "
              f"compare printed x{shown.get('ratio', float('nan')):.3f} [{shown.get('low')}, {shown.get('high')}]: "
              f"{'inside' if covered else 'OUTSIDE'}")
    print(f"{inside} of {len(rows) + bool(absolute)} direct changes inside the printed intervals")
    return 0


def _measurable(change: dict) -> set[str]:
    """Rows a trial can measure: combinations, not the absolute-throughput row or a prediction."""
    return {r["row"] for r in change["rows"] if r["row"] != BASELINE_ABSOLUTE and r["verdict"] != PREDICTED}


if __name__ == "__main__":
    raise SystemExit(main())
