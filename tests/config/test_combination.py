"""A combination is one object: every form it takes (labels, levels, options, label, group, targets, stack, compose
line) read from it, agreeing with the functions over its options, and its stack built afresh when asked."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from ablate.config import choices
from ablate.config.choices import BASELINE, Combination, accuracy_group, combination_label, grid, levels_of, targets_of
from ablate.config.study import load
from strategies import REGISTRY, ConflictError

TINY = Path(__file__).resolve().parents[1] / "studies" / "tiny.yaml"
GRAPH_STUDY = "model: mnist_cnn\ndataset: mnist\nspace:\n  amp: [off, {amp: {dtype: bf16}}]\n  graph: [off, compile]\n"


def _study(tmp_path: Path, text: str):
    path = tmp_path / "study.yaml"
    path.write_text(text)
    return load(str(path), "cpu")


def test_a_combination_holds_every_form_in_the_studys_dimension_order():
    study = load(str(TINY), "cpu")
    combination = study.combination({"amp": "amp(dtype=bf16)", "pin_memory": "pin_memory", "num_workers": "off"})
    assert combination.dimensions == ("num_workers", "pin_memory", "amp")  # the file's order, not the caller's
    assert combination.labels == {"num_workers": "off", "pin_memory": "pin_memory", "amp": "amp(dtype=bf16)"}
    assert list(combination.labels) == list(study.choices)  # a trial suggests its dimensions in this order
    assert combination.levels == levels_of(combination.labels) == tuple(sorted(combination.labels.items()))
    assert combination.options == tuple(study.options(d)[label] for d, label in combination.labels.items())
    assert combination.label == combination_label(combination.options) == "pin_memory + amp(dtype=bf16)"
    assert combination.short == "pin + amp(bf16)"
    assert combination.group == accuracy_group(combination.options) == "amp(dtype=bf16)"  # pinning changes no number
    assert combination.targets == ("copy", "compute")  # in TARGETS' order, not the dimensions'


def test_the_baseline_is_every_dimension_off():
    study = load(str(TINY), "cpu")
    baseline = study.combination(dict(choices.baseline_levels(study.choices)))
    assert (baseline.label, baseline.short, baseline.group, baseline.targets) == (BASELINE, BASELINE, BASELINE, ())
    assert baseline.stack().members == ()
    assert baseline.compose_line == ("from strategies import compose", "stack = compose()")


def test_every_grid_point_names_one_combination_and_back():
    study = load(str(TINY), "cpu")
    points = grid(study.choices)
    assert len(points) == study.size
    assert [study.combination(dict(levels)).levels for levels in points] == points
    assert len({study.combination(dict(levels)).label for levels in points}) == study.size


def test_its_stack_is_built_afresh_each_time_and_never_held():
    combination = load(str(TINY), "cpu").combination({"num_workers": "num_workers(n=1)", "pin_memory": "off",
                                                       "amp": "amp(dtype=bf16)"})
    first, second = combination.stack(), combination.stack()
    assert sorted(m.name for m in first) == sorted(m.name for m in second) == ["amp", "num_workers"]
    assert not {id(m) for m in first.members} & {id(m) for m in second.members}  # fresh strategies each time
    assert combination == load(str(TINY), "cpu").combination(combination.labels)  # a value: no stack inside


def test_a_combination_that_does_not_compose_says_so_when_its_stack_is_asked_for():
    combination = Combination(("a", "b"), (choices.Option("torchscript"), choices.Option("compile")))
    assert combination.label == "torchscript + compile"  # naming it needs no stack
    with pytest.raises(ConflictError):
        combination.stack()


def test_an_unknown_label_is_a_key_error():
    with pytest.raises(KeyError):
        load(str(TINY), "cpu").combination({"num_workers": "off", "pin_memory": "off", "amp": "amp(dtype=fp64)"})


def test_compose_line_names_the_strategies_to_paste(tmp_path: Path):
    combination = _study(tmp_path, GRAPH_STUDY).combination({"amp": "amp(dtype=bf16)", "graph": "compile"})
    imports, line = combination.compose_line
    assert imports == "from strategies import AMP, Compile, compose"
    assert line == "stack = compose(AMP(dtype='bf16'), Compile())"
    namespace: dict = {}
    exec(f"{imports}\n{line}", namespace)  # the line really builds the stack
    assert [type(s).__name__ for s in namespace["stack"].members] == ["AMP", "Compile"]


def test_compose_line_of_a_preset_uses_preset_and_its_flags_come_from_the_instance(tmp_path: Path):
    study = _study(tmp_path, "model: mnist_cnn\ndataset: mnist\nspace:\n  precision: [off, {preset: O1}]\n")
    combination = study.combination({"precision": "O1"})
    assert combination.compose_line == ("from strategies import compose, preset", "stack = compose(preset('O1'))")
    assert combination.group == "O1"  # autocast changes the numbers
    assert combination.targets == ("compute",)  # a preset: its members' targets together


def test_targets_follow_TARGETS_order_for_a_class_an_option_and_a_combination():
    from strategies.base import TARGETS

    for name, cls in REGISTRY.items():
        assert targets_of(cls) == tuple(t for t in TARGETS if t in cls.targets), name
        assert choices.Option(name).targets == targets_of(cls)
    assert targets_of(REGISTRY["compile"], REGISTRY["pin_memory"]) == ("copy", "compute", "launch")
    assert choices.Option(None).targets == () and targets_of() == ()


def test_choices_knows_no_study_so_config_imports_one_way():
    """The one import circle config had (choices <-> study) is gone: a study hands its choices what they need."""
    config = Path(choices.__file__).parent
    imported = {node.module for node in ast.walk(ast.parse((config / "choices.py").read_text()))
                if isinstance(node, ast.ImportFrom)}
    assert not imported & {"ablate.config.study", "ablate.config.schema"}
    assert not re.search(r"\bStudy\b", (config / "choices.py").read_text())
