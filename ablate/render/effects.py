"""The factorial effects (`ablate.stats.screening.effects.fit_effects`) as the report gives them: its section, and its
MLflow metrics."""
from __future__ import annotations

import re

from ablate.stats.screening.effects import Effect, EffectFit
from ablate.stats.speedups import Interval
from ablate.words import count, factor, points


def section(throughput: EffectFit | str, accuracy: EffectFit | str, numeric_dims: list[str]) -> list[str]:
    """The report's tables of main effects and interactions, on throughput and on accuracy, with what they mean."""
    out = []
    if isinstance(throughput, str):
        return [f"Effects on throughput not estimated: {throughput}.", ""]
    out += [throughput.note, "",
            "A main effect is the throughput factor when the technique is switched on"
            + ("; an interaction (a x b) is the extra factor when both are on, beyond the product of their separate "
               "factors (x1.00 = they add up). " if throughput.pairs() else ". ")
            + f"The intervals are 95% simultaneous over the {count(len(throughput.effects), 'term')} (Bonferroni), "
            "and \"yes\" means the interval excludes no effect: in at most one study in twenty does any term without "
            "an effect read \"yes\", however many terms the table has.", ""]
    acc = {e.term: e for e in accuracy.effects} if isinstance(accuracy, EffectFit) else {}
    out += ["| technique | throughput (95% CI) | distinguishable | accuracy, points (95% CI) | distinguishable |",
            "|---|---|---|---|---|"]
    for e in throughput.main():
        a = acc.get(e.term)
        out.append(f"| {e.term} | {_factor(e.interval.exp())} | {_distinguishable(e)} | "
                   f"{_points_ci(a.interval) if a else 'n/a' if e.dims[0] in numeric_dims else '0 by construction'} | "
                   f"{_distinguishable(a) if a else ''} |")
    if throughput.pairs():
        out += ["",
                "| interaction | throughput (95% CI) | distinguishable | accuracy, points (95% CI) | distinguishable |",
                "|---|---|---|---|---|"]
    for e in throughput.pairs():
        a = acc.get(e.term)
        out.append(f"| {e.term} | {_factor(e.interval.exp())} | {_distinguishable(e)} | "
                   f"{_points_ci(a.interval) if a else ''} | {_distinguishable(a) if a else ''} |")
    out.append("")
    if isinstance(accuracy, EffectFit):
        out += [f"Accuracy effects: {accuracy.note} Only techniques that may change the numbers "
                f"({', '.join(numeric_dims)}) enter; the others leave the losses bitwise identical (tested), so "
                "their effect on accuracy is zero by construction. Their intervals are simultaneous over their own "
                f"{count(len(accuracy.effects), 'term')}.", ""]
    else:
        out += [f"Effects on accuracy not estimated: {accuracy}.", ""]
    return out


def metrics(throughput: EffectFit | str, accuracy: EffectFit | str) -> dict[str, float]:
    """Every effect with its interval, as MLflow metrics: `effect.throughput_factor.TERM`, `.low`, `.high`."""
    m: dict[str, float] = {}
    for fit, kind, exp in ((throughput, "throughput_factor", True), (accuracy, "accuracy_points", False)):
        if isinstance(fit, EffectFit):
            for e in fit.effects:
                i = e.interval.exp() if exp else e.interval
                key = metric_key(f"effect.{kind}.{e.term}")
                m.update({key: i.point, f"{key}.low": i.low, f"{key}.high": i.high})
    return m


def metric_key(text: str) -> str:
    """MLflow metric names allow letters, digits, _ - . / and spaces only."""
    return re.sub(r"[^\w\-./ ]+", "_", text).strip("_")


def _factor(i: Interval) -> str:
    return factor(i.point, i.low, i.high)


def _points_ci(i: Interval) -> str:
    return points(i.point, i.low, i.high)


def _distinguishable(e: Effect | None) -> str:
    return "" if e is None else "yes" if e.interval.distinguishable else "no"
