"""summary.json: the report's answer for scripts, rendered from the device's findings (`ablate.stats.answer.findings`)
and the comparisons they hold (`ablate.stats.answer.comparison`).

What a user's CI reads to notice that the best stack has changed: every combination's speed-up with its
interval and throughput, its parity verdict, its energy per sample over the baseline's (its interval, or "not counted
here" where nothing on the device counted energy) and its step's phase shares (null where unprofiled), the diagnosis
(`ablate.render.explained`), and the recommendation: the recommended combination's own entry
and `compose` lines (never one combination's speed-up beside another's code), one object per member of the race's
set (each with its own `compose`, speed-up, interval, parity, what it costs against the leader with the
interval its decision used, and `two_levels`: whether its processes ran at two speed levels, by
`ablate.stats.race.levels`), the combinations told apart and dropped, and those never raced.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

from ablate.config.study import Study
from ablate.render import explained
from ablate.render.results import NOT_COUNTED
from ablate.stats.answer.comparison import Comparison, DeviceComparisons
from ablate.stats.answer.findings import Findings
from ablate.stats.answer.verdicts import Recommendation
from ablate.stats.contrasts import Contrast
from ablate.stats.protocol import CONFIDENCE, CONFIRM
from ablate.store.records import Record
from ablate.trial import metrics as metric

Compose = Callable[[Record], tuple[str, str]]  # a combination's import and compose(...) lines
# summary.json's `schema_version`: raised when a field is removed, renamed or changes meaning, so a script can refuse
# what it was not written for; a new field does not raise it (scripts ignore what they do not read). docs/api.md
# lists the fields of each version.
SCHEMA_VERSION = 1


def entry(c: Comparison, unit: str, counted: bool) -> dict[str, Any]:
    """One combination, as summary.json carries it (`c` has a speed-up estimate; `counted`: some measurement on its
    device counted energy, else its energy fields say "not counted here"). `within_of_no_effect` is always
    null, kept so that scripts reading it do not break: the bound it held (two one-sided tests, given only where the
    interval covered x1.00) had no control over the many combinations, and given selectively it was often wrong for
    real effects (docs/measuring.md, "Confirmation blocks and the recommendation"); the interval says as much."""
    s = c.speedup
    assert s is not None, c.combination
    e, r, p, j = s.estimate, c.record, c.parity, c.energy_interval
    return {"combination": r.combination, "speedup": e.point,
            "low": c.interval.low if c.interval else None, "high": c.interval.high if c.interval else None,
            "blocks": e.blocks, "log_se": e.se, "df": e.df, "phase": e.phase, "noise": e.noise,
            # Named as a trial's metrics are.
            metric.THROUGHPUT: c.throughput, "throughput_unit": f"{unit}/s",
            metric.PEAK_MEMORY_MB: c.peak_memory_mb, metric.MFU: r.metrics.get(metric.MFU), "accuracy": r.accuracy,
            "accuracy_change": c.accuracy_change,
            "parity": p and {"verdict": p.verdict, "change": p.change, "low": p.low, "high": p.high, "seeds": p.seeds,
                             "probably_below": p.probably_below},
            "accuracy_unmeasured": c.unmeasured,  # "accuracy not measured: not needed for the answer", else null
            "energy_ratio": c.energy_ratio if counted else NOT_COUNTED, "energy_low": j.low if j else None,
            "energy_high": j.high if j else None, "phase_shares": explained.phase_shares(c.profile),
            "within_of_no_effect": None}


def ratio(log: float) -> float:
    """A log ratio's ratio, infinite past what a float holds: a look's interval at a tiny alpha on one degree of
    freedom spans thousands in log (the first look past the planned blocks, where a race may now stop)."""
    return math.exp(log) if log < 700 else math.inf


def decision(k: Contrast[str]) -> dict[str, Any]:
    """A race contrast (log leader - log it) as scripts read it: the ratio, the interval its decision used (the
    simultaneous one at the look's alpha; pointwise 95% where no look judged it, `interval` says which; `guarded`:
    on few blocks, widened against two-level processes, `ablate.stats.contrasts`), the adjusted p (below 0.05
    exactly when told apart), and the pointwise `p` (not the decision)."""
    bounds = k.simultaneous()
    kind = "simultaneous" if bounds else "pointwise 95%" if k.se is not None else None
    bounds = bounds or k.interval()
    return {"leader_over_it": math.exp(k.diff), "low": ratio(bounds[0]) if bounds else None,
            "high": ratio(bounds[1]) if bounds else None, "interval": kind,
            "confidence": 1 - k.alpha if k.alpha else None, "k": k.k if k.alpha else None,
            "p_adjusted": k.p_adjusted, "p": k.p, "blocks": k.blocks, "told_apart": k.apart,
            "guarded": k.guarded}


def recommendation(compared: DeviceComparisons, unit: str, compose: Compose) -> dict[str, Any] | None:
    """summary.json's `recommendation`: the recommended combination's entry and compose lines, and one object per
    member of the race's set. None without a recommendation (no complete baseline)."""
    rec: Recommendation | None = compared.recommendation
    pick = compared.get(rec.pick.combination) if rec else None
    if rec is None or pick is None or pick.speedup is None:
        return None
    counted = compared.energy_counted

    def member(m: Record) -> dict[str, Any]:
        c = compared.get(m.combination)
        k, e = rec.contrasts.get(m.combination), rec.equivalence.get(m.combination)
        base = entry(c, unit, counted) if c and c.speedup else {"combination": m.combination}
        return {**base, "compose": list(compose(m)), "leader": m is rec.leader, "recommended": m is rec.pick,
                "two_levels": m.combination in rec.two_level,
                "against_leader": decision(k) if k is not None and m is not rec.leader else None,
                "equivalence": e and {"leader_over_it_at_most": e.bound, "alpha": e.alpha, "data": e.data,
                                      "shown": e.shown}}

    picked, design = rec.equivalence.get(rec.pick.combination), rec.resolution

    return {
        **entry(pick, unit, counted), "compose": list(compose(rec.pick)),
        "confirmed": pick.speedup.estimate.phase == CONFIRM,
        "leader": rec.leader.combination, "equivalence_margin": rec.margin,
        # The baseline stands in: the leader read no faster than it on its confirmation blocks.
        "leader_unconfirmed": rec.unconfirmed,
        # What the design's equivalence test could show at the measured noise (`ablate.stats.race.equivalence`).
        "equivalence_design": {"smallest_shown": design and design.smallest, "blocks": design and design.blocks,
                               "blocks_for_margin": design and design.needed,
                               "margin_below_smallest": design and design.below},
        # The leader's techniques the headline lacks, and the most leaving them out may cost (its equivalence bound).
        "left_out": {"techniques": list(rec.left_out), "may_cost_up_to": picked.allowed if picked else None},
        "set": [m.combination for m in rec.members], "simplest": rec.simplest.combination,
        "members": [member(m) for m in rec.members],
        "eliminated": [{"combination": c, **(decision(rec.dropped[c]) if c in rec.dropped else {})}
                       for c in rec.eliminated],
        "not_raced": [entry(c, unit, counted) if (c := compared.get(name)) and c.speedup
                      else _predicted(rec, name) for name in rec.not_raced],
        "pending": list(rec.pending), "accuracy_unmeasured": rec.accuracy_unmeasured,
        "contrasts": {c: decision(k) for c, k in rec.contrasts.items()},
    }


