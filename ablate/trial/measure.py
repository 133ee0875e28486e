"""Measuring a training run: first step, warm-up, timed windows, data waits, memory.

Method (plain `time.perf_counter`, written down here because the numbers are
the product): the first step is timed alone (it includes compilation, worker
start-up and allocator warm-up). Then `warmup_samples` are trained untimed.
Then `windows` windows of at least `window_samples` each (or, for a slow run,
of the steps that end once `window_seconds` have passed) are timed from a step
boundary to a step boundary; on CUDA the device is synchronised at each window
boundary only, never inside a window, so kernels stay queued as in a real loop.
A window also stays open, by whole steps, until its floor has passed
(`Budget.window_floor_s`: half a second on CUDA, none on a CPU): a fast GPU
trains a window's samples in milliseconds, where a 0.1-0.5 ms hiccup is a
percent-sized error. A faster combination therefore times more samples; its
training for accuracy does not grow with them (below).
Throughput is samples / window time, data loading included, in the task's
unit (a language model's sample is a sequence: its throughput is in tokens). Time blocked in
the DataLoader's `next()` inside the windows is the data-wait fraction.

Time to accuracy: a run that trains for accuracy evaluates the test set every
`eval_every_samples`, and at the end of its `train_samples` - then, if its
windows are still open (a floor or long windows ran past `train_samples`), the
windows go on but the training for accuracy is over: no evaluation follows, so
every combination's accuracy is that of the same samples (`ablate.trial.accuracy`
keeps that schedule and reads the time to target from it). The clock is paused
while it evaluates: evaluation time is excluded from the training time and from
any timed window.

Foreign load: the machine's CPU time and this process tree's own are read as
the first window opens and as the last one closes, outside the clock
(`ablate.trial.foreign_load`); the difference, in cores, is how much other work
ran beside the windows - a neighbour the windows' own clock cannot see. The energy
counter of the device (`ablate.trial.energy`) is read at the same points, and around
an evaluation inside the windows, whose joules are left out as its time is.

Peak memory covers the timed windows only (`ablate.trial.memory` says how it is read).
"""
from __future__ import annotations

import statistics
import time
from contextlib import contextmanager
from dataclasses import InitVar, dataclass, field
from typing import Any, Callable, Iterable, Iterator

import torch

from ablate.config.study import Budget
from ablate.trial import energy, foreign_load, phases
from ablate.trial import metrics as metric
from ablate.trial.accuracy import Evaluation, Evaluations
from ablate.trial.failures import Diverged
from ablate.trial.memory import empty_cache, highest, peak_memory, reset_peak_memory
from ablate.workload.tasks import Quality

# Steps a one-off cost can still reach: TorchScript's profiling executor optimises the graph at the third call,
# CUDA-graph trees run the first call eagerly and record at the second.
ONE_OFF_STEPS = 3
DIVERGENCE_CHECK_EVERY = 50  # steps between reads of the finiteness flag outside timed windows


@dataclass
class Window:
    samples: int
    seconds: float
    data_wait: float

    @property
    def throughput(self) -> float:
        return self.samples / self.seconds


