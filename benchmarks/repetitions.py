"""How many timed windows should a trial have? Kalibera and Jones's optimal repetitions, measured.

    python -m benchmarks.repetitions [--study mnist_cnn] [--trials 12] [--windows 6]
        [--warmup-samples N] [--window-samples N] [--choose DIMENSION=INDEX ...]

A dimensioning experiment in the sense of Kalibera and Jones ("Rigorous
benchmarking in reasonable time", ISMM 2013): the study's baseline is run as
`--trials` throughput-only trials (fresh interpreters, as a study runs them),
each with `--windows` timed windows of the study's `window_samples`
(`window_seconds` off, so every window has the same samples). Two levels of
repetition, on log throughput:

- level 1, windows within a trial: S1^2, the windows' variance about their
  trial's mean (pooled, trials x (windows - 1) degrees of freedom). The
  unbiased estimate of its variance component is T1^2 = S1^2.
- level 2, trials: S2^2, the variance of the trials' means (trials - 1
  degrees of freedom), of which the windows contribute T1^2 / r1, so
  T2^2 = S2^2 - S1^2 / r1.

Costs: c1, a window's seconds; c2, a trial's seconds outside its windows
(start-up, first step, warm-up, teardown). Kalibera and Jones's optimum for
the windows per trial is ceil(sqrt(c2 / c1 * T1^2 / T2^2)): the count at which
a second spent on one more window buys as much precision as a second spent
on a share of one more trial. The table gives, for each count, the variance
of one trial's mean (T2^2 + T1^2 / r) times its cost (c2 + r c1), relative to
the study's own count: below 1, equal precision for less time.

c2 is this loop's: it includes waiting for the next prepared interpreter,
whose imports were stopped while the trial measured. Inside a study that wait
overlaps the study's own work between trials, so a trial there can cost less
outside its windows (4.6 s against 7.1 s in the a76a53e grid,
benchmarks/RESULTS.md), and the optimum is then smaller.

The same run checks the warm-up. Each window's offset from the plateau (the
mean of the trial's second half of windows), averaged over trials, shows a
start-up transient the warm-up leaves: with `--warmup-samples 0` and short
windows, the first windows read where the loop settles, and the warm-up a
study needs is what the windows before the plateau held. A combination other
than the baseline: `--choose graph=1 --choose amp=1` (each dimension's option
by its index in the study's `space`), since TorchScript's profiling executor,
Inductor and the workers' first batches settle at their own pace.
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
import time
from dataclasses import dataclass
from typing import Sequence

from scipy import stats

from ablate.config import study as studies
from ablate.config.choices import compose_options
from ablate.config.design import CONFIDENCE
from ablate.config.schema import Study
from ablate.trial.interpreters import Interpreters
from ablate.trial.machine import default_device, describe
from ablate.trial.process import TrialSpec, run_in_fresh_process
from benchmarks import cpu_time
from benchmarks.trials import baseline_spec


@dataclass(frozen=True)
class Components:
    """Variance components of log throughput at two levels, windows (1) within trials (2)."""

    s1: float  # S1^2: windows about their trial's mean, pooled
    df1: int
    s2: float  # S2^2: the trials' means
    df2: int
    windows: int  # r1, windows per trial

    @property
    def t1(self) -> float:
        return self.s1

    @property
    def t2(self) -> float:
        """Can come out at or below zero: the trials then vary no more than their windows explain."""
        return self.s2 - self.s1 / self.windows


def components(trials: Sequence[Sequence[float]]) -> Components:
    """`trials`: each trial's log throughput per window, every trial with the same number of windows."""
    r = len(trials[0])
    if r < 2 or len(trials) < 2 or any(len(t) != r for t in trials):
        raise ValueError("need two or more trials of the same two or more windows")
    means = [statistics.fmean(t) for t in trials]
    df1 = len(trials) * (r - 1)
    s1 = sum((x - m) ** 2 for t, m in zip(trials, means) for x in t) / df1
    return Components(s1, df1, statistics.variance(means), len(trials) - 1, r)


