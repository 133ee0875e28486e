"""A measurement's own price for the cost estimate (ablate.run.prices): what its combination took, a training scaled
by its throughput, and a combination never measured predicted from those that were, each technique a factor."""
from __future__ import annotations

import dataclasses
import math

import pytest

from ablate.run import estimate, prices
from ablate.run.estimate import Plan, Stage
from ablate.run.prices import Done
from ablate.stats.protocol import SCREEN

# Three techniques, each a factor on throughput: bf16 a sixth (emulated on a CPU), batch x1.1, workers x0.9.
FACTOR = {"amp=bf16": 1 / 6, "batch=128": 1.1, "workers=2": 0.9}
TECHNIQUES = {"baseline": frozenset(), "bf16": frozenset({"amp=bf16"}), "batch": frozenset({"batch=128"}),
              "workers": frozenset({"workers=2"}), "batch+workers": frozenset({"batch=128", "workers=2"}),
              "bf16+batch": frozenset({"amp=bf16", "batch=128"}), "bf16+workers": frozenset({"amp=bf16", "workers=2"}),
              "bf16+batch+workers": frozenset({"amp=bf16", "batch=128", "workers=2"})}


def _rate(combination: str) -> float:
    return 450.0 * math.prod(FACTOR[t] for t in TECHNIQUES[combination])


def _measured(combination: str, first: float, training: bool = False) -> Done:
    """A measurement whose time is all throughput: 4,500 samples' worth, or 45,000 for a training."""
    seconds = (45_000 if training else 4_500) / _rate(combination)
    return Done(SCREEN, training, first, first + seconds, combination=combination, rate=_rate(combination))


def test_a_combination_never_measured_is_priced_as_its_techniques_multiply():
    timed = [_measured(c, 100.0 * i) for i, c in enumerate(["baseline", "bf16", "batch", "workers", "batch+workers"])]
    price = prices.own(timed, 1000, TECHNIQUES)
    for unseen in ("bf16+batch", "bf16+batch+workers"):
        assert price(unseen, False) == pytest.approx(4_500 / _rate(unseen))
    # A training never timed, and no training timed anywhere: nothing to scale (the estimate uses its kind's mean).
    assert price("bf16+batch", True) is None
    # One training timed: its whole work, at the combination's throughput.
    price = prices.own([*timed, _measured("batch", 900.0, training=True)], 1000, TECHNIQUES)
    assert price("bf16+batch", True) == pytest.approx(45_000 / _rate("bf16+batch"))


def test_the_fit_waits_for_a_degree_of_freedom_and_for_every_technique_it_needs():
    price = prices.own([_measured(c, 100.0 * i) for i, c in enumerate(["baseline", "bf16", "batch", "workers"])],
                       1000, TECHNIQUES)
    assert price("batch+workers", False) is None  # four measured, four parameters: nothing left to check the fit
    price = prices.own([_measured(c, 100.0 * i) for i, c in enumerate(["baseline", "batch", "workers",
                                                                        "batch+workers", "baseline"])],
                       1000, TECHNIQUES)
    assert price("bf16+batch", False) is None  # bf16 never measured: no factor for it
    assert price("batch+workers", False) == pytest.approx(4_500 / _rate("batch+workers"))  # its own


def test_the_single_pass_prices_the_queued_that_will_train_as_trainings(monkeypatch: pytest.MonkeyPatch):
    """The single pass queues every combination at once and trains the first of each group as it comes: six bf16
    trainings at about 350 s each read as 22 minutes where 56 were left, each priced at the mean of the trainings
    done (fp32) and the rest at a throughput-only measurement's."""
    monkeypatch.setattr(estimate, "SPREAD_Z", 0.0)  # the prices alone (tests/run/test_estimate.py: the spread)
    timed = [_measured(c, 100.0 * i, training=c == "batch")
             for i, c in enumerate(["baseline", "bf16", "batch", "workers", "batch+workers", "bf16+workers"])]
    plan = Plan((Stage((SCREEN,), 8, 8, (2, 2)),), 1000, techniques=TECHNIQUES)
    queued = [("bf16+batch", SCREEN), ("bf16+batch+workers", SCREEN)]
    share = (max(d.ended for d in timed) - timed[0].began) / sum(d.seconds for d in timed)
    named = estimate.left(plan, timed, queued, to_train=["bf16+batch"])
    expected = 45_000 / _rate("bf16+batch") + 4_500 / _rate("bf16+batch+workers")
    assert named.trainings == (1, 1) and named.minutes == pytest.approx((expected * share / 60,) * 2)
    # Not named: one of the two trains, at what the queued would train on average, in place of a throughput-only one.
    unnamed = estimate.left(plan, timed, queued)
    fast_s = sum(d.seconds for d in timed if not d.training) / 5
    trainings = [45_000 / _rate(c) for c, _ in queued]
    mean = 4_500 / _rate("bf16+batch") + 4_500 / _rate("bf16+batch+workers") - fast_s + sum(trainings) / 2
    assert unnamed.minutes == pytest.approx((mean * share / 60,) * 2)


def test_a_trainings_evaluation_is_priced_as_timed_and_only_its_loop_at_the_stacks_throughput():
    """An evaluation need not slow as the training loop does (bf16 emulated on a CPU: its loop about six times the
    baseline's, its evaluation not), so a training beyond its measurement is the loop's work at the stack's
    throughput and the rest as the timed training took it."""
    timed = [Done(SCREEN, False, 0.0, 10.0, train_s=8.0, combination="baseline", rate=450.0),
             Done(SCREEN, True, 10.0, 120.0, train_s=100.0, combination="baseline", rate=450.0),
             Done(SCREEN, False, 120.0, 170.0, train_s=48.0, combination="bf16", rate=75.0)]
    price = prices.own(timed, 1000, TECHNIQUES)
    # Its measurement, 92 s more loop at the baseline's throughput (552 at bf16's), 10 s of evaluation and the rest
    # less the 2 s outside the throughput-only measurement's loop.
    assert price("bf16", True) == pytest.approx(50.0 + 92.0 * 450.0 / 75.0 + 8.0)


