"""What a study will cost (ablate.run.estimate): counted from the planner, refined from its measurements' durations."""
from __future__ import annotations

import dataclasses
import math
import statistics
from pathlib import Path

import pytest

from ablate.config import study as studies
from ablate.run import bitwise, estimate, prices
from ablate.run.estimate import Plan, Stage
from ablate.run.prices import Done
from ablate.stats.planner import Planner
from ablate.stats.protocol import CONFIRM, FULL, PARITY, RACE, SCREEN, TABLE

TINY = Path(__file__).resolve().parents[1] / "studies" / "tiny.yaml"


@pytest.fixture
def prices_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """The minutes as the prices sum them, without the spread each end adds (`estimate._spread`)."""
    monkeypatch.setattr(estimate, "SPREAD_Z", 0.0)


def _planner(defer: bool = True, n_trials: int | None = None, **changes) -> Planner:
    study = studies.load(str(TINY), "cpu")
    protocol = dataclasses.replace(study.protocol, **changes)
    return Planner(study, protocol, 7, "cpu", "cpu", n_trials, defer_accuracy=defer)


def test_the_counts_follow_the_plan_of_a_small_study():
    planner = _planner()
    runnable = planner.runnable_combinations()
    others = len(runnable) - 1
    assert others >= 3  # tiny.yaml on a CPU: enough combinations for a race of two contenders
    screening = [p for p in planner.screening() if planner.runnable(p.slot.combination)]
    found = estimate.plan(planner, "grid")
    by_phase = {s.name: (s.low, s.high) for s in found.stages}
    # tiny.yaml: blocks of 2 with their 2 baselines, 1 race block of 2 contenders (no extra blocks after a race
    # that short), 1 confirmation block, 2 seeds.
    assert by_phase[SCREEN] == (len(screening), len(screening))
    assert by_phase[RACE] == (2, 3)  # the leader and the baseline; or both contenders and the baseline
    # None where the baseline leads; the leader, the simplest and the baseline, twice where the first block reads the
    # leader no faster than the baseline.
    assert by_phase[CONFIRM] == (0, 6)
    groups = len({planner.accuracy_group(o) for o in runnable}) - 1
    assert by_phase[PARITY] == (1, (min(groups, 2 + 4) + 1) * 2)  # the baseline once; up to every group at 2
    # The whole table trains every group once: at its least, parity trains the baseline's group alone and the table
    # every other (tiny.yaml has no group the bitwise check could merge).
    assert not bitwise.candidates(runnable, planner.accuracy_group)
    # At the high end, parity trains its most groups at 2 seeds each and the table the groups besides those.
    most = min(groups, 2 + 4) + 1
    assert found.parity_groups == most and by_phase[TABLE] == (groups, groups + 1 - most)
    # A raced grid trains accuracy after the race only: parity, then the table.
    assert found.trainings == (1 + groups, most * 2 + groups + 1 - most)
    low, high = found.measurements
    assert low == sum(lo for lo, _ in by_phase.values()) and high == sum(hi for _, hi in by_phase.values())
    # A leader put out on its accuracy races again: the race's high end and the new leader's group at its 2 seeds.
    assert found.new_round == 3 + 2
    quick = estimate.plan(_planner(quick=True), "grid")
    assert found.quick == quick.measurements and TABLE not in {s.name for s in quick.stages} and quick.quick is None
    sentence = found.sentence()
    assert sentence == (f"expected cost: about {low} to {high} measurements ({found.trainings[0]} to "
                        f"{found.trainings[1]} accuracy trainings); --quick: about {quick.measurements[0]} to "
                        f"{quick.measurements[1]}; minutes once {estimate.FEW} are timed and every technique has run")
    assert found.caveat() == "a leader put out on its accuracy races again: up to 5 more measurements"
    assert found.stored()["by_phase"][SCREEN] == list(by_phase[SCREEN])


