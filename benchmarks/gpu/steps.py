"""What `make gpu` runs, in which command, and for how long.

A lent GPU machine allows 30 minutes in all and 10 a command, and every step has been slower than planned the
first time, so each step has its own time limit and the two default commands fit 9 minutes each (18 in all,
with a minute per command left for installing the wheels). A step that reaches its limit is stopped cleanly
(SIGTERM: a study records what finished) and its partial results are kept.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
COMMAND_LIMIT_S = 9 * 60  # a lent machine stops a command at 10 minutes; one is left for the set-up


@dataclass(frozen=True)
class Step:
    name: str
    limit_s: int  # the step's share of its command's budget
    what: str
    study: str | None = None  # an `ablate run` step: the study (name or file), whose results are summarised
    ablate_args: tuple[str, ...] = ()

    def command(self, scratch: Path) -> list[str]:
        py = sys.executable
        if self.name == "gpu-tests":
            return [py, "-m", "pytest", "-q", "-m", "gpu", "-p", "no:cacheprovider", "tests"]
        if self.name == "bench":
            return [py, "-m", "benchmarks", "--device", "cuda", "--no-grid", "--results", str(scratch / "bench"),
                    "--output", str(scratch / "bench" / "RESULTS.md")]
        assert self.study is not None
        return [py, "-m", "ablate", "run", self.study, "--device", "cuda", "--results", str(self.results(scratch)),
                *self.ablate_args]

    def report_command(self, scratch: Path) -> list[str]:
        """Rebuilds the report from what a stopped study finished."""
        search = "optuna" if "optuna" in self.ablate_args else "grid"
        return [sys.executable, "-m", "ablate", "report", str(self.study), "--device", "cuda", "--search", search,
                "--results", str(self.results(scratch))]

    def results(self, scratch: Path) -> Path:
        return scratch / "results" / self.name


def _study(name: str) -> str:
    return str(HERE / f"{name}.yaml")


STEPS = {step.name: step for step in (
    Step("gpu-tests", 180, "the GPU-marked tests (pytest -m gpu)"),
    Step("catalogue", 330, "every strategy and preset alone on the MNIST CNN, one measurement each (no trial may "
                           "fail; a skip must say why)", _study("catalogue"), ("--single-pass",)),
    Step("resnet", 150, "ResNet-18 (CIFAR-10 shape) under bf16/fp16 AMP, channels_last and device-resident data, "
                        "2 full blocks",
         _study("resnet_amp_channels_last")),
    Step("bench", 120, "the GPU part of `make bench` (framework overhead, trial start-up, noise)"),
    Step("transformers", 240, "every transformer strategy alone on a byte-level GPT, fp32 and bf16 autocast: float8, "
                              "compiled optimizer, activation checkpointing, compile (whole and regional), each "
                              "attention kernel", _study("transformers"), ("--single-pass",)),
    # By name only: each needs a command of its own.
    Step("mnist_cnn", COMMAND_LIMIT_S, "the full mnist_cnn study on CUDA", "mnist_cnn"),
    Step("gpt_kjv", COMMAND_LIMIT_S, "gpt_kjv as a guided search of 24 trials", "gpt_kjv",
         ("--search", "optuna", "--trials", "24")),
)}
PARTS = {1: ("gpu-tests", "catalogue"), 2: ("resnet", "bench", "transformers")}


def limits(names: list[str], budget_s: float, steps: dict[str, Step] = STEPS) -> dict[str, float]:
    """Each step's time limit: its share, scaled down so that the named steps fit `budget_s` together."""
    scale = min(1.0, budget_s / sum(steps[n].limit_s for n in names))
    return {n: steps[n].limit_s * scale for n in names}
