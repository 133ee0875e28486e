"""Ctrl-C and SIGTERM reach a grid trial only inside its objective, where Optuna fails the trial cleanly."""
from __future__ import annotations

import os
import signal
import time

import pytest

from ablate.run.interrupts import DeferredInterrupts


def _signal_self(signum: int) -> None:
    os.kill(os.getpid(), signum)
    time.sleep(0.5)  # the handler runs before this ends


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_optuna_opens_or_closes_the_trial_is_raised_after_it(signum):
    signals = DeferredInterrupts()
    reached = []
    with pytest.raises(KeyboardInterrupt):
        with signals.held():
            _signal_self(signum)  # Optuna's ask() or tell(): not interrupted
            reached.append("end of the held block")
    assert reached == ["end of the held block"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handlers restored


def test_a_signal_during_the_objective_is_raised_inside_it():
    signals = DeferredInterrupts()
    reached = []

    def objective(trial):
        _signal_self(signal.SIGTERM)
        reached.append("after the signal")

    with signals.held():
        with pytest.raises(KeyboardInterrupt):
            signals.deliver_in(objective)(None)
    assert reached == []


def test_a_signal_held_before_the_objective_stops_it_before_it_starts():
    signals = DeferredInterrupts()
    started = []
    with signals.held():
        _signal_self(signal.SIGINT)  # during ask(): the trial exists but has no parameters yet
        with pytest.raises(KeyboardInterrupt):
            signals.deliver_in(lambda trial: started.append(trial))(None)
    assert started == []  # raised in the objective, so Optuna fails the trial instead of leaving it RUNNING
