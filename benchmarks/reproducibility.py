"""Do ablate's answers hold? Run one study twice, independently, and compare what each run reports.

    python -m benchmarks.reproducibility [--study benchmarks/studies/repro16.yaml] [--results results/repro]

Each run goes to a folder of its own (run 1, then run 2, one after the
other on the same machine) and is read back only through its `summary.json`.
For every combination measured in both, the two log speed-ups should differ
by less than 1.96 combined standard errors (`log_se` in summary.json): with
honest 95% intervals about 95% of them do. Each run's recommendation is
checked the same way against the other run's estimate of the same
combination (a recommended baseline: the other run's pick must be
indistinguishable from x1.00), and its interval's width (high / low) is
reported, since agreement must not be bought with vague intervals.

The two runs draw their own seeds (the study pins none): different screening
orders and different training seeds, printed with the result. Calibration:
with honest standard errors each z = difference / combined SE is about N(0, 1),
so the sum of z^2 over the K compared combinations would follow chi^2 with K
degrees of freedom were the rows independent; its tail probability is printed
beside the median interval width, and the two runs' recommended sets (simplest
first) should intersect. But a run's rows share its blocks' baselines, and
their errors rest on confirmation blocks, the race's spread or screening's
model, so the reference is the band simulated for repro16's design (`BANDS`):
at noise 0.08 the sum falls in [4.75, 33.5] (mean 14.4), at 0.15 in
[5.70, 24.8] (mean 13.8); the report places the pair inside, below (the
intervals are wider than the evidence) or above it (narrower), at the noise
whose simulated baseline spread is nearest the pair's.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from ablate.trial.machine import default_device, describe
from benchmarks import busy, cpu_time

STUDY = Path(__file__).resolve().parent / "studies" / "repro16.yaml"
Z = 1.96
RACED = {"race", "confirm"}  # phases whose rows' standard errors come from their own blocks


@dataclass(frozen=True)
class Band:
    """Where a pair's sum of z^2 falls with honest intervals, simulated on repro16's design at one process noise: its
    2.5% and 97.5% points, its mean, the rows it scores (K), and the simulated baseline's mean spread across blocks
    (summary.json's `baseline_cv_across_blocks`, by which a real pair's band is chosen)."""

    low: float
    high: float
    mean: float
    scored: int
    baseline_cv: float


# The reference for calibration on repro16, not chi^2 on K df (15 rows: [6.3, 27.5], mean 15): its rows share
# baselines and rest on confirmation blocks or screening's model. tests/stats/test_calibration_band.py computes it
# (its docstring: the figures by kind of row) and checks these against a fresh simulation. Keyed by the simulated
# process noise (log SD): the Xeon quiet and noisy.
BANDS = {0.08: Band(4.75, 33.51, 14.44, 15, 0.117), 0.15: Band(5.70, 24.79, 13.81, 15, 0.170)}
BANDS_FROM = "simulated: 100 pairs per noise, seeds 9000-9199, main at bf40c14, 2026-11-28"


def calibration(study: str, scored: int, total: float, cvs: list[float | None]) -> list[str]:
    """The report's lines placing a pair's sum of z^2 (`total` on `scored` rows) against the band simulated for
    repro16's design: at the noise whose simulated baseline spread is nearest the pair's (`cvs`: each run's
    `baseline_cv_across_blocks`), or at every noise where a run lacks one."""
    if study != STUDY.stem or any(b.scored != scored for b in BANDS.values()):
        return [f"- calibration: no band simulated for this design (repro16's score "
                f"{next(iter(BANDS.values())).scored} rows, this pair {scored})"]
    known = [cv for cv in cvs if cv is not None]
    noises, why = sorted(BANDS), "a run's baseline spread unknown: every band"
    if known and len(known) == len(cvs):
        cv = statistics.fmean(known)
        noises = [min(BANDS, key=lambda n: abs(BANDS[n].baseline_cv - cv))]
        why = f"the nearest to the pair's baseline CV across blocks, {cv:.3f}"
    lines = []
    for noise in noises:
        b = BANDS[noise]
        where = (f"inside the band simulated for this design at noise {noise:g}" if b.low <= total <= b.high else
                 f"below the band simulated for this design at noise {noise:g}: the intervals are wider than the "
                 "evidence" if total < b.low else
                 f"above the band simulated for this design at noise {noise:g}: the intervals are narrower than the "
                 "evidence")
        lines.append(f"- calibration on this design: sum of z^2 = {total:.1f} is {where} ({why}; band "
                     f"[{b.low:.1f}, {b.high:.1f}], mean {b.mean:.1f}, {b.scored} rows; {BANDS_FROM})")
    return lines


@dataclass(frozen=True)
class Comparison:
    agreeing: int
    compared: int
    recommendations: tuple[str, str]
    recommendation_agrees: tuple[bool, bool]
    widths: tuple[float | None, float | None]  # high / low of each run's recommendation
    spearman: float | None
    chi2: float = math.nan  # sum over the compared combinations of z^2 (z: difference / combined SE)
    chi2_p: float = math.nan  # P(chi^2 with `scored` df >= chi2): small = intervals too narrow to agree
    median_widths: tuple[float, float] = (math.nan, math.nan)  # each run's median interval width (high/low)
    sets: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())  # each run's recommended set, simplest first
    seeds: tuple[dict | None, dict | None] = (None, None)
    # The same sum over the combinations that neither run raced: their standard errors come from screening's
    # model, the raced ones' from their own blocks, so a miscalibration can be told to one or the other.
    chi2_screened: tuple[float, int] = (math.nan, 0)
    scored: int = 0  # the compared combinations with a standard error in both runs: chi2's degrees of freedom

    @property
    def sets_intersect(self) -> bool:
        return bool(set(self.sets[0]) & set(self.sets[1]))

    @property
    def share(self) -> float:
        return self.agreeing / self.compared if self.compared else math.nan


def _z(a: dict, b: dict) -> float:
    return (math.log(a["speedup"]) - math.log(b["speedup"])) / math.hypot(a["log_se"], b["log_se"])


def _rows(run: dict) -> dict[str, dict]:
    """A summary.json's speed-ups by combination, the baseline's (x1.00 by definition) left out."""
    return {s["combination"]: s for s in run["speedups"] if s["combination"] != "baseline"}


def z_scores(first: dict, second: dict) -> dict[str, float]:
    """The z of each combination both runs measured with a standard error: calibration's terms."""
    a, b = _rows(first), _rows(second)
    return {c: _z(a[c], b[c]) for c in sorted(set(a) & set(b))
            if a[c]["log_se"] is not None and b[c]["log_se"] is not None}


