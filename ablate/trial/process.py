"""One trial: one combination of strategies, trained and measured in a fresh process.

A fresh process per trial keeps process-global state (compile caches in
memory, cuDNN/TF32 flags, allocator state, a crash) from leaking between
trials. Each trial is a new interpreter (multiprocessing's "spawn"), so it
also gets its own randomized address-space layout. Trials forked from one
forkserver share its layout, and a combination's bf16 throughput then sat at
one of two levels for a whole run - consistently within the run, differently
in the next - so repeats within a run could not see it and two runs disagreed
far outside their intervals ("layout luck": Mytkowicz et al., ASPLOS 2009;
Curtsinger & Berger's Stabilizer; docs/measuring.md, "Trials, caches and what
is timed"). With a fresh layout per trial that variation is between
processes, where the blocks measure it. The price is `import torch` in every
trial, seconds (docs/evidence.md, "Evidence: trial processes"):
ablate.trial.interpreters starts the interpreters ahead and lets them import
only outside every trial's measured stretch.
"""
from __future__ import annotations

import multiprocessing as mp
import time
import traceback
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from ablate.config.choices import Option, compose_options
from ablate.config.study import Study
from ablate.trial import compile_cache, failures
from ablate.trial import metrics as metric
from ablate.trial.interpreters import Died, Interpreters, death

if TYPE_CHECKING:
    from ablate.trial.measure import StepClock

BASELINE_FP32 = "ieee"  # strict IEEE fp32 matmuls and convolutions unless the TF32 strategy is on
THROUGHPUT_ONLY = "the study file says throughput only (budget.throughput_only): no trial trains for accuracy"


def _no_phase(text: str) -> None:
    pass


@dataclass
class Channel:
    """The trial's channel to the study that runs it, over `conn`: `serve` opens one in a trial process. Outside
    one (the default, `conn` None) nothing listens, and every call does nothing."""

    conn: Any = None
    marks: dict[str, Any] = field(default_factory=dict)  # perf_counter readings: its measured spans, its first batch

    def phase(self, text: str) -> None:
        """What the trial is doing now, for the study's progress line (microseconds, at phase changes only)."""
        if self.conn is not None:
            self.conn.send(("phase", text))

    def measuring(self) -> float:
        """A measured stretch begins: waits until no interpreter is importing; returns the seconds waited."""
        if self.conn is None:
            return 0.0
        self.conn.send(("measuring",))
        return self.conn.recv()[1]  # ("go", seconds waited)

    def quiet(self) -> None:
        """A measured stretch is over: interpreters may import."""
        if self.conn is not None:
            self.conn.send(("quiet",))


_channel = Channel()  # `serve` replaces it in a trial process


def phase(text: str) -> None:
    """Tell the study what this trial is doing now (a no-op outside a trial process)."""
    _channel.phase(text)


class TrialFailed(RuntimeError):
    """A trial raised or its process died; the message says which and why."""


@dataclass(frozen=True)
class TrialSpec:
    study: Study
    options: tuple[Option, ...]
    device: str
    train_for_accuracy: bool
    compile_cache: str | None = None  # its graph's shared Inductor cache (ablate.trial.compile_cache); None: fresh
    # Draws the test subsample every trial of the run evaluates (ablate.workload.evaluation); None: budget.seed.
    evaluation_seed: int | None = None
    # Stop as the windows close when other work used more cores than this during them: the study will discard the
    # measurement and take it again (`StepClock.cut_short`). None: measure to the end whatever the load.
    busy_limit: float | None = None
    profile_in_windows: bool = False  # profile the timed windows' own steps where that is free (`phases.in_windows`)


@dataclass
class SetUp:
    """What a trial trains: built in the trial's interpreter, before anything is timed."""

    stack: Any  # strategies.Stack
    task: Any  # ablate.workload.tasks.Task
    splits: Any  # ablate.workload.data.Splits
    loader: Any  # the training batches (the stack's loader)
    model: Any  # the unprepared model, on the device
    optimizer: Any
    device: Any  # torch.device
    began: float  # perf_counter when it began, its imports done
    data_load_s: float


