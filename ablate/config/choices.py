"""A search dimension's choices (off, a strategy with its settings, or a preset), and the combinations they make.

What a choice changes (the numbers, a one-off cost, what it targets, the
strategies it brings) is answered from the strategy classes, without
building one with the choice's settings (a preset's classes come from its bundle).

A combination is one choice per dimension: a `Combination`, which a study
makes from its labels (`ablate.config.schema`). Each form it takes is one of its
attributes, so a caller holds one object, not one name per form:

- its labels, {dimension: choice label}: a trial's Optuna params and `Record.levels`;
- its `Levels`, the same as sorted (dimension, label) pairs, hashable: what the
  planner hands the protocol as a slot's combination (`ablate.stats.protocol.Key`);
  `levels_of` makes them, `dict` undoes them;
- its options, a tuple of `Option`s in the study's dimension order;
- its label, "amp(dtype=bf16) + compile" or `BASELINE`: the name it is stored,
  tabled and logged under (`parts` and `techniques` read a stored one); its short
  label for the terminal, and its accuracy group's label;
- what its strategies target, in `strategies.base.TARGETS`' order;
- its stack, the one place its choices become strategies: built when asked
  (`compose_options`), never held, since building one runs each strategy's checks;
- the compose line that reproduces it in a user's own loop.

The functions over a sequence of options (`combination_label`, `accuracy_group`,
`compose_options`) are what the attributes are computed with; they stay for
callers that hold options alone (a trial's spec, the planner's grid). `grid` and
`baseline_levels` walk a study's choices by dimension. This module knows no study:
a study is built from its choices, so it hands them what they need.
"""
from __future__ import annotations

import inspect
import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ablate.config.validate import StudyError, choice, mapping, reject_unknown
from ablate.workload.registry import unknown
from strategies import PRESETS, REGISTRY, Stack, Strategy, compose, preset
from strategies.base import TARGETS

OFF = "off"
PRESET = "preset"  # {preset: O2} in a dimension's choices: a named bundle from strategies.PRESETS
BASELINE = "baseline"  # the label of the combination with every dimension off
JOIN = " + "  # between the labels of a combination's choices
Levels = tuple[tuple[str, str], ...]  # a combination: sorted (dimension, choice label) pairs
# Long strategy names, shortened on the terminal only (`short_label`; the CSV, report and MLflow keep the full labels).
# A short name keeps the words a user knows the strategy by: `set_to_none` stays whole (`to_none` named nothing).
SHORT = {"activation_checkpointing": "act_ckpt", "attention_backend": "attn", "compiled_optimizer": "compiled_opt",
         "device_resident_data": "device_data", "fused_optimizer": "fused_opt", "half_precision": "half",
         "cudnn_benchmark": "cudnn_bench", "channels_last": "ch_last", "num_workers": "workers",
         "pin_memory": "pin", "batch_size": "batch", "torchscript": "script"}


@dataclass(frozen=True)
class Option:
    """One choice of a search dimension: a strategy with its settings, a preset (a bundle of strategies), or off."""

    name: str | None  # registry name, or preset name when `preset`; None means off
    kwargs: tuple[tuple[str, Any], ...] = ()
    preset: bool = False  # `name` is one of strategies.PRESETS; `build` returns its Stack

    @property
    def label(self) -> str:
        if self.name is None:
            return OFF
        return self.name + (f"({', '.join(f'{k}={v}' for k, v in self.kwargs)})" if self.kwargs else "")

    @property
    def code(self) -> str:
        """The Python expression that builds it, for a `compose(...)` line (a preset's Stack composes too)."""
        if self.name is None:
            return ""
        if self.preset:
            return f"preset({self.name!r})"
        return f"{REGISTRY[self.name].__name__}({', '.join(f'{k}={v!r}' for k, v in self.kwargs)})"

    @property
    def kinds(self) -> tuple[type[Strategy], ...]:
        """The strategy classes it brings (a preset: those it bundles; off: none)."""
        if self.name is None:
            return ()
        return tuple(type(s) for s in PRESETS[self.name]()) if self.preset else (REGISTRY[self.name],)

    @property
    def targets(self) -> tuple[str, ...]:
        """What its strategies target, in `TARGETS`' order (a preset: its members' together)."""
        return targets_of(*self.kinds)

    @property
    def changes_numerics(self) -> bool:
        return any(k.changes_numerics for k in self.kinds)

    @property
    def may_be_bitwise_equal(self) -> bool:
        """It changes the numbers only through strategies that may still compute bitwise as without them
        (`ablate.run.bitwise` checks which do on the machine at hand)."""
        changing = [k for k in self.kinds if k.changes_numerics]
        return bool(changing) and all(k.may_be_bitwise_equal for k in changing)

    @property
    def one_off_cost(self) -> bool:
        return any(k.one_off_cost for k in self.kinds)

    def build(self) -> Strategy | None:
        if self.name is None:
            return None
        return preset(self.name) if self.preset else REGISTRY[self.name](**dict(self.kwargs))


