"""`ablate diagnose`: the baseline's breakdown and every strategy's prediction in 100 columns, the study it writes,
bad input refused before anything is measured; and the diagnosis a run prints once its baseline is in."""
from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from in_process import ablate
from messages import one_message

from ablate.cli import main
from ablate.config import study as studies
from ablate.run import baseline_profile
from ablate.run.runner import Runner
from ablate.store.records import Record
from ablate.trial import metrics as metric
from strategies import REGISTRY

ROOT = Path(__file__).resolve().parents[2]  # this checkout's ablate, in the subprocess too
TINY = ROOT / "tests" / "studies" / "tiny.yaml"
WIDTH = 100
# Forced profiles (seconds a step split by share): the set of strategies that clear the bar follows from them.
DATA_BOUND = {"data": 0.6, "copy": 0.0, "forward": 0.15, "backward": 0.15, "optimizer": 0.03, "other": 0.07}
COMPUTE_BOUND = {"data": 0.02, "copy": 0.0, "forward": 0.45, "backward": 0.45, "optimizer": 0.03, "other": 0.05}
ALL_OTHER = {"data": 0.01, "copy": 0.0, "forward": 0.01, "backward": 0.01, "optimizer": 0.01, "other": 0.96}
MATTERS = {"data", "copy", "compute"}  # DATA_BOUND's phases of a share worth removing (forward + backward: compute)


def _metrics(shares: dict[str, float], step_s: float = 0.04) -> dict[str, float]:
    """A baseline trial's metrics with the profile `shares` (as `ablate.trial.phases` stores one)."""
    m = {metric.THROUGHPUT: 1600.0, metric.PROFILED_STEP_S: step_s, metric.PROFILED_STEPS: 120.0,
         metric.PROFILE_COST: 1.01, metric.TRAIN_SAMPLES: 640.0, metric.TRAIN_STEPS: 10.0}
    m.update({metric.phase_s(p): step_s * shares[p] for p in metric.STEP_PHASES})
    return m


@pytest.fixture
def forced(monkeypatch):
    """`ablate diagnose` measures nothing: the baseline's trial returns the metrics of the profile it is given."""
    def force(shares: dict[str, float]) -> None:
        monkeypatch.setattr(baseline_profile, "measure", lambda study, device: _metrics(shares))
    return force


def _wide(text: str) -> list[str]:
    return [line for line in text.splitlines() if len(line) > WIDTH]


def _block(text: str, start: str) -> str:
    """The lines from the one starting `start` to the next blank line, joined (a long list wraps)."""
    found = re.search(rf"^{re.escape(start)}(.*?)(?:\n\n|\Z)", text, re.M | re.S)
    assert found, text
    return " ".join(found[1].split())


def test_diagnose_prints_the_breakdown_and_every_strategys_prediction_in_100_columns(tiny_study_file, mnist, tmp_path,
                                                                                     capsys, monkeypatch):
    # The study's own one-second profiling window, not diagnose's five: what is checked is what it prints of a real
    # profile, whose shares a longer window only steadies.
    monkeypatch.setattr(baseline_profile, "PROFILE_S", 0.0)
    results = tmp_path / "results"
    assert main(["diagnose", str(tiny_study_file), "--device", "cpu", "--results", str(results)]) == 0
    out = capsys.readouterr().out
    assert _wide(out) == []
    assert out.startswith("tiny, the baseline alone on ")
    for phase in metric.STEP_PHASES:  # a bar and a share each
        assert re.search(rf"^  {phase} +█* +\d+%  ", out, re.M), out
    assert "can help (a ceiling of x1.05 or more):" in out or "unlikely to help (" in out
    unavailable = set(_block(out, "not available on cpu: ").split(", "))
    assert "pin_memory" in unavailable  # pinned memory is for host-to-GPU copies
    for name in set(REGISTRY) - unavailable:  # every other strategy, predicted
        assert re.search(rf"^  {name}: (can help|unlikely to help|targets|does not apply)", out, re.M), (name, out)
    # The tiny CNN has no attention layer: the attention kernel has nothing to act on, whatever compute costs.
    assert re.search(r"^  attention_backend: does not apply to this model - no attention layer", out, re.M), out
    # Nothing written but the results folder's log, where the trial or a library said something.
    written = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")}
    assert written <= {"results", "results/tiny", "results/tiny/ablate.log"}
    assert "results/tiny" not in written or (results / "tiny" / "ablate.log").stat().st_size > 0