def _agree(a: dict, b: dict) -> bool:
    """Two estimates of one combination differ by less than 1.96 combined standard errors."""
    if a["log_se"] is None or b["log_se"] is None:
        return False
    return abs(math.log(a["speedup"]) - math.log(b["speedup"])) < Z * math.hypot(a["log_se"], b["log_se"])


def _pick_agrees(mine: dict, other: dict) -> bool:
    theirs = {s["combination"]: s for s in other["speedups"]}
    pick = mine["recommendation"]
    if pick["combination"] == "baseline":  # the other's pick must be indistinguishable from x1.00
        o = other["recommendation"]
        return o["combination"] == "baseline" or (o["low"] is not None and o["low"] <= 1.0)
    return pick["combination"] in theirs and _agree(pick, theirs[pick["combination"]])


def headlines(first: dict, second: dict) -> str:
    """Whether the two runs' headlines agree: the same combination, or one shown equivalent to the other (within the
    margin, by a run whose set holds both), or neither."""
    picks = [run["recommendation"]["combination"] for run in (first, second)]
    if picks[0] == picks[1]:
        return "the same"
    for i, run in enumerate((first, second)):
        rec = run["recommendation"]
        # Each member shown equivalent is within the margin of that run's leader.
        close = {rec.get("leader")} | {m["combination"] for m in rec.get("members", [])
                                       if (m.get("equivalence") or {}).get("shown")}
        if set(picks) <= close:
            return f"different, shown equivalent in run {i + 1}"
    return "different, not shown equivalent"