def set_up(spec: TrialSpec) -> SetUp:
    """The trial's data, loader, model and optimizer, seeded by the study's budget: two calls in one process
    build the same initial weights and draw the same batches."""
    import torch

    from ablate.config.study import model_kwargs
    from ablate.trial.machine import resolve
    from ablate.workload import data
    from ablate.workload.models import MODELS
    from ablate.workload.registry import lookup
    from strategies import set_fp32_precision

    began = time.perf_counter()
    study, budget, device = spec.study, spec.study.budget, resolve(spec.device)
    if device.type == "cuda":
        # The current device too, not only the tensors': pinned-memory threads, capability queries,
        # CUDA-graph pools and any library that asks "the" device then use the trial's, never cuda:0.
        torch.cuda.set_device(device)
    phase("loading data")
    stack = compose_options(spec.options)
    torch.manual_seed(budget.seed)
    splits = data.load(study.dataset, budget.train_subset, budget.test_subset, **study.dataset_kwargs)
    data_load_s = time.perf_counter() - began
    # A seeded generator fixes the shuffle order whatever the number of workers (DeviceResidentData draws alike).
    base = dict(batch_size=study.baseline.batch_size, shuffle=True, drop_last=True,
                generator=torch.Generator().manual_seed(budget.seed))
    # A hung worker must fail the trial, not stall it; DataLoader accepts a timeout only with workers.
    if stack.loader_kwargs(**base).get("num_workers"):
        base["timeout"] = budget.loader_timeout_s
    loader = stack.make_loader(splits.train, device, **base)
    phase("building the model")
    set_fp32_precision(BASELINE_FP32)  # a true fp32 baseline: PyTorch's default runs cuDNN convolutions in TF32
    model = lookup(MODELS, study.model, "model")(**model_kwargs(study)).to(device)
    return SetUp(stack, study.task, splits, loader, model, _optimizer(study, model), device, began, data_load_s)


def run(spec: TrialSpec) -> dict[str, Any]:
    """Train and measure `spec` in this process; returns metrics (floats)."""
    from torch.utils.data import DataLoader

    from ablate.trial import phases
    from ablate.trial.loop import evaluate, train
    from ablate.trial.measure import StepClock
    from ablate.workload import evaluation

    study, budget = spec.study, spec.study.budget
    built = set_up(spec)
    stack, task, splits, model, device = built.stack, built.task, built.splits, built.model, built.device
    # The measured stretch (one-off cost, timed windows, time to accuracy) begins: no interpreter imports now.
    stretches = _Stretches()
    prepared, optimizer = _prepared(stack, model, built.optimizer)
    prepare_model_s = time.perf_counter() - stretches.started
    tested = evaluation.sample_size(budget.eval_samples, len(splits.test), study.accuracy_tolerance,
                                    task.predictions_per_sample, task.has_accuracy)
    seed = budget.seed if spec.evaluation_seed is None else spec.evaluation_seed
    test = DataLoader(evaluation.subsample(splits.test, tested, seed),
                      batch_size=budget.test_batch(device.type, study.baseline.batch_size))
    # Stand-in data (random labels) has no accuracy worth training for, and a throughput-only study asks for none:
    # time the windows only.
    not_for_accuracy = splits.throughput_only or (THROUGHPUT_ONLY if budget.throughput_only else None)
    for_accuracy = spec.train_for_accuracy and not_for_accuracy is None
    # The unwrapped model: it shares the weights, and a compiled wrapper would recompile for eval mode.
    clock = StepClock(budget, device, for_accuracy,
                      evaluate=(lambda: evaluate(task, model, test, device)) if for_accuracy else None,
                      units_per_sample=task.units_per_sample, on_phase=phase, on_untimed=stretches.untimed,
                      test_samples=tested, busy_limit=spec.busy_limit,
                      profile_in_windows=spec.profile_in_windows and phases.in_windows(budget, device, for_accuracy))
    train(stack, task, prepared, optimizer, built.loader, device, clock, study.baseline.max_grad_norm)
    stretches.end()
    _channel.marks.update({metric.Mark.MEASURED: stretches.spans, "first_batch": clock.started_at})
    _channel.quiet()  # what is left (the last evaluation) measures no time: interpreters may start
    clock.evaluate_now()  # after the budget (reused when the last periodic evaluation was at this point)
    _channel.marks.update(clock.marks)  # its first step, windows, evaluations and profiling window
    if device.type == "cuda" and (fell_back := cudagraph_fallback(stack.metrics())):
        raise failures.CompileFailed(fell_back)
    return _metrics(clock, built, prepare_model_s, sum(stretches.waits), tested, for_accuracy, not_for_accuracy)


