"""The studies `make gpu` runs, read on a CPU: windows long enough to measure, the rows the review asked for, and
throughput-only files that train no accuracy. (No GPU needed: these load the study files only.)"""
from __future__ import annotations

from pathlib import Path

import pytest

from ablate.config import study as studies
from ablate.config.choices import grid
from ablate.config.study import StudyError
from strategies import Compile, Float8

ROOT = Path(__file__).resolve().parents[2]
GPU = ROOT / "benchmarks" / "gpu"

# A step's time at the slow end of each study's rows on an H100, estimated (no GPU has run them): the MNIST CNN at
# batch 64 is launch- and loader-bound, 0.3-2 ms; the byte-level GPT (16 x 256 tokens, 2 layers of 256) about
# 2.5 ms (20 steps in ~50 ms); ResNet-18 at batch 128 on torchvision's loader of generated images about 10 ms,
# the host making every image. Faster rows are held to CUDA's floor by whole steps (ablate.trial.measure).
SLOW_STEP_S = {GPU / "catalogue.yaml": 0.002, ROOT / "ablate" / "studies" / "mnist_cnn_gpu.yaml": 0.002,
               GPU / "transformers.yaml": 0.0025, GPU / "resnet_amp_channels_last.yaml": 0.010}


@pytest.mark.parametrize("path", SLOW_STEP_S, ids=lambda p: p.stem)
def test_each_gpu_window_lasts_about_half_a_second(path):
    # 16 steps of a few ms were 5-50 ms windows, which a 0.1-0.5 ms hiccup moves by 3-15%.
    study = studies.load(str(path), "cuda")
    budget = study.budget
    assert budget.window_floor_s("cuda") == 0.5  # the floor holds every row, the fast ones by extending windows
    steps = budget.window_samples / study.baseline.batch_size
    assert steps * SLOW_STEP_S[path] >= 0.45, f"{steps:.0f} steps of ~{1000 * SLOW_STEP_S[path]:g} ms"
    assert budget.trial_timeout_s is None or budget.trial_timeout_s > 20 * budget.windows * 0.5


def test_float8_is_measured_with_compile_as_well_as_alone():
    # float8 without torch.compile is the configuration its own docstring calls rarely faster.
    study = studies.load(str(GPU / "transformers.yaml"), "cuda")
    options = {label: o for _, opts in study.space for label, o in ((o.label, o) for o in opts)}
    with_compile = [label for label, o in options.items() if {Float8, Compile} <= set(o.kinds)]
    assert with_compile == ["float8_compile"]
    assert any(set(o.kinds) == {Float8} for o in options.values())  # and alone
    by_dim = {dim: {o.label: o for o in opts} for dim, opts in study.space}
    rows = [levels for levels in grid(by_dim) if dict(levels)["technique"] == "float8_compile"]
    assert len(rows) == 2  # fp32 and bf16 autocast
    for levels in rows:
        stack = study.combination(dict(levels)).stack()
        assert [type(m) for m in stack if type(m) in (Float8, Compile)] == [Float8, Compile]  # converted, then compiled


@pytest.mark.parametrize("name", ["transformers", "resnet_amp_channels_last"])
def test_a_file_that_says_throughput_only_trains_no_accuracy(name):
    for device in ("cuda", "cpu"):
        assert studies.load(str(GPU / f"{name}.yaml"), device).budget.throughput_only


def _study_file(tmp_path: Path, budget: str) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(f"model: mnist_cnn\ndataset: mnist\nspace:\n  amp: [off, amp]\nbudget: {budget}\n")
    return path


def test_the_budget_keys_a_gpu_study_uses_load_and_are_checked(tmp_path):
    loaded = studies.load(str(_study_file(tmp_path, "{throughput_only: true, min_window_seconds: 0}")), "cuda")
    assert loaded.budget.throughput_only and loaded.budget.window_floor_s("cuda") == 0.0
    default = studies.load(str(_study_file(tmp_path, "{}")), "cpu").budget
    assert (default.throughput_only, default.window_floor_s("cpu"), default.window_floor_s("cuda")) == (False, 0, 0.5)
    assert "at least" not in default.describe_windows("cpu") and "at least 0.5 s" in default.describe_windows("cuda")
    with pytest.raises(StudyError, match=r"min_window_seconds: 2 s is more than window_seconds \(1 s\)"):
        studies.load(str(_study_file(tmp_path, "{min_window_seconds: 2, window_seconds: 1}")), "cuda")
    with pytest.raises(StudyError, match="throughput_only: expected bool"):
        studies.load(str(_study_file(tmp_path, "{throughput_only: 1}")), "cuda")
