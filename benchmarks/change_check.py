"""Does `ablate compare` see a change where there is one? Measure it directly, back to back, and set it beside the
interval the comparison printed.

    python -m benchmarks.change_check --change results/changes/A-vs-B/change.json --env-b OMP_NUM_THREADS=1
        [--study benchmarks/studies/repro16.yaml] [--rows COMBINATION ...] [--pairs 6] [--seed 0]

Two studies run minutes or hours apart; their comparison's intervals carry both studies' noise. This check takes
the rows the comparison printed (by default those it read as moved) and measures each against the baseline under
both environments, A (this process's) and B (`--env-b`: the environment variables that made study B differ, e.g.
OMP_NUM_THREADS=1), in `--pairs` back-to-back pairs: each pair runs both environments in a random order and, within
each, the baseline and the rows in a random order, every measurement a fresh trial interpreter as a study runs it,
from a pool of interpreters started for that visit alone
(throughput only, the study's own budget). Per pair, a row's change is its log speed-up under B minus under A: the
pairs' mean with a t interval on pairs - 1 degrees of freedom is the change measured directly, paired in time, and
so with none of the drift between two studies. The comparison's interval should cover it; a direct point outside
is a comparison whose intervals are narrower than its evidence (or a change that drifted since).

A direct point has its own noise too: on 6 pairs its standard error is about the comparison's, so a point lands
outside a printed (Bonferroni) interval by chance about 5% of the time a row, 29% over six rows, where nothing
disagrees. So each row is also tested for *consistency*: the direct mean less the printed log ratio over both
standard errors, t on the fewer degrees of freedom, Holm over the rows at 5% (`inconsistent`), so that the chance of
calling any row inconsistent when none is stays at most 5% (tests/bench/test_change_check.py simulates it, with
its power). The two readings are printed side by side: "inside" asks more of the direct measurement than it holds.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import stats

from ablate.config import study as studies
from ablate.config.choices import BASELINE, grid
from ablate.config.study import Study
from ablate.stats.changes import BASELINE_ABSOLUTE, MOVED, PREDICTED, holm
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
    try:
        for p in range(pairs):
            for side in rng.sample(["A", "B"], 2):
                use(side)
                # A pool of its own for each visit, closed on leaving: a trial stops only its own pool's importing
                # interpreters, so the other side's, still importing, ran beside its first trials. With one pool per
                # side for the whole check, its A side read workers(2) at x0.98 of the baseline where both studies had
                # read x0.79 and x0.81; back to back from one pool it read x0.93, and a study of the two x0.89
                # [0.82, 0.96] (the Xeon, 2026-11-29).
                with Interpreters() as pool:
                    for label in rng.sample(list(trials), len(trials)):
                        m = run_in_fresh_process(trials[label], interpreters=pool)
                        out[side].setdefault(label, []).append(math.log(m["throughput"]))
                        print(f"pair {p + 1}/{pairs} {side} {label}: {m['throughput']:.0f}/s", flush=True)
    finally:
        use("A")
    return out


@dataclass(frozen=True)
class Direct:
    """A row's change B over A measured pair by pair: the mean log change, its standard error and degrees of freedom."""

    log: float
    se: float
    df: int

    def interval(self, confidence: float = 0.95) -> tuple[float, float]:
        half = float(stats.t.ppf(0.5 + confidence / 2, self.df)) * self.se
        return self.log - half, self.log + half


def direct(logs: dict[str, dict[str, list[float]]], row: str) -> Direct:
    """A row's change B over A measured pair by pair (for the absolute row: the baseline's throughput's change)."""
    def speedup(side: str) -> list[float]:
        mine, base = logs[side][row if row != "absolute" else BASELINE], logs[side][BASELINE]
        return mine if row == "absolute" else [m - b for m, b in zip(mine, base)]

    d = [b - a for a, b in zip(speedup("A"), speedup("B"))]
    return Direct(statistics.fmean(d), statistics.stdev(d) / math.sqrt(len(d)), len(d) - 1)


def inconsistent(found: list[Direct], printed: list[tuple[float, float, float | None]], alpha: float = 0.05
                 ) -> list[bool]:
    """Which rows' direct changes disagree with the comparison's beyond both noises: per row (the printed log ratio,
    its standard error and degrees of freedom, None for a known variance) t = (direct - printed) / sqrt(se_d^2 +
    se_p^2) on the fewer of the two sides' degrees of freedom (Hsu's: conservative whatever the two variances are),
    two-sided; Holm's step-down over the rows at `alpha`. Welch's degrees of freedom read up to 1.8 times the
    level at the rows' 0.8% (12 pairs against a printed side on 3 degrees of freedom with twice the standard error,
    simulated): this check asks whether the comparison's intervals are too narrow, so its own must not be."""
    p = []
    for d, (log, se, df) in zip(found, printed, strict=True):
        var = d.se ** 2 + se ** 2
        fewest = min(d.df, df or math.inf)
        p.append(2 * float(stats.t.sf(abs(d.log - log) / math.sqrt(var), fewest)) if var else float(d.log == log))
    return [bool(x) for x in holm(np.array(p), alpha)[0]]


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
    checked = [*rows, *(["absolute"] if absolute else [])]
    shown = {row: printed.get(absolute if row == "absolute" else row, {}) for row in checked}
    found = {row: direct(logs, row) for row in checked}
    testable = [row for row in checked if shown[row].get("log_se") is not None]
    apart = dict(zip(testable, inconsistent([found[r] for r in testable], [
        (shown[r]["log"], shown[r]["log_se"], shown[r].get("df")) for r in testable])))
    inside = 0
    for row in checked:
        mine, low, high = found[row].log, *found[row].interval()
        covered = shown[row].get("low") is not None and shown[row]["low"] <= math.exp(mine) <= shown[row]["high"]
        inside += covered
        agrees = "untested" if row not in apart else "INCONSISTENT" if apart[row] else "consistent"
        print(f"{row}: measured directly x{math.exp(mine):.3f} [{math.exp(low):.3f}, {math.exp(high):.3f}]; "
              f"compare printed x{shown[row].get('ratio', float('nan')):.3f} [{shown[row].get('low')}, "
              f"{shown[row].get('high')}]: {'inside' if covered else 'OUTSIDE'}, {agrees}")
    print(f"{inside} of {len(checked)} direct changes inside the printed intervals; "
          f"{sum(not v for v in apart.values())} of {len(apart)} consistent with them (both noises, Holm at 5%)")
    return 0


def _measurable(change: dict) -> set[str]:
    """Rows a trial can measure: combinations, not the absolute-throughput row or a prediction."""
    return {r["row"] for r in change["rows"] if r["row"] != BASELINE_ABSOLUTE and r["verdict"] != PREDICTED}


if __name__ == "__main__":
    raise SystemExit(main())
