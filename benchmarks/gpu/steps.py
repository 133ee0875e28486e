"""What `make gpu` runs, in which command, and for how long: the steps and the arithmetic of a lease.

A lent GPU machine allows 30 minutes in all and stops a command at 10 (`COMMAND_S`), and every step has been
slower than planned the first time, so each part is one command and each step has its own time limit.

The arithmetic of one part's command (`python -m benchmarks.gpu --dry-run` prints it with the figures):
- The command is to end by `COMMAND_END_S` (540 s), 60 s before the machine stops it. bash's SECONDS counts
  from the command's start, so the install, unpack and import check before the steps come out of the part's
  budget: the device command passes `--budget-s $((540 - SECONDS))`. The shares below are planned for a set-up
  of `SETUP_PLANNED_S` (60 s; a warm machine reinstalls nothing and takes seconds).
- Of the budget, `END_RESERVE_S` is kept for the last summary and tarball; the rest is shared among the steps in
  proportion to their shares (`limits`), and time a step leaves unused goes to the next.
- A step's limit bounds it whole: it is stopped (SIGTERM, then SIGKILL after `STOP_GRACE_S`) at its limit less
  its stop reserve (`stop_reserve`: the grace, and for a study `REPORT_RESERVE_S` more, to rebuild its report
  from what finished), and no limit runs past the part's deadline. So a part ends within its budget even when
  its last step is a study that must be stopped, killed and reported.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
COMMAND_S = 600  # a lent machine stops a command at 10 minutes
COMMAND_END_S = 540  # by bash's SECONDS: a part ends by then, with a minute to spare
SETUP_PLANNED_S = 60  # install, unpack and import check on a fresh machine (est. 30-70 s): the shares assume this
END_RESERVE_S = 10  # of a part's budget: the last summary.md and tarball, after the last step
STOP_GRACE_S = 20  # SIGTERM, then this long for the step to record what finished, then SIGKILL
REPORT_RESERVE_S = 30  # after a study was stopped: to rebuild its report from what it finished
MIN_STEP_S = 15  # a step that would have less than this before its SIGTERM is not started
PLANNED_STEPS_S = COMMAND_END_S - SETUP_PLANNED_S - END_RESERVE_S  # each part's shares add up to this


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
            # Two profiling-window pairs, not the CPU's seven: 14 more fresh processes do not fit the step's 80 s.
            # Two give the GPU's idle share and phases; every catalogue and study trial records its own as well.
            return [py, "-m", "benchmarks", "--device", "cuda", "--no-grid", "--profile-pairs", "2",
                    "--results", str(scratch / "bench"), "--output", str(scratch / "bench" / "RESULTS.md")]
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


# Estimates (no GPU has run them yet): gpu-tests 60-120 s; the catalogue 180-250 s; resnet's 24 trials 100-150 s;
# the bench 50-90 s; transformers 150-250 s (6 cold compiles). Part 2 is the tight one.
STEPS = {step.name: step for step in (
    Step("gpu-tests", 150, "the GPU-marked tests (pytest -m gpu)"),
    Step("catalogue", 320, "every strategy and preset alone on the MNIST CNN, one measurement each (no trial may "
                           "fail; a skip must say why)", _study("catalogue"), ("--single-pass",)),
    Step("resnet", 180, "ResNet-18 (CIFAR-10 shape) under bf16/fp16 AMP, channels_last and device-resident data, "
                        "2 full blocks",
         _study("resnet_amp_channels_last")),
    Step("bench", 80, "the GPU part of `make bench` (framework overhead, trial start-up, noise)"),
    Step("transformers", 210, "every transformer strategy alone on a byte-level GPT, fp32 and bf16 autocast: float8, "
                              "compiled optimizer, activation checkpointing, compile (whole and regional), each "
                              "attention kernel", _study("transformers"), ("--single-pass",)),
    # By name only: each needs a command of its own.
    Step("mnist_cnn", PLANNED_STEPS_S, "the full mnist_cnn study on CUDA", "mnist_cnn"),
    Step("gpt_kjv", PLANNED_STEPS_S, "gpt_kjv as a guided search of 24 trials", "gpt_kjv",
         ("--search", "optuna", "--trials", "24")),
)}
PARTS = {1: ("gpu-tests", "catalogue"), 2: ("resnet", "bench", "transformers")}


def limits(names: list[str], steps_s: float, steps: dict[str, Step] = STEPS) -> dict[str, float]:
    """Each step's time limit: `steps_s` shared among the named steps in proportion to their shares."""
    scale = steps_s / sum(steps[n].limit_s for n in names)
    return {n: steps[n].limit_s * scale for n in names}


def stop_reserve(step: Step, grace_s: float = STOP_GRACE_S, report_s: float = REPORT_RESERVE_S) -> float:
    """What a step's limit keeps after its SIGTERM: the grace before SIGKILL, and a study's report rebuild."""
    return grace_s + (report_s if step.study else 0)