def variance_interval(variance: float, df: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The exact interval of a normal sample variance: df s^2 / sigma^2 is chi-square with df degrees of freedom."""
    tail = (1 - confidence) / 2
    return df * variance / stats.chi2.ppf(1 - tail, df), df * variance / stats.chi2.ppf(tail, df)


def optimal_windows(t1: float, t2: float, c1: float, c2: float) -> int | None:
    """Kalibera and Jones's optimal repetitions at the lower level; None where T2^2 is not above zero (more
    windows per trial always pay then: the estimate sets no limit)."""
    if t2 <= 0:
        return None
    return max(1, math.ceil(math.sqrt(c2 / c1 * t1 / t2)))


def relative_cost(t1: float, t2: float, c1: float, c2: float, r: int, against: int) -> float:
    """Time for equal precision with `r` windows per trial, as a share of that with `against` windows."""
    def work(n: int) -> float:
        return (t2 + t1 / n) * (c2 + n * c1)
    return work(r) / work(against)


def mean_interval(xs: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The mean of `xs` and its t interval's half-width (two or more values)."""
    half = stats.t.ppf(0.5 + confidence / 2, len(xs) - 1) * statistics.stdev(xs) / math.sqrt(len(xs))
    return statistics.fmean(xs), float(half)


def _offsets(trials: Sequence[Sequence[float]], first: int, confidence: float) -> list[tuple[float, float]]:
    """Each window's offset from the mean of its trial's windows from `first` on, averaged over trials, with its
    interval's half-width (t over the trials)."""
    references = [statistics.fmean(t[first:]) for t in trials]
    out = []
    for i in range(len(trials[0])):
        out.append(mean_interval([t[i] - r for t, r in zip(trials, references)], confidence))
    return out


def transient(trials: Sequence[Sequence[float]], confidence: float = CONFIDENCE) -> list[tuple[float, float]]:
    """Each window's offset from its trial's mean: a start-up transient the warm-up left shows as window 0 (and
    maybe 1) below zero, the rest above."""
    return _offsets(trials, 0, confidence)


