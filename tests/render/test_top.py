"""The report's first screen (`ablate.render.top`): what to use, how much faster, whether accuracy is safe, how sure
and what it cost, in that order, each in words a practitioner can act on."""
from __future__ import annotations

import math

from ablate.config.choices import BASELINE
from ablate.render import answer, top
from ablate.stats import parity
from ablate.stats.answer.verdicts import Recommendation
from ablate.stats.protocol import CONFIRM, Estimate
from ablate.stats.speedups import Speedup
from ablate.store.records import Record

COMPOSE = ("from strategies import AMP, compose", "stack = compose(AMP(dtype='bf16'))")
COST = {"actual": {"wall_s": 1500.0, "sessions": 1, "measurements": 96, "accuracy_trainings": 9}}
PICK = "amp(dtype=bf16)"


def _rec(pick: str = PICK, *others: str, verdict: str = parity.OK, confirmed: bool = True) -> Recommendation:
    records = {c: Record(i, c, {}, "complete") for i, c in enumerate((pick, *others))}
    change = parity.Parity(verdict, -0.1, -0.4, 0.2, 3, 0.1, 8, tolerance=1.0)
    estimate = Estimate(math.log(1.2), 0.03, 6, 3, CONFIRM if confirmed else "race", "paired")
    return Recommendation(leader=records[pick], speedup=Speedup(records[pick], estimate),
                          members=tuple(records.values()), contrasts={}, eliminated=(), pending=(), race=None,
                          parity=change)


def _said(rec: Recommendation | None, cost=COST) -> str:
    speedup_of = {rec.pick.combination: rec.speedup} if rec and rec.speedup else {}
    return "\n".join(top.section(rec, speedup_of, COMPOSE if rec else None, cost, "no baseline"))


def test_the_answer_comes_in_the_order_a_practitioner_asks():
    text = _said(_rec())
    order = ["**Use amp(dtype=bf16).**", "stack = compose(", "**How much faster:**", "**Is accuracy safe?**",
             "**How sure:**", "**What it cost:**"]
    places = [text.index(part) for part in order]
    assert places == sorted(places)


def test_each_answer_says_its_figure_in_words():
    text = _said(_rec())
    assert "x1.20 the baseline's throughput (95% range x1.1" in text
    assert "yes: -0.10 points [-0.40, +0.20] against the baseline, within the 1-point tolerance" in text
    assert "faster than the baseline in 3 blocks its choice never saw: the whole range is above x1.00" in text
    assert "96 measurements and 9 accuracy trainings in 25 minutes." in text


def test_an_uncertain_accuracy_is_not_called_safe():
    text = _said(_rec(verdict=parity.UNCERTAIN))
    assert "**Is accuracy safe?** not shown:" in text and "more training seeds would decide it" in text
    assert "yes:" not in text


def test_the_stacks_the_race_could_not_separate_are_named_without_a_second_interval():
    text = _said(_rec(PICK, "baseline", "num_workers(n=1)"))
    assert "could not tell it apart from baseline, num_workers(n=1)" in text
    # Not told apart is not shown as fast (a 2-block race on an H200 listed the baseline beside a range above x1.00).
    assert "not shown slower, and not shown as fast" in text and "as good a choice" not in text
    assert text.count("[") == 1  # the accuracy change's interval; the speed-up's range is in words


def test_the_baseline_as_the_answer_says_keep_your_loop():
    text = _said(_rec(BASELINE))
    assert "**Keep your loop as it is**" in text and "stack = compose(" in text  # as the terminal prints it
    assert "**Is accuracy safe?** yes: it is your loop as it is." in text


def test_no_recommendation_says_why_and_still_the_cost():
    text = _said(None)
    assert "**No stack to recommend**: no baseline." in text and "What it cost:" in text


def test_a_study_stored_before_its_cost_was_counted_leaves_the_line_out():
    assert "What it cost" not in _said(_rec(), cost=None)


def test_the_report_counts_measured_combinations_apart_from_those_that_could_not_run():
    from ablate.render import report

    states = ["complete"] * 28 + ["skipped"] * 48 + ["failed"]
    records = [Record(i, f"c{i}", {}, s) for i, s in enumerate(states)]
    assert report._counted(records) == "28 combinations measured, 48 skipped, 1 failed"
    assert report._counted(records[:1]) == "1 combination measured"


def test_a_study_without_accuracy_says_so_whichever_stack_wins():
    """Stand-in data: which stack wins depends on the CPU, and the accuracy line names why none was measured."""
    for pick, said in ((PICK, "not measured: the answer is on speed alone (stand-in data)."),
                       (BASELINE, "yes: it is your loop as it is; this study measured no accuracy (stand-in data).")):
        rec = _rec(pick)
        text = "\n".join(top.section(rec, {pick: rec.speedup}, COMPOSE, COST, "no baseline",
                                     unmeasured="stand-in data"))
        assert f"**Is accuracy safe?** {said}" in text


def test_a_pick_in_the_baseline_s_accuracy_group_is_said_to_train_as_the_loop_not_given_a_zero_interval():
    # set_to_none trains to the baseline's numbers: its "+0.00 [+0.00, +0.00]" is the same training, not a measurement.
    pick = Record(0, "set_to_none", {}, "complete", accuracy_group=BASELINE)
    same = parity.Parity(parity.OK, 0.0, 0.0, 0.0, 3, 0.0, math.inf, tolerance=1.0)
    rec = Recommendation(leader=pick, speedup=None, members=(pick,), contrasts={}, eliminated=(), pending=(),
                         race=None, parity=same)
    text = _said(rec)
    assert "**Is accuracy safe?** yes: it trains to the same numbers as your loop" in text
    assert "[+0.00, +0.00]" not in text
    words = answer.accuracy_words(rec) or ""
    assert "[+0.00, +0.00]" not in words and "your loop's own" in words
    assert not _rec().trains_as_baseline  # a pick with its own group keeps its measured change
