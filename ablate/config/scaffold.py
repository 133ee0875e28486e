"""`ablate new MODEL`: a commented study file for a named model, ready to edit and run.

The file is written only after it loads as a study (so what `ablate new` writes, `ablate run` takes), and
never over an existing file. What it fills in follows the model's kind: an `hf:` decoder learns the King
James Bible on its own causal-LM loss at a CPU size; a `timm:` or `torchvision:` image model trains on
synthetic images of its input size (throughput only, with the real data sets named in a comment); anything
else (a built-in or `package.module:Class`) is a classifier on MNIST. `ablate diagnose --write-study` writes
through the same functions, with a space of its own (`space_text`).
"""
from __future__ import annotations

import dataclasses
import re
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import yaml

from ablate.config.validate import StudyError
from ablate.workload import library_models

if TYPE_CHECKING:
    from ablate.config.study import Study

__all__ = ["study_text", "space_text", "default_path", "target", "loaded", "write_text", "write"]

_HF_SIZE = {"num_hidden_layers": 2, "hidden_size": 128, "intermediate_size": 512, "num_attention_heads": 4,
            "vocab_size": 256}

_HEAD = """\
# A study of {model}, written by {by}: edit it, then run it with
#   ablate run {path}
# Keys: docs/studies.md, "Keys". Each dimension of `space` is a list of choices (off, a strategy name,
# {{name: {{option: value}}}} or {{preset: O1}}); every combination is measured against the baseline.
# `ablate list` names the strategies; `devices:` overrides the space, budget and model size per device.
description: >
  {description}
model: {model}
"""

_HF = """\
# model_options go to transformers' AutoConfig.for_model (any key of the architecture's configuration);
# this size trains in seconds on a CPU - raise it to the model you mean (e.g. num_hidden_layers: 16,
# hidden_size: 2048) under devices.cuda.model_options.
model_options: {options}
# Text: the King James Bible ($ABLATE_DATA_DIR/kjv/kjv.txt, else downloaded), or any file with
#   dataset: text  and  dataset_options: {{path: FILE}}
# Without a tokenizer on the machine each byte is a token id 0-255 (vocab_size must be >= 256);
# model: hf:PATH to a local folder with tokenizer files tokenizes with it.
dataset: kjv
task: {{causal_lm: {{seq_len: 256}}}}   # the model's own loss with labels; tokens/s; next-token accuracy
baseline: {{batch_size: 16, optimizer: adam, lr: 2.0e-3, max_grad_norm: 1.0}}
{space}budget: {{train_samples: 512, warmup_samples: 32, window_samples: 64, windows: 3, test_subset: 64}}
accuracy_tolerance: 1.0
"""

_VISION = """\
# model_options go to the library's constructor ({constructor}); random weights, nothing downloaded.
model_options: {{num_classes: 10}}
# Images: synthetic tensors of the model's input size (random labels: throughput only, accuracy not
# measured). For accuracy use  dataset: cifar10  (32x32; set the model's input size to match, e.g. timm's
# img_size: 32), dataset: mnist (28x28 grey), or  dataset: imagefolder  with
# dataset_options: {{path: DIR, image_size: N}} (DIR/train and DIR/val, one subfolder per class).
dataset: synthetic
dataset_options: {{image_size: {size}, channels: {channels}, num_classes: 10, samples: 2048}}
baseline: {{batch_size: 32, optimizer: sgd, lr: 0.05, max_grad_norm: 1.0}}
{space}budget: {{train_samples: 256, warmup_samples: 32, window_samples: 64, windows: 3, test_subset: 64}}
"""

_OTHER = """\
model_options: {{}}   # the constructor's keyword arguments
dataset: mnist
baseline: {{batch_size: 64, optimizer: adam, lr: 1.0e-3}}
{space}budget: {{train_samples: 6400, warmup_samples: 640, window_samples: 1280, windows: 3}}
"""

# Each kind's space where `ablate new` chooses it (`ablate diagnose --write-study` gives its own).
_SPACES = {
    "hf": """\
space:
  amp: [off, {amp: {dtype: bf16}}]
  graph: [off, compile, {compile: {regional: true}}]       # regional: each decoder layer compiled once
  checkpointing: [off, activation_checkpointing]
  attention: [off, {attention_backend: {backend: math}}]   # on a GPU add flash, efficient, cudnn
""",
    "vision": """\
space:
  amp: [off, {amp: {dtype: bf16}}]
  channels_last: [off, channels_last]                          # convolutions: the stem, or a whole CNN
  graph: [off, compile, {compile: {regional: true}}]       # regional needs repeated blocks (docs/strategies.md)
  checkpointing: [off, activation_checkpointing]
""",
    "other": """\
space:
  amp: [off, {amp: {dtype: bf16}}]
  graph: [off, compile]
""",
}


