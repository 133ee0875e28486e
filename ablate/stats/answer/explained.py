"""Every speed-up explained: a device's `Explanation`, computed once from its comparisons for every surface to render.

What it joins: the baseline's profile (where its step goes, `ablate.stats.diagnosis.profile`), each technique of the
study's space with the phases its strategies target (`Strategy.targets`; a preset's, its members' together), and
the measured speed-ups (`ablate.stats.answer.comparison`). Before a technique is measured, the baseline's shares give
its ceiling (`diagnosis.predict`); after, the measurement confirms or refutes it, and the phase whose time per sample
fell, by more than `diagnosis.MOVED_FLOOR` of the baseline's step, says what it changed (`diagnosis.sentence`).

**What a prediction is checked against: the technique alone.** A prediction is Amdahl's ceiling on the baseline's
profile, so it bounds exactly one measured thing: the technique switched on with every other dimension off, against
the baseline of the same blocks. Its speed-up's 95% interval is the one the report's table prints for that row, and
that combination's own profile gives the sentence. The technique's main effect
(`ablate.stats.screening.effects.fit_effects`) would be the other candidate, and the wrong one here: it averages the
technique over stacks whose profiles differ (with `num_workers` on, the data phase a second loader technique could
remove is gone), so a ceiling from the baseline does not bound it, and where the fit fails (too few measurements) it
does not exist. A technique that never ran alone (an Optuna search that did not pick it) is left unchecked, and says so.
A technique none of whose strategies has a part of the model to act on (`diagnosis.does_not_apply`: no attention layer
for the attention kernel, say) is predicted to do nothing there, not given a ceiling to be checked against.

**What "as predicted" claims.** It is said only of a technique predicted unlikely to help (a ceiling under
`diagnosis.UNLIKELY_BELOW`) whose interval lies wholly below that same x1.05: the upper end of a two-sided 95%
interval, so a technique whose true speed-up is x1.05 or more is called so at most 2.5% of the time by construction
(simulated at x1.05, the worst case, on the protocol's estimator: tests/stats/test_explained.py). "Within its
ceiling" is the same construction at the ceiling: the interval's upper end at or under it, wrong for a technique
worth its ceiling or more at most 2.5% of the time (simulated at the ceiling); an interval that reaches above the
ceiling is only consistent with it. The simulated rates: docs/evidence.md, "Evidence: the explanation's check".
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass

from ablate.config.choices import OFF
from ablate.config.study import Study
from ablate.stats import diagnosis
from ablate.stats.answer.comparison import Comparison, DeviceComparisons
from ablate.stats.speedups import Interval
from ablate.trial import metrics as metric
from ablate.workload.parts import Parts

NOT_ALONE = "not measured alone"
NO_INTERVAL = "no interval to check (one block)"


@dataclass(frozen=True)
class Check:
    """A technique's prediction from the baseline's profile, and what measuring it alone said."""

    prediction: diagnosis.Prediction
    alone: Comparison | None  # the technique with every other dimension off; None: never measured so
    sentence: str | None  # the phase that moved, in words, where both it and the baseline were profiled

    @property
    def technique(self) -> str:
        return self.prediction.name

    @property
    def measured(self) -> Interval | None:
        """Its speed-up's 95% interval, as the report's table prints it (None: not measured alone, or one block)."""
        return self.alone.interval if self.alone else None

    @property
    def verdict(self) -> str:
        if self.alone is None:
            return NOT_ALONE
        if (i := self.measured) is None:
            return NO_INTERVAL
        return self.prediction.checked(i.low, i.high)


@dataclass(frozen=True)
class Explanation:
    """One device's speed-ups explained: where the baseline's step goes (`baseline`; None: never profiled, and nothing
    is predicted), every profiled combination, each technique's prediction checked, and what the recommended stack
    changed."""

    baseline: diagnosis.Profile | None
    profiled: tuple[Comparison, ...]  # every combination with a profile: the baseline first, then fastest first
    checks: tuple[Check, ...]  # one per technique of the space, in the study's order
    recommended: str | None  # the recommended stack's sentence (None: no recommendation, it is the baseline, or
    #                          either went unprofiled)
    cost: float | None  # the baseline's profiled steps' time per sample over its timed windows' (1.0: free)

    @property
    def baseline_shares(self) -> dict[str, float]:
        """The baseline's share of the step in each loop phase (`metrics.STEP_PHASES`); empty where unprofiled."""
        base = self.baseline
        return {p: base.share(p) for p in metric.STEP_PHASES} if base else {}


def explain(study: Study, compared: DeviceComparisons) -> Explanation:
    """The device's explanation: the baseline's profile, each technique's prediction checked against its speed-up
    alone, and the recommended stack's sentence (module docstring)."""
    base_row = compared.baseline
    base = base_row.profile if base_row else None
    profiled = tuple(sorted((c for c in compared.rows if c.profile), key=lambda c: not c.is_baseline))
    checks: list[Check] = []
    if base is not None:
        dims = [d for d, _ in study.space]
        parts = _parts(study)
        for dim, options in study.space:
            for option in (o for o in options if o.label != OFF):
                alone = _alone(compared, dims, dim, option.label)
                lacks = diagnosis.does_not_apply(parts, [k.name for k in option.kinds])
                checks.append(Check(diagnosis.predict(base, option.label, option.targets, lacks), alone,
                                    diagnosis.sentence(option.label, base, alone.profile)
                                    if alone and alone.profile else None))
    rec = compared.recommendation
    pick = compared.get(rec.pick.combination) if rec else None
    said = (diagnosis.sentence(pick.combination, base, pick.profile)
            if base and pick and pick.profile and not pick.is_baseline else None)
    costs = [m.metrics[metric.PROFILE_COST] for m in base_row.record.every_measurement
             if metric.PROFILE_COST in m.metrics] if base_row else []
    return Explanation(base, profiled, tuple(checks), said, statistics.fmean(costs) if costs else None)


def _parts(study: Study) -> Parts | None:
    """The parts of the study's model (`ablate.workload.parts`); None where it cannot be imported here."""
    from ablate.config.study import model_kwargs
    from ablate.workload.models import MODELS
    from ablate.workload.parts import parts_of
    from ablate.workload.registry import lookup

    try:
        return parts_of(lookup(MODELS, study.model, "model"), model_kwargs(study))
    except LookupError:  # a user's model module not importable where the report is built: nothing claimed
        return None


def _alone(compared: DeviceComparisons, dims: list[str], dim: str, label: str) -> Comparison | None:
    """The complete combination with `dim` at `label` and every other dimension off."""
    want = {d: label if d == dim else OFF for d in dims}
    return next((c for c in compared.rows if c.record.complete
                 and {d: c.record.levels.get(d, OFF) for d in dims} == want), None)
