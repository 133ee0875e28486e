"""The answer's words beyond the race's section (`ablate.render.race`): the terminal's lines under the compose line,
accuracy parity, the Pareto front, break-even, the time to the target and the machine's load.

"""
from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping, Sequence

from ablate.config.choices import BASELINE
from ablate.config.study import Study
from ablate.render import terminal
from ablate.stats import parity
from ablate.stats.answer.comparison import Comparison, MachineLoad
from ablate.stats.answer.costs import BreakEven, TimeToTarget
from ablate.stats.answer.verdicts import Recommendation
from ablate.stats.protocol import TABLE
from ablate.stats.speedups import Speedup
from ablate.store.records import Record
from ablate.trial import metrics as metric
from ablate.words import count, factor, percent, points
from ablate.workload import evaluation


def speedup_factor(s: Speedup | None) -> str:
    if s is None:
        return "n/a"
    f = s.interval
    return factor(s.point, f.low if f else None, f.high if f else None, no_interval=" (no interval)")


def unraced(c: str, rec: Recommendation, speedup_of: dict[str, Speedup], of: str = "") -> str:
    """A field member never raced: its screening estimate, or where screening measured a fraction and never it,
    the screening model's prediction (`racing.Race.predicted`), said to be one. `of`: what the factor is of (the
    report says it, with where the figure comes from)."""
    e = rec.race.predicted.get(c) if rec.race else None
    if e is None:
        return speedup_factor(speedup_of.get(c)) + (f"{of} (screening)" if of else "")
    bounds = e.interval()
    low, high = (math.exp(bounds[0]), math.exp(bounds[1])) if bounds else (None, None)
    return f"predicted {factor(e.point, low, high)}{of} (model, not measured)"


def left_out(rec: Recommendation) -> str | None:
    """The leader's techniques the headline lacks, with the most leaving them out may cost (its equivalence bound);
    None where the leader headlines."""
    e = rec.equivalence.get(rec.pick.combination)
    if not rec.left_out or e is None:
        return None
    names = " and ".join(rec.left_out)
    return f"left out of the leader's stack: {names}, which may cost up to {percent(e.allowed)} (equivalence bound)"


def margin_warning(rec: Recommendation) -> str | None:
    """Once, where the noise is known: the margin is below what the design's equivalence test can show."""
    design = rec.resolution
    return design.describe() if design and design.below else None


def terminal_lines(rec: Recommendation, speedup_of: dict[str, Speedup]) -> list[str]:
    """What the terminal prints under the compose line, a name per line so that each fits a terminal: the leader
    where a simpler member stands in for it, the other members as alternatives (named, without a second interval
    beside the recommendation's: their contrasts with the leader are the report's), and the members that never
    got a race seat."""
    out = []
    if rec.accuracy_unmeasured:
        out.append("accuracy could not be measured: the answer is on speed alone (see the report)")
    if rec.race is not None and rec.race.by_model:
        out.append("ranked first by a model of every combination's one reading; rows may read higher alone")
    if rec.pick.combination in rec.two_level:
        out.append("its processes ran at two speed levels: the speed-up is their mean (see the report)")
    if rec.pick is not rec.leader:
        e = rec.equivalence[rec.pick.combination]
        out += [f"the race's leader read x{math.exp(e.contrast.diff):.2f} its throughput on blocks its choice never "
                "saw, no faster:" if rec.unconfirmed else
                f"shown within {percent(rec.margin)} of the race's leader (it is at most x{e.bound:.3f} as fast):",
                *(_named(leader, LEVELS_NOTE) if (leader := rec.leader.combination) in rec.two_level else
                  [f"  {leader}"])]
        if (lacks := left_out(rec)) is not None:
            out += _lines(lacks)
    others = [m for m in rec.members if m is not rec.leader and m is not rec.pick]
    if others:  # one comparison, one interval: the alternatives' own intervals are the report's
        out.append("the race could not tell these apart from it (alternatives; their figures in the report):")
        out += [line for m in others for line in (_named(m.combination, LEVELS_NOTE) if m.combination in rec.two_level
                                                  else [f"  {m.combination}"])]
    if rec.not_raced:
        out.append("not raced (no seat; screening's estimate only, not recommended):")
        out += [line for c in rec.not_raced for line in _named(c, unraced(c, rec, speedup_of))]
    return out


