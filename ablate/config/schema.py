"""What a study is: its model and data, a baseline loop, a search space, a measurement budget and a protocol, as
frozen types; and the one combination it makes of its choices' labels (`Study.combination`).

The types are apart from the reading of a study file (`ablate.config.study`: YAML, every check, one-line
errors), which most modules never need: a trial, a store or a report holds a `Study` and reads its fields.
A study hands its choices to `ablate.config.choices`, which knows no study, so the two import one way.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from ablate.config.choices import Combination, Option
from ablate.config.design import ProtocolSettings
from ablate.workload import tasks
from ablate.workload.registry import lookup
from ablate.workload.tasks import Task

# A timed window's least duration by device type, where the study file does not set budget.min_window_seconds. On
# CUDA the clock synchronises at each window's ends only, so a window of a few milliseconds carries a launch's and
# a synchronisation's latency and any 0.1-0.5 ms hiccup as a percent-sized error; half a second makes them
# per-mille. None on a CPU, whose windows already last seconds (and whose measurements must not change).
MIN_WINDOW_S = {"cuda": 0.5}
ACCELERATOR_TEST_BATCH = 1_000  # evaluation's batch size on an accelerator, where the study sets none


@dataclass(frozen=True)
class Budget:
    train_samples: int = 60_000  # trained before test accuracy is measured
    warmup_samples: int = 1_280  # untimed, after the first (compiling) step
    window_samples: int = 1_280  # samples per timed window
    # A window also closes at the first step boundary this long after it opened, so that a combination many times
    # slower than the rest (bf16 on a CPU that emulates it) costs seconds, not minutes; null: samples only.
    window_seconds: float | None = 5.0
    # A window also stays open, by whole steps, until this long has passed: a window of milliseconds (a small model's
    # few steps on a fast GPU) is moved several percent by a 0.1-0.5 ms hiccup. null: the device's default
    # (MIN_WINDOW_S: half a second on CUDA, none on a CPU); 0: none. Never more than window_seconds.
    min_window_seconds: float | None = None
    windows: int = 3
    # After the timed windows (and any training for accuracy), a profiling window times where a step's time goes
    # (ablate.trial.phases): at least profile_steps steps and profile_seconds, closed like a window by window_seconds.
    # profile_steps 0: no profiling window.
    profile_steps: int = 20
    profile_seconds: float = 1.0
    # The batch size of evaluation; null: the device's (`test_batch`).
    test_batch_size: int | None = None
    train_subset: int | None = None  # first N training images only (tests)
    test_subset: int | None = None
    seed: int = 0
    target_accuracy: float | None = None  # percent; time-to-accuracy is recorded when set
    target_loss: float | None = None  # held-out mean loss; time-to-target for a task without accuracy (or by choice)
    eval_every_samples: int | None = None  # test-set evaluations while training for accuracy (untimed)
    eval_samples: int | str | None = None  # test samples an evaluation reads, or full; null: sized to the tolerance
    trial_timeout_s: float | None = None  # a trial still running after this is killed and recorded as failed
    loader_timeout_s: float = 120.0  # a DataLoader worker that delivers no batch for this long fails the trial
    # True: throughput only. Every trial times its windows and stops; none trains for accuracy or evaluates, and the
    # table says accuracy was not measured (as it does for stand-in data).
    throughput_only: bool = False

    def test_batch(self, device_type: str, train_batch: int) -> int:
        """Evaluation's batch size: the study's `test_batch_size`, else on a CPU the baseline's training batch
        (`train_batch`), else `ACCELERATOR_TEST_BATCH`.

        Why a CPU evaluates at the training batch: a forward's activations grow with its batch, and glibc's malloc maps
        any block above its mmap threshold (at most 32 MiB on 64-bit Linux) afresh at each allocation and unmaps it at
        its free, so each such forward pays the kernel's zeroing of every page it touches. A convolution's output at a
        thousand images is that large; at the batch the study trains with, the heap hands the same blocks back, and
        the training has shown those forwards fit. Every group evaluates at the same batch, so a paired difference
        compares the same arithmetic. The logits' own budget (`ablate.workload.tasks.eval_budget`) still applies.
        An accelerator's caching allocator keeps its blocks, and its kernels want rows.
        """
        if self.test_batch_size is not None:
            return self.test_batch_size
        return train_batch if device_type == "cpu" else ACCELERATOR_TEST_BATCH

    def window_floor_s(self, device_type: str) -> float:
        """How long a timed window stays open at least on `device_type` (0: no floor); the cap wins over it."""
        floor = MIN_WINDOW_S.get(device_type, 0.0) if self.min_window_seconds is None else self.min_window_seconds
        return floor if self.window_seconds is None else min(floor, self.window_seconds)

    def describe_windows(self, device_type: str = "cpu") -> str:
        """The timed windows in words, for reports."""
        cap = "" if self.window_seconds is None else f" (or of the steps that end once {self.window_seconds:g} s " \
            "have passed, if sooner)"
        floor = self.window_floor_s(device_type)
        at_least = f", each lasting at least {floor:g} s (extended by whole steps)" if floor else ""
        return (f"{self.windows} timed windows of {self.window_samples:,}{cap}{at_least} after "
                f"{self.warmup_samples:,} warm-up ones")


@dataclass(frozen=True)
class Baseline:
    batch_size: int = 64
    optimizer: str = "adam"
    lr: float = 1e-3
    max_grad_norm: float | None = None


@dataclass(frozen=True)
class Study:
    name: str
    path: Path
    description: str
    model: str
    dataset: str
    baseline: Baseline
    space: tuple[tuple[str, tuple[Option, ...]], ...]  # dimension -> options
    budget: Budget
    accuracy_tolerance: float
    file_hash: str
    protocol: ProtocolSettings = ProtocolSettings()
    task_name: str = "classification"
    task_options: tuple[tuple[str, Any], ...] = ()
    model_options: tuple[tuple[str, Any], ...] = ()
    dataset_options: tuple[tuple[str, Any], ...] = ()
    tokenizer: str | None = None  # an hf: model's own tokenizer (folder or hub id) for text; None: bytes as ids
    data_note: str | None = None  # how text reaches an hf: model (tokens or bytes), said when a run starts
    seed_pinned: bool = False  # the study file sets budget.seed: every run uses it (else each run draws its own)

    @property
    def task(self) -> Task:
        return tasks.build(self.task_name, dict(self.task_options))

    @property
    def throughput_unit(self) -> str:
        """What throughput counts: "samples" (per second), or "tokens" for a language model."""
        return self.task.unit

    @property
    def dataset_kwargs(self) -> dict[str, Any]:
        """What `ablate.workload.data.load` passes to the dataset: its options, and a text dataset's window, the
        seq_len."""
        from ablate.workload.data import TEXT_DATASETS

        if self.dataset not in TEXT_DATASETS:
            return dict(self.dataset_options)
        tokenizer = {"tokenizer": self.tokenizer} if self.tokenizer else {}
        return {**dict(self.dataset_options), "seq_len": self.task.units_per_sample, **tokenizer}

    @property
    def dimensions(self) -> dict[str, tuple[Option, ...]]:
        return dict(self.space)

    def options(self, dim: str) -> dict[str, Option]:
        """A dimension's options by label."""
        return {o.label: o for o in self.dimensions.get(dim, ())}

    @property
    def choices(self) -> dict[str, dict[str, Option]]:
        """Every dimension's options by label, in the study's dimension order: what a grid walks and a trial
        suggests (`ablate.config.choices.grid`)."""
        return {dim: self.options(dim) for dim, _ in self.space}

    def combination(self, labels: Mapping[str, str]) -> Combination:
        """The combination its labels (dimension -> choice label) name. Raises KeyError for a dimension or a label
        the study does not have."""
        return Combination(tuple(dim for dim, _ in self.space),
                           tuple(self.options(dim)[labels[dim]] for dim, _ in self.space))

    @property
    def size(self) -> int:
        n = 1
        for _, options in self.space:
            n *= len(options)
        return n


def model_kwargs(study: Study) -> dict[str, Any]:
    """The model constructor's arguments: the study's model_options, and the task's seq_len where it takes one."""
    from ablate.workload.models import MODELS

    kwargs = dict(study.model_options)
    if "seq_len" in inspect.signature(lookup(MODELS, study.model, "model")).parameters:
        kwargs["seq_len"] = study.task.units_per_sample
    return kwargs
