"""Every figure a trial reports, by the key it is stored and logged under, and the one average of throughputs.

A trial's metrics are a flat dict of floats: `ablate.trial.measure` and `ablate.trial.process` write it, the
study stores it as the trial's `metrics` (`ablate.store.records`) and logs it to MLflow as it is, and the table,
the analysis, summary.json and the report read it back. The keys are a stored format, read again by every
resume, `ablate sync` and `ablate report`, so they are spelled here and nowhere else (tests/store/test_records.py
greps for them): a key spelled in two modules is a key that can drift apart (torchtitan names every metric
key in one module too). A trial's interpreter imports this module, so it imports the standard library only.
"""
from __future__ import annotations

import math
from typing import Iterable, Mapping

# Throughput, in the task's unit per second (tokens for a language model): the geometric mean of the windows'.
THROUGHPUT = "throughput"
THROUGHPUT_WINDOW = "throughput_window_"  # + the window's index, from 0: each timed window's own throughput
THROUGHPUT_SPREAD_PCT = "throughput_spread_pct"  # (max - min) / geometric mean over the windows, in percent
THROUGHPUT_CV_PCT = "throughput_cv_pct"
DATA_WAIT_FRACTION = "data_wait_fraction"  # of the windows' time, blocked in the DataLoader's next()
# Peak memory over the timed windows. PEAK_MEMORY_MB is the figure the table shows: on a CPU the process's resident
# set; on CUDA the caching allocator's reserved peak, the one that counts the private pools CUDA-graph replays run
# in (their activations never pass through the allocator, so the allocated peak leaves them out).
PEAK_MEMORY_MB = "peak_memory_mb"
PEAK_MEMORY_ALLOCATED_MB = "peak_memory_allocated_mb"  # CUDA: torch.cuda.max_memory_allocated, tensors only
PEAK_MEMORY_RESERVED_MB = "peak_memory_reserved_mb"  # CUDA: torch.cuda.max_memory_reserved, graph pools included
PEAK_MEMORY_IS_RESERVED = "peak_memory_is_reserved"  # CUDA: 1.0, PEAK_MEMORY_MB is the reserved peak; absent on a CPU
MFU = "mfu"  # model FLOPs utilisation (ablate.trial.mfu): language models on CUDA only

# Where a step's time goes, from the profiling window after the timed windows (ablate.trial.phases).
# The loop's phases in its order, then "other": the rest of a step, the loop's own bookkeeping between one step's
# optimizer and the next step's request for a batch. Names, not keys: the keys are PHASE_S and PHASE_SHARE + a name.
STEP_PHASES = ("data", "copy", "forward", "backward", "optimizer", "other")
PHASE_S = "phase_s_"  # + a phase's name: its mean seconds per profiled step
PHASE_SHARE = "phase_share_"  # + a phase's name: its share of the profiled step (the shares, other's too, sum to 1)
PROFILED_STEP_S = "profiled_step_s"  # the profiling window's mean step, in seconds
PROFILED_STEPS = "profiled_steps"  # steps in the profiling window (none of them in a timed window or counted above)
# The profiled steps' time per sample over the timed windows': what the instrumentation costs, measured (1.0: nothing).
PROFILE_COST = "profile_cost"
GPU_IDLE_SHARE = "gpu_idle_share"  # CUDA with a kernel trace: of the window's time, the device ran no kernel or copy

# One-off costs, in seconds.
PREPARE_MODEL_S = "prepare_model_s"  # the stack's prepare_model and prepare_optimizer (TorchScript scripts here)
FIRST_STEP_S = "first_step_s"  # compilation, worker start-up, allocator warm-up
EARLY_STEPS_EXCESS_S = "early_steps_excess_s"  # what steps 2-3 took beyond the steady-state speed
ONE_OFF_S = "one_off_s"  # the three above, summed by the trial
ONE_OFF_COSTS = (PREPARE_MODEL_S, FIRST_STEP_S, EARLY_STEPS_EXCESS_S, ONE_OFF_S)  # what a warm compile cache shortens

# The run and its start-up.
TRAIN_TIME_S = "train_time_s"  # loop start to the end of the last step, evaluations excluded
TRAIN_SAMPLES = "train_samples"
TRAIN_STEPS = "train_steps"
DATA_LOAD_S = "data_load_s"
SETUP_S = "setup_s"  # start-up inside the process, up to the first training step, data loading excluded
IMPORT_WAIT_S = "import_wait_s"  # waiting for interpreters' imports to stop before a measured stretch
PROCESS_START_S = "process_start_s"  # the job sent to its arrival in the trial's interpreter
STARTUP_S = "startup_s"  # the job sent to the first batch
# 1.0: every graph it compiled came from its graph's shared compile cache (ablate.trial.compile_cache); 0.0: cold
COMPILE_CACHE_WARM = "compile_cache_warm"
COMPILE_CACHE_HITS = "compile_cache_hits"  # Inductor's FX graph and AOTAutograd cache hits in the trial
COMPILE_CACHE_MISSES = "compile_cache_misses"  # their misses and bypasses: graphs it compiled itself
# Other work on the machine during the timed windows, in cores on average (ablate.trial.foreign_load); Linux only.
FOREIGN_CORES = "foreign_cores"  # other processes and the hypervisor's steal
STEAL_CORES = "steal_cores"
REMEASURED = "remeasured"  # how many earlier attempts were discarded because the machine was busy
CUT_SHORT = "cut_short"  # 1.0: stopped as its windows closed, too busy to keep (`StepClock.cut_short`); never stored
# Energy over the timed windows (ablate.trial.energy): joules per sample, and which counter counted them, by its code
# in ENERGY_COUNTERS (metrics are floats); both absent where nothing counts energy.
ENERGY_J_PER_SAMPLE = "energy_j_per_sample"
ENERGY_COUNTER = "energy_counter"
ENERGY_COUNTERS = {"RAPL": 1.0, "NVML": 2.0}  # a CPU's packages (RAPL), the trial's GPU (NVML)
# A graph-capturing strategy's own metric (strategies name it; a stack prefixes it with the strategy's name): the
# graphs torch.compile ran without CUDA graphs. Any on CUDA makes the trial fail: its timing would not be of graphs.
CUDAGRAPH_SKIPS = "cudagraph_skips"