def default_path(model: str) -> Path:
    """``./NAME.yaml`` after the model's name, in letters, digits and underscores."""
    slug = re.sub(r"[^A-Za-z0-9]+", "_", model.rsplit("/", 1)[-1].split(":")[-1]).strip("_").lower()
    return Path(f"{slug or 'study'}.yaml")


def _input_size(model: str) -> tuple[int, int]:
    """(channels, side) the model's constructor expects by default: timm's pretrained config, else 3x224."""
    prefix, ref = model.split(":", 1)
    if prefix == "timm":
        import timm

        cfg = timm.get_pretrained_cfg(ref)
        channels, side, _ = cfg.input_size if cfg else (3, 224, 224)
        return channels, side
    return 3, 299 if ref.startswith("inception") else 224


def study_text(model: str, path: Path, space: str | None = None, by: str | None = None) -> str:
    """The commented study file for `model`: its kind's space, or `space` (the `space:` block, `space_text`), and
    the command that wrote it (`by`, default `ablate new MODEL`). Raises `ModelUnavailable` when the model cannot
    be had here."""
    prefix = model.split(":", 1)[0] if library_models.is_library(model) else ""
    if prefix:
        library_models.factory(model)  # the name checked first: extra installed, architecture known
    if prefix == "hf":
        options = {}
        for key, value in _HF_SIZE.items():  # only keys this architecture's configuration has
            try:
                library_models.check_options(model, {key: value})
                options[key] = value
            except ValueError:
                continue
        body = _HF.format(options="{" + ", ".join(f"{k}: {v}" for k, v in options.items()) + "}",
                          space=space or _SPACES["hf"])
        description = f"{model} (transformers, from its configuration) learning text on its causal-LM loss"
    elif prefix:
        channels, side = _input_size(model)
        constructor = ("timm.create_model(NAME, pretrained=False, ...)" if prefix == "timm"
                       else "torchvision.models.get_model(NAME, weights=None, ...)")
        body = _VISION.format(constructor=constructor, size=side, channels=channels, space=space or _SPACES["vision"])
        description = f"{model} on synthetic images of its input size ({channels}x{side}x{side}): throughput"
    else:
        body = _OTHER.format(space=space or _SPACES["other"])
        description = f"{model} classifying MNIST"
    return _HEAD.format(model=model, path=path, description=description, by=by or f"`ablate new {model}`") + body


def space_text(dimensions: Sequence[tuple[str, Sequence[Any]]], notes: Mapping[str, Sequence[str]]) -> str:
    """A `space:` block: each dimension `off` and its choices (as a study file spells them: a name, or
    {name: {option: value}}), after comment lines `notes[dimension]`."""
    lines = ["space:"]
    for name, choices in dimensions:
        lines += [f"  # {note}" for note in notes.get(name, ())]
        lines.append(f"  {name}: [{', '.join(['off', *map(_flow, choices)])}]")
    return "\n".join(lines) + "\n"


def _flow(choice: Any) -> str:
    return choice if isinstance(choice, str) else yaml.safe_dump(choice, default_flow_style=True, width=10_000).strip()


def target(model: str, path: Path | None = None, option: str = "--out") -> Path:
    """Where the study for `model` goes (`path`, else `default_path`); FileExistsError where a file is there."""
    path = path or default_path(model)
    if path.exists():
        raise FileExistsError(f"{path} exists; choose another with {option}, or remove it")
    return path


def loaded(text: str, path: Path, device_type: str = "cpu", shown: str | None = None) -> Study:
    """`text` loaded as the study file `path` would be (from a copy in a temporary folder: nothing is written at
    `path`); the loader's `StudyError` names `shown` (default: `path`) where it would name the copy."""
    from ablate.config.study import load

    with tempfile.TemporaryDirectory() as folder:
        probe = Path(folder) / path.name
        probe.write_text(text)
        try:
            study = load(str(probe), device_type)
        except StudyError as error:
            raise StudyError(str(error).replace(str(probe), shown or str(path))) from None
    return dataclasses.replace(study, path=path)


def write_text(text: str, path: Path, device_type: str = "cpu") -> Study:
    """Write study `text` to `path` once it loads (what is written, `ablate run` takes); returns the study.

    Raises the study loader's `StudyError` for one that does not load (then nothing is written)."""
    study = loaded(text, path, device_type)
    path.write_text(text)
    return study


def write(model: str, path: Path | None = None) -> Path:
    """Write the study for `model` to `path` (default `default_path`) once it loads; returns the path.

    Raises FileExistsError for an existing file and the study loader's `StudyError` for one that does not
    load (then nothing is written).
    """
    path = target(model, path)
    return write_text(study_text(model, path), path).path
