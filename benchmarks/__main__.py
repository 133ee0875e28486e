"""`make bench`: run the framework's benchmarks and rewrite this device's section of benchmarks/RESULTS.md.

    python -m benchmarks [--device cpu|cuda] [--no-grid] [--pairs 7] [--repeats 5] [--profile-pairs 7]

Each device type has its own section between markers, so a GPU run does not
erase the CPU figures; everything else in RESULTS.md is left as it is.
"""
from __future__ import annotations

import argparse
import platform
import re
import statistics
import sys
from datetime import datetime, timezone
from pathlib import Path

from ablate.trial.machine import default_device, describe, resolve
from benchmarks import cpu_time, grid, overhead, profiling, trials
from benchmarks.sections import RESULTS, rewrite

TARGET_OVERHEAD = 0.01
PROFILING, GRID = "### 4. The profiling window", "### 5. Full mnist_cnn grid"
TARGET_NOISE_PCT = {"cpu": 5.0, "cuda": 2.0}


def _halvable(text: str) -> int:
    """--steps: the overhead's longer block, which must leave a shorter one of at least a step."""
    steps = int(text)
    if steps < 2:
        raise argparse.ArgumentTypeError(f"{steps}: the overhead needs blocks of 2 steps or more")
    return steps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=default_device())
    parser.add_argument("--pairs", type=int, default=9, help="alternated overhead pairs (default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=5, help="repeated baseline trials (default: %(default)s)")
    parser.add_argument("--profile-pairs", type=int, default=7,
                        help="baseline trials with the profiling window and without, in pairs (default: %(default)s; "
                             "0 skips them)")
    parser.add_argument("--no-grid", action="store_true",
                        help="skip the full mnist_cnn grid (about 13 min on 2 CPU cores)")
    parser.add_argument("--steps", type=_halvable, default=40,
                        help="training steps in the longer overhead block; the shorter has half (default: %(default)s)")
    parser.add_argument("--study", default="mnist_cnn",
                        help="the study whose baseline trials time start-up, noise and the profiling window (default: "
                             "%(default)s; the grid is always mnist_cnn)")
    parser.add_argument("--results", type=Path, default=Path("results/bench"), help="where the grid's results go")
    parser.add_argument("--output", type=Path, default=RESULTS, help="the file to rewrite (default: %(default)s)")
    args = parser.parse_args(argv)
    device = resolve(args.device)  # "cuda": the current device, by index, in the record
    machine = describe(str(device))
    kind = device.type
    lines = [f"<!-- bench:{kind}:start (written by `make bench`; edit outside these markers) -->",
             f"## `make bench` on {kind.upper()}: {machine.device_name}", "",
             f"- Host {machine.host}; Python {platform.python_version()}; torch {machine.torch}; "
             f"commit {machine.commit}; "
             f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC.", ""]

    end = f"<!-- bench:{kind}:end -->"

    def add(part: list[str], pending: str | None) -> None:
        """Keep every finished part, on stdout and in the file, so a later failure loses nothing measured."""
        lines.extend(part)
        print("\n".join(part), flush=True)
        rewrite(args.output, kind,
                "\n".join(lines + ([f"*Still measuring: {pending}.*", ""] if pending else []) + [end]))

    print("1/5 framework overhead ...", file=sys.stderr)
    add(_overhead(overhead.measure(device, pairs=args.pairs, steps=args.steps), args.pairs),
        "start-up, noise, the profiling window, grid")
    print("2-3/5 trial start-up and noise ...", file=sys.stderr)
    with cpu_time.Meter() as meter:
        runs = trials.measure(str(device), repeats=args.repeats, study_name=args.study)
    add(_startup(runs) + _noise(runs, kind, meter), "the profiling window" + ("" if args.no_grid else ", grid"))
    if args.profile_pairs:
        print("4/5 the profiling window ...", file=sys.stderr)
        found = profiling.measure(str(device), pairs=args.profile_pairs, study_name=args.study)
        add(_profiling(found, args.study), None if args.no_grid else "the full grid")
    else:
        add([PROFILING, "", "Not run this time (`--profile-pairs 0`).", ""], None if args.no_grid else "the full grid")
    if args.no_grid:
        add([GRID, "", "Not run this time (`--no-grid`).", ""], None)
    else:
        print("5/5 full mnist_cnn grid ...", file=sys.stderr)
        add(_grid(grid.run("mnist_cnn", args.results, str(device))), None)
    print(f"wrote {args.output}", file=sys.stderr)
    return 0


def _overhead(results: list[overhead.Overhead], pairs: int) -> list[str]:
    out = ["### 1. Framework overhead", "", overhead.__doc__.split("\n\n", 1)[1].strip().replace("\n", " "), "",
           "| loop | ablate ms/step | hand ms/step | ablate / hand, median | range over pairs | target: within 1% "
           "| ablate's once-a-block cost, ms |", "|---|---:|---:|---:|---|---|---:|"]
    for r in results:
        excess = r.median - 1
        verdict = ("met" if abs(excess) <= TARGET_OVERHEAD
                   else f"missed by {100 * (abs(excess) - TARGET_OVERHEAD):.1f} points")
        out.append(f"| {r.variant} | {r.ablate_step_ms:.2f} | {r.hand_step_ms:.2f} | {r.median:.3f} | "
                   f"{min(r.ratios):.3f} - {max(r.ratios):.3f} ({pairs} pairs) | {verdict} | {r.once_ms:.1f} |")
    return out + [""]


def _summary(values: list[float], unit: str = "s", scale: float = 1.0) -> str:
    vs = [v * scale for v in values]
    return f"{statistics.median(vs):.3f} {unit} (range {min(vs):.3f} - {max(vs):.3f}, n={len(vs)})"


def _startup(runs: trials.TrialRuns) -> list[str]:
    return ["### 2. Trial start-up", "", trials.__doc__.split("\n\n")[1].strip().replace("\n", " "), "",
            f"- Start-up per trial: **{_summary(runs.startup())}**, of which waiting for an interpreter to finish "
            f"importing {_summary(runs.startup('process_start_s'))}, stopping the imports still running before the "
            f"measured stretch {_summary(runs.startup('import_wait_s'))} and loading the dataset "
            f"{_summary(runs.startup('data_load_s'))}.",
            f"- The first trial of a run (its interpreter started cold): {trials.startup_s(runs.first):.2f} s.",
            "- Each trial is a new interpreter (spawn), for a fresh address-space layout per measurement (see "
            "`ablate/trial/process.py`); its `import torch` runs ahead, and only outside every measured stretch: "
            "imports are stopped while a trial measures (`ablate/trial/interpreters.py`), and what the unmeasured time "
            "cannot hide is waited for at the next launch. DataLoader workers start with the platform default (fork), "
            "as in a user's own script.", ""]


def _noise(runs: trials.TrialRuns, kind: str, meter: cpu_time.Meter) -> list[str]:
    target = TARGET_NOISE_PCT[kind]
    within, between = statistics.median(runs.window_cvs), runs.between_trials_cv
    b = runs.study.budget

    def verdict(cv: float) -> str:
        return "met" if cv <= target else f"missed by {cv - target:.1f} points"
    return ["### 3. Measurement noise", "",
            f"The {runs.study.name} baseline, {len(runs.repeats)} throughput trials with the study's {kind} budget "
            f"({b.describe_windows()}, in samples).", "",
            f"- CV of a trial's timed windows: median **{statistics.median(runs.window_cvs):.1f}%** "
            f"(range {min(runs.window_cvs):.1f} - {max(runs.window_cvs):.1f}%); target {target:g}%: {verdict(within)}.",
            f"- CV of the trials' median throughputs: **{between:.1f}%** (median "
            f"{statistics.median(m['throughput'] for m in runs.repeats):.0f} samples/s); target {target:g}%: "
            f"{verdict(between)}.",
            f"- CPU time of the whole machine meanwhile (/proc/stat): {meter.describe()}.", ""]


def _profiling(found: profiling.ProfilingCost, study: str) -> list[str]:
    low_high = (f"95% interval {found.interval[0]:.3f} - {found.interval[1]:.3f}" if found.interval
                else "no interval from one pair")
    within = "" if not found.interval else (" (the interval holds 1: no cost shown)"
                                            if found.interval[0] <= 1 <= found.interval[1] else " (1 is outside it)")
    shares = ", ".join(f"{name} {100 * share:.0f}%" for name, share in found.shares.items())
    idle = (f"; the GPU sat idle for {100 * statistics.median(found.idle):.0f}% of the window (median)"
            if found.idle else "")
    return [PROFILING, "", profiling.__doc__.split("\n\n", 1)[1].strip().replace("\n", " "), "",
            f"- Throughput with the profiling window over without ({study}'s baseline): **{found.ratio:.3f}** "
            f"({low_high}, {found.pairs} pairs){within}.",
            f"- Inside the window, the instrumentation's cost (`profile_cost`, 1 is none): median "
            f"{statistics.median(found.costs):.3f} (range {min(found.costs):.3f} - {max(found.costs):.3f}, "
            f"n={len(found.costs)}).",
            f"- Where the baseline's step goes (median shares): {shares}{idle}.", ""]


def _grid(run: grid.GridRun) -> list[str]:
    found = re.search(r"^combination .*?(?=\n\n|\Z)", run.output, flags=re.S | re.M)
    assert found is not None, "the grid's output has no results table"
    table = found.group(0)
    report = run.report.read_text()
    minutes, seconds = divmod(round(run.wall_s), 60)
    return [GRID, "",
            f"`ablate run mnist_cnn` in a subprocess, fresh results folder and a cold inductor cache: "
            f"**{minutes} min {seconds} s** wall time.", "",
            "```", _trim(table), "```", "",
            f"From its report (`{run.report.parent}/report.html`):", "",
            *_section(report, "## The answer"), *_section(report, "## What each technique is worth"), ""]


def _trim(table: str) -> str:
    """The table without its reason column, which is empty on complete rows; skipped rows summarised."""
    rows = table.splitlines()
    cut = rows[0].index("reason")
    kept = [r[:cut].rstrip() for r in rows if " skipped " not in r]
    skipped = len(rows) - len(kept)
    return "\n".join(kept) + (f"\n({skipped} skipped rows not shown; the report lists their reasons)"
                              if skipped else "")


def _section(markdown: str, heading: str) -> list[str]:
    """A level-2 section of the report, headings demoted one level, images dropped."""
    match = re.search(rf"^{re.escape(heading)}\n(.*?)(?=^## |\Z)", markdown, flags=re.S | re.M)
    if not match:
        return []
    body = [line for line in match.group(1).splitlines() if not line.startswith("![")]
    return [f"#{heading}", *body]


if __name__ == "__main__":
    sys.exit(main())
