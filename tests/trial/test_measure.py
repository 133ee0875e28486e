"""The step clock on a fake clock: windows, first step, and time to accuracy with evaluation excluded."""
from __future__ import annotations

import math
import os
import random
import statistics
import subprocess
import sys
from typing import Callable

import pytest
import torch
from fake_time import FakeTime

from ablate.config.study import Budget
from ablate.trial import measure, memory
from ablate.trial.accuracy import Evaluation
from ablate.trial.measure import StepClock
from ablate.workload.tasks import Quality

from fake_cuda import FakeAllocator, FakeCUDA, FakeEvents, FakeTrace

STEP_S, EVAL_S, BATCH = 1.0, 100.0, 8


@pytest.fixture
def fake_time(monkeypatch):
    fake = FakeTime()
    monkeypatch.setattr(measure, "time", fake)
    return fake


def _train(clock: StepClock, fake: FakeTime) -> None:
    for _ in clock.batches([None] * 1000):
        fake.now += STEP_S  # one training step
        clock.count(BATCH)


def _clock(fake: FakeTime, accuracies: list[float], **budget) -> StepClock:
    results = iter(accuracies)

    def evaluate() -> Quality:
        fake.now += EVAL_S  # an evaluation is slow; none of it may count as training time
        return Quality(0.5, next(results))

    budget = Budget(**{"train_samples": 64, "warmup_samples": 8, "window_samples": 16, "windows": 2, **budget})
    return StepClock(budget, torch.device("cpu"), train_for_accuracy=True, evaluate=evaluate)


def test_time_to_target_excludes_evaluation_and_reports_compilation_apart(fake_time):
    clock = _clock(fake_time, [20.0, 55.0, 70.0, 90.0], eval_every_samples=16, target_accuracy=50.0)
    _train(clock, fake_time)
    clock.evaluate_now()  # the final evaluation coincides with the last periodic one: not run twice
    assert [e.samples for e in clock.evaluations] == [16, 32, 48, 64]
    summary = clock.summary()
    assert summary["train_time_s"] == 8 * STEP_S  # eight steps; four evaluations excluded
    assert summary["samples_to_target"] == 32 and summary["target_reached"] == 1.0
    assert summary["time_to_target_e2e_s"] == 4 * STEP_S  # from the loop start, first step included
    assert summary["time_to_target_s"] == 3 * STEP_S  # first (compiling) step excluded
    assert summary["test_accuracy"] == 90.0 and summary["evaluations"] == 4
    assert summary["throughput"] == pytest.approx(BATCH / STEP_S)  # windows that spanned an evaluation do not count it


def test_a_target_not_reached_is_recorded_as_such(fake_time):
    clock = _clock(fake_time, [20.0, 30.0], eval_every_samples=32, target_accuracy=99.0)
    _train(clock, fake_time)
    clock.evaluate_now()
    summary = clock.summary()
    assert summary["target_reached"] == 0.0 and "time_to_target_s" not in summary
    assert summary["test_accuracy"] == 30.0


def test_without_an_interval_only_the_final_evaluation_runs(fake_time):
    clock = _clock(fake_time, [97.0], target_accuracy=96.0)
    _train(clock, fake_time)
    clock.evaluate_now()
    summary = clock.summary()
    assert summary["evaluations"] == 1 and summary["samples_to_target"] == 64


def _on_fake_cuda(monkeypatch) -> FakeAllocator:
    FakeCUDA().install(monkeypatch)
    memory = FakeAllocator().install(monkeypatch)
    FakeEvents(lambda: measure.time.perf_counter()).install(monkeypatch)  # the profiling window's (ablate.trial.phases)
    FakeTrace().install(monkeypatch)
    return memory


