"""The report's answer in words: the recommended set, accuracy parity, equivalence, and the noise warnings.

Every sentence here states a test's outcome: "could not be told apart" is a
paired contrast that the studentized range did not reject (`ablate.stats.contrasts`),
"within +-3% of" is the bound of two one-sided tests (the 90% interval), and
a parity verdict is a non-inferiority test (`ablate.stats.parity`).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ablate.config.choices import BASELINE
from ablate.config.study import Study
from ablate.stats import parity, protocol, variance
from ablate.stats.analysis import BreakEven, Speedup, TimeToTarget
from ablate.stats.comparison import Comparison
from ablate.stats.contrasts import EQUIVALENCE_CONFIDENCE, Contrast
from ablate.stats.verdicts import Recommendation
from ablate.store.records import Record
from ablate.words import count, factor, points


def _speedup_factor(s: Speedup | None) -> str:
    if s is None:
        return "n/a"
    f = s.factor
    return factor(s.point, f.low if f else None, f.high if f else None, no_interval=" (no interval)")


def within(estimate: protocol.Estimate) -> float | None:
    """How far from no effect the TOST 90% interval reaches, as a fraction (None: no interval)."""
    bounds = estimate.interval(EQUIVALENCE_CONFIDENCE)
    return None if bounds is None else max(abs(math.expm1(b)) for b in bounds)


def _tie(c: Contrast[str] | None) -> str:
    """A contender the race could not tell apart from the leader: the leader over it, in the answer's words."""
    bounds = c.interval() if c else None
    near = c.equivalence() if c else None  # None exactly when `bounds` is: no standard error
    if c is None or bounds is None or near is None:
        return " (too few shared blocks to compare)"
    low, high = bounds
    return (f" (leader/it {factor(math.exp(c.diff), math.exp(low), math.exp(high))} over {c.blocks} shared race "
            f"blocks; within {100 * near:.0f}% of the leader)")


def recommendation_lines(rec: Recommendation, speedup_of: dict[str, Speedup], tolerance: float) -> list[str]:
    """The recommendation section's words after the compose line."""
    leader, simplest = rec.leader, rec.simplest
    s = speedup_of.get(leader.combination)
    if leader.combination == BASELINE:
        # Every other estimate is a ratio to the baseline, so its x1.00 cannot read high and needs no confirmation.
        out = [f"The race's leader is **{BASELINE}**: no raced combination's estimate was above its throughput "
               f"(x1.00 by definition, so no confirmation blocks ran)."]
    else:
        basis = ("from its confirmation blocks, which its selection never saw" if rec.confirmed else
                 "from the blocks that selected it: no confirmation blocks ran, so it may read high")
        out = [f"The race's leader is **{leader.combination}**: {_speedup_factor(s)} the baseline's throughput ({basis}"
               + (f", {count(s.estimate.blocks, 'block')}, noise from {s.estimate.noise}" if s else "") + ")."]
    others = [m for m in rec.members if m is not leader]
    if others:
        parts = [m.combination + _tie(rec.contrasts.get(m.combination)) for m in others]
        out += ["", f"The race could not tell these apart from the leader (paired contrasts against the "
                    f"studentized range of the field, alpha spent over the race's looks): {'; '.join(parts)}. "
                    f"Any of them is an answer; the simplest, **{simplest.combination}** "
                    f"({_speedup_factor(speedup_of.get(simplest.combination))}), is named first."]
    if rec.eliminated:
        told = [f"{c} (x{math.exp(rec.contrasts[c].diff):.2f} slower)" if c in rec.contrasts else c
                for c in rec.eliminated]
        out += ["", f"Told apart from the leader by paired contrasts and dropped from the race: {'; '.join(told)}."]
    if rec.pending:
        out += ["", f"Screened once and ahead of the leader's race estimate, but never raced (no seat or no block "
                    f"left), so not recommended: {', '.join(rec.pending)}."]
    if rec.parity and rec.parity.verdict == parity.UNCERTAIN:
        out += ["", f"**Accuracy parity of the leader is uncertain**: {rec.parity.describe(tolerance)}. Its interval "
                    "straddles the tolerance; more seeds would decide it."]
    return out + [""]


