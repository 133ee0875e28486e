"""Study files: valid ones load into frozen objects, bad ones give one clear line."""
from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest
from messages import one_message

from ablate.config.catalogue import available
from ablate.config.study import StudyError, load

from bad_studies import BAD

TINY = Path(__file__).resolve().parents[1] / "studies" / "tiny.yaml"


def test_mnist_cnn_has_96_combinations_and_the_literature_baseline():
    study = load("mnist_cnn", "cpu")
    assert study.size == 96
    assert (study.baseline.batch_size, study.baseline.optimizer, study.baseline.lr) == (64, "adam", 1e-3)
    assert [o.label for o in study.dimensions["graph"]] == ["off", "torchscript", "compile"]
    assert load("mnist_cnn", "cuda").size == 144  # fp16 joins AMP where a GPU is present


def test_presets_in_a_study_are_bundles_labelled_by_name(tmp_path):
    path = tmp_path / "presets.yaml"
    path.write_text("model: mnist_cnn\ndataset: mnist\n"
                    "space: {precision: [{preset: O0}, {preset: O1}, {preset: O2}, {preset: O3}], "
                    "cl: [off, channels_last]}\n")
    study = load(str(path), "cpu")
    options = study.dimensions["precision"]
    assert [o.label for o in options] == ["off", "O1", "O2", "O3"]  # O0 is the plain fp32 loop: the baseline
    assert options[0].build() is None
    assert [m.name for m in options[2].build()] == ["half_precision"]
    assert options[2].build().params() == {"half_precision.dtype": "fp16", "half_precision.master_weights": True}
    assert [o.code for o in options[1:]] == ["preset('O1')", "preset('O2')", "preset('O3')"]
    assert study.options("cl")["channels_last"].code == "ChannelsLast()"
    assert study.size == 8


def test_new_studies_load_on_both_devices():
    assert load("resnet_cifar", "cpu").size == load("resnet_cifar", "cuda").size == 80
    assert load("resnet_cifar", "cpu").budget.train_samples < load("resnet_cifar", "cuda").budget.train_samples
    from strategies import REGISTRY, compose

    def used(name: str) -> set[str]:
        return {m.name for _, opts in load(name, "cuda").space for o in opts if o.name for m in compose(o.build())}

    # Between them the two GPU studies use the whole catalogue: the CNN everything but the techniques for
    # transformers (repeated blocks, attention, float8-sized linears), which gpt_kjv exercises.
    transformer = {"activation_checkpointing", "attention_backend", "float8", "compiled_optimizer"}
    assert used("mnist_cnn_gpu") | used("gpt_kjv") == set(REGISTRY)
    assert transformer <= used("gpt_kjv")
    gpt = load("gpt_kjv", "cuda")
    assert (gpt.size, gpt.task_name, gpt.throughput_unit) == (432, "next_token", "tokens")
    assert load("gpt_kjv", "cpu").size == 96 and dict(load("gpt_kjv", "cpu").model_options)["d_model"] == 128



def test_a_choice_answers_what_it_changes_as_its_built_stack_does():
    """`Option.changes_numerics` and `one_off_cost` come from the classes; they must agree with the instances,
    for every choice of every study on both devices and every preset (a strategy that decided per instance
    would break this)."""
    from ablate.config.choices import Option
    from strategies import PRESETS, compose

    presets = [Option(name, preset=True) for name, bundle in PRESETS.items() if bundle()]
    chosen = {o for name in available() for device in ("cpu", "cuda") for _, opts in load(name, device).space
              for o in opts}
    for option in [*presets, *chosen]:
        built = compose(*(s for s in (option.build(),) if s is not None))
        assert (option.changes_numerics, option.one_off_cost) == (built.changes_numerics, built.one_off_cost), option
        assert {k.name for k in option.kinds} == {m.name for m in built.members}, option
    assert len(chosen) > 30

def test_study_is_frozen():
    study = load("mnist_cnn", "cpu")
    with pytest.raises(dataclasses.FrozenInstanceError):
        study.model = "other"  # type: ignore[misc]


def test_device_override_changes_budget_only_for_that_device():
    assert load("mnist_cnn", "cpu").budget.train_samples != load("mnist_cnn", "cuda").budget.train_samples


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


def test_an_unknown_study_name_suggests_the_nearest_and_still_lists_them():
    with pytest.raises(StudyError, match="unknown study 'mnist_cn'; choose one of: gpt_kjv, llama_tiny, mnist_cnn, "
                                         ".*did you mean 'mnist_cnn'"):
        load("mnist_cn", "cpu")


def test_a_binary_file_or_a_folder_is_one_line(tmp_path):
    (tmp_path / "bin.yaml").write_bytes(b"model: \xf0\x28\x8c\x28\n")
    with pytest.raises(StudyError, match=r"bin.yaml: not a text file \(byte 7 is not UTF-8\)"):
        load(str(tmp_path / "bin.yaml"), "cpu")
    with pytest.raises(StudyError, match="is a folder; give a study file"):
        load(str(tmp_path), "cpu")


def test_two_unknown_keys_each_get_their_nearest(tmp_path):
    path = tmp_path / "typos.yaml"
    path.write_text("model: mnist_cnn\ndataset: mnist\nspace: {a: [off]}\nbudget: {windwos: 2, sede: 1}\n")
    with pytest.raises(StudyError, match="did you mean 'seed' for 'sede', 'windows' for 'windwos'"):
        load(str(path), "cpu")


def test_a_yaml_merge_key_may_still_be_overridden(tmp_path):
    path = tmp_path / "merge.yaml"
    path.write_text("model: mnist_cnn\ndataset: mnist\nspace: {a: [off]}\ndevices:\n"
                    "  cpu: {budget: &cpu {windows: 2, seed: 1}}\n  cuda: {budget: {<<: *cpu, windows: 5}}\n")
    assert (load(str(path), "cuda").budget.windows, load(str(path), "cuda").budget.seed) == (5, 1)


@pytest.mark.slow
@pytest.mark.parametrize("args, expected", [
    (["run", "nope"], "unknown study 'nope'"),
    (["run", "mnist_cnn", "--search", "bayes"], "unknown choice 'bayes'; choose one of: grid, optuna"),
    (["run", "mnist_cnn", "--search", "optuna"], "--search optuna needs --trials N"),
    (["run", "mnist_cnn", "--device", "tpu"], "device"),
])
def test_cli_bad_input_exits_2_with_one_line_and_writes_nothing(args, expected, tmp_path):
    env = {**os.environ, "ABLATE_RESULTS_DIR": str(tmp_path / "results")}
    done = subprocess.run([sys.executable, "-m", "ablate", *args], capture_output=True, text=True, env=env,
                          cwd=tmp_path)
    assert done.returncode == 2
    assert expected in one_message(done.stderr), done.stderr
    assert "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_missing_data_is_one_line_naming_files_and_the_variable(tmp_path):
    env = {**os.environ, "ABLATE_DATA_DIR": str(tmp_path / "nowhere"), "ABLATE_RESULTS_DIR": str(tmp_path / "results")}
    done = subprocess.run([sys.executable, "-m", "ablate", "run", str(TINY)], capture_output=True, text=True, env=env)
    assert done.returncode == 2
    said = one_message(done.stderr)  # 470 characters, wrapped at 100 columns
    assert "train-images-idx3-ubyte" in said and "ABLATE_DATA_DIR" in done.stderr
    assert not (tmp_path / "results").exists()
