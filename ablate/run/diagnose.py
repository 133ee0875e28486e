"""`ablate diagnose TARGET`: which study a target names, which strategies can run on the device, and the study whose
space holds those that act on the phases that matter.

The baseline's measurement is `ablate.run.baseline_profile`'s, each technique's ceiling `ablate.stats.diagnosis`'s,
the text `ablate.render.diagnosis`'s, the study file `ablate.config.scaffold`'s (what `ablate new` writes with),
`--write-study`'s path checked by `ablate.run.preflight`. Here:

- **A target** is a study (a name in studies/, or a file) or a model as `ablate new` takes it, whose study is the one
  `ablate new` would write. A name that is both (mnist_cnn) is the study: it says more (batch, budget, devices).
- **A strategy's choices** are the study's own where its space has the strategy (each that runs here), else the
  first of `CHOICES` that runs here (bf16 before fp16: fp16 on a CPU is emulated; two workers where two cores are
  free). A strategy none of whose choices passes its `check` on the device is not available there, and not weighed.
- **The written study's dimensions**: one a strategy, except that alternatives - strategies that exclude each other
  (`conflicts_with`) and act on the same phases: torchscript, compile and CUDA graphs; the fused and the compiled
  optimizer - share one, as the bundled studies' `graph` does. Other exclusions (half precision and torchscript)
  stay in dimensions of their own: their combination is skipped as it comes, which costs no time.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

import yaml

from ablate.config import catalogue, scaffold
from ablate.config.validate import StudyError
from ablate.run.preflight import destination
from ablate.workload import library_models
from ablate.workload.registry import unknown

if TYPE_CHECKING:
    import torch

    from ablate.config.study import Study
    from ablate.stats.diagnosis import Prediction, Profile
    from ablate.workload.parts import Parts

# What a written study tries of each strategy, in order of preference; the first that runs on the device is taken.
CHOICES: dict[str, tuple[Any, ...]] = {
    "num_workers": ({"num_workers": {"n": 2}}, {"num_workers": {"n": 1}}),
    "pin_memory": ("pin_memory",),
    "device_resident_data": ("device_resident_data",),
    "batch_size": (),  # twice the baseline's batch (`_choices`)
    "set_to_none": ("set_to_none",),
    "fused_optimizer": ("fused_optimizer",),
    "compiled_optimizer": ("compiled_optimizer",),
    "amp": ({"amp": {"dtype": "bf16"}}, {"amp": {"dtype": "fp16"}}),
    "half_precision": ({"half_precision": {"dtype": "bf16"}}, {"half_precision": {"dtype": "fp16"}}),
    "float8": ("float8",),
    "tf32": ("tf32",),
    "channels_last": ("channels_last",),
    "cudnn_benchmark": ("cudnn_benchmark",),
    "attention_backend": tuple({"attention_backend": {"backend": b}} for b in ("flash", "efficient", "cudnn", "math")),
    "activation_checkpointing": ("activation_checkpointing",),
    "torchscript": ("torchscript",),
    "compile": ("compile",),
    "cuda_graphs": ("cuda_graphs",),
}
MODEL_FORMS = "hf:ARCH, timm:NAME, torchvision:NAME or package.module:Class"


@dataclass(frozen=True)
class Target:
    """What a target names: the study, the text of its file (for a model: what `ablate new` writes), the model."""

    study: Study
    text: str
    model: str | None  # the model the target named; None for a study


@dataclass(frozen=True)
class Candidate:
    """A strategy as the diagnosis weighs it on one device."""

    name: str
    targets: tuple[str, ...]  # in `strategies.base.TARGETS`' order
    choices: tuple[Any, ...]  # as a study file spells them, those that run here; none: not available here
    reason: str | None  # why none runs here


def source(target: str, device_type: str) -> Target:
    """The study `target` names (module docstring); `StudyError` for one that names none."""
    from ablate.config import study as studies
    from ablate.workload.models import MODELS

    path = Path(target)
    if path.suffix in (".yaml", ".yml") or path.parent != Path(".") or target in catalogue.available():
        found = studies.load(target, device_type)
        return Target(found, found.path.read_text(encoding="utf-8"), None)
    if not (library_models.is_library(target) or ":" in target or target in MODELS):
        raise StudyError(unknown("study or model", [target], {*catalogue.available(), *MODELS},
                                 tail=f", a path to a study file, or a model as {MODEL_FORMS}"))
    written = scaffold.default_path(target)
    try:
        text = scaffold.study_text(target, written)
    except LookupError as error:  # a library model that cannot be had here: its one line
        raise StudyError(str(error).strip('"')) from None
    return Target(scaffold.loaded(text, written, device_type, shown=target), text, target)


def weigh(found: Target, device: torch.device) -> list[Candidate]:
    """Every registered strategy with its choices that run on `device`, in the registry's order."""
    from ablate.config.choices import parse, targets_of
    from strategies import REGISTRY

    own = _own_choices(found, device.type)
    weighed: list[Candidate] = []
    for name, cls in REGISTRY.items():
        usable: list[Any] = []
        reasons: list[str] = []
        for choice in own.get(name) or _choices(name, found.study):
            strategy = parse(["off", choice], name)[1].build()
            reason = strategy.check(device) if strategy is not None else None
            if reason:
                reasons.append(reason)
                continue
            usable.append(choice)
            if name not in own:  # the first of the usual choices that runs here
                break
        weighed.append(Candidate(name, targets_of(cls), tuple(usable),
                                 None if usable else reasons[0]))
    return weighed