@dataclass(frozen=True)
class Combination:
    """One choice per search dimension, in the study's order of its dimensions."""

    dimensions: tuple[str, ...]
    options: tuple[Option, ...]  # `dimensions`' choices, one each

    @property
    def labels(self) -> dict[str, str]:
        """{dimension: choice label}, in the study's order: a trial's Optuna params."""
        return {dim: o.label for dim, o in zip(self.dimensions, self.options)}

    @property
    def levels(self) -> Levels:
        return levels_of(self.labels)

    @property
    def label(self) -> str:
        """The name it is stored, tabled and logged under."""
        return combination_label(self.options)

    @property
    def short(self) -> str:
        """Its label as the terminal shows it (`short_label`)."""
        return short_label(self.label)

    @property
    def group(self) -> str:
        """Its accuracy group's label (`accuracy_group`)."""
        return accuracy_group(self.options)

    @property
    def targets(self) -> tuple[str, ...]:
        """What its strategies target together, in `TARGETS`' order."""
        return targets_of(*(kind for o in self.options for kind in o.kinds))

    @property
    def compose_line(self) -> tuple[str, str]:
        """The import and the `compose(...)` line that reproduce it in a user's loop."""
        calls = [o.code for o in self.options if o.name]
        names = sorted({c.split("(")[0] for c in calls} | {"compose"})
        return f"from strategies import {', '.join(names)}", f"stack = compose({', '.join(calls)})"

    def stack(self) -> Stack:
        """Its strategies, built afresh; `ConflictError` when they do not compose."""
        return compose_options(self.options)


def compose_options(options: Sequence[Option]) -> Stack:
    """The stack of a combination's choices (off ones bring nothing); `ConflictError` when they do not compose."""
    return compose(*(s for s in (o.build() for o in options) if s is not None))


def targets_of(*kinds: type[Strategy]) -> tuple[str, ...]:
    """What strategy classes target together (`Strategy.targets`), in `TARGETS`' order: the order `ablate list`,
    the diagnosis and the docs name them in."""
    found = {t for kind in kinds for t in kind.targets}
    return tuple(t for t in TARGETS if t in found)


def levels_of(labels: Mapping[str, str]) -> Levels:
    """A combination's labels ({dimension: choice label}) as its `Levels`."""
    return tuple(sorted(labels.items()))


def combination_label(options: Sequence[Option]) -> str:
    return JOIN.join(o.label for o in options if o.name) or BASELINE


def accuracy_group(options: Sequence[Option]) -> str:
    """Combinations with the same numerics-changing strategies train to the same accuracy."""
    changing = [o.label for o in options if o.changes_numerics]
    return JOIN.join(changing) or BASELINE


def parts(label: str) -> list[str]:
    """The choices a combination's label combines, in its order (the baseline: none)."""
    return [] if label == BASELINE else label.split(JOIN)


def techniques(label: str) -> int:
    """How many choices a combination's label combines (the baseline: none)."""
    return len(parts(label))


