"""The report's answer in words (`ablate.render.answer`): what the recommendation section and the terminal say of the
race's leader, the headline, and the interval beside each decision."""
from __future__ import annotations

import dataclasses
import math

from ablate.config.choices import BASELINE
from ablate.render import answer, race
from ablate.stats import parity, protocol
from ablate.stats.answer.comparison import machine_load
from ablate.stats.answer.verdicts import Recommendation
from ablate.stats.contrasts import Contrast
from ablate.stats.race.equivalence import Equivalence
from ablate.store.records import Record
from ablate.trial import metrics as metric

LONG = "num_workers(n=2) + batch_size(size=128) + set_to_none + amp(dtype=bf16) + channels_last"


def _rec(leader: str, *others: str, contrasts: dict | None = None, equivalence: dict | None = None,
         headline: str | None = None) -> Recommendation:
    records = {c: Record(i, c, {}, "complete") for i, c in enumerate((leader, *others))}
    return Recommendation(leader=records[leader], speedup=None, members=tuple(records.values()),
                          contrasts=contrasts or {}, eliminated=(), pending=(), race=None, parity=None,
                          headline=records[headline] if headline else None, equivalence=equivalence or {})


def _lines(rec: Recommendation) -> str:
    return "\n".join(race.recommendation_lines(rec, {}, 0.5))


def test_a_leader_without_confirmation_blocks_is_said_to_read_high():
    assert "no confirmation blocks ran, so it may read high" in _lines(_rec("compile"))


def test_the_baseline_as_leader_is_not_said_to_read_high():
    # Its x1.00 is the ratio every other estimate is taken against: selection cannot inflate it.
    text = _lines(_rec(BASELINE))
    assert "x1.00 by definition" in text
    assert "may read high" not in text and "0 blocks" not in text


def test_a_member_is_printed_with_the_interval_its_decision_used_and_never_the_pointwise_one():
    # leader/it x1.13, se 0.058 over 6 blocks: the pointwise 95% interval [1.00, 1.27]-ish excludes x1.00, the
    # simultaneous one at the last look's alpha over six combinations does not: "could not tell apart" agrees.
    judged = Contrast("a", math.log(1.13), 0.058, 40, 6, 0.04, alpha=0.02, k=6)
    text = _lines(_rec("a + b", "a", contrasts={"a": judged}))
    low, high = judged.simultaneous()
    assert low < 0 < high and judged.interval()[0] > 0
    shown = f"[{math.exp(-high):.2f}, {math.exp(-low):.2f}]"
    assert shown in text and "simultaneous 98.0% over 6 combinations" in text
    pointwise = judged.interval()
    assert f"[{math.exp(-pointwise[1]):.2f}, {math.exp(-pointwise[0]):.2f}]" not in text


def test_a_contrast_no_look_judged_is_labelled_pointwise():
    text = _lines(_rec("a + b", "a", contrasts={"a": Contrast("a", 0.05, 0.03, 1, 2, 0.3)}))
    assert "pointwise 95%, 2 shared race blocks: too few for a look" in text


def test_a_simpler_member_shown_equivalent_is_recommended_with_the_leader_and_its_bound_named():
    k = Contrast("a", -0.01, 0.005, 40, 3, 0.05)
    e = Equivalence(k, protocol.CONFIRM, 0.05, 0.02, 1.004)
    rec = dataclasses.replace(_rec("a + b", "a", equivalence={"a": e}, headline="a"), margin=0.02)
    assert rec.pick.combination == "a" and rec.leader.combination == "a + b"
    text = _lines(rec)
    assert "**a** is recommended in its place" in text and "at most x1.004" in text and "margin of 2%" in text
    terminal = answer.terminal_lines(rec, {})
    assert terminal[:2] == ["shown within 2% of the race's leader (it is at most x1.004 as fast):", "  a + b"]


def test_terminal_lines_give_each_name_a_line_of_its_own():
    judged = Contrast(LONG, 0.05, 0.03, 40, 6, 0.1, alpha=0.02, k=6)
    rec = _rec("a", LONG, contrasts={LONG: judged})
    lines = answer.terminal_lines(rec, {})
    assert all(len("  " + line) <= 100 for line in lines), lines
    assert f"  {LONG}" in lines and not any("[" in line for line in lines)  # its interval is the report's


