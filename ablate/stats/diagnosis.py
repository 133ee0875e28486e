"""Where a step's time goes, which techniques can touch it, and each measured speed-up told by the phase it changed.

Why: the protocol proves how much a combination speeds a model up, never why; where the answer is "could not tell
these apart", a user is left with nothing to act on. The profiling window (`ablate.trial.phases`) splits a step into
its phases, and every strategy declares the phases it acts on (`strategies.base.Target`); joined, they say before a
technique is measured whether it can matter, and after, which phase moved.

- **From the loop's phases to what a strategy targets.** data -> data, copy -> copy, forward and backward ->
  compute, optimizer -> optimizer; "other" (the loop's bookkeeping) is nobody's. Launch overhead (the host issuing
  work) is a phase of its own only on CUDA, where the device's idle share measures it (the device waited for the
  host); on a CPU the host issues and runs the kernels alike, so launch cost sits inside forward and backward and is
  counted with compute.
- **The ceiling** (Amdahl's law): a technique that removed every second of the phases it targets would make a step
  1 / (1 - s) faster, s their share of it. Where that is under `UNLIKELY_BELOW`, the technique is said to be unlikely
  to help before it is measured. It is a prediction from one profiled baseline, not a decision: the measured
  speed-up then confirms or refutes it, and one whose interval lies wholly above the ceiling changed more than the
  phases it declares (a bigger batch, say, that also made each sample's compute cheaper).
- **What the model lacks.** A technique that acts on a part of a model - the attention kernel on attention layers,
  float8 on the Linear layers it can convert, channels-last on 2-d convolutions (`NEEDS`) - does nothing where the
  model has none, whatever its phases cost: "does not apply to this model", and why, not a ceiling. Known where
  the model was inspected (`ablate.workload.parts`: `ablate diagnose`); elsewhere nothing is claimed of it.
- **The check** of a measured speed-up's 95% interval against the ceiling says "within its ceiling" only where the
  whole interval is at or under it; an interval that straddles it is consistent with the ceiling and says so, naming
  that it reaches above.
- **Which phase moved**: of a combination against the baseline, the phase whose time per sample fell the most beyond
  what the rest of the step did, as the shares of the step before and after ("waiting for data 52% -> 4% of the
  step"). Per sample, not per step: a bigger batch makes every step longer and still each sample cheaper. Beyond the
  rest: a process that ran faster throughout (a shared machine's processes can run at levels a few percent to 40%
  apart: docs/measuring.md, "Two-level processes") makes every phase cheaper alike, and so does a technique that
  speeds the whole step; naming the largest phase then would name the machine. The rest of the step is the control:
  phase p's excess is its baseline time scaled by how the other phases changed, less its time now. A phase is named
  only where both its plain drop and its excess are over `MOVED_FLOOR` of the baseline's step: the phases are a few
  steps' means with no interval, and a phase that does not scale with the processor (a sleep standing in for I/O) has
  an excess whenever the rest of the step ran slower. (Each rule alone misnamed a row of the diagnosis's known
  answers: docs/evidence.md, "Evidence: which phase moved".)
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Iterable, Mapping

from ablate.trial import metrics as metric
from ablate.workload.parts import Parts

UNLIKELY_BELOW = 1.05  # a ceiling under x1.05: unlikely to help, at most 5% even were its phases free
# A phase "moved" only where its time per sample fell by more than this share of the baseline's step per sample.
# Why 5%: a profile is the mean of a few steps (`budget.profile_steps`, 20 by default) per measurement, with no
# interval, and the same combination profiled twice differs by a few percent of its step, from one process to the
# next and against the same trial's timed windows (docs/measuring.md, "Before a technique is measured" and "The
# instrumentation's cost"). A smaller drop is within that: naming its phase would name noise. It is a floor, not a
# bound: on a GPU one measurement moved by far more (benchmarks/RESULTS.md, "Sections: GPU"), so there only a mean
# over blocks is worth reading.
MOVED_FLOOR = 0.05
# What a loop phase is to the strategies' targets (strategies.base.PHASES); launch on CUDA comes from the idle share.
TARGET_OF = {"data": "data", "copy": "copy", "forward": "compute", "backward": "compute", "optimizer": "optimizer"}
AS_PREDICTED = "as predicted"  # the check's one claim with a simulated error rate (ablate.stats.answer.explained)
NOTHING_MOVED = f"no phase fell by more than {MOVED_FLOOR:.0%} of the step beyond what the rest of it did"
# What a technique acts on that not every model has: the part (`Parts`' field) and why, lacking it, it does nothing.
NEEDS = {"attention_backend": ("attention", "no attention layer for it to choose a kernel for"),
         "float8": ("float8_linears", "no Linear layer with both dimensions divisible by 16"),
         "channels_last": ("convolutions", "no 2-d convolution whose layout it could change")}
WORDS = {"data": "waiting for data", "copy": "the copy to the device", "forward": "the forward pass",
         "backward": "the backward pass", "optimizer": "the optimizer step", "other": "the loop's own bookkeeping"}


@dataclass(frozen=True)
class Profile:
    """Where one combination's step goes: each loop phase's mean seconds per step and share of it, over its
    profiled measurements; the GPU's idle share where a kernel trace measured it; samples per step where known."""

    seconds: Mapping[str, float]  # loop phase (`metrics.STEP_PHASES`) -> mean seconds per step
    step_s: float
    idle: float | None  # CUDA: the share of the window the device ran nothing
    samples_per_step: float | None

    def share(self, phase: str) -> float:
        return self.seconds.get(phase, 0.0) / self.step_s if self.step_s > 0 else 0.0

    @property
    def step_per_sample(self) -> float:
        return self.step_s / (self.samples_per_step or 1.0)

    def per_sample(self, phase: str) -> float:
        return self.seconds.get(phase, 0.0) / (self.samples_per_step or 1.0)

    def targets(self) -> dict[str, float]:
        """Each target's share of the step (strategies.base.PHASES): launch only where the idle share was measured;
        without it launch is inside compute (module docstring)."""
        out: dict[str, float] = {}
        for phase, target in TARGET_OF.items():
            out[target] = out.get(target, 0.0) + self.share(phase)
        if self.idle is not None:
            out["launch"] = self.idle
        return out


