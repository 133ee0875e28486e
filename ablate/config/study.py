"""Study files: YAML read by a safe loader that refuses a repeated key (`_UniqueKeys`), into frozen, validated objects.

A study names a model, a dataset, a baseline loop, a search space and a
measurement budget; ``devices:`` overrides the space and budget per device
type so one file is affordable on a laptop and exact on a GPU. Every problem
is a `StudyError` whose message is one line naming the valid choices.

This module reads and checks; what it builds (`Study`, `Budget`, `Baseline`) is `ablate.config.schema`'s, named
here too for the modules that load a study and hold it.
"""
from __future__ import annotations

import hashlib
import inspect
import re
from pathlib import Path
from typing import Any, get_args, get_type_hints

import yaml

from ablate.config import choices, datasets
from ablate.config.catalogue import STUDIES_DIR, available
from ablate.config.design import ProtocolSettings
from ablate.config.schema import Baseline, Budget, Study, model_kwargs
from ablate.config.validate import StudyError, choice, mapping, reject_unknown
from ablate.workload import tasks
from ablate.workload.registry import lookup, unknown
from ablate.workload.tasks import Task

__all__ = ["DEVICE_TYPES", "Baseline", "Budget", "Study", "StudyError", "find", "load", "model_kwargs"]

OPTIMIZERS = ("adam", "sgd")
# race_blocks 0 races no block: screening only; extra_race_blocks 0: no block past race_blocks; min_window_seconds
# 0: no floor; remeasure 0: never again; profile_steps 0: no profiling window; profile_seconds 0: steps only;
# warm_up_trials 0: none
ZERO_ALLOWED = {"seed", "race_blocks", "extra_race_blocks", "min_window_seconds", "remeasure", "profile_steps",
                "profile_seconds", "warm_up_trials"}
TOP_KEYS = {"name", "description", "model", "dataset", "baseline", "space", "budget", "accuracy_tolerance", "devices",
            "protocol", "task", "model_options", "dataset_options"}
DEVICE_KEYS = {"space", "budget", "protocol", "model_options"}
DEVICE_TYPES = ("cpu", "cuda")


def find(name_or_path: str) -> Path:
    """The study file for a name in studies/ or a path."""
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or path.parent != Path("."):
        if path.is_dir():
            raise StudyError(f"{path} is a folder; give a study file (.yaml) or one of: {', '.join(available())}")
        if not path.is_file():
            raise StudyError(f"study file {path} does not exist")
        return path
    candidate = STUDIES_DIR / f"{name_or_path}.yaml"
    if not candidate.is_file():
        raise StudyError(unknown("study", [name_or_path], available(), tail=", or give a path to a study file"))
    return candidate


def load(name_or_path: str, device_type: str) -> Study:
    """Load and validate a study for a device type ("cpu" or "cuda"): the file read, each section checked in the
    order its errors are said (the first one found is the one said), the frozen `Study` built."""
    path = find(name_or_path)
    text = _read(path)
    raw = _document(text, path)
    override = _override(raw, device_type, path)
    where = f"{path}: devices.{device_type}"  # a section's device override
    space = _space(raw, override, path, where)
    budget = {**mapping(raw.get("budget", {}), f"{path}: budget"),
              **mapping(override.get("budget", {}), f"{where}.budget")}
    protocol = {**mapping(raw.get("protocol", {}) or {}, f"{path}: protocol"),
                **mapping(override.get("protocol", {}) or {}, f"{where}.protocol")}
    tolerance = _tolerance(raw.get("accuracy_tolerance", 0.5), path)
    baseline = _dataclass(Baseline, raw.get("baseline", {}), f"{path}: baseline")
    choice(baseline.optimizer, OPTIMIZERS, f"{path}: baseline", "optimizer")
    dimensions = tuple((dim, choices.parse(opts, f"{path}: space.{dim}")) for dim, opts in space.items())
    choices.one_dimension_each(dimensions, f"{path}: space")
    name = _name(raw, path)
    task_name, task_options = _task(raw.get("task", "classification"), raw["dataset"], f"{path}: task", raw["model"])
    model_options = {**mapping(raw.get("model_options", {}) or {}, f"{path}: model_options"),
                     **mapping(override.get("model_options", {}) or {}, f"{where}.model_options")}
    _model_options(raw["model"], model_options, f"{path}: model_options")
    tokenizer, data_note = _text_encoding(raw["model"], raw["dataset"], model_options, f"{path}: model_options")
    dataset_options = datasets.dataset_options(raw["dataset"], raw.get("dataset_options"), f"{path}: dataset_options")
    built_budget = _dataclass(Budget, budget, f"{path}: budget")
    _targets(built_budget, tasks.build(task_name, dict(task_options)), f"{path}: budget")
    _window_floor(built_budget, f"{path}: budget")
    return Study(
        name=name, path=path,
        description=str(raw.get("description", "")).strip(),
        model=raw["model"],
        dataset=raw["dataset"],
        baseline=baseline,
        space=dimensions,
        budget=built_budget,
        accuracy_tolerance=tolerance,
        file_hash=hashlib.sha256(text.encode()).hexdigest()[:12],
        protocol=_dataclass(ProtocolSettings, protocol, f"{path}: protocol"),
        task_name=task_name,
        task_options=task_options,
        model_options=tuple(sorted(model_options.items())),
        dataset_options=tuple(sorted(dataset_options.items())),
        tokenizer=tokenizer,
        data_note=data_note,
        seed_pinned="seed" in budget,
    )


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise StudyError(f"{path}: not a text file (byte {error.start} is not UTF-8); a study file is YAML") from None
    except OSError as error:
        raise StudyError(f"{path} cannot be read ({error.strerror})") from None