class _Stretches:
    """The trial's measured stretches, as perf_counter spans: one from its start, closed around each stretch the
    clock leaves untimed (a run that times windows only leaves its warm-up untimed), and the seconds each waited
    for the interpreters to stop importing."""

    def __init__(self) -> None:
        self.waits = [_channel.measuring()]
        self.started = time.perf_counter()
        self.spans = [[self.started, self.started]]

    def untimed(self, begins: bool) -> float:
        """The clock's `on_untimed`: an untimed stretch begins (interpreters may import) or ends (the seconds
        waited for them to stop)."""
        if begins:
            self.end()
            _channel.quiet()
            return 0.0
        self.waits.append(_channel.measuring())
        self.spans.append([time.perf_counter()] * 2)
        return self.waits[-1]

    def end(self) -> None:
        self.spans[-1][1] = time.perf_counter()


def _prepared(stack: Any, model: Any, optimizer: Any) -> tuple[Any, Any]:
    """The stack's model and optimizer, as it trains them; a failure of a stack that compiles is a `CompileFailed`."""
    try:
        prepared = stack.prepare_model(model)  # TorchScript scripts here; Compile compiles at the first step
    except Exception as error:
        if any(m.one_off_cost for m in stack):
            raise failures.CompileFailed(str(error)) from error
        raise
    return prepared, stack.prepare_optimizer(optimizer)  # fused kernels, fp32 master weights


def _metrics(clock: StepClock, built: SetUp, prepare_model_s: float, import_wait_s: float, tested: int,
             for_accuracy: bool, not_for_accuracy: str | None) -> dict[str, Any]:
    """The trial's metrics: the clock's, the time outside its windows, what it evaluated, the stack's own, and why
    accuracy was not measured where it was not."""
    from ablate.workload import evaluation

    task = built.task
    metrics: dict[str, Any] = clock.summary()  # floats, and below the accuracy note (a str)
    metrics[metric.PREPARE_MODEL_S] = prepare_model_s
    metrics[metric.IMPORT_WAIT_S] = import_wait_s  # before a measured stretch, while the study stopped the imports
    metrics[metric.DATA_LOAD_S] = built.data_load_s
    if for_accuracy:  # what it evaluated, of how many, and so the sampling error every surface can state
        metrics.update({metric.TEST_SAMPLES: float(tested), metric.TEST_SPLIT_SAMPLES: float(len(built.splits.test)),
                        **({metric.TEST_SAMPLING_ERROR: evaluation.sampling_error(tested, task.predictions_per_sample)}
                           if task.has_accuracy else {})})
    metrics[metric.SETUP_S] = clock.started_at - built.began - built.data_load_s  # the data every trial loads left out
    metrics[metric.ONE_OFF_S] = prepare_model_s + metrics[metric.FIRST_STEP_S] + metrics[metric.EARLY_STEPS_EXCESS_S]
    if metric.TIME_TO_TARGET_E2E_S in metrics:
        metrics[metric.TIME_TO_TARGET_E2E_S] += prepare_model_s
    metrics.update(built.stack.metrics())
    metrics.update(_utilisation(metrics, built))
    if not_for_accuracy:
        metrics[metric.ACCURACY_NOT_MEASURED] = not_for_accuracy  # a note, not a number: the runner takes it out
    elif not task.has_accuracy:
        metrics[metric.ACCURACY_NOT_MEASURED] = (f"task {task.name} is a loss function, with no accuracy: its held-out "
                                          "loss is recorded (test_loss), and accuracy parity is not judged")
    return metrics


