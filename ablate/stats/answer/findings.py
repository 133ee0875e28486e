"""What a study found on one device, computed once: every figure a surface shows beyond the comparisons.

`ablate.stats.answer.comparison` puts each combination against its device's baseline and draws the race's answer from
them; `analyse` adds what the report, summary.json, the terminal and the MLflow parent run say about the study as a
whole: the factorial effects on throughput and on accuracy, the break-even of one-off costs (each combination's, and
each technique's middle figures), the baseline's spread across blocks, the time to the study's target, where the time
goes, the protocol the run followed, the compose lines of the race's set and the device's peak for MFU. Each surface
renders this one `Findings`, so no two of them can disagree and none computes a figure of its own: render/ imports only
result types and constants from stats/ (tests/architecture/test_render_computes_nothing.py).

It is computed in run/, where the comparisons are (`ablate.run.stored_study.analyse_and_report`), once per device, and
handed to the surfaces and to tracking/, which computes nothing either.
"""
from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ablate.config.choices import BASELINE
from ablate.config.design import ProtocolSettings
from ablate.config.study import Study
from ablate.stats import speedups
from ablate.stats.answer import costs
from ablate.stats.answer.comparison import DeviceComparisons, followed
from ablate.stats.answer.costs import BreakEven, TimeToTarget
from ablate.stats.answer.explained import Explanation, explain
from ablate.stats.answer.verdicts import Recommendation
from ablate.stats.protocol import Estimate, baseline_cv, baseline_level
from ablate.stats.screening import effects
from ablate.stats.screening.effects import EffectFit
from ablate.store.records import Record
from ablate.store.study_record import StudyRecord
from ablate.trial import metrics as metric
from ablate.trial.mfu import Peak, peak


@dataclass(frozen=True)
class OneOffCost:
    """One technique's one-off cost (compilation) over the combinations measured against their eager counterparts:
    the report's line above its break-even table. A middle figure of an even count is the upper of the two."""

    technique: str
    median_s: float  # the middle one-off cost, in seconds
    combinations: int
    faster: int  # of those, how many ran faster per step than their eager counterparts
    median_steps: float | None  # the middle break-even of those faster, in steps; None: none was faster


@dataclass(frozen=True)
class Findings:
    """One device's findings: its comparisons and what the study found beyond them."""

    compared: DeviceComparisons
    study_record: StudyRecord  # what the Optuna study stores beside its trials: seeds, the race, bitwise checks
    protocol: ProtocolSettings  # the protocol the stored measurements followed (`comparison.followed`)
    throughput: EffectFit | str  # the factorial effects on log throughput; a string: why there is no fit
    accuracy: EffectFit | str  # on test accuracy, of the dimensions that may change the numbers (`accuracy_dims`)
    accuracy_dims: tuple[str, ...]  # the dimensions with an option that changes the numbers
    break_even: tuple[BreakEven, ...]  # every combination with a one-off cost against its eager counterpart
    one_off: tuple[OneOffCost, ...]  # per technique, by name
    baseline_cv: float | None  # the baseline's coefficient of variation across blocks; None: it ran in one block
    time_to_target: tuple[TimeToTarget, ...] | None  # fastest first; None: the study sets no target
    explanation: Explanation  # where the time goes, and what each technique changed (`ablate.stats.answer.explained`)
    compose: Mapping[str, tuple[str, str]]  # combination -> its import and compose line: the pick and the race's set
    peak: Peak | None  # the device's peak for MFU; None: no measurement has an MFU, or the device has no known peak
    # The baseline's mean log throughput across its blocks (`protocol.baseline_level`): what a comparison of two
    # studies sets side by side; None: no baseline measured.
    baseline_level: Estimate | None = None

    @property
    def device(self) -> str:
        return self.compared.device

    @property
    def records(self) -> list[Record]:
        return self.compared.records

    @property
    def recommendation(self) -> Recommendation | None:
        return self.compared.recommendation

    @property
    def device_type(self) -> str:
        """The device's kind: "cuda" where a measurement ran on a CUDA device, else "cpu" (which memory figure the
        report explains, and which timed windows the study's budget describes)."""
        return "cuda" if any(str(r.machine.get("device", "")).startswith("cuda") for r in self.records) else "cpu"


def analyse(study: Study, compared: DeviceComparisons, study_record: StudyRecord | None = None) -> Findings:
    """`compared`'s findings. `study_record`: the Optuna study's record (its protocol, seeds, where the race ended)."""
    study_record = study_record or StudyRecord()
    records, rec = compared.records, compared.recommendation
    numeric = tuple(d for d, options in study.space if any(o.changes_numerics for o in options))
    breaks = tuple(costs.break_even(records, study, compared.speedup_of))
    budget, measured = study.budget, speedups.protocol_measurements(records)
    return Findings(
        compared, study_record, followed(study, study_record),
        effects.fit_effects(effects.throughput_observations(records), [d for d, _ in study.space], "log throughput"),
        effects.fit_effects(effects.accuracy_observations(records), list(numeric), "test accuracy"),
        numeric, breaks, _one_off(breaks),
        baseline_cv(measured, BASELINE),
        tuple(costs.time_to_target(records))
        if budget.target_accuracy is not None or budget.target_loss is not None else None,
        explain(study, compared),
        {m.combination: study.combination(m.levels).compose_line for m in (rec.pick, *rec.members)} if rec else {},
        peak(compared.device) if any(metric.MFU in r.metrics for r in records) else None,
        baseline_level(measured, BASELINE))


def analyse_all(study: Study, compared: Sequence[DeviceComparisons], study_record: StudyRecord | None = None
                ) -> list[Findings]:
    """Every device's findings, in `compared`'s order."""
    return [analyse(study, d, study_record) for d in compared]


def _one_off(breaks: Sequence[BreakEven]) -> tuple[OneOffCost, ...]:
    out = []
    for technique in sorted({b.technique for b in breaks}):
        mine = [b for b in breaks if b.technique == technique]
        pays = [b.steps for b in mine if b.steps is not None]
        out.append(OneOffCost(technique, statistics.median_high(b.extra_s for b in mine), len(mine), len(pays),
                              statistics.median_high(pays) if pays else None))
    return tuple(out)