def _document(text: str, path: Path) -> dict[str, Any]:
    """The study file's YAML: a mapping of known keys, the required ones among them."""
    try:
        raw = yaml.load(text, Loader=_UniqueKeys)  # a SafeLoader: no tag runs code
    except yaml.YAMLError as error:
        where = getattr(error, "problem_mark", None)
        at = f" at line {where.line + 1}" if where else ""
        raise StudyError(f"{path}: not valid YAML{at}: {getattr(error, 'problem', None) or error}") from None
    if not isinstance(raw, dict):
        raise StudyError(f"{path}: a study is a mapping of keys ({', '.join(sorted(TOP_KEYS))})")
    reject_unknown(raw, TOP_KEYS, f"{path}")
    for key in ("model", "dataset", "space"):
        if key not in raw:
            raise StudyError(f"{path}: missing required key {key!r}")
    return raw


def _override(raw: dict[str, Any], device_type: str, path: Path) -> dict[str, Any]:
    """The `devices:` section for `device_type` ({} where it has none), once the model and dataset are known."""
    from ablate.workload.data import DATASETS
    from ablate.workload.models import MODELS

    for key, registry in (("model", MODELS), ("dataset", DATASETS)):
        try:
            lookup(registry, raw[key], key)
        except LookupError as error:
            raise StudyError(f"{path}: {error}") from None
    devices = mapping(raw.get("devices", {}), f"{path}: devices")
    reject_unknown(devices, set(DEVICE_TYPES), f"{path}: devices")
    override = mapping(devices.get(device_type, {}) or {}, f"{path}: devices.{device_type}")
    reject_unknown(override, DEVICE_KEYS, f"{path}: devices.{device_type}")
    return override


def _space(raw: dict[str, Any], override: dict[str, Any], path: Path, where: str) -> dict[str, Any]:
    """The space's dimensions, with the device's override of their options (`where`: the override's place)."""
    space = dict(mapping(raw["space"], f"{path}: space"))
    if not space:
        raise StudyError(f"{path}: space has no dimension; give at least one, e.g. pin_memory: [off, pin_memory]")
    extra = mapping(override.get("space", {}), f"{where}.space")
    reject_unknown(extra, set(space), f"{where}.space")
    space.update(extra)
    return space


def _tolerance(tolerance: Any, path: Path) -> float:
    if not isinstance(tolerance, (int, float)) or isinstance(tolerance, bool) or tolerance < 0:
        raise StudyError(f"{path}: accuracy_tolerance must be a number of percentage points >= 0, got {tolerance!r}")
    return float(tolerance)


def _name(raw: dict[str, Any], path: Path) -> str:
    name = str(raw.get("name", path.stem))
    if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", name):  # it names a folder under --results
        raise StudyError(f"{path}: name {name!r} must be letters, digits, '_', '.' or '-' (it names the study's "
                         "folder under --results), not starting with '.' or '-'")
    return name


def _task(value: Any, dataset: str, where: str, model: str = "") -> tuple[str, tuple[tuple[str, Any], ...]]:
    """`task: NAME`, `task: {next_token: {seq_len: 256}}` or `task: package.module:loss_function`."""
    from ablate.workload.data import TEXT_DATASETS

    if isinstance(value, dict) and len(value) == 1:
        name, options = next(iter(value.items()))
        options = mapping(options or {}, f"{where}.{name}")
    elif isinstance(value, str):
        name, options = value, {}
    else:
        raise StudyError(f"{where}: a task is a name ({', '.join(tasks.TASKS)}), {{name: {{option: value}}}} "
                         f"or package.module:loss_function; got {value!r}")
    if name in tasks.TASKS:
        accepted = set(inspect.signature(tasks.TASKS[name]).parameters)
        reject_unknown(options, accepted, f"{where}.{name}", noun="option")
    try:
        tasks.build(name, options)
    except (LookupError, ValueError, TypeError) as error:
        raise StudyError(f"{where}: {error}") from None
    if (dataset in TEXT_DATASETS) != (name in tasks.TEXT_TASKS) and name in tasks.TASKS:
        kind = ("text, for next_token or causal_lm" if dataset in TEXT_DATASETS
                else f"not text; {name} needs kjv or text")
        raise StudyError(f"{where}: task {name!r} does not fit dataset {dataset!r} ({kind})")
    if str(model).startswith("hf:") and name != "causal_lm":  # its output is the library's, loss included
        raise StudyError(f"{where}: model {model!r} is a Hugging Face causal LM: it trains with task "
                         "{causal_lm: {seq_len: N}} on a text dataset (kjv or text)")
    return name, tuple(sorted(options.items()))