TERMINAL = terminal.LINE  # columns a terminal line may take
TWO_LEVELS = ("Its processes ran at two speed levels (its per-block differences from the baseline split in two, "
              "`ablate.stats.race.levels`): the speed-up is the mean of the two, which no single process shows.")
LEVELS_NOTE = "two speed levels"  # beside a member's row: its processes ran at two (`ablate.stats.race.levels`)
INDENT = 4  # the report's summary indents these lines by two, and a name by two more


def _lines(text: str) -> list[str]:
    """A sentence as terminal lines, wrapped at words, the lines after the first indented."""
    return textwrap.wrap(text, TERMINAL - INDENT, subsequent_indent="  ", break_long_words=False,
                         break_on_hyphens=False)


def _named(name: str, value: str) -> list[str]:
    """`  name: value` on one line where it fits the terminal, else the value on a line of its own below."""
    one = f"  {name}: {value}"
    return [one] if len(one) + INDENT - 2 <= TERMINAL else [f"  {name}:", f"    {value}"]


def evaluated(records: list[Record]) -> list[str]:
    """What the accuracy trainings evaluated, as a paragraph (none where they did not record it): how many test
    samples of the split, and the sampling error that leaves in a paired accuracy difference."""
    found = [m.metrics for r in records for m in r.every_measurement if metric.TEST_SPLIT_SAMPLES in m.metrics]
    if not found:
        return []
    most = max(found, key=lambda f: f[metric.TEST_SAMPLES])
    said = evaluation.describe(int(most[metric.TEST_SAMPLES]), int(most[metric.TEST_SPLIT_SAMPLES]),
                               most.get(metric.TEST_SAMPLING_ERROR))
    return [f"{said[0].upper()}{said[1:]}.", ""]


def parity_lines(groups: dict[str, parity.Parity], records: list[Record], tolerance: float,
                 untrained: Mapping[str, str] | None = None, quick: bool = False) -> list[str]:
    """The accuracy parity section: every accuracy group's verdict and interval, and why a group has none
    (`untrained`: `DeviceComparisons.untrained`). `quick`: the study trained accuracy only where it decides the answer
    (`protocol.quick`), not every group."""
    if not groups:
        return ["No accuracy was measured at two groups' shared seeds, so parity could not be judged.", ""]
    members: dict[str, list[str]] = {}
    for r in records:
        if r.accuracy_group:
            members.setdefault(r.accuracy_group, []).append(r.combination)
    out = [*evaluated(records), _parity_method(tolerance, quick), "",
           "| accuracy group | change, points [95% CI] | seeds | spread | verdict | combinations |",
           "|---|---|---:|---|---|---:|"]
    once = {m.accuracy_group for r in records for m in r.every_measurement
            if m.phase == TABLE and m.complete and m.accuracy_trained}
    for g, p in sorted(groups.items(), key=lambda gp: -gp[1].change):
        if g == BASELINE:
            continue
        spread = _spread(p) + (f" ({TRAINED_ONCE})" if g in once and p.seeds == 1 else "")
        out.append(f"| {g} | {points(p.change, p.low, p.high)} | {p.seeds} | {spread} | {p.label} | "
                   f"{len(members.get(g, []))} |")
    measured = {name for r in records if r.complete and not r.accuracy_note and (name := r.accuracy_group)}
    why = untrained or {}  # a group with an accuracy and no verdict shares no seed with the baseline
    out += [f"| {g} | {why.get(g, 'no verdict: no seed shared with the baseline')} | 0 | | | {len(members[g])} |"
            for g in sorted(measured - set(groups) - {BASELINE})]
    return out + [""]