def test_the_whole_tables_ends_are_each_a_path_a_run_can_take():
    """mnist_cnn on a CPU: 12 accuracy groups, 4 with TorchScript, which may train bitwise as their cores. Summed
    stage by stage (parity's least, and the table's as if parity had trained its most) the low end would be 4
    trainings; no run can train fewer than 8."""
    study = studies.load("mnist_cnn", "cpu")
    planner = Planner(study, study.protocol, 7, "cpu", "cpu", defer_accuracy=True)
    runnable = planner.runnable_combinations()
    groups = {planner.accuracy_group(o) for o in runnable}
    merged = bitwise.candidates(runnable, planner.accuracy_group)
    assert (len(groups), len(merged)) == (12, 4)
    found = estimate.plan(planner, "grid")
    assert found.trainings[0] == 12 - 4
    by_phase = {s.name: s for s in found.stages}
    assert found.measurements[0] - by_phase[TABLE].low == sum(s.low for s in found.stages if s.name != TABLE)
    # The high end: parity's most, 9 groups (the final set's 6, 2 more for the spread, the baseline's) at 3 seeds,
    # and the table the 3 groups left. Summed stage by stage it read 27 + 11 = 38: the 8 groups parity trained
    # counted again in the table's own most.
    assert found.parity_groups == 9 and found.trainings[1] == 9 * 3 + 3 == by_phase[PARITY].high + by_phase[TABLE].high


def test_screening_trains_each_group_once_where_accuracy_is_not_deferred_and_parity_the_seeds_after():
    planner = _planner(defer=False, seeds=3)
    found = {s.name: s for s in estimate.plan(planner, "grid").stages}
    groups = len({planner.accuracy_group(o) for o in planner.runnable_combinations()})  # the baseline's among them
    assert found[SCREEN].trainings == (groups, groups)
    assert found[PARITY].low == 0 and found[PARITY].high % 2 == 0  # 2 more seeds a group, the first trained


def test_tpe_screens_its_picks_with_a_baseline_pair_in_each_block_of_them():
    planner = _planner(defer=False, n_trials=5)
    found = estimate.plan(planner, "optuna")
    assert found.stages[0].low == found.stages[0].high == 5 + math.ceil(5 / 2) * planner.protocol.screen_baselines


def test_a_protocol_without_racing_plans_neither_race_nor_confirmation():
    found = estimate.plan(_planner(race_blocks=0), "grid")
    assert [s.name for s in found.stages] == [SCREEN, PARITY]
    assert found.new_round == 0 and "races again" not in found.sentence()


def test_a_study_that_trains_no_accuracy_prices_no_second_round():
    study = studies.load(str(TINY), "cpu")
    study = dataclasses.replace(study, budget=dataclasses.replace(study.budget, throughput_only=True))
    found = estimate.plan(Planner(study, study.protocol, 7, "cpu", "cpu", None, defer_accuracy=True), "grid")
    assert found.new_round == 0 and "races again" not in found.sentence()


PLAN = Plan((Stage((SCREEN, FULL), 10, 10), Stage((RACE,), 6, 20), Stage((PARITY,), 2, 6, (2, 6)),
             Stage((CONFIRM,), 2, 3)), train_samples=1000)


def _done(n: int, phase: str = SCREEN, seconds: float = 60.0, gap: float = 0.0, trained: bool = False,
          first: float = 0.0) -> list[Done]:
    """`n` measurements of `seconds` each, `gap` apart, each having trained 100 samples in 50 s."""
    return [Done(phase, trained, first + i * (seconds + gap), first + i * (seconds + gap) + seconds, samples=100,
                 train_s=50.0) for i in range(n)]


def _waiting(by_phase: dict[str, int]) -> list[tuple[str, str]]:
    """Queued measurements of combinations never measured: their kind's mean prices them."""
    return [(f"queued {phase} {i}", phase) for phase, n in by_phase.items() for i in range(n)]


def test_before_a_few_are_timed_it_says_measurements_only():
    rest = estimate.left(PLAN, _done(estimate.FEW - 1), _waiting({SCREEN: 10 - estimate.FEW + 1}))
    assert rest.measurements == (10 - estimate.FEW + 1 + 6 + 2 + 2, 10 - estimate.FEW + 1 + 20 + 6 + 3)
    assert rest.minutes is None and rest.short() == "~18-37 more"


