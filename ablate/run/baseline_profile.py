"""The baseline alone, measured once for `ablate diagnose`: where its step goes, before a study is run.

A study profiles each combination's first measurement after its timed windows (`ablate.trial.phases`,
`ablate.run.objective.profiles`); `ablate diagnose` wants only the baseline's profile, and in about a minute on a CPU.
So it runs one trial the way a study runs each - the study's baseline combination in a fresh interpreter
(`ablate.trial.process`, for the same reasons: a layout of its own, no state from the command's process), on the
study's own model, data, batch and device budget - with a budget cut to what a profile needs: throughput only (no
training for accuracy, no evaluation), one timed window (the throughput it prints and what the profile's own cost,
`metrics.PROFILE_COST`, is read against), and a profiling window of at least `PROFILE_S` seconds. The study's
one-second window is enough beside dozens of combinations that each add one; alone, a few seconds more steady the
shares at little cost against the interpreter's start-up (seconds: docs/evidence.md, "Evidence: trial processes").
"""
from __future__ import annotations

import dataclasses
from typing import Any

from ablate.config.choices import baseline_levels
from ablate.config.study import Budget, Study
from ablate.render import terminal
from ablate.trial.interpreters import Interpreters
from ablate.trial.process import TrialSpec, run_in_fresh_process

PROFILE_S = 5.0  # the profiling window lasts at least this long (and `Budget.profile_steps` steps)


def short(budget: Budget) -> Budget:
    """`budget` cut to one timed window and a profile (module docstring); a window cap that would close the
    profiling window early is raised to it."""
    profile_s = max(budget.profile_seconds, PROFILE_S)
    cap = None if budget.window_seconds is None else max(budget.window_seconds, profile_s)
    return dataclasses.replace(budget, windows=1, throughput_only=True, profile_steps=max(budget.profile_steps, 20),
                               profile_seconds=profile_s, window_seconds=cap)


def spec(study: Study, device: str) -> TrialSpec:
    """The study's baseline as a throughput-only trial on `device`, under the study's budget: `measure`'s trial, and
    a run's warm-up (`ablate.run.runner`)."""
    return TrialSpec(study, study.combination(dict(baseline_levels(study.choices))).options, device,
                     train_for_accuracy=False)


def measure(study: Study, device: str) -> dict[str, Any]:
    """The baseline's metrics from one trial on `device` (`short`'s budget), with a progress line while it runs.

    Raises `ablate.trial.process.TrialFailed` with the trial's one-line reason."""
    trial = spec(dataclasses.replace(study, budget=short(study.budget)), device)
    # One interpreter, started now: none ahead, since no trial follows (they would import beside this one).
    with terminal.progress(1, 0) as bar, Interpreters(keep=0) as interpreters:
        metrics = run_in_fresh_process(trial, on_phase=lambda doing: terminal.show(bar, f"baseline · {doing}"),
                                       interpreters=interpreters)
        bar.update(1)
    return metrics