def short_label(label: str) -> str:
    """`amp(dtype=bf16) + compile(regional=True)` -> `amp(bf16) + compile(regional)`: option names dropped where
    the value says enough, a true flag by its name, long strategy names shortened (SHORT)."""
    def option(match: re.Match) -> str:
        key, value = match.group(1), match.group(2)
        return key if value == "True" else f"no {key}" if value == "False" else value.strip("'")

    parts = []
    for part in label.split(JOIN):
        name, _, args = part.partition("(")
        args = re.sub(r"(\w+)=('[^']*'|[^,)]+)", option, args)
        parts.append(SHORT.get(name, name) + (f"({args}" if args else ""))
    return JOIN.join(parts)


def grid(options: Mapping[str, Mapping[str, Option]]) -> list[Levels]:
    """Every combination of a study's choices by dimension ({dimension: {label: option}})."""
    combos: list[dict[str, str]] = [{}]
    for dim, opts in options.items():
        combos = [{**c, dim: label} for c in combos for label in opts]
    return [levels_of(c) for c in combos]


def baseline_levels(options: Mapping[str, Mapping[str, Option]]) -> Levels:
    """The baseline: every dimension's `off` choice (`parse` requires one per dimension)."""
    return levels_of({dim: next(label for label, o in opts.items() if o.name is None) for dim, opts in options.items()})


def parse(choices: Any, where: str) -> tuple[Option, ...]:
    """A dimension's choices from the study file: a non-empty list, no choice twice, `off` among them."""
    if not isinstance(choices, list) or not choices:
        raise StudyError(f"{where}: a dimension is a non-empty list of choices (off, a strategy name, "
                         f"{{name: {{option: value}}}} or {{preset: NAME}})")
    options = tuple(_option(c, where) for c in choices)
    labels = [o.label for o in options]
    if len(set(labels)) != len(labels):
        raise StudyError(f"{where}: a choice is listed twice ({', '.join(labels)})")
    if all(o.name is not None for o in options):  # speed-ups are against the baseline: every dimension off
        raise StudyError(f"{where}: no `off` among the choices ({', '.join(labels)}); every dimension needs one, "
                         "since the baseline is every dimension off: add `off` as its first choice")
    return options


def one_dimension_each(space: tuple[tuple[str, tuple[Option, ...]], ...], where: str) -> None:
    """A strategy belongs to one dimension: in two, a combination would apply it twice (or a preset's copy of it
    twice), which no stack composes. Presets count by the strategies they bundle, so the rule is one rule."""
    home: dict[str, tuple[str, Option]] = {}  # strategy -> (dimension, the choice that brings it)
    for dim, options in space:
        for option in options:
            for kind in option.kinds:
                first, brought_by = home.setdefault(kind.name, (dim, option))
                if first != dim:
                    raise StudyError(f"{where}: strategy {kind.name!r} is in two dimensions, {first}"
                                     f"{_via(brought_by)} and {dim}{_via(option)}; list its choices in one dimension")


def _via(option: Option) -> str:
    return f" (in preset {option.name})" if option.preset else ""


def _option(given: Any, where: str) -> Option:
    if given in (None, False, OFF):  # YAML reads a bare `off` as False
        return Option(None)
    if isinstance(given, str):
        name, kwargs = given, dict[str, Any]()  # no options
    elif isinstance(given, dict) and len(given) == 1:
        name, kwargs = next(iter(given.items()))
        if name == PRESET:
            if not isinstance(kwargs, str) or kwargs not in PRESETS:
                raise StudyError(f"{where}: {unknown('preset', [kwargs], PRESETS)}")
            # O0 bundles nothing: it is the baseline, and labelled so.
            return Option(kwargs, preset=True) if PRESETS[kwargs]() else Option(None)
        kwargs = mapping(kwargs or {}, f"{where}.{name}")
    else:
        raise StudyError(f"{where}: a choice is off, a strategy name, {{name: {{option: value}}}} "
                         f"or {{preset: NAME}}; got {given!r}")
    choice(name, REGISTRY, where, "strategy")
    accepted = [p for p in inspect.signature(REGISTRY[name]).parameters]
    reject_unknown(kwargs, set(accepted), f"{where}.{name}", noun="option")
    option = Option(name, tuple(sorted(kwargs.items())))
    try:
        option.build()  # the strategy's own checks of its settings, as one line
    except (TypeError, ValueError) as error:
        raise StudyError(f"{where}: {error}") from None
    return option
