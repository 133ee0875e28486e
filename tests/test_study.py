"""Study files: valid ones load into frozen objects, bad ones give one clear line."""
from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ablate.study import StudyError, available, load

TINY = Path(__file__).resolve().parent / "studies" / "tiny.yaml"


def test_mnist_cnn_has_96_combinations_and_the_literature_baseline():
    study = load("mnist_cnn", "cpu")
    assert study.size == 96
    assert (study.baseline.batch_size, study.baseline.optimizer, study.baseline.lr) == (64, "adam", 1e-3)
    assert [o.label for o in study.dimensions["graph"]] == ["off", "torchscript", "compile"]
    assert load("mnist_cnn", "cuda").size == 144  # fp16 joins AMP where a GPU is present


def test_study_is_frozen():
    study = load("mnist_cnn", "cpu")
    with pytest.raises(dataclasses.FrozenInstanceError):
        study.model = "other"  # type: ignore[misc]


def test_device_override_changes_budget_only_for_that_device():
    assert load("mnist_cnn", "cpu").budget.train_samples != load("mnist_cnn", "cuda").budget.train_samples


BAD = {
    "unknown top-level key": ("model: mnist_cnn\ndataset: mnist\nspace: {a: [off]}\nmodle: x\n", "unknown key 'modle'"),
    "unknown model": ("model: resnet9000\ndataset: mnist\nspace: {a: [off]}\n", "choose one of: mnist_cnn"),
    "unknown strategy": ("model: mnist_cnn\ndataset: mnist\nspace: {a: [off, turbo]}\n", "choose one of: amp, batch_size"),
    "unknown option": ("model: mnist_cnn\ndataset: mnist\nspace: {a: [{amp: {dtyp: bf16}}]}\n", "valid: dtype, growth_interval, init_scale"),
    "bad option value": ("model: mnist_cnn\ndataset: mnist\nspace: {a: [{amp: {dtype: fp8}}]}\n", "dtype must be one of fp16, bf16"),
    "wrong type": ("model: mnist_cnn\ndataset: mnist\nspace: {a: [off]}\nbudget: {windows: three}\n", "budget.windows: expected int"),
    "out of range": ("model: mnist_cnn\ndataset: mnist\nspace: {a: [off]}\nbudget: {windows: 0}\n", "must be > 0"),
    "malformed yaml": ("model: [mnist_cnn\n", "not valid YAML"),
    "python tag": ("!!python/object/apply:os.system ['echo pwned']\n", "not valid YAML"),
    "not a mapping": ("- a\n- b\n", "a study is a mapping"),
    "missing space": ("model: mnist_cnn\ndataset: mnist\n", "missing required key 'space'"),
}


@pytest.mark.parametrize("case", BAD)
def test_bad_study_is_rejected_with_one_line(case, tmp_path):
    text, expected = BAD[case]
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(StudyError) as info:
        load(str(path), "cpu")
    message = str(info.value)
    assert expected in message
    assert "\n" not in message


def test_unknown_study_name_lists_the_studies():
    with pytest.raises(StudyError, match="unknown study 'nope'; choose one of: .*mnist_cnn"):
        load("nope", "cpu")
    assert "mnist_cnn" in available()


@pytest.mark.parametrize("args, expected", [
    (["run", "nope"], "unknown study 'nope'"),
    (["run", "mnist_cnn", "--search", "bayes"], "invalid choice: 'bayes'"),
    (["run", "mnist_cnn", "--search", "optuna"], "--search optuna needs --trials N"),
    (["run", "mnist_cnn", "--device", "tpu"], "device"),
])
def test_cli_bad_input_exits_2_with_one_line_and_writes_nothing(args, expected, tmp_path):
    env = {**os.environ, "ABLATE_RESULTS_DIR": str(tmp_path / "results")}
    done = subprocess.run([sys.executable, "-m", "ablate", *args], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], done.stderr
    assert "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_missing_data_is_one_line_naming_files_and_the_variable(tmp_path):
    env = {**os.environ, "ABLATE_DATA_DIR": str(tmp_path / "nowhere"), "ABLATE_RESULTS_DIR": str(tmp_path / "results")}
    done = subprocess.run([sys.executable, "-m", "ablate", "run", str(TINY)], capture_output=True, text=True, env=env)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1
    assert "train-images-idx3-ubyte" in done.stderr and "ABLATE_DATA_DIR" in done.stderr
    assert not (tmp_path / "results").exists()