def test_write_study_holds_only_the_strategies_whose_ceiling_clears_the_bar(tiny_study_file, mnist, forced, tmp_path,
                                                                             capsys):
    forced(DATA_BOUND)
    written = tmp_path / "diagnosed.yaml"
    assert main(["diagnose", str(tiny_study_file), "--device", "cpu", "--write-study", str(written),
                 "--results", str(tmp_path / "results")]) == 0
    out = capsys.readouterr().out
    assert _wide(out) == [] and f"run it with:\n  ablate run {written}\n" in out
    loaded = studies.load(str(written), "cpu")
    names = {k.name for _, options in loaded.space for o in options for k in o.kinds}
    unavailable = set(_block(out, "not available on cpu: ").split(", "))
    lacking = set(re.findall(r"^  (\w+): does not apply to this model - ", out, re.M))
    assert lacking == {"attention_backend"}  # a CNN: no attention layer (float8 is not available on a CPU)
    assert names == {n for n, cls in REGISTRY.items() if cls.targets & MATTERS} - unavailable - lacking
    assert "num_workers" in names and "set_to_none" not in names and "activation_checkpointing" not in names
    # The study's own: its model, budget and protocol, and its own choice of a strategy it already had.
    assert loaded.model == "tiny_mnist:TinyMnistCNN" and loaded.budget.train_samples == 512
    assert loaded.protocol.block_size == 2 and "[off, {num_workers: {n: 1}}]" in written.read_text()
    for _, options in loaded.space:  # strategies share a dimension only where they exclude each other
        kinds = [k for o in options for k in o.kinds]
        assert all(a.name in b.conflicts_with or b.name in a.conflicts_with for a in kinds for b in kinds if a is not b)
    if {"torchscript", "compile"} <= names:  # alternatives: one dimension, as the bundled studies' graph
        assert "torchscript_or_compile" in dict(loaded.space)
    assert {p.name for p in tmp_path.iterdir()} <= {"diagnosed.yaml", "results"}


def test_a_model_gets_the_study_ablate_new_writes_with_the_diagnosed_space(mnist, forced, tmp_path, capsys):
    forced(COMPUTE_BOUND)
    written = tmp_path / "cnn.yaml"
    assert main(["diagnose", "tiny_mnist:TinyMnistCNN", "--device", "cpu", "--write-study", str(written),
                 "--results", str(tmp_path / "results")]) == 0
    text = written.read_text()
    assert text.startswith("# A study of tiny_mnist:TinyMnistCNN, written by `ablate diagnose tiny_mnist:TinyMnistCNN`")
    loaded = studies.load(str(written), "cpu")
    names = {k.name for _, options in loaded.space for o in options for k in o.kinds}
    assert "amp" in names and "num_workers" not in names  # compute is 90% of the step, data 2%
    assert _wide(capsys.readouterr().out) == []


def test_a_cnn_is_never_told_the_attention_kernel_can_help(mnist, forced, tmp_path, capsys):
    """mnist_cnn, compute-bound: the attention kernel acts on compute, but the network has no attention layer; its
    convolutions leave channels_last a ceiling to claim."""
    forced(COMPUTE_BOUND)
    assert main(["diagnose", "mnist_cnn", "--device", "cpu", "--results", str(tmp_path / "results")]) == 0
    out = capsys.readouterr().out
    helps = out.split("can help (a ceiling of x1.05 or more):")[1].split("unlikely to help (")[0]
    assert "channels_last: can help" in helps and "attention_backend" not in helps, out
    assert ("does not apply to this model (it lacks the part the technique acts on):\n"
            "  attention_backend: does not apply to this model - no attention layer for it to choose a kernel for\n"
            in out), out
    assert _wide(out) == []


def test_no_study_is_written_where_no_strategy_clears_the_bar(tiny_study_file, mnist, forced, tmp_path, capsys):
    forced(ALL_OTHER)
    written = tmp_path / "diagnosed.yaml"
    assert main(["diagnose", str(tiny_study_file), "--device", "cpu", "--write-study", str(written),
                 "--results", str(tmp_path / "results")]) == 1
    assert "no study written" in capsys.readouterr().err and not written.exists()