def compare(first: dict, second: dict) -> Comparison:
    from scipy.stats import spearmanr

    a, b = _rows(first), _rows(second)
    both = sorted(set(a) & set(b))
    agreeing = sum(_agree(a[c], b[c]) for c in both)
    rho = (float(spearmanr([a[c]["speedup"] for c in both], [b[c]["speedup"] for c in both])[0])
           if len(both) > 2 else None)
    width = [(r["high"] / r["low"]) if (r := s["recommendation"]) and r["low"] else None for s in (first, second)]
    from scipy.stats import chi2

    zs = z_scores(first, second)
    total = float(sum(z * z for z in zs.values()))
    screened = [z * z for c, z in zs.items() if not {a[c].get("phase"), b[c].get("phase")} & RACED]
    medians = tuple(statistics.median(s["high"] / s["low"] for s in run["speedups"] if s["low"]
                                      and s["combination"] != "baseline") for run in (first, second))
    sets = tuple(tuple(run["recommendation"].get("set") or [run["recommendation"]["combination"]])
                 for run in (first, second))
    return Comparison(agreeing, len(both),
                      (first["recommendation"]["combination"], second["recommendation"]["combination"]),
                      (_pick_agrees(first, second), _pick_agrees(second, first)), (width[0], width[1]), rho,
                      total, float(chi2.sf(total, len(zs))) if zs else math.nan, medians, (sets[0], sets[1]),
                      (first.get("seeds"), second.get("seeds")), (float(sum(screened)), len(screened)), len(zs))


def transient_load(after_s: float, seconds: float, cores: int) -> threading.Thread:
    """After `after_s`, every core busy for `seconds`: a neighbour's burst, started here so that it is not part of
    any trial's process tree (the load guard must see it as foreign). Returns the thread that starts it."""
    def burst() -> None:
        time.sleep(after_s)
        burners = [subprocess.Popen(busy.command(seconds)) for _ in range(cores)]
        print(f"transient load: {cores} busy processes for {seconds:g} s", file=sys.stderr, flush=True)
        for p in burners:
            p.wait()
    thread = threading.Thread(target=burst, daemon=True)
    thread.start()
    return thread


