"""Ctrl-C and SIGTERM: the study stops cleanly, and never while Optuna opens or closes a trial."""
from __future__ import annotations

import contextlib
import signal
import threading
from typing import Any, Callable, Iterator

from optuna.trial import Trial


class Interrupted(Exception):
    """The study was stopped by Ctrl-C or SIGTERM; the message says how to resume."""



def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


@contextlib.contextmanager
def sigterm_as_keyboard_interrupt() -> Iterator[None]:
    """SIGTERM (a scheduler's or `kill`'s stop) ends the study as cleanly as Ctrl-C does."""
    if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
        yield
        return
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class DeferredInterrupts:
    """Ctrl-C and SIGTERM held back while Optuna opens or closes a grid trial, and raised inside the trial.

    Raised inside the objective, KeyboardInterrupt makes Optuna fail the trial, which `Recovery.interrupted`
    then queues again. Raised during Optuna's `ask()`, it would leave a RUNNING trial with no parameters
    and no heartbeat, that no worker could tell from a live one for a while (see `Recovery.stale`).
    Signal handlers are the main thread's: elsewhere (tests) this does nothing.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.pending = False
        self.active = False

    def _hold(self, signum: int, frame: Any) -> None:
        self.pending = True

    def _raise_pending(self) -> None:
        if self.pending:
            self.pending = False
            raise KeyboardInterrupt

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {s: signal.signal(s, self._hold) for s in self.SIGNALS}
        self.active = True
        try:
            yield
        finally:
            self.active = False
            for s, handler in previous.items():
                signal.signal(s, handler)
        self._raise_pending()  # one that came while Optuna was closing the trial: between trials now

    def deliver_in(self, objective: Callable[[Trial], Any]) -> Callable[[Trial], Any]:
        """`objective`, with Ctrl-C and SIGTERM raised as KeyboardInterrupt while it runs."""
        def delivered(trial: Trial) -> Any:
            if not self.active:
                return objective(trial)
            for s in self.SIGNALS:
                signal.signal(s, _interrupt)
            try:
                self._raise_pending()
                return objective(trial)
            finally:
                for s in self.SIGNALS:
                    signal.signal(s, self._hold)
        return delivered