def test_no_minutes_while_a_queued_measurement_takes_a_technique_none_has_run():
    """A single pass measured compile last: its first trainings took twice the others', and priced from those it
    read 12 minutes where 17 were left. Minutes wait until every queued technique has run, a failure included."""
    single = Plan((Stage((SCREEN, FULL), 5, 5),), train_samples=1000)
    plan = dataclasses.replace(single, techniques={"baseline": frozenset(), "bf16": frozenset({"amp=bf16"}),
                                                    "compile": frozenset({"graph=compile"})})
    three = [dataclasses.replace(d, combination=c) for d, c in zip(_done(3), ("baseline", "bf16", "baseline"))]
    waiting = [("bf16", SCREEN), ("compile", SCREEN)]
    assert estimate.untimed(plan, three, [c for c, _ in waiting]) == {"graph=compile"}
    rest = estimate.left(plan, three, waiting)
    assert rest.minutes is None and rest.short() == "~2 more"
    failed = dataclasses.replace(_done(1, first=300.0)[0], combination="compile", complete=False)
    assert estimate.left(plan, [*three, failed], waiting).minutes == pytest.approx((2.0, 2.0))
    # Without the techniques (a plan that does not know them) nothing waits.
    assert estimate.left(single, three, waiting).minutes == pytest.approx((2.0, 2.0))


def test_minutes_price_each_kind_by_its_own_durations_and_an_untimed_training_by_its_samples():
    rest = estimate.left(PLAN, _done(3), _waiting({SCREEN: 7}))
    assert rest.measurements == (7 + 6 + 2 + 2, 7 + 20 + 6 + 3) and rest.trainings == (2, 6)
    training_s = 60 + (1000 - 100) * 50 / 100  # a throughput-only one's 60 s, and the 900 samples it did not train
    assert rest.minutes == pytest.approx(((15 * 60 + 2 * training_s) / 60, (30 * 60 + 6 * training_s) / 60))
    assert rest.short() == "~17-36 more (32-81 min)"
    # One training timed: its own duration from then on, not the extrapolation.
    timed = _done(9) + _done(1, PARITY, seconds=600.0, first=9 * 60.0, trained=True)  # back to back
    rest = estimate.left(PLAN, timed, _waiting({PARITY: 1}))
    assert rest.trainings == (1, 5) and rest.measurements == (1 + 2, 5 + 3)
    assert rest.minutes == pytest.approx(((2 * 60 + 1 * 600) / 60, (3 * 60 + 5 * 600) / 60))


def test_the_time_between_measurements_scales_the_minutes():
    back_to_back = estimate.left(PLAN, _done(4), _waiting({SCREEN: 6})).minutes
    spaced = estimate.left(PLAN, _done(4, gap=20.0), _waiting({SCREEN: 6})).minutes
    assert back_to_back and spaced and spaced[0] == pytest.approx(back_to_back[0] * (4 * 60 + 3 * 20) / (4 * 60))
    # A session's own measurements only: a resume days later is not a gap between measurements.
    resumed = _done(2) + _done(2, first=10**6)
    assert estimate.left(PLAN, resumed, _waiting({SCREEN: 6}), since=10**6).minutes == pytest.approx(back_to_back)


def test_a_stage_a_later_one_has_begun_is_over_and_what_is_queued_is_left_at_least():
    timed = _done(10) + _done(4, RACE, first=1000.0) + _done(1, PARITY, first=2000.0, trained=True)
    rest = estimate.left(PLAN, timed, _waiting({PARITY: 1}))
    assert rest.measurements == (1 + 2, 5 + 3)  # the race stopped at 4 of its 6 to 20
    # A new round queued (a race after an accuracy training): the race's plan starts again, at least what is queued.
    assert estimate.left(PLAN, timed, _waiting({PARITY: 1, RACE: 3})).measurements == (6 + 1 + 2, 20 + 5 + 3)
    # ... less the new round's own race measurements, not the first round's.
    again = timed + _done(5, RACE, first=3000.0)
    assert estimate.left(PLAN, again, _waiting({RACE: 2})).measurements == (2 + 1 + 2, 20 - 5 + 5 + 3)
    more = estimate.left(PLAN, _done(10), _waiting({SCREEN: 12}))  # more than planned
    assert more.measurements[0] == 12 + 6 + 2 + 2
    finished = estimate.left(PLAN, timed + _done(2, CONFIRM, first=3000.0) + _done(1, PARITY, trained=True), [])
    assert finished.measurements == (0, 1) and estimate.Left((0, 0), (0, 0)).short() == ""


