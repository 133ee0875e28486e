"""What a conclusion costs: a full study run with its protocol, in wall time and in reference epochs.

    python -m benchmarks.conclusion_cost [--study mnist_cnn] [--results results/conclusion-cost]
        [--quick | --single-pass]
    python -m benchmarks.conclusion_cost --from RESULTS_DIR [--study mnist_cnn]   # a run's storage, read only

Times one reference epoch (`benchmarks.reference_epoch`, in a process of its
own), runs `ablate run STUDY` as a user does (a fresh results folder, a cold
compile cache), times the reference epoch again, and prints the run's wall
time over the mean of the two epochs, with where the time went: trials by
kind from the run's own Optuna storage, and per-trial start-up (launch to
the first batch). Dividing by an epoch timed beside the run is what lets two
runs taken at different loads, or on different machines, be compared.
`--quick` runs only what the answer needs (`ablate run --quick`); `--single-pass`
the design before blocks (every combination once, one seed), the price the
protocol's is set against.

Then the split (`split`): the run's wall time by activity, from each
measurement's stored timeline (`ablate.trial.metrics.Mark`), each moment
counted once for the first activity in `ACTIVITIES` that holds it; what no mark
holds - a failed measurement, the study's own start and reports, and in a
timeline stored before the marks (`derived`) all but start-up, compile,
profiling, a throughput-only measurement's windows and a trained one's
evaluations and training - is "other". And by protocol phase, from the
Optuna trials' own spans, the rest "outside trials". Beside them, the
estimate `ablate run` said as it began against what the run took
(`ablate.run.estimate`). `--from` prices a run already made (or still going)
from its storage alone: its wall time is then the stored sessions' where the
run stored them, else its first measurement's start to its last one's end.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import optuna

from ablate import cli_parser
from ablate.store import records, study_record
from ablate.trial import metrics as metric
from ablate.trial.machine import default_device, describe
from ablate.trial.metrics import TIMELINE, Mark
from ablate.words import span
from benchmarks import cpu_time, grid

# A measurement's activities, each moment counted for the first that holds it: an evaluation inside a timed window
# (its time was left out of the window's) is evaluation, the profiling window after the windows is profiling.
ACTIVITIES = ("evaluation", "profiling", "compile", "timed windows", "warm-up", "accuracy training", "start-up",
              "hand-off")
OTHER, OUTSIDE = "other", "outside trials"


def reference_epoch() -> float:
    done = subprocess.run([sys.executable, "-m", "benchmarks.reference_epoch"], stdout=subprocess.PIPE, text=True,
                          check=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    return float(done.stdout.split()[-1])


def _kind(trial: optuna.trial.FrozenTrial) -> str:
    attrs = trial.user_attrs
    if attrs.get("state") == "skipped":
        return "skipped"
    if attrs.get("accuracy_trained"):
        return "accuracy-trained"
    return "throughput-only, compile" if "compile" in trial.params.values() else "throughput-only, eager / TorchScript"


def startup_s(metrics: dict) -> float | None:
    """Launch to the first batch: recorded as one figure since issue 21, summed from its parts before."""
    if "startup_s" in metrics:
        return metrics["startup_s"]
    parts = [metrics.get(k) for k in ("process_start_s", "data_load_s", "setup_s")]
    known = [p for p in parts if p is not None]
    return sum(known) if len(known) == len(parts) else None


def breakdown(optuna_study: optuna.Study) -> dict:
    trials = optuna_study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    kinds: dict[str, list[float]] = {}
    starts = []
    for t in trials:
        assert t.datetime_complete is not None and t.datetime_start is not None  # a COMPLETE trial has both
        kinds.setdefault(_kind(t), []).append((t.datetime_complete - t.datetime_start).total_seconds())
        if t.user_attrs.get("state") == "complete":
            start = startup_s(t.user_attrs.get("metrics", {}))
            if start is not None:
                starts.append(start)
    return {"trials": {k: {"n": len(v), "total_s": sum(v), "median_s": statistics.median(v)}
                       for k, v in sorted(kinds.items())},
            "startup_median_s": statistics.median(starts) if starts else None,
            "startup_quartiles_s": statistics.quantiles(starts, n=4) if len(starts) > 1 else None}


def _span(value: object) -> tuple[float, float] | None:
    return (float(value[0]), float(value[1])) if isinstance(value, list) and len(value) == 2 else None


def derived(timeline: dict, metrics: dict, trained: bool) -> dict:
    """A timeline stored before the marks, with those its metrics give: the first step after the model's preparation,
    the profiling window ending the loop, and - for a throughput-only measurement, whose last measured stretch opens
    with its first window - the windows before it; for a trained one, its evaluations (`activities` counts the rest of
    its loop as accuracy training, its warm-up and windows in it: where they fell in the loop was not stored)."""
    measured = timeline.get(Mark.MEASURED) or []
    if Mark.FIRST_STEP in timeline or not measured or metric.FIRST_STEP_S not in metrics:
        return timeline
    began, ended = measured[0][0] + metrics.get(metric.PREPARE_MODEL_S, 0.0), measured[-1][1]
    marks = {Mark.FIRST_STEP: [began, began + metrics[metric.FIRST_STEP_S]]}
    profiled = metric.profiled_s(metrics)
    if profiled:
        marks[Mark.PROFILING] = [ended - profiled, ended]
    if not trained and len(measured) > 1:
        marks[Mark.WINDOWS] = [measured[-1][0], ended - profiled]
    if trained and metric.TRAIN_TIME_S in metrics:
        # Training time is the loop's less its evaluations and profiling window (ablate.trial.measure): what else the
        # loop's span held was evaluating. One span before the profiling window: the sum is exact, the place is not.
        loop_end = ended - profiled
        if (evaluating := loop_end - began - metrics[metric.TRAIN_TIME_S]) > 0:
            marks[Mark.EVALUATING] = [[loop_end - evaluating, loop_end]]
    return {**timeline, **marks}


def activities(timeline: dict, trained: bool) -> list[tuple[str, float, float]]:
    """One measurement's marked spans as (activity, began, ended), in `ACTIVITIES`' order, within its launch and exit
    (the hand-off before it apart); what a timeline lacks is left out, for "other"."""
    spans: list[tuple[str, float, float]] = [("evaluation", *e) for e in timeline.get(Mark.EVALUATING, [])]
    measured = timeline.get(Mark.MEASURED) or []
    first, windows = _span(timeline.get(Mark.FIRST_STEP)), _span(timeline.get(Mark.WINDOWS))
    began, ended = (measured[0][0], measured[-1][1]) if measured else (None, None)
    if profiled := _span(timeline.get(Mark.PROFILING)):
        spans.append(("profiling", *profiled))
    if first and began is not None:
        spans.append(("compile", began, first[1]))  # the model's preparation (TorchScript's scripting) and step one
    if windows:
        spans.append(("timed windows", *windows))
        if first:
            spans.append(("warm-up", first[1], windows[0]))
        if trained and ended is not None:
            spans.append(("accuracy training", windows[1], ended))
    elif trained and first and ended is not None:  # stored before the marks (`derived`): its warm-up and windows too
        spans.append(("accuracy training", first[1], ended))
    if began is not None:
        spans.append(("start-up", timeline[Mark.LAUNCHED], began))  # launch, data, model, waits for imports
    if (exited := timeline.get(Mark.EXITED)) is not None:
        spans = [(a, max(x, timeline[Mark.LAUNCHED]), min(y, exited)) for a, x, y in spans]
    if hand_off := _span(timeline.get(Mark.HAND_OFF)):
        spans.append(("hand-off", *hand_off))
    return spans


def paint(spans: list[tuple[str, float, float]]) -> dict[str, float]:
    """Seconds by activity, each moment once, for the first of `spans` that holds it."""
    edges = sorted({x for _, a, b in spans if b > a for x in (a, b)})
    seconds: dict[str, float] = {}
    for low, high in zip(edges, edges[1:]):
        if holder := next((name for name, a, b in spans if a <= low and high <= b), None):
            seconds[holder] = seconds.get(holder, 0.0) + high - low
    return seconds


def split(optuna_study: optuna.Study, wall_s: float | None = None) -> dict:
    """The run's wall time by activity and by protocol phase (each adding up to it), the number of measurements
    whose timeline lacks the marks, and its expected cost against the actual. `wall_s`: the run's, where timed."""
    spans = [(t, t.datetime_start, t.datetime_complete) for t in optuna_study.get_trials(deepcopy=False)]
    trials = [(t, start.timestamp(), end.timestamp()) for t, start, end in spans if start and end]
    stored = study_record.from_study(optuna_study).cost_summary
    if wall_s is not None:
        wall_from = "the run, timed around it"
    elif stored and stored["actual"]["wall_s"]:
        wall_s, wall_from = stored["actual"]["wall_s"], "the runs' stored sessions"
    else:
        wall_s = max(end for *_, end in trials) - min(start for _, start, _ in trials) if trials else 0.0
        wall_from = "the first trial's start to the last one's end"
    by_activity: dict[str, float] = dict.fromkeys(ACTIVITIES, 0.0)
    by_phase: dict[str, float] = {}
    timed = unmarked = 0
    for t, start, end in trials:
        r = records.from_trial(t)
        phase = r.phase if r.has_slot else "unplaced"
        by_phase[phase] = by_phase.get(phase, 0.0) + end - start
        timeline = t.user_attrs.get(TIMELINE)
        if isinstance(timeline, dict) and Mark.LAUNCHED in timeline:
            timed, unmarked = timed + 1, unmarked + (Mark.EXITED not in timeline)
            marked = derived(timeline, dict(r.metrics), r.accuracy_trained)
            for name, seconds in paint(activities(marked, r.accuracy_trained)).items():
                by_activity[name] += seconds
    by_activity[OTHER] = wall_s - sum(by_activity.values())
    by_phase[OUTSIDE] = wall_s - sum(by_phase.values())
    return {"wall_s": wall_s, "wall_from": wall_from, "by_activity": by_activity, "by_phase": by_phase,
            "timelines": timed, "without_marks": unmarked, "finished": len(trials), "cost": stored}


