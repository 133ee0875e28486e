"""What evaluation's batch size costs a training for accuracy: the study's default against a batch the study sets.

    python -m benchmarks.evaluation_batch [--study mnist_cnn] [--pairs 6] [--against 1000] [--train-samples N]

Runs the study's baseline as accuracy trainings (fresh interpreters, as a study runs them), alternating the
default `test_batch_size` (null: the device's, `Budget.test_batch`) and `--against`, swapping which goes first
every pair, so drift falls on both alike. Each training evaluates once, at its end. Reported per setting: the median
seconds its evaluation took (the trial's own `evaluating` stretch), the median trial, and the test accuracy; then
the paired difference in evaluation seconds with its 95% t interval. Every training trains the same weights (one
seed), so the accuracies say whether the batch changed what was evaluated. `--train-samples` shortens the
trainings, which the evaluation does not depend on.
"""
from __future__ import annotations

import argparse
import dataclasses
import statistics
import time

from ablate.config import study as studies
from ablate.trial import metrics as metric
from ablate.trial.interpreters import Interpreters
from ablate.trial.machine import default_device, describe
from ablate.trial.process import TrialSpec, run_in_fresh_process
from benchmarks import cpu_time
from benchmarks.repetitions import mean_interval

DEFAULT = "default"


def evaluating_s(found: dict) -> float:
    """Seconds the trial spent evaluating (its timeline's `evaluating` stretches)."""
    return sum(end - start for start, end in found[metric.TIMELINE]["evaluating"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.evaluation_batch", description=__doc__.splitlines()[0])
    parser.add_argument("--study", default="mnist_cnn")
    parser.add_argument("--device", default=default_device())
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--against", type=int, default=1000, help="the test_batch_size compared with the default")
    parser.add_argument("--train-samples", type=int, help="train this many samples (default: the study's)")
    args = parser.parse_args(argv)
    study = studies.load(args.study, args.device.split(":")[0])
    budget = dataclasses.replace(study.budget, train_samples=args.train_samples or study.budget.train_samples,
                                 eval_every_samples=None, profile_steps=0)
    options = tuple(choices[0] for _, choices in study.space)
    specs = {name: TrialSpec(dataclasses.replace(study, budget=dataclasses.replace(budget, test_batch_size=size)),
                             options, args.device, train_for_accuracy=True)
             for name, size in ((DEFAULT, None), (str(args.against), args.against))}
    device_type = args.device.split(":")[0]
    found: dict[str, list[dict]] = {name: [] for name in specs}
    with cpu_time.Meter() as meter, Interpreters() as prepared:
        run_in_fresh_process(specs[DEFAULT], interpreters=prepared)  # the cold first trial, not counted
        for pair in range(args.pairs):
            for name in list(specs) if pair % 2 == 0 else reversed(list(specs)):
                began = time.perf_counter()
                metrics = run_in_fresh_process(specs[name], interpreters=prepared)
                found[name].append({**metrics, "trial_s": time.perf_counter() - began})
                print(f"pair {pair + 1}/{args.pairs}, test_batch_size {name}: evaluation "
                      f"{evaluating_s(metrics):.2f} s, test accuracy {metrics[metric.TEST_ACCURACY]:.2f}%", flush=True)
    machine = describe(args.device)
    print(f"\n{args.study} baseline on {machine.device_name}, torch {machine.torch}, commit {machine.commit}; "
          f"{args.pairs} alternated pairs of trainings of {budget.train_samples:,} samples; the default batch here: "
          f"{budget.test_batch(device_type, study.baseline.batch_size)}; the machine's CPU time: "
          f"{meter.describe()}\n")
    print("| test_batch_size | trainings | median evaluation s | median trial s | test accuracy |")
    print("|---|---:|---:|---:|---|")
    for name, runs in found.items():
        accuracies = sorted({f"{r[metric.TEST_ACCURACY]:.2f}%" for r in runs})
        print(f"| {name} | {len(runs)} | {statistics.median(evaluating_s(r) for r in runs):.2f} | "
              f"{statistics.median(r['trial_s'] for r in runs):.1f} | {', '.join(accuracies)} |")
    differences = [evaluating_s(a) - evaluating_s(b) for a, b in zip(*found.values())]
    mean, half = mean_interval(differences)
    print(f"\nevaluation, default less {args.against}: {mean:+.2f} s [{mean - half:+.2f}, {mean + half:+.2f}] "
          f"(95% t over {len(differences)} pairs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
