"""Where a step's time goes: the profiling window that follows a trial's timed windows.

What it times: `Budget.profile_steps` steps (lasting at least `profile_seconds`, closed like a timed window at the
first step past `window_seconds`), once the timed windows are over and any training for accuracy has had its last
evaluation, so no timed window and no accuracy sees a profiled step. Which trials open it is the study's call: a
combination's first measurement only (`ablate.run.objective.profiles`; the others run with `profile_steps` 0). Each
step is split at the loop's boundaries (`ablate.trial.loop.train`) into its phases, `metrics.STEP_PHASES`: data
(waiting in the loader's next()), copy (`Stack.to_device`), forward (autocast and `task.loss`), backward
(`Stack.backward`), optimizer (`Stack.step`, zero_grad included) and other (the rest of the step: the clock's own
bookkeeping between one step's end and the next step's request for a batch). The profiled step is the first step's
start to the last one's end on the same clock, over the steps: the phases, other included, add up to it. On a CPU,
a trial that trains no accuracy may profile its timed windows' own steps instead, with no window after them
(`in_windows`): there a boundary costs what the next paragraph says, nothing a step of milliseconds would show.

Why a window apart: reading a clock at five boundaries costs (a perf_counter read under a microsecond, a CUDA
event's record a few microseconds, a kernel trace a few microseconds per launch), and inside the timed windows that
cost would be in the throughput. Outside the profiling window the loop pays one branch per boundary (it reads
`StepClock.profiling` once a step and marks nothing), so the windows time what they timed before. Inside it, the
cost is measured, not assumed: `metrics.PROFILE_COST` is the profiled steps' time per sample over the timed windows'.

How: on a CPU each boundary reads `time.perf_counter`. On CUDA each records a CUDA event on the current stream, and
the events are read once, after one synchronisation as the window ends (`elapsed_time` refuses an event that is not
yet complete). An event completes when the device has done the work queued before it, so a phase is the device's
time from the end of the previous phase's work to the end of its own: the kernels' run time where the device is
behind the host, the host's launch time where the host is behind. A perf_counter on CUDA would see only the
launches, and put the kernels' time in whichever phase first waited for them. The GPU's idle share is read from a
kernel trace (torch.profiler with CUPTI, kineto's device activities) over the window: the time in which the device ran
no kernel, copy or memset, over the window's wall time. It is absent on a CPU, where CUPTI is missing, and where the
trace holds no device work (a trace that failed to start would otherwise read as an idle device). CUPTI's per-launch
cost slows the host, so the idle share is an upper bound on the uninstrumented loop's, by about what
`PROFILE_COST` says the window slowed.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable

import torch

from ablate.config.study import Budget
from ablate.trial import metrics as metric

DATA, COPY, FORWARD, BACKWARD, OPTIMIZER = range(5)  # the boundaries where each of the loop's phases begins
_END = 5  # the step's end (the clock's count), where "other" begins
DEVICE_WORK = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})  # kineto's activity types that occupy the device


@dataclass(frozen=True)
class Phases:
    """A profiling window's findings."""

    seconds: tuple[float, ...]  # each phase's mean seconds per step, in `metrics.STEP_PHASES`' order
    step_s: float  # the mean profiled step: the first step's start to the last one's end, over the steps
    steps: int
    samples: int
    gpu_idle: float | None = None  # CUDA with a kernel trace only

    def summary(self, window_s_per_sample: float | None) -> dict[str, float]:
        """The trial's metrics, given the timed windows' seconds per sample (what `PROFILE_COST` divides by); None
        where the steps profiled were the windows' own (`in_windows`), which leaves nothing to divide."""
        out = {metric.PROFILED_STEP_S: self.step_s, metric.PROFILED_STEPS: float(self.steps)}
        if window_s_per_sample is not None:
            out[metric.PROFILE_COST] = self.step_s * self.steps / self.samples / window_s_per_sample
        for name, seconds in zip(metric.STEP_PHASES, self.seconds, strict=True):
            out[metric.phase_s(name)] = seconds
            out[metric.phase_share(name)] = seconds / self.step_s
        if self.gpu_idle is not None:
            out[metric.GPU_IDLE_SHARE] = self.gpu_idle
        return out