def print_split(found: dict, epoch_s: float | None = None) -> None:
    wall = found["wall_s"] or 1.0
    epochs = " | reference epochs" if epoch_s else ""
    print(f"wall time {found['wall_s']:,.0f} s ({found['wall_from']}); of {found['timelines']} stored timelines, "
          f"{found['without_marks']} predate the marks (compile, profiling, a throughput-only one's windows and a "
          f"trained one's evaluations from their metrics, its warm-up and windows in accuracy training; the rest: "
          f"{OTHER})")
    for title, parts in (("activity", found["by_activity"]), ("protocol phase", found["by_phase"])):
        print(f"| {title} | s | share{epochs} |\n|---|---:|---:|{'---:|' if epoch_s else ''}")
        for name, seconds in parts.items():
            print(f"| {name} | {seconds:,.0f} | {100 * seconds / wall:.1f}%"
                  + (f" | {seconds / epoch_s:.2f}" if epoch_s else "") + " |")
    if cost := found["cost"]:
        expected, minutes, actual = cost["estimate"] or {}, cost["minutes_estimate"], cost["actual"]
        said = span(*expected["measurements"]) if "measurements" in expected else "?"
        print(f"expected as it began: about {said} measurements"
              + (f", {span(*(round(m) for m in minutes['minutes']))} min estimated after "
                 f"{minutes['after_measurements']}" if minutes else "")
              + _actual(actual, found["finished"], epoch_s))