@pytest.mark.usefixtures("prices_alone")
def test_a_queued_measurement_of_a_measured_combination_is_priced_by_its_own_duration_and_throughput():
    """A combination at a sixth of the baseline's throughput (bf16 emulated on a CPU) takes six times as long to
    train: priced at the mean of the trainings done (the baseline's), the table pass read 3-10 minutes and took 36."""
    def one(combination: str, seconds: float, rate: float, phase: str = SCREEN, first: float = 0.0) -> Done:
        return Done(phase, phase == PARITY, first, first + seconds, combination=combination, rate=rate)

    timed = [one("baseline", 10.0, 450.0), one("bf16", 60.0, 75.0, first=10.0), one("batch", 9.0, 500.0, first=70.0),
             one("baseline", 57.0, 450.0, PARITY, first=79.0)]
    table = Plan((Stage((SCREEN, FULL), 3, 3), Stage((RACE,), 2, 2), Stage((PARITY,), 1, 1, (1, 1)),
                  Stage((TABLE,), 2, 2, (2, 2))), 1000)
    by_mean = estimate.left(table, timed, _waiting({TABLE: 2}))
    own = estimate.left(table, timed, [("bf16", TABLE), ("batch", TABLE)])
    assert by_mean.minutes == pytest.approx((2 * 57 / 60,) * 2)
    added = (57.0 - 10.0) * 450.0  # the baseline's training beyond its timed measurement, in samples' worth
    expected = (60.0 + added / 75.0) + (9.0 + added / 500.0)
    assert own.minutes == pytest.approx((expected / 60,) * 2)
    # A new round of the race: a combination measured before at what it took, one never measured at the mean. The
    # trainings to come, not named, at what the queued would train on average: bf16's own, "new"'s at the mean.
    again = estimate.left(table, timed, [("bf16", RACE), ("new", RACE)])
    fast_s = (10.0 + 60.0 + 9.0) / 3
    each = ((60.0 + added / 75.0) + 57.0) / 2
    assert again.minutes == pytest.approx(((60.0 + fast_s + 2 * each) / 60,) * 2)


def _one(combination: str, seconds: float, rate: float, phase: str = SCREEN, first: float = 0.0) -> Done:
    return Done(phase, phase in (PARITY, TABLE), first, first + seconds, combination=combination, rate=rate)


# Screened: the baseline, batch (fast) and bf16 (a sixth of the baseline's throughput); the baseline trained in parity.
SCREENED = [_one("baseline", 10.0, 450.0), _one("bf16", 60.0, 75.0, first=10.0), _one("batch", 9.0, 500.0, first=70.0),
            _one("baseline", 57.0, 450.0, PARITY, first=79.0)]
WHOLE = Plan((Stage((SCREEN, FULL), 3, 3), Stage((RACE,), 2, 2), Stage((PARITY,), 1, 3, (1, 3)),
              Stage((CONFIRM,), 0, 3), Stage((TABLE,), 0, 2, (0, 2))), 1000)
ADDED = (57.0 - 10.0) * 450.0  # the baseline's training beyond its timed measurement, in samples' worth


@pytest.mark.usefixtures("prices_alone")
def test_once_parity_is_over_the_table_is_each_group_left_priced_by_its_trainers_throughput():
    """As confirmation begins, the table pass is not queued yet, but which groups it will train is known: priced at
    the mean of the trainings done (fp32), six bf16 trainings read 3-12 minutes and took 37."""
    confirming = estimate.left(WHOLE, SCREENED, [("baseline", CONFIRM)], to_train=["bf16", "batch"])
    assert confirming.measurements == (1 + 2, 3 + 2) and confirming.trainings == (2, 2)
    trainings = (60.0 + ADDED / 75.0) + (9.0 + ADDED / 500.0)
    fast_s = (10.0 + 60.0 + 9.0) / 3  # two confirmation blocks not queued yet, at the mean
    assert confirming.minutes == pytest.approx(((10.0 + trainings) / 60, (10.0 + 2 * fast_s + trainings) / 60))
    # Without the groups (a caller that does not know them), the plan's count at the trainings' mean, as before.
    planned = estimate.left(WHOLE, SCREENED, [("baseline", CONFIRM)])
    assert planned.trainings == (0, 2)
    assert planned.minutes == pytest.approx((10.0 / 60, (10.0 + 2 * fast_s + 2 * 57.0) / 60))


