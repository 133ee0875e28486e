"""Does a longer timed window make a trial's throughput steadier from trial to trial?

    python -m benchmarks.window_length [--study mnist_cnn] [--pairs 10] [--lengths 1280 6400]

Runs the study's baseline as throughput-only trials (fresh interpreters, as a
study runs them), alternating the window lengths in each pair and swapping
which goes first every pair, so drift falls on both alike. `window_seconds`
is switched off, so each window has exactly its samples. Reported per
length: the standard deviation of log throughput across trials (what the
protocol's blocks average down) with its 95% chi-square interval, the
median within-trial window CV, and the median trial duration.

Why ask: in the reproducibility runs on a CPU that emulates bf16, bf16
combinations (17-s windows) varied about half as much from trial to trial as
fp32 ones (2-s windows). If window length is the cause, longer windows buy
fewer blocks; if the technique is, they buy nothing.
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
import time
from dataclasses import dataclass

from scipy import stats

from ablate.config import study as studies
from ablate.trial.interpreters import Interpreters
from ablate.trial.machine import default_device, describe
from ablate.trial.process import run_in_fresh_process
from benchmarks import cpu_time
from benchmarks.repetitions import CONFIDENCE, variance_interval
from benchmarks.trials import baseline_spec


@dataclass(frozen=True)
class Spread:
    """The standard deviation of log throughput over trials, with its two-sided chi-square interval."""

    sd: float
    low: float
    high: float
    n: int


def spread(throughputs: list[float], confidence: float = CONFIDENCE) -> Spread:
    """Exact for normal log throughputs (`repetitions.variance_interval`)."""
    logs = [math.log(t) for t in throughputs]
    s2 = statistics.variance(logs)
    low, high = variance_interval(s2, len(logs) - 1, confidence)
    return Spread(math.sqrt(s2), math.sqrt(low), math.sqrt(high), len(logs))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.window_length", description=__doc__.splitlines()[0])
    parser.add_argument("--study", default="mnist_cnn")
    parser.add_argument("--device", default=default_device())
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--lengths", type=int, nargs=2, default=[1280, 6400], help="window samples, short and long")
    args = parser.parse_args(argv)
    study = studies.load(args.study, args.device.split(":")[0])
    specs = {n: baseline_spec(dataclasses.replace(study, budget=dataclasses.replace(
        study.budget, window_samples=n, window_seconds=None, min_window_seconds=0)), args.device)  # samples only
        for n in args.lengths}
    found: dict[int, list[dict[str, float]]] = {n: [] for n in args.lengths}
    with cpu_time.Meter() as meter, Interpreters() as prepared:
        run_in_fresh_process(specs[args.lengths[0]], interpreters=prepared)  # the cold first trial, not counted
        for pair in range(args.pairs):
            for n in args.lengths if pair % 2 == 0 else reversed(args.lengths):
                began = time.perf_counter()
                metrics = run_in_fresh_process(specs[n], interpreters=prepared)
                found[n].append({**metrics, "trial_s": time.perf_counter() - began})
                print(f"pair {pair + 1}/{args.pairs}, windows of {n:,}: {metrics['throughput']:.0f} samples/s",
                      flush=True)
    machine = describe(args.device)
    print(f"\n{args.study} baseline on {machine.device_name}, torch {machine.torch}, commit {machine.commit}; "
          f"{args.pairs} alternated pairs, {study.budget.windows} windows after {study.budget.warmup_samples:,} "
          f"warm-up samples; the machine's CPU time: {meter.describe()}\n")
    print("| window samples | trials | sd of log throughput [95% CI] | median window CV | median trial s |")
    print("|---:|---:|---|---:|---:|")
    for n, runs in found.items():
        s = spread([r["throughput"] for r in runs])
        print(f"| {n:,} | {s.n} | {s.sd:.3f} [{s.low:.3f}, {s.high:.3f}] | "
              f"{statistics.median(r['throughput_cv_pct'] for r in runs):.1f}% | "
              f"{statistics.median(r['trial_s'] for r in runs):.1f} |")
    short, long = (spread([r["throughput"] for r in found[n]]) for n in args.lengths)
    ratio = short.sd ** 2 / long.sd ** 2
    p = stats.f.sf(ratio, short.n - 1, long.n - 1)
    print(f"\nvariance ratio short / long: {ratio:.2f} (one-sided F test that the long windows are steadier: "
          f"P = {p:.3f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