def test_peak_memory_covers_the_timed_windows_without_warm_up_or_evaluations(fake_time, monkeypatch):
    memory = _on_fake_cuda(monkeypatch)
    memory.allocate(20.0)  # weights, gradients, optimizer state: held throughout

    def evaluate():
        memory.allocate(1000.0)  # the test set's batches: not training memory
        memory.free(1000.0)
        return Quality(0.5, 50.0)

    budget = Budget(train_samples=64, warmup_samples=8, window_samples=16, windows=2, eval_every_samples=16,
                    min_window_seconds=0)
    clock = StepClock(budget, torch.device("cuda"), train_for_accuracy=True, evaluate=evaluate)
    for _ in clock.batches([None] * 1000):
        fake_time.now += STEP_S
        step_mb = 500.0 if clock.steps == 0 else 10.0  # the first step compiles, with large temporaries
        memory.allocate(step_mb)
        memory.free(step_mb)
        clock.count(BATCH)
    assert any(e.samples > 8 for e in clock.evaluations)  # some evaluations ran while the windows were open
    summary = clock.summary()
    assert summary["peak_memory_allocated_mb"] == 30.0
    assert summary["peak_memory_reserved_mb"] == 30.0  # the cache was emptied of compilation's and evaluations' blocks
    assert summary["peak_memory_mb"] == 30.0 and summary["peak_memory_is_reserved"] == 1.0


def _windows_on_fake_cuda(fake: FakeTime, memory: FakeAllocator, graphs: bool) -> dict[str, float]:
    """A run whose activations (30 MB a step) pass through the allocator (eager), or live in a CUDA graph's pool,
    recorded at the second step and replayed after it (CUDA-graph trees)."""
    clock = StepClock(Budget(train_samples=64, warmup_samples=16, window_samples=16, windows=2, min_window_seconds=0),
                      torch.device("cuda:0"), train_for_accuracy=False)
    for _ in clock.batches([None] * 1000):
        fake.now += STEP_S
        if clock.steps == 0:  # compilation's temporaries
            memory.allocate(300.0)
            memory.free(300.0)
        if not graphs:
            memory.allocate(30.0)
            memory.free(30.0)
        elif clock.steps == 1:
            memory.record_graph(30.0)
        else:
            memory.replay()
        clock.count(BATCH)
    return clock.summary()


def test_on_cuda_both_peaks_are_recorded_and_the_table_shows_the_reserved_one_so_graphs_are_no_false_saving(
        fake_time, monkeypatch):
    # Graph replays never pass through the caching allocator: the allocated peak leaves their activations out.
    eager, graphs = [], []
    for runs, captures in ((eager, False), (graphs, True)):
        memory = _on_fake_cuda(monkeypatch)
        memory.allocate(20.0)  # weights, gradients, momentum
        runs.append(_windows_on_fake_cuda(fake_time, memory, captures))
        assert memory.emptied == 1  # once, before the windows: compilation's 300 MB is not the windows' memory
    (eager,), (graphs,) = eager, graphs
    assert (eager["peak_memory_allocated_mb"], eager["peak_memory_reserved_mb"]) == (50.0, 50.0)
    assert (graphs["peak_memory_allocated_mb"], graphs["peak_memory_reserved_mb"]) == (20.0, 50.0)  # the pool
    assert graphs["peak_memory_mb"] == eager["peak_memory_mb"] == 50.0  # the same memory: no saving shown
    assert graphs["peak_memory_is_reserved"] == eager["peak_memory_is_reserved"] == 1.0


def test_on_a_cpu_the_peak_is_the_one_figure_it_was(fake_time):
    clock = _throughput_run(fake_time, lambda: STEP_S)
    summary = clock.summary()
    assert "peak_memory_mb" in summary and not {k for k in summary if k.startswith("peak_memory_")} - {"peak_memory_mb"}


_LINUX_PEAK = pytest.mark.skipif(not os.path.exists(memory._CLEAR_REFS), reason="needs Linux's /proc/self/clear_refs")
_CHILD_PEAK = ("import torch; from ablate.trial.memory import peak_memory_mb; "
               "print(peak_memory_mb(torch.device('cpu')))")


