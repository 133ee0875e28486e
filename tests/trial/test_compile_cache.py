"""A compiled combination's own cache: cold first, warm after, never shared, never half-filled."""
from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ablate.config import study as studies
from ablate.config.choices import Option
from ablate.trial import compile_cache
from ablate.trial.process import TrialSpec, run_in_fresh_process

TINY = Path(__file__).resolve().parents[1] / "studies" / "tiny.yaml"


def test_only_combinations_with_a_one_off_cost_and_no_autotuning_reuse_a_cache():
    assert compile_cache.reusable((Option("compile"),))
    assert compile_cache.reusable((Option("set_to_none"), Option("compile", (("mode", "default"),))))
    assert not compile_cache.reusable((Option("compile", (("mode", "max-autotune-no-cudagraphs"),)),))
    assert not compile_cache.reusable((Option("set_to_none"), Option(None)))


@pytest.mark.parametrize("name", ["cudnn_benchmark", "device_resident_data", "torchscript"])
def test_a_one_off_cost_that_nothing_keeps_across_processes_is_never_labelled_warm(name):
    # cuDNN's autotuning, moving the data and TorchScript's profiling runs are paid again by every process: a
    # folder for them would mark every later measurement compile_cache_warm with nothing in it.
    assert Option(name).one_off_cost and not compile_cache.reusable((Option(name),))


def test_a_cache_persists_where_inductor_compiles():
    assert compile_cache.reusable((Option("compiled_optimizer"),))
    assert compile_cache.reusable((Option("cuda_graphs"),))
    assert compile_cache.reusable((Option("float8_compile", preset=True),))
    assert compile_cache.reusable((Option("cudnn_benchmark"), Option("compile")))
    assert not compile_cache.reusable((Option("cuda_graphs", (("kernels", "eager"),)),))  # the cudagraphs backend
    assert not compile_cache.reusable((Option("compile", (("backend", "aot_eager"),)),))


def test_each_search_combination_device_and_torch_has_its_own_folder(tmp_path):
    # A search sharing another's folder (the grid, then `--search optuna` in the same results folder) would start
    # every compiled combination warm: it would have no cold measurement to take the one-off cost from.
    one = compile_cache.folder(tmp_path, "s:grid:cpu", "compile", "cpu", "2.9")
    assert len({one, compile_cache.folder(tmp_path, "s:grid:cpu", "compile + set_to_none", "cpu", "2.9"),
                compile_cache.folder(tmp_path, "s:grid:cpu", "compile", "H100", "2.9"),
                compile_cache.folder(tmp_path, "s:grid:cpu", "compile", "cpu", "2.10"),
                compile_cache.folder(tmp_path, "s:optuna:cpu", "compile", "cpu", "2.9")}) == 5
    assert one == compile_cache.folder(tmp_path, "s:grid:cpu", "compile", "cpu", "2.9")


def test_a_cold_cache_is_kept_only_after_a_successful_trial(tmp_path, monkeypatch):
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    own = tmp_path / "compile-cache" / "key"
    failed = compile_cache.Use(str(own))
    assert not failed.warm and os.environ["TORCHINDUCTOR_CACHE_DIR"] == failed.path != str(own)
    failed.done(succeeded=False)
    assert not own.exists() and not Path(failed.path).exists()
    cold = compile_cache.Use(str(own))
    (Path(cold.path) / "entry").write_text("compiled")
    cold.done(succeeded=True)
    warm = compile_cache.Use(str(own))
    assert warm.warm and os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(own) and (own / "entry").is_file()
    warm.done(succeeded=True)
    assert (own / "entry").is_file()  # a warm trial leaves the combination's cache in place


def test_a_killed_cold_trials_folder_is_removed_by_the_next_cold_one(tmp_path, monkeypatch):
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    dead = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True).stdout)
    left = tmp_path / f"cold-{dead}-abc"
    left.mkdir()
    compile_cache.Use(str(tmp_path / "key")).done(succeeded=False)
    assert not left.exists()


@pytest.mark.slow
def test_a_later_measurement_of_a_compiled_combination_loads_the_first_ones_code(tmp_path):
    study = studies.load(str(TINY), "cpu")
    # No profiling window: the cache is read as the model compiles, long before it (seconds a trial on mnist_cnn).
    study = dataclasses.replace(study, budget=dataclasses.replace(study.budget, profile_steps=0))
    spec = TrialSpec(study, (Option("compile"),), "cpu", train_for_accuracy=False,
                     compile_cache=str(tmp_path / "compile-cache" / "key"))
    cold = run_in_fresh_process(spec)
    assert cold["compile_cache_warm"] == 0.0 and cold["compile_cache_hits"] == 0.0
    assert (tmp_path / "compile-cache" / "key").is_dir()
    warm = run_in_fresh_process(spec)
    assert warm["compile_cache_warm"] == 1.0 and warm["compile_cache_hits"] >= 1