def profile(measurements: Iterable[Mapping[str, float]]) -> Profile | None:
    """The mean profile of a combination's measurements (each a trial's metrics); None where none was profiled."""
    found = [m for m in measurements if metric.PROFILED_STEP_S in m]
    if not found:
        return None
    seconds = {p: statistics.fmean(m.get(metric.phase_s(p), 0.0) for m in found) for p in metric.STEP_PHASES}
    idle = [m[metric.GPU_IDLE_SHARE] for m in found if metric.GPU_IDLE_SHARE in m]
    per_step = [m[metric.TRAIN_SAMPLES] / m[metric.TRAIN_STEPS] for m in found
                if m.get(metric.TRAIN_STEPS) and metric.TRAIN_SAMPLES in m]
    return Profile(seconds, statistics.fmean(m[metric.PROFILED_STEP_S] for m in found),
                   statistics.fmean(idle) if idle else None, statistics.fmean(per_step) if per_step else None)


@dataclass(frozen=True)
class Prediction:
    """What the baseline's profile says of a technique before it is measured."""

    name: str
    targets: tuple[str, ...]
    share: float  # of the step, the phases it targets (launch included only where measured)
    ceiling: float | None  # 1 / (1 - share); None where it targets nothing a profile measures (memory)
    inapplicable: str | None = None  # why it cannot act on this model (`does_not_apply`); None: it can, or unknown

    @property
    def unlikely(self) -> bool:
        return self.ceiling is not None and self.ceiling < UNLIKELY_BELOW

    @property
    def can_help(self) -> bool:
        """A ceiling of `UNLIKELY_BELOW` or more, on a model it can act on."""
        return self.ceiling is not None and not self.unlikely and self.inapplicable is None

    def describe(self) -> str:
        if self.inapplicable is not None:
            return f"{self.name}: does not apply to this model - {self.inapplicable}"
        if self.ceiling is None:
            return f"{self.name}: targets {' + '.join(self.targets)}, which no phase measures"
        word = "unlikely to help" if self.unlikely else "can help"
        return (f"{self.name}: {word} - {' + '.join(self.targets)} {self.share:.0%} of the step, "
                f"at most x{self.ceiling:.2f} were it free")

    def checked(self, low: float, high: float) -> str:
        """The prediction against a measured speed-up's interval [low, high]."""
        if self.ceiling is None:
            return "no prediction"
        if low > self.ceiling:
            return f"faster than its ceiling x{self.ceiling:.2f}: it changed more than the phases it targets"
        if self.unlikely:
            if high > UNLIKELY_BELOW:
                return "not ruled out by the measurement"
            # The claim is an upper end under x1.05; "within its ceiling" only where it is under the ceiling too.
            where = "within its ceiling" if high <= self.ceiling else f"under x{UNLIKELY_BELOW:.2f}"
            return f"{AS_PREDICTED}, {where}"
        if high <= self.ceiling:
            return "within its ceiling"
        return "consistent with its ceiling (the interval reaches above it)"