# Held-out quality and time to the target.
HELD_OUT = "test_"  # the prefix of every held-out figure: a group's other members borrow them all
TEST_LOSS = "test_loss"  # every training evaluates it
TEST_ACCURACY = "test_accuracy"  # percent; absent for a task without accuracy
TEST_SAMPLES = "test_samples"  # how many it evaluated (ablate.workload.evaluation): parity's paired binomial n
TEST_SPLIT_SAMPLES = "test_split_samples"  # the test split's size, of which it evaluated TEST_SAMPLES
TEST_SAMPLING_ERROR = "test_sampling_error"  # points: a paired accuracy difference's standard error there, at most
EVALUATIONS = "evaluations"
TARGET_ACCURACY = "target_accuracy"  # the study's target, as the budget set it
TARGET_LOSS = "target_loss"
TARGET_REACHED = "target_reached"  # 1.0 or 0.0; absent without a target
SAMPLES_TO_TARGET = "samples_to_target"
TIME_TO_TARGET_S = "time_to_target_s"  # training time from the end of the first step, evaluations excluded
TIME_TO_TARGET_E2E_S = "time_to_target_e2e_s"  # the same from model preparation, compilation included

# Not numbers: they travel with the metrics from the trial, and the study takes them out before storing them.
TIMELINE = "timeline"  # the trial's perf_counter readings (ablate.trial.interpreters), by their names in `Mark`
ACCURACY_NOT_MEASURED = "accuracy_not_measured"  # why: stand-in data, or a task without an accuracy


class Mark:
    """The names in a trial's timeline (`TIMELINE`): `time.perf_counter` readings, CLOCK_MONOTONIC on Linux, so one
    clock for the study and all its trials. Each is a reading, a span [began, ended], or a list of spans. What a
    study costs is priced from them (benchmarks.conclusion_cost); a timeline stored before a mark existed lacks it,
    and its time is priced as unmarked. Not metric keys: a timeline is stored apart from the metrics."""

    LAUNCHED = "launched"  # the study sent the trial its job (a reading)
    MEASURED = "measured"  # its measured stretches (ablate.trial.interpreters): spans
    IMPORTS = "imports"  # other interpreters' imports that finished meanwhile: spans
    FIRST_STEP = "first_step"  # the loop's first batch asked for to the first step's end: compilation (a span)
    WINDOWS = "windows"  # the first timed window's opening to the last one's close (a span, evaluations inside)
    EVALUATING = "evaluating"  # each held-out evaluation, the last one's after the loop included: spans
    PROFILING = "profiling"  # the profiling window (ablate.trial.phases): a span
    EXITED = "exited"  # its process gone, as the study saw it (a reading)
    HAND_OFF = "hand_off"  # the previous trial's exit to this one's launch (a span; absent after none)


def window(i: int) -> str:
    """The key of timed window `i`'s throughput."""
    return f"{THROUGHPUT_WINDOW}{i}"


def phase_s(name: str) -> str:
    """The key of a step phase's mean seconds (a name in `STEP_PHASES`)."""
    return f"{PHASE_S}{name}"


def phase_share(name: str) -> str:
    """The key of a step phase's share of the profiled step."""
    return f"{PHASE_SHARE}{name}"


def windows(metrics: Mapping[str, float]) -> tuple[float, ...]:
    """The throughput of each timed window, in order."""
    return tuple(metrics[window(i)] for i in range(sum(1 for k in metrics if k.startswith(THROUGHPUT_WINDOW))))


def profiled_s(metrics: Mapping[str, float]) -> float:
    """The profiling window's seconds, its steps at their mean step; 0 where none ran, or where the timed windows'
    own steps were profiled (`ablate.trial.phases.in_windows`: no `PROFILE_COST`, since nothing was added)."""
    if PROFILE_COST not in metrics:
        return 0.0
    return metrics.get(PROFILED_STEPS, 0.0) * metrics.get(PROFILED_STEP_S, 0.0)


def log_mean(values: Iterable[float]) -> float:
    """The mean log: the log of the geometric mean, the scale on which speed-ups are estimated."""
    logs = [math.log(v) for v in values]
    return sum(logs) / len(logs)


def geometric_mean(values: Iterable[float]) -> float:
    """Throughputs' average: the speed-ups average log throughput (`ablate.stats.protocol`), and a measurement's
    and a combination's own figures must be the same estimate of its speed, or rows and their speed-ups disagree
    (`ablate.stats.answer.comparison`)."""
    return math.exp(log_mean(values))