@pytest.fixture
def in_process(monkeypatch, capsys):
    return functools.partial(ablate, monkeypatch, capsys)


@pytest.mark.parametrize("args, expected", [
    (["mnist_cn"], "unknown study or model 'mnist_cn'; choose one of: byte_gpt, gpt_kjv, llama_tiny, mnist_cnn"),
    ([str(TINY), "--write-study", "taken.yaml"], "taken.yaml exists; choose another with --write-study"),
    ([str(TINY), "--write-study", "afile/study.yaml"], "--write-study afile/study.yaml: afile is not a folder"),
    ([str(TINY), "--write-study", "nowhere/study.yaml"], "nowhere is not a folder (it does not exist)"),
    ([str(TINY), "--device", "cdua"], "unknown device 'cdua'; choose one of: cpu, cuda[:N]; did you mean 'cuda'?"),
    ([str(TINY), "--results", "/proc/x/results"], "results folder /proc/x/results cannot be created"),
])
def test_bad_input_is_one_line_and_nothing_is_measured_or_written(args, expected, tmp_path, in_process, monkeypatch):
    monkeypatch.setattr(baseline_profile, "measure", lambda study, device: pytest.fail("measured"))
    (tmp_path / "taken.yaml").write_text("a study of someone's\n")
    (tmp_path / "afile").write_text("not a folder")
    done = in_process("diagnose", *args, cwd=tmp_path, ABLATE_RESULTS_DIR=str(tmp_path / "results"))
    assert done.returncode == 2, done.stderr
    said = one_message(done.stderr)
    assert said.startswith("ablate: error: ") and expected in said, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "taken.yaml"]
    assert (tmp_path / "taken.yaml").read_text() == "a study of someone's\n"


def test_an_unknown_target_from_the_real_entry_point_exits_2_and_writes_nothing(tmp_path):
    done = subprocess.run([sys.executable, "-m", "ablate", "diagnose", "hf_llama", "--device", "cpu"],
                          capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "ABLATE_RESULTS_DIR": str(tmp_path / "results")})
    assert done.returncode == 2 and done.stderr.startswith("ablate: error: unknown study or model 'hf_llama'")
    assert one_message(done.stderr) and list(tmp_path.iterdir()) == []


class _Bar:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def write(self, line: str) -> None:
        self.lines.append(line)


def test_a_run_says_the_baselines_diagnosis_once_and_which_planned_techniques_are_unlikely_to_help():
    study = studies.load(str(TINY), "cpu")
    runner = SimpleNamespace(diagnosed=False, progress=_Bar(), choices=study.choices,
                             machine=SimpleNamespace(device=torch.device("cpu")))

    def measured(combination: str, shares: dict[str, float]) -> Record:
        return Record(number=0, combination=combination, levels={}, state="complete", metrics=_metrics(shares))

    Runner._diagnose(runner, [measured("amp(dtype=bf16)", COMPUTE_BOUND)])
    assert runner.progress.lines == [] and not runner.diagnosed  # not the baseline: nothing said yet
    Runner._diagnose(runner, [measured("baseline", COMPUTE_BOUND)])
    Runner._diagnose(runner, [measured("baseline", DATA_BOUND)])
    assert runner.progress.lines == [
        "baseline's step (40 ms): data 2%, copy 0%, forward 45%, backward 45%, optimizer 3%, other 5%",
        # pin_memory cannot run on a CPU (its combinations are skipped): not predicted; amp acts on 90%
        "before measuring, unlikely to help (a ceiling under x1.05): num_workers (data 2%)",
    ]
    assert all(len(line) <= WIDTH for line in runner.progress.lines)


def test_every_strategy_has_its_usual_choices_and_each_is_that_strategy():
    from ablate.config.choices import parse
    from ablate.run.diagnose import CHOICES

    assert set(CHOICES) == set(REGISTRY)  # a new strategy needs its choice for a written study
    for name, choices in CHOICES.items():
        assert all(parse(["off", c], name)[1].name == name for c in choices)