def _choices(name: str, study: Study) -> tuple[Any, ...]:
    if name == "batch_size":
        return ({"batch_size": {"n": 2 * study.baseline.batch_size}},)
    return CHOICES[name]


def _own_choices(found: Target, device_type: str) -> dict[str, list[Any]]:
    """The strategies the study's space names on `device_type`, each with its choices as the file spells them."""
    from ablate.config.choices import parse

    raw = yaml.safe_load(found.text)  # loaded once already as a study: every key below is valid
    space = dict(raw["space"])
    space.update(((raw.get("devices") or {}).get(device_type) or {}).get("space") or {})
    own: dict[str, list[Any]] = {}
    for dim, spelled in space.items():
        for option, choice in zip(parse(spelled, dim), spelled, strict=True):
            if option.name is not None and not option.preset:
                own.setdefault(option.name, []).append(choice)
    return own


def dimensions(names: Sequence[str]) -> list[tuple[str, list[str]]]:
    """The written study's dimensions for `names`, in their order (module docstring)."""
    from strategies import REGISTRY

    def alternatives(a: str, b: str) -> bool:
        excluded = a in REGISTRY[b].conflicts_with or b in REGISTRY[a].conflicts_with
        return excluded and REGISTRY[a].targets == REGISTRY[b].targets

    groups: list[list[str]] = []
    for name in names:
        home = next((g for g in groups if all(alternatives(name, other) for other in g)), None)
        if home is None:
            groups.append([name])
        else:
            home.append(name)
    return [("_or_".join(g), g) for g in groups]


def study_text(found: Target, chosen: Iterable[Prediction], weighed: Sequence[Candidate], path: Path,
               by: str) -> str:
    """The study file `--write-study` writes: `found`'s study with a space of the `chosen` strategies' choices
    (each dimension after the predictions of its strategies, as comments)."""
    predicted = {p.name: p for p in chosen}
    choices = {c.name: c.choices for c in weighed}
    dims = dimensions(list(predicted))
    space = scaffold.space_text([(dim, [c for name in names for c in choices[name]]) for dim, names in dims],
                                {dim: [predicted[name].describe() for name in names] for dim, names in dims})
    if found.model is not None:
        return scaffold.study_text(found.model, path, space=space, by=by)
    raw = yaml.safe_load(found.text)
    for key in ("name", "space"):  # its name is the new file's; its space is below
        raw.pop(key, None)
    if raw.get("description"):
        raw["description"] = " ".join(str(raw["description"]).split())
    for section in (raw.get("devices") or {}).values():
        if isinstance(section, dict):  # the new space is the diagnosed device's: the old overrides name old dimensions
            section.pop("space", None)
    head = (f"# Written by {by}: its space holds the strategies that can help there.\n"
            f"# The other keys, and their comments, are those of\n#   {found.study.path}\n"
            f"# Run it with\n#   ablate run {path}\n")
    return head + yaml.safe_dump(raw, sort_keys=False, width=100, allow_unicode=True) + space


