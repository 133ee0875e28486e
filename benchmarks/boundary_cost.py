"""What profiling a step costs on a CPU: the phase boundaries' clock reads, per step, against nothing.

    python -m benchmarks.boundary_cost [--steps 100000] [--repeats 7]

A CPU measurement that trains no accuracy profiles its timed windows' own steps (`ablate.trial.phases.in_windows`):
each step then marks its five phase boundaries and its end on a `ProfilingWindow`, a `time.perf_counter` read and a
list entry each. Timed here with `timeit` on the window the trial uses, `--steps` profiled steps of bookkeeping alone
(no training) per repeat, less the same loop's branch that a step outside the profile pays: the seconds a profiled
step adds. Reported: the median over `--repeats` and their range, per step. Set it against a step of the study's
(mnist_cnn's baseline profiles at tens of milliseconds on a 2-core CPU) to read the share of a timed window it is.
"""
from __future__ import annotations

import argparse
import statistics
import time
import timeit

import torch

from ablate.config.study import Budget
from ablate.trial import phases

MARKS = (phases.DATA, phases.COPY, phases.FORWARD, phases.BACKWARD, phases.OPTIMIZER)


def per_step(steps: int, repeats: int) -> list[float]:
    """Seconds a profiled step's bookkeeping adds, one figure per repeat."""
    def profiled() -> None:
        window = phases.ProfilingWindow(Budget(), torch.device("cpu"), time.perf_counter)
        for _ in range(steps):
            for boundary in MARKS:
                window.mark(boundary)
            window.end_step(64)

    def branched() -> None:  # the loop outside a profile: one flag read and a branch per boundary
        profiling = False
        for _ in range(steps):
            for _boundary in MARKS:
                if profiling:
                    pass

    on = timeit.repeat(profiled, number=1, repeat=repeats)
    off = timeit.repeat(branched, number=1, repeat=repeats)
    return [(a - b) / steps for a, b in zip(on, off, strict=True)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.boundary_cost", description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    found = per_step(args.steps, args.repeats)
    print(f"a profiled step's boundaries on a CPU: median {statistics.median(found) * 1e6:.2f} us a step "
          f"({min(found) * 1e6:.2f}-{max(found) * 1e6:.2f} over {args.repeats} repeats of {args.steps:,} steps)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