def _utilisation(metrics: dict[str, Any], built: SetUp) -> dict[str, float]:
    """The model FLOPs utilisation at the measured throughput, for a token model on CUDA that counts its FLOPs; else
    nothing."""
    import torch

    from ablate.trial.mfu import utilisation

    flops_per_token = getattr(built.model, "flops_per_token", None)
    if built.task.unit != "tokens" or not callable(flops_per_token) or built.device.type != "cuda":
        return {}
    mfu = utilisation(metrics[metric.THROUGHPUT], flops_per_token(), torch.cuda.get_device_name(built.device))
    return {} if mfu is None else {metric.MFU: mfu}


def cudagraph_fallback(stack_metrics: dict[str, float]) -> str | None:
    """Why a trial on CUDA must fail when a graph-capturing strategy (CUDAGraphs, or Compile in a CUDA-graph mode)
    reports graphs torch.compile ran without CUDA graphs: its timing would be of the eager fallback. Inductor's
    `cudagraph_or_error`, which both strategies set, makes such a fallback raise where the running PyTorch has it;
    this catches it where it does not. (On a CPU, Inductor counts every graph of a CUDA-graph mode as a skip.)"""
    suffix = f".{metric.CUDAGRAPH_SKIPS}"
    skipped = [f"{int(v)} graph(s) of {k.removesuffix(suffix)}" for k, v in stack_metrics.items()
               if k.endswith(suffix) and v]
    if not skipped:
        return None
    return (f"skipping cudagraphs: torch.compile ran {', '.join(skipped)} without CUDA graphs, so the timing would "
            "not be of CUDA graphs")


def _optimizer(study: Study, model: Any) -> Any:
    import torch

    if study.baseline.optimizer == "sgd":
        return torch.optim.SGD(model.parameters(), lr=study.baseline.lr, momentum=0.9)
    return torch.optim.Adam(model.parameters(), lr=study.baseline.lr)


def serve(conn: Any, target: Callable[[TrialSpec], dict[str, Any]], spec: TrialSpec, launched: float) -> None:
    """Run `target(spec)` in this interpreter (prepared by ablate.trial.interpreters), talking to the study over
    `conn`."""
    # perf_counter is CLOCK_MONOTONIC on Linux, shared by every process: launch (the job sent) to its arrival.
    process_start_s = time.perf_counter() - launched
    # A spawned child inherits "spawn" as its default start method, so its
    # DataLoader workers would start as new interpreters (seconds each time on
    # the reference machine) instead of the platform default a user's own
    # script gets (fork on Linux up to Python 3.13). Measure what users get.
    mp.set_start_method(None, force=True)
    cache = compile_cache.Use(spec.compile_cache)
    global _channel
    _channel = Channel(conn)
    marks = _channel.marks
    try:
        metrics = target(spec)
        metrics[metric.PROCESS_START_S] = process_start_s
        if "first_batch" in marks:
            metrics[metric.STARTUP_S] = marks["first_batch"] - launched  # launch to the first batch, minus nothing
        metrics[metric.TIMELINE] = {metric.Mark.LAUNCHED: launched,
                                    **{k: v for k, v in marks.items() if k != "first_batch"}}
        if spec.compile_cache:  # Inductor's own count decides warm or cold
            hits, misses = compile_cache.lookups()
            metrics[metric.COMPILE_CACHE_WARM] = float(compile_cache.warm(hits, misses))
            metrics[metric.COMPILE_CACHE_HITS], metrics[metric.COMPILE_CACHE_MISSES] = float(hits), float(misses)
        conn.send(("ok", metrics))
    except BaseException as error:  # everything goes back to the parent as data
        conn.send(("error", failures.describe(error), traceback.format_exc()))
    finally:
        conn.close()
        cache.done()  # a fresh folder is removed; a shared one stays for the graph's siblings