class ProfilingWindow:
    """One profiling window, open: stamps at each step's boundaries, read when it closes."""

    def __init__(self, budget: Budget, device: torch.device, now: Callable[[], float]) -> None:
        self.budget, self.device, self.now = budget, device, now
        self.cuda = device.type == "cuda"
        self._steps: list[list[Any]] = []  # each step's stamps, at DATA ... OPTIMIZER and _END
        self._samples = 0
        self.opened = now()
        self._began = 0.0  # the host's clock as the first step began
        self._trace = _start_trace() if self.cuda else None  # before the first stamp: CUPTI's start-up is not a step

    def mark(self, phase: int) -> None:
        """A phase begins; DATA begins a step (again at an epoch's end, whose new iterator is in the same step)."""
        if phase == DATA:
            if self._steps and self._steps[-1][_END] is None:
                return  # the loader ended its epoch: the step goes on with the next epoch's first batch
            if not self._steps:
                self._began = self.now()
            self._steps.append([None] * (_END + 1))
        self._steps[-1][phase] = self._stamp()

    def end_step(self, samples: int) -> None:
        self._steps[-1][_END] = self._stamp()
        self._samples += samples

    def full(self) -> bool:
        """Enough steps and seconds, or the windows' cap has passed (on the host's clock, without synchronising)."""
        elapsed, cap = self.now() - self._began, self.budget.window_seconds
        if cap is not None and elapsed >= cap:
            return True
        return len(self._steps) >= self.budget.profile_steps and elapsed >= self.budget.profile_seconds

    def close(self, synchronize: Callable[[], None]) -> Phases:
        """The window's phases, read after `synchronize` (on CUDA: every event complete, every kernel traced)."""
        synchronize()
        wall = self.now() - self._began
        gpu_idle = None
        if self._trace is not None:
            self._trace.stop()
            busy = device_busy_s(self._trace.profiler.kineto_results.events(), self.device)
            gpu_idle = None if busy is None else min(1.0, max(0.0, 1.0 - busy / wall))
        steps = self._steps
        for stamps in steps:  # a boundary no one marked (a loop of its own): its phase's time is the one before's
            for p in reversed(range(_END)):
                stamps[p] = stamps[p + 1] if stamps[p] is None else stamps[p]
        sums = [sum(self._between(s[p], s[p + 1]) for s in steps) for p in range(_END)]
        step_s = self._between(steps[0][DATA], steps[-1][_END]) / len(steps)
        named = [total / len(steps) for total in sums]
        return Phases((*named, step_s - sum(named)), step_s, len(steps), self._samples, gpu_idle)

    def _stamp(self) -> Any:
        if not self.cuda:
            return self.now()
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def _between(self, start: Any, end: Any) -> float:
        """Seconds from one stamp to a later one."""
        return start.elapsed_time(end) / 1000 if self.cuda else end - start


def in_windows(budget: Budget, device: torch.device, train_for_accuracy: bool) -> bool:
    """Whether a trial asked to profile may profile its timed windows' own steps, with no window after them: on a
    CPU, where a boundary is a `time.perf_counter` read and a list entry, about a microsecond on a step of
    milliseconds (`ablate.trial.measure.StepClock.profile_in_windows`). Not on CUDA, whose events and kernel trace
    cost what `PROFILE_COST` measures; not where the trial trains for accuracy, whose evaluations may fall inside
    the windows; not where it profiles nothing (`Budget.profile_steps` 0)."""
    return device.type == "cpu" and not train_for_accuracy and budget.profile_steps > 0


def _start_trace() -> Any | None:
    """A kineto trace of the device's activities, started; None where CUPTI is missing (PyTorch would fall back to
    its legacy CUDA profiler, which traces no device timeline)."""
    from torch.profiler import ProfilerActivity, profile, supported_activities

    if ProfilerActivity.CUDA not in supported_activities():
        return None
    trace = profile(activities=[ProfilerActivity.CUDA])
    trace.start()
    return trace


def device_busy_s(events: Iterable[Any], device: torch.device) -> float | None:
    """Seconds in which `device` ran a kernel, a copy or a memset (overlapping ones counted once), from kineto's
    events; None when they hold none (a trace that saw nothing is no evidence of an idle device)."""
    from torch.autograd import DeviceType

    spans = sorted((e.start_ns(), e.end_ns()) for e in events
                   if e.device_type() == DeviceType.CUDA and _occupies_device(e)
                   and (device.index is None or e.device_index() == device.index))
    if not spans:
        return None
    busy, (start, end) = 0, spans[0]
    for begins, ends in spans[1:]:
        if begins > end:
            busy, start = busy + end - start, begins
        end = max(end, ends)
    return (busy + end - start) / 1e9


def _occupies_device(event: Any) -> bool:
    """Whether a device event is work (a kernel, a copy, a memset) rather than an annotation's span.

    Older torch (2.11) gives kineto's events no `activity_type` (benchmarks/RESULTS.md, "Sections: GPU"); on the
    device's timeline such a trace holds work and user annotations, which it flags (sync events are off by
    default)."""
    kind = getattr(event, "activity_type", None)
    if kind is not None:
        return kind() in DEVICE_WORK
    annotation = getattr(event, "is_user_annotation", None)
    return annotation is None or not annotation()