@_LINUX_PEAK
def test_a_cpu_peak_is_reset_to_what_the_process_holds_now():
    cpu = torch.device("cpu")
    ballast = bytearray(b"\x01") * (256 * 2**20)  # written, so resident
    held = memory.peak_memory_mb(cpu)
    del ballast
    memory.reset_peak_memory(cpu)
    assert memory.peak_memory_mb(cpu) < held - 200


@pytest.mark.slow
@_LINUX_PEAK
def test_a_cpu_peak_is_the_trial_process_s_own_not_that_of_the_process_that_started_it():
    # getrusage's ru_maxrss in a new interpreter starts from its parent's high-water mark: every trial of a study
    # read the study process's peak.
    ballast = bytearray(b"\x01") * (2 * 2**30)
    child = subprocess.run([sys.executable, "-c", _CHILD_PEAK], stdout=subprocess.PIPE, text=True, check=True,
                           env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert float(child.stdout) < len(ballast) / 2**20
    del ballast


class _OpCounter(torch.utils._python_dispatch.TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func not in (torch.ops.aten.detach.default, torch.ops.aten.alias.default):  # views: no kernel
            self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


def test_the_divergence_check_costs_one_kernel_a_step(fake_time):
    clock = StepClock(Budget(train_samples=64, warmup_samples=8, window_samples=1000, windows=1),
                      torch.device("cpu"), train_for_accuracy=False)
    steps = iter(clock.batches([None] * 1000))
    for _ in range(3):
        next(steps)
        clock.count(BATCH, torch.tensor(2.3))
    next(steps)
    counter, loss = _OpCounter(), torch.tensor(2.3)
    with counter:
        clock.count(BATCH, loss)  # inside a timed window
    assert len(counter.ops) <= 1, counter.ops
    with pytest.raises(measure.Diverged):
        next(steps)
        clock.count(BATCH, torch.tensor(float("nan")))
        clock._sync()


def test_steps_after_the_first_that_pay_a_one_off_cost_are_reported(fake_time):
    clock = _clock(fake_time, [90.0], warmup_samples=24)  # steps 2 and 3 end before the first window opens
    for _ in clock.batches([None] * 1000):
        # CUDA-graph recording or TorchScript's optimisation at steps 2 and 3; 1 s a step after that.
        fake_time.now += 5 * STEP_S if clock.steps in (1, 2) else STEP_S
        clock.count(BATCH)
    assert clock.summary()["early_steps_excess_s"] == pytest.approx(2 * 4 * STEP_S)


def test_the_clock_says_which_phase_the_run_is_in(fake_time):
    heard = []
    clock = _clock(fake_time, [20.0, 30.0, 40.0, 50.0], eval_every_samples=32, target_accuracy=99.0)
    clock.on_phase = heard.append
    _train(clock, fake_time)
    assert heard[:3] == ["first step (compilation, worker start-up)", "warm-up", "timed window 1 of 2"]
    assert "timed window 2 of 2" in heard and any(h.startswith("evaluating ") for h in heard)
    assert heard.index("timed window 2 of 2") < heard.index(next(h for h in heard if h.startswith("training for")))


@pytest.mark.parametrize("for_accuracy", [False, True])
def test_only_a_throughput_runs_warm_up_is_left_untimed_and_its_wait_is_not_training_time(fake_time, for_accuracy):
    heard = []

    def untimed(begins: bool) -> float:
        heard.append((begins, clock.steps, len(clock.windows)))
        if not begins:
            fake_time.now += 50.0  # waiting for an interpreter to finish importing
            return 50.0
        return 0.0

    clock = _clock(fake_time, [90.0], warmup_samples=40)
    clock.train_for_accuracy, clock.on_untimed = for_accuracy, untimed
    _train(clock, fake_time)
    if for_accuracy:  # time to accuracy runs from the first step: nothing in it is left untimed
        assert heard == []
        return
    # After the steps that may still pay a one-off cost; before the first window opens.
    assert heard == [(True, measure.ONE_OFF_STEPS, 0), (False, 1 + 40 // BATCH, 0)]
    assert clock.train_time_s == pytest.approx(clock.steps * STEP_S)  # the wait is paused time
    assert all(w.seconds == pytest.approx(w.samples / BATCH * STEP_S) for w in clock.windows)


def _throughput_run(fake: FakeTime, step_s: Callable[[], float], **budget) -> StepClock:
    # No profiling window: these simulate the timed windows, and its steps would draw step times from their streams.
    budget = Budget(**{"train_samples": 64, "warmup_samples": 8, "window_samples": 16, "windows": 3,
                       "profile_steps": 0, **budget})
    clock = StepClock(budget, torch.device("cpu"), train_for_accuracy=False)
    for _ in clock.batches(iter(lambda: None, 0)):
        fake.now += step_s()
        clock.count(BATCH)
    return clock


def test_a_window_of_a_slow_run_closes_at_the_first_step_past_window_seconds(fake_time):
    slow = _throughput_run(fake_time, lambda: 2.0, window_samples=10 * BATCH, window_seconds=5.0)
    assert [(w.samples, w.seconds) for w in slow.windows] == [(3 * BATCH, 6.0)] * 3  # 3 steps of 2 s, not 10
    assert slow.summary()["throughput"] == pytest.approx(BATCH / 2.0)
    fast = _throughput_run(fake_time, lambda: 0.1, window_samples=10 * BATCH, window_seconds=5.0)
    assert [w.samples for w in fast.windows] == [10 * BATCH] * 3  # 1 s a window: samples close it
    uncapped = _throughput_run(fake_time, lambda: 2.0, window_samples=10 * BATCH, window_seconds=None)
    assert [w.samples for w in uncapped.windows] == [10 * BATCH] * 3


@pytest.mark.slow
@pytest.mark.parametrize("cap_in_steps", [0.5, 2.5, 6.0])
def test_closing_windows_by_time_biases_log_throughput_no_more_than_a_ratio_of_as_many_steps(fake_time, cap_in_steps):
    """Step times with a 10% spread (lognormal, mean 1 s): the windows' geometric mean, which the speed-ups
    average in logs, lands within 1% of the true rate whether the cap closes a window after one step or six."""
    rng = random.Random(7)
    cv = 0.10
    sigma = math.sqrt(math.log(1 + cv ** 2))
    logs, steps = [], []
    for _ in range(1_000):
        clock = _throughput_run(fake_time, lambda: rng.lognormvariate(-sigma ** 2 / 2, sigma),
                                window_samples=1_000 * BATCH, window_seconds=cap_in_steps)
        logs.append(math.log(clock.summary()["throughput"]))
        steps += [w.samples // BATCH for w in clock.windows]
    assert abs(statistics.fmean(logs) - math.log(BATCH / 1.0)) < 0.01
    assert statistics.fmean(steps) == pytest.approx(math.floor(cap_in_steps) + 1, abs=0.5)


def _fast_gpu_run(fake: FakeTime, monkeypatch, step_s: float = 0.001, for_accuracy: bool = False,
                  evaluate=None, **budget) -> StepClock:
    _on_fake_cuda(monkeypatch)
    budget = Budget(**{"train_samples": 64, "warmup_samples": 8, "window_samples": 16, "windows": 3, **budget})
    clock = StepClock(budget, torch.device("cuda:0"), train_for_accuracy=for_accuracy, evaluate=evaluate)
    for _ in clock.batches(iter(lambda: None, 0)):
        fake.now += step_s
        clock.count(BATCH)
    return clock


def test_a_window_on_cuda_stays_open_by_whole_steps_until_half_a_second_has_passed(fake_time, monkeypatch):
    # 2 steps of 1 ms would be a 2 ms window, which a 0.1 ms hiccup moves by 5%.
    clock = _fast_gpu_run(fake_time, monkeypatch)
    assert clock.budget.window_floor_s("cuda") == 0.5
    for w in clock.windows:
        assert 0.5 <= w.seconds < 0.5 + 0.001 + 1e-9 and w.samples == round(w.seconds / 0.001) * BATCH
    assert clock.summary()["throughput"] == pytest.approx(BATCH / 0.001)


def test_the_floor_is_cuda_s_by_default_settable_and_below_the_cap(fake_time, monkeypatch):
    cpu = _throughput_run(fake_time, lambda: 0.001)
    assert [w.samples for w in cpu.windows] == [16] * 3  # a CPU's windows are what they were
    off = _fast_gpu_run(fake_time, monkeypatch, min_window_seconds=0)
    assert [w.samples for w in off.windows] == [16] * 3
    set_ = _fast_gpu_run(fake_time, monkeypatch, min_window_seconds=0.1)
    assert all(0.1 <= w.seconds < 0.102 for w in set_.windows)
    capped = _fast_gpu_run(fake_time, monkeypatch, window_seconds=0.2)  # the cap closes a window: it wins
    assert all(0.2 <= w.seconds < 0.202 for w in capped.windows)
    on_a_cpu = _throughput_run(fake_time, lambda: 0.001, min_window_seconds=0.05)
    assert all(0.05 <= w.seconds < 0.052 for w in on_a_cpu.windows)


def _held_open(monkeypatch, eval_every: int) -> tuple[StepClock, list[int], Evaluation | None]:
    """A fast (fake) GPU whose windows run far past train_samples=64, trained for accuracy: the clock, the samples
    each evaluation saw, and what the trial's call after the loop returned."""
    evaluated: list[int] = []

    def evaluate() -> Quality:
        evaluated.append(clock.samples)
        return Quality(0.5, 90.0)

    _on_fake_cuda(monkeypatch)
    budget = Budget(train_samples=64, warmup_samples=8, window_samples=16, windows=3, eval_every_samples=eval_every)
    clock = StepClock(budget, torch.device("cuda:0"), train_for_accuracy=True, evaluate=evaluate)
    for _ in clock.batches(iter(lambda: None, 0)):
        measure.time.now += 0.001
        clock.count(BATCH)
    return clock, evaluated, clock.evaluate_now()  # the evaluation at train_samples, not another


def test_windows_held_open_past_train_samples_do_not_train_the_accuracy_longer(fake_time, monkeypatch):
    # A faster combination's windows hold more samples; its accuracy must still be that of train_samples.
    clock, evaluated, _ = _held_open(monkeypatch, 32)
    assert clock.samples > 1000 and evaluated == [32, 64]
    summary = clock.summary()
    assert summary["evaluations"] == 2 and summary["test_accuracy"] == 90.0
    assert all(w.seconds >= 0.5 for w in clock.windows)  # the evaluations inside the windows are not timed


def test_windows_held_open_past_train_samples_evaluate_at_train_samples_whatever_the_interval(fake_time, monkeypatch):
    # An interval that does not divide train_samples: the accuracy was the last periodic evaluation's, at 48 samples.
    clock, evaluated, last = _held_open(monkeypatch, 48)
    assert clock.samples > 1000 and evaluated == [48, 64] and last is not None and last.samples == 64


def test_the_foreign_load_is_read_over_the_timed_windows_only(fake_time, monkeypatch):
    """Snapshots as the first window opens and as the last one closes, none later: an evaluation after the windows
    is not in the reading. A machine 1.5 cores busy while the tree used 1 reads 0.5 foreign cores."""
    taken: list[float] = []

    def snapshot(wall: float) -> measure.foreign_load.Snapshot:
        taken.append(wall)
        return measure.foreign_load.Snapshot(wall, busy_s=1.5 * wall, steal_s=0.1 * wall, own_s=1.0 * wall)
    monkeypatch.setattr(measure.foreign_load, "snapshot", snapshot)
    clock = _clock(fake_time, [90.0])
    _train(clock, fake_time)
    clock.evaluate_now()
    summary = clock.summary()
    # The two windows of 16 samples: four steps of 1 s, from the first window's opening to the second's close.
    assert len(taken) == 2 and taken[1] - taken[0] == 4 * STEP_S
    assert summary[measure.metric.FOREIGN_CORES] == pytest.approx(0.5 + 0.1)
    assert summary[measure.metric.STEAL_CORES] == pytest.approx(0.1)


def _busy(monkeypatch, foreign_cores: float) -> None:
    """Other work used `foreign_cores` over every stretch the clock reads."""
    monkeypatch.setattr(measure.foreign_load, "between",
                        lambda before, after: measure.foreign_load.Load(foreign_cores, steal_cores=0.0))


@pytest.mark.parametrize("foreign, limit, cut", [(0.6, 0.25, True), (0.2, 0.25, False), (0.25, 0.25, False),
                                                 (5.0, None, False)])
def test_a_measurement_too_busy_to_keep_stops_as_its_windows_close(fake_time, monkeypatch, foreign, limit, cut):
    """The study discards a measurement whose windows saw more than its limit of foreign cores (`busy > limit`,
    ablate.run.objective.measured_quietly), so with that limit the clock stops there: no training for accuracy
    after the windows, no evaluation, no profiling window. At or under the limit, or with none, it runs to the end."""
    _busy(monkeypatch, foreign)
    clock = _clock(fake_time, [90.0], profile_steps=8)
    clock.busy_limit = limit
    _train(clock, fake_time)
    summary = clock.summary()
    assert clock.cut_short is cut and (measure.metric.CUT_SHORT in summary) is cut
    assert summary[measure.metric.FOREIGN_CORES] == foreign
    if cut:  # not a step past the windows' close
        assert fake_time.now == clock.marks[measure.metric.Mark.WINDOWS][1] and clock.samples < 64
        assert clock.evaluate_now() is None and clock.evaluations == [] and clock.profiled is None
    else:
        assert clock.samples == 64 and clock.evaluations and clock.profiled is not None  # then the profiling window


def test_no_foreign_load_is_claimed_where_the_machine_cannot_be_read(fake_time, monkeypatch):
    monkeypatch.setattr(measure.foreign_load, "snapshot", lambda wall: None)
    clock = _clock(fake_time, [90.0])
    _train(clock, fake_time)
    assert measure.metric.FOREIGN_CORES not in clock.summary()


def test_energy_is_read_over_the_timed_windows_and_an_evaluation_inside_them_is_left_out(fake_time, monkeypatch):
    """At 50 W, a window's step of 1 s and 8 samples spends 6.25 J a sample; the evaluations inside the windows
    (100 s each) would add 5,000 J apiece, and the warm-up and the evaluations after the windows more."""
    watts = 50.0

    def read(wall: float) -> measure.energy.Reading:
        return measure.energy.Reading(wall, (watts * fake_time.now,), (math.inf,))
    monkeypatch.setattr(measure.energy, "meter", lambda *a, **k: measure.energy.Meter(measure.energy.RAPL, read))
    clock = _clock(fake_time, [20.0, 55.0, 70.0, 90.0], eval_every_samples=16, target_accuracy=50.0)
    _train(clock, fake_time)
    clock.evaluate_now()
    summary = clock.summary()
    assert summary["evaluations"] == 4 and summary["throughput"] == pytest.approx(BATCH / STEP_S)
    assert summary[measure.metric.ENERGY_J_PER_SAMPLE] == pytest.approx(watts * STEP_S / BATCH)
    assert summary[measure.metric.ENERGY_COUNTER] == measure.metric.ENERGY_COUNTERS["RAPL"]


def test_no_energy_is_claimed_where_nothing_counts_it(fake_time, monkeypatch):
    monkeypatch.setattr(measure.energy, "meter", lambda *a, **k: None)
    clock = _clock(fake_time, [90.0])
    _train(clock, fake_time)
    assert not {measure.metric.ENERGY_J_PER_SAMPLE, measure.metric.ENERGY_COUNTER} & set(clock.summary())