def parity_lines(groups: dict[str, parity.Parity], records: list[Record], tolerance: float) -> list[str]:
    """The accuracy parity section: every accuracy group's verdict and interval."""
    if not groups:
        return ["No accuracy was measured at two groups' shared seeds, so parity could not be judged.", ""]
    members: dict[str, list[str]] = {}
    for r in records:
        if r.accuracy_group:
            members.setdefault(r.accuracy_group, []).append(r.combination)
    out = [f"Each group of combinations that change the numbers alike is trained at the baseline's seeds (same "
           f"initialisation and data order); its change is the mean paired difference over those seeds, with a "
           f"95% t interval from the seed-to-seed spread (pooled over the groups) plus the paired binomial error of "
           f"the shared test set. **ok**: the interval is above -{tolerance:g} points; **below**: under it (never "
           f"raced or recommended); **uncertain**: it straddles it (raced; said so if recommended). Groups still "
           f"uncertain after two seeds got more (the parity race). A group whose every combination screening found "
           f"slower than the baseline does not decide the answer: it is not trained at all (seeds 0, not raced or "
           f"recommended), or, where its first seed was trained in screening (`--search optuna`), keeps that one; "
           f"the seed-to-seed spread's {parity.NOISE_DF} degrees of freedom come first from a seed more of the "
           f"fastest groups trained anyway, then from the fastest slower groups.", "",
           "| accuracy group | change, points [95% CI] | seeds | verdict | combinations |", "|---|---|---:|---|---:|"]
    for g, p in sorted(groups.items(), key=lambda gp: -gp[1].change):
        if g == BASELINE:
            continue
        out.append(f"| {g} | {points(p.change, p.low, p.high)} | {p.seeds} | {p.verdict} | "
                   f"{len(members.get(g, []))} |")
    measured = {r.accuracy_group for r in records if r.complete and not r.accuracy_note}
    untrained = sorted(g for g in measured - set(groups) if g and g != BASELINE)
    failed = {m.accuracy_group for r in records for m in r.measurements
              if m.phase == protocol.PARITY and not m.complete}
    out += [f"| {g} | not trained: {'its training failed' if g in failed else 'slower than the baseline in screening'}"
            f" | 0 | | {len(members[g])} |" for g in untrained]
    return out + [""]


def equivalence_lines(speedups: list[Speedup]) -> list[str]:
    """For every combination whose interval includes x1.00: how small an effect its data rule out."""
    lines = [f"- {s.record.combination}: within ±{100 * w:.0f}% of no effect"
             for s in speedups if s.record.combination != BASELINE and s.log and not s.log.distinguishable
             and (w := within(s.estimate)) is not None]
    if not lines:
        return []
    return ["Combinations the data cannot tell from the baseline, and the largest effect each one's two one-sided "
            "tests (the 90% interval) leave open:", "", *lines, ""]


def spreads_warning(measurements: list[protocol.Measurement]) -> tuple[float | None, list[str]]:
    """Levene's test on the raced combinations' paired differences from their blocks' baselines."""
    diffs: dict[Any, list[float]] = {}
    base: dict[int, list[float]] = {}
    for m in measurements:
        if m.phase == protocol.RACE and m.combination == BASELINE:
            base.setdefault(m.block, []).append(m.log_throughput)
    for m in measurements:
        if m.phase == protocol.RACE and m.combination != BASELINE and m.block in base:
            diffs.setdefault(m.combination, []).append(m.log_throughput - sum(base[m.block]) / len(base[m.block]))
    p = variance.spreads_differ(diffs)
    if p is None or p >= variance.SPREADS_ALPHA:
        return p, []
    return p, [f"**The raced combinations are not equally noisy** (Levene's test, p = {p:.3f}): each interval uses "
               "its own spread where that is wider than the variance model's, and screened combinations take the "
               "model's variance for their techniques.", ""]