def run_in_fresh_process(spec: TrialSpec, target: Callable[[TrialSpec], dict[str, Any]] = run,
                         on_phase: Callable[[str], None] = _no_phase,
                         interpreters: Interpreters | None = None) -> dict[str, Any]:
    """Run `target(spec)` (by default: train and measure) in a fresh interpreter; `on_phase` hears what it does.

    The interpreter comes from `interpreters` (started ahead, see ablate.trial.interpreters), or is started now.
    The metrics carry the trial's timeline under `metrics.TIMELINE` (not a number: the caller takes it out).
    Raises `TrialFailed` with a one-line reason (see `ablate.trial.failures`) when the
    trial raised, died, or ran past the study's `trial_timeout_s`. However the
    caller is interrupted (Ctrl-C, SIGTERM), the trial process does not outlive it.
    """
    pool = interpreters or Interpreters()
    limit = spec.study.budget.trial_timeout_s
    deadline = None if limit is None else time.monotonic() + limit
    interpreter = None
    handed_from = pool.last_exit  # the previous trial's exit: the study's bookkeeping between them is a hand-off
    launched = time.perf_counter()  # waiting for an interpreter to finish importing is start-up too
    try:
        if not pool.ahead or pool.ahead[0].importing:
            on_phase("starting (a new interpreter imports torch)")
        interpreter = pool.take(deadline)
        pool.refill()  # for the next trials, importing through this one's start-up (stopped while it measures)
        interpreter.conn.send((serve, target, spec, launched))
        message = _converse(interpreter, pool, deadline, on_phase)
        interpreter.finish()
    except BaseException as error:
        if interpreter is not None:
            interpreter.stop()  # however the caller is interrupted, the trial does not outlive it
        if isinstance(error, (TimeoutError, _Timeout)):
            raise TrialFailed(f"timeout: the trial ran past the study's limit of {limit:g} s "
                              "(budget.trial_timeout_s) and was killed") from None
        if isinstance(error, Died):
            raise TrialFailed(str(error)) from None
        raise
    finally:
        pool.last_exit = time.perf_counter()  # its process is gone (joined, or stopped)
        pool.resume()  # a trial that died while measuring never said so
        if interpreters is None:
            pool.close()
    if message is None:
        raise TrialFailed(death(interpreter.process.exitcode))
    if message[0] == "ok":
        timeline = message[1].setdefault(metric.TIMELINE, {})
        timeline.update({metric.Mark.IMPORTS: pool.drain_imports(), metric.Mark.EXITED: pool.last_exit})
        if handed_from is not None:
            timeline[metric.Mark.HAND_OFF] = [handed_from, launched]
        return message[1]
    raise TrialFailed(message[1])


class _Timeout(Exception):
    pass


def _converse(interpreter: Any, pool: Interpreters, deadline: float | None,
              on_phase: Callable[[str], None]) -> tuple | None:
    """Answer the trial until it sends its result (returned), or None when it died."""
    conn = interpreter.conn
    while True:
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            if not conn.poll(left):  # True on a message, and on EOF when the process died
                raise _Timeout
            message = conn.recv()
        except EOFError:  # the process died, perhaps after saying what it was doing
            return None
        if message[0] == "phase":
            on_phase(message[1])
        elif message[0] == "measuring":
            conn.send(("go", pool.pause()))
        elif message[0] == "quiet":
            pool.refill()
        else:
            return message
