"""Trial start-up and measurement noise, from repeated throughput trials of the mnist_cnn baseline.

Each trial is a real one (`ablate.trial.process.run_in_fresh_process`, the study's
own budget for this device, throughput only), its interpreter taken from the
prepared ones (`ablate.trial.interpreters`), as a study does. Start-up is from the
parent's launch of the trial (its call for an interpreter) to the loop asking
for its first batch, minus nothing; of it, the wait for an interpreter to
finish importing, the stopping of the imports still running before the
measured stretch, and the dataset load (memory-mapped from the decoded cache)
are shown apart. The first trial of a run starts its interpreter cold and is
reported apart.

Noise: the coefficient of variation (population standard deviation / mean)
of a trial's timed windows, and of the trials' median throughputs.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass

from ablate.config import study as studies
from ablate.config.study import Study
from ablate.trial.interpreters import Interpreters
from ablate.trial.process import TrialSpec, run_in_fresh_process


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
    """Launch to the first batch, minus nothing."""
    return m["startup_s"]


def baseline_spec(study: Study, device: str) -> TrialSpec:
    """A throughput-only trial of the study's baseline (every dimension's first choice, `off`)."""
    return TrialSpec(study, tuple(options[0] for _, options in study.space), device, train_for_accuracy=False)


def measure(device: str, repeats: int = 5, study_name: str = "mnist_cnn") -> TrialRuns:
    study = studies.load(study_name, device.split(":")[0])
    spec = baseline_spec(study, device)
    with Interpreters() as prepared:
        first = run_in_fresh_process(spec, interpreters=prepared)
        return TrialRuns(study, first, [run_in_fresh_process(spec, interpreters=prepared) for _ in range(repeats)])
