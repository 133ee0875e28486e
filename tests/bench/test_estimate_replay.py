"""The time-left estimate replayed on a stored study (benchmarks.estimate_replay): at each phase's beginning, the
measurements finished by then and the phase's own run queued, priced by the kinds' means and by own prices."""
from __future__ import annotations

import datetime

import optuna
import pytest

from ablate.run.estimate import Plan, Stage
from ablate.stats.protocol import CONFIRM, PARITY, SCREEN, TABLE
from ablate.store import records
from benchmarks.estimate_replay import Moment, replay

BEGAN = datetime.datetime(2026, 1, 1, 12, 0, 0)


def _record(start_s: float, seconds: float, phase: str, combination: str, throughput: float) -> records.Record:
    trained = phase in (PARITY, TABLE)
    trial = optuna.trial.create_trial(
        state=optuna.trial.TrialState.COMPLETE, values=[throughput, 0.0],
        user_attrs={"block": 0, "phase": phase, "state": "complete", "combination": combination,
                    "accuracy_trained": trained, "metrics": {"throughput": throughput}})
    trial.datetime_start = BEGAN + datetime.timedelta(seconds=start_s)
    trial.datetime_complete = trial.datetime_start + datetime.timedelta(seconds=seconds)
    return records.from_trial(trial)


def test_each_phase_is_priced_as_it_began_and_a_slow_combinations_training_by_its_throughput():
    # bf16 emulated: a sixth of the baseline's throughput, its training about six times the baseline's.
    stored = [_record(0, 10, SCREEN, "baseline", 450), _record(10, 60, SCREEN, "bf16", 75),
              _record(70, 10, SCREEN, "baseline", 450), _record(80, 57, PARITY, "baseline", 450),
              _record(137, 340, TABLE, "bf16", 75)]
    plan = Plan((Stage((SCREEN,), 3, 3), Stage((PARITY,), 1, 1, (1, 1)), Stage((TABLE,), 1, 1, (1, 1))), 1000)
    screen, parity, table = replay(plan, stored)
    assert [m.phase for m in (screen, parity, table)] == [SCREEN, PARITY, TABLE]
    assert screen.by_means is None and screen.took_min == pytest.approx(477 / 60)
    assert table.at_min == pytest.approx(137 / 60) and table.took_min == pytest.approx(340 / 60)
    assert table.by_means == pytest.approx((57 / 60,) * 2)  # the baseline's training: what a training took so far
    own = 60 + (57 - 10) * 450 / 75  # bf16's timed measurement and the baseline's training's work at bf16's rate
    assert table.now == pytest.approx((own / 60,) * 2)
    assert table.width == 1.0 and screen.width is None


class _Planner:
    """The study's planner as the replay asks it: the groups left to train, each named by its trainer."""

    def to_train(self, stored: list[records.Record], queued: list[str]) -> list[str]:
        return sorted({"baseline", "bf16"} - {r.combination for r in stored for m in r.every_measurement
                                              if m.accuracy_trained})


def test_before_the_table_pass_is_queued_its_groups_are_priced_as_the_run_now_does():
    stored = [_record(0, 10, SCREEN, "baseline", 450), _record(10, 60, SCREEN, "bf16", 75),
              _record(70, 10, SCREEN, "baseline", 450), _record(80, 57, PARITY, "baseline", 450),
              _record(137, 10, CONFIRM, "baseline", 450), _record(147, 340, TABLE, "bf16", 75)]
    plan = Plan((Stage((SCREEN,), 3, 3), Stage((PARITY,), 1, 1, (1, 1)), Stage((CONFIRM,), 1, 1),
                 Stage((TABLE,), 0, 1, (0, 1))), 1000)
    confirm = replay(plan, stored, _Planner())[2]
    assert confirm.phase == CONFIRM and confirm.took_min == pytest.approx(350 / 60)
    fast_s = (10 + 60 + 10) / 3  # the confirmation at the mean of the throughput-only, the plan's 0-1 trainings too
    assert confirm.by_means == pytest.approx((fast_s / 60, (fast_s + 57) / 60))
    bf16 = 60 + (57 - 10) * 450 / 75
    assert confirm.now == pytest.approx(((10 + bf16) / 60,) * 2)  # the one group left, at its own throughput


def test_a_range_said_as_under_holds_down_to_nothing_left():
    """The replay judges the range as the progress line words it (`ablate.words.minute_ends`): "under 2 min" holds
    seconds left; "1-2 min" does not."""
    under = Moment(TABLE, 9, 20.0, None, (0.2, 1.4), 0.1)
    assert under.shown == (0, 2) and under.held and under.width == 2.0
    one = Moment(TABLE, 9, 20.0, None, (0.7, 1.6), 0.1)
    assert one.shown == (1, 2) and one.held is False