def _measured(combination: str, *loads: tuple[float, float]) -> Record:
    """A combination's record whose measurements read these (foreign cores, times taken again)."""
    ms = tuple(Record(i, combination, {}, "complete", metrics={metric.FOREIGN_CORES: cores, metric.REMEASURED: again})
               for i, (cores, again) in enumerate(loads))
    return Record(0, combination, {}, "complete", measurements=ms)


def test_the_report_says_how_many_measurements_the_load_guard_took_again_and_is_silent_on_a_quiet_run():
    busy = [_measured(BASELINE, (0.1, 1.0), (0.05, 0.0)), _measured(LONG, (0.9, 2.0))]
    found = machine_load(busy, 0.25)
    assert found.figures == {"measurements": 3.0, "taken_again": 3.0, "still_disturbed": 1.0,
                             "most_foreign_cores": 0.9}
    text = " ".join(answer.load_lines(found))
    assert "3 measurements were discarded and taken again" in text and "more than 0.25 cores" in text
    assert "1 measurement was kept though still disturbed" in text and "0.90 foreign cores" in text
    assert answer.load_lines(machine_load([_measured(BASELINE, (0.02, 0.0))], 0.25)) == []
    assert machine_load(busy, None).still_disturbed == 0  # no limit: nothing is disturbed
    unread = Record(0, BASELINE, {}, "complete", measurements=(Record(1, BASELINE, {}, "complete"),))
    assert machine_load([unread], 0.25).figures == {}  # not Linux: nothing read, nothing claimed


def test_the_parity_table_says_which_spread_each_interval_used():
    """A group whose own spread widened the pooled variance says so, with the factor; the others used the pooled
    one; one seed each (no spread at all) says that; the interval printed is the one the verdict used. An
    `uncertain` one whose change is past the tolerance says it is probably below."""
    groups = {BASELINE: parity.Parity(parity.OK, 0.0, 0.0, 0.0, 3, 0.0, math.inf, tolerance=0.5),
              "amp": parity.Parity(parity.UNCERTAIN, -0.3, -1.2, 0.6, 3, 0.2, 6, 2.34, tolerance=0.5),
              "compile": parity.Parity(parity.OK, 0.1, -0.2, 0.4, 3, 0.1, 6, tolerance=0.5),
              "once": parity.Parity(parity.OK, 0.0, -0.1, 0.1, 1, 0.05, math.inf, tolerance=0.5),
              "batch": parity.Parity(parity.UNCERTAIN, -0.8, -1.7, 0.1, 3, 0.4, 6, tolerance=0.5)}
    lines = answer.parity_lines(groups, [], 0.5)
    assert "| amp | -0.30 [-1.20, +0.60] | 3 | own: variance x2.3 | uncertain | 0 |" in lines
    assert "| compile | +0.10 [-0.20, +0.40] | 3 | pooled | ok | 0 |" in lines
    assert "| once | +0.00 [-0.10, +0.10] | 1 | none (one seed each) | ok | 0 |" in lines
    assert "| batch | -0.80 [-1.70, +0.10] | 3 | pooled | uncertain, probably below | 0 |" in lines
    assert "probably below" in lines[0] and "never raced or recommended" in lines[0]
    assert "the pooled variance x2.3" in groups["amp"].describe(0.5)
    assert "pooled variance x" not in groups["compile"].describe(0.5)
    assert groups["batch"].describe(0.5).endswith(": uncertain, probably below")


def test_a_look_with_a_small_alpha_never_reads_as_certain():
    # An early look spends a small share of the alpha: its simultaneous interval is wide, never "100.0%".
    judged = Contrast("a", math.log(1.02), 0.058, 40, 3, 0.7, alpha=0.0004, k=6)
    text = _lines(_rec("a + b", "a", contrasts={"a": judged}))
    assert "simultaneous 99.96% over 6 combinations" in text and "100.0%" not in text


def test_a_margin_the_design_computes_reads_to_a_tenth_of_a_point_on_every_surface():
    # The smallest margin a design can show comes from a spread: "4.63477%" claimed digits it does not have.
    k = Contrast("a", -0.01, 0.005, 40, 6, 0.05)
    e = Equivalence(k, protocol.CONFIRM, 0.0463477, 0.02, 1.043)
    rec = dataclasses.replace(_rec("a + b", "a", equivalence={"a": e}, headline="a"), margin=0.0463477)
    said = _lines(rec) + " ".join(answer.terminal_lines(rec, {}))
    assert "4.6%" in said and "4.63" not in said
