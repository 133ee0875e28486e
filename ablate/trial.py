"""One trial: one combination of strategies, trained and measured in a fresh process.

A fresh process per trial keeps process-global state (compile caches in
memory, cuDNN/TF32 flags, allocator state, a crash) from leaking between
trials. Each trial is a new interpreter (multiprocessing's "spawn"), so it
also gets its own randomized address-space layout. Measured on a 2-core Xeon:
trials forked from one forkserver share its layout, and a combination's bf16
throughput then sat at one of two levels about 20% apart for a whole run -
consistently within the run, differently in the next - so repeats within a
run could not see it and two runs disagreed far outside their intervals
("layout luck": Mytkowicz et al., ASPLOS 2009; Curtsinger & Berger's
Stabilizer). With a fresh layout per trial that variation is between
processes, where the blocks measure it. The price is `import torch` in every
trial (about 3.6 s on that machine), outside the timed windows.
"""
from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import shutil
import signal
import tempfile
import time
import traceback
from dataclasses import dataclass
from functools import cache
from typing import Any, Callable, Iterator

from ablate import failures
from ablate.noise import trial_output_to_log_file
from ablate.study import Option, Study

STOP_GRACE_S = 5.0
ACCURACY_NOT_MEASURED = "accuracy_not_measured"
BASELINE_FP32 = "ieee"  # strict IEEE fp32 matmuls and convolutions unless the TF32 strategy is on


def _no_phase(text: str) -> None:
    pass


_phase: Callable[[str], None] = _no_phase  # in a trial process: sends what it is doing to the study's progress line


def phase(text: str) -> None:
    """Tell the study what this trial is doing now (a no-op outside a trial process)."""
    _phase(text)


class TrialFailed(RuntimeError):
    """A trial raised or its process died; the message says which and why."""


@dataclass(frozen=True)
class TrialSpec:
    study: Study
    options: tuple[Option, ...]
    device: str
    train_for_accuracy: bool


def run(spec: TrialSpec) -> dict[str, Any]:
    """Train and measure `spec` in this process; returns metrics (floats)."""
    import torch
    from torch.utils.data import DataLoader

    from ablate import data
    from ablate.failures import CompileFailed
    from ablate.machine import resolve
    from ablate.measure import StepClock
    from ablate.mfu import utilisation
    from ablate.models import MODELS
    from ablate.study import model_kwargs
    from ablate.registry import lookup
    from ablate.train import evaluate, train
    from strategies import compose, set_fp32_precision

    began = time.perf_counter()
    study, budget, device = spec.study, spec.study.budget, resolve(spec.device)
    if device.type == "cuda":
        # The current device too, not only the tensors': pinned-memory threads, capability queries,
        # CUDA-graph pools and any library that asks "the" device then use the trial's, never cuda:0.
        torch.cuda.set_device(device)
    phase("loading data")
    stack = compose(*(s for s in (o.build() for o in spec.options) if s is not None))
    task = study.task
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
    flops_per_token = getattr(model, "flops_per_token", None)
    optimizer = _optimizer(study, model)
    started = time.perf_counter()
    try:
        prepared = stack.prepare_model(model)  # TorchScript scripts here; Compile is lazy and compiles at the first step
    except Exception as error:
        if any(m.one_off_cost for m in stack):
            raise CompileFailed(str(error)) from error
        raise
    optimizer = stack.prepare_optimizer(optimizer)  # fused kernels, fp32 master weights
    prepare_model_s = time.perf_counter() - started
    test = DataLoader(splits.test, batch_size=budget.test_batch_size)
    # Stand-in data (random labels) has no accuracy worth training for: time the windows only.
    for_accuracy = spec.train_for_accuracy and splits.throughput_only is None
    # The unwrapped model: it shares the weights, and a compiled wrapper would recompile for eval mode.
    clock = StepClock(budget, device, for_accuracy,
                      evaluate=(lambda: evaluate(task, model, test, device)) if for_accuracy else None,
                      units_per_sample=task.units_per_sample, on_phase=phase)
    train(stack, task, prepared, optimizer, loader, device, clock, study.baseline.max_grad_norm)
    clock.evaluate_now()  # after the budget (reused when the last periodic evaluation was at this point)
    if stack.metrics().get("cuda_graphs.cudagraph_skips"):  # a PyTorch without cudagraph_or_error fell back
        raise CompileFailed("skipping cudagraphs: torch.compile ran some graphs without CUDA graphs, so the timing "
                            "would not be of CUDA graphs")
    metrics = clock.summary()
    metrics["prepare_model_s"] = prepare_model_s
    metrics["data_load_s"] = data_load_s
    metrics["test_samples"] = float(len(splits.test))  # the n of accuracy parity's paired binomial error
    # Start-up inside the process, up to the first training step, without the data every trial must load.
    metrics["setup_s"] = clock.started_at - began - data_load_s
    # Compilation, scripting, worker start-up, and what steps 2-3 took beyond steady speed (CUDA-graph recording,
    # TorchScript's optimisation).
    metrics["one_off_s"] = prepare_model_s + metrics["first_step_s"] + metrics["early_steps_excess_s"]
    if "time_to_target_e2e_s" in metrics:
        metrics["time_to_target_e2e_s"] += prepare_model_s
    metrics.update(stack.metrics())
    if task.unit == "tokens" and callable(flops_per_token) and device.type == "cuda":
        mfu = utilisation(metrics["throughput"], flops_per_token(), torch.cuda.get_device_name(device))
        if mfu is not None:
            metrics["mfu"] = mfu
    if splits.throughput_only:
        metrics[ACCURACY_NOT_MEASURED] = splits.throughput_only  # a note, not a number: the runner takes it out
    elif not task.has_accuracy:
        metrics[ACCURACY_NOT_MEASURED] = (f"task {task.name} is a loss function, with no accuracy: its held-out "
                                          "loss is recorded (test_loss), and accuracy parity is not judged")
    return metrics


