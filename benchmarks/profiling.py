"""The profiling window's cost to the throughput: baseline trials with it and without, in pairs.

Method: the study's baseline (every dimension off, throughput only, the study's budget for this device) is
measured as a study measures it, each trial in a fresh interpreter from the prepared ones
(`ablate.trial.process.run_in_fresh_process`), after one trial that is not counted (cold file caches). Each pair is
one trial with the profiling window (the study's `budget.profile_steps`, or 20 where it sets 0) and one without
(`profile_steps: 0`), in alternating order. The window comes after the timed windows, so the throughput should
differ only by the loop's branches at its phase boundaries. Reported: the throughput with the window over without,
the exponentiated mean of the pairs' log ratios, with its 95% paired t interval (`ablate.stats.contrasts.paired`,
the speed-ups' own); and, from the trials with the window, the instrumentation's cost inside it (`profile_cost`:
the profiled steps' time per sample over the timed windows') and where the baseline's step goes.
"""
from __future__ import annotations

import dataclasses
import math
import statistics
from dataclasses import dataclass

from ablate.config import study as studies
from ablate.config.study import Study
from ablate.stats.contrasts import paired
from ablate.trial import metrics as metric
from ablate.trial.interpreters import Interpreters
from ablate.trial.process import run_in_fresh_process
from benchmarks.trials import baseline_spec

DEFAULT_STEPS = 20  # for a study whose budget turns the window off


@dataclass(frozen=True)
class ProfilingCost:
    pairs: int
    ratio: float  # throughput with the window over without
    interval: tuple[float, float] | None  # its 95% interval; None with fewer than two pairs
    costs: list[float]  # each trial with the window: its profile_cost
    shares: dict[str, float]  # each phase's median share of the step over those trials
    idle: list[float]  # their GPU idle shares (CUDA with a kernel trace)


def _with_steps(study: Study, steps: int) -> Study:
    return dataclasses.replace(study, budget=dataclasses.replace(study.budget, profile_steps=steps))


def measure(device: str, pairs: int = 7, study_name: str = "mnist_cnn") -> ProfilingCost:
    study = studies.load(study_name, device.split(":")[0])
    specs = {"on": baseline_spec(_with_steps(study, study.budget.profile_steps or DEFAULT_STEPS), device),
             "off": baseline_spec(_with_steps(study, 0), device)}
    runs: dict[str, dict[int, dict[str, float]]] = {"on": {}, "off": {}}
    with Interpreters() as prepared:
        run_in_fresh_process(specs["off"], interpreters=prepared)  # not counted: cold file caches
        for pair in range(pairs):
            for side in (("on", "off") if pair % 2 == 0 else ("off", "on")):
                runs[side][pair] = run_in_fresh_process(specs[side], interpreters=prepared)
    logs = {side: {p: math.log(m[metric.THROUGHPUT]) for p, m in found.items()} for side, found in runs.items()}
    contrast = paired(logs["on"], logs["off"], "profiling window")
    bounds = contrast.interval()
    with_window = list(runs["on"].values())
    return ProfilingCost(
        pairs, math.exp(contrast.diff), None if bounds is None else (math.exp(bounds[0]), math.exp(bounds[1])),
        [m[metric.PROFILE_COST] for m in with_window],
        {name: statistics.median(m[metric.phase_share(name)] for m in with_window) for name in metric.STEP_PHASES},
        [m[metric.GPU_IDLE_SHARE] for m in with_window if metric.GPU_IDLE_SHARE in m])