@dataclass
class StepClock:
    """Counts steps and samples, and times the first step and the windows of a run."""

    budget: Budget
    device: torch.device
    train_for_accuracy: bool
    evaluate: InitVar[Callable[[], Quality] | None] = None  # held-out quality (`held_out` calls it)
    test_samples: int = 0  # held-out samples `evaluate` reads (ablate.workload.evaluation): the progress line says it
    units_per_sample: int = 1  # throughput's unit: tokens per sequence for a language model
    on_phase: Callable[[str], None] = lambda text: None  # what the run is doing now, for the progress line
    # Called with True when an untimed stretch inside the loop begins (the warm-up of a run that times its
    # windows only), with False before it ends; returns seconds spent waiting, which count as paused time.
    on_untimed: Callable[[bool], float] = lambda begins: 0.0
    samples: int = 0
    steps: int = 0
    first_step_s: float = 0.0
    train_time_s: float = 0.0  # loop start to the end of the last step, data loading and compilation included
    peak_memory: dict[str, float] = field(default_factory=dict)  # the windows' peaks, by metric key (`peak_memory`)
    windows: list[Window] = field(default_factory=list)
    held_out: Evaluations = field(init=False)  # the training for accuracy's evaluations (`ablate.trial.accuracy`)
    _start: float = 0.0
    _window_start: float | None = None
    _window_samples: int = 0
    _data_wait: float = 0.0
    _warm_from: int = 0
    _paused: float = 0.0  # seconds spent evaluating, excluded from training time
    _loss_sum: torch.Tensor | None = None  # the sum of the losses so far, on the device: NaN or inf once one was
    _early_s: float = 0.0  # steps 2 to ONE_OFF_STEPS, timed when they end before the first window opens
    _early_samples: int = 0
    _peak_outside_evals: dict[str, float] = field(default_factory=dict)  # the windows' peaks up to an evaluation
    _untimed: bool = False  # inside the warm-up's untimed stretch (`on_untimed`)
    _floor: float = 0.0  # the windows' least duration on this device (`Budget.window_floor_s`)
    _load_before: foreign_load.Snapshot | None = None  # CPU time, the machine's and this tree's, as the windows opened
    foreign: foreign_load.Load | None = None  # other work on the machine over the windows (`foreign_load`)
    # Stop as the windows close when they saw more foreign cores than this (`cut_short`); None: go on whatever the load.
    busy_limit: float | None = None
    _energy: energy.Tally = field(init=False)  # the device's joules over the windows (`ablate.trial.energy`)
    profiling: bool = False  # in the profiling window (`ablate.trial.phases`): the loop marks its phases (`mark`)
    profile_in_windows: bool = False  # profile the timed windows' own steps, no window after (`phases.in_windows`)
    profiled: phases.Phases | None = None  # what the profiling window found
    _profile: phases.ProfilingWindow | None = None
    marks: dict[str, Any] = field(default_factory=dict)  # its spans, for the trial's timeline (`metrics.Mark`)

    def __post_init__(self, evaluate: Callable[[], Quality] | None) -> None:
        self.held_out = Evaluations(self.budget, evaluate)
        self._floor = self.budget.window_floor_s(self.device.type)
        self._energy = energy.Tally(energy.meter(self.device.type, self.device.index))

    def _sync(self) -> None:
        """Wait for the device (CUDA only), then fail the run if a loss so far was NaN or infinite.

        The finiteness check is accumulated on the device each step and read
        only here, at the points where the clock synchronises anyway, so it
        adds no synchronisation inside a timed window.
        """
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        if self._loss_sum is not None and not bool(torch.isfinite(self._loss_sum)):
            raise Diverged(f"the training loss became NaN or infinite by step {self.steps} "
                           f"({self.samples:,} samples); the trial was stopped there")

    @property
    def evaluations(self) -> list[Evaluation]:
        return self.held_out.evaluations

    @property
    def timing_done(self) -> bool:
        return len(self.windows) >= self.budget.windows

    @property
    def _measured(self) -> bool:
        """All but the profiling window: the windows are timed and the training for accuracy is done."""
        return self.timing_done and (not self.train_for_accuracy or self.samples >= self.budget.train_samples)

    @property
    def cut_short(self) -> bool:
        """The windows saw more foreign load than `busy_limit`. The study discards such a measurement and takes it
        again (`ablate.run.objective.measured_quietly`), so the run stops here: a training for accuracy after the
        windows, the profiling window and the last evaluation would be thrown away with it."""
        return foreign_load.disturbed(self.foreign, self.busy_limit)

    @property
    def done(self) -> bool:
        return self.cut_short or (self._measured and (self.profiled is not None or not self.budget.profile_steps))

    @property
    def started_at(self) -> float:
        """`time.perf_counter()` when the loop asked for its first batch."""
        return self._start

    def batches(self, loader: Iterable[Any]) -> Iterator[Any]:
        """Batches from `loader`, epoch after epoch, until the budget is spent."""
        self.on_phase("first step (compilation, worker start-up)")
        self._start = time.perf_counter()
        while not self.done:
            for batch in _timed(iter(loader), self):
                yield batch
                if self.done:
                    break
        self._sync()
        self.train_time_s = time.perf_counter() - self._start - self._paused

    def count(self, n: int, loss: torch.Tensor | None = None) -> None:
        """Call after each optimizer step with the batch's sample count and its loss."""
        if self._profile is not None:
            self._profile.end_step(n)
            if not self.profile_in_windows:  # a window apart: its steps count in no other
                self._add_loss(loss)  # as in a timed step; after the step's end, in "other"
                if self._profile.full():
                    self.profiled = self._profile.close(self._sync)
                    self.marks[metric.Mark.PROFILING] = [self._profile.opened, time.perf_counter()]
                    self._paused += self.marks[metric.Mark.PROFILING][1] - self._profile.opened  # not training time
                    self._profile, self.profiling = None, False
                    self.on_phase("finishing")
                return
        self._count(n, loss)
        if (self.train_for_accuracy and not self.held_out.over and self.samples >= self.budget.train_samples
                and not self.timing_done):
            # The windows go on past the training for accuracy (a floor, or windows longer than train_samples):
            # its last evaluation is here, at the samples every combination trains, not where a faster one's
            # windows end. (Otherwise the run ends now, and the caller's `evaluate_now` is the last.)
            self.held_out.end(self.samples, self._paused_to_evaluate)
        if self._measured and not self.done:
            self._open_profile()

    def mark(self, phase: int) -> None:
        """A phase of the step begins (`ablate.trial.phases`); the loop calls it only while `profiling`."""
        if self._profile is not None:
            self._profile.mark(phase)

    def _open_profile(self) -> None:
        """After everything else: the profiled steps are in no window, and train no accuracy that is evaluated."""
        if self.train_for_accuracy and not self.held_out.over:
            self.held_out.end(self.samples, self._paused_to_evaluate)
        self._sync()  # CUDA: the window's first step starts from an idle queue, with no earlier kernel in its trace
        self.on_phase("profiling where a step's time goes")
        self._profile, self.profiling = phases.ProfilingWindow(self.budget, self.device, time.perf_counter), True

    def _add_loss(self, loss: torch.Tensor | None) -> None:
        # One kernel a step: the loss is never negative, so the sum is finite until a loss is NaN or
        # infinite, and stays so after (fp32, so a long run of finite fp16 losses cannot overflow it).
        if loss is None:
            return
        if self._loss_sum is None:
            self._loss_sum = loss.detach().to(torch.float32, copy=True)
        else:
            self._loss_sum.add_(loss.detach())

    def _count(self, n: int, loss: torch.Tensor | None) -> None:
        self.steps += 1
        self.samples += n
        self._add_loss(loss)
        if loss is not None:
            if self.steps % DIVERGENCE_CHECK_EVERY == 0 and (self.timing_done or self._window_start is None):
                self._sync()  # outside timed windows: stop a diverged run without waiting for the budget
        if self.steps == 1:
            self._first_step_done()
            return
        if self.steps == ONE_OFF_STEPS and self._window_start is None:
            self._early_steps_done()
        if self.train_for_accuracy and self.held_out.due(self.samples):
            self.evaluate_now()
        if self.timing_done:
            return
        if self._window_start is None:
            if self.samples - self._warm_from >= self.budget.warmup_samples:
                self._open_first_window()
            return
        self._window_samples += n
        if self._window_full() or self._window_lasted():
            self._sync()
            now = time.perf_counter()
            self.windows.append(Window(self._window_samples, now - self._window_start, self._data_wait))
            self._window_closed(now)

    # The steps' milestones, each reached once (a window's end once a window), kept out of `_count`'s every step.

    def _first_step_done(self) -> None:
        self._sync()
        self.marks[metric.Mark.FIRST_STEP] = [self._start, time.perf_counter()]
        self.first_step_s = self.marks[metric.Mark.FIRST_STEP][1] - self._start
        self._warm_from = self.samples
        self.on_phase("warm-up")

    def _early_steps_done(self) -> None:
        """The one-off steps are over: their excess timed, the warm-up left untimed unless accuracy is trained."""
        self._sync()
        self._early_s = time.perf_counter() - self._start - self._paused - self.first_step_s
        self._early_samples = self.samples - self._warm_from
        self._untimed = not self.train_for_accuracy  # time to accuracy counts the warm-up: it stays timed
        if self._untimed:
            self.on_untimed(True)
        empty_cache(self.device)  # compilation's, recording's and autotuning's blocks: not the windows' memory

    def _open_first_window(self) -> None:
        if self._untimed:
            self._untimed = False
            self._paused += self.on_untimed(False)
        self.on_phase(f"timed window 1 of {self.budget.windows}")  # before the window's clock starts
        if self.steps < ONE_OFF_STEPS:  # a warm-up too short to have emptied the cache at its third step
            empty_cache(self.device)
        # Outside the clock: reading /proc takes a few milliseconds.
        self._load_before = foreign_load.snapshot(time.perf_counter())
        self._energy.open(time.perf_counter())
        self._open_window()
        self.marks[metric.Mark.WINDOWS] = [self._window_start]  # closed with the last window
        if self.profile_in_windows:
            self._profile, self.profiling = phases.ProfilingWindow(self.budget, self.device, time.perf_counter), True
        reset_peak_memory(self.device)  # the windows' peak, not compilation's or warm-up's

    def _window_closed(self, now: float) -> None:
        """A window ended at `now`: the next one opens; after the last, the windows' memory, load and energy are
        read first."""
        self.on_phase(f"timed window {len(self.windows) + 1} of {self.budget.windows}" if not self.timing_done
                      else f"training for accuracy ({self.samples:,} of {self.budget.train_samples:,} samples)"
                      if self.train_for_accuracy and self.samples < self.budget.train_samples else "finishing")
        if self.timing_done:
            # Read here: evaluations after the windows must not count, so trials that train accuracy compare
            # with those that do not.
            self.peak_memory = highest(self._peak_outside_evals, peak_memory(self.device))
            self.foreign = foreign_load.between(self._load_before, foreign_load.snapshot(now))
            self._energy.close(now)
            self.marks[metric.Mark.WINDOWS].append(now)
            if self.profile_in_windows and self._profile is not None:
                self.profiled, self._profile, self.profiling = self._profile.close(self._sync), None, False
            if self.cut_short and self.foreign:
                self.on_phase(f"other work used {self.foreign.foreign_cores:.2f} cores during its windows: stopping")
        self._open_window(now)

    def evaluate_now(self) -> Evaluation | None:
        """Evaluate on the test set with the clock paused; at most once per point in training, never after the
        training for accuracy ended (the windows may go on past it), and never in a run `cut_short` (the study
        discards it)."""
        if self.cut_short:
            return None
        return self.held_out.now(self.samples, self._paused_to_evaluate)

    @contextmanager
    def _paused_to_evaluate(self) -> Iterator[float]:
        """The clock stopped around an evaluation, to which it yields the training time so far: its time, and inside
        the windows its peak memory and its joules, count in nothing measured."""
        self._sync()
        in_windows = self._window_start is not None and not self.timing_done
        if in_windows:  # the windows' peak so far and their joules; the evaluation's own are left out below
            self._peak_outside_evals = highest(self._peak_outside_evals, peak_memory(self.device))
            self._energy.pause(time.perf_counter())
        self.on_phase(f"evaluating {self.test_samples:,} test samples (trained on {self.samples:,})")
        began = time.perf_counter()
        yield began - self._start - self._paused
        if not self.timing_done:  # the test batches' blocks, which the allocator would keep reserved in the windows
            empty_cache(self.device)
        ended = time.perf_counter()  # evaluate() reads results back with .item(), so the device is done
        if in_windows:
            reset_peak_memory(self.device)
            self._energy.resume(ended)
        self.marks.setdefault(metric.Mark.EVALUATING, []).append([began, ended])
        self._paused += ended - began
        if self._window_start is not None:  # a window open across the evaluation must not count it
            self._window_start += ended - began
        if self.timing_done and self.samples < self.budget.train_samples:  # what it said only while it is so
            self.on_phase(f"training for accuracy ({self.samples:,} of {self.budget.train_samples:,} samples)")

    def _window_full(self) -> bool:
        """The open window holds its samples and has lasted its floor (read on the host's clock, without
        synchronising: on CUDA the device is behind the host, so the window as measured lasts longer still)."""
        if self._window_samples < self.budget.window_samples:
            return False
        return not self._floor or (self._window_start is not None
                                   and time.perf_counter() - self._window_start >= self._floor)

    def _window_lasted(self) -> bool:
        """The open window has run `window_seconds` on the host's clock: read without synchronising, so on CUDA
        it closes a little later (its length is still measured between synchronisations). docs/measuring.md
        gives the bias of stopping by time."""
        cap = self.budget.window_seconds
        return cap is not None and self._window_start is not None and time.perf_counter() - self._window_start >= cap

    def _open_window(self, now: float | None = None) -> None:
        if now is None:
            self._sync()
            now = time.perf_counter()
        self._window_start, self._window_samples, self._data_wait = now, 0, 0.0

    def add_data_wait(self, seconds: float) -> None:
        if self._window_start is not None and not self.timing_done:
            self._data_wait += seconds

    def summary(self) -> dict[str, float]:
        rates = [w.throughput * self.units_per_sample for w in self.windows]
        rate = metric.geometric_mean(rates)
        return {
            metric.THROUGHPUT: rate,
            metric.THROUGHPUT_SPREAD_PCT: 100 * (max(rates) - min(rates)) / rate,
            metric.THROUGHPUT_CV_PCT: 100 * statistics.pstdev(rates) / statistics.mean(rates),
            metric.DATA_WAIT_FRACTION: sum(w.data_wait for w in self.windows) / sum(w.seconds for w in self.windows),
            metric.FIRST_STEP_S: self.first_step_s,
            # One-off work that lands after the first step (CUDA-graph recording, TorchScript's optimisation);
            # 0 when the warm-up is too short to time steps 2-3.
            metric.EARLY_STEPS_EXCESS_S: (max(0.0, self._early_s - self._early_samples * self.units_per_sample / rate)
                                       if self._early_s else 0.0),
            metric.PEAK_MEMORY_MB: 0.0, **self.peak_memory,  # 0.0: read when the windows end
            metric.TRAIN_TIME_S: self.train_time_s,
            metric.TRAIN_SAMPLES: float(self.samples),
            metric.TRAIN_STEPS: float(self.steps),
            **{metric.window(i): r for i, r in enumerate(rates)},
            **({metric.FOREIGN_CORES: self.foreign.foreign_cores, metric.STEAL_CORES: self.foreign.steal_cores}
               if self.foreign else {}),
            **({metric.CUT_SHORT: 1.0} if self.cut_short else {}),
            **self._energy.metrics(sum(w.samples for w in self.windows)),
            **self.held_out.summary(self.first_step_s),
            **(self.profiled.summary(None if self.profile_in_windows else
                                     sum(w.seconds for w in self.windows) / sum(w.samples for w in self.windows))
               if self.profiled else {}),
        }


def _timed(iterator: Iterator[Any], clock: StepClock) -> Iterator[Any]:
    while True:
        if clock.profiling:
            clock.mark(phases.DATA)
        t = time.perf_counter()
        try:
            batch = next(iterator)
        except StopIteration:
            return
        clock.add_data_wait(time.perf_counter() - t)
        yield batch