def test_while_parity_lasts_it_may_train_some_of_the_groups_left_first():
    screened = SCREENED[:3]  # nothing trained yet: the baseline's group is left too
    groups = ["baseline", "bf16", "batch"]
    racing = estimate.left(WHOLE, screened, [("baseline", RACE), ("bf16", RACE)], to_train=groups)
    # Every group once at least: parity's least (one training, which may be a group's first), the table the rest.
    assert racing.trainings == (3, 3 + 3)
    # Parity begun with one group queued: its low end trains nothing more, so the table trains the other two.
    begun = estimate.left(WHOLE, screened, [("baseline", PARITY)], to_train=groups)
    assert begun.trainings == (1 + 2, 3 + 2)
    # At its high end, parity trains its most groups: here two, the baseline's queued and one of the two left, which
    # the table then does not train.
    most = estimate.left(dataclasses.replace(WHOLE, parity_groups=2), screened, [("baseline", PARITY)],
                         to_train=groups)
    assert most.trainings == (1 + 2, 3 + 1)
    # Screening not over: some group may have no trainer yet, so the plan's count stands.
    screening = estimate.left(WHOLE, screened, [("batch", SCREEN)], to_train=["baseline", "bf16"])
    assert screening.trainings == (1 + 0, 3 + 2)


@pytest.mark.usefixtures("prices_alone")
def test_a_training_before_any_is_timed_is_read_from_its_own_measurement_and_what_is_queued_in_parity_trains():
    """Until a training is timed, a slow combination's training is extrapolated from its own measurement, not from the
    mean of every combination's; and each training queued counts as one, beyond the plan's low end."""
    def screened(combination: str, seconds: float, first: float) -> Done:
        return Done(SCREEN, False, first, first + seconds, samples=100, train_s=seconds / 2, combination=combination)

    timed = [screened("baseline", 10.0, 0.0), screened("bf16", 60.0, 10.0), screened("batch", 9.0, 70.0)]
    own = {c: s + (1000 - 100) * (s / 2) / 100 for c, s in (("baseline", 10.0), ("bf16", 60.0), ("batch", 9.0))}
    queued = [("baseline", PARITY), ("batch", PARITY)]
    rest = estimate.left(WHOLE, timed, queued + [("fresh", RACE)])
    assert rest.trainings[0] == 2  # both queued, though the plan's parity may train as few as one
    fast_s = (10.0 + 60.0 + 9.0) / 3
    low = 2 * fast_s + own["baseline"] + own["batch"]  # the race's planned two, and the two trainings at their own
    assert rest.minutes is not None and rest.minutes[0] == pytest.approx(low / 60)


def test_the_minutes_count_down_while_a_measurement_runs():
    """Worked out as a measurement ends, the minutes are shown less the time since (`Runner._show`, as the running
    measurement's phase changes): a 6-minute training no longer sits beside the same figure from start to end."""
    rest = estimate.Left((5, 8), (1, 2), (10.0, 20.0))
    assert rest.short() == "~5-8 more (10-20 min)"
    assert rest.short(since_s=300) == "~5-8 more (5-15 min)"
    assert rest.short(since_s=3600) == "~5-8 more (under 1 min)"  # an overrun never says nothing is left


def test_under_half_a_minute_at_the_low_end_says_under():
    """"1 min" said with seconds left did not hold (the last progress line of each live run): a low end under half a
    minute reads "under N min", its high end rounded up, so the line still holds what is left."""
    assert estimate.Left((1, 1), (0, 0), (0.3, 2.2)).short() == "~1 more (under 3 min)"
    assert estimate.Left((1, 1), (0, 0), (0.1, 0.2)).short() == "~1 more (under 1 min)"
    assert estimate.Left((1, 1), (0, 0), (0.6, 2.2)).short() == "~1 more (1-2 min)"
    assert estimate.Left((1, 1), (0, 0), (0.6, 2.2)).short(since_s=12) == "~1 more (under 2 min)"