def _actual(actual: dict, finished: int, epoch_s: float | None) -> str:
    """What the run spent, as its ended sessions stored it; a session stores its part only as it ends."""
    if not actual["sessions"]:
        return f"; actual: not stored yet (no session has ended: still running, or killed), {finished} finished so far"
    return (f"; actual: {actual['measurements']} measurements, {actual['minutes']:.0f} min in its stored sessions"
            + (f" ({actual['wall_s'] / epoch_s:.1f} reference epochs; the first line's figure times the run from "
               "outside)" if epoch_s else ""))


def stored_study(results: Path, study: str, shown: Path | None = None) -> optuna.Study:
    """The grid study a results folder holds for `study` (read only: nothing is written to it). `shown`: the folder
    an error names, where `results` is a copy of it."""
    name = Path(study).stem
    storage = f"sqlite:///{(results / name / 'optuna.db').resolve()}"
    names = [n for n in optuna.study.get_all_study_names(storage) if n.startswith(f"{name}:grid:")]
    if len(names) != 1:
        raise SystemExit(f"{shown or results}: expected one grid study of {name}, found {names or 'none'}")
    return optuna.load_study(study_name=names[0], storage=storage)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.conclusion_cost", description=__doc__.splitlines()[0])
    parser.add_argument("--study", default="mnist_cnn")
    parser.add_argument("--results", type=Path, default=Path("results/conclusion-cost"))
    parser.add_argument("--device", default=default_device())
    design = parser.add_mutually_exclusive_group()
    design.add_argument("--quick", action="store_true", help="only what the answer needs (ablate run --quick)")
    design.add_argument("--single-pass", action="store_true", help="every combination once, one seed: no protocol")
    parser.add_argument("--from", dest="source", type=Path, help="split a run already made from its results folder")
    args = parser.parse_args(argv)
    if args.source:
        print_split(split(stored_study(args.source, args.study)))
        return 0
    machine = describe(args.device)
    with cpu_time.Meter() as meter:  # steal and neighbours over the whole measurement, epochs included
        before = reference_epoch()
        print(f"reference epoch before: {before:.1f} s", flush=True)
        done = grid.run(args.study, args.results, args.device, cli_parser.design_flags(args))
        after = reference_epoch()
    epoch = (before + after) / 2
    ran = stored_study(args.results, args.study)
    found, spent = breakdown(ran), split(ran, done.wall_s)
    summary = {"study": args.study, "single_pass": args.single_pass, "quick": args.quick,
               "machine": machine.device_name, "torch": machine.torch, "commit": machine.commit,
               "wall_s": done.wall_s, "reference_epoch_s": [before, after],
               "reference_epochs": done.wall_s / epoch, "cpu_time_pct": meter.shares, **found, "split": spent}
    (args.results / "cost.json").write_text(json.dumps(summary, indent=1))
    print(f"{args.study} on {machine.device_name}, torch {machine.torch}, commit {machine.commit}: "
          f"{done.wall_s:,.0f} s = {done.wall_s / epoch:.1f} reference epochs (epoch {before:.1f} s before, "
          f"{after:.1f} s after)")
    print(f"the machine's CPU time meanwhile: {meter.describe()}")
    print("| trials | n | total s | each (median) s |\n|---|---:|---:|---:|")
    for kind, row in found["trials"].items():
        print(f"| {kind} | {row['n']} | {row['total_s']:.0f} | {row['median_s']:.1f} |")
    if found["startup_median_s"] is not None:
        q = found["startup_quartiles_s"] or [found["startup_median_s"]] * 3
        print(f"start-up, launch to first batch: median {q[1]:.2f} s (quartiles {q[0]:.2f}-{q[2]:.2f} s)")
    print_split(spent, epoch)
    print(_recommended(done.output))
    return 0


def _recommended(output: str) -> str:
    """The run's "recommended:" line with its wrapped continuation (indented deeper than the lines under it)."""
    lines = output.splitlines()
    at = next((i for i, line in enumerate(lines) if line.startswith("recommended:")), None)
    if at is None:
        return ""
    joined = [lines[at]]
    for line in lines[at + 1:]:
        if not line.startswith("    "):
            break
        joined.append(line.strip())
    return " ".join(joined)


if __name__ == "__main__":
    raise SystemExit(main())