SAME_GROUP = "the baseline's accuracy group"  # a pick whose accuracy is the loop's own training (`trains_as_baseline`)
TRAINED_ONCE = "trained once, after the answer"  # a group the answer did not need: the table pass's one training


def _parity_method(tolerance: float, quick: bool) -> str:
    """How the verdicts were reached, and which groups were trained (all, or under `quick` those that decide)."""
    which = (f"Accuracy is trained last, and only where it decides the answer: the race's leader, a simpler member "
             f"shown as fast as it, and the baseline. Any other group is not trained (seeds 0: accuracy not "
             f"measured, not needed for the answer), or, where its first seed was trained in screening (`--search "
             f"optuna`), keeps that one, judged on the pooled spread; the spread's {parity.NOISE_DF} degrees of "
             f"freedom come first from a seed more of those, then from the next-fastest groups." if quick else
             f"Accuracy is trained last, first where it decides the answer: the race's leader, a simpler member "
             f"shown as fast as it, and the baseline; the spread's {parity.NOISE_DF} degrees of freedom come first "
             f"from a seed more of those, then from the next-fastest groups. Then every other group once, at the "
             f"run's own seed, judged on the pooled spread (*spread*: {TRAINED_ONCE}): the answer never reads those "
             f"trainings, so it is the one it had before them. Where its first seed was trained in screening "
             f"(`--search optuna`), a group keeps that one, judged on the pooled spread.")
    return (f"Each group of combinations that change the numbers alike is trained at the baseline's seeds (same "
            f"initialisation and data order); its change is the mean paired difference over those seeds, with a "
            f"95% t interval from the seed-to-seed spread plus the paired binomial error of the shared test set. The "
            f"spread is pooled over the groups, or a group's own where that is the larger (its own variance over the F "
            f"distribution's {parity.WIDEN_AT:.0%} quantile at its and the others' degrees of freedom: *spread*). "
            f"**ok**: the interval is above -{tolerance:g} points; **below**: under it (never raced or recommended); "
            f"**uncertain**: it straddles it (raced; said so if recommended), but **uncertain, probably below** where "
            f"the change itself is under -{tolerance:g} (never raced or recommended, like below: its best estimate "
            f"loses more than the tolerance). Groups still uncertain after two seeds got more (the parity race), and "
            f"one that can decide the answer is passed ok only on {parity.OK_SEEDS} seeds where the study's `seeds` "
            f"allow. {which}")


def _spread(p: parity.Parity) -> str:
    """Which seed-to-seed variance its interval used."""
    if math.isinf(p.df):
        return "none (one seed each)"
    return f"own: variance x{p.widened:.1f}" if p.widened > 1 else "pooled"


def _steps_text(steps: float | None) -> str:
    return f"{steps:,.0f}" if steps is not None else "never"


def break_even_rows(breaks: Sequence[BreakEven]) -> list[str]:
    """The break-even table: each compiled combination's one-off cost, saving per step and break-even, with the
    break-even's 95% interval from the speed-up over its eager counterpart."""
    out = ["", "Break-even's interval comes from the intervals of the speed-up over the eager counterpart and of the "
           "eager step time (the one-off cost as measured): \"never\" at its upper end means the data cannot rule "
           "out that the technique is no faster per step. A one-off cost marked \"cold in #N\" is measurement N's: "
           "every measurement of the combination started from a compile cache a sibling with the same compiled graph "
           "had filled (ablate/trial/compile_cache.py), and a fresh start compiles cold.", "",
           "| combination | technique | one-off cost s | saved per step ms | break-even steps [95% CI] | "
           "budget time s (vs without) |", "|---|---|---:|---:|---:|---|"]
    for b in sorted(breaks, key=lambda b: (b.technique, b.record.combination)):
        steps = _steps_text(b.steps) if b.steps is not None else "never (slower per step)"
        if b.steps_interval:
            steps += f" [{_steps_text(b.steps_interval[0])}, {_steps_text(b.steps_interval[1])}]"
        borrowed = "" if b.record.one_off_from is None else f" (cold in #{b.record.one_off_from})"
        out.append(f"| {b.record.combination} | {b.technique} | {b.extra_s:.2f}{borrowed} "
                   f"| {1000 * b.saving_per_step_s:.2f} "
                   f"| {steps} | {b.budget_s:.1f} vs {b.eager_budget_s:.1f} "
                   f"({'measured' if b.measured else 'estimated'}) |")
    return out


