"""The whole table: once the answer is done, every accuracy group it left untrained trains once, at the run's own
seed (`finalists.table`, `Planner.plan`: phase `TABLE`), and the answer never reads those trainings. The study is
test_deferred_accuracy.py's: screening only, its final set screening's leader ("fast"), two seeds; the answer trains
the baseline's group, "fast"'s and three slow ones for the spread, so "slow1" and "slow0" are the table's."""
from __future__ import annotations

from dataclasses import replace

from test_deferred_accuracy import GROUPS, _parity, _planner, _screened, _trained

from ablate.config.choices import BASELINE
from ablate.render import answer
from ablate.stats import speedups
from ablate.stats.answer import comparison, verdicts
from ablate.stats.protocol import TABLE, ProtocolSettings
from ablate.stats.race import finalists
from ablate.store.records import Record, combine

ANSWERS = [BASELINE, "fast", "slow4", "slow3", "slow2"]  # the answer's groups, as it trains them
TOLERANCE = 0.5


def _answered() -> list[Record]:
    """Screening, then the answer's trainings at both seeds: the answer is done."""
    return _screened() + [_trained(100 * (s + 1) + i, g, s, 90.0 + s / 2 - 0.1 * i)
                          for s in range(2) for i, g in enumerate(ANSWERS)]


def _table(number: int, group: str, accuracy: float) -> Record:
    """A table training of the group's trainer (the combination named after it), as stored."""
    return replace(_trained(number, group, 0, accuracy), phase=TABLE)


def _answer(stored: list[Record], protocol: ProtocolSettings) -> tuple[object, ...]:
    """What the answer says: the final set and its headline's tests, the recommendation, its speed-up and interval,
    and the verdicts of the groups the answer trained."""
    found = finalists.final(stored, TOLERANCE, protocol)
    rec = verdicts.recommendation(stored, TOLERANCE, protocol)
    assert rec is not None
    groups = verdicts.parity_by_group(stored, TOLERANCE)
    trained = finalists.accuracies(stored, without=TABLE)
    return (found.members, found.eligible, found.round, dict(found.tested), found.parity_step, found.next_block,
            rec.leader.number, rec.pick.number, rec.speedup, rec.parity, rec.members, rec.equivalence,
            {g: groups[g] for g in trained})


def test_the_table_pass_follows_the_answer_and_trains_every_other_group_once():
    stored = _screened()
    assert all(p.slot.phase == "parity" for p in _parity(_planner(quick=False), combine(stored)))  # no table yet
    stored = _answered()
    planned = _parity(_planner(quick=False), combine(stored))
    # Fastest first ("slow1" at x0.21, "slow0" at x0.20), at the first seed's block, after every place parity's
    # slots there can take (one per group with a trainer), so no slot is one of parity's (`ablate.store.claim`).
    assert [(dict(p.slot.combination)["g"], p.slot.block, p.slot.phase, p.seed_index) for p in planned] == \
        [("slow1", -1, TABLE, 0), ("slow0", -1, TABLE, 0)]
    assert [p.slot.position for p in planned] == [len(GROUPS) + 5, len(GROUPS) + 6]
    stored += [_table(300, "slow1", 89.0), _table(301, "slow0", 90.2)]
    assert _parity(_planner(quick=False), combine(stored)) == []
    assert {g for g, seeds in finalists.accuracies(combine(stored)).items() if 0 in seeds} == set(GROUPS)


def test_the_groups_left_to_train_are_named_by_their_trainers_for_the_cost_estimate():
    """`Planner.to_train`: what the estimate counts and prices for the table pass before it is queued - each group
    whose first seed has not been trained, by the combination that will train it; none where no table pass runs."""
    planner = _planner(quick=False)
    assert planner.to_train(combine(_screened())) == GROUPS  # each group's trainer is named after it here
    assert planner.to_train(combine(_answered())) == ["slow0", "slow1"]
    assert planner.to_train(combine(_answered() + [_table(300, "slow1", 89.0)])) == ["slow0"]
    assert _planner(quick=True).to_train(combine(_answered())) is None


def test_where_screening_trains_each_group_as_it_comes_the_first_queued_of_each_untrained_group_trains():
    planner = _planner(quick=False)
    planner.defer_accuracy = False  # the single pass, TPE: no table pass
    levels = [tuple(sorted(p.slot.combination)) for p in planner.screening() if planner.runnable(p.slot.combination)]
    queued = [planner.study.combination(dict(lv)).label for lv in levels]
    group = {planner.study.combination(dict(lv)).label: planner.accuracy_group(planner.options_of(lv)) for lv in levels}
    first = list({group[c]: c for c in reversed(queued)}.values())  # each group's first in the queue
    named = planner.to_train([], queued)
    assert named is not None and sorted(named) == sorted(first) and len(named) == len(set(group.values())) > 1
    assert planner.to_train([], queued[::-1]) != named  # the order decides which member trains
    # A failed training leaves its group untrained: the group's next member in the queue trains it. A completed one
    # takes its group off the list.
    failing = next(c for c in named if sum(group[q] == group[c] for q in queued) > 1)
    done = next(c for c in named if group[c] != group[failing])
    then = next(c for c in queued if group[c] == group[failing] and c != failing)
    stored = [Record(n, c, dict(lv), state, phase="screen", accuracy_trained=state == "complete",
                     accuracy_group=group[c], metrics={"test_accuracy": 90.0} if state == "complete" else {})
              for n, (c, lv, state) in enumerate([(failing, levels[queued.index(failing)], "failed"),
                                                  (done, levels[queued.index(done)], "complete")])]
    rest = [c for c in queued if c not in (failing, done)]
    after = planner.to_train(stored, rest)
    assert after is not None and then in after and group[done] not in {group[c] for c in after}
    assert len(after) == len(named) - 1