def plateau_offsets(trials: Sequence[Sequence[float]],
                    confidence: float = CONFIDENCE) -> list[tuple[float, float]]:
    """Each window's offset from its trial's plateau (the mean of the trial's second half of windows): where the
    warm-up was too short the first windows read below 0."""
    return _offsets(trials, len(trials[0]) // 2, confidence)


def chosen(study: Study, choices: Sequence[str]) -> tuple:
    """The options of the combination `choices` names (DIMENSION=INDEX each; the rest at their first, off)."""
    picked = dict.fromkeys((name for name, _ in study.space), 0)
    for choice in choices:
        name, _, index = choice.partition("=")
        if name not in picked or not index.isdigit():
            raise SystemExit(f"--choose {choice!r}: write DIMENSION=INDEX with a dimension of the study's space "
                             f"({', '.join(picked)}) and an option's index in it")
        picked[name] = int(index)
    options = []
    for name, dimension in study.space:
        if picked[name] >= len(dimension):
            raise SystemExit(f"--choose {name}={picked[name]}: the dimension has {len(dimension)} options (0 to "
                             f"{len(dimension) - 1})")
        options.append(dimension[picked[name]])
    return tuple(options)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.repetitions", description=__doc__.splitlines()[0])
    parser.add_argument("--study", default="mnist_cnn")
    parser.add_argument("--device", default=default_device())
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--windows", type=int, default=6, help="timed windows per trial (two or more)")
    parser.add_argument("--warmup-samples", type=int, help="untimed samples after the first step (default: the "
                        "study's)")
    parser.add_argument("--window-samples", type=int, help="samples per timed window (default: the study's)")
    parser.add_argument("--choose", action="append", default=[], metavar="DIMENSION=INDEX",
                        help="measure this option of a dimension instead of its first (off); repeatable")
    args = parser.parse_args(argv)
    if args.trials < 2 or args.windows < 2:
        parser.error("--trials and --windows must each be 2 or more")
    study = studies.load(args.study, args.device.split(":")[0])
    # Samples only (no cap, no floor): every window holds window_samples, which `window_units` counts on.
    budget = dataclasses.replace(study.budget, windows=args.windows, window_seconds=None, min_window_seconds=0)
    if args.warmup_samples is not None:
        budget = dataclasses.replace(budget, warmup_samples=args.warmup_samples)
    if args.window_samples is not None:
        budget = dataclasses.replace(budget, window_samples=args.window_samples)
    measured = dataclasses.replace(study, budget=budget)
    spec = (TrialSpec(measured, chosen(study, args.choose), args.device, train_for_accuracy=False) if args.choose
            else baseline_spec(measured, args.device))
    # The measured combination's batch (a batch_size option changes it): windows are whole steps of it.
    batch = compose_options(spec.options).loader_kwargs(batch_size=study.baseline.batch_size)["batch_size"]
    window_units = math.ceil(budget.window_samples / batch) * batch * study.task.units_per_sample  # whole steps
    logs, window_s, outside_s = [], [], []
    with cpu_time.Meter() as meter, Interpreters() as prepared:
        run_in_fresh_process(spec, interpreters=prepared)  # the cold first trial, not counted
        for n in range(args.trials):
            began = time.perf_counter()
            metrics = run_in_fresh_process(spec, interpreters=prepared)
            took = time.perf_counter() - began
            rates = [metrics[f"throughput_window_{i}"] for i in range(args.windows)]
            seconds = [window_units / rate for rate in rates]
            logs.append([math.log(rate) for rate in rates])
            window_s.append(statistics.fmean(seconds))
            outside_s.append(took - sum(seconds))
            print(f"trial {n + 1}/{args.trials}: {metrics['throughput']:.0f} {study.throughput_unit}/s, {took:.1f} s",
                  flush=True)
    found = components(logs)
    c1, c2 = statistics.median(window_s), statistics.median(outside_s)
    machine = describe(args.device)
    measured_name = " ".join(args.choose) or "baseline"
    print(f"\n{args.study} {measured_name} on {machine.device_name}, torch {machine.torch}, commit {machine.commit}; "
          f"{args.trials} trials of {args.windows} windows of {budget.window_samples:,} samples after "
          f"{budget.warmup_samples:,} warm-up ones; the machine's CPU time: {meter.describe()}\n")
    print("| level | S^2 of log throughput [95% CI] | df | variance component | cost s (median) |")
    print("|---|---|---:|---:|---:|")
    for name, s, df, t, c in (("windows in a trial", found.s1, found.df1, found.t1, c1),
                              ("trials", found.s2, found.df2, found.t2, c2)):
        low, high = variance_interval(s, df)
        print(f"| {name} | {s:.5f} [{low:.5f}, {high:.5f}] | {df} | {t:.5f} | {c:.2f} |")
    print("\n| window | mean log throughput less its trial's mean [95% CI] |\n|---:|---|")
    for i, (mean, half) in enumerate(transient(logs)):
        print(f"| {i} | {mean:+.4f} [{mean - half:+.4f}, {mean + half:+.4f}] |")
    print("\n| window (samples after the warm-up) | mean log throughput less its trial's plateau, the second half's "
          "mean [95% CI] |\n|---:|---|")
    for i, (mean, half) in enumerate(plateau_offsets(logs)):
        print(f"| {i} ({i * window_units // study.task.units_per_sample:,}) | {mean:+.4f} [{mean - half:+.4f}, "
              f"{mean + half:+.4f}] |")
    best = optimal_windows(found.t1, found.t2, c1, c2)
    own = study.budget.windows
    print(f"\noptimal windows per trial (Kalibera and Jones): "
          f"{best if best else 'no limit (T2^2 not above zero)'}; the study uses {own}")
    if found.t2 > 0:
        print("\n| windows per trial | time for equal precision, vs the study's count |\n|---:|---:|")
        for r in range(1, max(own, best or 1, 6) + 1):
            print(f"| {r} | {relative_cost(found.t1, found.t2, c1, c2, r, own):.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