def predict(base: Profile, name: str, targets: Iterable[str], inapplicable: str | None = None) -> Prediction:
    """A technique's ceiling on the baseline's profile (module docstring); `inapplicable`: `does_not_apply`'s."""
    mine = tuple(targets)
    shares = base.targets()
    measured = [t for t in mine if t in shares]
    if not measured:
        return Prediction(name, mine, 0.0, None, inapplicable)
    share = min(1.0, sum(shares[t] for t in measured))
    return Prediction(name, mine, share, 1 / (1 - share) if share < 1 else float("inf"), inapplicable)


def does_not_apply(parts: Parts | None, strategies: Iterable[str]) -> str | None:
    """Why a technique made of `strategies` (registry names; a preset's members) cannot act on a model of `parts`:
    only where every one of them needs a part the model lacks (`NEEDS`); None where one can, or the parts are
    unknown."""
    if parts is None:
        return None
    whys = []
    for name in strategies:
        need = NEEDS.get(name)
        if need is None or getattr(parts, need[0]):
            return None
        whys.append(need[1])
    return "; ".join(whys) or None


def moved(base: Profile, other: Profile) -> str | None:
    """The loop phase whose time per sample fell the most from `base` to `other`, in time and beyond the rest of the
    step; None where neither is over `MOVED_FLOOR` of the baseline's step per sample for one phase (module
    docstring)."""
    def excess(phase: str) -> float:
        rest_before = base.step_per_sample - base.per_sample(phase)
        rest_after = other.step_per_sample - other.per_sample(phase)
        scale = rest_after / rest_before if rest_before > 0 else 1.0
        return base.per_sample(phase) * scale - other.per_sample(phase)

    fell = {p: min(base.per_sample(p) - other.per_sample(p), excess(p)) for p in metric.STEP_PHASES}
    phase = max(fell, key=lambda p: fell[p])
    return phase if fell[phase] > MOVED_FLOOR * base.step_per_sample else None


def sentence(label: str, base: Profile, other: Profile) -> str:
    """"num_workers(n=2): waiting for data 52% -> 4% of the step" (the phase `moved` names)."""
    phase = moved(base, other)
    if phase is None:
        return f"{label}: {NOTHING_MOVED}"
    return f"{label}: {WORDS[phase]} {base.share(phase):.0%} -> {other.share(phase):.0%} of the step"