def test_quick_trains_only_what_the_answer_needs_and_says_so():
    stored = combine(_answered())
    assert _parity(_planner(quick=True), stored) == []
    rows = {c.combination: c.unmeasured for c in comparison.compare(stored, TOLERANCE, _planner().protocol)[0].rows}
    assert {c: why for c, why in rows.items() if why} == {"slow0": finalists.NOT_NEEDED, "slow1": finalists.NOT_NEEDED}


def test_the_answer_is_the_same_after_every_prefix_of_the_table():
    """A study stopped after the answer's trainings, or after any of the table's, reports the answer: the table's
    trainings, however far below the tolerance, are never read by it. The planner plans what is left at the places it
    first gave them. (A final set of several members, one of them trained by the table alone: race_first_sim.py.)"""
    stored = _answered()
    protocol = _planner(quick=False).protocol
    before = _answer(combine(stored), protocol)
    first = {dict(p.slot.combination)["g"]: p.slot for p in _parity(_planner(quick=False), combine(stored))}
    for number, group in enumerate(["slow1", "slow0"], start=300):
        stored.append(_table(number, group, 80.0))  # 10 points below the baseline: out, were it read
        assert _answer(combine(stored), protocol) == before
        left = _parity(_planner(quick=False), combine(stored))
        assert all(first[dict(p.slot.combination)["g"]] == p.slot for p in left)
    assert verdicts.parity_by_group(combine(stored), TOLERANCE)["slow1"].below  # the report's verdicts read them


def test_a_table_training_is_unpaired_lends_its_accuracy_and_is_judged_once_on_the_pooled_spread():
    stored = _answered() + [_table(300, "slow1", 89.0), _table(301, "slow0", 90.2)]
    combined = {r.combination: r for r in combine(stored)}
    assert speedups.protocol_measurements(list(combined.values())) == \
        speedups.protocol_measurements(combine(_answered()))  # its windows pair with no baseline
    assert (combined["slow1"].accuracy, combined["slow1"].accuracy_from) == (89.0, 300)
    groups = verdicts.parity_by_group(list(combined.values()), TOLERANCE)
    one = groups["slow1"]
    assert one.seeds == 1 and one.df == groups["fast"].df and one.widened == 1.0  # one seed: the pooled spread
    assert groups["fast"] == verdicts.parity_by_group(combine(_answered()), TOLERANCE)["fast"]
    compared = comparison.compare(list(combined.values()), TOLERANCE)[0]
    lines = answer.parity_lines(compared.groups, list(combined.values()), TOLERANCE, compared.untrained)
    assert any(line.startswith("| slow1 |") and f"| 1 | pooled ({answer.TRAINED_ONCE}) |" in line for line in lines)
    assert not any(c.unmeasured for c in compared.rows) and not compared.untrained


def test_a_table_training_does_not_enter_the_answers_verdicts():
    """Even stored before the answer's own trainings (as no study stores it), a table training of the leader's group
    far below the tolerance leaves the parity race and the final set as they were."""
    screened = combine(_screened())
    trained = combine(_screened() + [_table(99, "fast", 50.0)])
    protocol = _planner(quick=False).protocol
    assert finalists.final(trained, TOLERANCE, protocol) == finalists.final(screened, TOLERANCE, protocol)
    assert finalists.final(trained, TOLERANCE, protocol).parity_step == (0, ANSWERS)


def test_rows_say_why_they_have_no_accuracy_yet_and_a_failed_training_is_not_repeated():
    stored = _answered()
    rows = {c.combination: c.unmeasured for c in comparison.compare(combine(stored), TOLERANCE)[0].rows}
    assert {c: why for c, why in rows.items() if why} == {"slow0": finalists.NOT_YET, "slow1": finalists.NOT_YET}
    stored += [_table(300, "slow1", 89.0),
               Record(301, "slow0", {"g": "slow0"}, "failed", block=-1, phase=TABLE, accuracy_group="slow0",
                      reason="out of memory")]
    assert _parity(_planner(quick=False), combine(stored)) == []
    rows = {c.combination: c.unmeasured for c in comparison.compare(combine(stored), TOLERANCE)[0].rows}
    assert {c: why for c, why in rows.items() if why} == {"slow0": finalists.TRAINING_FAILED}


def test_nothing_is_trained_for_the_table_where_accuracy_waits_for_nothing():
    """Where screening trained each group (TPE, the single pass: `defer_accuracy` off), the planner plans no table."""
    planner = _planner(quick=False)
    planner.defer_accuracy = False
    assert _parity(planner, combine(_answered())) == []
