"""A small CNN on MNIST's 28x28 images, for test studies that need a real model, not mnist_cnn's compute; and
tests/studies/tiny.yaml on it (`tiny_study`).

Named by a study file as `model: tiny_mnist:TinyMnistCNN` (trial interpreters inherit the tests' path; an `ablate`
subprocess gets it from `subprocess_env`). What those studies test - the runner, the protocol, the store, the
report, the bitwise check - is the same on any model; mnist_cnn's convolutions cost seconds a trial on a 2-core
CPU, and bf16, emulated where the CPU has none, several times that.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn


class TinyMnistCNN(nn.Module):
    """conv 1->8 3x3 stride 2, relu, conv 8->16 3x3 stride 2, relu, linear -> `num_classes`: about sixty thousand
    multiply-adds a sample (mnist_cnn: about twelve million)."""

    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, 2)
        self.conv2 = nn.Conv2d(8, 16, 3, 2)
        self.fc = nn.Linear(16 * 6 * 6, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.conv2(F.relu(self.conv1(x))))
        return self.fc(torch.flatten(x, 1))  # logits


TINY = Path(__file__).resolve().parents[1] / "studies" / "tiny.yaml"
SUPPORT = str(Path(__file__).resolve().parent)


def tiny_text(profiled: bool = False) -> str:
    """tests/studies/tiny.yaml on `TinyMnistCNN`: the same study - space, budget, protocol, and so the same trials -
    whose trials train in a fraction of mnist_cnn's time (the bf16 ones most: a CPU without bf16 emulates it).

    Without a warm-up trial (`protocol.warm_up_trials: 0`): the tests time nothing. Unless `profiled`, without the
    profiling window (`budget.profile_steps: 0`): a second or more a trial, over the dozen trials of a run, which the
    studies that test no phase need not pay. The session's run (`tiny_study_run`, tests/conftest.py) keeps it:
    tests/end_to_end checks what it stores and says.

    tiny.yaml itself stays as it is: a study stored from it by an older commit (tests/support/before_the_move/)
    resumes only while its hash is the same, and the CLI's bad-input tests quote it."""
    text = TINY.read_text()
    assert text.count("\nmodel: mnist_cnn\n") == 1, "tiny.yaml names its model differently now"
    assert text.count("\nbudget:\n") == 1, "tiny.yaml sets its budget differently now"
    assert text.count("\nprotocol:") == 1, "tiny.yaml sets its protocol differently now"
    text = text.replace("\nmodel: mnist_cnn\n", "\nmodel: tiny_mnist:TinyMnistCNN\n")
    # No warm-up trial (ablate.run.runner): the tests time nothing, and each run would pay a trial more.
    text = re.sub(r"\nprotocol:[^\n]*\n", lambda m: m.group(0) + "  warm_up_trials: 0\n", text, count=1)
    return text if profiled else text.replace("\nbudget:\n", "\nbudget:\n  profile_steps: 0\n")


def tiny_study(folder: Path, profiled: bool = False) -> Path:
    """`tiny_text(profiled)` written to `folder`/tiny.yaml: the study keeps its name, `tiny` (its Optuna study, its
    MLflow experiment, its results folder). An `ablate` subprocess that runs it needs `subprocess_env()`."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "tiny.yaml"
    path.write_text(tiny_text(profiled))
    return path


def subprocess_env(**env: str) -> dict[str, str]:
    """The environment with this folder first on PYTHONPATH (and `env`): `ablate` in a subprocess, and its trial
    interpreters, import `TinyMnistCNN` by the study's `tiny_mnist:TinyMnistCNN`."""
    path = os.pathsep.join(p for p in (SUPPORT, os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path, **env}
