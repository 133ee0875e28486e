"""A study's `dataset_options`: each dataset's own options, and the one every dataset takes.

Apart from ablate.config.study, which calls `dataset_options` once per load, so that the rules for a dataset's
options sit in one short place. Every problem is a `StudyError` of one line naming the valid choices.
"""
from __future__ import annotations

import math
from typing import Any

from ablate.config.validate import StudyError, mapping
from ablate.workload.registry import unknown
from ablate.workload.slow import SAMPLE_DELAY

# A dataset's own options; a dataset not named here (mnist, cifar10, kjv, your own) has none.
DATASET_OPTIONS = {"text": {"path"}, "imagefolder": {"path", "image_size"},
                   "synthetic": {"image_size", "channels", "num_classes", "samples"}}
# What every dataset takes: a wait per training sample, for a loader-bound study on purpose (ablate.workload.slow).
EVERY_DATASET = {SAMPLE_DELAY}


def dataset_options(dataset: str, value: Any, where: str) -> dict[str, Any]:
    """`dataset: text` and `imagefolder` take the `path` of their data; imagefolder and synthetic an image size;
    every dataset a `sample_delay_ms`."""
    options = mapping(value or {}, where)
    own = DATASET_OPTIONS.get(dataset, set())
    if strangers := sorted(str(k) for k in options if k not in own | EVERY_DATASET):
        none = "" if own else f" (dataset {dataset!r} takes no options of its own; text, imagefolder and synthetic do)"
        raise StudyError(f"{where}: {unknown('option', strangers, own | EVERY_DATASET, lead='valid', tail=none)}")
    if "path" in own and not isinstance(options.get("path"), str):
        raise StudyError(f"{where}.path: dataset {dataset} needs the path of its "
                         f"{'text file' if dataset == 'text' else 'folder'} (absolute, or relative to the data root)")
    for key in own - {"path"}:
        if key in options and (not isinstance(options[key], int) or isinstance(options[key], bool)
                               or options[key] < 1):
            raise StudyError(f"{where}.{key}: expected a whole number >= 1, got {options[key]!r}")
    if SAMPLE_DELAY in options:
        _delay(options[SAMPLE_DELAY], f"{where}.{SAMPLE_DELAY}")
    return options


def _delay(value: Any, where: str) -> None:
    number = isinstance(value, (int, float)) and not isinstance(value, bool)  # YAML's true is no amount
    if not number or not math.isfinite(value) or value < 0:
        raise StudyError(f"{where}: expected a number of milliseconds >= 0 that each training sample waits "
                         f"(0: none), got {value!r}")