def test_a_combination_measured_again_is_priced_without_the_profiling_window_only_its_first_runs():
    """A combination's first measurement profiles after its timed windows (`ablate.run.objective.profiles`); the
    race's and parity's measurements of it do not, so its price again leaves that window out."""
    first = Done(SCREEN, False, 0.0, 12.0, combination="batch", rate=500.0, profiled_s=2.0)
    price = prices.own([first], 1000, TECHNIQUES)
    assert price("batch", False) == pytest.approx(10.0)


def test_a_training_read_from_a_short_measurement_leaves_its_one_off_costs_out():
    """A cold compile's half minute spread over a short measurement's 2,000 samples read a 36,000-sample training as
    ten minutes; at the measurement's steady pace it is under a minute."""
    cold = Done(SCREEN, False, 0.0, 40.0, samples=2_000, train_s=33.0, first_steps_s=30.0)
    assert prices.extrapolated(36_000, cold) == pytest.approx(40.0 + 34_000 * 3.0 / 2_000)
    # Without one-off costs stored (an older record), its whole loop's pace, as before.
    assert prices.extrapolated(36_000, Done(SCREEN, False, 0.0, 40.0, samples=2_000, train_s=33.0)) == (
        pytest.approx(40.0 + 34_000 * 33.0 / 2_000))


def test_a_combination_compiled_cold_is_priced_as_its_graph_cached():
    """Its graph is in the run's cache once compiled, so a combination's next measurement starts warm: priced less its
    first steps' excess over a warm compile's (their mean), or all of its first steps where none was warm yet."""
    cold = Done(SCREEN, False, 0.0, 30.0, samples=256, train_s=25.0, combination="batch", rate=500.0,
                first_steps_s=22.0, cache_warm=False)
    warm = Done(SCREEN, False, 30.0, 37.0, samples=256, train_s=4.0, combination="workers", rate=400.0,
                first_steps_s=2.0, cache_warm=True)
    eager = Done(SCREEN, False, 37.0, 40.0, samples=256, train_s=2.0, combination="baseline", rate=450.0)
    found = prices.warmed([cold, warm, eager])
    assert [d.seconds for d in found] == pytest.approx([10.0, 7.0, 3.0])
    assert found[0].train_s == pytest.approx(5.0) and found[0].first_steps_s == pytest.approx(2.0)
    assert prices.own(found, 1000, TECHNIQUES)("batch", False) == pytest.approx(10.0)
    assert [d.seconds for d in prices.warmed([cold, eager])] == pytest.approx([8.0, 3.0])
    # A compile on a cold cache whose first steps took no longer than a warm one's keeps its time.
    assert prices.warmed([dataclasses.replace(cold, first_steps_s=1.0), warm])[0].seconds == pytest.approx(30.0)


def test_a_trainings_price_read_from_its_measurement_misses_by_what_left_out_its_own_training_shows():
    """A training priced from its combination's throughput-only measurement and what the other trainings added
    missed by a third where a repeat differed by a few percent. `missed`: each trained combination priced without its
    own trainings, the mean square of log(took / price)."""
    timed = [_measured(c, 10.0 * i) for i, c in enumerate(["baseline", "batch", "bf16"])]
    # Trainings of ten times the samples: exactly as the others' added predicts, but one 30% slower.
    trained = [_measured("baseline", 100.0, training=True), _measured("batch", 200.0, training=True)]
    assert prices.missed(timed + trained, 1000, TECHNIQUES) == pytest.approx(0.0, abs=1e-12)
    slow = dataclasses.replace(trained[1], ended=trained[1].began + 1.3 * trained[1].seconds)
    price_without = prices.own(timed + trained[:1], 1000, TECHNIQUES)("batch", True)
    assert price_without == pytest.approx(trained[1].seconds)
    expected = (math.log(1.3) ** 2 + math.log(trained[0].seconds / prices.own(
        timed + [slow], 1000, TECHNIQUES)("baseline", True)) ** 2) / 2
    assert prices.missed(timed + [trained[0], slow], 1000, TECHNIQUES) == pytest.approx(expected)
    # One such combination leaves nothing to price it from: no figure.
    assert prices.missed(timed + trained[:1], 1000, TECHNIQUES) is None


def test_a_price_read_below_zero_is_left_out_of_how_far_prices_missed():
    """What a training adds beyond its measurement's loop, in seconds, may be negative (a short training beside a
    long measurement): a combination priced from it may read below zero, which `missed` leaves out rather than take
    its logarithm. `warmed` never leaves a duration at or below zero."""
    timed = [Done(SCREEN, False, 0.0, 20.0, train_s=2.0, combination="baseline", rate=450.0),
             Done(SCREEN, False, 20.0, 25.0, train_s=2.0, combination="batch", rate=500.0),
             Done(SCREEN, True, 25.0, 26.0, train_s=0.9, combination="baseline", rate=450.0),
             Done(SCREEN, True, 26.0, 27.0, train_s=0.9, combination="batch", rate=500.0)]
    assert prices.own(timed[:3], 1000, TECHNIQUES)("batch", True) < 0
    found = prices.missed(timed, 1000, TECHNIQUES)
    assert found is None or math.isfinite(found)
    cold = Done(SCREEN, False, 0.0, 5.0, first_steps_s=8.0, cache_warm=False)
    assert prices.warmed([cold])[0].seconds == pytest.approx(5.0)