@pytest.mark.usefixtures("prices_alone")
def test_the_race_not_yet_queued_is_priced_at_the_baselines_measurement():
    """The race measures the fastest stacks and the baseline, never the slow ones screening's mean takes in (bf16
    emulated on a CPU): its measurements to come are priced at the baseline's, which runs in each of its blocks."""
    screened = SCREENED[:3]  # the baseline 10 s, bf16 60 s, batch 9 s
    plan = Plan((Stage((SCREEN, FULL), 3, 3), Stage((RACE,), 4, 8)), 1000,
                techniques={"baseline": frozenset(), "bf16": frozenset({"amp=bf16"}),
                            "batch": frozenset({"batch=128"})})
    assert estimate.left(plan, screened).minutes == pytest.approx((4 * 10.0 / 60, 8 * 10.0 / 60))
    by_mean = (10.0 + 60.0 + 9.0) / 3
    assert estimate.left(dataclasses.replace(plan, techniques={}), screened).minutes == pytest.approx(
        (4 * by_mean / 60, 8 * by_mean / 60))
    # Once queued, each is priced by its own combination.
    queued = estimate.left(plan, screened, [("batch", RACE), ("baseline", RACE)])
    assert queued.minutes == pytest.approx(((9.0 + 10.0 + 2 * 10.0) / 60, (9.0 + 10.0 + 6 * 10.0) / 60))


def test_each_end_strays_from_the_prices_by_how_a_combination_measured_again_differs():
    """A count known exactly priced as one figure missed what the rest took as often as not, either way: a
    measurement's duration is not its price. Each end moves out by `SPREAD_Z` standard deviations of its own count's
    sum, read from a combination measured again."""
    timed = [_one("baseline", 10.0, 450.0), _one("batch", 9.0, 500.0, first=10.0),
             _one("baseline", 12.0, 450.0, first=19.0)]
    plan = Plan((Stage((SCREEN, FULL), 5, 5),), 1000)
    with_spread = estimate.left(plan, timed, _waiting({SCREEN: 2}))
    mean = (10.0 + 9.0 + 12.0) / 3
    relative = math.log(12.0 / 10.0) ** 2 / 2  # the variance of the baseline's log durations
    spread = estimate.SPREAD_Z * math.sqrt((2 + 2 ** 2 / 3) * mean ** 2 * relative)
    assert with_spread.minutes == pytest.approx(((2 * mean - spread) / 60, (2 * mean + spread) / 60))
    # Measured again alike, the price is the duration: no spread.
    alike = [*timed[:2], dataclasses.replace(timed[2], ended=timed[2].began + 10.0)]
    assert estimate.left(plan, alike, _waiting({SCREEN: 2})).minutes == pytest.approx((2 * 29 / 3 / 60,) * 2)
    # A training to come takes the throughput-only kind's spread until one is measured again.
    trained = [*timed, _one("baseline", 60.0, 450.0, PARITY, first=31.0)]
    parity = Plan((Stage((SCREEN, FULL), 3, 3), Stage((PARITY,), 1, 1, (1, 1))), 1000)
    wide = estimate.SPREAD_Z * math.sqrt(2 * 60.0 ** 2 * relative)
    assert estimate.left(parity, trained, [("baseline", PARITY)]).minutes == pytest.approx(
        ((60.0 - wide) / 60, (60.0 + wide) / 60))
    # Each end's spread is its own count's: the low end of a range of counts widens less.
    ranged = estimate.left(Plan((Stage((SCREEN, FULL), 3, 3), Stage((RACE,), 1, 4)), 1000), timed).minutes
    low_spread = estimate.SPREAD_Z * math.sqrt((1 + 1 / 3) * mean ** 2 * relative)
    high_spread = estimate.SPREAD_Z * math.sqrt((4 + 4 ** 2 / 3) * mean ** 2 * relative)
    assert ranged == pytest.approx(((mean - low_spread) / 60, (4 * mean + high_spread) / 60))


