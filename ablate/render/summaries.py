"""summary.json: the report's answer for scripts, rendered from the comparisons (`ablate.stats.comparison`).

What a user's CI reads to notice that the best stack has changed: every combination's speed-up with its
interval and throughput, its parity verdict, and the recommendation with its race contrasts.
"""
from __future__ import annotations

import math
from typing import Any

from ablate.config.design import ProtocolSettings
from ablate.config.study import Study
from ablate.render import answer
from ablate.stats import analysis
from ablate.stats.comparison import Comparison, DeviceComparisons
from ablate.store.study_record import StudyRecord
from ablate.trial import metrics as metric


def entry(c: Comparison, unit: str) -> dict[str, Any]:
    """One combination, as summary.json carries it (`c` has a speed-up estimate)."""
    s = c.speedup
    assert s is not None, c.combination
    e, r, p = s.estimate, c.record, c.parity
    return {"combination": r.combination, "speedup": e.factor,
            "low": c.interval.low if c.interval else None, "high": c.interval.high if c.interval else None,
            "blocks": e.blocks, "log_se": e.se, "df": e.df, "phase": e.phase, "noise": e.noise,
            # Named as a trial's metrics are.
            metric.THROUGHPUT: c.throughput, "throughput_unit": f"{unit}/s",
            metric.PEAK_MEMORY_MB: c.peak_memory_mb, metric.MFU: r.metrics.get(metric.MFU), "accuracy": r.accuracy,
            "accuracy_change": c.accuracy_change,
            "parity": p and {"verdict": p.verdict, "change": p.change, "low": p.low, "high": p.high, "seeds": p.seeds},
            "within_of_no_effect": answer.within(e) if s.log and not s.log.distinguishable else None}


def summary(study: Study, compared: DeviceComparisons, search: str, compose: tuple[str, str] | None,
            cv: float | None, design: ProtocolSettings, stored: StudyRecord) -> dict[str, Any]:
    """summary.json for one device. `stored`: what the Optuna study stores (its seeds, where the race ended)."""
    records, rec, unit = compared.records, compared.recommendation, study.throughput_unit
    chosen = compared.get(rec.leader.combination) if rec else None
    machines = {k: sorted({r.machine[k] for r in records}) for k in ("torch", "commit", "host")}
    return {
        "study": study.name, "study_hash": study.file_hash, "search": search, "device": compared.device,
        "torch": ", ".join(machines["torch"]), "commit": ", ".join(machines["commit"]),
        "protocol": {**design.__dict__, "description": design.describe(),
                     "confidence": analysis.CONFIDENCE, "race": stored.race, "baseline_cv_across_blocks": cv,
                     "compile_cache": "cold on a combination's first measurement, its own warm cache after"},
        "seeds": stored.seeds,
        "recommendation": None if chosen is None or chosen.speedup is None or rec is None else {
            **entry(chosen, unit), "confirmed": rec.confirmed, "leader": rec.leader.combination,
            "set": [m.combination for m in rec.members], "simplest": rec.simplest.combination,
            "compose": list(compose or ()), "pending": list(rec.pending),
            "contrasts": {c: {"leader_over_it": math.exp(k.diff), "p": k.p, "blocks": k.blocks,
                              "within": k.equivalence()} for c, k in rec.contrasts.items()}},
        "speedups": [entry(c, unit) for c in compared.rows if c.speedup],
    }