def _optimizer(study: Study, model: Any) -> Any:
    import torch

    if study.baseline.optimizer == "sgd":
        return torch.optim.SGD(model.parameters(), lr=study.baseline.lr, momentum=0.9)
    return torch.optim.Adam(model.parameters(), lr=study.baseline.lr)


@cache
def _context() -> mp.context.BaseContext:
    return mp.get_context("spawn")  # a fresh interpreter and address-space layout per trial (see the top)


def _child(target: Callable[[TrialSpec], dict[str, Any]], spec: TrialSpec, conn: Any, launched: float) -> None:
    # perf_counter is CLOCK_MONOTONIC on Linux, shared by every process, so this
    # is the time from the parent's launch to the child's first line.
    process_start_s = time.perf_counter() - launched
    # A spawned child inherits "spawn" as its default start method, so its
    # DataLoader workers would start as new interpreters (seconds each time on
    # the reference machine) instead of the platform default a user's own
    # script gets (fork on Linux up to Python 3.13). Measure what users get.
    mp.set_start_method(None, force=True)
    trial_output_to_log_file()
    cache = _cold_compile_cache()
    global _phase
    _phase = lambda text: conn.send(("phase", text))  # noqa: E731 - a few microseconds, at phase changes only
    try:
        metrics = target(spec)
        metrics["process_start_s"] = process_start_s
        conn.send(("ok", metrics))
    except BaseException as error:  # noqa: BLE001 - everything goes back to the parent as data
        conn.send(("error", failures.describe(error), traceback.format_exc()))
    finally:
        conn.close()
        shutil.rmtree(cache, ignore_errors=True)  # a killed trial leaves it in the temp folder


def _cold_compile_cache() -> str:
    """Inductor's and Triton's on-disk caches in a new empty folder (returned), for this trial process only.

    So a compiled combination never reuses code compiled by an earlier trial, and cannot get faster only by
    running later in the study (the order of measurements is random per block; see ablate.protocol).
    """
    cache = tempfile.mkdtemp(prefix="ablate-compile-cache-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
    os.environ["TRITON_CACHE_DIR"] = os.path.join(cache, "triton")
    return cache


def run_in_fresh_process(spec: TrialSpec, target: Callable[[TrialSpec], dict[str, Any]] = run,
                         on_phase: Callable[[str], None] = _no_phase) -> dict[str, Any]:
    """Run `target(spec)` (by default: train and measure) in a new process; `on_phase` hears what it is doing.

    Raises `TrialFailed` with a one-line reason (see `ablate.failures`) when the
    trial raised, died, or ran past the study's `trial_timeout_s`. However the
    caller is interrupted (Ctrl-C, SIGTERM), the trial process does not outlive it.
    """
    ctx = _context()
    parent_end, child_end = ctx.Pipe(duplex=False)
    process = ctx.Process(target=_child, args=(target, spec, child_end, time.perf_counter()), name="ablate-trial")
    limit = spec.study.budget.trial_timeout_s
    message = None
    try:
        with _ctrl_c_blocked():  # the child inherits the blocked signal: Ctrl-C is this process's to handle
            process.start()  # inside the try: an interrupt while it starts must still stop it
        child_end.close()
        on_phase("starting (a new interpreter imports torch)")
        deadline = None if limit is None else time.monotonic() + limit
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not parent_end.poll(left):  # True on a message, and on EOF when the process died
                _stop(process)
                raise TrialFailed(f"timeout: the trial ran past the study's limit of {limit:g} s "
                                  "(budget.trial_timeout_s) and was killed")
            message = parent_end.recv()
            if message[0] != "phase":
                break
            on_phase(message[1])
    except EOFError:  # the process died, perhaps after saying what it was doing
        message = None
    except BaseException:
        _stop(process)
        raise
    finally:
        if process.pid is not None:  # started
            process.join()
        parent_end.close()
    if message is None:
        raise TrialFailed(_death(process.exitcode))
    if message[0] == "ok":
        return message[1]
    raise TrialFailed(message[1])


@contextlib.contextmanager
def _ctrl_c_blocked() -> Iterator[None]:
    """SIGINT blocked while the trial process starts, so the new interpreter starts with it blocked.

    A terminal's Ctrl-C reaches the whole process group; a trial that got it would print its own traceback
    (often from inside `import torch`) beside the study's one line. The study stops its trial itself
    (`_stop`); a Ctrl-C that comes meanwhile is delivered here when the block is lifted.
    """
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _stop(process: mp.process.BaseProcess) -> None:
    """SIGTERM, then SIGKILL if it is still alive after a grace period."""
    if process.is_alive():
        process.terminate()
        process.join(STOP_GRACE_S)
    if process.is_alive():
        process.kill()
        process.join()


def _death(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        name = signal.Signals(-exitcode).name
        hint = " (the kernel's out-of-memory killer sends it when memory runs out)" if name == "SIGKILL" else ""
        return f"killed: the trial process was killed by {name}{hint}"
    return f"crashed: the trial process exited with status {exitcode} without sending a result"