def test_the_low_end_prices_the_compiles_to_come_warm_the_high_end_as_measured():
    """Inductor's cache keeps a graph for every later process of the run, so a graph's first compile alone pays its
    cold start, many times a warm compile's. A cold compile in the mean of three measurements priced the
    rest of a study at several times what it took; the low end now leaves that excess out, and the high end, which
    a run whose compiles are yet to come cold can reach, keeps it."""
    cold = Done(SCREEN, False, 0.0, 30.0, samples=256, train_s=24.0, combination="compile", first_steps_s=22.0,
                cache_warm=False)
    warm = Done(SCREEN, False, 30.0, 36.0, samples=256, train_s=4.0, combination="compile+batch", first_steps_s=2.0,
                cache_warm=True)
    eager = Done(SCREEN, False, 36.0, 39.0, samples=256, train_s=2.0, combination="baseline")
    plan = Plan((Stage((SCREEN, FULL), 13, 13),), 1000)
    minutes = estimate.left(plan, [cold, warm, eager], _waiting({SCREEN: 10}))
    assert minutes.minutes is not None
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(estimate, "SPREAD_Z", 0.0)
        low, high = estimate.left(plan, [cold, warm, eager], _waiting({SCREEN: 10})).minutes or (0.0, 0.0)
    assert low == pytest.approx(10 * ((30.0 - 20.0) + 6.0 + 3.0) / 3 / 60)  # its excess over a warm compile's 2 s
    assert high == pytest.approx(10 * (30.0 + 6.0 + 3.0) / 3 / 60)
    assert minutes.minutes[0] < low < high < minutes.minutes[1]


def test_the_trainings_spread_is_at_least_how_far_their_prices_missed(monkeypatch: pytest.MonkeyPatch):
    """A table training priced from its trainer's throughput-only measurement can miss by far more than parity's
    seeds of one stack differ: the trainings' spread is at least what
    `prices.missed` reads."""
    timed = [*SCREENED, _one("baseline", 60.0, 450.0, PARITY, first=136.0)]
    plan = Plan((Stage((SCREEN, FULL), 3, 3), Stage((PARITY,), 2, 2, (2, 2)), Stage((TABLE,), 2, 2, (2, 2))), 1000)
    queued = [("baseline", TABLE), ("baseline", TABLE)]
    monkeypatch.setattr(prices, "missed", lambda *_: None)
    low, high = estimate.left(plan, timed, queued).minutes or (0.0, 0.0)
    mean = (57.0 + 60.0) / 2
    relative = math.log(60.0 / 57.0) ** 2 / 2  # the baseline's two trainings: a repeat's spread
    assert (high - low) / 2 == pytest.approx(estimate.SPREAD_Z * math.sqrt((2 + 4 / 2) * mean ** 2 * relative) / 60)
    monkeypatch.setattr(prices, "missed", lambda *_: 0.09)
    wide_low, wide_high = estimate.left(plan, timed, queued).minutes or (0.0, 0.0)
    assert (wide_high - wide_low) / 2 == pytest.approx(
        estimate.SPREAD_Z * math.sqrt((2 + 4 / 2) * mean ** 2 * 0.09) / 60)
    assert wide_low + wide_high == pytest.approx(low + high)  # the same prices, a wider range


def test_with_nothing_measured_again_the_spread_is_how_the_combinations_durations_differ():
    """A single pass measures each combination once: until then, how its combinations' durations differ bounds how
    one differs from its price."""
    timed = [_one("baseline", 10.0, 450.0), _one("batch", 9.0, 500.0, first=10.0), _one("bf16", 12.0, 75.0, first=19.0)]
    single = Plan((Stage((SCREEN, FULL), 4, 4),), 1000)
    logs = [math.log(x) for x in (10.0, 9.0, 12.0)]
    mean = (10.0 + 9.0 + 12.0) / 3
    spread = estimate.SPREAD_Z * math.sqrt((1 + 1 / 3) * mean ** 2 * statistics.variance(logs))
    assert estimate.left(single, timed, _waiting({SCREEN: 1})).minutes == pytest.approx(
        ((mean - spread) / 60, (mean + spread) / 60))


def test_without_the_groups_left_once_parity_has_begun_the_tables_high_end_is_its_own_most():
    """The table's high end is its part of parity's most; a caller that cannot name the groups left (`to_train`
    None) once parity has begun does not know parity's path, so the table may train every group but the
    baseline's."""
    plan = Plan((Stage((SCREEN, FULL), 3, 3), Stage((PARITY,), 1, 27, (1, 27)), Stage((TABLE,), 7, 3, (7, 3))),
                1000, parity_groups=9)
    begun = estimate.left(plan, [*_done(3), *_done(1, PARITY, first=200.0, trained=True)], [("baseline", PARITY)])
    assert begun.measurements == begun.trainings == (1 + 7, 26 + (3 + 9 - 1))
