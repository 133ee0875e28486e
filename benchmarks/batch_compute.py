"""What a bigger batch makes cheaper per sample: each phase of the step, the baseline against batch_size(n).

    python -m benchmarks.batch_compute [--study mnist_cnn] [--pairs 8] [--batch 128] [--profile-s 2]

Runs the study's baseline and the same with `batch_size(n=N)` as throughput-only trials that open the profiling
window (`ablate.trial.phases`), each in a fresh interpreter as a study runs them, alternating which goes first every
pair so drift falls on both alike. Per trial, each phase's seconds per sample: its mean seconds per profiled step
over the samples a step takes. Reported per phase: the median per sample of each; then, over the pairs, the ratio
of the bigger batch's to the baseline's for forward + backward, for data and for the optimizer, each a geometric
mean with its 95% t interval on the logs. Why: `BatchSize.targets` names what a bigger batch makes cheaper per
sample. The optimizer's ratio (about 1/2 for twice the batch) is a per-step cost spread over more samples; one
under 1 for forward + backward would say a bigger batch makes compute cheaper too, and for data that the loader
has a per-batch cost.
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import statistics

from ablate.config import study as studies
from ablate.config.choices import baseline_levels
from ablate.trial import metrics as metric
from ablate.trial.interpreters import Interpreters
from ablate.trial.machine import default_device, describe
from ablate.trial.process import TrialSpec, run_in_fresh_process
from benchmarks import cpu_time
from benchmarks.repetitions import mean_interval

COMPUTE = ("forward", "backward")


def per_sample(found: dict, phases: tuple[str, ...]) -> float:
    """Seconds per sample of `phases` together, from a trial's profiling window."""
    samples = found[metric.TRAIN_SAMPLES] / found[metric.TRAIN_STEPS]
    return sum(found[metric.phase_s(p)] for p in phases) / samples


def ratio(bigger: list[dict], base: list[dict], phases: tuple[str, ...]) -> tuple[float, float, float]:
    """The paired ratio of `phases`' seconds per sample, bigger batch over baseline: geometric mean, 95% t interval."""
    mean, half = mean_interval([math.log(per_sample(b, phases) / per_sample(a, phases))
                                for b, a in zip(bigger, base, strict=True)])
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.batch_compute", description=__doc__.splitlines()[0])
    parser.add_argument("--study", default="mnist_cnn")
    parser.add_argument("--device", default=default_device())
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--batch", type=int, default=128, help="the bigger batch, against the baseline's")
    parser.add_argument("--profile-s", type=float, default=2.0, help="the profiling window's least seconds")
    args = parser.parse_args(argv)
    study = studies.load(args.study, args.device.split(":")[0])
    budget = dataclasses.replace(study.budget, profile_seconds=max(study.budget.profile_seconds, args.profile_s))
    study = dataclasses.replace(study, budget=budget)
    levels = dict(baseline_levels(study.choices))
    names = {"baseline": levels, f"batch_size(n={args.batch})": {**levels, "batch_size": f"batch_size(n={args.batch})"}}
    specs = {name: TrialSpec(study, study.combination(chosen).options, args.device, train_for_accuracy=False)
             for name, chosen in names.items()}
    found: dict[str, list[dict]] = {name: [] for name in specs}
    with cpu_time.Meter() as meter, Interpreters() as prepared:
        run_in_fresh_process(specs["baseline"], interpreters=prepared)  # the cold first trial, not counted
        for pair in range(args.pairs):
            for name in list(specs) if pair % 2 == 0 else reversed(list(specs)):
                metrics = run_in_fresh_process(specs[name], interpreters=prepared)
                found[name].append(metrics)
                print(f"pair {pair + 1}/{args.pairs}, {name}: forward + backward "
                      f"{per_sample(metrics, COMPUTE) * 1e6:.0f} us a sample", flush=True)
    machine = describe(args.device)
    print(f"\n{args.study} on {machine.device_name}, torch {machine.torch}, commit {machine.commit}; {args.pairs} "
          f"alternated pairs of throughput-only trials, each profiling at least {budget.profile_seconds:g} s; the "
          f"machine's CPU time: {meter.describe()}\n")
    print(f"| phase | {' | '.join(specs)} |  (median microseconds a sample)\n|---|---:|---:|")
    for phase in metric.STEP_PHASES:
        cells = [f"{statistics.median(per_sample(m, (phase,)) for m in runs) * 1e6:.1f}" for runs in found.values()]
        print(f"| {phase} | {' | '.join(cells)} |")
    base, bigger = found.values()
    for label, phases in (("forward + backward", COMPUTE), ("data", ("data",)), ("optimizer", ("optimizer",))):
        mean, low, high = ratio(bigger, base, phases)
        print(f"{label} a sample, batch {args.batch} over the baseline's: x{mean:.3f} [{low:.3f}, {high:.3f}] "
              f"(95% t on the logs, {args.pairs} pairs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