def _model_options(model: str, options: dict[str, Any], where: str) -> None:
    """Options the model's constructor accepts; a language model's context is the task's seq_len, set there."""
    import torch

    from ablate.workload import library_models
    from ablate.workload.models import MODELS

    factory = lookup(MODELS, model, "model")
    if "seq_len" in options:
        raise StudyError(f"{where}.seq_len: set it once, as task: {{next_token: {{seq_len: N}}}}; the model gets it")
    if not library_models.is_library(model):  # a library's constructor takes **options: checked below
        reject_unknown(options, set(inspect.signature(factory).parameters) - {"seq_len"}, where, noun="option")
    try:
        if library_models.is_library(model):
            library_models.check_options(model, options)
        if options or library_models.is_library(model):
            with torch.device("meta"):  # checks the combination of options without allocating the weights
                factory(**options)
    except (TypeError, ValueError, LookupError) as error:
        raise StudyError(f"{where}: {error}") from None


def _text_encoding(model: str, dataset: str, options: dict[str, Any], where: str) -> tuple[str | None, str | None]:
    """An hf: model's text: (its tokenizer, or None for bytes as token ids; the sentence saying which)."""
    from ablate.workload import library_models
    from ablate.workload.data import TEXT_DATASETS

    if not str(model).startswith("hf:") or dataset not in TEXT_DATASETS:
        return None, None
    try:
        return library_models.text_encoding(model, options)
    except (ValueError, LookupError) as error:
        raise StudyError(f"{where}: {error}") from None



def _targets(budget: Budget, task: Task, where: str) -> None:
    if budget.target_accuracy is not None and budget.target_loss is not None:
        raise StudyError(f"{where}: set one of target_accuracy and target_loss, not both")
    if budget.target_accuracy is not None and not task.has_accuracy:
        raise StudyError(f"{where}.target_accuracy: task {task.name!r} has no accuracy (a loss function); "
                         "set target_loss, the held-out mean loss to reach")


def _window_floor(budget: Budget, where: str) -> None:
    floor, cap = budget.min_window_seconds, budget.window_seconds
    if floor is not None and cap is not None and floor > cap:
        raise StudyError(f"{where}.min_window_seconds: {floor:g} s is more than window_seconds ({cap:g} s), which "
                         "closes a window; lower it, or raise window_seconds")


def _dataclass(cls: type, values: Any, where: str) -> Any:
    """`cls` built from a mapping, with each value checked against the field's type."""
    values = mapping(values, where)
    hints = get_type_hints(cls)
    reject_unknown(values, set(hints), where)
    for key, value in values.items():
        allowed = get_args(hints[key]) or (hints[key],)
        if not _is_instance(value, allowed):
            names = " or ".join("null" if t is type(None) else t.__name__ for t in allowed)
            raise StudyError(f"{where}.{key}: expected {names}, got {value!r}")
        number = isinstance(value, (int, float)) and not isinstance(value, bool)  # a flag is no amount
        if number and key not in ZERO_ALLOWED and value <= 0:
            raise StudyError(f"{where}.{key}: must be > 0, got {value!r}")
        if number and value < 0:
            raise StudyError(f"{where}.{key}: must be >= 0, got {value!r}")
        if key == "target_accuracy" and value > 100:
            raise StudyError(f"{where}.{key}: a test accuracy in percent, at most 100, got {value!r}")
        if key == "eval_samples" and isinstance(value, str) and value != "full":  # the one word a number field takes
            raise StudyError(f"{where}.{key}: a number of test samples, or full (the whole split); got {value!r}")
    return cls(**values)


def _is_instance(value: Any, allowed: tuple[type, ...]) -> bool:
    if isinstance(value, bool):  # YAML booleans are never numbers here
        return bool in allowed
    if isinstance(value, int) and float in allowed:
        return True
    return isinstance(value, allowed)


class _UniqueKeys(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a key given twice in one mapping (YAML forbids it; PyYAML keeps the last)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict[Any, int] = {}  # key -> its line
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *defaults` keys may be overridden: that is its use
                continue
            key, line = self.construct_object(key_node, deep=True), key_node.start_mark.line + 1
            try:
                if key in seen:
                    where = f"both on line {line}" if seen[key] == line else f"at lines {seen[key]} and {line}"
                    raise yaml.constructor.ConstructorError(None, None, f"key {key!r} is given twice in one mapping, "
                                                            f"{where}; keep one", key_node.start_mark)
                seen[key] = line
            except TypeError:  # an unhashable key: the safe loader's own error says so
                continue
        return super().construct_mapping(node, deep=deep)