def pareto_lines(front: list[Comparison], unit: str) -> list[str]:
    """The Pareto front's members, each with its speed-up's and its accuracy change's interval."""
    out = ["Each member's place rests on two estimates; where its intervals overlap a neighbour's on both axes, "
           "another run may order them differently.", ""]
    for c in front:
        p = c.parity
        change = ("the baseline" if c.is_baseline else f"{points(p.change, p.low, p.high)} points, {p.label}"
                  if p else "no parity verdict")
        out.append(f"- {c.combination}: {c.throughput:.0f} {unit}/s, {speedup_factor(c.speedup)}; "
                   f"{c.record.accuracy:.2f}% ({change})")
    return out + [""]


def time_to_target_lines(found: Sequence[TimeToTarget], study: Study) -> list[str]:
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
        if (mean := t.mean(e2e)) is None:
            return "not reached"
        i = t.interval(e2e)
        return f"{mean:.1f}" + (f" [{i.low:.1f}, {i.high:.1f}]" if i else " (no interval)")

    out += [f"| {t.group} | {t.reached} of {len(t.seconds)} | {cell(t, False)} | {cell(t, True)} |" for t in found]
    return out + [""]


def load_lines(load: MachineLoad) -> list[str]:
    """The report's words on the load guard: silent on a quiet run, where nothing was repeated or disturbed."""
    if not load.taken_again and not load.still_disturbed:
        return []
    out = []
    if n := load.taken_again:
        over = "more cores than the limit" if load.limit is None else f"more than {load.limit:g} cores"
        out.append(f"**A busy machine.** {count(n, 'measurement')} {'was' if n == 1 else 'were'} discarded and taken "
                   f"again because other work used {over} on average during their timed windows "
                   "(`protocol.foreign_load_limit`; the machine's CPU time less the trial's own, steal included).")
    if n := load.still_disturbed:
        out.append(f"{count(n, 'measurement')} {'was' if n == 1 else 'were'} kept though still disturbed: the "
                   f"machine stayed busy through the waits for quiet (up to {load.most_foreign_cores:.2f} foreign "
                   "cores; `protocol.remeasure`): their "
                   "`foreign_cores` in the CSV and MLflow say which; measure again on a quieter machine.")
    return [" ".join(out), ""]


def accuracy_words(rec: Recommendation) -> str | None:
    """The recommendation's accuracy verdict as the run's last lines say it: is accuracy safe (None for the
    baseline, which the verdicts are against)."""
    if rec.pick.combination == BASELINE:
        return None
    if rec.accuracy_unmeasured or rec.parity is None:
        return "accuracy not measured"
    if rec.trains_as_baseline:
        return f"accuracy ok: your loop's own, it trains to the same numbers ({SAME_GROUP})"
    p = rec.parity
    change = f"{p.change:+.2f} points [{p.low:+.2f}, {p.high:+.2f}]"
    return {parity.OK: f"accuracy ok: {change}, within the {p.tolerance:g}-point tolerance",
            parity.UNCERTAIN: f"accuracy uncertain: {change} straddles the {p.tolerance:g}-point tolerance"
            }.get(p.verdict, f"accuracy {p.label}: {change}")