def _steps_text(steps: float | None) -> str:
    return f"{steps:,.0f}" if steps is not None else "never"


def break_even_rows(breaks: list[BreakEven]) -> list[str]:
    """The break-even table: each compiled combination's one-off cost, saving per step and break-even, with the
    break-even's 95% interval from the speed-up over its eager counterpart."""
    out = ["", "Break-even's interval comes from the intervals of the speed-up over the eager counterpart and of the "
           "eager step time (the one-off cost as measured): \"never\" at its upper end means the data cannot rule "
           "out that the technique is no faster per step.", "",
           "| combination | technique | one-off cost s | saved per step ms | break-even steps [95% CI] | "
           "budget time s (vs without) |", "|---|---|---:|---:|---:|---|"]
    for b in sorted(breaks, key=lambda b: (b.technique, b.record.combination)):
        steps = _steps_text(b.steps) if b.steps is not None else "never (slower per step)"
        if b.steps_interval:
            steps += f" [{_steps_text(b.steps_interval[0])}, {_steps_text(b.steps_interval[1])}]"
        out.append(f"| {b.record.combination} | {b.technique} | {b.extra_s:.2f} | {1000 * b.saving_per_step_s:.2f} "
                   f"| {steps} | {b.budget_s:.1f} vs {b.eager_budget_s:.1f} "
                   f"({'measured' if b.measured else 'estimated'}) |")
    return out


def pareto_lines(front: list[Comparison], unit: str) -> list[str]:
    """The Pareto front's members, each with its speed-up's and its accuracy change's interval."""
    out = ["Each member's place rests on two estimates; where its intervals overlap a neighbour's on both axes, "
           "another run may order them differently.", ""]
    for c in front:
        p = c.parity
        change = ("the baseline" if c.is_baseline else f"{points(p.change, p.low, p.high)} points, {p.verdict}"
                  if p else "no parity verdict")
        out.append(f"- {c.combination}: {c.throughput:.0f} {unit}/s, {_speedup_factor(c.speedup)}; "
                   f"{c.record.accuracy:.2f}% ({change})")
    return out + [""]


def time_to_target_lines(found: list[TimeToTarget], study: Study) -> list[str]:
    """Time to the study's target, per accuracy group, as a mean over its seeds with a 95% t interval."""
    target = (f"test accuracy {study.budget.target_accuracy:g}%" if study.budget.target_accuracy is not None
              else f"held-out loss {study.budget.target_loss:g}")
    out = ["## Time to the target", ""]
    if not found:
        return out + [f"No trial that trained for accuracy recorded its time to {target}.", ""]
    out += [f"Training time until {target} was first reached (first step and evaluation excluded; e2e: from model "
            "preparation, compilation included, cold as a fresh start pays it: a training that started from its "
            "combination's warm compile cache counts the cold measurement's one-off cost instead of its own), "
            "averaged over the group's training seeds, with a 95% t interval from their spread (only where every "
            "seed, two or more, reached it).", "",
            "| accuracy group | seeds reached | to target s [95% CI] | e2e s [95% CI] |", "|---|---:|---:|---:|"]

    def cell(t: TimeToTarget, e2e: bool) -> str:
        xs = [x for x in (t.e2e_seconds if e2e else t.seconds) if x is not None]
        if not xs:
            return "not reached"
        i = t.interval(e2e)
        return f"{np.mean(xs):.1f}" + (f" [{i.low:.1f}, {i.high:.1f}]" if i else " (no interval)")

    out += [f"| {t.group} | {t.reached} of {len(t.seconds)} | {cell(t, False)} | {cell(t, True)} |" for t in found]
    return out + [""]
