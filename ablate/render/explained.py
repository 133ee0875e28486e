"""Where the time goes (`ablate.stats.answer.explained.Explanation`), as the report's section, summary.json's
`diagnosis`, the MLflow parent run's metrics and the terminal's line under the answer.

The report puts the section right after the Recommendation, as its own section: the answer comes first, and the
diagnosis is what explains that answer (and what a user can act on where the answer is "could not
tell these apart"), so it comes before the table and the effects it explains, not after the method.
"""
from __future__ import annotations

import math
from typing import Any

from ablate.render.effects import metric_key
from ablate.stats.answer.explained import Check, Explanation
from ablate.stats.diagnosis import MOVED_FLOOR, UNLIKELY_BELOW, WORDS, Profile
from ablate.trial import metrics as metric
from ablate.words import count, factor

FIGURE = "phases.png"
NOT_PROFILED = ("No measurement here was profiled (`budget.profile_steps` 0, or stored before profiling existed): "
                "where a step's time goes is not known, and no picture is drawn.")


def _in_words(p: Profile) -> str:
    said = ", ".join(f"{WORDS[phase]} {p.share(phase):.0%}" for phase in metric.STEP_PHASES)
    idle = "" if p.idle is None else (f"; the GPU ran no kernel or copy in {p.idle:.0%} of the window (the share "
                                      "launch overhead is read from)")
    return said + idle


def _measured(c: Check) -> str:
    if c.alone is None or c.alone.point is None:
        return ""
    i = c.measured
    return factor(i.point, i.low, i.high) if i else factor(c.alone.point, no_interval=" (one block)")


def _row(c: Check) -> str:
    p = c.prediction
    if p.inapplicable is not None:
        return (f"| {p.name} | {' + '.join(p.targets)} | | | does not apply: {p.inapplicable} | {_measured(c)} | "
                f"{c.verdict} |")
    if p.ceiling is None:
        return f"| {p.name} | {' + '.join(p.targets)} | | | no phase measures it | {_measured(c)} | {c.verdict} |"
    return (f"| {p.name} | {' + '.join(p.targets)} | {p.share:.0%} | x{p.ceiling:.2f} | "
            f"{'unlikely to help' if p.unlikely else 'can help'} | {_measured(c)} | {c.verdict} |")


def section(d: Explanation, recommended: str | None) -> list[str]:
    """The report's "Where the time goes": the baseline's shares, each technique's prediction with its check, the
    sentences, and the picture (`FIGURE`, drawn by `ablate.render.plots.phases_chart` where anything was profiled)."""
    out = ["## Where the time goes", ""]
    if not d.profiled:
        return out + [NOT_PROFILED, ""]
    base = d.baseline
    if base is None:
        out += ["The baseline's step was not profiled, so no technique's effect is predicted; the picture shows the "
                "combinations that were.", ""]
    else:
        runs = len([m for m in d.profiled[0].record.every_measurement
                    if metric.PROFILED_STEP_S in m.metrics])
        cost = "" if d.cost is None else (f" The profiled steps took x{d.cost:.2f} the timed windows' time per "
                                          "sample (what profiling costs; x1.00: nothing).")
        where = "in its timed windows" if d.cost is None else "in a window after its timed windows"
        out += [f"The baseline's step, profiled {where} ({count(runs, 'measurement')}, "
                f"{base.step_s * 1e3:.3g} ms a step): {_in_words(base)}.{cost}", "",
                "Before measuring, each technique's ceiling from these shares (Amdahl's law: the speed-up were the "
                f"phases it targets free); under x{UNLIKELY_BELOW:.2f} it is unlikely to help. Then what its "
                "speed-up alone (every other technique off) said, with the 95% interval the speed-up table prints:",
                "",
                "| technique | targets | share of the step | ceiling | before measuring | measured alone (95% CI) | "
                "check |",
                "|---|---|---:|---:|---|---|---|",
                *(_row(c) for c in d.checks), ""]
        said = ([f"- **recommended**, {d.recommended}"] if d.recommended else []) + [
            f"- {c.sentence}" for c in d.checks if c.sentence and c.alone and c.alone.combination != recommended]
        if said:
            out += ["What each changed: the phase whose time per sample fell the most against the baseline's, "
                    "beyond what the rest of the step did (a process that runs faster throughout makes every phase "
                    "cheaper alike), as its share of the step before and after. A phase is named only where both its "
                    f"drop and that excess are over {MOVED_FLOOR:.0%} of the baseline's step: a profile is a few "
                    "steps' mean.",
                    "", *said, ""]
    out += ["Each bar is a combination's profiled step per sample (so a bigger batch compares), split into its "
            "phases; the baseline's first.", "", f"![each combination's step split into phases]({FIGURE})", ""]
    return out


def terminal_line(d: Explanation, recommended: str | None) -> str | None:
    """The line under the answer: what moved in the recommended stack (the answer's line above names it)."""
    if not d.recommended or recommended is None:
        return None
    return f"where the time went: {d.recommended.removeprefix(f'{recommended}: ')}"


def phase_shares(p: Profile | None) -> dict[str, float] | None:
    """summary.json's `phase_shares` of one combination (null: not profiled)."""
    return {phase: p.share(phase) for phase in metric.STEP_PHASES} if p else None


def summary(d: Explanation) -> dict[str, Any]:
    """summary.json's `diagnosis`."""
    base = d.baseline
    return {
        "profiled": bool(d.profiled),
        "baseline": base and {"phase_shares": phase_shares(base), metric.GPU_IDLE_SHARE: base.idle,
                              metric.PROFILED_STEP_S: base.step_s, metric.PROFILE_COST: d.cost},
        "unlikely_below": UNLIKELY_BELOW,
        "techniques": [{"technique": c.technique, "targets": list(c.prediction.targets), "share": c.prediction.share,
                        "ceiling": c.prediction.ceiling, "unlikely": c.prediction.unlikely,
                        "alone": c.alone.combination if c.alone else None,
                        "low": c.measured.low if c.measured else None, "high": c.measured.high if c.measured else None,
                        "check": c.verdict, "sentence": c.sentence} for c in d.checks],
        "recommended": d.recommended,
    }


def metrics(d: Explanation) -> dict[str, float]:
    """The parent run's MLflow metrics: the baseline's shares, each technique's ceiling, profiling's cost."""
    m: dict[str, float] = {}
    if d.baseline:
        m.update({f"diagnosis.baseline.share.{phase}": v for phase, v in (phase_shares(d.baseline) or {}).items()})
    m.update({metric_key(f"diagnosis.ceiling.{c.technique}"): c.prediction.ceiling for c in d.checks
              if c.prediction.ceiling is not None and math.isfinite(c.prediction.ceiling)})
    if d.cost is not None:
        m["diagnosis.profile_cost"] = d.cost
    return m