def _run(args: argparse.Namespace, folders: list[Path]) -> list[float]:
    """Both runs, each in a fresh folder with seeds of its own (the study pins none); their wall times. With
    `--transient-load`, run 1 shares the machine with a burst that starts `--load-after` seconds into it."""
    began, procs, walls = time.perf_counter(), [], [math.nan, math.nan]
    for i, folder in enumerate(folders):
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        log = (folder / "stdout.txt").open("w")
        procs.append(subprocess.Popen([sys.executable, "-m", "ablate", "run", args.study, "--device", args.device,
                                       "--results", str(folder)], stdout=log, stderr=subprocess.STDOUT, text=True))
        if i == 0 and args.transient_load:
            transient_load(args.load_after, args.transient_load, os.cpu_count() or 1)
        if not args.concurrent:
            procs[-1].wait()
            walls[i] = time.perf_counter() - began
            began = time.perf_counter()
    for i, p in enumerate(procs):
        if p.wait() != 0:
            raise SystemExit(f"run {i + 1} failed (exit {p.returncode}); see {folders[i] / 'stdout.txt'}")
        if args.concurrent:
            walls[i] = time.perf_counter() - began
    return walls


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.reproducibility", description=__doc__.splitlines()[0])
    parser.add_argument("--study", default=str(STUDY))
    parser.add_argument("--results", type=Path, default=Path("results/repro"))
    parser.add_argument("--device", default=default_device())
    parser.add_argument("--concurrent", action="store_true",
                        help="run the two studies at the same time (half the wall time; each sees the other's load)")
    parser.add_argument("--transient-load", type=float, default=0.0, metavar="SECONDS",
                        help="during run 1, every core busy for this long (a neighbour's burst; 90 in the issue's "
                             "pair); 0: none")
    parser.add_argument("--load-after", type=float, default=60.0, metavar="SECONDS",
                        help="how far into run 1 the burst starts (default 60: during screening)")
    parser.add_argument("--compare-only", action="store_true", help="compare the summaries already in --results")
    args = parser.parse_args(argv)
    name = Path(args.study).stem
    folders = [args.results / f"run{run}" for run in (1, 2)]
    walls: list[float] = [math.nan, math.nan]
    meter = cpu_time.Meter()
    if not args.compare_only:
        with meter:
            walls = _run(args, folders)
    summaries = [json.loads((f / name / "report" / "grid" / "summary.json").read_text()) for f in folders]
    c = compare(*summaries)
    machine = describe(args.device)
    lines = [f"Reproducibility of `{name}` on {machine.device_name}, torch {machine.torch}, commit {machine.commit}:",
             f"- wall time: run 1 {walls[0]:.0f} s, run 2 {walls[1]:.0f} s",
             f"- speed-ups agreeing within 1.96 combined standard errors: {c.agreeing} of {c.compared} "
             f"({100 * c.share:.0f}%); Spearman rank correlation {c.spearman:.2f}" if c.spearman is not None else "",
             f"- recommendations: run 1 {c.recommendations[0]!r} (agrees with run 2: {c.recommendation_agrees[0]}), "
             f"run 2 {c.recommendations[1]!r} (agrees with run 1: {c.recommendation_agrees[1]})",
             f"- headlines: {headlines(*summaries)}",
             "- recommendation interval width (high/low): "
             + ", ".join("n/a" if w is None else f"{w:.2f}" for w in c.widths),
             f"- calibration: sum of z^2 = {c.chi2:.1f} against chi^2 with {c.scored} df (mean {c.scored}; "
             f"P(chi^2 >= it) = {c.chi2_p:.3f}); median interval width (high/low) {c.median_widths[0]:.2f} / "
             f"{c.median_widths[1]:.2f}; P(chi^2 <= it) = {1 - c.chi2_p:.3f} (small: intervals "
             f"too wide); rows neither run raced: sum {c.chi2_screened[0]:.1f} on {c.chi2_screened[1]} df",
             *calibration(name, c.scored, c.chi2,
                          [s.get("protocol", {}).get("baseline_cv_across_blocks") for s in summaries]),
             f"- the machine's CPU time during the runs: {meter.describe()}" if not args.compare_only else "",
             f"- seeds: run 1 {c.seeds[0]}, run 2 {c.seeds[1]}",
             f"- recommended sets (simplest first): run 1 {list(c.sets[0])}, run 2 {list(c.sets[1])}; "
             f"intersect: {c.sets_intersect}"]
    if args.transient_load:
        lines.append(f"- transient load: every core busy for {args.transient_load:g} s from {args.load_after:g} s "
                     "into run 1")
    for i, s in enumerate(summaries, 1):
        guard = s.get("machine_load") or {}
        if "measurements" in guard:
            lines.append(f"- run {i}: load guard (limit {guard['foreign_load_limit']} cores): "
                         f"{guard['taken_again']:.0f} measurements taken again, {guard['still_disturbed']:.0f} kept "
                         f"though still disturbed, of {guard['measurements']:.0f}; busiest kept "
                         f"{guard['most_foreign_cores']:.2f} foreign cores")
    for i, s in enumerate(summaries, 1):
        r = s["recommendation"]
        lines.append(f"- run {i}: baseline CV across blocks {s['protocol']['baseline_cv_across_blocks']:.3f}; "
                     f"recommended x{r['speedup']:.2f} [{r['low'] or math.nan:.2f}, {r['high'] or math.nan:.2f}] "
                     f"({r['blocks']} blocks); race: {(s['protocol']['race'] or {}).get('why')}")
    print("\n".join(line for line in lines if line))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
