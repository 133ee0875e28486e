"""Trial start-up and measurement noise, from repeated throughput trials of the mnist_cnn baseline.

Each trial is a real one (`ablate.trial.run_in_fresh_process`, the study's
own budget for this device, throughput only). Start-up is from the parent's
launch of the trial process to the loop asking for its first batch, minus
the dataset load every trial needs anyway; it is split into process start
(a new interpreter: spawn) and in-process setup (importing torch, model,
loader, optimizer, strategies). The first trial of a run is reported apart.

Noise: the coefficient of variation (population standard deviation / mean)
of a trial's timed windows, and of the trials' median throughputs.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass

from ablate import study as studies
from ablate.study import Study
from ablate.trial import TrialSpec, run_in_fresh_process


@dataclass(frozen=True)
class TrialRuns:
    study: Study
    first: dict[str, float]  # the run's first trial (cold file caches)
    repeats: list[dict[str, float]]

    def startup(self, key: str = "startup") -> list[float]:
        return [startup_s(m) if key == "startup" else m[key] for m in self.repeats]

    @property
    def window_cvs(self) -> list[float]:
        return [m["throughput_cv_pct"] for m in self.repeats]

    @property
    def between_trials_cv(self) -> float:
        rates = [m["throughput"] for m in self.repeats]
        return 100 * statistics.pstdev(rates) / statistics.mean(rates)


def startup_s(m: dict[str, float]) -> float:
    """Launch to the first batch, the dataset load excluded."""
    return m["process_start_s"] + m["setup_s"]


def measure(device: str, repeats: int = 5, study_name: str = "mnist_cnn") -> TrialRuns:
    study = studies.load(study_name, device.split(":")[0])
    baseline = tuple(options[0] for _, options in study.space)  # every dimension off
    spec = TrialSpec(study, baseline, device, train_for_accuracy=False)
    first = run_in_fresh_process(spec)
    return TrialRuns(study, first, [run_in_fresh_process(spec) for _ in range(repeats)])
