"""Bad input for library models, through the CLI: an unknown architecture, a missing extra, a hub id with no
network, a wrong option or task - one line, exit status 2, nothing written (as tests/cli/test_bad_input.py)."""
from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

import pytest
from in_process import ablate
from messages import one_message

pytest.importorskip("transformers", reason="the hf extra: pip install -e '.[hf]'")

ROOT = Path(__file__).resolve().parents[2]
LLAMA = """model: {model}
model_options: {{num_hidden_layers: 2, hidden_size: 32, intermediate_size: 64, num_attention_heads: 4}}
dataset: kjv
task: {task}
space:
  amp: [off, {{amp: {{dtype: bf16}}}}]
"""


def _cli(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ablate", *args], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1",
                               "ABLATE_RESULTS_DIR": str(cwd / "results"), **env})


@pytest.fixture
def in_process(monkeypatch, capsys):
    """`_cli`'s answer from `main` in this process (tests/support/in_process.py), without a fresh interpreter's
    imports (transformers' and timm's too): for the cases that need no fresh process. A true subprocess stays
    where the environment must be there at import (the offline hub, an extra that cannot be imported) and for
    `new`'s exit status from the real entry point."""
    return functools.partial(ablate, monkeypatch, capsys, HF_HUB_OFFLINE="1")


def _refused(cwd: Path, done: subprocess.CompletedProcess, expected: str, keep: set[str] = frozenset()) -> None:
    assert done.returncode == 2, done.stderr
    said = one_message(done.stderr)  # one message, wrapped at 100 columns
    assert said.startswith("ablate: error: ") and expected in said, done.stderr
    assert {p.name for p in cwd.iterdir()} == set(keep)  # nothing written


@pytest.mark.parametrize("model, task, expected", [
    ("hf:lama", "{causal_lm: {seq_len: 32}}", "unknown hf architecture 'lama'; choose one of: llama"),
    ("hf:vit", "{causal_lm: {seq_len: 32}}", "has no causal-LM head for 'vit'"),
    ("hf:meta-llama/Llama-3.2-1B", "{causal_lm: {seq_len: 32}}",
     "hub id 'meta-llama/Llama-3.2-1B' is not in the local Hugging Face cache and the hub cannot be reached"),
    ("hf:./no-such-folder", "{causal_lm: {seq_len: 32}}", "folder no-such-folder does not exist"),
    ("hf:llama", "{next_token: {seq_len: 32}}", "is a Hugging Face causal LM: it trains with task {causal_lm"),
    ("timm:vit_tiny_patch16", "classification", "unknown timm model 'vit_tiny_patch16'"),
])
def test_a_bad_library_model_is_one_line_and_writes_nothing(model, task, expected, tmp_path, in_process):
    (tmp_path / "s.yaml").write_text(LLAMA.format(model=model, task=task))
    # An empty Hugging Face cache: a hub id can only come from the network, which HF_HUB_OFFLINE forbids. The hub
    # id in a fresh process (huggingface_hub reads both variables at import); the others reach no hub.
    if model == "hf:meta-llama/Llama-3.2-1B":
        done = _cli(tmp_path, "run", "s.yaml", "--device", "cpu", HF_HOME=str(tmp_path / "hf"))
    else:
        done = in_process("run", "s.yaml", "--device", "cpu", cwd=tmp_path, HF_HOME=str(tmp_path / "hf"),
                          ABLATE_RESULTS_DIR=str(tmp_path / "results"))
    _refused(tmp_path, done, expected, keep={"s.yaml"})


def test_a_misspelt_configuration_key_names_the_nearest(tmp_path, in_process):
    (tmp_path / "s.yaml").write_text(LLAMA.format(model="hf:llama", task="{causal_lm: {seq_len: 32}}")
                                     .replace("num_hidden_layers", "num_hiden_layers"))
    done = in_process("run", "s.yaml", "--device", "cpu", cwd=tmp_path, ABLATE_RESULTS_DIR=str(tmp_path / "results"))
    _refused(tmp_path, done, "unknown option 'num_hiden_layers'; LlamaConfig keys include: num_hidden_layers",
             keep={"s.yaml"})


@pytest.mark.parametrize("module, model, extra", [("transformers", "hf:llama", "hf"),
                                                   ("timm", "timm:vit_tiny_patch16_224", "timm")])
def test_a_missing_extra_names_the_pip_install(module, model, extra, tmp_path):
    hidden = tmp_path / "hidden"  # a package of that name that fails to import, first on the path
    (hidden / module).mkdir(parents=True)
    (hidden / module / "__init__.py").write_text(f'raise ImportError("No module named {module!r}")\n')
    work = tmp_path / "work"
    work.mkdir()
    done = _cli(work, "new", model, PYTHONPATH=f"{hidden}{os.pathsep}{ROOT}")
    _refused(work, done, f"needs {module}, which cannot be imported (No module named '{module}'): "
                         f"pip install 'ablate[{extra}]'")


@pytest.mark.slow
def test_new_writes_a_study_that_loads_and_refuses_to_overwrite_it(tmp_path, monkeypatch, in_process):
    done = _cli(tmp_path, "new", "hf:llama")
    assert done.returncode == 0 and "wrote llama.yaml" in done.stdout, done.stderr
    text = (tmp_path / "llama.yaml").read_text()
    assert "model: hf:llama" in text and "# " in text
    from ablate.config import study

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    loaded = study.load(str(tmp_path / "llama.yaml"), "cpu")
    assert loaded.task_name == "causal_lm" and "bytes" in loaded.data_note
    # The first `new` left the study and, where transformers spoke, the log of what it said (results/ablate.log).
    before = {p.name for p in tmp_path.iterdir()}
    assert "llama.yaml" in before and before <= {"llama.yaml", "results"}
    _refused(tmp_path, in_process("new", "hf:llama", cwd=tmp_path), "llama.yaml exists; choose another with --out",
             keep=before)


@pytest.mark.parametrize("model", ["timm:vit_tiny_patch16_224", "torchvision:resnet18", "mnist_cnn"])
def test_new_writes_a_loadable_study_for_every_kind_of_model(model, tmp_path, in_process):
    # `new`'s exit status from the real entry point: test_new_writes_a_study_that_loads_and_refuses_to_overwrite_it.
    done = in_process("new", model, "--out", "s.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"model: {model}" in (tmp_path / "s.yaml").read_text()


def test_new_with_an_unknown_model_writes_nothing(tmp_path, in_process):
    _refused(tmp_path, in_process("new", "torchvision:resnet5", cwd=tmp_path), "did you mean 'resnet50'?")