def _predicted(rec: Recommendation, name: str) -> dict[str, Any]:
    """A field member never measured (a fraction was screened): the screening model's prediction, marked as one
    (`"measured": false`); a name alone where there is none."""
    e = rec.race.predicted.get(name) if rec.race else None
    if e is None:
        return {"combination": name}
    bounds = e.interval()
    return {"combination": name, "measured": False, "predicted_speedup": e.point,
            "low": math.exp(bounds[0]) if bounds else None, "high": math.exp(bounds[1]) if bounds else None,
            "log_se": e.se, "df": e.df, "noise": e.noise}


def workload(study: Study) -> dict[str, Any]:
    """What the study measures, as its file sets it: two studies measure the same workload where these are equal
    (a comparison of two studies pairs them only then). The budget's seed and trial timeout are left out: neither
    changes what is measured."""
    budget = {k: v for k, v in dataclasses.asdict(study.budget).items() if k not in ("seed", "trial_timeout_s")}
    return {"model": study.model, "model_options": dict(study.model_options), "dataset": study.dataset,
            "dataset_options": dict(study.dataset_options), "task": study.task_name,
            "task_options": dict(study.task_options), "tokenizer": study.tokenizer,
            "baseline": dataclasses.asdict(study.baseline), "budget": budget,
            "accuracy_tolerance": study.accuracy_tolerance}


def summary(study: Study, found: Findings, search: str) -> dict[str, Any]:
    """summary.json for one device: its findings, what the Optuna study stores beside them (its seeds, where the race
    ended, what the run cost) included."""
    compared, protocol, stored = found.compared, found.protocol, found.study_record
    records, unit = compared.records, study.throughput_unit
    fields = list(dict.fromkeys(k for r in records for k in r.machine))  # a record stored before a field lacks it
    # Each field's values over the measurements, comma-separated where they differ ("unknown": stored before it).
    machine = {k: ", ".join(sorted({str(r.machine.get(k, "unknown")) for r in records})) for k in fields}
    level = found.baseline_level
    part = compared.fraction_first
    return {
        "schema_version": SCHEMA_VERSION,
        "study": study.name, "study_hash": study.file_hash, "search": search, "device": compared.device,
        "torch": machine.get("torch", ""), "commit": machine.get("commit", ""),
        "protocol": {**protocol.__dict__, "design": protocol.design,
                     "description": protocol.describe(fraction=part.fraction.describe() if part else None),
                     "screened_fraction": part and {"cells": len(part.fraction.cells),
                                                    "of": len(part.fraction.cells) + len(part.fraction.rest),
                                                    "generators": list(part.fraction.generators),
                                                    "resolution": part.fraction.resolution,
                                                    "fold_over": part.folded},
                     "confidence": CONFIDENCE, "race": stored.race, "baseline_cv_across_blocks": found.baseline_cv,
                     "compile_cache": "one per compiled graph, shared by the combinations that compile it: cold where "
                                      "Inductor compiled a graph, warm where every lookup hit"},
        "seeds": stored.seeds,
        # What a comparison of two studies sets side by side (a summary written before these has none): the machine
        # as every measurement stored it, the workload's settings, and the baseline's own level.
        "machine": machine,
        "workload": workload(study),
        "baseline_level": level and {metric.THROUGHPUT: math.exp(level.log), "log": level.log, "log_se": level.se,
                                     "df": level.df, "blocks": level.blocks},
        "mlflow_parent_run": stored.parent_run_id,
        "cost": stored.cost_summary,  # expected as it began, and spent (ablate.run.estimate); null: stored before
        # The load guard over the run (ablate.trial.foreign_load): measurements taken again, and kept though still
        # disturbed.
        "machine_load": {"foreign_load_limit": compared.load.limit, **compared.load.figures},
        "recommendation": recommendation(compared, unit, lambda r: found.compose[r.combination]),
        "diagnosis": explained.summary(found.explanation),
        "speedups": [entry(c, unit, compared.energy_counted) for c in compared.rows if c.speedup],
    }
