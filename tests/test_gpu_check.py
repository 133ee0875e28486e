"""`make gpu` (benchmarks/gpu): what it refuses without a GPU, and how it judges the catalogue's results."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from benchmarks.gpu.__main__ import NO_GPU, catalogue_problems

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA device")
def test_without_a_gpu_it_exits_at_once_with_one_line(tmp_path):
    done = subprocess.run([sys.executable, "-m", "benchmarks.gpu", "--out", str(tmp_path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == NO_GPU
    assert done.stdout == "" and len(done.stderr.strip().splitlines()) == 1 and "no CUDA device" in done.stderr
    assert not any(tmp_path.iterdir())


def test_a_failed_trial_or_a_skip_without_reason_is_a_problem(tmp_path):
    table = tmp_path / "grid-cuda.csv"
    table.write_text("trial,combination,state,reason\n0,baseline,complete,\n1,tf32,skipped,TF32: needs 8.0\n"
                     "2,compile,failed,compile: boom\n3,amp,skipped,\n")
    assert catalogue_problems(table) == ["compile failed: compile: boom", "amp was skipped without a reason"]
    assert catalogue_problems(tmp_path / "missing.csv") == [f"no results table at {tmp_path / 'missing.csv'}"]


def test_steps_can_be_run_one_at_a_time_and_an_unknown_one_is_refused(tmp_path):
    from benchmarks.gpu.__main__ import STEPS, _steps

    assert tuple(name for name, _ in _steps(tmp_path)) == STEPS and "gpt_kjv" in STEPS
    done = subprocess.run([sys.executable, "-m", "benchmarks.gpu", "--steps", "gpt-kjv"], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 2 and "unknown step gpt-kjv; choose from gpu-tests" in done.stderr