@dataclass(frozen=True)
class Diagnosis:
    """The baseline's profile on one device, and every strategy weighed against it."""

    found: Target
    device_type: str
    device_name: str
    metrics: Mapping[str, Any]  # the baseline's trial's
    profile: Profile
    weighed: list[Candidate]
    parts: Parts | None  # the model's (`ablate.workload.parts`); None: it could not be inspected

    @property
    def predictions(self) -> list[Prediction]:
        """Each strategy available here, in the registry's order; one that cannot act on this model says so."""
        from ablate.stats.diagnosis import does_not_apply, predict

        return [predict(self.profile, c.name, c.targets, does_not_apply(self.parts, [c.name]))
                for c in self.weighed if c.choices]

    @property
    def helpful(self) -> list[Prediction]:
        """Those that act on phases that matter (a ceiling of `UNLIKELY_BELOW` or more) on a model they can act
        on, highest first."""
        return sorted((p for p in self.predictions if p.can_help), key=lambda p: -(p.ceiling or 0))

    def lines(self) -> list[str]:
        from ablate.render import diagnosis
        from ablate.trial import metrics as metric

        m, study = self.metrics, self.found.study
        title = (f"{study.name}, the baseline alone on {self.device_name}: {m[metric.THROUGHPUT]:,.0f} "
                 f"{study.throughput_unit}/s; where its step goes ({m[metric.PROFILED_STEPS]:.0f} profiled steps of "
                 f"{diagnosis.seconds(self.profile.step_s)}; profiling cost x{m[metric.PROFILE_COST]:.2f}):")
        return diagnosis.diagnose_output(title, self.profile, self.predictions,
                                         [c.name for c in self.weighed if not c.choices], self.device_type)


def diagnose(found: Target, device: torch.device) -> Diagnosis:
    """Measure `found`'s baseline on `device` (`ablate.run.baseline_profile`), inspect its model's parts (built on
    the meta device: no memory), and weigh every strategy against both. Raises `TrialFailed` where the trial
    failed, `StudyError` where it left no profile."""
    from ablate.config.study import model_kwargs
    from ablate.run import baseline_profile
    from ablate.stats.diagnosis import profile
    from ablate.trial.machine import describe
    from ablate.workload.models import MODELS
    from ablate.workload.parts import parts_of
    from ablate.workload.registry import lookup

    metrics = baseline_profile.measure(found.study, str(device))
    measured = profile([metrics])
    if measured is None:  # the short budget always profiles: a trial that did not says why in its log
        raise StudyError(f"the baseline's trial on {device} left no profile of its step")
    parts = parts_of(lookup(MODELS, found.study.model, "model"), model_kwargs(found.study))
    return Diagnosis(found, device.type, describe(str(device)).device_name, metrics, measured, weigh(found, device),
                     parts)


def write(found: Diagnosis, path: Path, by: str) -> Study:
    """The study of `found.helpful` at `path` (`scaffold.write_text`: written once it loads, never over a file)."""
    destination(path)  # checked before the measurement too; again, since a minute has passed
    text = study_text(found.found, found.helpful, found.weighed, path, by)
    try:
        return scaffold.write_text(text, path, found.device_type)
    except OSError as error:
        raise StudyError(f"--write-study {path} cannot be written ({error.strerror})") from None
