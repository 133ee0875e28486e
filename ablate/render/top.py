"""The report's first screen: what to use, how much faster, whether accuracy is safe, how sure, and what the study
cost, in that order and in plain words; the race's detail and the method follow it (`ablate.render.report`)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ablate.config.choices import BASELINE
from ablate.render.answer import SAME_GROUP
from ablate.stats import parity
from ablate.stats.answer.verdicts import Recommendation
from ablate.stats.speedups import Speedup
from ablate.words import count, factor, percent

TITLE = "The answer"


def section(rec: Recommendation | None, speedup_of: Mapping[str, Speedup], compose: tuple[str, ...] | None,
            cost: Mapping[str, Any] | None, why_none: str, unmeasured: str | None = None) -> list[str]:
    """The answer as the report opens with it: a bold line, the compose lines, then four short answers.
    `unmeasured`: why the study measures no accuracy at all (stand-in data's `accuracy_note`), where so."""
    out = [f"## {TITLE}", ""]
    if rec is None or compose is None:
        return out + [f"**No stack to recommend**: {why_none}.", "", *_cost(cost)]
    pick = rec.pick.combination
    said = ("**Keep your loop as it is**: no stack was shown faster than it on this machine." if pick == BASELINE
            else f"**Use {pick}.**")
    out += [said, "", "```python", *compose, "```", ""]  # the baseline's too: the terminal prints it as well
    s = speedup_of.get(pick)
    return out + [f"- **How much faster:** {_faster(pick, s)}",
                  f"- **Is accuracy safe?** {_accuracy(rec, unmeasured)}",
                  f"- **How sure:** {_sure(rec, s, speedup_of.get(rec.leader.combination))}",
                  *_cost(cost, item=True), ""]


def _faster(pick: str, s: Speedup | None) -> str:
    if pick == BASELINE:
        return "x1.00: it is the baseline every speed-up is measured against."
    if s is None:
        return "not measured against the baseline."
    i = s.interval
    if i is None:
        return f"{factor(s.point)} the baseline's throughput (one block, so no range)."
    return f"{factor(i.point)} the baseline's throughput (95% range x{i.low:.2f} to x{i.high:.2f})."


def _accuracy(rec: Recommendation, unmeasured: str | None) -> str:
    """Yes, not shown, or no, with the accuracy change and its interval in points (`answer.accuracy_words`' facts)."""
    why = unmeasured or rec.accuracy_unmeasured
    if rec.pick.combination == BASELINE:
        return f"yes: it is your loop as it is{f'; this study measured no accuracy ({why})' if why else ''}."
    if why or rec.parity is None:
        return f"not measured: the answer is on speed alone ({why or 'no accuracy training'})."
    if rec.trains_as_baseline:
        return f"yes: it trains to the same numbers as your loop, so its accuracy is your loop's ({SAME_GROUP})."
    p = rec.parity
    change = f"{p.change:+.2f} points [{p.low:+.2f}, {p.high:+.2f}] against the baseline"
    if p.verdict == parity.OK:
        return f"yes: {change}, within the {p.tolerance:g}-point tolerance."
    if p.verdict == parity.UNCERTAIN:
        return (f"not shown: {change} reaches past the {p.tolerance:g}-point tolerance; "
                "more training seeds would decide it.")
    return f"no ({p.label}): {change}."


def _sure(rec: Recommendation, s: Speedup | None, leader: Speedup | None) -> str:
    """Whether the range clears x1.00, and which stacks the race could not tell apart from the answer. `leader`: the
    race leader's speed-up, said where the loop stands in for it (`Recommendation.unconfirmed`)."""
    said = []
    i = s.interval if s is not None else None
    if rec.pick.combination != BASELINE and s is not None and i is not None:
        blocks = count(s.estimate.blocks, "block")
        unseen = " its choice never saw" if rec.confirmed else ""
        said.append(f"faster than the baseline in {blocks}{unseen}: the whole range is above x1.00." if i.low > 1
                    else f"not shown faster than the baseline: the range ({blocks}{unseen}) reaches x1.00.")
    if rec.unconfirmed:
        said.append(f"The race's leader, {rec.leader.combination}, read {_faster(rec.leader.combination, leader)[:-1]}"
                    " on blocks its choice never saw: no faster than your loop.")
    elif rec.pick is not rec.leader:
        said.append(f"It stands in for the race's leader, {rec.leader.combination}: shown within "
                    f"{percent(rec.margin)} of its speed and simpler.")
    others = [m.combination for m in rec.members if m is not rec.pick and m is not rec.leader]
    if others:
        # Not told apart is not shown as fast: with few blocks the race separates little, and a stack this study
        # shows far slower (the baseline, beside a range above x1.00) can be among them.
        said.append(f"The race could not tell it apart from {', '.join(others)}: not shown slower, and not shown "
                    "as fast.")
    elif len(rec.members) == 1:
        said.append("The race told it apart from every other stack it raced.")
    return " ".join(said) or "one measurement block; no range."


def _cost(cost: Mapping[str, Any] | None, item: bool = False) -> list[str]:
    """What the study spent: its measurements, accuracy trainings and wall time (summary.json's `cost`)."""
    if not cost or not cost.get("actual"):
        return []
    a = cost["actual"]
    spent = (f"{count(a['measurements'], 'measurement')} and {count(a['accuracy_trainings'], 'accuracy training')} "
             f"in {_minutes(a['wall_s'])}" + (f", over {count(a['sessions'], 'session')}" if a["sessions"] > 1 else "")
             + ".")
    return [f"- **What it cost:** {spent}"] if item else [f"What it cost: {spent}", ""]


def _minutes(seconds: float) -> str:
    if seconds < 90:
        return count(round(seconds), "second")
    if seconds < 90 * 60:
        return count(round(seconds / 60), "minute")
    return f"{seconds / 3600:.1f} hours"
